// Creation, host transfer and casts on the Vulkan backend.
#include "kernels.hpp"

#include "kiln/vulkan/backend.hpp"

#include <array>
#include <vector>

namespace kiln {

using vulkan::VulkanTensor;

namespace {
void check_device(const Vulkan::Device& device) {
  const auto& info = vulkan::Context::get().info();
  KILN_CHECK(device.index < 0 || device.index == info.index,
             "vulkan: device {} was asked for, but this process runs on device {} ({}); choose it with "
             "KILN_VULKAN_DEVICE",
             device.index, info.index, info.name);
}
}  // namespace

Vulkan::Primitive Vulkan::from_data(const TensorData& data, const Device& device) {
  check_device(device);
  VulkanTensor t = vulkan::empty(data.shape(), data.dtype());
  vulkan::Context::get().upload(*t.buffer, 0, data.bytes().data(), data.bytes().size());
  return t;
}

TensorData Vulkan::into_data(const Primitive& p) {
  const VulkanTensor c = vulkan::contiguous(p);
  const std::size_t element = dtype_size(c.dtype);
  std::vector<std::byte> bytes(static_cast<std::size_t>(c.numel()) * element);
  vulkan::Context::get().download(*c.buffer, static_cast<std::size_t>(c.offset) * element, bytes.data(), bytes.size());
  return TensorData(std::move(bytes), c.shape, c.dtype);
}

Vulkan::Primitive Vulkan::full(const Shape& shape, double value, DType dtype, const Device& device) {
  check_device(device);
  vulkan::check_dtype_supported("full", dtype);
  // The value travels as a one-element buffer, broadcast by the copy kernel: one kernel per
  // dtype serves every value (a kernel with the value as a literal would compile anew for
  // each learning rate or scalar operand).
  const VulkanTensor one = from_data(TensorData::from(std::vector<double>{value}, Shape{1}).convert(dtype), device);
  if (shape.numel() == 1) return reshape(one, shape);
  const std::array<const VulkanTensor*, 1> inputs{&one};
  return vulkan::run_elementwise(vulkan::copy_spec(dtype), inputs, shape);
}

// Drawn on the host from the same counter-based stream as every backend, then uploaded.
Vulkan::Primitive Vulkan::random(const Shape& shape, Distribution distribution, RandomStream stream, DType dtype,
                                 const Device& device) {
  std::vector<double> values(static_cast<std::size_t>(shape.numel()));
  for (std::size_t i = 0; i < values.size(); ++i) values[i] = distribution.sample(stream.seed, stream.offset + i);
  return from_data(TensorData::from(values, shape).convert(dtype), device);
}

Vulkan::Primitive Vulkan::to_device(const Primitive& p, const Device& device) {
  check_device(device);
  return p;
}

Vulkan::Primitive Vulkan::cast(const Primitive& p, DType dtype) {
  if (p.dtype == dtype) return p;
  vulkan::check_dtype_supported("cast", p.dtype);
  vulkan::check_dtype_supported("cast", dtype);
  static vulkan::SpecCache cache(dtype_count * dtype_count);
  const auto& spec = cache.get(vulkan::dtype_slot(p.dtype, dtype), [&] {
    vulkan::count_render();
    std::string value = "in0";
    bool is_bool = false;
    if (dtype == DType::boolean) {
      value = p.dtype == DType::boolean ? "in0" : fmt::format("in0 != {}(0)", vulkan::value_type(p.dtype));
      is_bool = true;
    } else if (p.dtype == DType::boolean) {
      value = fmt::format("in0 ? {}(1) : {}(0)", vulkan::value_type(dtype), vulkan::value_type(dtype));
    }
    return vulkan::ElementwiseSpec{{p.dtype}, {{dtype, value, is_bool}}};
  });
  const std::array<const VulkanTensor*, 1> inputs{&p};
  return vulkan::run_elementwise(spec, inputs, p.shape);
}

}  // namespace kiln
