// ONNX's reductions and indexing ops: the Reduce* family, ArgMax / ArgMin, CumSum, TopK,
// Gather / GatherElements / GatherND, Scatter / ScatterElements / ScatterND, OneHot, Trilu,
// Einsum, and the ops whose output depends on values or is cheapest built on the host
// (NonZero, Range, EyeLike, Det). Tensors are reduced, gathered and scattered on the
// backend; index tensors are read, checked and wrapped on the host first, because the
// primitives take normalized arguments only.
#pragma once

#include "kiln/backend/provided_elementwise.hpp"
#include "kiln/onnx/runtime.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <limits>
#include <map>
#include <numeric>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace kiln::onnx {

namespace reduce_detail {

template <class B> using Prim = typename B::Primitive;
template <class B> using Outs = std::vector<Value<B>>;

inline std::int64_t product(std::span<const std::int64_t> dims) {
  return std::accumulate(dims.begin(), dims.end(), std::int64_t{1}, std::multiplies<>());
}
// The dims [from, to) of s.
inline std::span<const std::int64_t> dims_of(const Shape& s, std::size_t from, std::size_t to) {
  return std::span<const std::int64_t>(s.dims()).subspan(from, to - from);
}
inline std::int64_t product(const Shape& s, std::size_t from, std::size_t to) { return product(dims_of(s, from, to)); }
inline Shape concat(std::initializer_list<std::span<const std::int64_t>> parts) {
  std::vector<std::int64_t> out;
  for (const auto part : parts) out.insert(out.end(), part.begin(), part.end());
  return Shape(std::move(out));
}

// A range over every element of each dim, for slices that narrow one dim.
inline std::vector<ops::SliceRange> whole(const Shape& s) {
  std::vector<ops::SliceRange> ranges;
  for (const std::int64_t d : s) ranges.push_back({0, d, 1});
  return ranges;
}

template <class B> Prim<B> upload_i64(std::vector<std::int64_t> values, Shape shape, const typename B::Device& device) {
  return B::from_data(TensorData::from(values, std::move(shape)), device);
}

// An index input's values, read on the host, each checked to lie in [-size, size) and
// wrapped into [0, size): ONNX counts negative indices from the end, the primitives do not.
template <class B>
std::vector<std::int64_t> wrapped_indices(const Args<B>& a, std::size_t i, std::int64_t size, std::string_view what) {
  KILN_CHECK(a.dtype(i) == DType::i64 || a.dtype(i) == DType::i32, "{} must be int64 or int32, got {} {}", what,
             a.shape(i), a.dtype(i));
  std::vector<std::int64_t> v = a.ints(i);
  for (std::int64_t& x : v) {
    KILN_CHECK(x >= -size && x < size, "{} holds {}, out of range for a dim of size {}", what, x, size);
    if (x < 0) x += size;
  }
  return v;
}

template <class B> void check_same_dtype(const Args<B>& a, std::size_t i, std::size_t j) {
  KILN_CHECK(a.dtype(i) == a.dtype(j), "inputs {} and {} must have one element type, got {} {} and {} {}", i, j,
             a.shape(i), a.dtype(i), a.shape(j), a.dtype(j));
}

// ---------------------------------------------------------------- Reduce*

enum class Reduction { sum, mean, max, min, prod, l1, l2, log_sum, log_sum_exp, sum_square };

// The value of a reduction over no elements: ONNX's identities (the lowest value for max,
// the highest for min, which saturate to the integer types' limits).
inline double empty_value(Reduction r, DType dtype) {
  const double inf = std::numeric_limits<double>::infinity();
  switch (r) {
    case Reduction::prod: return 1;
    case Reduction::mean: return std::numeric_limits<double>::quiet_NaN();
    case Reduction::max: return is_bool(dtype) ? 0 : -inf;
    case Reduction::min: return is_bool(dtype) ? 1 : inf;
    case Reduction::log_sum:
    case Reduction::log_sum_exp: return -inf;
    default: return 0;
  }
}

// x reduced over dims (kept with size 1), x not empty.
template <class B> Prim<B> reduce_over(const Prim<B>& x, Reduction r, std::span<const std::size_t> dims) {
  using ops::ReduceOp;
  auto sum = [&](const Prim<B>& t) { return detail::reduce<B>(t, ReduceOp::sum, dims); };
  switch (r) {
    case Reduction::sum: return sum(x);
    case Reduction::mean: return detail::reduce<B>(x, ReduceOp::mean, dims);
    case Reduction::max: return detail::reduce<B>(x, ReduceOp::max, dims);
    case Reduction::min: return detail::reduce<B>(x, ReduceOp::min, dims);
    case Reduction::prod: return detail::reduce<B>(x, ReduceOp::prod, dims);
    case Reduction::l1: return sum(provided::unary<B, ops::Abs>(x));
    case Reduction::l2: return provided::unary<B, ops::Sqrt>(sum(provided::binary<B, ops::Mul>(x, x)));
    case Reduction::log_sum: return provided::unary<B, ops::Log>(sum(x));
    case Reduction::sum_square: return sum(provided::binary<B, ops::Mul>(x, x));
    case Reduction::log_sum_exp: {
      // log Σ exp(x - m) + m with m the maximum, so that exp cannot overflow; an infinite
      // maximum (all -inf, or a +inf) shifts by 0 instead, which gives ±inf as it should.
      const codegen::Program& finite = detail::program(
          "onnx_finite_or_zero", B::dtype(x), 1, 0,
          [](std::span<const codegen::Expr> in, auto) { return in[0].isInf().select(codegen::Expr(0.0), in[0]); });
      const Prim<B> m = detail::run<B>(finite, {detail::reduce<B>(x, ReduceOp::max, dims)});
      const Prim<B> s = sum(provided::unary<B, ops::Exp>(provided::binary<B, ops::Sub>(x, m)));
      return provided::binary<B, ops::Add>(provided::unary<B, ops::Log>(s), m);
    }
  }
  KILN_FAIL("unknown reduction");
}

// `axes` from the second input (ReduceSum from opset 13, the others from 18) or from the
// attribute (earlier opsets); empty axes reduce every dim, or none with noop_with_empty_axes,
// where the elementwise part still applies (ReduceSumSquare squares), as in ONNX's reference.
template <class B> Kernel<B> reduce_kernel(Reduction r) {
  return [r](const Args<B>& a) -> Outs<B> {
    const Shape s = a.shape(0);
    const DType dtype = a.dtype(0);
    const std::vector<std::int64_t> listed = a.has(1) ? a.ints(1) : a.node.attr_ints("axes");
    const bool keep = a.node.attr_int("keepdims", 1) != 0;
    const bool noop = listed.empty() && a.node.attr_int("noop_with_empty_axes", 0) != 0;
    std::vector<std::size_t> dims = detail::axes(listed, s.rank());
    if (listed.empty() && !noop)
      for (std::size_t d = 0; d < s.rank(); ++d) dims.push_back(d);
    KILN_CHECK(!is_bool(dtype) || r == Reduction::max || r == Reduction::min,
               "expected a numeric tensor, got {} {} (bool tensors reduce with ReduceMax and ReduceMin only)", s,
               dtype);
    Shape kept = s;
    for (const std::size_t d : dims) kept[d] = 1;
    Prim<B> y;
    if (s.numel() == 0) {
      y = provided::full<B>(kept, empty_value(r, dtype), dtype, a.device);
    } else if (!is_float(dtype) && (r == Reduction::mean || r == Reduction::l2 || r == Reduction::log_sum ||
                                    r == Reduction::log_sum_exp)) {
      // Integer tensors go through double and back, truncating as ONNX's reference does.
      y = B::cast(reduce_over<B>(B::cast(a[0], DType::f64), r, dims), dtype);
    } else {
      y = reduce_over<B>(a[0], r, dims);
    }
    return {keep ? y : detail::drop_dims<B>(y, dims)};
  };
}

// ---------------------------------------------------------------- ArgMax, ArgMin, CumSum, TopK

template <class B> Kernel<B> arg_kernel(ops::ArgReduceOp op) {
  return [op](const Args<B>& a) -> Outs<B> {
    const Shape s = a.shape(0);
    const std::size_t d = detail::axis(a.node.attr_int("axis", 0), s.rank());
    KILN_CHECK(s[d] > 0, "cannot take the {} along dim {} of size 0 in shape {}", ops::arg_reduce_name(op), d, s);
    const bool last = a.node.attr_int("select_last_index", 0) != 0;
    const std::int64_t dim[] = {static_cast<std::int64_t>(d)};
    Prim<B> x = is_bool(a.dtype(0)) ? B::cast(a[0], DType::u8) : a[0];
    // The last extreme is the first one of the reversed axis, at position n-1-i there.
    if (last) x = provided::flip<B>(x, dim);
    Prim<B> i = B::arg_reduce(x, op, dim[0]);
    if (last)
      i = provided::unary<B, ops::Neg>(provided::binary_scalar<B, ops::Sub>(i, static_cast<double>(s[d] - 1)));
    const std::size_t dims[] = {d};
    return {a.node.attr_int("keepdims", 1) != 0 ? i : detail::drop_dims<B>(i, dims)};
  };
}

template <class B> Outs<B> cumsum(const Args<B>& a) {
  const Shape s = a.shape(0);
  const std::vector<std::int64_t> axis = a.ints(1);
  KILN_CHECK(axis.size() == 1, "axis must hold one value, got shape {}", a.shape(1));
  const std::size_t d = detail::axis(axis[0], s.rank());
  if (s.numel() == 0) return {a.value(0)};
  const bool reverse = a.node.attr_int("reverse", 0) != 0, exclusive = a.node.attr_int("exclusive", 0) != 0;
  const std::int64_t dim[] = {static_cast<std::int64_t>(d)};
  Prim<B> x = reverse ? provided::flip<B>(a[0], dim) : a[0];
  Prim<B> y = B::cumulative(x, ops::CumulativeOp::sum, dim[0]);
  if (exclusive) {
    // The inclusive sums moved one place along the axis, after a 0: exact for integers,
    // where subtracting x would round floats.
    Prim<B> shifted = provided::full<B>(s, 0.0, a.dtype(0), a.device);
    if (s[d] > 1) {
      std::vector<ops::SliceRange> ranges = whole(s);
      ranges[d] = {0, s[d] - 1, 1};
      const Prim<B> head = B::slice(y, ranges);
      ranges[d] = {1, s[d] - 1, 1};
      shifted = B::slice_assign(shifted, ranges, head);
    }
    y = shifted;
  }
  return {reverse ? provided::flip<B>(y, dim) : y};
}

// B::sort is stable, so equal values keep their order and the lower index comes first, as
// ONNX's tests expect, whether the largest or the smallest are asked for. The output is
// always sorted, which sorted = 0 allows.
template <class B> Outs<B> top_k(const Args<B>& a) {
  const Shape s = a.shape(0);
  std::int64_t k = 0;
  if (a.opset >= 10) {
    const std::vector<std::int64_t> ks = a.ints(1);
    KILN_CHECK(ks.size() == 1, "K must hold one value, got shape {}", a.shape(1));
    k = ks[0];
  } else {
    k = a.node.attr_int("k", -1);
  }
  const std::size_t d = detail::axis(a.node.attr_int("axis", -1), s.rank());
  KILN_CHECK(k >= 0 && k <= s[d], "K = {} is out of range for dim {} of size {} in shape {}", k, d, s[d], s);
  const bool largest = a.node.attr_int("largest", 1) != 0;
  auto [values, indices] = B::sort(a[0], static_cast<std::int64_t>(d), largest);
  std::vector<ops::SliceRange> ranges = whole(s);
  ranges[d] = {0, k, 1};
  return {B::slice(values, ranges), B::slice(indices, ranges)};
}

// ---------------------------------------------------------------- Gather*, Scatter*

template <class B> Outs<B> gather(const Args<B>& a) {
  const Shape s = a.shape(0), is = a.shape(1);
  const std::size_t d = detail::axis(a.node.attr_int("axis", 0), s.rank());
  // One index_select with the indices flattened, then the indices' shape put in dim d's place.
  const Prim<B> index = upload_i64<B>(wrapped_indices(a, 1, s[d], "indices"), Shape{is.numel()}, a.device);
  const Prim<B> y = provided::index_select<B>(a[0], static_cast<std::int64_t>(d), index);
  return {detail::reshape<B>(y, concat({dims_of(s, 0, d), is.dims(), dims_of(s, d + 1, s.rank())}))};
}

template <class B> Outs<B> gather_elements(const Args<B>& a) {
  const Shape s = a.shape(0), is = a.shape(1);
  const std::size_t d = detail::axis(a.node.attr_int("axis", 0), s.rank());
  ops::check_gather_index(s, is, d);
  const Prim<B> index = upload_i64<B>(wrapped_indices(a, 1, s[d], "indices"), is, a.device);
  return {B::gather(a[0], static_cast<std::int64_t>(d), index)};
}

// GatherND as one index_select along the rows of data seen as [batch * block, inner]:
// each index tuple names one row (its batch's block, then the tuple's position in it).
template <class B> Outs<B> gather_nd(const Args<B>& a) {
  const Shape s = a.shape(0), is = a.shape(1);
  const auto b = static_cast<std::size_t>(a.node.attr_int("batch_dims", 0));
  KILN_CHECK(is.rank() >= 1 && b < std::min(s.rank(), is.rank()),
             "batch_dims {} must be below the ranks of data {} and indices {}", b, s, is);
  const auto m = static_cast<std::size_t>(is[is.rank() - 1]);
  KILN_CHECK(m >= 1 && b + m <= s.rank(), "index tuples of length {} do not fit data of shape {} after {} batch dims",
             m, s, b);
  for (std::size_t i = 0; i < b; ++i)
    KILN_CHECK(s[i] == is[i], "the batch dims of data {} and indices {} differ", s, is);
  const std::vector<std::int64_t> idx = a.ints(1);
  const std::int64_t block = product(s, b, b + m), inner = product(s, b + m, s.rank());
  const std::int64_t tuples = is.numel() / static_cast<std::int64_t>(m);
  const std::int64_t per_batch = std::max<std::int64_t>(tuples / std::max<std::int64_t>(product(s, 0, b), 1), 1);
  std::vector<std::int64_t> rows(static_cast<std::size_t>(tuples));
  for (std::int64_t t = 0; t < tuples; ++t) {
    std::int64_t row = 0;
    for (std::size_t j = 0; j < m; ++j) {
      const std::int64_t size = s[b + j];
      std::int64_t i = idx[static_cast<std::size_t>(t) * m + j];
      KILN_CHECK(i >= -size && i < size, "index {} is out of range for dim {} of size {} in data {}", i, b + j, size,
                 s);
      row = row * size + (i < 0 ? i + size : i);
    }
    rows[static_cast<std::size_t>(t)] = (t / per_batch) * block + row;
  }
  const Prim<B> table = detail::reshape<B>(a[0], Shape{product(s, 0, b) * block, inner});
  const Prim<B> y = provided::index_select<B>(table, 0, upload_i64<B>(rows, Shape{tuples}, a.device));
  return {detail::reshape<B>(y, concat({dims_of(is, 0, is.rank() - 1), dims_of(s, b + m, s.rank())}))};
}

// The scatter reductions B::scatter has (none, add); mul, max and min are applied on the
// host through double, exact for every value but int64 beyond 2^53.
enum class Combine { none, add, mul, max, min };
inline Combine combine_of(const std::string& reduction) {
  if (reduction == "none") return Combine::none;
  if (reduction == "add") return Combine::add;
  if (reduction == "mul") return Combine::mul;
  if (reduction == "max") return Combine::max;
  if (reduction == "min") return Combine::min;
  KILN_FAIL("reduction must be none, add, mul, max or min, got '{}'", reduction);
}

// data's elements at flat positions `targets` combined with updates' elements in order.
template <class B>
Prim<B> scatter_on_host(const Value<B>& data, std::span<const std::int64_t> targets, const Value<B>& updates,
                        Combine how, const typename B::Device& device) {
  KILN_CHECK(!is_bool(data.dtype()), "reduction needs a numeric tensor, got {} {}", data.shape(), data.dtype());
  std::vector<double> out = data.data().template to_vec<double>();
  const std::vector<double> u = updates.data().template to_vec<double>();
  for (std::size_t i = 0; i < targets.size(); ++i) {
    double& x = out[static_cast<std::size_t>(targets[i])];
    x = how == Combine::mul ? x * u[i] : how == Combine::max ? std::max(x, u[i]) : std::min(x, u[i]);
  }
  return B::from_data(TensorData::from(out, data.shape()).convert(data.dtype()), device);
}

template <class B> Outs<B> scatter_elements(const Args<B>& a) {
  const Shape s = a.shape(0), is = a.shape(1), us = a.shape(2);
  const std::size_t d = detail::axis(a.node.attr_int("axis", 0), s.rank());
  KILN_CHECK(is == us, "indices {} and updates {} must have one shape", is, us);
  ops::check_scatter_operands("ScatterElements", s, a.dtype(0), is, a.dtype(1), us, a.dtype(2), d);
  const std::vector<std::int64_t> idx = wrapped_indices(a, 1, s[d], "indices");
  const Combine how = combine_of(a.node.attr_string("reduction", "none"));
  if (how == Combine::none || how == Combine::add)
    return {B::scatter(a[0], static_cast<std::int64_t>(d), upload_i64<B>(idx, is, a.device), a[2],
                       how == Combine::add ? ops::ScatterMode::add : ops::ScatterMode::assign)};
  // The flat position in data of each update: its own position with dim d replaced by its index.
  const Strides strides = s.contiguous_strides();
  std::vector<std::int64_t> targets(idx.size());
  for (std::size_t i = 0; i < idx.size(); ++i) {
    std::int64_t rest = static_cast<std::int64_t>(i), flat = 0;
    for (std::size_t k = is.rank(); k-- > 0;) {
      flat += (k == d ? idx[i] : rest % is[k]) * strides[k];
      rest /= is[k];
    }
    targets[i] = flat;
  }
  return {scatter_on_host(a.value(0), targets, a.value(2), how, a.device)};
}

// ScatterND as a scatter along the rows of data seen as [rows, inner]: each index tuple
// names one row, which its slice of updates replaces or adds to.
template <class B> Outs<B> scatter_nd(const Args<B>& a) {
  const Shape s = a.shape(0), is = a.shape(1), us = a.shape(2);
  check_same_dtype(a, 0, 2);
  KILN_CHECK(is.rank() >= 1, "indices must have at least one dim, got shape {}", is);
  const auto m = static_cast<std::size_t>(is[is.rank() - 1]);
  KILN_CHECK(m >= 1 && m <= s.rank(), "index tuples of length {} do not fit data of shape {}", m, s);
  const Shape expected = concat({dims_of(is, 0, is.rank() - 1), dims_of(s, m, s.rank())});
  KILN_CHECK(us == expected, "updates must have shape {} for data {} and indices {}, got {}", expected, s, is, us);
  const std::vector<std::int64_t> idx = a.ints(1);
  const std::int64_t tuples = is.numel() / static_cast<std::int64_t>(m), inner = product(s, m, s.rank());
  std::vector<std::int64_t> rows(static_cast<std::size_t>(tuples));
  for (std::int64_t t = 0; t < tuples; ++t) {
    std::int64_t row = 0;
    for (std::size_t j = 0; j < m; ++j) {
      std::int64_t i = idx[static_cast<std::size_t>(t) * m + j];
      KILN_CHECK(i >= -s[j] && i < s[j], "index {} is out of range for dim {} of size {} in data {}", i, j, s[j], s);
      row = row * s[j] + (i < 0 ? i + s[j] : i);
    }
    rows[static_cast<std::size_t>(t)] = row;
  }
  const Combine how = combine_of(a.node.attr_string("reduction", "none"));
  if (how == Combine::none || how == Combine::add) {
    const Shape table{product(s, 0, m), inner}, slices{tuples, inner};
    const Prim<B> index = B::expand(upload_i64<B>(rows, Shape{tuples, 1}, a.device), slices);
    const Prim<B> y = B::scatter(detail::reshape<B>(a[0], table), 0, index, detail::reshape<B>(a[2], slices),
                                 how == Combine::add ? ops::ScatterMode::add : ops::ScatterMode::assign);
    return {detail::reshape<B>(y, s)};
  }
  std::vector<std::int64_t> targets;
  for (const std::int64_t row : rows)
    for (std::int64_t e = 0; e < inner; ++e) targets.push_back(row * inner + e);
  return {scatter_on_host(a.value(0), targets, a.value(2), how, a.device)};
}

// ---------------------------------------------------------------- OneHot, Trilu

// One-hot along `axis`: the indices (of any numeric type, truncated to integers, negative
// ones counted from the end, out-of-range ones matching nothing) compared with 0..depth-1.
template <class B> Outs<B> one_hot(const Args<B>& a) {
  const Shape is = a.shape(0);
  const auto depth = static_cast<std::int64_t>(a.scalar(1));
  KILN_CHECK(depth > 0, "depth must be positive, got {}", a.scalar(1));
  KILN_CHECK(a.shape(2).numel() == 2, "values must hold [off, on], got shape {}", a.shape(2));
  const std::size_t axis = detail::axis(a.node.attr_int("axis", -1), is.rank() + 1);
  std::vector<std::int64_t> idx;
  for (const double v : a.value(0).data().template to_vec<double>()) {
    auto i = static_cast<std::int64_t>(v);
    if (i < 0) i += depth;
    idx.push_back(i >= 0 && i < depth ? i : -1);
  }
  std::vector<std::int64_t> range(static_cast<std::size_t>(depth));
  std::iota(range.begin(), range.end(), std::int64_t{0});
  Shape index_shape = concat({dims_of(is, 0, axis), std::vector<std::int64_t>{1}, dims_of(is, axis, is.rank())});
  Shape range_shape(std::vector<std::int64_t>(is.rank() + 1, 1));
  range_shape[axis] = depth;
  const Prim<B> hot = provided::binary<B, ops::Equal>(upload_i64<B>(idx, index_shape, a.device),
                                                      upload_i64<B>(range, range_shape, a.device));
  const Prim<B> values = detail::reshape<B>(a[2], Shape{2});
  return {provided::where<B>(hot, B::slice(values, std::vector<ops::SliceRange>{{1, 1, 1}}),
                             B::slice(values, std::vector<ops::SliceRange>{{0, 1, 1}}))};
}

template <class B> Outs<B> trilu(const Args<B>& a) {
  const Shape s = a.shape(0);
  KILN_CHECK(s.rank() >= 2, "expected a tensor of rank 2 or more, got shape {}", s);
  std::int64_t k = 0;
  if (a.has(1)) {
    const std::vector<std::int64_t> ks = a.ints(1);
    KILN_CHECK(ks.size() == 1, "k must hold one value, got shape {}", a.shape(1));
    k = ks[0];
  }
  if (s.numel() == 0) return {a.value(0)};
  const bool upper = a.node.attr_int("upper", 1) != 0;
  const std::int64_t rows = s[s.rank() - 2], cols = s[s.rank() - 1];
  std::vector<bool> keep;
  for (std::int64_t i = 0; i < rows; ++i)
    for (std::int64_t j = 0; j < cols; ++j) keep.push_back(upper ? j - i >= k : j - i <= k);
  const Prim<B> mask = B::from_data(TensorData::from(keep, Shape{rows, cols}), a.device);
  return {provided::where<B>(mask, a[0], provided::full<B>(Shape{1}, 0.0, a.dtype(0), a.device))};
}

// ---------------------------------------------------------------- host-built ops

template <class B> Outs<B> non_zero(const Args<B>& a) {
  const Shape s = a.shape(0);
  // A scalar counts as a tensor of one element, as NumPy's nonzero treats it.
  const Shape shape = s.rank() == 0 ? Shape{1} : s;
  const std::vector<double> x = a.value(0).data().template to_vec<double>();
  std::vector<std::int64_t> flat;
  for (std::size_t i = 0; i < x.size(); ++i)
    if (x[i] != 0) flat.push_back(static_cast<std::int64_t>(i));
  const auto n = static_cast<std::int64_t>(flat.size());
  std::vector<std::int64_t> out(shape.rank() * flat.size());
  for (std::int64_t j = 0; j < n; ++j) {
    std::int64_t rest = flat[static_cast<std::size_t>(j)];
    for (std::size_t d = shape.rank(); d-- > 0;) {
      out[d * flat.size() + static_cast<std::size_t>(j)] = rest % shape[d];
      rest /= shape[d];
    }
  }
  return {upload_i64<B>(out, Shape{static_cast<std::int64_t>(shape.rank()), n}, a.device)};
}

template <class B> Outs<B> eye_like(const Args<B>& a) {
  const Shape s = a.shape(0);
  KILN_CHECK(s.rank() == 2, "expected a 2-d tensor, got shape {}", s);
  const DType dtype = a.node.find("dtype") ? detail::held_dtype(a.node.attr_int("dtype", 0)) : a.dtype(0);
  const std::int64_t k = a.node.attr_int("k", 0);
  std::vector<double> v(static_cast<std::size_t>(s.numel()), 0.0);
  for (std::int64_t i = 0; i < s[0]; ++i)
    if (i + k >= 0 && i + k < s[1]) v[static_cast<std::size_t>(i * s[1] + i + k)] = 1.0;
  return {B::from_data(TensorData::from(v, s).convert(dtype), a.device)};
}

// start, start + delta, ... up to limit (excluded), in the inputs' type; integers are
// stepped in int64 so that large values stay exact.
template <class B> Outs<B> range(const Args<B>& a) {
  check_same_dtype(a, 0, 1);
  check_same_dtype(a, 0, 2);
  const DType dtype = a.dtype(0);
  KILN_CHECK(!is_bool(dtype), "expected numeric start, limit and delta, got bool");
  const double start = a.scalar(0), limit = a.scalar(1), delta = a.scalar(2);
  const std::int64_t n = range_count(start, limit, delta);
  if (is_float(dtype)) {
    std::vector<double> v(static_cast<std::size_t>(n));
    for (std::int64_t i = 0; i < n; ++i) v[static_cast<std::size_t>(i)] = start + static_cast<double>(i) * delta;
    return {B::from_data(TensorData::from(v, Shape{n}).convert(dtype), a.device)};
  }
  const std::int64_t first = a.ints(0)[0], step = a.ints(2)[0];
  std::vector<std::int64_t> v(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) v[static_cast<std::size_t>(i)] = first + i * step;
  return {B::from_data(TensorData::from(v, Shape{n}).convert(dtype), a.device)};
}

// The determinants of [..., n, n] matrices, by Gaussian elimination with partial pivoting
// in double on the host.
template <class B> Outs<B> det(const Args<B>& a) {
  const Shape s = a.shape(0);
  KILN_CHECK(s.rank() >= 2 && s[s.rank() - 1] == s[s.rank() - 2] && is_float(a.dtype(0)),
             "expected float matrices [..., n, n], got {} {}", s, a.dtype(0));
  const auto n = static_cast<std::size_t>(s[s.rank() - 1]);
  const std::vector<double> x = a.value(0).data().template to_vec<double>();
  const Shape out_shape(dims_of(s, 0, s.rank() - 2));
  std::vector<double> out(static_cast<std::size_t>(out_shape.numel()));
  for (std::size_t b = 0; b < out.size(); ++b) {
    std::vector<double> m(x.begin() + static_cast<std::ptrdiff_t>(b * n * n),
                          x.begin() + static_cast<std::ptrdiff_t>((b + 1) * n * n));
    double d = 1;
    for (std::size_t c = 0; c < n && d != 0; ++c) {
      std::size_t pivot = c;
      for (std::size_t r = c + 1; r < n; ++r)
        if (std::abs(m[r * n + c]) > std::abs(m[pivot * n + c])) pivot = r;
      if (pivot != c) {
        for (std::size_t j = 0; j < n; ++j) std::swap(m[c * n + j], m[pivot * n + j]);
        d = -d;
      }
      d *= m[c * n + c];
      if (m[c * n + c] == 0) break;
      for (std::size_t r = c + 1; r < n; ++r) {
        const double f = m[r * n + c] / m[c * n + c];
        for (std::size_t j = c; j < n; ++j) m[r * n + j] -= f * m[c * n + j];
      }
    }
    out[b] = d;
  }
  return {B::from_data(TensorData::from(out, out_shape).convert(a.dtype(0)), a.device)};
}

// ---------------------------------------------------------------- Einsum

// A tensor whose dims carry einsum labels: letters are their character codes, the dims an
// ellipsis stands for are 256 + their position among the ellipsis dims, aligned right so
// that the ellipses of operands of different ranks broadcast as NumPy's do.
template <class B> struct Labeled {
  Prim<B> t;
  std::vector<int> labels;
};

constexpr int ellipsis_label = -1;
inline std::string label_name(int label) { return label >= 256 ? "..." : std::string(1, static_cast<char>(label)); }

// One operand's or the output's subscripts as labels, with ellipsis_label where "..." is.
inline std::vector<int> parse_subscripts(std::string_view text, std::string_view equation) {
  std::vector<int> out;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (c == '.') {
      KILN_CHECK(text.substr(i, 3) == "..." && std::find(out.begin(), out.end(), ellipsis_label) == out.end(),
                 "equation '{}' has a stray '.' or more than one ellipsis in a term", equation);
      out.push_back(ellipsis_label);
      i += 2;
    } else {
      KILN_CHECK((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'), "equation '{}' has the character '{}'", equation,
                 std::string(1, c));
      out.push_back(c);
    }
  }
  return out;
}

// `labels` with the ellipsis replaced by the labels of its `count` dims, of `total`.
inline std::vector<int> expand_ellipsis(const std::vector<int>& labels, std::size_t count, std::size_t total) {
  std::vector<int> out;
  for (const int l : labels) {
    if (l != ellipsis_label) out.push_back(l);
    else
      for (std::size_t j = 0; j < count; ++j) out.push_back(256 + static_cast<int>(total - count + j));
  }
  return out;
}

// The diagonal over a label that appears twice: both dims moved last, merged, and every
// (n+1)-th element kept.
template <class B> void take_diagonals(Labeled<B>& x) {
  for (std::size_t p = 0; p < x.labels.size(); ++p) {
    const auto q = static_cast<std::size_t>(std::find(x.labels.begin() + static_cast<std::ptrdiff_t>(p) + 1,
                                                      x.labels.end(), x.labels[p]) - x.labels.begin());
    if (q == x.labels.size()) continue;
    const Shape s = B::shape(x.t);
    KILN_CHECK(s[p] == s[q], "a repeated subscript names dims {} and {} of different sizes in shape {}", p, q, s);
    std::vector<std::int64_t> perm, dims;
    std::vector<int> labels;
    for (std::size_t i = 0; i < s.rank(); ++i)
      if (i != p && i != q) {
        perm.push_back(static_cast<std::int64_t>(i));
        dims.push_back(s[i]);
        labels.push_back(x.labels[i]);
      }
    perm.push_back(static_cast<std::int64_t>(p));
    perm.push_back(static_cast<std::int64_t>(q));
    dims.push_back(s[p] * s[p]);
    std::vector<ops::SliceRange> ranges = whole(Shape(dims));
    ranges.back() = {0, s[p], s[p] + 1};
    x.t = B::slice(B::reshape(B::permute(x.t, perm), Shape(dims)), ranges);
    labels.push_back(x.labels[p]);
    x.labels = std::move(labels);
    p = static_cast<std::size_t>(-1);  // start over: the dims moved
  }
}

// Sums out the labels of x that `keep` does not hold.
template <class B> void sum_out(Labeled<B>& x, const std::set<int>& keep) {
  std::vector<std::size_t> dims;
  std::vector<int> labels;
  for (std::size_t i = 0; i < x.labels.size(); ++i) {
    if (keep.count(x.labels[i])) labels.push_back(x.labels[i]);
    else dims.push_back(i);
  }
  if (dims.empty()) return;
  x.t = detail::drop_dims<B>(detail::reduce<B>(x.t, ops::ReduceOp::sum, dims), dims);
  x.labels = std::move(labels);
}

// x's dims in the order of `labels`, each broadcast to `sizes[label]`, merged into the
// groups whose lengths `groups` gives.
template <class B>
Prim<B> arrange(const Labeled<B>& x, const std::vector<int>& labels, const std::map<int, std::int64_t>& sizes,
                std::initializer_list<std::size_t> groups) {
  std::vector<std::int64_t> perm, dims;
  for (const int l : labels) {
    perm.push_back(std::find(x.labels.begin(), x.labels.end(), l) - x.labels.begin());
    dims.push_back(sizes.at(l));
  }
  const Prim<B> t = B::expand(B::permute(x.t, perm), Shape(dims));
  std::vector<std::int64_t> merged;
  std::size_t at = 0;
  for (const std::size_t g : groups) {
    merged.push_back(product(std::span<const std::int64_t>(dims).subspan(at, g)));
    at += g;
  }
  return B::reshape(t, Shape(merged));
}

// x * y summed over the labels that they share and `later` does not need: a batched matmul
// [batch, x's own, shared] @ [batch, shared, y's own].
template <class B> Labeled<B> contract(const Labeled<B>& x, const Labeled<B>& y, const std::set<int>& later) {
  // A label's size: the same in both, or 1 in one of them, which broadcasts.
  std::map<int, std::int64_t> sizes;
  for (const Labeled<B>* op : {&x, &y})
    for (std::size_t i = 0; i < op->labels.size(); ++i) {
      const std::int64_t n = B::shape(op->t)[i];
      const auto [it, fresh] = sizes.try_emplace(op->labels[i], n);
      KILN_CHECK(fresh || it->second == n || it->second == 1 || n == 1, "subscript '{}' names dims of sizes {} and {}",
                 label_name(op->labels[i]), it->second, n);
      if (it->second == 1) it->second = n;
    }
  auto in = [](const Labeled<B>& t, int l) { return std::count(t.labels.begin(), t.labels.end(), l) > 0; };
  std::vector<int> batch, summed, own_x, own_y;
  for (const int l : x.labels) (in(y, l) ? (later.count(l) ? batch : summed) : own_x).push_back(l);
  for (const int l : y.labels)
    if (!in(x, l)) own_y.push_back(l);
  auto join = [](std::vector<int> a, const std::vector<int>& b) {
    a.insert(a.end(), b.begin(), b.end());
    return a;
  };
  const Prim<B> xy = B::matmul(
      arrange(x, join(join(batch, own_x), summed), sizes, {batch.size(), own_x.size(), summed.size()}),
      arrange(y, join(join(batch, summed), own_y), sizes, {batch.size(), summed.size(), own_y.size()}));
  Labeled<B> out{xy, join(join(batch, own_x), own_y)};
  std::vector<std::int64_t> dims;
  for (const int l : out.labels) dims.push_back(sizes.at(l));
  out.t = B::reshape(out.t, Shape(dims));
  return out;
}

template <class B> Outs<B> einsum(const Args<B>& a) {
  std::string equation;
  for (const char c : a.node.attr_string("equation", ""))
    if (c != ' ') equation += c;
  const std::size_t arrow = equation.find("->");
  const std::string lhs = equation.substr(0, arrow);
  std::vector<std::vector<int>> terms;
  for (std::size_t at = 0;;) {
    const std::size_t comma = lhs.find(',', at);
    terms.push_back(parse_subscripts(std::string_view(lhs).substr(at, comma - at), equation));
    if (comma == std::string::npos) break;
    at = comma + 1;
  }
  KILN_CHECK(terms.size() == a.size(), "equation '{}' names {} operands, the node has {}", equation, terms.size(),
             a.size());
  // Each operand's ellipsis stands for the dims its letters leave; the widest sets the count.
  std::vector<std::size_t> counts;
  std::size_t total = 0;
  for (std::size_t i = 0; i < terms.size(); ++i) {
    check_same_dtype(a, 0, i);
    const bool has = std::find(terms[i].begin(), terms[i].end(), ellipsis_label) != terms[i].end();
    const std::size_t letters = terms[i].size() - (has ? 1 : 0), rank = a.shape(i).rank();
    KILN_CHECK(has ? rank >= letters : rank == letters, "term {} of equation '{}' does not fit input {} of shape {}",
               i, equation, i, a.shape(i));
    counts.push_back(rank - letters);
    total = std::max(total, rank - letters);
  }
  // Integer operands go through double (the backends' matmul takes floats).
  const DType dtype = a.dtype(0);
  std::vector<Labeled<B>> operands;
  for (std::size_t i = 0; i < terms.size(); ++i)
    operands.push_back(
        {is_float(dtype) ? a[i] : B::cast(a[i], DType::f64), expand_ellipsis(terms[i], counts[i], total)});
  std::vector<int> output;
  if (arrow != std::string::npos) {
    output = expand_ellipsis(parse_subscripts(std::string_view(equation).substr(arrow + 2), equation), total, total);
  } else {
    // Implicit output: the ellipsis dims, then the letters used once, in alphabetical order.
    std::map<int, int> uses;
    for (const auto& op : operands)
      for (const int l : op.labels) ++uses[l];
    for (const auto& [l, n] : uses)
      if (l >= 256 || n == 1) output.push_back(l);
    std::stable_partition(output.begin(), output.end(), [](int l) { return l >= 256; });
  }
  const std::set<int> wanted(output.begin(), output.end());
  KILN_CHECK(wanted.size() == output.size(), "equation '{}' repeats an output subscript", equation);
  for (const int l : output)
    KILN_CHECK(std::any_of(operands.begin(), operands.end(),
                           [&](const Labeled<B>& op) { return std::count(op.labels.begin(), op.labels.end(), l) > 0; }),
               "equation '{}' has the output subscript '{}', which no input has", equation, label_name(l));
  // The labels needed after operand i: the output's and those of the operands after it.
  auto needed_after = [&](std::size_t i) {
    std::set<int> s = wanted;
    for (std::size_t j = i + 1; j < operands.size(); ++j)
      s.insert(operands[j].labels.begin(), operands[j].labels.end());
    return s;
  };
  for (std::size_t i = 0; i < operands.size(); ++i) {
    take_diagonals(operands[i]);
    // Labels that no other operand and not the output has are summed out at once.
    std::set<int> keep = wanted;
    for (std::size_t j = 0; j < operands.size(); ++j)
      if (j != i) keep.insert(operands[j].labels.begin(), operands[j].labels.end());
    sum_out(operands[i], keep);
  }
  Labeled<B> acc = operands[0];
  for (std::size_t i = 1; i < operands.size(); ++i) acc = contract(acc, operands[i], needed_after(i));
  sum_out(acc, wanted);
  std::vector<std::int64_t> perm;
  for (const int l : output) perm.push_back(std::find(acc.labels.begin(), acc.labels.end(), l) - acc.labels.begin());
  const Prim<B> y = B::permute(acc.t, perm);
  return {is_float(dtype) ? y : B::cast(y, dtype)};
}

}  // namespace reduce_detail

