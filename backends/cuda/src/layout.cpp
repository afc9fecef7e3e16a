// Layout ops on the CUDA and ROCm backends: reshape, permute, expand and slice are views (the view
// logic is shared with the CPU and Vulkan backends, kiln/backend/strided.hpp); flip,
// slice_assign and cat copy through the generated copy kernel with strided reads and writes.
#include "runtime.hpp"


namespace kiln {

using gpu::Tensor;

namespace {
// New tensors on x's device, and copies between views, for the shared layout ops.
auto empty_on(int device) {
  return [device](const Shape& shape, DType dtype) { return gpu::empty(shape, dtype, device); };
}
void copy(const Tensor& src, const Tensor& dst) {
  KILN_CHECK(src.device == dst.device, KILN_GPU_ID ": copying from device {} to device {}", src.device, dst.device);
  gpu::copy_into(src, dst);
}
}  // namespace

Gpu::Primitive Gpu::reshape(const Primitive& x, const Shape& shape) {
  return strided::reshape(x, shape, [](const Tensor& t) { return gpu::contiguous(t); });
}

Gpu::Primitive Gpu::permute(const Primitive& x, std::span<const std::int64_t> dims) {
  return strided::permute(x, dims);
}

Gpu::Primitive Gpu::expand(const Primitive& x, const Shape& shape) { return strided::broadcast(x, shape); }

Gpu::Primitive Gpu::slice(const Primitive& x, std::span<const ops::SliceRange> ranges) {
  return strided::slice(x, ranges);
}

Gpu::Primitive Gpu::flip(const Primitive& x, std::span<const std::int64_t> dims) {
  return gpu::contiguous(strided::flip(x, dims));
}

Gpu::Primitive Gpu::slice_assign(const Primitive& x, std::span<const ops::SliceRange> ranges,
                                   const Primitive& value) {
  return strided::slice_assign(x, ranges, value, empty_on(x.device), copy);
}

Gpu::Primitive Gpu::cat(std::span<const Primitive> xs, std::int64_t dim) {
  KILN_CHECK(!xs.empty(), "cat: no tensors given");
  return strided::cat(xs, dim, empty_on(xs[0].device), copy);
}

}  // namespace kiln
