// Layout ops on the CUDA backend: reshape, permute, expand and slice are views (the view
// logic is shared with the CPU and Vulkan backends, kiln/backend/strided.hpp); flip,
// slice_assign and cat copy through the generated copy kernel with strided reads and writes.
#include "runtime.hpp"

#include "kiln/cuda/backend.hpp"

namespace kiln {

using cuda::CudaTensor;

namespace {
// New tensors on x's device, and copies between views, for the shared layout ops.
auto empty_on(int device) {
  return [device](const Shape& shape, DType dtype) { return cuda::empty(shape, dtype, device); };
}
void copy(const CudaTensor& src, const CudaTensor& dst) {
  KILN_CHECK(src.device == dst.device, "cuda: copying from device {} to device {}", src.device, dst.device);
  cuda::copy_into(src, dst);
}
}  // namespace

Cuda::Primitive Cuda::reshape(const Primitive& x, const Shape& shape) {
  return strided::reshape(x, shape, [](const CudaTensor& t) { return cuda::contiguous(t); });
}

Cuda::Primitive Cuda::permute(const Primitive& x, std::span<const std::int64_t> dims) {
  return strided::permute(x, dims);
}

Cuda::Primitive Cuda::expand(const Primitive& x, const Shape& shape) { return strided::broadcast(x, shape); }

Cuda::Primitive Cuda::slice(const Primitive& x, std::span<const ops::SliceRange> ranges) {
  return strided::slice(x, ranges);
}

Cuda::Primitive Cuda::flip(const Primitive& x, std::span<const std::int64_t> dims) {
  return cuda::contiguous(strided::flip(x, dims));
}

Cuda::Primitive Cuda::slice_assign(const Primitive& x, std::span<const ops::SliceRange> ranges,
                                   const Primitive& value) {
  return strided::slice_assign(x, ranges, value, empty_on(x.device), copy);
}

Cuda::Primitive Cuda::cat(std::span<const Primitive> xs, std::int64_t dim) {
  KILN_CHECK(!xs.empty(), "cat: no tensors given");
  return strided::cat(xs, dim, empty_on(xs[0].device), copy);
}

}  // namespace kiln
