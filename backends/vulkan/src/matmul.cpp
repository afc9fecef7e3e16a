// Matrix multiplication on the Vulkan backend: [..., m, k] @ [..., k, n] with NumPy-broadcast
// batch dims, f32 (and f64 on devices with shaderFloat64). One tiled kernel: each 16x16
// workgroup computes a 16x16 block of one batch's output, staging 16x16 tiles of A and B in
// shared memory per step along k. Operands are read in place through their strides, so
// transposed, sliced and broadcast (stride-0) views need no copy; the output is contiguous.
#include "kernels.hpp"

#include "kiln/ops/matmul.hpp"

#include "kiln/vulkan/backend.hpp"

#include <fmt/format.h>

#include <limits>

namespace kiln::vulkan {
namespace {

constexpr int kTile = 16;
constexpr std::size_t kMaxBatchRank = 8;
// Parameter buffer layout (ints): [0] m, [1] n, [2] k, [3] batch rank, [4] row tiles,
// [5] first batch of this dispatch, [6] a offset, [7] b offset, [8] a row stride,
// [9] a col stride, [10] b row stride, [11] b col stride, [12..20) batch dims,
// [20..28) a batch strides, [28..36) b batch strides (0 on broadcast dims).
constexpr int kParams = 12 + 3 * static_cast<int>(kMaxBatchRank);

std::string matmul_shader(DType dtype) {
  const std::string t = storage_type(dtype);
  return fmt::format(
      "#version 450\n"
      "layout(local_size_x = {0}, local_size_y = {0}) in;\n"
      "layout(std430, binding = 0) readonly buffer Params {{ int params[]; }};\n"
      "layout(std430, binding = 1) writeonly buffer Out {{ {1} out_data[]; }};\n"
      "layout(std430, binding = 2) readonly buffer A {{ {1} a_data[]; }};\n"
      "layout(std430, binding = 3) readonly buffer B {{ {1} b_data[]; }};\n"
      "shared {1} tile_a[{0}][{0}];\n"
      "shared {1} tile_b[{0}][{0}];\n"
      "void main() {{\n"
      "  const int m = params[0], n = params[1], k = params[2], nb = params[3], row_tiles = params[4];\n"
      "  const int group_y = int(gl_WorkGroupID.y);\n"
      "  const int batch = params[5] + group_y / row_tiles;\n"
      "  const int lx = int(gl_LocalInvocationID.x), ly = int(gl_LocalInvocationID.y);\n"
      "  const int row = (group_y % row_tiles) * {0} + ly;\n"
      "  const int col = int(gl_WorkGroupID.x) * {0} + lx;\n"
      "  int a_base = params[6], b_base = params[7];\n"
      "  int rest = batch;\n"
      "  for (int d = nb - 1; d >= 0; --d) {{\n"
      "    const int size = params[12 + d];\n"
      "    const int c = rest % size;\n"
      "    rest /= size;\n"
      "    a_base += c * params[20 + d];\n"
      "    b_base += c * params[28 + d];\n"
      "  }}\n"
      "  const int ars = params[8], acs = params[9], brs = params[10], bcs = params[11];\n"
      "  {1} acc = {1}(0);\n"
      "  for (int k0 = 0; k0 < k; k0 += {0}) {{\n"
      "    {1} va = {1}(0);\n"
      "    if (row < m && k0 + lx < k) va = a_data[a_base + row * ars + (k0 + lx) * acs];\n"
      "    tile_a[ly][lx] = va;\n"
      "    {1} vb = {1}(0);\n"
      "    if (k0 + ly < k && col < n) vb = b_data[b_base + (k0 + ly) * brs + col * bcs];\n"
      "    tile_b[ly][lx] = vb;\n"
      "    barrier();\n"
      "    for (int i = 0; i < {0}; ++i) acc += tile_a[ly][i] * tile_b[i][lx];\n"
      "    barrier();\n"
      "  }}\n"
      "  if (row < m && col < n) out_data[(batch * m + row) * n + col] = acc;\n"
      "}}\n",
      kTile, t);
}


}  // namespace
}  // namespace kiln::vulkan

namespace kiln {

using vulkan::VulkanTensor;

Vulkan::Primitive Vulkan::matmul(const Primitive& a, const Primitive& b) {
  const ops::MatmulShape shape = ops::matmul_shape(a.shape, a.dtype, b.shape, b.dtype);
  const std::int64_t m = shape.m, k = shape.k, n = shape.n;
  const std::vector<std::int64_t>& batch = shape.batch;
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
  const vulkan::Pipeline& pipeline = context.pipeline(vulkan::matmul_shader(a.dtype), 4);
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
