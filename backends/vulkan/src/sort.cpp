// Stable sort along one dim on the Vulkan backend: values and i64 indices, exactly the CPU
// backend's (backends/cpu/src/sort.cpp): NaN sorts last ascending and first descending
// (PyTorch's order), equal values (and NaNs among themselves) keep their input order in
// both directions, -0.0 and 0.0 compare equal. Every dtype the device holds: f32, f64, i32,
// i64, u8 and bool (as its 0/1 bytes).
//
// Algorithm (for now): a rank sort, kernels/glsl/sort.comp. The (contiguous) input is seen
// as [outer, n, inner]; one invocation per element counts the elements of its line that
// sort before it under the strict total order (key, then input position), which is its
// output position, and writes its value and index there. O(n^2) work per line, but exact,
// stable and deterministic with one dispatch and no scratch; a bitonic or merge sort in
// shared memory is the later speed-up for long lines.
//
// The i64 indices are written as (low, high) 32-bit pairs, so the kernel needs shaderInt64
// only for i64 values.
#include "kernels.hpp"

#include "kiln/vulkan/backend.hpp"

#include <fmt/format.h>

#include <vector>

namespace kiln {

using vulkan::VulkanTensor;

std::pair<Vulkan::Primitive, Vulkan::Primitive> Vulkan::sort(const Primitive& x, std::int64_t dim,
                                                             bool descending) {
  const std::size_t d = normalize_dim("sort", dim, x.shape.rank());
  vulkan::check_dtype_supported("sort", x.dtype);
  vulkan::check_dtype_supported("sort", DType::i64);
  if (vulkan::is_half(x.dtype)) {
    // f16 / bf16 → f32 is exact, so sorting in f32 and casting back returns the input's values.
    auto [values, indices] = sort(cast(x, DType::f32), dim, descending);
    return {cast(values, x.dtype), indices};
  }
  VulkanTensor values = vulkan::empty(x.shape, x.dtype);
  VulkanTensor indices = vulkan::empty(x.shape, DType::i64);
  if (x.numel() == 0) return {values, indices};
  const ops::DimSplit s = ops::split_at(x.shape, d);
  const VulkanTensor c = vulkan::contiguous(x);
  const std::vector<std::int32_t> params{vulkan::checked_int(x.numel(), "a tensor of"),
                                         vulkan::checked_int(s.n, "a dim of"),
                                         vulkan::checked_int(s.inner, "a tensor of"),
                                         vulkan::checked_int(c.offset, "an offset of")};
  auto param_buffer = vulkan::upload_ints(params);
  const std::vector<std::shared_ptr<vulkan::Buffer>> buffers{param_buffer, values.buffer, indices.buffer, c.buffer};
  const vulkan::Pipeline& pipeline = vulkan::kernel_pipeline(
      "sort", x.dtype,
      fmt::format("sort_{}_{}", descending ? "descending" : "ascending", vulkan::variant_dtype(x.dtype)), 4);
  vulkan::dispatch_invocations("sort", pipeline, buffers, x.numel());
  return {values, indices};
}

}  // namespace kiln
