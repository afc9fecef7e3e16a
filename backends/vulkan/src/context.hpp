// The Vulkan runtime behind kiln::Vulkan: one instance and device per process, a pool of
// buffers by size class, compute pipelines (from SPIR-V compiled at build time, cached by
// variant name, or from GLSL compiled at run time, cached by source), and a command batch
// that records dispatches and submits them once, when data is read back or the batch is
// full. The context lives until the process ends (tensors in static storage may outlive
// any destruction order). Private to backends/vulkan/src.
#pragma once

#include "kiln/core/error.hpp"
#include "kiln/vulkan/tensor.hpp"

#include <vulkan/vulkan.h>

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace kiln::vulkan {

#define KILN_VK_CHECK(call)                                                                             \
  do {                                                                                                  \
    const VkResult kiln_vk_result = (call);                                                             \
    KILN_CHECK(kiln_vk_result == VK_SUCCESS, "vulkan: {} failed with VkResult {}", #call,               \
               static_cast<int>(kiln_vk_result));                                                       \
  } while (0)

class Context;

// A device buffer of `bytes` (its size class); returned to the pool when the last
// reference goes, which the batch delays until the GPU is done with it.
struct Buffer {
  VkBuffer buffer = VK_NULL_HANDLE;
  VkDeviceMemory memory = VK_NULL_HANDLE;
  std::size_t bytes = 0;
  void* mapped = nullptr;  // host pointer when the memory is host-visible
};

struct Pipeline {
  VkPipeline pipeline = VK_NULL_HANDLE;
  VkPipelineLayout layout = VK_NULL_HANDLE;
  VkDescriptorSetLayout set_layout = VK_NULL_HANDLE;
  std::uint32_t bindings = 0;
};

struct Features {
  bool float64 = false;
  bool int64 = false;
  bool int8 = false;             // shaderInt8 + 8-bit storage: u8 and bool tensors
  bool float16_storage = false;  // 16-bit storage
};

class Context {
 public:
  // The process's context, created on first use; throws kiln::Error when no device works.
  static Context& get();

  const DeviceInfo& info() const { return info_; }
  const Features& features() const { return features_; }
  std::uint32_t max_groups_x() const { return max_groups_x_; }

  // A buffer of at least `bytes` from the pool.
  std::shared_ptr<Buffer> allocate(std::size_t bytes);
  void release(Buffer* buffer);

  // Host transfers. upload writes a buffer no recorded work uses yet (a fresh one);
  // download flushes the batch first.
  void upload(const Buffer& dst, std::size_t offset, const void* src, std::size_t bytes);
  void download(const Buffer& src, std::size_t offset, void* dst, std::size_t bytes);

  // The compute pipeline of a GLSL source with `bindings` storage buffers (binding 0..n-1),
  // compiled at run time (the generated elementwise kernels).
  const Pipeline& pipeline(const std::string& glsl, std::uint32_t bindings);
  // The compute pipeline of a kernel compiled to SPIR-V at build time (kernels/glsl),
  // cached by its variant name; `spirv` is read only the first time.
  const Pipeline& pipeline(std::string_view name, std::span<const std::uint32_t> spirv, std::uint32_t bindings);

  // Records a dispatch of `groups` workgroups over the buffers (kept alive until it ran).
  void dispatch(const Pipeline& pipeline, std::span<const std::shared_ptr<Buffer>> buffers, std::uint32_t groups_x,
                std::uint32_t groups_y);
  // Submits the recorded work and waits for it.
  void flush();

 private:
  Context();
  void begin_batch();
  std::uint32_t memory_type(std::uint32_t bits, VkMemoryPropertyFlags wanted, VkMemoryPropertyFlags fallback,
                            VkMemoryPropertyFlags* got) const;
  std::shared_ptr<Buffer> staging(std::size_t bytes);
  // Creates the pipeline of `spirv`; the caller holds mutex_.
  Pipeline create_pipeline(std::span<const std::uint32_t> spirv, std::uint32_t bindings);

  VkInstance instance_ = VK_NULL_HANDLE;
  VkPhysicalDevice physical_ = VK_NULL_HANDLE;
  VkDevice device_ = VK_NULL_HANDLE;
  VkQueue queue_ = VK_NULL_HANDLE;
  std::uint32_t queue_family_ = 0;
  VkPhysicalDeviceMemoryProperties memory_{};
  DeviceInfo info_;
  Features features_;
  std::uint32_t max_groups_x_ = 65535;

  std::mutex mutex_;
  std::multimap<std::size_t, Buffer*> free_buffers_;
  std::unordered_map<std::string, Pipeline> pipelines_;  // by GLSL source
  std::unordered_map<std::string, Pipeline> kernels_;    // by kernels/glsl variant name
  std::map<std::uint32_t, VkDescriptorSetLayout> set_layouts_;

  // The batch being recorded.
  VkCommandPool command_pool_ = VK_NULL_HANDLE;
  VkCommandBuffer commands_ = VK_NULL_HANDLE;
  VkDescriptorPool descriptor_pool_ = VK_NULL_HANDLE;
  VkFence fence_ = VK_NULL_HANDLE;
  std::vector<std::shared_ptr<Buffer>> in_flight_;
  std::uint32_t recorded_ = 0;
  bool recording_ = false;
};

// Invocations per workgroup of the kernels (WORKGROUP_SIZE in kernels/glsl; both come from
// backends/vulkan/CMakeLists.txt).
inline constexpr std::uint32_t kWorkgroupSize = KILN_VULKAN_WORKGROUP_SIZE;

}  // namespace kiln::vulkan
