// Matrix multiplication on the Vulkan backend: [..., m, k] @ [..., k, n] with NumPy-broadcast
// batch dims, f32 (and f64 on devices with shaderFloat64). One tiled kernel,
// kernels/glsl/matmul.comp: each 16x16 workgroup computes a 16x16 block of one batch's
// output, staging 16x16 tiles of A and B in shared memory per step along k. Operands are
// read in place through their strides, so transposed, sliced and broadcast (stride-0) views
// need no copy; the output is contiguous.
#include "kernels.hpp"

#include "kiln/ops/matmul.hpp"

#include "kiln/vulkan/backend.hpp"

#include <fmt/format.h>

#include <limits>

namespace kiln::vulkan {
namespace {

constexpr int kTile = 16;  // TILE in kernels/glsl/matmul.comp
constexpr std::size_t kMaxBatchRank = 8;
// The parameter buffer: kernels/glsl/matmul.comp.
constexpr int kParams = 12 + 3 * static_cast<int>(kMaxBatchRank);

}  // namespace
}  // namespace kiln::vulkan

namespace kiln {

using vulkan::VulkanTensor;

Vulkan::Primitive Vulkan::matmul(const Primitive& a, const Primitive& b) {
  const ops::MatmulShape shape = ops::matmul_shape(a.shape, a.dtype, b.shape, b.dtype);
  const std::int64_t m = shape.m, k = shape.k, n = shape.n;
  const Extents& batch = shape.batch;
  const std::size_t nb = batch.size();
  const std::size_t ra = a.shape.rank(), rb = b.shape.rank();
  vulkan::check_dtype_supported("matmul", a.dtype);
  // f16 / bf16 multiply in f32 and round once, like the CPU backend.
  if (vulkan::is_half(a.dtype)) return cast(matmul(cast(a, DType::f32), cast(b, DType::f32)), a.dtype);
  KILN_CHECK(nb <= vulkan::kMaxBatchRank, "matmul: {} batch dims (the Vulkan kernel takes at most {})", nb,
             vulkan::kMaxBatchRank);

  const Shape out_shape = shape.out();
  if (out_shape.numel() == 0) return vulkan::empty(out_shape, a.dtype);
  if (k == 0) return full(out_shape, 0.0, a.dtype, {});
  VulkanTensor out = vulkan::empty(out_shape, a.dtype);
  const std::int64_t count = Shape(batch).numel();
  vulkan::checked_int(out_shape.numel(), "an output of", "matmul");

  std::vector<std::int32_t> params(static_cast<std::size_t>(vulkan::kParams), 0);
  params[0] = vulkan::checked_int(m, "a dim of", "matmul");
  params[1] = vulkan::checked_int(n, "a dim of", "matmul");
  params[2] = vulkan::checked_int(k, "a dim of", "matmul");
  params[3] = static_cast<std::int32_t>(nb);
  const std::int64_t row_tiles = (m + vulkan::kTile - 1) / vulkan::kTile;
  const std::int64_t col_tiles = (n + vulkan::kTile - 1) / vulkan::kTile;
  params[4] = vulkan::checked_int(row_tiles, "a row tile count of", "matmul");
  params[6] = vulkan::checked_int(a.offset, "an offset of", "matmul");
  params[7] = vulkan::checked_int(b.offset, "an offset of", "matmul");
  // A size-1 dim's stride is never multiplied by a non-zero coordinate, so it may be anything.
  params[8] = vulkan::checked_int(a.strides[ra - 2], "a stride of", "matmul");
  params[9] = vulkan::checked_int(a.strides[ra - 1], "a stride of", "matmul");
  params[10] = vulkan::checked_int(b.strides[rb - 2], "a stride of", "matmul");
  params[11] = vulkan::checked_int(b.strides[rb - 1], "a stride of", "matmul");
  for (std::size_t i = 0; i < nb; ++i) {
    params[12 + i] = vulkan::checked_int(batch[i], "a batch dim of", "matmul");
    if (i + ra - 2 >= nb) {
      const std::size_t d = i + ra - 2 - nb;
      params[20 + i] = a.shape[d] == 1 ? 0 : vulkan::checked_int(a.strides[d], "a stride of", "matmul");
    }
    if (i + rb - 2 >= nb) {
      const std::size_t d = i + rb - 2 - nb;
      params[28 + i] = b.shape[d] == 1 ? 0 : vulkan::checked_int(b.strides[d], "a stride of", "matmul");
    }
  }

  vulkan::Context& context = vulkan::Context::get();
  KILN_CHECK(col_tiles <= context.max_groups_x(), "matmul: n = {} needs more than {} workgroups", n,
             context.max_groups_x());
  // Batches go along y with the row tiles; a dispatch holds at most 65535 groups in y (the
  // minimum every device supports), so long batches split into several dispatches.
  const std::int64_t per_dispatch = std::max<std::int64_t>(1, 65535 / row_tiles);
  KILN_CHECK(row_tiles <= 65535, "matmul: m = {} needs more than 65535 workgroups", m);
  const vulkan::Pipeline& pipeline =
      vulkan::kernel_pipeline("matmul", a.dtype, fmt::format("matmul_{}", a.dtype), 4);
  for (std::int64_t first = 0; first < count; first += per_dispatch) {
    const std::int64_t batches = std::min(per_dispatch, count - first);
    params[5] = static_cast<std::int32_t>(first);
    auto param_buffer = context.allocate(params.size() * sizeof(std::int32_t));
    context.upload(*param_buffer, 0, params.data(), params.size() * sizeof(std::int32_t));
    const std::array<std::shared_ptr<vulkan::Buffer>, 4> buffers{param_buffer, out.buffer, a.buffer, b.buffer};
    context.dispatch(pipeline, buffers, static_cast<std::uint32_t>(col_tiles),
                     static_cast<std::uint32_t>(batches * row_tiles));
  }
  return out;
}

}  // namespace kiln
