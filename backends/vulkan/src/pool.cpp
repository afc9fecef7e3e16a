// Pooling on the Vulkan backend (NCHW, f32 and f64 where the device has shaderFloat64): max
// pooling with PyTorch-format indices (the flat h * W + w position within each (n, c) plane),
// average pooling and adaptive average pooling, forward and backward, with the CPU backend's
// checks, error messages and semantics (NaN wins a max window, ties keep the first tap in
// (kh, kw) order, a window of only -inf keeps its first valid position; count_include_pad and
// PyTorch's divisors; adaptive windows [floor(i * H / OH), ceil((i + 1) * H / OH))).
//
// The kernels are kernels/glsl/pool2d.comp. Forward kernels run one invocation per output
// element. Backward kernels run one invocation per input element and loop over the outputs
// whose windows contain it, adding their gradients in the CPU's order, so the results are
// deterministic (no atomics) and, apart from the GPU's division, bit-for-bit the CPU's
// direct loops:
// - max: the outputs whose window span (dilation included) covers the element and whose
//   stored index equals it. The indices are read back to the host and checked against the
//   plane (the CPU's error), then uploaded as i32.
// - avg: every output whose window covers the element, dy / divisor.
// - adaptive avg: outputs [floor(i * OH / H), floor(((i + 1) * OH - 1) / H)].
//
// The i64 indices are written as (low, high) 32-bit pairs, so the kernels need no shaderInt64.
#include "kernels.hpp"

#include "kiln/vulkan/backend.hpp"

#include <fmt/format.h>

#include <cstring>
#include <limits>
#include <vector>

namespace kiln::vulkan {
namespace {

// The parameter buffer: kernels/glsl/pool2d.comp.
constexpr int kParams = 15;

// The parameter buffer of a problem: input x_shape, output out_shape, `n` invocations.
std::vector<std::int32_t> params_of(std::string_view op, const Shape& x_shape, const Shape& out_shape,
                                    std::int64_t n, const ops::Pool2dOptions& o, std::int64_t source_offset) {
  // The kernels form products such as (oh + 1) * H and p * H * W in 32 bits.
  checked_int((x_shape[2] + 1) * (out_shape[2] + 1), "a size of", op);
  checked_int((x_shape[3] + 1) * (out_shape[3] + 1), "a size of", op);
  checked_int(x_shape.numel() + source_offset, "a size of", op);
  checked_int(out_shape.numel() + source_offset, "a size of", op);
  return {checked_int(n, "a size of", op),
          checked_int(x_shape[2], "a size of", op),
          checked_int(x_shape[3], "a size of", op),
          checked_int(out_shape[2], "a size of", op),
          checked_int(out_shape[3], "a size of", op),
          checked_int(o.kernel[0], "a size of", op),
          checked_int(o.kernel[1], "a size of", op),
          checked_int(o.stride[0], "a size of", op),
          checked_int(o.stride[1], "a size of", op),
          checked_int(o.padding[0], "a size of", op),
          checked_int(o.padding[1], "a size of", op),
          checked_int(o.dilation[0], "a size of", op),
          checked_int(o.dilation[1], "a size of", op),
          o.count_include_pad ? 1 : 0,
          checked_int(source_offset, "a size of", op)};
}


// Runs the pool2d.comp variant `kind` with `n` invocations over [params, out, source, extra...].
void run(std::string_view op, std::string_view kind, DType dtype, const std::vector<std::int32_t>& params,
         std::vector<std::shared_ptr<Buffer>> buffers, std::int64_t n) {
  static_assert(kParams == 15);
  if (n == 0) return;
  buffers.insert(buffers.begin(), upload_ints(params));
  const Pipeline& pipeline = kernel_pipeline(op, dtype, fmt::format("pool2d_{}_{}", kind, dtype),
                                             static_cast<std::uint32_t>(buffers.size()));
  dispatch_invocations(op, pipeline, buffers, n);
}

}  // namespace
}  // namespace kiln::vulkan

