// Creation, host transfer, device moves and casts on the CUDA and ROCm backends.
#include "runtime.hpp"


#include <vector>

namespace kiln {

using gpu::Tensor;

Gpu::Primitive Gpu::from_data(const TensorData& data, const Device& device) {
  Tensor t = gpu::empty(data.shape(), data.dtype(), device.index);
  gpu::Context::get(t.device).upload(t.buffer->data, data.bytes().data(), data.bytes().size());
  return t;
}

TensorData Gpu::into_data(const Primitive& p) {
  const Tensor c = gpu::contiguous(p);
  std::vector<std::byte> bytes(static_cast<std::size_t>(c.numel()) * dtype_size(c.dtype));
  gpu::Context::get(c.device).download(bytes.data(), gpu::address(c), bytes.size());
  return TensorData(std::move(bytes), c.shape, c.dtype);
}

Gpu::Primitive Gpu::full(const Shape& shape, double value, DType dtype, const Device& device) {
  // The value travels as a one-element tensor broadcast by the copy kernel: one kernel per
  // dtype serves every value.
  const Tensor one = from_data(TensorData::from(std::vector<double>{value}, Shape{1}).convert(dtype), device);
  if (shape.numel() == 1) return reshape(one, shape);
  Tensor out = gpu::empty(shape, dtype, one.device);
  gpu::copy_into(one, out);
  return out;
}

Gpu::Primitive Gpu::to_device(const Primitive& p, const Device& device) {
  const int target = gpu::Context::get(device.index).index();
  if (target == p.device) return p;
  // The source's queued work first, then a peer copy on the target's stream.
  const Tensor c = gpu::contiguous(p);
  gpu::Context::get(c.device).synchronize();
  Tensor out = gpu::empty(c.shape, c.dtype, target);
  const std::size_t bytes = static_cast<std::size_t>(c.numel()) * dtype_size(c.dtype);
  if (bytes > 0) {
    gpu::Context& dst = gpu::Context::get(target);
    dst.activate();
    KILN_GPU_CHECK(gpu_api::peer_copy(out.buffer->data, target, gpu::address(c), c.device, bytes, dst.stream()));
    // The source buffer must outlive the copy: wait for it here (moves between devices are rare).
    dst.synchronize();
  }
  return out;
}

Gpu::Primitive Gpu::cast(const Primitive& p, DType dtype) { return gpu::cast(p, dtype); }

}  // namespace kiln
