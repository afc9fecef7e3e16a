// Layout ops on the CUDA backend: reshape, permute, expand and slice are views (the view
// logic is shared with the CPU and Vulkan backends, kiln/backend/strided.hpp); flip,
// slice_assign and cat copy through the generated copy kernel with strided reads and writes.
#include "runtime.hpp"

#include "kiln/cuda/backend.hpp"

namespace kiln {

using cuda::CudaTensor;

Cuda::Primitive Cuda::reshape(const Primitive& x, const Shape& shape) {
  KILN_CHECK(shape.numel() == x.numel(), "reshape: cannot reshape {} ({} elements) to {} ({} elements)", x.shape,
             x.numel(), shape, shape.numel());
  CudaTensor v = x;
  if (auto strides = strided::reshape_strides(x, shape)) {
    v.strides = std::move(*strides);
  } else {
    v = cuda::contiguous(x);
    v.strides = shape.contiguous_strides();
  }
  v.shape = shape;
  return v;
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
  KILN_CHECK(value.dtype == x.dtype, "slice_assign: the value is {}, the tensor is {}", value.dtype, x.dtype);
  const Shape region = ops::sliced_shape(ranges);
  KILN_CHECK(ranges.size() != x.shape.rank() || value.shape == region,
             "slice_assign: the value has shape {}, the region of shape {} has shape {}", value.shape, x.shape, region);
  KILN_CHECK(value.device == x.device, "slice_assign: the tensor is on CUDA device {}, the value on {}", x.device,
             value.device);
  // The input is never modified: copy it, then overwrite the region of the copy.
  CudaTensor out = cuda::empty(x.shape, x.dtype, x.device);
  cuda::copy_into(x, out);
  cuda::copy_into(value, strided::slice(out, ranges));
  return out;
}

Cuda::Primitive Cuda::cat(std::span<const Primitive> xs, std::int64_t dim) {
  std::vector<Shape> shapes;
  std::vector<DType> dtypes;
  for (const auto& x : xs) {
    shapes.push_back(x.shape);
    dtypes.push_back(x.dtype);
  }
  const Shape shape = strided::cat_shape(shapes, dtypes, dim);
  CudaTensor out = cuda::empty(shape, xs[0].dtype, xs[0].device);
  std::vector<ops::SliceRange> ranges(shape.rank());
  for (std::size_t i = 0; i < shape.rank(); ++i) ranges[i] = {0, shape[i], 1};
  std::int64_t start = 0;
  const auto d = static_cast<std::size_t>(dim);
  for (const auto& x : xs) {
    KILN_CHECK(x.device == out.device, "cat: tensors on CUDA devices {} and {}", out.device, x.device);
    ranges[d] = {start, x.shape[d], 1};
    start += x.shape[d];
    cuda::copy_into(x, strided::slice(out, ranges));
  }
  return out;
}

}  // namespace kiln
