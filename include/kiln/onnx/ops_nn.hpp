// ONNX's neural-network ops: matrix products, convolution and pooling (1-d and 2-d run as
// Kiln's 2-d primitives with a height of 1; 3-d max/average pooling and ConvTranspose are
// composed from the same 2-d primitives), normalizations, softmax and dropout, and the
// helpers that the recurrent layers (ops_rnn.hpp) and Resize (ops_resize.hpp) share.
// Attributes are resolved and checked against the input shapes here, before any primitive
// runs; forms Kiln does not implement (3-d Conv and LpPool, windows over more than 3 dims,
// recurrent activations other than Sigmoid/Tanh/Relu, antialiasing...) are `unsupported`.
#pragma once

#include "kiln/backend/provided_elementwise.hpp"
#include "kiln/onnx/runtime.hpp"
#include "kiln/ops/nn.hpp"

#include <array>
#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <random>
#include <string>
#include <utility>
#include <vector>

namespace kiln::onnx {

namespace nn_detail {

template <class B> using P = typename B::Primitive;
template <class B> using Outs = std::vector<Value<B>>;
using Dims = std::vector<std::int64_t>;
using Pair = std::array<std::int64_t, 2>;

template <class B> P<B> add(const P<B>& a, const P<B>& b) { return provided::binary<B, ops::Add>(a, b); }
template <class B> P<B> sub(const P<B>& a, const P<B>& b) { return provided::binary<B, ops::Sub>(a, b); }
template <class B> P<B> mul(const P<B>& a, const P<B>& b) { return provided::binary<B, ops::Mul>(a, b); }
template <class B> P<B> div(const P<B>& a, const P<B>& b) { return provided::binary<B, ops::Div>(a, b); }

template <class B> void check_float(const Args<B>& a, std::size_t i) {
  KILN_CHECK(is_float(a.dtype(i)), "input {} must be a float tensor, got {} {}", i, a.shape(i), a.dtype(i));
}
// Whether the node asks for its output i (listed and named).
template <class B> bool wants(const Args<B>& a, std::size_t i) {
  return a.node.outputs.size() > i && !a.node.outputs[i].empty();
}
// An optional input that is present and not empty (ONNX marks some omitted inputs with an empty tensor).
template <class B> bool given(const Args<B>& a, std::size_t i) { return a.has(i) && a.shape(i).numel() > 0; }

// Host values as a tensor of `dtype`, converted on the host.
template <class B, class T>
P<B> constant(const std::vector<T>& values, Shape shape, DType dtype, const typename B::Device& device) {
  TensorData data = TensorData::from(values, std::move(shape));
  return B::from_data(data.dtype() == dtype ? std::move(data) : data.convert(dtype), device);
}
// [1, ..., n, ..., 1]: `n` at `dim` of a rank-`rank` shape, for values that vary along one dim.
inline Shape along(std::size_t rank, std::size_t dim, std::int64_t n) {
  Dims dims(rank, 1);
  dims[dim] = n;
  return Shape(std::move(dims));
}
template <class B> P<B> with_dtype(const P<B>& x, DType dtype) { return B::dtype(x) == dtype ? x : B::cast(x, dtype); }

// `size` entries of x along `dim` from `start`.
template <class B> P<B> slice_dim(const P<B>& x, std::size_t dim, std::int64_t start, std::int64_t size) {
  const Shape s = B::shape(x);
  std::vector<ops::SliceRange> ranges(s.rank());
  for (std::size_t d = 0; d < s.rank(); ++d) ranges[d] = {0, s[d], 1};
  ranges[dim] = {start, size, 1};
  return B::slice(x, ranges);
}

template <class B> P<B> insert_dim(const P<B>& x, std::size_t dim) {
  Dims dims = B::shape(x).to_vector();
  dims.insert(dims.begin() + static_cast<std::ptrdiff_t>(dim), 1);
  return B::reshape(x, Shape(std::move(dims)));
}
template <class B> P<B> erase_dim(const P<B>& x, std::size_t dim) {
  Dims dims = B::shape(x).to_vector();
  dims.erase(dims.begin() + static_cast<std::ptrdiff_t>(dim));
  return B::reshape(x, Shape(std::move(dims)));
}

// A per-channel vector [C] shaped to broadcast over an [N, C, ...] tensor of `rank` dims.
template <class B> P<B> per_channel(const Args<B>& a, std::size_t i, std::int64_t channels, std::size_t rank,
                                     DType dtype) {
  KILN_CHECK(a.shape(i).numel() == channels, "input {} must hold one value per channel ({}), got shape {}", i,
             channels, a.shape(i));
  return with_dtype<B>(B::reshape(a[i], along(rank, 1, channels)), dtype);
}

// ---------------------------------------------------------------- windows (Conv, pooling)

// The number of spatial dims of a windowed op's input: 1 to `most` (2 for the ops that run
// one 2-d primitive, 3 for those composed from several).
template <class B> std::size_t spatial_dims(const Args<B>& a, std::string_view what, std::size_t most = 2) {
  const Shape s = a.shape(0);
  KILN_CHECK(s.rank() >= 3, "expected an input [N, C, spatial...] of rank 3 or more, got {}", s);
  if (s.rank() > most + 2)
    unsupported("{}-d {} (input {}): Kiln runs 1-d to {}-d {}", s.rank() - 2, what, s, most, what);
  return s.rank() - 2;
}

// One spatial axis of a convolution or pooling window; `begin`/`end` are the padding before and after.
struct WindowAxis {
  std::int64_t kernel = 1, stride = 1, dilation = 1, begin = 0, end = 0;
};

// A convolution or pooling window in 2-d form: a 1-d node gets a height of 1 (kernel,
// stride and dilation 1, no padding).
struct Window {
  Pair kernel{1, 1}, stride{1, 1}, dilation{1, 1}, begin{0, 0}, end{0, 0};
  bool padded() const { return begin != Pair{0, 0} || end != Pair{0, 0}; }
};

inline Window plane_window(const WindowAxis& h, const WindowAxis& w) {
  return {{h.kernel, w.kernel}, {h.stride, w.stride}, {h.dilation, w.dilation}, {h.begin, w.begin}, {h.end, w.end}};
}

// An ints attribute with one entry per spatial dim (`count` of them), `fallback` when absent.
inline Extents spatial_attr(const Node& node, std::string_view name, std::size_t count, std::int64_t fallback,
                            const Shape& x) {
  const auto given = node.find_ints(name);
  if (!given) return Extents(count, fallback);
  KILN_CHECK(given->size() == count, "{} has {} entries, expected {} for input {}", name, given->size(), count, x);
  return Extents(*given);
}

// The window of a Conv or pooling node over input x, one axis per spatial dim of x, with
// `kernel`: strides, dilations, and the padding from `pads` or auto_pad.
inline std::vector<WindowAxis> window_axes(const Node& node, const Shape& x, std::span<const std::int64_t> kernel) {
  const std::size_t n = x.rank() - 2;
  const Extents stride = spatial_attr(node, "strides", n, 1, x), dilation = spatial_attr(node, "dilations", n, 1, x);
  const Extents pads = spatial_attr(node, "pads", 2 * n, 0, x);
  const std::string auto_pad = node.attr_string("auto_pad", "NOTSET");
  std::vector<WindowAxis> axes(n);
  for (std::size_t i = 0; i < n; ++i) {
    KILN_CHECK(kernel[i] >= 1 && stride[i] >= 1 && dilation[i] >= 1,
               "kernel {}, strides {} and dilations {} must be positive (input {})", kernel, stride, dilation, x);
    const std::int64_t in = x[2 + i], span = dilation[i] * (kernel[i] - 1) + 1;
    std::int64_t begin = 0, end = 0;
    if (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
      // The output keeps ceil(in / stride) positions; an odd total puts the extra cell at
      // the end (SAME_UPPER) or at the start (SAME_LOWER).
      const std::int64_t out = (in + stride[i] - 1) / stride[i];
      const std::int64_t total = std::max<std::int64_t>(0, (out - 1) * stride[i] + span - in);
      begin = auto_pad == "SAME_UPPER" ? total / 2 : total - total / 2;
      end = total - begin;
    } else if (auto_pad == "NOTSET" || auto_pad.empty()) {
      begin = pads[i];
      end = pads[n + i];
      KILN_CHECK(begin >= 0 && end >= 0, "pads {} must not be negative (input {})", pads, x);
    } else if (auto_pad != "VALID") {
      unsupported("auto_pad '{}' is not one of NOTSET, SAME_UPPER, SAME_LOWER and VALID", auto_pad);
    }
    axes[i] = {kernel[i], stride[i], dilation[i], begin, end};
  }
  return axes;
}

// The window of a node over a 1-d or 2-d input x in 2-d form (a 1-d window fills the width).
inline Window window(const Node& node, const Shape& x, std::span<const std::int64_t> kernel) {
  const std::vector<WindowAxis> axes = window_axes(node, x, kernel);
  return axes.size() == 1 ? plane_window({}, axes[0]) : plane_window(axes[0], axes[1]);
}

// The kernel_shape attribute (required by pooling; optional for Conv, where it must match the weight).
inline Extents kernel_attr(const Node& node, std::size_t n, const Shape& x) {
  KILN_CHECK(node.find("kernel_shape") != nullptr, "the kernel_shape attribute is required");
  return spatial_attr(node, "kernel_shape", n, 1, x);
}

// x [N, C, H, W] inside a border of `value`, as wide as the window's padding.
template <class B> P<B> pad(const P<B>& x, const Window& w, double value) {
  if (!w.padded()) return x;
  const Shape s = B::shape(x);
  const Shape padded{s[0], s[1], s[2] + w.begin[0] + w.end[0], s[3] + w.begin[1] + w.end[1]};
  const std::array<ops::SliceRange, 4> inner{
      {{0, s[0], 1}, {0, s[1], 1}, {w.begin[0], s[2], 1}, {w.begin[1], s[3], 1}}};
  return B::slice_assign(provided::full<B>(padded, value, B::dtype(x), B::device(x)), inner, x);
}

// Whether a window's padding is one the pooling primitives take (PyTorch's rule: the same
// on both sides and at most half the kernel); other padding is added explicitly.
inline bool pool_padding_fits(const Window& w) {
  return w.begin == w.end && w.begin[0] <= w.kernel[0] / 2 && w.begin[1] <= w.kernel[1] / 2;
}

// ONNX drops a ceil_mode window that would start in the end padding. Given that padding as an
// explicit border, the primitive sees a longer input and keeps such a last window: y [N, C,
// H', W'] pooled from x [N, C, H, W] is cut to the windows that start before the end padding.
template <class B> P<B> drop_end_windows(P<B> y, const Shape& x, const Window& w) {
  for (std::size_t d = 0; d < 2; ++d) {
    const std::int64_t keep = (x[2 + d] + w.begin[d] - 1) / w.stride[d] + 1;
    if (B::shape(y)[2 + d] > keep) y = slice_dim<B>(y, 2 + d, 0, keep);
  }
  return y;
}

// ---------------------------------------------------------------- Conv, ConvTranspose

// The kernel's spatial dims, from the weight [O, C/G, k...] of the input's rank, checked
// against kernel_shape where the node gives it.
inline Extents weight_kernel(const Node& node, std::size_t n, const Shape& xs, const Shape& ws) {
  KILN_CHECK(ws.rank() == xs.rank(), "the weight {} must have the rank of the input {}", ws, xs);
  const Extents kernel(std::span<const std::int64_t>(ws.begin() + 2, ws.end()));
  if (node.find("kernel_shape"))
    KILN_CHECK(kernel_attr(node, n, xs) == kernel, "kernel_shape {} differs from the weight's kernel {}",
               kernel_attr(node, n, xs), ws);
  return kernel;
}

template <class B> Outs<B> conv(const Args<B>& a) {
  const std::size_t n = spatial_dims(a, "convolution");
  const Shape xs = a.shape(0), ws = a.shape(1);
  const Extents kernel = weight_kernel(a.node, n, xs, ws);
  std::optional<P<B>> bias;
  if (a.has(2)) bias = a[2];
  ops::check_conv_dtypes("Conv", xs, a.dtype(0), ws, a.dtype(1),
                         a.has(2) ? std::optional(std::pair{a.shape(2), a.dtype(2)}) : std::nullopt, ws[0]);
  const Window win = window(a.node, xs, kernel);
  ops::Conv2dOptions o{win.stride, {0, 0}, win.dilation, a.node.attr_int("group", 1)};
  P<B> x = n == 1 ? insert_dim<B>(a[0], 2) : a[0], w = n == 1 ? insert_dim<B>(a[1], 2) : a[1];
  // Symmetric padding is the primitive's; asymmetric padding is a zero border added first.
  if (win.begin == win.end) o.padding = win.begin;
  else x = pad<B>(x, win, 0.0);
  ops::conv_output_shape("Conv", B::shape(x), B::shape(w), o.stride, o.padding, o.dilation, o.groups);
  // The folded activation inside the convolution where the backend takes it.
  std::optional<P<B>> y;
  if constexpr (ConvPrograms<B>) {
    if (a.epilogue) {
      std::vector<P<B>> fused =
          B::conv2d_program(x, w, bias, o, detail::epilogue_program(a.epilogue, B::dtype(x), false), {}, {});
      if (!fused.empty()) y = std::move(fused.front());
    }
  }
  if (!y) y = detail::apply_epilogue(a, B::conv2d(x, w, bias, o));
  return {n == 1 ? erase_dim<B>(*y, 2) : *y};
}

// The whole unpadded output of a transposed convolution of x [N, IC, spatial...] by w [IC,
// OC/group, kernel...] with 1 to 3 spatial dims: every position a kernel tap reaches, as the
// input gradient of a 2-d convolution. A 3-d one takes two: the (H, W) planes of every
// depth at once, x as [N*D, IC, H, W] and the depth taps folded into the output channels
// (w as [IC, OC/group*KD, KH, KW], no copy), then the depth taps scattered and summed along
// D by a transposed convolution with a one-hot kernel [KD, 1, KD, 1] over [N*OC, KD, D, HW].
template <class B> P<B> conv_transpose_full(const P<B>& x, const P<B>& w, const Extents& stride, const Extents& dilation,
                                            std::int64_t group) {
  const Shape xs = B::shape(x), ws = B::shape(w);
  const std::size_t n = xs.rank() - 2;
  const Shape full = ops::conv_transpose_output_shape("ConvTranspose", xs, ws, stride, Dims(n, 0), Dims(n, 0),
                                                      dilation, group);
  if (n < 3) {
    const std::size_t at = 2 - n;
    ops::Conv2dOptions o{{1, 1}, {0, 0}, {1, 1}, group};
    for (std::size_t i = 0; i < n; ++i) {
      o.stride[at + i] = stride[i];
      o.dilation[at + i] = dilation[i];
    }
    if (n == 2) return B::conv2d_backward_input(x, w, full, o);
    const Shape plane{full[0], full[1], 1, full[2]};
    return erase_dim<B>(B::conv2d_backward_input(insert_dim<B>(x, 2), insert_dim<B>(w, 2), plane, o), 2);
  }
  const std::int64_t batch = xs[0], in_channels = xs[1], depth = xs[2], channels = full[1], taps = ws[2];
  const std::int64_t height = full[3], width = full[4];
  const std::array<std::int64_t, 5> depth_first{0, 2, 1, 3, 4};
  const P<B> planes = B::reshape(B::permute(x, depth_first), Shape{batch * depth, in_channels, xs[3], xs[4]});
  const P<B> w_planes = B::reshape(w, Shape{ws[0], ws[1] * taps, ws[3], ws[4]});
  const ops::Conv2dOptions o_planes{{stride[1], stride[2]}, {0, 0}, {dilation[1], dilation[2]}, group};
  // [N*D, OC*KD, H', W'] = [N, D, OC, KD, H'*W'] -> [N, OC, KD, D, H'*W']
  const P<B> y_planes = B::conv2d_backward_input(planes, w_planes, Shape{batch * depth, channels * taps, height, width},
                                                 o_planes);
  const std::array<std::int64_t, 5> taps_first{0, 2, 3, 1, 4};
  const P<B> per_tap = B::reshape(
      B::permute(B::reshape(y_planes, Shape{batch, depth, channels, taps, height * width}), taps_first),
      Shape{batch * channels, taps, depth, height * width});
  std::vector<float> one_hot(static_cast<std::size_t>(taps * taps), 0.0f);
  for (std::int64_t k = 0; k < taps; ++k) one_hot[static_cast<std::size_t>(k * taps + k)] = 1.0f;
  const P<B> scatter = constant<B>(one_hot, Shape{taps, 1, taps, 1}, B::dtype(x), B::device(x));
  const ops::Conv2dOptions o_depth{{stride[0], 1}, {0, 0}, {dilation[0], 1}, 1};
  const P<B> y = B::conv2d_backward_input(per_tap, scatter, Shape{batch * channels, 1, full[2], height * width},
                                          o_depth);
  return B::reshape(y, full);
}

// ConvTranspose as the input gradient of a convolution: the primitive computes the whole
// unpadded output (every position a kernel tap reaches), from which ONNX's output is the
// window [begin, begin + out); positions past the computed ones (output_padding, negative
// padding) are zero.
template <class B> Outs<B> conv_transpose(const Args<B>& a) {
  const std::size_t n = spatial_dims(a, "transposed convolution", 3), rank = n + 2;
  const Shape xs = a.shape(0), ws = a.shape(1);
  (void)weight_kernel(a.node, n, xs, ws);
  const Extents stride = spatial_attr(a.node, "strides", n, 1, xs), dilation = spatial_attr(a.node, "dilations", n, 1, xs);
  const Extents output_padding = spatial_attr(a.node, "output_padding", n, 0, xs);
  const Extents pads = spatial_attr(a.node, "pads", 2 * n, 0, xs);
  Dims output_shape = a.node.attr_ints("output_shape");
  if (output_shape.size() == n + 2) output_shape.erase(output_shape.begin(), output_shape.begin() + 2);
  KILN_CHECK(output_shape.empty() || output_shape.size() == n, "output_shape {} must have {} entries (input {})",
             output_shape, n, xs);
  const std::string auto_pad = a.node.attr_string("auto_pad", "NOTSET");
  const bool same = auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER";
  if (!same && auto_pad != "NOTSET" && auto_pad != "VALID" && !auto_pad.empty())
    unsupported("auto_pad '{}' is not one of NOTSET, SAME_UPPER, SAME_LOWER and VALID", auto_pad);
  const std::int64_t group = a.node.attr_int("group", 1);

  const P<B> y_full = conv_transpose_full<B>(a[0], a[1], stride, dilation, group);
  const Shape full = B::shape(y_full);
  Dims begin(n, 0), out(n, 1);
  for (std::size_t i = 0; i < n; ++i) {
    const std::int64_t extent = full[2 + i] + output_padding[i];
    KILN_CHECK(output_padding[i] >= 0, "output_padding {} must not be negative", output_padding);
    std::int64_t b = pads[i], size = extent - pads[i] - pads[n + i];
    if (!output_shape.empty() || same) {
      // The padding follows from the output size; an odd total puts the extra cell at the
      // end for SAME_UPPER and at the start otherwise (ONNX's rule for ConvTranspose, with
      // Python's floor division: a negative total, an output larger than the computed
      // one, adds zeros at the end).
      size = output_shape.empty() ? xs[2 + i] * stride[i] : output_shape[i];
      const std::int64_t total = extent - size, half = total >= 0 ? total / 2 : -((1 - total) / 2);
      b = auto_pad == "SAME_UPPER" ? half : total - half;
    } else if (auto_pad == "VALID") {
      b = 0;
      size = extent;
    }
    KILN_CHECK(size >= 1, "input {}, weight {}, strides {}, pads {} and output_padding {} give an empty output", xs, ws,
               stride, pads, output_padding);
    begin[i] = b;
    out[i] = size;
  }
  Dims out_dims{full[0], full[1]};
  std::vector<ops::SliceRange> from{{0, full[0], 1}, {0, full[1], 1}}, to = from;
  bool whole = true, empty = false;
  for (std::size_t i = 0; i < n; ++i) {
    const std::int64_t lo = std::max<std::int64_t>(0, -begin[i]), hi = std::min(out[i], full[2 + i] - begin[i]);
    const std::int64_t length = std::max<std::int64_t>(0, hi - lo);
    from.push_back({lo + begin[i], length, 1});
    to.push_back({lo, length, 1});
    out_dims.push_back(out[i]);
    whole = whole && lo == 0 && length == out[i];
    empty = empty || length == 0;
  }
  P<B> y = whole ? B::slice(y_full, from) : provided::full<B>(Shape(std::move(out_dims)), 0.0, a.dtype(0), a.device);
  if (!whole && !empty) y = B::slice_assign(y, to, B::slice(y_full, from));
  if (a.has(2)) y = add<B>(y, per_channel(a, 2, full[1], rank, a.dtype(0)));
  return {y};
}

// ---------------------------------------------------------------- pooling

// x [N, C, spatial...] (1 to 3 spatial dims) pooled over `axes` by `plane`, a 2-d pooling
// of [N, C, H, W] over a Window. A 3-d window runs as two 2-d ones, since max and average
// pooling are separable over its axes (every window is a product of one range per axis, and
// ONNX's divisors, with or without the padding, are products of one count per axis): the
// (H, W) planes of every depth first, as [N, C*D, H, W], then the depth, as [N, C, D, H'*W']
// with a window of width 1. Each axis keeps its own padding, dilation and ceil_mode rule.
template <class B, class Plane> P<B> pool(const P<B>& x, const std::vector<WindowAxis>& axes, Plane&& plane) {
  if (axes.size() == 1) return erase_dim<B>(plane(insert_dim<B>(x, 2), plane_window({}, axes[0])), 2);
  if (axes.size() == 2) return plane(x, plane_window(axes[0], axes[1]));
  const Shape s = B::shape(x);
  const P<B> hw = plane(B::reshape(x, Shape{s[0], s[1] * s[2], s[3], s[4]}), plane_window(axes[1], axes[2]));
  const Shape hws = B::shape(hw);
  const P<B> y = plane(B::reshape(hw, Shape{s[0], s[1], s[2], hws[2] * hws[3]}), plane_window(axes[0], {}));
  return B::reshape(y, Shape{s[0], s[1], B::shape(y)[2], hws[2], hws[3]});
}

// Max pooling of x [N, C, H, W] over a 2-d window, with a border of -inf where the
// primitive's padding does not fit. With `index`, also each maximum's row-major position in
// its unpadded H x W plane, converted on the host (Indices are rarely asked for).
template <class B> P<B> max_pool_plane(P<B> x, const Window& win, bool ceil_mode, std::vector<std::int64_t>* index) {
  ops::Pool2dOptions o{win.kernel, win.stride, {0, 0}, win.dilation, ceil_mode, true};
  const Shape plane = B::shape(x);
  const std::int64_t width = plane[3];
  const bool explicit_pad = !pool_padding_fits(win);
  if (explicit_pad) x = pad<B>(x, win, -std::numeric_limits<double>::infinity());
  else o.padding = win.begin;
  ops::pool2d_output_shape("MaxPool", B::shape(x), o);
  if constexpr (requires { B::max_pool2d_values(x, o); }) {
    // Without Indices asked for, a backend that pools without them skips writing them.
    if (!index) {
      P<B> y = B::max_pool2d_values(x, o);
      return explicit_pad && ceil_mode ? drop_end_windows<B>(y, plane, win) : y;
    }
  }
  auto [y, at] = B::max_pool2d(x, o);
  if (explicit_pad && ceil_mode) {
    y = drop_end_windows<B>(y, plane, win);
    if (index) at = drop_end_windows<B>(at, plane, win);
  }
  if (index) {
    // The primitive counts within the plane it was given, the padded one when the border is explicit.
    const std::int64_t padded_w = B::shape(x)[3];
    *index = B::into_data(at).template to_vec<std::int64_t>();
    for (std::int64_t& p : *index) {
      const std::int64_t row = p / padded_w - (explicit_pad ? win.begin[0] : 0);
      const std::int64_t col = p % padded_w - (explicit_pad ? win.begin[1] : 0);
      p = row * width + col;
    }
  }
  return y;
}

template <class B> Outs<B> max_pool(const Args<B>& a) {
  const std::size_t n = spatial_dims(a, "max pooling", 3);
  const Shape xs = a.shape(0);
  const bool column_major = a.node.attr_int("storage_order", 0) != 0;
  const bool ceil_mode = a.node.attr_int("ceil_mode", 0) != 0;
  const std::vector<WindowAxis> axes = window_axes(a.node, xs, kernel_attr(a.node, n, xs));
  // Integer tensors pool as floats: f32 holds every 8-bit value, f64 every 32-bit one.
  const DType dtype = a.dtype(0), work = is_float(dtype) ? dtype : dtype == DType::u8 ? DType::f32 : DType::f64;
  std::vector<std::vector<std::int64_t>> stages;  // each 2-d stage's positions, when Indices are asked for
  const P<B> y = pool<B>(with_dtype<B>(a[0], work), axes, [&](const P<B>& x, const Window& win) {
    std::vector<std::int64_t>* index = nullptr;
    if (wants(a, 1)) index = &stages.emplace_back();
    return max_pool_plane<B>(x, win, ceil_mode, index);
  });
  Outs<B> outs{with_dtype<B>(y, dtype)};
  if (wants(a, 1)) {
    // ONNX's Indices count over the whole input, row-major, or with the first spatial dim
    // fastest for storage_order 1. A 3-d maximum's depth comes from the depth stage, whose
    // planes are [D, H'*W'], and its (h, w) from the plane stage at that depth.
    const Shape ys = B::shape(y);
    const std::int64_t depth = n == 3 ? xs[2] : 1, height = n == 1 ? 1 : xs[n], width = xs[n + 1];
    const std::int64_t out_plane = n == 3 ? ys[3] * ys[4] : 1, per_channel_out = ys.numel() / (ys[0] * ys[1]);
    std::vector<std::int64_t> flat = stages.back();
    for (std::size_t i = 0; i < flat.size(); ++i) {
      const std::int64_t channel = static_cast<std::int64_t>(i) / per_channel_out;
      std::int64_t d = 0, hw = flat[i];
      if (n == 3) {
        d = flat[i] / out_plane;
        // A window wholly inside pads wider than the kernel holds no input element.
        hw = d < 0 || d >= depth ? -1
                                 : stages[0][static_cast<std::size_t>((channel * depth + d) * out_plane +
                                                                      static_cast<std::int64_t>(i) % out_plane)];
      }
      const std::int64_t h = hw / width, w = hw % width;
      flat[i] = channel * depth * height * width +
                (column_major ? (w * height + h) * depth + d : (d * height + h) * width + w);
    }
    outs.push_back(constant<B>(flat, ys, DType::i64, a.device));
  }
  return outs;
}

// Average pooling of x [N, C, H, W] over a 2-d window. Padding the primitive does not take is
// a zero border; without count_include_pad each window's mean is then rescaled by the share
// of it inside the input, the same pooling of ones.
template <class B> P<B> average_pool_plane(const P<B>& x, const Window& win, bool ceil_mode, bool include_pad) {
  ops::Pool2dOptions o{win.kernel, win.stride, {0, 0}, {1, 1}, ceil_mode, include_pad};
  if (pool_padding_fits(win)) {
    o.padding = win.begin;
    ops::pool2d_output_shape("AveragePool", B::shape(x), o);
    return provided::avg_pool2d<B>(x, o);
  }
  const Shape s = B::shape(x);
  o.count_include_pad = true;
  const auto pooled = [&](const P<B>& plane) {
    const P<B> padded = pad<B>(plane, win, 0.0);
    ops::pool2d_output_shape("AveragePool", B::shape(padded), o);
    const P<B> y = provided::avg_pool2d<B>(padded, o);
    return ceil_mode ? drop_end_windows<B>(y, s, win) : y;
  };
  const P<B> y = pooled(x);
  if (include_pad) return y;
  return div<B>(y, pooled(provided::full<B>(Shape{1, 1, s[2], s[3]}, 1.0, B::dtype(x), B::device(x))));
}

template <class B> Outs<B> average_pool(const Args<B>& a) {
  const std::size_t n = spatial_dims(a, "average pooling", 3);
  check_float(a, 0);
  const Shape xs = a.shape(0);
  const std::vector<WindowAxis> axes = window_axes(a.node, xs, kernel_attr(a.node, n, xs));
  for (const WindowAxis& axis : axes)
    if (axis.dilation != 1) unsupported("AveragePool with dilations {}", a.node.attr_ints("dilations"));
  const bool include_pad = a.node.attr_int("count_include_pad", 0) != 0;
  const bool ceil_mode = a.node.attr_int("ceil_mode", 0) != 0;
  return {pool<B>(a[0], axes, [&](const P<B>& x, const Window& win) {
    return average_pool_plane<B>(x, win, ceil_mode, include_pad);
  })};
}

// LpPool: (sum of |x|^p over each window)^(1/p), from average pooling of |x|^p with the
// padding counted (a zero border), times the window's size.
template <class B> Outs<B> lp_pool(const Args<B>& a) {
  const std::size_t n = spatial_dims(a, "Lp pooling");
  check_float(a, 0);
  const Shape xs = a.shape(0);
  const Window win = window(a.node, xs, kernel_attr(a.node, n, xs));
  if (win.dilation != Pair{1, 1}) unsupported("LpPool with dilations {}", win.dilation);
  if (a.node.attr_int("ceil_mode", 0) != 0) unsupported("LpPool with ceil_mode 1");
  const double p = static_cast<double>(a.node.attr_int("p", 2));
  KILN_CHECK(p >= 1, "p must be at least 1, got {}", p);
  const ops::Pool2dOptions o{win.kernel, win.stride, {0, 0}, {1, 1}, false, true};
  const P<B> x = n == 1 ? insert_dim<B>(a[0], 2) : a[0];
  const P<B> powered = pad<B>(provided::binary_scalar<B, ops::Pow>(provided::unary<B, ops::Abs>(x), p), win, 0.0);
  ops::pool2d_output_shape("LpPool", B::shape(powered), o);
  const double taps = static_cast<double>(win.kernel[0] * win.kernel[1]);
  const P<B> sum = provided::binary_scalar<B, ops::Mul>(provided::avg_pool2d<B>(powered, o), taps);
  const P<B> y = provided::binary_scalar<B, ops::Pow>(sum, 1.0 / p);
  return {n == 1 ? erase_dim<B>(y, 2) : y};
}

template <class B> Outs<B> global_pool(const Args<B>& a, ops::ReduceOp op) {
  const Shape s = a.shape(0);
  KILN_CHECK(s.rank() >= 3, "expected an input [N, C, spatial...] of rank 3 or more, got {}", s);
  KILN_CHECK(op != ops::ReduceOp::mean || is_float(a.dtype(0)), "expected a float tensor, got {} {}", s, a.dtype(0));
  std::vector<std::size_t> dims;
  for (std::size_t d = 2; d < s.rank(); ++d) dims.push_back(d);
  return {detail::reduce<B>(a[0], op, dims)};
}

// ---------------------------------------------------------------- MatMul, Gemm

// NumPy's matmul: a 1-d left operand is a row, a 1-d right operand a column (both dropped
// from the result), batch dims broadcast.
// lhs @ rhs, plus `bias` (broadcast to the product) where given, with the node's folded
// activation: in one kernel where the backend takes the program as the product's epilogue
// (B::matmul_program), as a product and a program otherwise.
template <class B> P<B> product(const Args<B>& a, const P<B>& lhs, const P<B>& rhs, const std::optional<P<B>>& bias) {
  const DType dtype = B::dtype(lhs);
  if constexpr (MatmulPrograms<B>) {
    if (a.epilogue || bias) {
      const codegen::Program& program = detail::epilogue_program(a.epilogue, dtype, bias.has_value());
      std::vector<P<B>> inputs;
      if (bias) inputs.push_back(*bias);
      std::vector<P<B>> fused = B::matmul_program(lhs, rhs, program, inputs, {});
      if (!fused.empty()) return std::move(fused.front());
    }
  }
  P<B> y = B::matmul(lhs, rhs);
  if (bias) y = add<B>(y, detail::broadcast_to<B>(*bias, B::shape(y)));
  return detail::apply_epilogue(a, y);
}

template <class B> Outs<B> matmul(const Args<B>& a) {
  const Shape as = a.shape(0), bs = a.shape(1);
  KILN_CHECK(as.rank() >= 1 && bs.rank() >= 1, "MatMul takes operands of rank 1 or more, got {} and {}", as, bs);
  KILN_CHECK(a.dtype(0) == a.dtype(1), "the operands' element types differ: {} {} and {} {}", as, a.dtype(0), bs,
             a.dtype(1));
  Dims ad = as.to_vector(), bd = bs.to_vector();
  if (ad.size() == 1) ad.insert(ad.begin(), 1);
  if (bd.size() == 1) bd.push_back(1);
  KILN_CHECK(ad.back() == bd[bd.size() - 2], "the inner dims of {} and {} differ", as, bs);
  const std::size_t rank = std::max(ad.size(), bd.size());
  ad.insert(ad.begin(), rank - ad.size(), 1);
  bd.insert(bd.begin(), rank - bd.size(), 1);
  Dims out;
  for (std::size_t d = 0; d + 2 < rank; ++d) {
    KILN_CHECK(ad[d] == bd[d] || ad[d] == 1 || bd[d] == 1, "the batch dims of {} and {} do not broadcast", as, bs);
    out.push_back(std::max(ad[d], bd[d]));
  }
  if (as.rank() > 1) out.push_back(ad[rank - 2]);
  if (bs.rank() > 1) out.push_back(bd[rank - 1]);
  const P<B> lhs = B::reshape(a[0], Shape(ad)), rhs = B::reshape(a[1], Shape(bd));
  return {B::reshape(product<B>(a, lhs, rhs, std::nullopt), Shape(std::move(out)))};
}

template <class B> Outs<B> gemm(const Args<B>& a) {
  check_float(a, 0);
  const Shape as = a.shape(0), bs = a.shape(1);
  KILN_CHECK(as.rank() == 2 && bs.rank() == 2, "Gemm takes 2-d A and B, got {} and {}", as, bs);
  KILN_CHECK(a.dtype(0) == a.dtype(1), "A and B must have one element type, got {} and {}", a.dtype(0), a.dtype(1));
  const bool ta = a.node.attr_int("transA", 0) != 0, tb = a.node.attr_int("transB", 0) != 0;
  const double alpha = a.node.attr_float("alpha", 1.0), beta = a.node.attr_float("beta", 1.0);
  const std::array<std::int64_t, 2> swap{1, 0};
  const P<B> lhs = ta ? B::permute(a[0], swap) : a[0], rhs = tb ? B::permute(a[1], swap) : a[1];
  const Shape ls = B::shape(lhs), rs = B::shape(rhs);
  KILN_CHECK(ls[1] == rs[0], "A {} (transA {}) and B {} (transB {}) do not multiply", as, ta, bs, tb);
  std::optional<P<B>> c;
  if (a.has(2) && beta != 0.0) {
    c = with_dtype<B>(a[2], a.dtype(0));
    KILN_CHECK(broadcast_shapes("Gemm", B::shape(*c), Shape{ls[0], rs[1]}) == Shape({ls[0], rs[1]}),
               "C {} does not broadcast to the product [{}, {}]", B::shape(*c), ls[0], rs[1]);
  }
  // alpha (A @ B) + beta C: one kernel with the bias and the activation where alpha and beta are 1.
  if (alpha == 1.0 && (!c || beta == 1.0)) return {product<B>(a, lhs, rhs, c)};
  P<B> y = B::matmul(lhs, rhs);
  if (alpha != 1.0) y = provided::binary_scalar<B, ops::Mul>(y, alpha);
  if (c) y = add<B>(y, detail::broadcast_to<B>(beta == 1.0 ? *c : provided::binary_scalar<B, ops::Mul>(*c, beta),
                                                B::shape(y)));
  return {detail::apply_epilogue(a, y)};
}

// ---------------------------------------------------------------- softmax family

template <class B> P<B> softmax(const P<B>& x, std::size_t dim, bool log) {
  if constexpr (FusedSoftmax<B>) {
    return B::softmax(x, static_cast<std::int64_t>(dim), log);
  } else {
    const P<B> shifted = sub<B>(x, B::reduce(x, ops::ReduceOp::max, static_cast<std::int64_t>(dim)));
    const P<B> e = provided::unary<B, ops::Exp>(shifted);
    const P<B> sum = B::reduce(e, ops::ReduceOp::sum, static_cast<std::int64_t>(dim));
    return log ? sub<B>(shifted, provided::unary<B, ops::Log>(sum)) : div<B>(e, sum);
  }
}

// The input of Softmax, LogSoftmax or Hardmax and the dim they act on. Before opset 13 ONNX
// coerces the input to 2-d at `axis` (default 1) and normalizes over the flattened tail;
// from 13 on it acts along `axis` (default -1).
template <class B> std::pair<P<B>, std::size_t> softmax_input(const Args<B>& a) {
  const Shape s = a.shape(0);
  KILN_CHECK(s.rank() >= 1, "expected a tensor of rank 1 or more, got {}", s);
  if (a.opset >= 13) return {a[0], detail::axis(a.node.attr_int("axis", -1), s.rank())};
  const std::size_t at = detail::axis(a.node.attr_int("axis", 1), s.rank());
  std::int64_t outer = 1;
  for (std::size_t d = 0; d < at; ++d) outer *= s[d];
  return {B::reshape(a[0], Shape{outer, s.numel() / std::max<std::int64_t>(outer, 1)}), 1};
}

template <class B> Kernel<B> softmax_kernel(bool log) {
  return [log](const Args<B>& a) -> Outs<B> {
    check_float(a, 0);
    const auto [x, dim] = softmax_input(a);
    return {B::reshape(softmax<B>(x, dim, log), a.shape(0))};
  };
}

// Hardmax: 1 at the first maximum along the dim, 0 elsewhere.
template <class B> Outs<B> hardmax(const Args<B>& a) {
  check_float(a, 0);
  const auto [x, dim] = softmax_input(a);
  const Shape s = B::shape(x);
  std::vector<std::int64_t> iota(static_cast<std::size_t>(s[dim]));
  for (std::size_t i = 0; i < iota.size(); ++i) iota[i] = static_cast<std::int64_t>(i);
  const P<B> first = B::arg_reduce(x, ops::ArgReduceOp::argmax, static_cast<std::int64_t>(dim));
  const P<B> hot = provided::binary<B, ops::Equal>(first, constant<B>(iota, along(s.rank(), dim, s[dim]), DType::i64,
                                                                         a.device));
  return {B::reshape(B::cast(hot, a.dtype(0)), a.shape(0))};
}

// ---------------------------------------------------------------- normalizations

// (x - mean) * inv_std * scale + bias, one program; every input broadcasts to x.
template <class B> P<B> normalize(const P<B>& x, const P<B>& mean, const P<B>& inv_std, const P<B>& scale,
                                  const P<B>& bias) {
  const codegen::Program& p =
      detail::program("normalize", B::dtype(x), 5, 0, [](std::span<const codegen::Expr> in, auto) {
        return (in[0] - in[1]) * in[2] * in[3] + in[4];
      });
  return detail::run<B>(p, {x, mean, inv_std, scale, bias});
}

// The mean of x over `dims` and 1 / sqrt(var + eps) (biased variance), both with the dims kept.
template <class B> std::pair<P<B>, P<B>> moments(const P<B>& x, std::span<const std::size_t> dims, double eps) {
  const P<B> mean = detail::reduce<B>(x, ops::ReduceOp::mean, dims);
  const P<B> centered = sub<B>(x, mean);
  const P<B> var = detail::reduce<B>(mul<B>(centered, centered), ops::ReduceOp::mean, dims);
  const codegen::Program& p = detail::program("inv_std", B::dtype(x), 1, 1, [](auto in, auto ps) {
    return codegen::Expr(1.0) / (in[0] + ps[0]).sqrt();
  });
  return {mean, detail::run<B>(p, {var}, {eps})};
}

template <class B> P<B> scalar_like(const Args<B>& a, double value) {
  return provided::full<B>(Shape{1}, value, a.dtype(0), a.device);
}

template <class B> Outs<B> batch_norm(const Args<B>& a) {
  check_float(a, 0);
  const Shape s = a.shape(0);
  KILN_CHECK(s.rank() >= 2, "expected an input [N, C, ...] of rank 2 or more, got {}", s);
  const double eps = a.node.attr_float("epsilon", 1e-5);
  const DType dtype = a.dtype(0);
  if (a.node.attr_int("training_mode", 0) != 0) {
    // Training mode (opset 14+): normalized with the batch's own statistics (biased variance
    // over every dim but the channels); the running statistics move towards them by
    // 1 - momentum and are outputs 1 and 2.
    std::vector<std::size_t> dims{0};
    for (std::size_t d = 2; d < s.rank(); ++d) dims.push_back(d);
    const auto [mean, inv_std] = moments<B>(a[0], dims, eps);
    const P<B> scale = per_channel(a, 1, s[1], s.rank(), dtype), bias = per_channel(a, 2, s[1], s.rank(), dtype);
    Outs<B> out{normalize<B>(a[0], mean, inv_std, scale, bias)};
    const double momentum = a.node.attr_float("momentum", 0.9);
    const P<B> centered = sub<B>(a[0], mean);
    const P<B> var = detail::reduce<B>(mul<B>(centered, centered), ops::ReduceOp::mean, dims);
    const codegen::Program& blend = detail::program("running_statistic", dtype, 2, 1, [](auto in, auto ps) {
      return in[0] * ps[0] + in[1] * (codegen::Expr(1.0) - ps[0]);
    });
    const Shape channels{s[1]};
    out.push_back(detail::run<B>(blend, {a[3], B::reshape(mean, channels)}, {momentum}));
    out.push_back(detail::run<B>(blend, {a[4], B::reshape(var, channels)}, {momentum}));
    return out;
  }
  // Y = (x - mean) / sqrt(var + eps) * scale + bias, with the statistics given per channel.
  const P<B> scale = per_channel(a, 1, s[1], s.rank(), dtype), bias = per_channel(a, 2, s[1], s.rank(), dtype);
  const P<B> mean = per_channel(a, 3, s[1], s.rank(), dtype), var = per_channel(a, 4, s[1], s.rank(), dtype);
  const codegen::Program& p = detail::program("batch_norm", dtype, 5, 1, [](auto in, auto ps) {
    return (in[0] - in[3]) / (in[4] + ps[0]).sqrt() * in[1] + in[2];
  });
  return {detail::run<B>(p, {a[0], scale, bias, mean, var}, {eps})};
}

template <class B> Outs<B> instance_norm(const Args<B>& a) {
  check_float(a, 0);
  const Shape s = a.shape(0);
  KILN_CHECK(s.rank() >= 3, "expected an input [N, C, spatial...] of rank 3 or more, got {}", s);
  std::vector<std::size_t> dims;
  for (std::size_t d = 2; d < s.rank(); ++d) dims.push_back(d);
  const auto [mean, inv_std] = moments<B>(a[0], dims, a.node.attr_float("epsilon", 1e-5));
  return {normalize<B>(a[0], mean, inv_std, per_channel(a, 1, s[1], s.rank(), a.dtype(0)),
                       per_channel(a, 2, s[1], s.rank(), a.dtype(0)))};
}

// LayerNormalization over the dims from `axis` on; Mean and InvStdDev keep those dims (size 1).
template <class B> Outs<B> layer_norm(const Args<B>& a) {
  check_float(a, 0);
  const Shape s = a.shape(0);
  const std::size_t at = detail::axis(a.node.attr_int("axis", -1), s.rank());
  const double eps = a.node.attr_float("epsilon", 1e-5);
  const DType dtype = a.dtype(0);
  const P<B> scale = a.has(1) ? with_dtype<B>(a[1], dtype) : scalar_like(a, 1.0);
  const P<B> bias = a.has(2) ? with_dtype<B>(a[2], dtype) : scalar_like(a, 0.0);
  if constexpr (FusedLayerNorm<B>) {
    if (!wants(a, 1) && !wants(a, 2)) {
      const P<B> y = B::layer_norm(a[0], static_cast<std::int64_t>(s.rank() - at), eps);
      return {add<B>(mul<B>(y, scale), bias)};
    }
  }
  std::vector<std::size_t> dims;
  for (std::size_t d = at; d < s.rank(); ++d) dims.push_back(d);
  const auto [mean, inv_std] = moments<B>(a[0], dims, eps);
  return {normalize<B>(a[0], mean, inv_std, scale, bias), mean, inv_std};
}

// GroupNormalization: statistics per (sample, group of channels); scale and bias per group
// (opset 18) or per channel (opset 21).
template <class B> Outs<B> group_norm(const Args<B>& a) {
  check_float(a, 0);
  const Shape s = a.shape(0);
  KILN_CHECK(s.rank() >= 2, "expected an input [N, C, ...] of rank 2 or more, got {}", s);
  const std::int64_t groups = a.node.attr_int("num_groups", 0), channels = s[1];
  KILN_CHECK(groups >= 1 && channels % groups == 0, "num_groups {} must divide the {} channels of input {}", groups,
             channels, s);
  const Shape grouped{s[0], groups, channels / groups, s.numel() / std::max<std::int64_t>(s[0] * channels, 1)};
  const P<B> x = B::reshape(a[0], grouped);
  const std::array<std::size_t, 2> dims{2, 3};
  const auto [mean, inv_std] = moments<B>(x, dims, a.node.attr_float("epsilon", 1e-5));
  const auto affine = [&](std::size_t i) {
    const std::int64_t count = a.shape(i).numel();
    KILN_CHECK(count == channels || count == groups, "input {} must hold one value per channel or per group, got {}",
               i, a.shape(i));
    const bool per_channel_values = count == channels && (a.opset >= 21 || channels != groups);
    const Shape shape = per_channel_values ? Shape{1, groups, channels / groups, 1} : Shape{1, groups, 1, 1};
    return with_dtype<B>(B::reshape(a[i], shape), a.dtype(0));
  };
  return {B::reshape(normalize<B>(x, mean, inv_std, affine(1), affine(2)), s)};
}

// MeanVarianceNormalization: (x - mean) / (sqrt(var) + 1e-9) over `axes`, ONNX's function body.
template <class B> Outs<B> mean_variance_norm(const Args<B>& a) {
  check_float(a, 0);
  const Shape s = a.shape(0);
  const Dims axes = a.node.attr_ints("axes", {0, 2, 3});
  const std::vector<std::size_t> dims = detail::axes(axes, s.rank());
  const P<B> mean = detail::reduce<B>(a[0], ops::ReduceOp::mean, dims);
  const P<B> centered = sub<B>(a[0], mean);
  const P<B> var = detail::reduce<B>(mul<B>(centered, centered), ops::ReduceOp::mean, dims);
  const codegen::Program& p = detail::program("mvn", a.dtype(0), 2, 0, [](auto in, auto) {
    return in[0] / (in[1].sqrt() + codegen::Expr(1e-9));
  });
  return {detail::run<B>(p, {centered, var})};
}

template <class B> Outs<B> lp_norm(const Args<B>& a) {
  check_float(a, 0);
  const std::size_t dim = detail::axis(a.node.attr_int("axis", -1), a.shape(0).rank());
  const std::int64_t p = a.node.attr_int("p", 2);
  KILN_CHECK(p == 1 || p == 2, "p must be 1 or 2, got {}", p);
  const P<B> magnitude = p == 1 ? provided::unary<B, ops::Abs>(a[0]) : mul<B>(a[0], a[0]);
  P<B> norm = B::reduce(magnitude, ops::ReduceOp::sum, static_cast<std::int64_t>(dim));
  if (p == 2) norm = provided::unary<B, ops::Sqrt>(norm);
  return {div<B>(a[0], norm)};
}

// Dropout at inference (or training with a ratio of 0): Y = X, and a mask of all true (bool
// from opset 10, X's type before).
// The uniform draws in [0, 1) of a 32-bit Mersenne Twister seeded with `seed` (the legacy
// seeding: one word, then the MT19937 recurrence), each from two 32-bit outputs taken as 53
// bits: the sequence NumPy's legacy generator gives, and so the masks of ONNX's reference
// Dropout for a seed attribute.
inline std::vector<double> mt19937_uniform(std::uint32_t seed, std::size_t count) {
  constexpr int n = 624, m = 397;
  std::array<std::uint32_t, n> state{};
  state[0] = seed;
  for (int i = 1; i < n; ++i) state[i] = 1812433253u * (state[i - 1] ^ (state[i - 1] >> 30)) + static_cast<std::uint32_t>(i);
  int next = n;
  const auto word = [&] {
    if (next == n) {  // regenerate the whole state
      for (int i = 0; i < n; ++i) {
        const std::uint32_t y = (state[i] & 0x80000000u) | (state[(i + 1) % n] & 0x7fffffffu);
        state[i] = state[(i + m) % n] ^ (y >> 1) ^ ((y & 1u) ? 0x9908b0dfu : 0u);
      }
      next = 0;
    }
    std::uint32_t y = state[next++];
    y ^= y >> 11;
    y ^= (y << 7) & 0x9d2c5680u;
    y ^= (y << 15) & 0xefc60000u;
    return y ^ (y >> 18);
  };
  std::vector<double> out(count);
  for (double& u : out) {
    const std::uint32_t hi = word() >> 5, lo = word() >> 6;
    u = (hi * 67108864.0 + lo) / 9007199254740992.0;
  }
  return out;
}

// Dropout: the identity in inference; in training mode (opset 12 on, input 2 true) each
// element is kept where a uniform draw is >= the ratio, and scaled by 1 / (1 - ratio). The
// draws come from the seed attribute (the same masks as ONNX's reference for that seed), or
// from a fresh seed per run without it.
template <class B> Outs<B> dropout(const Args<B>& a) {
  const bool training = a.opset >= 12 && a.has(2) && a.scalar(2) != 0.0;
  const double ratio = a.opset >= 12 ? (a.has(1) ? a.scalar(1) : 0.5) : a.node.attr_float("ratio", 0.5);
  const DType mask_dtype = a.opset >= 10 ? DType::boolean : a.dtype(0);
  if (!training || ratio == 0.0) {
    Outs<B> outs{a[0]};
    if (wants(a, 1)) outs.push_back(provided::full<B>(a.shape(0), 1.0, mask_dtype, a.device));
    return outs;
  }
  KILN_CHECK(is_float(a.dtype(0)), "training mode takes a float input, got {} {}", a.shape(0), a.dtype(0));
  KILN_CHECK(ratio > 0.0 && ratio < 1.0, "the ratio must be in [0, 1), got {}", ratio);
  const Shape shape = a.shape(0);
  const std::int64_t seed = a.node.attr_int("seed", static_cast<std::int64_t>(std::random_device{}()));
  const std::vector<double> draws = mt19937_uniform(static_cast<std::uint32_t>(seed), static_cast<std::size_t>(shape.numel()));
  std::vector<std::byte> keep(draws.size());
  for (std::size_t i = 0; i < draws.size(); ++i) keep[i] = std::byte{draws[i] >= ratio};
  const P<B> mask = B::from_data(TensorData(std::move(keep), shape, DType::boolean), a.device);
  const P<B> kept = provided::where<B>(mask, a[0], provided::full<B>(shape, 0.0, a.dtype(0), a.device));
  Outs<B> outs{provided::binary_scalar<B, ops::Mul>(kept, 1.0 / (1.0 - ratio))};
  if (wants(a, 1)) outs.push_back(mask_dtype == DType::boolean ? mask : B::cast(mask, mask_dtype));
  return outs;
}

}  // namespace nn_detail

// The op types add_nn_ops registers (checked when a table is built): a module that
// kiln-onnx2cpp generates takes only the groups its graph uses.
inline constexpr std::string_view kNnOps[] = {
    "MatMul", "Gemm", "Conv", "ConvTranspose", "MaxPool", "AveragePool", "LpPool", "GlobalAveragePool",
    "GlobalMaxPool", "BatchNormalization", "InstanceNormalization", "LayerNormalization",
    "GroupNormalization", "MeanVarianceNormalization", "LpNormalization", "Softmax", "LogSoftmax", "Hardmax",
    "Dropout"};
inline constexpr OpGroup kNnGroup{"nn", kNnOps};

template <class B> void add_nn_ops(OpTable<B>& t) {
  using namespace nn_detail;
  // The first opset of each: where an op's older versions differ only by attributes Kiln
  // reads the same way (MaxPool-1 has no dilations), they are run too.
  t["MatMul"] = {matmul<B>, 1};
  t["Gemm"] = {gemm<B>};
  t["Conv"] = {conv<B>, 1};
  t["ConvTranspose"] = {conv_transpose<B>, 1};
  t["MaxPool"] = {max_pool<B>, 1};
  t["AveragePool"] = {average_pool<B>, 1};
  t["LpPool"] = {lp_pool<B>, 2};
  t["GlobalAveragePool"] = {[](const Args<B>& a) { return global_pool(a, ops::ReduceOp::mean); }, 1};
  t["GlobalMaxPool"] = {[](const Args<B>& a) { return global_pool(a, ops::ReduceOp::max); }, 1};
  t["BatchNormalization"] = {batch_norm<B>};
  t["InstanceNormalization"] = {instance_norm<B>, 6};
  t["LayerNormalization"] = {layer_norm<B>, 17};
  t["GroupNormalization"] = {group_norm<B>, 18};
  t["MeanVarianceNormalization"] = {mean_variance_norm<B>, 9};
  t["LpNormalization"] = {lp_norm<B>, 1};
  t["Softmax"] = {softmax_kernel<B>(false), 1};
  t["LogSoftmax"] = {softmax_kernel<B>(true), 1};
  t["Hardmax"] = {hardmax<B>, 1};
  t["Dropout"] = {dropout<B>};
}

}  // namespace kiln::onnx
