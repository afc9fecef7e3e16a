// Stable sort along one dim on the CUDA and ROCm backends: values and i64 indices, exactly the CPU
// backend's: NaN sorts last ascending and first descending, equal values (and NaNs among
// themselves) keep their input order in both directions, -0.0 and 0.0 compare equal. Every
// dtype: f32, f64, i32, i64, u8 and bool (as its 0/1 bytes); f16 and bf16 sort as f32, which
// holds them exactly.
//
// Algorithm: a bottom-up merge sort of every line at once (kernels/cuda/sort.cu): an
// initial pass copies the values and numbers them, then ceil(log2(n)) passes each merge
// pairs of sorted runs, one thread per element placing itself by a binary search in the
// other run. The passes alternate between the outputs and a scratch pair, starting on the
// side that makes the last pass land in the outputs.
#include "runtime.hpp"


#include <fmt/format.h>

#include <string>
#include <utility>

namespace kiln {

using gpu::Tensor;

std::pair<Gpu::Primitive, Gpu::Primitive> Gpu::sort(const Primitive& x, std::int64_t dim, bool descending) {
  const std::size_t d = normalize_dim("sort", dim, x.shape.rank());
  if (gpu::is_half(x.dtype)) {
    // f16 / bf16 → f32 is exact, so sorting in f32 and casting back returns the input's values.
    auto [values, indices] = sort(gpu::cast(x, DType::f32), dim, descending);
    return {gpu::cast(values, x.dtype), std::move(indices)};
  }
  Tensor values = gpu::empty(x.shape, x.dtype, x.device);
  Tensor indices = gpu::empty(x.shape, DType::i64, x.device);
  if (x.numel() == 0) return {values, indices};
  const Tensor c = gpu::contiguous(x);
  const ops::DimSplit s = ops::split_at(x.shape, d);
  const long long total = x.numel(), n = s.n, inner = s.inner;
  const std::string_view type = x.dtype == DType::boolean ? "u8" : dtype_name(x.dtype);

  int passes = 0;
  for (long long width = 1; width < n; width *= 2) ++passes;
  // Ping-pong between the outputs and scratch: an even count of passes starts on the outputs.
  Tensor scratch_values, scratch_indices;
  if (passes > 0) {
    scratch_values = gpu::empty(x.shape, x.dtype, x.device);
    scratch_indices = gpu::empty(x.shape, DType::i64, x.device);
  }
  void* value_buffers[2] = {gpu::address(values), passes > 0 ? gpu::address(scratch_values) : nullptr};
  long long* index_buffers[2] = {gpu::pointer<long long>(indices),
                                 passes > 0 ? gpu::pointer<long long>(scratch_indices) : nullptr};
  int side = passes % 2;  // where the current runs are

  const auto kernel = [&](const std::string& entry) -> const gpu::Kernel& {
    return gpu::file_kernel(x.device, "sort", {}, entry);
  };
  const void* in_data = gpu::address(c);
  gpu::launch_threads(x.device, kernel(fmt::format("sort_init_{}", type)), total, value_buffers[side],
                       index_buffers[side], in_data, total, n, inner);
  const gpu::Kernel& merge =
      kernel(fmt::format("sort_merge_{}_{}", descending ? "descending" : "ascending", type));
  for (long long width = 1; width < n; width *= 2) {
    const void* src_values = value_buffers[side];
    const long long* src_indices = index_buffers[side];
    side = 1 - side;
    gpu::launch_threads(x.device, merge, total, value_buffers[side], index_buffers[side], src_values, src_indices,
                         total, n, inner, width);
  }
  // side == 0 here: the last pass wrote the outputs. The scratch goes back to the allocator
  // at return, safe with the passes queued (blocks are reused in stream order).
  return {values, indices};
}

}  // namespace kiln
