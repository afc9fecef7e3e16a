// Indexing on the Vulkan backend: gather and scatter (per-element indices along one dim,
// torch.gather / torch.scatter semantics), index_select and index_add (one index per slice
// along a dim), with the CPU backend's checks and error messages.
//
// The index tensor (i64 or i32, negative entries counting from the end) is read back to the
// host and validated like the CPU's read_indices: the first entry out of range, in row-major
// order, raises kiln::Error naming the op. The wrapped indices go back to the device as a
// contiguous i32 buffer, so the kernels need no 64-bit integers for them.
//
// Two kernels (kernels/glsl/gather.comp and scatter.comp), one invocation per output element:
// - gather: reads x at the output's coordinates with the indexed dim replaced by its index
//   (index_select is a gather whose index is read with stride 0 outside the dim).
// - scatter: starts from x's element and walks the fiber of index entries that can land on
//   it (same coordinates outside the dim), in order, assigning (the last match wins, as on
//   the CPU) or adding (in index order, so duplicates accumulate deterministically and
//   bit-for-bit like the CPU; no atomics). index_add is a scatter add whose index is read
//   with stride 0 outside the dim. The cost is numel(x) * index.shape[dim] reads.
#include "kernels.hpp"

#include "kiln/vulkan/backend.hpp"

#include <fmt/format.h>

#include <cstring>
#include <limits>

namespace kiln::vulkan {
namespace {

constexpr std::size_t kMaxRank = 8;  // MAX_RANK in kernels/glsl/indexing.glsl
constexpr int kR = static_cast<int>(kMaxRank);

// The CPU's read_indices: every index in row-major order, wrapped, or the CPU's error.
std::vector<std::int32_t> read_indices(std::string_view op, const VulkanTensor& index, std::int64_t limit) {
  ops::check_index_dtype(op, index.dtype);
  const TensorData data = Vulkan::into_data(index);
  const std::vector<std::int64_t> wide = ops::read_indices(op, data.dtype(), data.bytes(), limit);
  return {wide.begin(), wide.end()};  // within a dim of a Vulkan tensor: 32-bit
}

// Gather params (kernels/glsl/gather.comp): [0] n, [1] rank, [2] dim, [3] x offset, then out
// dims, x strides, index strides.
constexpr int kGatherDims = 4;
// Scatter params (kernels/glsl/scatter.comp): [0] n (x's elements), [1] rank, [2] dim,
// [3] x offset, [4] src offset, then x dims, x strides, index dims, src strides, index strides.
constexpr int kDims = 5, kXStrides = 5 + kR, kIndexDims = 5 + 2 * kR, kSrcStrides = 5 + 3 * kR,
              kIndexStrides = 5 + 4 * kR;

void run(std::string_view op, DType dtype, const std::string& variant, std::vector<std::shared_ptr<Buffer>> buffers,
         std::int64_t n) {
  const Pipeline& pipeline = kernel_pipeline(op, dtype, variant, static_cast<std::uint32_t>(buffers.size()));
  dispatch_invocations(op, pipeline, buffers, n);
}

// out (contiguous, shape `shape`) = x at the output's coordinates, dim `d` taken from the
// index buffer at sum(coordinate * index_strides).
VulkanTensor run_gather(std::string_view op, const VulkanTensor& x, std::size_t d, const Shape& shape,
                        const std::vector<std::int32_t>& indices, const Strides& index_strides) {
  KILN_CHECK(x.shape.rank() <= kMaxRank, "{}: tensors of rank {} (the Vulkan kernels take at most {})", op,
             x.shape.rank(), kMaxRank);
  VulkanTensor out = empty(shape, x.dtype);
  const std::int64_t n = shape.numel();
  std::vector<std::int32_t> params(static_cast<std::size_t>(kGatherDims + 3 * kR), 0);
  params[0] = checked_int(n, "a tensor of", op);
  params[1] = static_cast<std::int32_t>(shape.rank());
  params[2] = static_cast<std::int32_t>(d);
  params[3] = checked_int(x.offset, "an offset of", op);
  for (std::size_t i = 0; i < shape.rank(); ++i) {
    params[kGatherDims + i] = checked_int(shape[i], "a dim of", op);
    params[kGatherDims + kMaxRank + i] = checked_int(x.strides[i], "a stride of", op);
    params[kGatherDims + 2 * kMaxRank + i] = checked_int(index_strides[i], "a stride of", op);
  }
  // Elements only move: one kernel per element size.
  run(op, x.dtype, fmt::format("gather_{}", variant_bits(x.dtype)),
      {upload_ints(params), out.buffer, x.buffer, upload_ints(indices)}, n);
  return out;
}

// out = x with src's entries at `index_shape` positions scattered along dim d by the index
// buffer (read at sum(position * index_strides)).
VulkanTensor run_scatter(std::string_view op, const VulkanTensor& x, std::size_t d, const VulkanTensor& src,
                         const Shape& index_shape, const std::vector<std::int32_t>& indices,
                         const Strides& index_strides, ops::ScatterMode mode) {
  KILN_CHECK(x.shape.rank() <= kMaxRank, "{}: tensors of rank {} (the Vulkan kernels take at most {})", op,
             x.shape.rank(), kMaxRank);
  VulkanTensor out = empty(x.shape, x.dtype);
  const std::int64_t n = x.numel();
  std::vector<std::int32_t> params(static_cast<std::size_t>(5 + 5 * kR), 0);
  params[0] = checked_int(n, "a tensor of", op);
  params[1] = static_cast<std::int32_t>(x.shape.rank());
  params[2] = static_cast<std::int32_t>(d);
  params[3] = checked_int(x.offset, "an offset of", op);
  params[4] = checked_int(src.offset, "an offset of", op);
  for (std::size_t i = 0; i < x.shape.rank(); ++i) {
    params[kDims + i] = checked_int(x.shape[i], "a dim of", op);
    params[kXStrides + i] = checked_int(x.strides[i], "a stride of", op);
    params[kIndexDims + i] = checked_int(index_shape[i], "a dim of", op);
    params[kSrcStrides + i] = checked_int(src.strides[i], "a stride of", op);
    params[kIndexStrides + i] = checked_int(index_strides[i], "a stride of", op);
  }
  // Assigning only moves elements (one kernel per element size); adding is per dtype.
  const std::string variant = mode == ops::ScatterMode::assign ? fmt::format("scatter_assign_{}", variant_bits(x.dtype))
                                                               : fmt::format("scatter_add_{}", x.dtype);
  run(op, x.dtype, variant, {upload_ints(params), out.buffer, x.buffer, upload_ints(indices), src.buffer}, n);
  return out;
}

VulkanTensor copy(const VulkanTensor& x) {
  const std::array<const VulkanTensor*, 1> inputs{&x};
  return run_elementwise(copy_spec(x.dtype), inputs, x.shape);
}

// Index strides of a 1-d index used along dim d of a rank-r tensor: 1 on d, 0 elsewhere.
Strides along(std::size_t rank, std::size_t d) {
  Strides s(rank, 0);
  s[d] = 1;
  return s;
}

}  // namespace
}  // namespace kiln::vulkan

