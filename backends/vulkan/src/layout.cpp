// Layout ops on the Vulkan backend: reshape, permute, expand and slice are views (the view
// logic is shared with the CPU backend, kiln/backend/strided.hpp); flip, slice_assign and
// cat copy through the generated elementwise kernel with strided reads and writes.
#include "kernels.hpp"

#include "kiln/vulkan/backend.hpp"

namespace kiln {

using vulkan::VulkanTensor;

Vulkan::Primitive Vulkan::reshape(const Primitive& x, const Shape& shape) {
  return strided::reshape(x, shape, [](const VulkanTensor& t) { return vulkan::contiguous(t); });
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

namespace {
// A copy of src (broadcast) into the view dst, through the generated copy kernel.
void copy(const VulkanTensor& src, const VulkanTensor& dst) {
  const std::array<const VulkanTensor*, 1> part{&src};
  vulkan::run_elementwise_into(vulkan::copy_spec(src.dtype), part, dst);
}
}  // namespace

Vulkan::Primitive Vulkan::slice_assign(const Primitive& x, std::span<const ops::SliceRange> ranges,
                                       const Primitive& value) {
  return strided::slice_assign(x, ranges, value, vulkan::empty, copy);
}

Vulkan::Primitive Vulkan::cat(std::span<const Primitive> xs, std::int64_t dim) {
  KILN_CHECK(!xs.empty(), "cat: no tensors given");
  return strided::cat(xs, dim, vulkan::empty, copy);
}

}  // namespace kiln
