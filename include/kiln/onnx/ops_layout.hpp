// ONNX's layout and shape ops: views and copies (Reshape, Transpose, Slice, Concat, Split,
// Pad, Tile...), and the ops of shape arithmetic (Shape, Size, Constant, ConstantOfShape),
// whose results stay on the host where the kernels that read numbers find them.
#pragma once

#include "kiln/onnx/runtime.hpp"

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

namespace kiln::onnx {

namespace layout_detail {

template <class B> using Outs = std::vector<Value<B>>;

template <class B> Value<B> host_ints(std::vector<std::int64_t> values, const Shape& shape, const Args<B>& a) {
  return Value<B>::host(TensorData::from(values, shape), a.device);
}

// An attribute (older opsets) or an input (newer ones) holding integers: axes, starts, pads.
template <class B>
std::optional<std::vector<std::int64_t>> ints_from(const Args<B>& a, std::string_view attribute, std::size_t input,
                                                   std::int64_t input_since) {
  if (a.opset < input_since) {
    if (!a.node.find(attribute)) return std::nullopt;
    return a.node.attr_ints(attribute);
  }
  if (!a.has(input)) return std::nullopt;
  return a.ints(input);
}

template <class B>
typename B::Primitive slice_dim(const typename B::Primitive& x, std::size_t dim, std::int64_t start,
                                std::int64_t size, std::int64_t step = 1) {
  const Shape s = B::shape(x);
  std::vector<ops::SliceRange> ranges;
  for (std::size_t d = 0; d < s.rank(); ++d) ranges.push_back({0, s[d], 1});
  ranges[dim] = {start, size, step};
  return B::slice(x, ranges);
}

// The values of a Constant node, from whichever numeric value attribute it has.
inline TensorData constant_value(const Node& node) {
  if (const Attribute* f = node.find("value_float")) return TensorData::from(std::vector<float>{static_cast<float>(f->f)}, Shape{});
  if (const Attribute* f = node.find("value_floats")) {
    std::vector<float> v(f->floats.begin(), f->floats.end());
    return TensorData::from(v, Shape{static_cast<std::int64_t>(v.size())});
  }
  if (const Attribute* i = node.find("value_int")) return TensorData::from(std::vector<std::int64_t>{i->i}, Shape{});
  if (const Attribute* i = node.find("value_ints"))
    return TensorData::from(i->ints, Shape{static_cast<std::int64_t>(i->ints.size())});
  if (node.find("sparse_value")) unsupported("a sparse value: Kiln holds no sparse tensors");

  KILN_FAIL("no value attribute (value, value_float(s), value_int(s))");
}

// The indices along one dim of size n that Pad's modes read for output positions
// -before .. n + after - 1 (edge: clamped; reflect: mirrored without the edge; wrap: cyclic).
inline std::vector<std::int64_t> pad_indices(std::int64_t n, std::int64_t before, std::int64_t after,
                                             const std::string& mode) {
  std::vector<std::int64_t> out;
  for (std::int64_t i = -before; i < n + after; ++i) {
    std::int64_t j = i;
    if (mode == "edge") {
      j = std::clamp<std::int64_t>(i, 0, n - 1);
    } else if (mode == "reflect") {
      KILN_CHECK(n >= 2 || (before == 0 && after == 0), "reflect padding needs a dim of at least 2, got {}", n);
      const std::int64_t period = 2 * (n - 1);
      j = ((i % period) + period) % period;
      if (j >= n) j = period - j;
    } else {
      j = ((i % n) + n) % n;  // wrap
    }
    out.push_back(j);
  }
  return out;
}

}  // namespace layout_detail

// The op types add_layout_ops registers (checked when a table is built): a module that
// kiln-onnx2cpp generates takes only the groups its graph uses.
inline constexpr std::string_view kLayoutOps[] = {
    "Identity", "Reshape", "Flatten", "Transpose", "Concat", "Split", "Slice", "Squeeze", "Unsqueeze",
    "Shape", "Size", "Constant", "ConstantOfShape", "Expand", "Tile", "Pad", "DepthToSpace", "SpaceToDepth"};
inline constexpr OpGroup kLayoutGroup{"layout", kLayoutOps};

template <class B> void add_layout_ops(OpTable<B>& t) {
  using namespace layout_detail;
  using P = typename B::Primitive;

  t["Identity"] = {[](const Args<B>& a) -> Outs<B> { return {a.value(0)}; }};

  t["Reshape"] = {[](const Args<B>& a) -> Outs<B> {
    const Shape in = a.shape(0);
    std::vector<std::int64_t> dims = a.opset < 5 ? a.node.attr_ints("shape") : a.ints(1);
    const bool allow_zero = a.node.attr_int("allowzero", 0) != 0;
    std::int64_t known = 1;
    std::optional<std::size_t> infer;
    for (std::size_t i = 0; i < dims.size(); ++i) {
      if (dims[i] == 0 && !allow_zero) {
        KILN_CHECK(i < in.rank(), "shape {} copies dim {} of an input of shape {}", dims, i, in);
        dims[i] = in[i];
      }
      if (dims[i] == -1) {
        KILN_CHECK(!infer, "shape {} has two -1 entries", dims);
        infer = i;
        continue;
      }
      KILN_CHECK(dims[i] >= 0, "shape {} has a negative entry", dims);
      known *= dims[i];
    }
    if (infer) {
      KILN_CHECK(known > 0 && in.numel() % known == 0, "cannot reshape {} to {}", in, dims);
      dims[*infer] = in.numel() / known;
    }
    if (a.value(0).on_host() && in.numel() <= 64) return {Value<B>::host(a.value(0).data().reshaped(Shape(dims)), a.device)};
    return {detail::reshape<B>(a[0], Shape(dims))};
  }};

  t["Flatten"] = {[](const Args<B>& a) -> Outs<B> {
    const Shape in = a.shape(0);
    const std::int64_t axis_attr = a.node.attr_int("axis", 1);
    const auto r = static_cast<std::int64_t>(in.rank());
    KILN_CHECK(axis_attr >= -r && axis_attr <= r, "axis {} is out of range for rank {}", axis_attr, r);
    const std::size_t axis = static_cast<std::size_t>(axis_attr < 0 ? axis_attr + r : axis_attr);
    std::int64_t outer = 1, inner = 1;
    for (std::size_t d = 0; d < in.rank(); ++d) (d < axis ? outer : inner) *= in[d];
    return {B::reshape(a[0], Shape{outer, inner})};
  }};

  t["Transpose"] = {[](const Args<B>& a) -> Outs<B> {
    const std::size_t rank = a.shape(0).rank();
    std::vector<std::int64_t> perm = a.node.attr_ints("perm");
    if (perm.empty())
      for (std::size_t i = rank; i-- > 0;) perm.push_back(static_cast<std::int64_t>(i));
    return {detail::permute<B>(a[0], perm)};
  }};

  t["Concat"] = {[](const Args<B>& a) -> Outs<B> {
    const Shape first = a.shape(0);
    const std::size_t dim = detail::axis(a.node.attr_int("axis", 0), first.rank());
    std::vector<P> parts;
    for (std::size_t i = 0; i < a.size(); ++i) {
      const Shape s = a.shape(i);
      bool fits = s.rank() == first.rank() && a.dtype(i) == a.dtype(0);
      for (std::size_t d = 0; fits && d < s.rank(); ++d) fits = d == dim || s[d] == first[d];
      KILN_CHECK(fits, "input {} ({} {}) does not concatenate with input 0 ({} {}) along dim {}", i, s, a.dtype(i),
                 first, a.dtype(0), dim);
      if (s[dim] > 0) parts.push_back(a[i]);
    }
    if (parts.empty()) return {a[0]};
    if (parts.size() == 1) return {parts.front()};
    return {provided::cat<B>(parts, static_cast<std::int64_t>(dim))};
  }};

  t["Split"] = {[](const Args<B>& a) -> Outs<B> {
    const Shape in = a.shape(0);
    const std::size_t dim = detail::axis(a.node.attr_int("axis", 0), in.rank());
    const std::size_t outputs = a.node.outputs.size();
    std::vector<std::int64_t> sizes;
    if (auto given = ints_from(a, "split", 1, 13)) {
      sizes = *given;
    } else {
      const std::int64_t n = a.node.find("num_outputs") ? a.node.attr_int("num_outputs", 1)
                                                        : static_cast<std::int64_t>(outputs);
      KILN_CHECK(n >= 1, "num_outputs must be positive, got {}", n);
      const std::int64_t chunk = (in[dim] + n - 1) / n;  // the last part may be smaller (opset 18)
      for (std::int64_t i = 0, left = in[dim]; i < n; ++i, left -= chunk) sizes.push_back(std::max<std::int64_t>(0, std::min(chunk, left)));
    }
    std::int64_t total = 0;
    for (const std::int64_t s : sizes) {
      KILN_CHECK(s >= 0, "split sizes {} have a negative entry", sizes);
      total += s;
    }
    KILN_CHECK(total == in[dim], "split sizes {} add up to {}, the input's dim {} is {}", sizes, total, dim, in[dim]);
    KILN_CHECK(sizes.size() == outputs, "{} split sizes for {} outputs", sizes.size(), outputs);
    Outs<B> out;
    std::int64_t start = 0;
    for (const std::int64_t s : sizes) {
      out.push_back(slice_dim<B>(a[0], dim, start, s));
      start += s;
    }
    return out;
  }};

  t["Slice"] = {[](const Args<B>& a) -> Outs<B> {
    const Shape in = a.shape(0);
    std::vector<std::int64_t> starts, ends, axes, steps;
    if (a.opset < 10) {
      starts = a.node.attr_ints("starts");
      ends = a.node.attr_ints("ends");
      axes = a.node.attr_ints("axes");
    } else {
      starts = a.ints(1);
      ends = a.ints(2);
      if (a.has(3)) axes = a.ints(3);
      if (a.has(4)) steps = a.ints(4);
    }
    KILN_CHECK(starts.size() == ends.size(), "{} starts and {} ends", starts.size(), ends.size());
    if (axes.empty())
      for (std::size_t i = 0; i < starts.size(); ++i) axes.push_back(static_cast<std::int64_t>(i));
    if (steps.empty()) steps.assign(starts.size(), 1);
    KILN_CHECK(axes.size() == starts.size() && steps.size() == starts.size(),
               "{} starts, {} axes and {} steps must agree", starts.size(), axes.size(), steps.size());
    const std::vector<std::size_t> dims = detail::axes(axes, in.rank());
    std::vector<ops::SliceRange> ranges;
    for (std::size_t d = 0; d < in.rank(); ++d) ranges.push_back({0, in[d], 1});
    std::vector<std::int64_t> flips;
    for (std::size_t i = 0; i < dims.size(); ++i) {
      const std::int64_t n = in[dims[i]], step = steps[i];
      const SliceExtent e = slice_extent(n, starts[i], ends[i], step);
      if (step > 0) {
        ranges[dims[i]] = {e.first, e.size, step};
      } else {
        // Backward on the flipped dim is forward: index i is n - 1 - i there.
        ranges[dims[i]] = {e.size > 0 ? n - 1 - e.first : 0, e.size, -step};
        flips.push_back(static_cast<std::int64_t>(dims[i]));
      }
    }
    const P x = flips.empty() ? a[0] : provided::flip<B>(a[0], flips);
    return {B::slice(x, ranges)};
  }};

  t["Squeeze"] = {[](const Args<B>& a) -> Outs<B> {
    const Shape in = a.shape(0);
    std::vector<std::size_t> dims;
    if (auto given = ints_from(a, "axes", 1, 13)) {
      dims = detail::axes(*given, in.rank());
      for (const std::size_t d : dims) KILN_CHECK(in[d] == 1, "cannot squeeze dim {} of shape {}: its size is not 1", d, in);
    } else {
      for (std::size_t d = 0; d < in.rank(); ++d)
        if (in[d] == 1) dims.push_back(d);
    }
    if (a.value(0).on_host() && in.numel() <= 64) {
      std::vector<std::int64_t> out;
      for (std::size_t d = 0; d < in.rank(); ++d)
        if (std::find(dims.begin(), dims.end(), d) == dims.end()) out.push_back(in[d]);
      return {Value<B>::host(a.value(0).data().reshaped(Shape(out)), a.device)};
    }
    return {detail::drop_dims<B>(a[0], dims)};
  }};

  t["Unsqueeze"] = {[](const Args<B>& a) -> Outs<B> {
    const Shape in = a.shape(0);
    const auto given = ints_from(a, "axes", 1, 13);
    KILN_CHECK(given.has_value(), "axes are required");
    const std::vector<std::size_t> dims = detail::axes(*given, in.rank() + given->size());
    std::vector<std::int64_t> out;
    for (std::size_t d = 0, next = 0; d < in.rank() + dims.size(); ++d)
      out.push_back(std::find(dims.begin(), dims.end(), d) != dims.end() ? 1 : in[next++]);
    if (a.value(0).on_host() && in.numel() <= 64) return {Value<B>::host(a.value(0).data().reshaped(Shape(out)), a.device)};
    return {B::reshape(a[0], Shape(out))};
  }};

  t["Shape"] = {[](const Args<B>& a) -> Outs<B> {
    const Shape in = a.shape(0);
    const auto r = static_cast<std::int64_t>(in.rank());
    std::int64_t start = a.node.attr_int("start", 0), end = a.node.attr_int("end", r);
    start = std::clamp<std::int64_t>(start < 0 ? start + r : start, 0, r);
    end = std::clamp<std::int64_t>(end < 0 ? end + r : end, 0, r);
    std::vector<std::int64_t> dims(in.begin() + start, in.begin() + std::max(start, end));
    const auto n = static_cast<std::int64_t>(dims.size());
    return {host_ints(std::move(dims), Shape{n}, a)};
  }};

  t["Size"] = {[](const Args<B>& a) -> Outs<B> { return {host_ints({a.shape(0).numel()}, Shape{}, a)}; }};

  t["Constant"] = {[](const Args<B>& a) -> Outs<B> {
    if (const TensorValue* t = a.node.attr_tensor("value")) return {tensor_value<B>(*t, a.device, "Constant's value")};
    if (const Attribute* s = a.node.find("value_string")) return {Value<B>::strings(Shape{}, {s->s})};
    if (const Attribute* s = a.node.find("value_strings"))
      return {Value<B>::strings(Shape{static_cast<std::int64_t>(s->strings.size())}, s->strings)};
    return {Value<B>::host(constant_value(a.node), a.device)};
  }};

  t["ConstantOfShape"] = {[](const Args<B>& a) -> Outs<B> {
    const std::vector<std::int64_t> dims = a.ints(0);
    for (const std::int64_t d : dims) KILN_CHECK(d >= 0, "shape {} has a negative entry", dims);
    double value = 0;
    DType dtype = DType::f32;
    ElementType type = ElementType::float32;
    if (const TensorValue* t = a.node.attr_tensor("value")) {
      const TensorData& v = t->values("ConstantOfShape's value");
      KILN_CHECK(v.numel() == 1, "value must hold one element, got shape {}", v.shape());
      value = v.to_vec<double>()[0];
      dtype = v.dtype();
      type = t->type;
    }
    Value<B> out = detail::full<B>(Shape(dims), value, dtype, a.device);
    return {dtype_of(type) ? out : Value<B>::typed(std::move(out), type)};
  }};

  t["Expand"] = {[](const Args<B>& a) -> Outs<B> {
    const Shape target = broadcast_shapes("Expand", a.shape(0), Shape(a.ints(1)));
    return {detail::broadcast_to<B>(a[0], target)};
  }};

  t["Tile"] = {[](const Args<B>& a) -> Outs<B> {
    const Shape in = a.shape(0);
    const std::vector<std::int64_t> repeats = a.ints(1);
    KILN_CHECK(repeats.size() == in.rank(), "{} repeats for an input of rank {}", repeats.size(), in.rank());
    // [d0, d1] → [1, d0, 1, d1] → expanded to [r0, d0, r1, d1] → [r0 * d0, r1 * d1].
    std::vector<std::int64_t> spread, expanded, out;
    for (std::size_t d = 0; d < in.rank(); ++d) {
      KILN_CHECK(repeats[d] >= 0, "repeats {} have a negative entry", repeats);
      spread.insert(spread.end(), {1, in[d]});
      expanded.insert(expanded.end(), {repeats[d], in[d]});
      out.push_back(repeats[d] * in[d]);
    }
    return {B::reshape(B::expand(B::reshape(a[0], Shape(spread)), Shape(expanded)), Shape(out))};
  }};

  t["Pad"] = {[](const Args<B>& a) -> Outs<B> {
    const Shape in = a.shape(0);
    const std::size_t rank = in.rank();
    const std::string mode = a.node.attr_string("mode", "constant");
    if (mode != "constant" && mode != "reflect" && mode != "edge" && mode != "wrap")
      unsupported("mode '{}' (constant, reflect, edge and wrap are)", mode);
    std::vector<std::int64_t> pads = a.opset < 11 ? a.node.attr_ints(a.opset < 2 ? "paddings" : "pads") : a.ints(1);
    double value = a.opset < 11 ? a.node.attr_float("value", 0.0) : (a.has(2) ? a.scalar(2) : 0.0);
    // Pads for the named axes only (opset 18), spread over every dim.
    std::vector<std::int64_t> before(rank, 0), after(rank, 0);
    std::vector<std::size_t> dims;
    if (a.opset >= 18 && a.has(3)) {
      dims = detail::axes(a.ints(3), rank);
    } else {
      for (std::size_t d = 0; d < rank; ++d) dims.push_back(d);
    }
    KILN_CHECK(pads.size() == 2 * dims.size(), "{} pads for {} axes", pads.size(), dims.size());
    for (std::size_t i = 0; i < dims.size(); ++i) {
      before[dims[i]] = pads[i];
      after[dims[i]] = pads[i + dims.size()];
    }
    // Negative pads crop first.
    P x = a[0];
    Shape s = in;
    for (std::size_t d = 0; d < rank; ++d) {
      if (before[d] >= 0 && after[d] >= 0) continue;
      const std::int64_t lo = std::max<std::int64_t>(0, -before[d]), hi = std::max<std::int64_t>(0, -after[d]);
      KILN_CHECK(lo + hi <= s[d], "pads crop {} + {} from a dim of size {}", lo, hi, s[d]);
      x = slice_dim<B>(x, d, lo, s[d] - lo - hi);
      s[d] -= lo + hi;
      before[d] = std::max<std::int64_t>(0, before[d]);
      after[d] = std::max<std::int64_t>(0, after[d]);
    }
    if (mode == "constant") {
      Shape out = s;
      std::vector<ops::SliceRange> place;
      for (std::size_t d = 0; d < rank; ++d) {
        out[d] += before[d] + after[d];
        place.push_back({before[d], s[d], 1});
      }
      if (out == s) return {x};
      const P base = detail::full<B>(out, value, a.dtype(0), a.device);
      if (s.numel() == 0) return {base};
      return {B::slice_assign(base, place, x)};
    }
    for (std::size_t d = 0; d < rank; ++d) {
      if (before[d] == 0 && after[d] == 0) continue;
      KILN_CHECK(s[d] > 0, "cannot {}-pad an empty dim {}", mode, d);
      std::vector<std::int64_t> idx = pad_indices(s[d], before[d], after[d], mode);
      const auto n = static_cast<std::int64_t>(idx.size());
      const P index = B::from_data(TensorData::from(idx, Shape{n}), a.device);
      x = provided::index_select<B>(x, static_cast<std::int64_t>(d), index);
    }
    return {x};
  }};

  t["DepthToSpace"] = {[](const Args<B>& a) -> Outs<B> {
    const Shape in = a.shape(0);
    KILN_CHECK(in.rank() == 4, "expected an NCHW input, got {}", in);
    const std::int64_t bs = a.node.attr_int("blocksize", 0), n = in[0], c = in[1], h = in[2], w = in[3];
    KILN_CHECK(bs > 0 && c % (bs * bs) == 0, "blocksize {} does not divide the {} channels into blocks", bs, c);
    const std::int64_t oc = c / (bs * bs);
    const bool crd = a.node.attr_string("mode", "DCR") == "CRD";
    const P split = crd ? B::reshape(a[0], Shape{n, oc, bs, bs, h, w}) : B::reshape(a[0], Shape{n, bs, bs, oc, h, w});
    const std::vector<std::int64_t> perm = crd ? std::vector<std::int64_t>{0, 1, 4, 2, 5, 3}
                                               : std::vector<std::int64_t>{0, 3, 4, 1, 5, 2};
    return {B::reshape(B::permute(split, perm), Shape{n, oc, h * bs, w * bs})};
  }};

  t["SpaceToDepth"] = {[](const Args<B>& a) -> Outs<B> {
    const Shape in = a.shape(0);
    KILN_CHECK(in.rank() == 4, "expected an NCHW input, got {}", in);
    const std::int64_t bs = a.node.attr_int("blocksize", 0), n = in[0], c = in[1], h = in[2], w = in[3];
    KILN_CHECK(bs > 0 && h % bs == 0 && w % bs == 0, "blocksize {} does not divide {}", bs, in);
    const P split = B::reshape(a[0], Shape{n, c, h / bs, bs, w / bs, bs});
    const std::vector<std::int64_t> perm{0, 3, 5, 1, 2, 4};
    return {B::reshape(B::permute(split, perm), Shape{n, c * bs * bs, h / bs, w / bs})};
  }};
}

}  // namespace kiln::onnx
