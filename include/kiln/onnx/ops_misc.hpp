// ONNX's ops that fit no other group: Unique and Compress (whose output sizes depend on
// values: the positions are found on the host, the values gathered on the backend),
// ReverseSequence (a gather), BitShift (one integer program), CenterCropPad (a slice into
// zeros) and Col2Im (a scatter-add of the columns into the image).
#pragma once

#include "kiln/backend/provided_elementwise.hpp"
#include "kiln/onnx/runtime.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdint>
#include <functional>
#include <numeric>
#include <optional>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

namespace kiln::onnx {

namespace misc_detail {

template <class B> using P = typename B::Primitive;
template <class B> using Outs = std::vector<Value<B>>;
using Dims = std::vector<std::int64_t>;

inline std::int64_t product(std::span<const std::int64_t> dims) {
  return std::accumulate(dims.begin(), dims.end(), std::int64_t{1}, std::multiplies<>());
}

template <class B> P<B> upload(const Dims& values, Shape shape, const typename B::Device& device) {
  return B::from_data(TensorData::from(values, std::move(shape)), device);
}

// The slices of x at `index` (in range) along dim; none gives an empty tensor.
template <class B> P<B> take(const P<B>& x, std::size_t dim, const Dims& index, const typename B::Device& device) {
  if (index.empty()) return provided::full<B>(detail::with_dim(B::shape(x), dim, 0), 0.0, B::dtype(x), device);
  const P<B> i = upload<B>(index, Shape{static_cast<std::int64_t>(index.size())}, device);
  return provided::index_select<B>(x, static_cast<std::int64_t>(dim), i);
}

// ---------------------------------------------------------------- Unique

// NaN sorts last and equals NaN, so that sorting keeps a strict weak order (NumPy's unique
// also gathers the NaNs into one).
template <class T> bool before(T a, T b) {
  if constexpr (std::is_floating_point_v<T>) return !std::isnan(a) && (std::isnan(b) || a < b);
  else return a < b;
}

// What Unique finds among the slices: the first occurrence of each unique slice, the index
// of each slice's unique, and the counts.
struct Found {
  Dims first, inverse, counts;
};

// Unique over the slices along the middle dim of v seen as [outer, n, inner] (a flattened
// tensor is [1, numel, 1]), the values compared as T (int64 for integers, which double
// would round), in sorted or in first-seen order.
template <class T>
Found find_unique(const std::vector<T>& v, std::int64_t outer, std::int64_t n, std::int64_t inner, bool sorted) {
  const auto at = [&](std::int64_t i, std::int64_t o, std::int64_t e) {
    return v[static_cast<std::size_t>((o * n + i) * inner + e)];
  };
  const auto less = [&](std::int64_t i, std::int64_t j) {
    for (std::int64_t o = 0; o < outer; ++o)
      for (std::int64_t e = 0; e < inner; ++e) {
        if (before(at(i, o, e), at(j, o, e))) return true;
        if (before(at(j, o, e), at(i, o, e))) return false;
      }
    return false;
  };
  // Stable, so each run of equal slices starts with its first occurrence.
  Dims order(static_cast<std::size_t>(n));
  std::iota(order.begin(), order.end(), std::int64_t{0});
  std::stable_sort(order.begin(), order.end(), less);
  Found sorted_found;
  Dims group(order.size());
  for (std::size_t r = 0; r < order.size(); ++r) {
    if (r == 0 || less(order[r - 1], order[r])) {
      sorted_found.first.push_back(order[r]);
      sorted_found.counts.push_back(0);
    }
    group[static_cast<std::size_t>(order[r])] = static_cast<std::int64_t>(sorted_found.first.size()) - 1;
    ++sorted_found.counts.back();
  }
  // Unsorted, the uniques come in the order of their first occurrences: rank[g] is sorted
  // unique g's place in that order.
  Dims by_first(sorted_found.first.size()), rank(by_first.size());
  std::iota(by_first.begin(), by_first.end(), std::int64_t{0});
  if (!sorted)
    std::sort(by_first.begin(), by_first.end(), [&](std::int64_t p, std::int64_t q) {
      return sorted_found.first[static_cast<std::size_t>(p)] < sorted_found.first[static_cast<std::size_t>(q)];
    });
  Found out;
  for (std::size_t r = 0; r < by_first.size(); ++r) {
    const auto g = static_cast<std::size_t>(by_first[r]);
    rank[g] = static_cast<std::int64_t>(r);
    out.first.push_back(sorted_found.first[g]);
    out.counts.push_back(sorted_found.counts[g]);
  }
  for (const std::int64_t g : group) out.inverse.push_back(rank[static_cast<std::size_t>(g)]);
  return out;
}

// Unique's four outputs: Y (the unique slices, gathered on the backend), indices,
// inverse_indices and counts.
template <class B> Outs<B> unique(const Args<B>& a) {
  const Shape s = a.shape(0);
  const bool sorted = a.node.attr_int("sorted", 1) != 0;
  const std::optional<std::size_t> dim =
      a.node.find("axis") ? std::optional(detail::axis(a.node.attr_int("axis", 0), s.rank())) : std::nullopt;
  const std::span<const std::int64_t> dims = s.dims();
  const std::int64_t n = dim ? s[*dim] : s.numel();
  const std::int64_t outer = dim ? product(dims.subspan(0, *dim)) : 1;
  const std::int64_t inner = dim ? product(dims.subspan(*dim + 1)) : 1;
  const TensorData& data = a.value(0).data();
  const Found u = is_float(a.dtype(0)) ? find_unique(data.template to_vec<double>(), outer, n, inner, sorted)
                                       : find_unique(data.template to_vec<std::int64_t>(), outer, n, inner, sorted);
  const P<B> x = dim ? a[0] : B::reshape(a[0], Shape{n});
  const auto count = [](const Dims& v) { return Shape{static_cast<std::int64_t>(v.size())}; };
  return {take<B>(x, dim.value_or(0), u.first, a.device), upload<B>(u.first, count(u.first), a.device),
          upload<B>(u.inverse, count(u.inverse), a.device), upload<B>(u.counts, count(u.counts), a.device)};
}

// ---------------------------------------------------------------- Compress, ReverseSequence

// The slices along `axis` (or the elements of the flattened input) where the condition is
// true; a condition shorter than them drops the rest.
template <class B> Outs<B> compress(const Args<B>& a) {
  const Shape s = a.shape(0), cs = a.shape(1);
  KILN_CHECK(cs.rank() == 1, "the condition must be 1-d, got shape {}", cs);
  const std::optional<std::size_t> dim =
      a.node.find("axis") ? std::optional(detail::axis(a.node.attr_int("axis", 0), s.rank())) : std::nullopt;
  const std::int64_t n = dim ? s[*dim] : s.numel();
  KILN_CHECK(cs[0] <= n, "the condition {} is longer than the {} slices of input {}", cs, n, s);
  const std::vector<double> condition = a.value(1).data().template to_vec<double>();
  Dims index;
  for (std::size_t i = 0; i < condition.size(); ++i)
    if (condition[i] != 0) index.push_back(static_cast<std::int64_t>(i));
  return {take<B>(dim ? a[0] : B::reshape(a[0], Shape{n}), dim.value_or(0), index, a.device)};
}

// The first sequence_lens[b] steps of each batch entry reversed along the time axis: one
// gather whose index, [batch, time] in the order of the two axes, is built on the host.
template <class B> Outs<B> reverse_sequence(const Args<B>& a) {
  const Shape s = a.shape(0);
  KILN_CHECK(s.rank() >= 2, "expected an input of rank 2 or more, got {}", s);
  const std::int64_t batch_axis = a.node.attr_int("batch_axis", 1), time_axis = a.node.attr_int("time_axis", 0);
  KILN_CHECK((batch_axis == 0 && time_axis == 1) || (batch_axis == 1 && time_axis == 0),
             "batch_axis {} and time_axis {} must be 0 and 1 in some order", batch_axis, time_axis);
  const std::int64_t batch = s[static_cast<std::size_t>(batch_axis)], time = s[static_cast<std::size_t>(time_axis)];
  const Dims lens = a.ints(1);
  KILN_CHECK(static_cast<std::int64_t>(lens.size()) == batch, "sequence_lens {} must hold one length per batch entry "
             "({}) of input {}", a.shape(1), batch, s);
  Dims index(static_cast<std::size_t>(batch * time));
  for (std::int64_t b = 0; b < batch; ++b) {
    const std::int64_t len = lens[static_cast<std::size_t>(b)];
    KILN_CHECK(len >= 0 && len <= time, "sequence length {} is out of range for {} time steps", len, time);
    for (std::int64_t t = 0; t < time; ++t)
      index[static_cast<std::size_t>(batch_axis == 0 ? b * time + t : t * batch + b)] = t < len ? len - 1 - t : t;
  }
  Dims dims(s.rank(), 1);
  dims[0] = s[0];
  dims[1] = s[1];
  return {B::gather(a[0], time_axis, B::expand(upload<B>(index, Shape(dims), a.device), s))};
}

// ---------------------------------------------------------------- BitShift

// x << y as x * 2^y (wrapping as the shift does) and x >> y as floor(x / 2^y), in the
// integer program's own type: the expression language has no shifts. Where 2^y does not
// fit the type as a positive number (y at or past the sign bit), x >> y is the sign fill:
// -1 for a negative x, else 0.
// BitShift of the unsigned types held wider (UINT16, UINT32, UINT64), on the host: the left
// shift wraps to the type's width, which the held dtype's program would not.
template <class B> Outs<B> widened_bit_shift(const Args<B>& a, bool left) {
  const Value<B>&x = a.value(0), &y = a.value(1);
  const ElementType type = x.type();
  KILN_CHECK(type == y.type(), "the inputs are {} and {}: BitShift takes two of one type", x.describe(), y.describe());
  const int bits = type == ElementType::uint16 ? 16 : type == ElementType::uint32 ? 32 : type == ElementType::uint64 ? 64 : 0;
  KILN_CHECK(bits != 0, "the inputs are {}: BitShift takes unsigned integers", x.describe());
  const Shape shape = broadcast_shapes("BitShift", x.shape(), y.shape());
  const auto values = [&](const Value<B>& v) {
    return B::into_data(detail::broadcast_to<B>(v.tensor(), shape)).template to_vec<std::int64_t>();
  };
  const std::vector<std::int64_t> xs = values(x), ys = values(y);
  std::vector<std::int64_t> out(xs.size());
  for (std::size_t i = 0; i < xs.size(); ++i) {
    const auto v = static_cast<std::uint64_t>(xs[i]);
    const std::int64_t n = ys[i];
    std::uint64_t r = n >= bits ? 0 : left ? v << n : v >> n;
    if (bits < 64) r &= (std::uint64_t{1} << bits) - 1;
    if (r > static_cast<std::uint64_t>(INT64_MAX))
      unsupported("element {}: {} << {} is {}, beyond what Kiln holds of UINT64 (up to 2^63 - 1)", i, v, n, r);
    out[i] = static_cast<std::int64_t>(r);
  }
  TensorData result = TensorData::from(out, shape);
  if (x.dtype() == DType::i32) result = TensorData::from(result.to_vec<std::int32_t>(), shape);
  return {Value<B>::typed(Value<B>::host(std::move(result), a.device), type)};
}

template <class B> Outs<B> bit_shift(const Args<B>& a) {
  const DType dtype = a.dtype(0);
  KILN_CHECK(is_int(dtype) && a.dtype(1) == dtype, "expected two integer tensors of one type, got {} {} and {} {}",
             a.shape(0), dtype, a.shape(1), a.dtype(1));
  const std::string direction = a.node.attr_string("direction", "");
  KILN_CHECK(direction == "LEFT" || direction == "RIGHT", "direction must be LEFT or RIGHT, got '{}'", direction);
  const bool left = direction == "LEFT";
  if (a.value(0).widened()) return widened_bit_shift(a, left);
  const codegen::Program& p =
      detail::program(left ? "bitshift_left" : "bitshift_right", dtype, 2, 0, [left](auto in, auto) {
        using codegen::Expr, codegen::Kind;
        const Expr x = in[0], zero(0.0);
        const Expr power(codegen::make_node(Kind::int_pow, {Expr(2.0).node(), in[1].node()}));
        if (left) return x * power;
        const Expr fill = (x < zero).select(Expr(-1.0), zero);
        return (power > zero).select(Expr(codegen::make_node(Kind::int_div, {x.node(), power.node()})), fill);
      });
  return {detail::run<B>(p, {a[0], a[1]})};
}

// ---------------------------------------------------------------- CenterCropPad, Col2Im

// Each listed axis cropped or zero-padded to its new size about the center (an odd
// difference puts the extra element at the end).
template <class B> Outs<B> center_crop_pad(const Args<B>& a) {
  const Shape s = a.shape(0);
  const Dims sizes = a.ints(1);
  Dims listed = a.node.attr_ints("axes");
  if (listed.empty())
    for (std::size_t d = 0; d < s.rank(); ++d) listed.push_back(static_cast<std::int64_t>(d));
  const std::vector<std::size_t> axes = detail::axes(listed, s.rank());
  KILN_CHECK(sizes.size() == axes.size(), "shape {} must hold one size per axis {} of input {}", sizes, listed, s);
  std::vector<ops::SliceRange> crop, place;
  Dims out = s.to_vector();
  for (std::size_t d = 0; d < s.rank(); ++d) {
    crop.push_back({0, s[d], 1});
    place.push_back({0, s[d], 1});
  }
  for (std::size_t i = 0; i < axes.size(); ++i) {
    const std::size_t d = axes[i];
    const std::int64_t want = sizes[i];
    KILN_CHECK(want >= 0, "shape {} must not be negative", sizes);
    out[d] = want;
    if (want < s[d]) crop[d] = {(s[d] - want) / 2, want, 1};
    place[d] = {want > s[d] ? (want - s[d]) / 2 : 0, std::min(want, s[d]), 1};
  }
  const P<B> cropped = B::slice(a[0], crop);
  if (Shape(out) == B::shape(cropped)) return {cropped};
  return {B::slice_assign(provided::full<B>(Shape(out), 0.0, a.dtype(0), a.device), place, cropped)};
}

// Col2Im: the columns [N, C * prod(block), L] added back into an image [N, C, image...],
// the adjoint of im2col; each column element's image position is worked out on the host,
// those in the padding go to one spare element past the image, dropped afterwards.
template <class B> Outs<B> col2im(const Args<B>& a) {
  const Shape s = a.shape(0);
  const Dims image = a.ints(1), block = a.ints(2);
  const std::size_t n = image.size();
  KILN_CHECK(s.rank() == 3 && n >= 1 && block.size() == n, "expected an input [N, C * prod(block), L] with image_shape "
             "and block_shape of one length, got {}, {} and {}", s, image, block);
  const Dims dilation = a.node.attr_ints("dilations", Dims(n, 1)), stride = a.node.attr_ints("strides", Dims(n, 1));
  const Dims pads = a.node.attr_ints("pads", Dims(2 * n, 0));
  KILN_CHECK(dilation.size() == n && stride.size() == n && pads.size() == 2 * n,
             "dilations {}, strides {} and pads {} must have {} entries ({} for pads)", dilation, stride, pads, n,
             2 * n);
  const std::int64_t k = product(block), pixels = product(image);
  KILN_CHECK(k >= 1 && s[1] % k == 0, "the input's dim 1 ({}) must be a multiple of prod(block_shape {})", s[1], block);
  Dims blocks(n);  // the number of block positions along each dim
  for (std::size_t d = 0; d < n; ++d) {
    const std::int64_t span = dilation[d] * (block[d] - 1) + 1;
    blocks[d] = (image[d] + pads[d] + pads[n + d] - span) / stride[d] + 1;
  }
  const std::int64_t length = product(blocks), channels = s[1] / k;
  KILN_CHECK(s[2] == length,
             "input {} must have {} columns for image_shape {}, block_shape {}, strides {}, pads {} and dilations {}",
             s, length, image, block, stride, pads, dilation);
  Dims index(static_cast<std::size_t>(k * length));
  for (std::int64_t tap = 0; tap < k; ++tap)
    for (std::int64_t column = 0; column < length; ++column) {
      // The position along each dim, from the last one back (row-major), and the flat one.
      std::int64_t flat = 0, scale = 1, t = tap, c = column;
      bool inside = true;
      for (std::size_t d = n; d-- > 0; scale *= image[d], c /= blocks[d], t /= block[d]) {
        const std::int64_t at = (c % blocks[d]) * stride[d] + (t % block[d]) * dilation[d] - pads[d];
        inside = inside && at >= 0 && at < image[d];
        flat += at * scale;
      }
      index[static_cast<std::size_t>(tap * length + column)] = inside ? flat : pixels;
    }
  const Shape columns{s[0], channels, k * length};
  const P<B> target = B::expand(upload<B>(index, Shape{1, 1, k * length}, a.device), columns);
  const P<B> sums = B::scatter(provided::full<B>(Shape{s[0], channels, pixels + 1}, 0.0, a.dtype(0), a.device), 2,
                               target, B::reshape(a[0], columns), ops::ScatterMode::add);
  Dims out{s[0], channels};
  out.insert(out.end(), image.begin(), image.end());
  const std::vector<ops::SliceRange> kept{{0, s[0], 1}, {0, channels, 1}, {0, pixels, 1}};
  return {B::reshape(B::slice(sums, kept), Shape(out))};
}

// ---------------------------------------------------------------- StringNormalizer

// StringNormalizer: a STRING tensor of [C] or [1, C] strings without the stopwords (compared
// case-sensitively or not), then upper- or lower-cased; when every string is a stopword, one
// empty string. Case changes are ASCII's (the locale attribute is read as "en_US" and others
// are Unsupported).
template <class B> Outs<B> string_normalizer(const Args<B>& a) {
  const Value<B>& x = a.value(0);
  const Shape s = x.shape();
  KILN_CHECK(s.rank() == 1 || (s.rank() == 2 && s[0] == 1), "the input must be [C] or [1, C], got {}", s);
  const std::string action = a.node.attr_string("case_change_action", "NONE");
  KILN_CHECK(action == "NONE" || action == "LOWER" || action == "UPPER",
             "case_change_action must be NONE, LOWER or UPPER, got '{}'", action);
  const std::string locale = a.node.attr_string("locale", "");
  if (!locale.empty() && locale != "en_US" && locale != "C") unsupported("locale '{}' (Kiln changes case as ASCII does)", locale);
  const bool sensitive = a.node.attr_int("is_case_sensitive", 0) != 0;
  const auto lower = [](std::string t) {
    for (char& c : t) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return t;
  };
  std::vector<std::string> stopwords = a.node.attr_strings("stopwords");
  if (!sensitive)
    for (std::string& w : stopwords) w = lower(w);
  std::vector<std::string> out;
  for (const std::string& text : x.string_values()) {
    const std::string key = sensitive ? text : lower(text);
    if (std::find(stopwords.begin(), stopwords.end(), key) != stopwords.end()) continue;
    std::string kept = text;
    for (char& c : kept)
      c = static_cast<char>(action == "UPPER"   ? std::toupper(static_cast<unsigned char>(c))
                            : action == "LOWER" ? std::tolower(static_cast<unsigned char>(c))
                                                : c);
    out.push_back(std::move(kept));
  }
  if (out.empty()) out.emplace_back();
  const auto c = static_cast<std::int64_t>(out.size());
  return {Value<B>::strings(s.rank() == 1 ? Shape{c} : Shape{1, c}, std::move(out))};
}

}  // namespace misc_detail

// The op types add_misc_ops registers (checked when a table is built): a module that
// kiln-onnx2cpp generates takes only the groups its graph uses.
inline constexpr std::string_view kMiscOps[] = {
    "Unique", "Compress", "ReverseSequence", "BitShift", "CenterCropPad", "Col2Im", "StringNormalizer"};
inline constexpr OpGroup kMiscGroup{"misc", kMiscOps};

template <class B> void add_misc_ops(OpTable<B>& t) {
  using namespace misc_detail;
  t["Unique"] = {unique<B>, 11};
  t["Compress"] = {compress<B>, 9};
  t["StringNormalizer"] = {string_normalizer<B>, 10};
  t["ReverseSequence"] = {reverse_sequence<B>, 10};
  t["BitShift"] = {bit_shift<B>, 11};
  t["CenterCropPad"] = {center_crop_pad<B>, 18};
  t["Col2Im"] = {col2im<B>, 18};
}

}  // namespace kiln::onnx
