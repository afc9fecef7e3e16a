// Parameters and shape rules of the neural-network ops: convolution, pooling and
// interpolation. Backends get them already validated and in 2-d form (1-d ops are the
// 2-d ops with a height of 1).
#pragma once

#include "kiln/core/dtype.hpp"
#include "kiln/core/error.hpp"
#include "kiln/core/shape.hpp"

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace kiln::ops {

struct Conv2dOptions {
  std::array<std::int64_t, 2> stride{1, 1};
  std::array<std::int64_t, 2> padding{0, 0};
  std::array<std::int64_t, 2> dilation{1, 1};
  std::int64_t groups = 1;
};

struct ConvTranspose2dOptions {
  std::array<std::int64_t, 2> stride{1, 1};
  std::array<std::int64_t, 2> padding{0, 0};
  std::array<std::int64_t, 2> output_padding{0, 0};
  std::array<std::int64_t, 2> dilation{1, 1};
  std::int64_t groups = 1;

  // The convolution whose input gradient this transposed convolution is.
  Conv2dOptions as_conv2d() const { return {stride, padding, dilation, groups}; }
};

// 1-d convolution over NCL tensors; runs as 2-d convolution with a kernel of height 1.
struct Conv1dOptions {
  std::int64_t stride = 1;
  std::int64_t padding = 0;
  std::int64_t dilation = 1;
  std::int64_t groups = 1;

  Conv2dOptions as_2d() const { return {{1, stride}, {0, padding}, {1, dilation}, groups}; }
};

struct ConvTranspose1dOptions {
  std::int64_t stride = 1;
  std::int64_t padding = 0;
  std::int64_t output_padding = 0;
  std::int64_t dilation = 1;
  std::int64_t groups = 1;

  ConvTranspose2dOptions as_2d() const {
    return {{1, stride}, {0, padding}, {0, output_padding}, {1, dilation}, groups};
  }
};

struct Pool2dOptions {
  std::array<std::int64_t, 2> kernel{1, 1};
  std::array<std::int64_t, 2> stride{1, 1};
  std::array<std::int64_t, 2> padding{0, 0};
  std::array<std::int64_t, 2> dilation{1, 1};  // max pooling only
  bool ceil_mode = false;
  bool count_include_pad = true;  // average pooling only
};

// 1-d pooling over NCL tensors; runs as 2-d pooling with a kernel of height 1.
struct Pool1dOptions {
  std::int64_t kernel = 1;
  std::int64_t stride = 1;
  std::int64_t padding = 0;
  std::int64_t dilation = 1;  // max pooling only
  bool ceil_mode = false;
  bool count_include_pad = true;  // average pooling only

  Pool2dOptions as_2d() const {
    return {{1, kernel}, {1, stride}, {0, padding}, {1, dilation}, ceil_mode, count_include_pad};
  }
};

// 3-d convolution over NCDHW tensors, composed from 2-d convolutions (functional::conv3d).
struct Conv3dOptions {
  std::array<std::int64_t, 3> stride{1, 1, 1};
  std::array<std::int64_t, 3> padding{0, 0, 0};
  std::array<std::int64_t, 3> dilation{1, 1, 1};
  std::int64_t groups = 1;
};

struct ConvTranspose3dOptions {
  std::array<std::int64_t, 3> stride{1, 1, 1};
  std::array<std::int64_t, 3> padding{0, 0, 0};
  std::array<std::int64_t, 3> output_padding{0, 0, 0};
  std::array<std::int64_t, 3> dilation{1, 1, 1};
  std::int64_t groups = 1;
};

// 3-d pooling over NCDHW tensors; runs as 2-d pooling of the (H, W) planes, then of the depth.
struct Pool3dOptions {
  std::array<std::int64_t, 3> kernel{1, 1, 1};
  std::array<std::int64_t, 3> stride{1, 1, 1};
  std::array<std::int64_t, 3> padding{0, 0, 0};
  std::array<std::int64_t, 3> dilation{1, 1, 1};  // max pooling only
  bool ceil_mode = false;
  bool count_include_pad = true;  // average pooling only
};

enum class InterpolateMode : std::uint8_t { nearest, bilinear, bicubic };

struct InterpolateOptions {
  InterpolateMode mode = InterpolateMode::nearest;
  bool align_corners = false;  // bilinear / bicubic only, as in torch.nn.functional.interpolate
};

// Output extent of a convolution or pooling window along one axis.
inline std::int64_t window_output_size(std::int64_t in, std::int64_t kernel, std::int64_t stride,
                                       std::int64_t padding, std::int64_t dilation, bool ceil_mode = false) {
  const std::int64_t span = dilation * (kernel - 1) + 1;
  // With ceil_mode a window may overhang the padded input (PyTorch allows it); no window fits below 0.
  const std::int64_t numerator = in + 2 * padding - span + (ceil_mode ? stride - 1 : 0);
  if (numerator < 0) return 0;
  std::int64_t out = numerator / stride + 1;
  // A window that would start entirely in the right padding is dropped (PyTorch's rule).
  if (ceil_mode && (out - 1) * stride >= in + padding) --out;
  return out;
}

// The output shape of 2-d pooling of an NCHW input `x`, after PyTorch's checks: kernel,
// stride and dilation positive, padding at most half the kernel, a non-empty output.
inline Shape pool2d_output_shape(std::string_view op, const Shape& x, const Pool2dOptions& o) {
  KILN_CHECK(x.rank() == 4, "{}: expected an NCHW input of rank 4, got shape {}", op, x);
  for (std::size_t i = 0; i < 2; ++i) {
    KILN_CHECK(o.kernel[i] > 0 && o.stride[i] > 0 && o.dilation[i] > 0,
               "{}: kernel {}, stride {} and dilation {} must be positive (input {})", op, o.kernel, o.stride,
               o.dilation, x);
    KILN_CHECK(o.padding[i] >= 0 && o.padding[i] <= o.kernel[i] / 2,
               "{}: padding {} must be between 0 and half the kernel {} (input {})", op, o.padding, o.kernel, x);
  }
  const std::int64_t h = window_output_size(x[2], o.kernel[0], o.stride[0], o.padding[0], o.dilation[0], o.ceil_mode);
  const std::int64_t w = window_output_size(x[3], o.kernel[1], o.stride[1], o.padding[1], o.dilation[1], o.ceil_mode);
  KILN_CHECK(h > 0 && w > 0,
             "{}: input {} is too small for kernel {}, stride {}, padding {}, dilation {}: the output would be {}x{}",
             op, x, o.kernel, o.stride, o.padding, o.dilation, h, w);
  return Shape{x[0], x[1], h, w};
}

namespace detail {
inline std::string conv_dims(std::span<const std::int64_t> v) { return kiln::detail::MessageArg(v).text(); }
}  // namespace detail

// The output shape of a convolution of x [N, C, *spatial] by weight [O, C/groups, *kernel],
// after PyTorch's checks; `op` names the caller in errors. Options have one value per spatial dim.
inline Shape conv_output_shape(std::string_view op, const Shape& x, const Shape& w,
                               std::span<const std::int64_t> stride, std::span<const std::int64_t> padding,
                               std::span<const std::int64_t> dilation, std::int64_t groups) {
  const std::size_t spatial = stride.size();
  KILN_CHECK(x.rank() == spatial + 2, "{}: expected an input of rank {} (N, C and {} spatial dims), got {}", op,
             spatial + 2, spatial, x);
  KILN_CHECK(w.rank() == spatial + 2, "{}: expected a weight of rank {} (out, in/groups and {} kernel dims), got {}",
             op, spatial + 2, spatial, w);
  for (std::size_t i = 0; i < spatial; ++i) {
    KILN_CHECK(stride[i] >= 1 && dilation[i] >= 1 && padding[i] >= 0,
               "{}: stride {} and dilation {} must be positive and padding {} non-negative (input {}, weight {})", op,
               detail::conv_dims(stride), detail::conv_dims(dilation), detail::conv_dims(padding), x, w);
    KILN_CHECK(w[2 + i] >= 1, "{}: every kernel dim must be at least 1, got weight {}", op, w);
  }
  KILN_CHECK(groups >= 1, "{}: groups must be positive, got {}", op, groups);
  KILN_CHECK(x[1] % groups == 0 && w[0] % groups == 0,
             "{}: groups = {} must divide the input channels and the output channels, got input {} and weight {}",
             op, groups, x, w);
  KILN_CHECK(w[1] * groups == x[1],
             "{}: weight {} expects {} input channels (groups = {}, {} per group), but input {} has {}", op, w,
             w[1] * groups, groups, w[1], x, x[1]);
  Extents out{x[0], w[0]};
  for (std::size_t i = 0; i < spatial; ++i) {
    const std::int64_t o = window_output_size(x[2 + i], w[2 + i], stride[i], padding[i], dilation[i]);
    KILN_CHECK(o >= 1,
               "{}: input {} with padding {} is smaller than the kernel of weight {} dilated by {}: the output would "
               "be empty",
               op, x, detail::conv_dims(padding), w, detail::conv_dims(dilation));
    out.push_back(o);
  }
  return Shape(out);
}

// A convolution's dtypes and bias after PyTorch's checks: input and weight of one dtype, and a
// bias of shape [channels] (the output channels) in that dtype; `op` names the caller in errors.
inline void check_conv_dtypes(std::string_view op, const Shape& x, DType x_dtype, const Shape& w, DType w_dtype,
                              const std::optional<std::pair<Shape, DType>>& bias, std::int64_t channels) {
  KILN_CHECK(x_dtype == w_dtype, "{}: dtypes differ: input {} {}, weight {} {}", op, x, x_dtype, w, w_dtype);
  if (!bias) return;
  KILN_CHECK(bias->first == Shape{channels}, "{}: bias must have shape [{}] (the output channels of weight {}), got {}",
             op, channels, w, bias->first);
  KILN_CHECK(bias->second == x_dtype, "{}: bias dtype {} differs from the input dtype {}", op, bias->second, x_dtype);
}

// The output shape of a transposed convolution of x [N, C_in, *spatial] by weight
// [C_in, C_out/groups, *kernel]: (in - 1) * stride - 2 * padding + dilation * (kernel - 1) +
// output_padding + 1 per spatial dim, after PyTorch's checks.
inline Shape conv_transpose_output_shape(std::string_view op, const Shape& x, const Shape& w,
                                         std::span<const std::int64_t> stride, std::span<const std::int64_t> padding,
                                         std::span<const std::int64_t> output_padding,
                                         std::span<const std::int64_t> dilation, std::int64_t groups) {
  const std::size_t spatial = stride.size();
  KILN_CHECK(x.rank() == spatial + 2, "{}: expected an input of rank {} (N, C and {} spatial dims), got {}", op,
             spatial + 2, spatial, x);
  KILN_CHECK(w.rank() == spatial + 2, "{}: expected a weight of rank {} (in, out/groups and {} kernel dims), got {}",
             op, spatial + 2, spatial, w);
  KILN_CHECK(groups >= 1, "{}: groups must be positive, got {}", op, groups);
  KILN_CHECK(w[0] == x[1], "{}: weight {} expects {} input channels, but input {} has {}", op, w, w[0], x, x[1]);
  KILN_CHECK(x[1] % groups == 0, "{}: groups = {} must divide the input channels, got input {}", op, groups, x);
  std::vector<std::int64_t> out{x[0], w[1] * groups};
  for (std::size_t i = 0; i < spatial; ++i) {
    KILN_CHECK(stride[i] >= 1 && dilation[i] >= 1 && padding[i] >= 0 && w[2 + i] >= 1,
               "{}: stride {} and dilation {} must be positive, padding {} non-negative and the kernel non-empty "
               "(input {}, weight {})",
               op, detail::conv_dims(stride), detail::conv_dims(dilation), detail::conv_dims(padding), x, w);
    KILN_CHECK(output_padding[i] >= 0 && (output_padding[i] < stride[i] || output_padding[i] < dilation[i]),
               "{}: output_padding {} must be non-negative and smaller than the stride {} or the dilation {}", op,
               detail::conv_dims(output_padding), detail::conv_dims(stride), detail::conv_dims(dilation));
    const std::int64_t o = (x[2 + i] - 1) * stride[i] - 2 * padding[i] + dilation[i] * (w[2 + i] - 1) +
                           output_padding[i] + 1;
    KILN_CHECK(o >= 1, "{}: input {} with weight {}, stride {}, padding {}, dilation {} gives an output size of {}",
               op, x, w, detail::conv_dims(stride), detail::conv_dims(padding), detail::conv_dims(dilation), o);
    out.push_back(o);
  }
  return Shape(std::move(out));
}

// ---- checks shared by the pooling kernels of every backend

// A float input (pooling computes on f32/f64; f16/bf16 go through f32 where a backend can).
inline void check_pool_input_float(std::string_view op, const Shape& x, DType dtype) {
  KILN_CHECK(is_float(dtype), "{}: expected a float tensor, got {} {}", op, x, dtype);
}

// The gradient dy of a pooling op: the input's dtype and the forward output's shape.
inline void check_pool_gradient(std::string_view op, const Shape& x, DType x_dtype, const Shape& dy, DType dy_dtype,
                                const Shape& expected_dy) {
  KILN_CHECK(dy_dtype == x_dtype, "{}: dy must have the input's dtype {}, got {}", op, x_dtype, dy_dtype);
  KILN_CHECK(dy == expected_dy, "{}: dy has shape {}, expected {} for an input of shape {}", op, dy, expected_dy, x);
}

inline void check_no_dilation(std::string_view op, const Pool2dOptions& o) {
  KILN_CHECK(o.dilation[0] == 1 && o.dilation[1] == 1, "{}: average pooling has no dilation, got {}", op, o.dilation);
}

// The output shape of adaptive pooling of NCHW `x` to `size` (height, width).
inline Shape adaptive_output_shape(std::string_view op, const Shape& x, std::span<const std::int64_t> size) {
  KILN_CHECK(x.rank() == 4, "{}: expected an NCHW input of rank 4, got shape {}", op, x);
  KILN_CHECK(size.size() == 2, "{}: expected 2 output sizes, got {}", op, size.size());
  KILN_CHECK(size[0] > 0 && size[1] > 0, "{}: output size [{}, {}] must be positive (input {})", op, size[0], size[1],
             x);
  KILN_CHECK(x[2] > 0 && x[3] > 0, "{}: input {} has an empty spatial dim", op, x);
  return Shape{x[0], x[1], size[0], size[1]};
}

// The windows of average pooling along one axis, PyTorch's: output o reads the inputs
// start[o] + k for k < taps that lie in [0, end[o]) and divides their sum by divisor[o]
// (0 for a window without inputs, whose output is 0). Backends and the provided defaults
// share these rules.
struct PoolWindows {
  std::vector<std::int64_t> start, end, divisor;
  std::int64_t taps = 0;
};

// Average pooling's windows of `out` outputs along `axis` (0: height, 1: width) of an input
// of extent `in`: [o stride - padding, + kernel), clipped to the input for the taps and to
// the padded input for the divisor when count_include_pad.
inline PoolWindows avg_pool_windows(std::int64_t in, std::int64_t out, const Pool2dOptions& o, std::size_t axis) {
  const std::int64_t kernel = o.kernel[axis], stride = o.stride[axis], pad = o.padding[axis];
  PoolWindows w;
  w.taps = kernel;
  for (std::int64_t i = 0; i < out; ++i) {
    const std::int64_t start = i * stride - pad, padded_end = std::min(start + kernel, in + pad);
    const std::int64_t first = std::max<std::int64_t>(start, 0), end = std::min(padded_end, in);
    w.start.push_back(start);
    w.end.push_back(end);
    w.divisor.push_back(end <= first ? 0 : o.count_include_pad ? padded_end - start : end - first);
  }
  return w;
}

// Adaptive average pooling's windows: output o of `out` averages the inputs
// [floor(o in / out), ceil((o + 1) in / out)), as in PyTorch.
inline PoolWindows adaptive_pool_windows(std::int64_t in, std::int64_t out) {
  PoolWindows w;
  for (std::int64_t o = 0; o < out; ++o) {
    const std::int64_t start = o * in / out, end = ((o + 1) * in + out - 1) / out;
    w.start.push_back(start);
    w.end.push_back(end);
    w.divisor.push_back(end - start);
    w.taps = std::max(w.taps, end - start);
  }
  return w;
}

// Layer norm over the last `dims` dims of x, with a weight and a bias of those dims' shape
// (either may be absent), as torch.nn.functional.layer_norm: checked once for every backend.
// Returns the rows normalized and their length.
struct NormRows {
  std::int64_t rows = 0, n = 0;
};
inline NormRows layer_norm_rows(const Shape& x, DType dtype, std::int64_t dims, const std::optional<Shape>& weight,
                                const std::optional<Shape>& bias) {
  KILN_CHECK(is_float(dtype), "layer_norm: expects a float tensor, got {} of shape {}", dtype, x);
  KILN_CHECK(dims >= 1 && static_cast<std::size_t>(dims) <= x.rank(),
             "layer_norm: cannot normalize over the last {} dims of a tensor of shape {}", dims, x);
  std::vector<std::int64_t> normalized;
  std::int64_t n = 1;
  for (std::size_t d = x.rank() - static_cast<std::size_t>(dims); d < x.rank(); ++d) {
    normalized.push_back(x[d]);
    n *= x[d];
  }
  KILN_CHECK(n > 0, "layer_norm: the normalized dims of {} hold no elements", x);
  const Shape expected(normalized);
  KILN_CHECK(!weight || *weight == expected, "layer_norm: weight {} must be {}, the last {} dims of x {}", *weight,
             expected, dims, x);
  KILN_CHECK(!bias || *bias == expected, "layer_norm: bias {} must be {}, the last {} dims of x {}", *bias, expected,
             dims, x);
  return {x.numel() / n, n};
}

}  // namespace kiln::ops
