// Resampling of NCHW tensors (nearest, bilinear, bicubic) on the Vulkan backend, forward and
// backward, with the CPU backend's index and weight rules, checks and error messages
// (backends/cpu/src/interpolate.cpp, after torch.nn.functional.interpolate). f32, and f64
// where the device has shaderFloat64.
//
// Every mode is separable: output (oh, ow) reads K x K inputs (K = 1, 2, 4) through the taps
// of its row and column (kernels/glsl/interpolate.comp). The taps (input index and weight per output position and axis) are
// computed on the host by the CPU backend's formulas, in the element type, and uploaded, so
// the kernels use the very same indices and weights.
// - forward: one invocation per output element, summing in the CPU's order.
// - backward: one invocation per INPUT element, looping over the output taps that read it
//   (inverse tap lists per axis, built on the host: the (o, k) slots whose index is i, o
//   ascending), in the CPU's scatter order (oh, ow, then the taps a, c). Deterministic, no
//   atomics. Bicubic taps clamped at the border appear once per slot, as on the CPU.
// Arithmetic is `precise` (no fused multiply-add, a fixed evaluation order); the CPU build may
// contract or reorder its own, so f32 results agree with it to a few ulps, not bit for bit.
#include "kernels.hpp"

#include "kiln/ops/interpolate.hpp"

#include "kiln/vulkan/backend.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

namespace kiln::vulkan {
namespace {

using ops::InterpolateMode;


// The taps of one axis with 32-bit indices, as the kernels read them (the rule itself is
// the catalogue's, kiln/ops/interpolate.hpp).
template <class T>
struct AxisTaps {
  std::vector<std::int32_t> index;
  std::vector<T> weight;
};

template <class T>
AxisTaps<T> axis_taps(int K, std::int64_t in, std::int64_t out, bool align_corners) {
  ops::AxisTaps<T> taps;
  switch (K) {
    case 1: taps = ops::axis_taps<T, 1>(in, out, align_corners); break;
    case 2: taps = ops::axis_taps<T, 2>(in, out, align_corners); break;
    default: taps = ops::axis_taps<T, 4>(in, out, align_corners); break;
  }
  AxisTaps<T> narrow;
  narrow.index.assign(taps.index.begin(), taps.index.end());
  narrow.weight = std::move(taps.weight);
  return narrow;
}

using ops::taps_of;

// The inverse of an axis's taps: for input i, the slots o * K + k reading it are
// slots[start[i] .. start[i + 1]), o (then k) ascending. Appended to `out` as
// [start (in + 1)] [slots (out * K)], slot values offset by `slot_base`.
void append_inverse(const std::vector<std::int32_t>& index, std::int64_t in, std::int32_t slot_base,
                    std::vector<std::int32_t>& out) {
  std::vector<std::int32_t> count(static_cast<std::size_t>(in) + 1, 0);
  for (std::int32_t i : index) ++count[static_cast<std::size_t>(i) + 1];
  for (std::size_t i = 1; i < count.size(); ++i) count[i] += count[i - 1];
  out.insert(out.end(), count.begin(), count.end());
  const std::size_t slots = out.size();
  out.resize(out.size() + index.size());
  std::vector<std::int32_t> fill(count.begin(), count.end() - 1);
  for (std::size_t s = 0; s < index.size(); ++s)
    out[slots + static_cast<std::size_t>(fill[static_cast<std::size_t>(index[s])]++)] =
        slot_base + static_cast<std::int32_t>(s);
}

// The kernels and their parameter buffer: kernels/glsl/interpolate.comp.

// Runs the resampling of `src` (contiguous, [planes, SH, SW]) into `dst` ([planes, DH, DW]).
// Forward: src is x, dst the output; backward: src is dy, dst dx.
template <class T>
void run(const VulkanTensor& src, const VulkanTensor& dst, std::int64_t planes, std::int64_t h, std::int64_t w,
         std::int64_t oh, std::int64_t ow, const ops::InterpolateOptions& options, bool backward) {
  const int K = taps_of(options.mode);
  const AxisTaps<T> rows = axis_taps<T>(K, h, oh, options.align_corners);
  const AxisTaps<T> cols = axis_taps<T>(K, w, ow, options.align_corners);
  std::vector<T> weights(rows.weight);
  weights.insert(weights.end(), cols.weight.begin(), cols.weight.end());
  const std::int32_t col_base = checked_int(oh * K, "a tap table of");
  std::vector<std::int32_t> taps;
  std::int32_t rows_at = 0, cols_at = 0;
  if (!backward) {
    taps = rows.index;
    taps.insert(taps.end(), cols.index.begin(), cols.index.end());
  } else {
    rows_at = 0;
    append_inverse(rows.index, h, 0, taps);
    cols_at = checked_int(static_cast<std::int64_t>(taps.size()), "a tap table of");
    append_inverse(cols.index, w, col_base, taps);
  }
  const std::int64_t invocations = dst.numel();
  const std::vector<std::int32_t> params{checked_int(invocations, "a tensor of"),
                                         checked_int(h, "a dim of"),
                                         checked_int(w, "a dim of"),
                                         checked_int(oh, "a dim of"),
                                         checked_int(ow, "a dim of"),
                                         K,
                                         checked_int(src.offset, "an offset of"),
                                         col_base,
                                         rows_at,
                                         cols_at};
  checked_int(src.numel(), "a tensor of");
  (void)planes;
  Context& context = Context::get();
  auto upload = [&](const void* data, std::size_t bytes) {
    auto buffer = context.allocate(std::max<std::size_t>(bytes, 4));
    context.upload(*buffer, 0, data, bytes);
    return buffer;
  };
  const std::vector<std::shared_ptr<Buffer>> buffers{
      upload_ints(params), dst.buffer, src.buffer, upload_ints(taps),
      upload(weights.data(), weights.size() * sizeof(T))};
  const std::string_view op = backward ? "interpolate_backward" : "interpolate";
  const Pipeline& pipeline = kernel_pipeline(
      op, src.dtype, fmt::format("interpolate_{}_{}", backward ? "backward" : "forward", src.dtype), 5);
  dispatch_invocations(op, pipeline, buffers, invocations);
}

void resample(const VulkanTensor& src, const VulkanTensor& dst, std::int64_t planes, std::int64_t h, std::int64_t w,
              std::int64_t oh, std::int64_t ow, const ops::InterpolateOptions& options, bool backward) {
  if (dst.numel() == 0) return;
  if (src.dtype == DType::f64)
    run<double>(src, dst, planes, h, w, oh, ow, options, backward);
  else
    run<float>(src, dst, planes, h, w, oh, ow, options, backward);
}

}  // namespace
}  // namespace kiln::vulkan