namespace kiln {

using vulkan::VulkanTensor;

std::pair<Vulkan::Primitive, Vulkan::Primitive> Vulkan::max_pool2d(const Primitive& x,
                                                                   const ops::Pool2dOptions& options) {
  constexpr std::string_view op = "max_pool2d";
  ops::check_pool_input_float(op, x.shape, x.dtype);
  vulkan::check_dtype_supported(op, x.dtype);
  const Shape out_shape = ops::pool2d_output_shape(op, x.shape, options);
  if (vulkan::is_half(x.dtype)) {
    auto [out, indices] = max_pool2d(cast(x, DType::f32), options);
    return {cast(out, x.dtype), indices};
  }
  const VulkanTensor in = vulkan::contiguous(x);
  VulkanTensor out = vulkan::empty(out_shape, x.dtype);
  // i64 indices as (low, high) pairs of 32-bit words: no shaderInt64 needed to write them.
  VulkanTensor indices;
  indices.buffer = vulkan::Context::get().allocate(
      std::max<std::size_t>(1, static_cast<std::size_t>(out_shape.numel())) * sizeof(std::int64_t));
  indices.shape = out_shape;
  indices.strides = out_shape.contiguous_strides();
  indices.dtype = DType::i64;
  const auto params = vulkan::params_of(op, x.shape, out_shape, out_shape.numel(), options, in.offset);
  vulkan::run(op, "max_forward", x.dtype, params, {out.buffer, in.buffer, indices.buffer},
              out_shape.numel());
  return {out, indices};
}

Vulkan::Primitive Vulkan::max_pool2d_backward(const Primitive& x, const Primitive& dy, const Primitive& indices,
                                              const ops::Pool2dOptions& options) {
  constexpr std::string_view op = "max_pool2d_backward";
  ops::check_pool_input_float(op, x.shape, x.dtype);
  vulkan::check_dtype_supported(op, x.dtype);
  const Shape out_shape = ops::pool2d_output_shape(op, x.shape, options);
  ops::check_pool_gradient(op, x.shape, x.dtype, dy.shape, dy.dtype, out_shape);
  KILN_CHECK(indices.dtype == DType::i64 && indices.shape == out_shape,
             "max_pool2d_backward: indices must be i64 of shape {}, got {} {}", out_shape, indices.shape,
             indices.dtype);
  if (vulkan::is_half(x.dtype))
    return cast(max_pool2d_backward(cast(x, DType::f32), cast(dy, DType::f32), indices, options), x.dtype);
  VulkanTensor dx = vulkan::empty(x.shape, x.dtype);
  if (dx.numel() == 0) return dx;
  // The CPU's check: every index inside the plane. Read back, checked, uploaded as i32.
  const TensorData data = Vulkan::into_data(indices);
  const std::int64_t plane = x.shape[2] * x.shape[3];
  std::vector<std::int32_t> wrapped(static_cast<std::size_t>(data.numel()));
  bool ok = true;
  for (std::size_t i = 0; i < wrapped.size(); ++i) {
    std::int64_t k;
    std::memcpy(&k, data.bytes().data() + i * sizeof(std::int64_t), sizeof(k));
    ok = ok && k >= 0 && k < plane;
    wrapped[i] = ok ? static_cast<std::int32_t>(k) : -1;
  }
  KILN_CHECK(ok, "max_pool2d_backward: an index is outside the {}x{} input plane", x.shape[2], x.shape[3]);
  const VulkanTensor grad = vulkan::contiguous(dy);
  const auto params = vulkan::params_of(op, x.shape, out_shape, dx.numel(), options, grad.offset);
  vulkan::run(op, "max_backward", x.dtype, params, {dx.buffer, grad.buffer, vulkan::upload_ints(wrapped)},
              dx.numel());
  return dx;
}

Vulkan::Primitive Vulkan::avg_pool2d(const Primitive& x, const ops::Pool2dOptions& options) {
  constexpr std::string_view op = "avg_pool2d";
  ops::check_pool_input_float(op, x.shape, x.dtype);
  vulkan::check_dtype_supported(op, x.dtype);
  ops::check_no_dilation(op, options);
  const Shape out_shape = ops::pool2d_output_shape(op, x.shape, options);
  if (vulkan::is_half(x.dtype)) return cast(avg_pool2d(cast(x, DType::f32), options), x.dtype);
  const VulkanTensor in = vulkan::contiguous(x);
  VulkanTensor out = vulkan::empty(out_shape, x.dtype);
  const auto params = vulkan::params_of(op, x.shape, out_shape, out_shape.numel(), options, in.offset);
  vulkan::run(op, "avg_forward", x.dtype, params, {out.buffer, in.buffer}, out_shape.numel());
  return out;
}

Vulkan::Primitive Vulkan::avg_pool2d_backward(const Primitive& x, const Primitive& dy,
                                              const ops::Pool2dOptions& options) {
  constexpr std::string_view op = "avg_pool2d_backward";
  ops::check_pool_input_float(op, x.shape, x.dtype);
  vulkan::check_dtype_supported(op, x.dtype);
  ops::check_no_dilation(op, options);
  const Shape out_shape = ops::pool2d_output_shape(op, x.shape, options);
  ops::check_pool_gradient(op, x.shape, x.dtype, dy.shape, dy.dtype, out_shape);
  if (vulkan::is_half(x.dtype))
    return cast(avg_pool2d_backward(cast(x, DType::f32), cast(dy, DType::f32), options), x.dtype);
  const VulkanTensor grad = vulkan::contiguous(dy);
  VulkanTensor dx = vulkan::empty(x.shape, x.dtype);
  const auto params = vulkan::params_of(op, x.shape, out_shape, dx.numel(), options, grad.offset);
  vulkan::run(op, "avg_backward", x.dtype, params, {dx.buffer, grad.buffer}, dx.numel());
  return dx;
}

Vulkan::Primitive Vulkan::adaptive_avg_pool2d(const Primitive& x, std::span<const std::int64_t> output_size) {
  constexpr std::string_view op = "adaptive_avg_pool2d";
  ops::check_pool_input_float(op, x.shape, x.dtype);
  vulkan::check_dtype_supported(op, x.dtype);
  const Shape out_shape = ops::adaptive_output_shape(op, x.shape, output_size);
  if (vulkan::is_half(x.dtype)) return cast(adaptive_avg_pool2d(cast(x, DType::f32), output_size), x.dtype);
  const VulkanTensor in = vulkan::contiguous(x);
  VulkanTensor out = vulkan::empty(out_shape, x.dtype);
  const auto params = vulkan::params_of(op, x.shape, out_shape, out_shape.numel(), {}, in.offset);
  vulkan::run(op, "adaptive_forward", x.dtype, params, {out.buffer, in.buffer}, out_shape.numel());
  return out;
}

Vulkan::Primitive Vulkan::adaptive_avg_pool2d_backward(const Primitive& x, const Primitive& dy) {
  constexpr std::string_view op = "adaptive_avg_pool2d_backward";
  ops::check_pool_input_float(op, x.shape, x.dtype);
  vulkan::check_dtype_supported(op, x.dtype);
  KILN_CHECK(dy.shape.rank() == 4, "adaptive_avg_pool2d_backward: dy must be NCHW, got shape {}", dy.shape);
  const std::array<std::int64_t, 2> size{dy.shape[2], dy.shape[3]};
  const Shape out_shape = ops::adaptive_output_shape(op, x.shape, size);
  ops::check_pool_gradient(op, x.shape, x.dtype, dy.shape, dy.dtype, out_shape);
  if (vulkan::is_half(x.dtype))
    return cast(adaptive_avg_pool2d_backward(cast(x, DType::f32), cast(dy, DType::f32)), x.dtype);
  const VulkanTensor grad = vulkan::contiguous(dy);
  VulkanTensor dx = vulkan::empty(x.shape, x.dtype);
  const auto params = vulkan::params_of(op, x.shape, out_shape, dx.numel(), {}, grad.offset);
  vulkan::run(op, "adaptive_backward", x.dtype, params, {dx.buffer, grad.buffer}, dx.numel());
  return dx;
}

}  // namespace kiln
