// 2-d convolution on the Vulkan backend (NCHW, weight [out, in/groups, kh, kw]), f32 and f64
// (where the device has shaderFloat64): forward with optional bias, input gradient and
// weight gradient, with the CPU backend's checks and error messages.
//
// Direct kernels (kernels/glsl/conv2d.comp) with the index math of the CPU's reference loops
// (backends/cpu/src/conv.cpp), each invocation accumulating in the same order, so the
// results are deterministic (no atomics):
// - forward: one invocation per output element (n, oc, oy, ox), summing over the group's
//   input channels and the kernel taps (ic, ky, kx), starting from the bias;
// - backward input: one invocation per input element (n, ci, iy, ix), summing over the taps
//   (ky, kx) and, for each tap that meets an output position, the group's output channels;
// - backward weight: one invocation per weight element (oc, ic, ky, kx), summing over the
//   batch and the output positions (n, oy, ox).
// Operands are made contiguous first and read at their offsets; indices are 32-bit.
#include "kernels.hpp"

#include "kiln/vulkan/backend.hpp"

#include <fmt/format.h>

#include <limits>
#include <vector>

namespace kiln::vulkan {
namespace {

// The parameter buffer: kernels/glsl/conv2d.comp ([17..20) are the operands' offsets).
constexpr int kParams = 20;

// The CPU's check (both operands float, of one dtype), then the device's support for it.
void check_float(std::string_view op, DType a, DType b, const Shape& sa, const Shape& sb) {
  KILN_CHECK(a == b, "{}: dtypes differ: {} {} and {} {}", op, sa, a, sb, b);
  KILN_CHECK(is_float(a), "{}: expected float tensors, got {} {}", op, sa, a);
  check_dtype_supported(op, a);
}

// The validated output shape and the parameter buffer (offsets left 0).
std::vector<std::int32_t> params_of(std::string_view op, const Shape& x, const Shape& w, const Shape& y,
                                    const ops::Conv2dOptions& o) {
  // Every flat index the kernels form stays below the largest operand (plus its offset,
  // checked by the callers); the spatial products stay below the padded extents.
  for (const Shape* s : {&x, &w, &y}) checked_int(s->numel(), "a size of", op);
  for (int d = 0; d < 2; ++d) {
    checked_int(x[2 + d] + 2 * o.padding[d] + o.stride[d], "a size of", op);
    checked_int(o.dilation[d] * (w[2 + d] - 1) + o.stride[d], "a size of", op);
  }
  return {0,
          checked_int(x[0], "a size of", op),
          checked_int(x[1], "a size of", op),
          checked_int(x[2], "a size of", op),
          checked_int(x[3], "a size of", op),
          checked_int(w[0], "a size of", op),
          checked_int(w[2], "a size of", op),
          checked_int(w[3], "a size of", op),
          checked_int(y[2], "a size of", op),
          checked_int(y[3], "a size of", op),
          checked_int(o.groups, "a size of", op),
          checked_int(o.stride[0], "a size of", op),
          checked_int(o.stride[1], "a size of", op),
          checked_int(o.padding[0], "a size of", op),
          checked_int(o.padding[1], "a size of", op),
          checked_int(o.dilation[0], "a size of", op),
          checked_int(o.dilation[1], "a size of", op),
          0,
          0,
          0};
}

std::int32_t offset_of(std::string_view op, const VulkanTensor& t) {
  checked_int(t.offset + t.numel(), "a size of", op);
  return checked_int(t.offset, "a size of", op);
}

// Runs the conv2d.comp variant `kind` with one invocation per element of `out` over [params, out, a, b, extra...].
void run(std::string_view op, std::string_view kind, std::vector<std::int32_t> params, const VulkanTensor& out,
         std::vector<std::shared_ptr<Buffer>> inputs) {
  static_assert(kParams == 20);
  const std::int64_t n = out.numel();
  if (n == 0) return;
  params[0] = checked_int(n, "a size of", op);
  auto param_buffer = vulkan::upload_ints(params);
  std::vector<std::shared_ptr<Buffer>> buffers{param_buffer, out.buffer};
  buffers.insert(buffers.end(), inputs.begin(), inputs.end());
  const Pipeline& pipeline = kernel_pipeline(op, out.dtype, fmt::format("conv2d_{}_{}", kind, out.dtype),
                                             static_cast<std::uint32_t>(buffers.size()));
  dispatch_invocations(op, pipeline, buffers, n);
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
  auto params = vulkan::params_of(op, x.shape, weight.shape, y_shape, options);
  VulkanTensor out = vulkan::empty(y_shape, x.dtype);
  if (out.numel() == 0) return out;
  const VulkanTensor xc = vulkan::contiguous(x), wc = vulkan::contiguous(weight);
  params[17] = vulkan::offset_of(op, xc);
  params[18] = vulkan::offset_of(op, wc);
  std::vector<std::shared_ptr<vulkan::Buffer>> inputs{xc.buffer, wc.buffer};
  if (bias) {
    const VulkanTensor bc = vulkan::contiguous(*bias);
    params[19] = vulkan::offset_of(op, bc);
    inputs.push_back(bc.buffer);
  }
  vulkan::run(op, bias ? "forward_bias" : "forward", params, out, inputs);
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
  auto params = vulkan::params_of(op, x_shape, weight.shape, y_shape, options);
  VulkanTensor out = vulkan::empty(x_shape, dy.dtype);
  if (out.numel() == 0) return out;
  const VulkanTensor dyc = vulkan::contiguous(dy), wc = vulkan::contiguous(weight);
  params[17] = vulkan::offset_of(op, dyc);
  params[18] = vulkan::offset_of(op, wc);
  vulkan::run(op, "backward_input", params, out, {dyc.buffer, wc.buffer});
  return out;
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
  auto params = vulkan::params_of(op, x.shape, weight_shape, y_shape, options);
  VulkanTensor out = vulkan::empty(weight_shape, x.dtype);
  if (out.numel() == 0) return out;
  const VulkanTensor xc = vulkan::contiguous(x), dyc = vulkan::contiguous(dy);
  params[17] = vulkan::offset_of(op, xc);
  params[18] = vulkan::offset_of(op, dyc);
  vulkan::run(op, "backward_weight", params, out, {xc.buffer, dyc.buffer});
  return out;
}

}  // namespace kiln
