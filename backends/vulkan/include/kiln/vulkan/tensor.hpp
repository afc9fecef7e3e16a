// The Vulkan backend's tensor handle and device: a reference-counted device buffer viewed
// through a shape, element strides and an element offset, like the CPU handle. No Vulkan
// header reaches this file: buffers are opaque to users.
#pragma once

#include "kiln/backend/strided.hpp"

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace kiln::vulkan {

struct Buffer;  // a VkBuffer and its memory, from the backend's pool (backends/vulkan/src)

struct VulkanTensor : StridedView {
  std::shared_ptr<Buffer> buffer;
};

// A Vulkan physical device as Kiln sees it.
struct DeviceInfo {
  int index = 0;
  std::string name;
  std::string type;  // "discrete", "integrated", "virtual", "cpu" or "other"
};

// The devices the Vulkan loader reports (empty when there is no loader or no driver).
std::vector<DeviceInfo> devices();
// Why Vulkan cannot run here, or an empty string when it can.
std::string unavailable_reason();

// How many elementwise kernels the process has rendered so far (a catalogue formula traced
// and rendered to GLSL, or a shader text built). Each op renders once per dtype and kernel
// variant; repeating it, at any shape or with any scalar, renders nothing (the kernels are
// found by number), which tests and benchmarks check with this count.
std::uint64_t elementwise_renders();

// How many kernels the process has dispatched so far (every op's, on every thread): tests
// count a fused program's kernels with it.
std::uint64_t dispatches();

}  // namespace kiln::vulkan

namespace kiln {

// Which Vulkan device a tensor lives on. The default picks KILN_VULKAN_DEVICE when set
// (an index, or a type: "discrete", "integrated", "virtual", "cpu"), else the first
// discrete GPU, else the first integrated one, else the first device.
struct VulkanDevice {
  int index = -1;  // -1: the default device
  friend bool operator==(const VulkanDevice&, const VulkanDevice&) = default;
};

}  // namespace kiln
