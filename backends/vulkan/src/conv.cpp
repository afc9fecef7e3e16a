// 2-d convolution on the Vulkan backend (NCHW, weight [out, in/groups, kh, kw]), f32 and f64
// (where the device has shaderFloat64): forward with optional bias, input gradient and
// weight gradient, with the CPU backend's checks and error messages.
//
// GEMM convolution: im2col (kernels/glsl/im2col.comp) writes the column matrix of x, entry
// (n, g, k, p) with k over the group's input channels and taps and p over the output
// positions (kernels/glsl/columns.glsl), and the backend's own tiled matmul does the
// arithmetic, with the groups (and samples) as batch dims:
// - forward: columns [N, G, K, OH*OW]; y[n, g] = w[g] [O/G, K] @ columns[n, g], which is
//   already NCHW; the bias is added by the elementwise kernel;
// - weight gradient: columns [G, K, N*OH*OW]; dw[g] = dy[g] [O/G, N*OH*OW] @ columns[g]^T
//   (dy permuted to [O, N, OH, OW] first, so that the sum runs over one strided dim);
// - input gradient: columns[n, g] = w[g]^T @ dy[n, g], then col2im
//   (kernels/glsl/col2im.comp) sums, per input element, the column entries that read it.
// Every sum runs in a fixed order, so the results are deterministic (no atomics). The
// column matrix holds C*KH*KW*OH*OW elements per sample: batches whose columns would pass
// kColumnBytes (KILN_VULKAN_CONV_COLUMN_BYTES overrides it) go in chunks of samples.
// Indices are 32-bit.
#include "kernels.hpp"

#include "backend/conv_columns.hpp"
#include "kiln/vulkan/backend.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cstdlib>
#include <optional>
#include <string>
#include <vector>

namespace kiln::vulkan {
namespace {

// The parameter buffer: kernels/glsl/columns.glsl.
constexpr int kParams = 24;

// The CPU's check (both operands float, of one dtype), then the device's support for it.
void check_float(std::string_view op, DType a, DType b, const Shape& sa, const Shape& sb) {
  columns::check_float(op, a, b, sa, sb);
  check_dtype_supported(op, a);
}

using columns::kColumnBytes;

// The convolution's sizes (src/backend/conv_columns.hpp), chunked by this backend's limit.
struct Geometry : columns::Geometry {
  using columns::Geometry::Geometry;
  std::int64_t chunk(DType dtype) const {
    return columns::Geometry::chunk(dtype, kColumnBytes, "KILN_VULKAN_CONV_COLUMN_BYTES");
  }
};

// The samples [first, first + count) of an NCHW tensor, a view.
VulkanTensor samples(const VulkanTensor& t, std::int64_t first, std::int64_t count) {
  std::vector<ops::SliceRange> ranges{{first, count, 1}};
  for (std::size_t d = 1; d < t.shape.rank(); ++d) ranges.push_back({0, t.shape[d], 1});
  return Vulkan::slice(t, ranges);
}

// Runs im2col.comp or col2im.comp (`kernel`) over `invocations`: `x` is the NCHW tensor of
// the chunk (read by im2col, written by col2im), `cols` the column matrix, with its strides
// per sample, group and row.
void run_columns(std::string_view op, std::string_view kernel, const Geometry& g, std::int64_t invocations,
                 const VulkanTensor& x, const VulkanTensor& cols, std::int64_t sample_stride,
                 std::int64_t group_stride, std::int64_t row_stride) {
  if (invocations == 0) return;
  const auto i32 = [&](std::int64_t v) { return checked_int(v, "a size of", op); };
  // Every flat index the kernels form stays at or below the last element each view reaches.
  i32(cols.offset + cols.numel());
  std::int64_t x_last = x.offset;
  for (std::size_t d = 0; d < 4; ++d) x_last += (x.shape[d] - 1) * x.strides[d];
  i32(x_last);
  for (int d = 0; d < 2; ++d) {
    i32(x.shape[2 + d] + 2 * g.options.padding[d] + g.options.stride[d]);
    i32(g.options.dilation[d] * (d == 0 ? g.KH - 1 : g.KW - 1) + g.options.stride[d]);
  }
  const std::vector<std::int32_t> params{
      i32(invocations), i32(g.C), i32(g.H), i32(g.W), i32(g.KH), i32(g.KW), i32(g.OH), i32(g.OW), i32(g.G),
      i32(g.options.stride[0]), i32(g.options.stride[1]), i32(g.options.padding[0]), i32(g.options.padding[1]),
      i32(g.options.dilation[0]), i32(g.options.dilation[1]), i32(cols.offset), i32(sample_stride),
      i32(group_stride), i32(row_stride), i32(x.offset), i32(x.strides[0]), i32(x.strides[1]), i32(x.strides[2]),
      i32(x.strides[3])};
  static_assert(kParams == 24);
  const std::vector<std::shared_ptr<Buffer>> buffers{upload_ints(params), kernel == "im2col" ? cols.buffer : x.buffer,
                                                     kernel == "im2col" ? x.buffer : cols.buffer};
  const Pipeline& pipeline = kernel_pipeline(op, cols.dtype, fmt::format("{}_{}", kernel, cols.dtype), 3);
  dispatch_invocations(op, pipeline, buffers, invocations);
}

// The column matrix of `x` (a chunk of samples) as [G, K, samples * P] when `by_group`
// (for the weight gradient), else [samples, G, K, P].
VulkanTensor im2col(std::string_view op, const Geometry& g, const VulkanTensor& x, bool by_group) {
  const std::int64_t n = x.shape[0];
  VulkanTensor cols = by_group ? empty(Shape{g.G, g.K, n * g.P}, x.dtype) : empty(Shape{n, g.G, g.K, g.P}, x.dtype);
  if (by_group)
    run_columns(op, "im2col", g, cols.numel(), x, cols, g.P, g.K * n * g.P, n * g.P);
  else
    run_columns(op, "im2col", g, cols.numel(), x, cols, g.G * g.K * g.P, g.K * g.P, g.P);
  return cols;
}

// The weight [O, C/G, KH, KW] as [1, G, O/G, K].
VulkanTensor grouped_weight(const Geometry& g, const VulkanTensor& weight) {
  return Vulkan::reshape(weight, Shape{1, g.G, g.O / g.G, g.K});
}

}  // namespace
}  // namespace kiln::vulkan