namespace kiln {

using vulkan::VulkanTensor;

Vulkan::Primitive Vulkan::gather(const Primitive& x, std::int64_t dim, const Primitive& index) {
  ops::check_dim("gather", dim, x.shape);
  const auto d = static_cast<std::size_t>(dim);
  const std::size_t rank = x.shape.rank();
  ops::check_gather_index(x.shape, index.shape, d);
  vulkan::check_dtype_supported("gather", x.dtype);
  if (index.numel() == 0) {
    ops::check_index_dtype("gather", index.dtype);
    return vulkan::empty(index.shape, x.dtype);
  }
  const std::vector<std::int32_t> indices = vulkan::read_indices("gather", index, x.shape[d]);
  return vulkan::run_gather("gather", x, d, index.shape, indices, index.shape.contiguous_strides());
}

Vulkan::Primitive Vulkan::scatter(const Primitive& x, std::int64_t dim, const Primitive& index, const Primitive& src,
                                  ops::ScatterMode mode) {
  const char* op = mode == ops::ScatterMode::add ? "scatter_add" : "scatter";
  ops::check_dim(op, dim, x.shape);
  const auto d = static_cast<std::size_t>(dim);
  const std::size_t rank = x.shape.rank();
  ops::check_scatter_operands(op, x.shape, x.dtype, index.shape, index.dtype, src.shape, src.dtype, d);
  vulkan::check_dtype_supported(op, x.dtype);
  if (index.numel() == 0) return vulkan::copy(x);
  const std::vector<std::int32_t> indices = vulkan::read_indices(op, index, x.shape[d]);
  return vulkan::run_scatter(op, x, d, src, index.shape, indices, index.shape.contiguous_strides(), mode);
}

Vulkan::Primitive Vulkan::index_select(const Primitive& x, std::int64_t dim, const Primitive& index) {
  ops::check_dim("index_select", dim, x.shape);
  const auto d = static_cast<std::size_t>(dim);
  ops::check_index_vector("index_select", index.shape);
  vulkan::check_dtype_supported("index_select", x.dtype);
  const std::vector<std::int32_t> indices = vulkan::read_indices("index_select", index, x.shape[d]);
  std::vector<std::int64_t> out_dims = x.shape.to_vector();
  out_dims[d] = static_cast<std::int64_t>(indices.size());
  const Shape out_shape(out_dims);
  if (out_shape.numel() == 0) return vulkan::empty(out_shape, x.dtype);
  return vulkan::run_gather("index_select", x, d, out_shape, indices, vulkan::along(x.shape.rank(), d));
}

Vulkan::Primitive Vulkan::index_add(const Primitive& x, std::int64_t dim, const Primitive& index,
                                    const Primitive& values) {
  ops::check_dim("index_add", dim, x.shape);
  const auto d = static_cast<std::size_t>(dim);
  ops::check_index_vector("index_add", index.shape);
  vulkan::check_dtype_supported("index_add", x.dtype);
  const std::vector<std::int32_t> indices = vulkan::read_indices("index_add", index, x.shape[d]);
  const auto n = static_cast<std::int64_t>(indices.size());
  ops::check_index_add_values(x.shape, x.dtype, values.shape, values.dtype, d, n);
  if (values.numel() == 0) return vulkan::copy(x);
  return vulkan::run_scatter("index_add", x, d, values, values.shape, indices, vulkan::along(x.shape.rank(), d),
                             ops::ScatterMode::add);
}

}  // namespace kiln