namespace kiln {

using vulkan::VulkanTensor;

Vulkan::Primitive Vulkan::interpolate(const Primitive& x, std::span<const std::int64_t> output_size,
                                      const ops::InterpolateOptions& options) {
  ops::check_interpolate(x.shape, x.dtype, output_size);
  vulkan::check_dtype_supported("interpolate", x.dtype);
  if (vulkan::is_half(x.dtype)) return cast(interpolate(cast(x, DType::f32), output_size, options), x.dtype);
  VulkanTensor out = vulkan::empty(Shape{x.shape[0], x.shape[1], output_size[0], output_size[1]}, x.dtype);
  if (out.numel() == 0) return out;
  const VulkanTensor in = vulkan::contiguous(x);
  vulkan::resample(in, out, x.shape[0] * x.shape[1], x.shape[2], x.shape[3], output_size[0], output_size[1], options,
                   false);
  return out;
}

Vulkan::Primitive Vulkan::interpolate_backward(const Primitive& x, const Primitive& dy,
                                               const ops::InterpolateOptions& options) {
  ops::check_interpolate_backward(x.shape, x.dtype, dy.shape, dy.dtype);
  vulkan::check_dtype_supported("interpolate_backward", x.dtype);
  if (vulkan::is_half(x.dtype))
    return cast(interpolate_backward(cast(x, DType::f32), cast(dy, DType::f32), options), x.dtype);
  VulkanTensor dx = vulkan::empty(x.shape, x.dtype);
  if (dx.numel() == 0) return dx;
  const VulkanTensor grad = vulkan::contiguous(dy);
  vulkan::resample(grad, dx, x.shape[0] * x.shape[1], x.shape[2], x.shape[3], dy.shape[2], dy.shape[3], options,
                   true);
  return dx;
}

}  // namespace kiln
