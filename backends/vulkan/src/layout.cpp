// Layout ops on the Vulkan backend: reshape, permute, expand and slice are views (the view
// logic is shared with the CPU backend, kiln/backend/strided.hpp); flip, slice_assign and
// cat copy through the generated elementwise kernel with strided reads and writes.
#include "kernels.hpp"

#include "kiln/vulkan/backend.hpp"

namespace kiln {

using vulkan::VulkanTensor;

Vulkan::Primitive Vulkan::reshape(const Primitive& x, const Shape& shape) {
  KILN_CHECK(shape.numel() == x.numel(), "reshape: cannot reshape {} ({} elements) to {} ({} elements)", x.shape,
             x.numel(), shape, shape.numel());
  VulkanTensor v = x;
  if (auto strides = strided::reshape_strides(x, shape)) {
    v.strides = std::move(*strides);
  } else {
    v = vulkan::contiguous(x);
    v.strides = shape.contiguous_strides();
  }
  v.shape = shape;
  return v;
}

Vulkan::Primitive Vulkan::permute(const Primitive& x, std::span<const std::int64_t> dims) {
  return strided::permute(x, dims);
}

Vulkan::Primitive Vulkan::expand(const Primitive& x, const Shape& shape) { return strided::broadcast(x, shape); }

Vulkan::Primitive Vulkan::slice(const Primitive& x, std::span<const ops::SliceRange> ranges) {
  return strided::slice(x, ranges);
}

Vulkan::Primitive Vulkan::flip(const Primitive& x, std::span<const std::int64_t> dims) {
  const VulkanTensor view = strided::flip(x, dims);
  const std::array<const VulkanTensor*, 1> inputs{&view};
  return vulkan::run_elementwise(vulkan::copy_spec(x.dtype), inputs, x.shape);
}

Vulkan::Primitive Vulkan::slice_assign(const Primitive& x, std::span<const ops::SliceRange> ranges,
                                       const Primitive& value) {
  KILN_CHECK(value.dtype == x.dtype, "slice_assign: the value is {}, the tensor is {}", value.dtype, x.dtype);
  const Shape region = ops::sliced_shape(ranges);
  KILN_CHECK(ranges.size() != x.shape.rank() || value.shape == region,
             "slice_assign: the value has shape {}, the region of shape {} has shape {}", value.shape, x.shape, region);
  // The input is never modified: copy it, then overwrite the region of the copy.
  const std::array<const VulkanTensor*, 1> whole{&x};
  const VulkanTensor out = vulkan::run_elementwise(vulkan::copy_spec(x.dtype), whole, x.shape);
  const std::array<const VulkanTensor*, 1> part{&value};
  vulkan::run_elementwise_into(vulkan::copy_spec(x.dtype), part, strided::slice(out, ranges));
  return out;
}

Vulkan::Primitive Vulkan::cat(std::span<const Primitive> xs, std::int64_t dim) {
  std::vector<Shape> shapes;
  std::vector<DType> dtypes;
  for (const auto& x : xs) {
    shapes.push_back(x.shape);
    dtypes.push_back(x.dtype);
  }
  const Shape shape = strided::cat_shape(shapes, dtypes, dim);
  const VulkanTensor out = vulkan::empty(shape, xs[0].dtype);
  std::vector<ops::SliceRange> ranges(shape.rank());
  for (std::size_t i = 0; i < shape.rank(); ++i) ranges[i] = {0, shape[i], 1};
  std::int64_t start = 0;
  const auto d = static_cast<std::size_t>(dim);
  for (const auto& x : xs) {
    ranges[d] = {start, x.shape[d], 1};
    start += x.shape[d];
    const std::array<const VulkanTensor*, 1> part{&x};
    vulkan::run_elementwise_into(vulkan::copy_spec(x.dtype), part, strided::slice(out, ranges));
  }
  return out;
}

}  // namespace kiln