namespace kiln {

using vulkan::VulkanTensor;

Vulkan::Primitive Vulkan::conv2d(const Primitive& x, const Primitive& weight, const std::optional<Primitive>& bias,
                                 const ops::Conv2dOptions& options) {
  constexpr std::string_view op = "conv2d";
  vulkan::check_float(op, x.dtype, weight.dtype, x.shape, weight.shape);
  const Shape y_shape = ops::conv_output_shape(op, x.shape, weight.shape, options.stride, options.padding,
                                               options.dilation, options.groups);
  if (bias) {
    KILN_CHECK(bias->shape == Shape{weight.shape[0]}, "conv2d: bias must have shape [{}] for weight {}, got {}",
               weight.shape[0], weight.shape, bias->shape);
    KILN_CHECK(bias->dtype == x.dtype, "conv2d: bias dtype {} differs from input dtype {}", bias->dtype, x.dtype);
  }
  if (vulkan::is_half(x.dtype)) {
    const std::optional<Primitive> bias32 = bias ? std::optional(cast(*bias, DType::f32)) : std::nullopt;
    return cast(conv2d(cast(x, DType::f32), cast(weight, DType::f32), bias32, options), x.dtype);
  }
  if (y_shape.numel() == 0) return vulkan::empty(y_shape, x.dtype);
  const vulkan::Geometry g(x.shape, weight.shape, y_shape, options);
  const VulkanTensor w = vulkan::grouped_weight(g, weight);
  const std::int64_t chunk = g.chunk(x.dtype);
  std::vector<VulkanTensor> parts;
  for (std::int64_t first = 0; first < g.N; first += chunk) {
    const VulkanTensor xs = vulkan::samples(x, first, std::min(chunk, g.N - first));
    // [1, G, O/G, K] @ [n, G, K, P] = [n, G, O/G, P], the chunk of y in NCHW.
    const VulkanTensor y = matmul(w, vulkan::im2col(op, g, xs, false));
    parts.push_back(reshape(y, Shape{xs.shape[0], g.O, g.OH, g.OW}));
  }
  VulkanTensor out = parts.size() == 1 ? parts[0] : cat(parts, 0);
  if (bias) out = provided::binary<Vulkan, ops::Add>(out, reshape(*bias, Shape{1, g.O, 1, 1}));
  return out;
}

Vulkan::Primitive Vulkan::conv2d_backward_input(const Primitive& dy, const Primitive& weight, const Shape& x_shape,
                                                const ops::Conv2dOptions& options) {
  constexpr std::string_view op = "conv2d_backward_input";
  vulkan::check_float(op, dy.dtype, weight.dtype, dy.shape, weight.shape);
  const Shape y_shape = ops::conv_output_shape(op, x_shape, weight.shape, options.stride, options.padding,
                                               options.dilation, options.groups);
  KILN_CHECK(dy.shape == y_shape,
             "conv2d_backward_input: the output gradient has shape {}, but input {} and weight {} give output {}",
             dy.shape, x_shape, weight.shape, y_shape);
  if (vulkan::is_half(dy.dtype))
    return cast(conv2d_backward_input(cast(dy, DType::f32), cast(weight, DType::f32), x_shape, options), dy.dtype);
  if (x_shape.numel() == 0) return vulkan::empty(x_shape, dy.dtype);
  if (y_shape.numel() == 0) return full(x_shape, 0.0, dy.dtype, {});
  VulkanTensor dx = vulkan::empty(x_shape, dy.dtype);
  const vulkan::Geometry g(x_shape, weight.shape, y_shape, options);
  // [1, G, K, O/G]: the weight transposed per group, a view.
  const std::array<std::int64_t, 4> transpose{0, 1, 3, 2};
  const VulkanTensor wt = permute(vulkan::grouped_weight(g, weight), transpose);
  const std::int64_t chunk = g.chunk(dy.dtype);
  for (std::int64_t first = 0; first < g.N; first += chunk) {
    const std::int64_t n = std::min(chunk, g.N - first);
    const VulkanTensor dys = reshape(vulkan::samples(dy, first, n), Shape{n, g.G, g.O / g.G, g.P});
    // [1, G, K, O/G] @ [n, G, O/G, P] = [n, G, K, P], summed into the chunk of dx.
    const VulkanTensor cols = matmul(wt, dys);
    vulkan::run_columns(op, "col2im", g, n * g.C * g.H * g.W, vulkan::samples(dx, first, n), cols,
                        g.G * g.K * g.P, g.K * g.P, g.P);
  }
  return dx;
}

Vulkan::Primitive Vulkan::conv2d_backward_weight(const Primitive& x, const Primitive& dy, const Shape& weight_shape,
                                                 const ops::Conv2dOptions& options) {
  constexpr std::string_view op = "conv2d_backward_weight";
  vulkan::check_float(op, x.dtype, dy.dtype, x.shape, dy.shape);
  const Shape y_shape = ops::conv_output_shape(op, x.shape, weight_shape, options.stride, options.padding,
                                               options.dilation, options.groups);
  KILN_CHECK(dy.shape == y_shape,
             "conv2d_backward_weight: the output gradient has shape {}, but input {} and weight {} give output {}",
             dy.shape, x.shape, weight_shape, y_shape);
  if (vulkan::is_half(x.dtype))
    return cast(conv2d_backward_weight(cast(x, DType::f32), cast(dy, DType::f32), weight_shape, options), x.dtype);
  if (weight_shape.numel() == 0) return vulkan::empty(weight_shape, x.dtype);
  if (y_shape.numel() == 0) return full(weight_shape, 0.0, x.dtype, {});
  const vulkan::Geometry g(x.shape, weight_shape, y_shape, options);
  const std::int64_t chunk = g.chunk(x.dtype);
  const std::array<std::int64_t, 4> channels_first{1, 0, 2, 3};
  const std::array<std::int64_t, 3> transpose{0, 2, 1};
  std::optional<VulkanTensor> dw;
  for (std::int64_t first = 0; first < g.N; first += chunk) {
    const std::int64_t n = std::min(chunk, g.N - first);
    // dy as [G, O/G, n * P] (a copy, channels first), columns as [G, n * P, K] (a view).
    const VulkanTensor dys = vulkan::contiguous(permute(vulkan::samples(dy, first, n), channels_first));
    const VulkanTensor dyg = reshape(dys, Shape{g.G, g.O / g.G, n * g.P});
    const VulkanTensor cols = permute(vulkan::im2col(op, g, vulkan::samples(x, first, n), true), transpose);
    const VulkanTensor part = matmul(dyg, cols);
    dw = dw ? provided::binary<Vulkan, ops::Add>(*dw, part) : part;
  }
  return reshape(*dw, weight_shape);
}

}  // namespace kiln