// The reductions, ArgMax / ArgMin, TopK and Gather mean the same since opset 1 (their
// attribute forms are read), so they run from there.
// The op types add_reduce_ops registers (checked when a table is built): a module that
// kiln-onnx2cpp generates takes only the groups its graph uses.
inline constexpr std::string_view kReduceOps[] = {
    "ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1", "ReduceL2", "ReduceLogSum",
    "ReduceLogSumExp", "ReduceSumSquare", "ArgMax", "ArgMin", "CumSum", "TopK", "Gather", "GatherElements", "GatherND",
    "Scatter", "ScatterElements", "ScatterND", "NonZero", "OneHot", "Trilu", "EyeLike", "Range", "Det",
    "Einsum"};
inline constexpr OpGroup kReduceGroup{"reduce", kReduceOps};

template <class B> void add_reduce_ops(OpTable<B>& t) {
  using namespace reduce_detail;
  t["ReduceSum"] = {reduce_kernel<B>(Reduction::sum), 1};
  t["ReduceMean"] = {reduce_kernel<B>(Reduction::mean), 1};
  t["ReduceMax"] = {reduce_kernel<B>(Reduction::max), 1};
  t["ReduceMin"] = {reduce_kernel<B>(Reduction::min), 1};
  t["ReduceProd"] = {reduce_kernel<B>(Reduction::prod), 1};
  t["ReduceL1"] = {reduce_kernel<B>(Reduction::l1), 1};
  t["ReduceL2"] = {reduce_kernel<B>(Reduction::l2), 1};
  t["ReduceLogSum"] = {reduce_kernel<B>(Reduction::log_sum), 1};
  t["ReduceLogSumExp"] = {reduce_kernel<B>(Reduction::log_sum_exp), 1};
  t["ReduceSumSquare"] = {reduce_kernel<B>(Reduction::sum_square), 1};
  t["ArgMax"] = {arg_kernel<B>(ops::ArgReduceOp::argmax), 1};
  t["ArgMin"] = {arg_kernel<B>(ops::ArgReduceOp::argmin), 1};
  t["CumSum"] = {cumsum<B>};
  t["TopK"] = {top_k<B>, 1};
  t["Gather"] = {gather<B>, 1};
  t["GatherElements"] = {gather_elements<B>};
  t["GatherND"] = {gather_nd<B>};
  t["Scatter"] = {scatter_elements<B>};
  t["ScatterElements"] = {scatter_elements<B>};
  t["ScatterND"] = {scatter_nd<B>};
  t["NonZero"] = {non_zero<B>};
  t["OneHot"] = {one_hot<B>};
  t["Trilu"] = {trilu<B>};
  t["EyeLike"] = {eye_like<B>};
  t["Range"] = {range<B>};
  t["Det"] = {det<B>};
  t["Einsum"] = {einsum<B>};
}

}  // namespace kiln::onnx
