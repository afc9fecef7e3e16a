// Creation, host transfer, device moves and casts on the CUDA backend.
#include "runtime.hpp"

#include "kiln/cuda/backend.hpp"

#include <vector>

namespace kiln {

using cuda::CudaTensor;

Cuda::Primitive Cuda::from_data(const TensorData& data, const Device& device) {
  CudaTensor t = cuda::empty(data.shape(), data.dtype(), device.index);
  cuda::Context::get(t.device).upload(t.buffer->data, data.bytes().data(), data.bytes().size());
  return t;
}

TensorData Cuda::into_data(const Primitive& p) {
  const CudaTensor c = cuda::contiguous(p);
  std::vector<std::byte> bytes(static_cast<std::size_t>(c.numel()) * dtype_size(c.dtype));
  cuda::Context::get(c.device).download(bytes.data(), cuda::address(c), bytes.size());
  return TensorData(std::move(bytes), c.shape, c.dtype);
}

Cuda::Primitive Cuda::full(const Shape& shape, double value, DType dtype, const Device& device) {
  // The value travels as a one-element tensor broadcast by the copy kernel: one kernel per
  // dtype serves every value.
  const CudaTensor one = from_data(TensorData::from(std::vector<double>{value}, Shape{1}).convert(dtype), device);
  if (shape.numel() == 1) return reshape(one, shape);
  CudaTensor out = cuda::empty(shape, dtype, one.device);
  cuda::copy_into(one, out);
  return out;
}

Cuda::Primitive Cuda::to_device(const Primitive& p, const Device& device) {
  const int target = cuda::Context::get(device.index).index();
  if (target == p.device) return p;
  // The source's queued work first, then a peer copy on the target's stream.
  const CudaTensor c = cuda::contiguous(p);
  cuda::Context::get(c.device).synchronize();
  CudaTensor out = cuda::empty(c.shape, c.dtype, target);
  const std::size_t bytes = static_cast<std::size_t>(c.numel()) * dtype_size(c.dtype);
  if (bytes > 0) {
    cuda::Context& dst = cuda::Context::get(target);
    dst.activate();
    KILN_CUDA_CHECK(cudaMemcpyPeerAsync(out.buffer->data, target, cuda::address(c), c.device, bytes, dst.stream()));
    // The source buffer must outlive the copy: wait for it here (moves between devices are rare).
    dst.synchronize();
  }
  return out;
}

Cuda::Primitive Cuda::cast(const Primitive& p, DType dtype) { return cuda::cast(p, dtype); }

}  // namespace kiln
