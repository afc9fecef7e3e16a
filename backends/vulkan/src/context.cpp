// The Vulkan runtime: device selection, buffer pool, pipelines (precompiled or compiled at
// run time) and command batches.
#include "context.hpp"

#include "glsl_compiler.hpp"
#include "kiln/vulkan/backend.hpp"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>

namespace kiln::vulkan {
namespace {

// Dispatches recorded before a batch is submitted without waiting for a read.
constexpr std::uint32_t kMaxBatch = 512;
constexpr std::uint32_t kMaxBindings = 8;
static_assert(kMaxBindings == Vulkan::max_kernel_buffers);

std::atomic<std::uint64_t> dispatch_count{0};

std::string type_name(VkPhysicalDeviceType type) {
  switch (type) {
    case VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU: return "discrete";
    case VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU: return "integrated";
    case VK_PHYSICAL_DEVICE_TYPE_VIRTUAL_GPU: return "virtual";
    case VK_PHYSICAL_DEVICE_TYPE_CPU: return "cpu";
    default: return "other";
  }
}

VkInstance create_instance() {
  VkApplicationInfo app{VK_STRUCTURE_TYPE_APPLICATION_INFO};
  app.pApplicationName = "kiln";
  app.apiVersion = VK_API_VERSION_1_1;
  VkInstanceCreateInfo info{VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO};
  info.pApplicationInfo = &app;
  VkInstance instance = VK_NULL_HANDLE;
  const VkResult result = vkCreateInstance(&info, nullptr, &instance);
  KILN_CHECK(result == VK_SUCCESS,
             "vulkan: no Vulkan instance (VkResult {}); install a driver, e.g. mesa-vulkan-drivers for lavapipe",
             static_cast<int>(result));
  return instance;
}

std::vector<VkPhysicalDevice> physical_devices(VkInstance instance) {
  std::uint32_t count = 0;
  vkEnumeratePhysicalDevices(instance, &count, nullptr);
  std::vector<VkPhysicalDevice> out(count);
  if (count) vkEnumeratePhysicalDevices(instance, &count, out.data());
  out.resize(count);
  return out;
}

DeviceInfo describe(VkPhysicalDevice device, int index) {
  VkPhysicalDeviceProperties props;
  vkGetPhysicalDeviceProperties(device, &props);
  return {index, props.deviceName, type_name(props.deviceType)};
}

// KILN_VULKAN_DEVICE (an index or a type), else discrete > integrated > the first.
int choose_device(const std::vector<DeviceInfo>& infos) {
  KILN_CHECK(!infos.empty(), "vulkan: the loader found no Vulkan device (install mesa-vulkan-drivers for lavapipe, "
                             "or a GPU driver)");
  if (const char* wanted = std::getenv("KILN_VULKAN_DEVICE"); wanted && *wanted) {
    const std::string w = wanted;
    if (std::all_of(w.begin(), w.end(), [](char c) { return c >= '0' && c <= '9'; })) {
      const int index = std::stoi(w);
      KILN_CHECK(index < static_cast<int>(infos.size()), "vulkan: KILN_VULKAN_DEVICE={} but there are {} devices", w,
                 infos.size());
      return index;
    }
    for (const auto& d : infos)
      if (d.type == w) return d.index;
    KILN_FAIL("vulkan: KILN_VULKAN_DEVICE={}: no device of that type (expected an index or discrete, integrated, "
              "virtual, cpu)",
              w);
  }
  for (const char* type : {"discrete", "integrated"})
    for (const auto& d : infos)
      if (d.type == type) return d.index;
  return 0;
}

}  // namespace

std::uint64_t dispatches() { return dispatch_count.load(std::memory_order_relaxed); }

std::vector<DeviceInfo> devices() {
  VkApplicationInfo app{VK_STRUCTURE_TYPE_APPLICATION_INFO};
  app.apiVersion = VK_API_VERSION_1_1;
  VkInstanceCreateInfo info{VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO};
  info.pApplicationInfo = &app;
  VkInstance instance = VK_NULL_HANDLE;
  if (vkCreateInstance(&info, nullptr, &instance) != VK_SUCCESS) return {};
  std::vector<DeviceInfo> out;
  const auto list = physical_devices(instance);
  for (std::size_t i = 0; i < list.size(); ++i) out.push_back(describe(list[i], static_cast<int>(i)));
  vkDestroyInstance(instance, nullptr);
  return out;
}

std::string unavailable_reason() {
  try {
    Context::get();
    return "";
  } catch (const Error& e) {
    return e.what();
  }
}

Context& Context::get() {
  // Never destroyed: tensors in static storage may outlive any destruction order.
  static Context* context = new Context();
  return *context;
}

Context::Context() {
  instance_ = create_instance();
  const auto list = physical_devices(instance_);
  std::vector<DeviceInfo> infos;
  for (std::size_t i = 0; i < list.size(); ++i) infos.push_back(describe(list[i], static_cast<int>(i)));
  const int chosen = choose_device(infos);
  physical_ = list[static_cast<std::size_t>(chosen)];
  info_ = infos[static_cast<std::size_t>(chosen)];

  VkPhysicalDeviceProperties props;
  vkGetPhysicalDeviceProperties(physical_, &props);
  max_groups_x_ = props.limits.maxComputeWorkGroupCount[0];
  vkGetPhysicalDeviceMemoryProperties(physical_, &memory_);

  std::uint32_t families = 0;
  vkGetPhysicalDeviceQueueFamilyProperties(physical_, &families, nullptr);
  std::vector<VkQueueFamilyProperties> family_props(families);
  vkGetPhysicalDeviceQueueFamilyProperties(physical_, &families, family_props.data());
  bool found = false;
  for (std::uint32_t i = 0; i < families && !found; ++i) {
    if (family_props[i].queueFlags & VK_QUEUE_COMPUTE_BIT) {
      queue_family_ = i;
      found = true;
    }
  }
  KILN_CHECK(found, "vulkan: device {} ({}) has no compute queue", info_.index, info_.name);

  // The features the generated kernels use, where the device has them.
  VkPhysicalDevice8BitStorageFeatures storage8{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_8BIT_STORAGE_FEATURES};
  VkPhysicalDevice16BitStorageFeatures storage16{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_16BIT_STORAGE_FEATURES};
  VkPhysicalDeviceShaderFloat16Int8Features float16_int8{
      VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_FLOAT16_INT8_FEATURES};
  storage8.pNext = &storage16;
  storage16.pNext = &float16_int8;
  VkPhysicalDeviceFeatures2 available{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2};
  available.pNext = &storage8;
  vkGetPhysicalDeviceFeatures2(physical_, &available);
  features_.float64 = available.features.shaderFloat64;
  features_.int64 = available.features.shaderInt64;
  features_.int8 = storage8.storageBuffer8BitAccess && float16_int8.shaderInt8;
  features_.float16_storage = storage16.storageBuffer16BitAccess;

  VkPhysicalDevice8BitStorageFeatures enable8{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_8BIT_STORAGE_FEATURES};
  VkPhysicalDevice16BitStorageFeatures enable16{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_16BIT_STORAGE_FEATURES};
  VkPhysicalDeviceShaderFloat16Int8Features enable_int8{
      VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_FLOAT16_INT8_FEATURES};
  enable8.storageBuffer8BitAccess = features_.int8;
  enable16.storageBuffer16BitAccess = features_.float16_storage;
  enable_int8.shaderInt8 = features_.int8;
  enable8.pNext = &enable16;
  enable16.pNext = &enable_int8;
  VkPhysicalDeviceFeatures2 enabled{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2};
  enabled.pNext = &enable8;
  enabled.features.shaderFloat64 = features_.float64;
  enabled.features.shaderInt64 = features_.int64;

  const float priority = 1.0f;
  VkDeviceQueueCreateInfo queue{VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO};
  queue.queueFamilyIndex = queue_family_;
  queue.queueCount = 1;
  queue.pQueuePriorities = &priority;
  VkDeviceCreateInfo device{VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO};
  device.pNext = &enabled;
  device.queueCreateInfoCount = 1;
  device.pQueueCreateInfos = &queue;
  KILN_VK_CHECK(vkCreateDevice(physical_, &device, nullptr, &device_));
  vkGetDeviceQueue(device_, queue_family_, 0, &queue_);

  VkCommandPoolCreateInfo pool{VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO};
  pool.flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT;
  pool.queueFamilyIndex = queue_family_;
  KILN_VK_CHECK(vkCreateCommandPool(device_, &pool, nullptr, &command_pool_));
  VkCommandBufferAllocateInfo alloc{VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO};
  alloc.commandPool = command_pool_;
  alloc.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY;
  alloc.commandBufferCount = 1;
  KILN_VK_CHECK(vkAllocateCommandBuffers(device_, &alloc, &commands_));
  VkDescriptorPoolSize sizes{VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, kMaxBatch * kMaxBindings};
  VkDescriptorPoolCreateInfo descriptors{VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO};
  descriptors.maxSets = kMaxBatch;
  descriptors.poolSizeCount = 1;
  descriptors.pPoolSizes = &sizes;
  KILN_VK_CHECK(vkCreateDescriptorPool(device_, &descriptors, nullptr, &descriptor_pool_));
  VkFenceCreateInfo fence{VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
  KILN_VK_CHECK(vkCreateFence(device_, &fence, nullptr, &fence_));
}

std::uint32_t Context::memory_type(std::uint32_t bits, VkMemoryPropertyFlags wanted, VkMemoryPropertyFlags fallback,
                                   VkMemoryPropertyFlags* got) const {
  for (VkMemoryPropertyFlags flags : {wanted, fallback}) {
    for (std::uint32_t i = 0; i < memory_.memoryTypeCount; ++i) {
      if ((bits & (1u << i)) && (memory_.memoryTypes[i].propertyFlags & flags) == flags) {
        *got = memory_.memoryTypes[i].propertyFlags;
        return i;
      }
    }
  }
  KILN_FAIL("vulkan: device {} has no suitable memory type", info_.name);
}

// Size classes as in the CPU allocator: 256 B steps, then four classes per power of two.
static std::size_t size_class(std::size_t bytes) {
  bytes = std::max<std::size_t>(bytes, 4);
  if (bytes <= 4096) return (bytes + 255) / 256 * 256;
  std::size_t power = 4096;
  while (power * 2 < bytes) power *= 2;
  const std::size_t step = power / 4;
  return (bytes + step - 1) / step * step;
}

std::shared_ptr<Buffer> Context::allocate(std::size_t bytes) {
  const std::size_t size = size_class(bytes);
  Buffer* buffer = nullptr;
  {
    std::lock_guard lock(mutex_);
    auto it = free_buffers_.find(size);
    if (it != free_buffers_.end()) {
      buffer = it->second;
      free_buffers_.erase(it);
    }
  }
  if (!buffer) {
    buffer = new Buffer();
    buffer->bytes = size;
    VkBufferCreateInfo info{VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO};
    info.size = size;
    info.usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_TRANSFER_SRC_BIT | VK_BUFFER_USAGE_TRANSFER_DST_BIT;
    info.sharingMode = VK_SHARING_MODE_EXCLUSIVE;
    KILN_VK_CHECK(vkCreateBuffer(device_, &info, nullptr, &buffer->buffer));
    VkMemoryRequirements req;
    vkGetBufferMemoryRequirements(device_, buffer->buffer, &req);
    VkMemoryPropertyFlags got = 0;
    // Device-local memory that the host can map (lavapipe, integrated GPUs, resizable BAR)
    // avoids staging; otherwise device-local memory with staged transfers.
    const std::uint32_t type = memory_type(
        req.memoryTypeBits,
        VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT | VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT,
        VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT, &got);
    VkMemoryAllocateInfo alloc{VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO};
    alloc.allocationSize = req.size;
    alloc.memoryTypeIndex = type;
    const VkResult result = vkAllocateMemory(device_, &alloc, nullptr, &buffer->memory);
    KILN_CHECK(result == VK_SUCCESS, "vulkan: out of device memory allocating {} bytes (VkResult {})", size,
               static_cast<int>(result));
    KILN_VK_CHECK(vkBindBufferMemory(device_, buffer->buffer, buffer->memory, 0));
    if ((got & VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT) && (got & VK_MEMORY_PROPERTY_HOST_COHERENT_BIT))
      KILN_VK_CHECK(vkMapMemory(device_, buffer->memory, 0, VK_WHOLE_SIZE, 0, &buffer->mapped));
  }
  return std::shared_ptr<Buffer>(buffer, [this](Buffer* b) { release(b); });
}

void Context::release(Buffer* buffer) {
  std::lock_guard lock(mutex_);
  free_buffers_.emplace(buffer->bytes, buffer);
}

std::shared_ptr<Buffer> Context::staging(std::size_t bytes) {
  auto buffer = std::make_shared<Buffer>();
  buffer->bytes = bytes;
  VkBufferCreateInfo info{VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO};
  info.size = std::max<std::size_t>(bytes, 4);
  info.usage = VK_BUFFER_USAGE_TRANSFER_SRC_BIT | VK_BUFFER_USAGE_TRANSFER_DST_BIT;
  KILN_VK_CHECK(vkCreateBuffer(device_, &info, nullptr, &buffer->buffer));
  VkMemoryRequirements req;
  vkGetBufferMemoryRequirements(device_, buffer->buffer, &req);
  VkMemoryPropertyFlags got = 0;
  const VkMemoryPropertyFlags host = VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT;
  VkMemoryAllocateInfo alloc{VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO};
  alloc.allocationSize = req.size;
  alloc.memoryTypeIndex = memory_type(req.memoryTypeBits, host, host, &got);
  KILN_VK_CHECK(vkAllocateMemory(device_, &alloc, nullptr, &buffer->memory));
  KILN_VK_CHECK(vkBindBufferMemory(device_, buffer->buffer, buffer->memory, 0));
  KILN_VK_CHECK(vkMapMemory(device_, buffer->memory, 0, VK_WHOLE_SIZE, 0, &buffer->mapped));
  // Staging buffers are freed right after their transfer, never pooled.
  VkDevice device = device_;
  return std::shared_ptr<Buffer>(buffer.get(), [device, keep = buffer](Buffer* b) {
    vkUnmapMemory(device, b->memory);
    vkDestroyBuffer(device, b->buffer, nullptr);
    vkFreeMemory(device, b->memory, nullptr);
  });
}

void Context::begin_batch() {
  if (recording_) return;
  VkCommandBufferBeginInfo begin{VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO};
  begin.flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT;
  KILN_VK_CHECK(vkBeginCommandBuffer(commands_, &begin));
  recording_ = true;
}

// Every command waits for the ones before it: kernels read what earlier ones wrote.
static void full_barrier(VkCommandBuffer commands) {
  VkMemoryBarrier barrier{VK_STRUCTURE_TYPE_MEMORY_BARRIER};
  barrier.srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT;
  barrier.dstAccessMask = VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_READ_BIT |
                          VK_ACCESS_TRANSFER_WRITE_BIT;
  vkCmdPipelineBarrier(commands, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT,
                       VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT, 0, 1, &barrier, 0,
                       nullptr, 0, nullptr);
}

void Context::upload(const Buffer& dst, std::size_t offset, const void* src, std::size_t bytes) {
  if (bytes == 0) return;
  std::lock_guard lock(mutex_);
  if (dst.mapped) {  // a fresh buffer: no recorded work uses it yet
    std::memcpy(static_cast<std::byte*>(dst.mapped) + offset, src, bytes);
    return;
  }
  // Through a staging copy recorded in order with the kernels of the batch.
  auto stage = staging(bytes);
  std::memcpy(stage->mapped, src, bytes);
  begin_batch();
  VkBufferCopy region{0, offset, bytes};
  vkCmdCopyBuffer(commands_, stage->buffer, dst.buffer, 1, &region);
  full_barrier(commands_);
  in_flight_.push_back(std::move(stage));
  ++recorded_;
}

void Context::download(const Buffer& src, std::size_t offset, void* dst, std::size_t bytes) {
  flush();
  if (bytes == 0) return;
  std::lock_guard lock(mutex_);
  if (src.mapped) {
    std::memcpy(dst, static_cast<const std::byte*>(src.mapped) + offset, bytes);
    return;
  }
  auto stage = staging(bytes);
  begin_batch();
  VkBufferCopy region{offset, 0, bytes};
  vkCmdCopyBuffer(commands_, src.buffer, stage->buffer, 1, &region);
  in_flight_.push_back(stage);
  ++recorded_;
  mutex_.unlock();
  flush();
  mutex_.lock();
  std::memcpy(dst, stage->mapped, bytes);
}

const Pipeline& Context::pipeline(const std::string& glsl, std::uint32_t bindings) {
  std::lock_guard lock(mutex_);
  if (auto it = pipelines_.find(glsl); it != pipelines_.end()) return it->second;
  return pipelines_.emplace(glsl, create_pipeline(compile_glsl_compute(glsl), bindings)).first->second;
}

const Pipeline& Context::pipeline(std::string_view name, std::span<const std::uint32_t> spirv,
                                  std::uint32_t bindings) {
  std::lock_guard lock(mutex_);
  std::string key(name);
  if (auto it = kernels_.find(key); it != kernels_.end()) return it->second;
  return kernels_.emplace(std::move(key), create_pipeline(spirv, bindings)).first->second;
}

Pipeline Context::create_pipeline(std::span<const std::uint32_t> spirv, std::uint32_t bindings) {
  KILN_CHECK(bindings <= kMaxBindings, "vulkan: a kernel with {} buffers (at most {})", bindings, kMaxBindings);
  Pipeline p;
  p.bindings = bindings;
  auto layout_it = set_layouts_.find(bindings);
  if (layout_it == set_layouts_.end()) {
    std::vector<VkDescriptorSetLayoutBinding> b(bindings);
    for (std::uint32_t i = 0; i < bindings; ++i)
      b[i] = {i, VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, 1, VK_SHADER_STAGE_COMPUTE_BIT, nullptr};
    VkDescriptorSetLayoutCreateInfo info{VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO};
    info.bindingCount = bindings;
    info.pBindings = b.data();
    VkDescriptorSetLayout layout;
    KILN_VK_CHECK(vkCreateDescriptorSetLayout(device_, &info, nullptr, &layout));
    layout_it = set_layouts_.emplace(bindings, layout).first;
  }
  p.set_layout = layout_it->second;
  VkPipelineLayoutCreateInfo layout{VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO};
  layout.setLayoutCount = 1;
  layout.pSetLayouts = &p.set_layout;
  KILN_VK_CHECK(vkCreatePipelineLayout(device_, &layout, nullptr, &p.layout));

  VkShaderModuleCreateInfo module_info{VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO};
  module_info.codeSize = spirv.size() * sizeof(std::uint32_t);
  module_info.pCode = spirv.data();
  VkShaderModule module;
  KILN_VK_CHECK(vkCreateShaderModule(device_, &module_info, nullptr, &module));
  VkComputePipelineCreateInfo info{VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO};
  info.stage = {VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO};
  info.stage.stage = VK_SHADER_STAGE_COMPUTE_BIT;
  info.stage.module = module;
  info.stage.pName = "main";
  info.layout = p.layout;
  KILN_VK_CHECK(vkCreateComputePipelines(device_, VK_NULL_HANDLE, 1, &info, nullptr, &p.pipeline));
  vkDestroyShaderModule(device_, module, nullptr);
  return p;
}

void Context::dispatch(const Pipeline& p, std::span<const std::shared_ptr<Buffer>> buffers, std::uint32_t groups_x,
                       std::uint32_t groups_y) {
  KILN_CHECK(buffers.size() == p.bindings, "vulkan: a kernel with {} bindings got {} buffers", p.bindings,
             buffers.size());
  dispatch_count.fetch_add(1, std::memory_order_relaxed);
  {
    std::lock_guard lock(mutex_);
    if (recorded_ + 1 >= kMaxBatch) {
      mutex_.unlock();
      flush();
      mutex_.lock();
    }
    begin_batch();
    VkDescriptorSetAllocateInfo alloc{VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO};
    alloc.descriptorPool = descriptor_pool_;
    alloc.descriptorSetCount = 1;
    alloc.pSetLayouts = &p.set_layout;
    VkDescriptorSet set;
    KILN_VK_CHECK(vkAllocateDescriptorSets(device_, &alloc, &set));
    std::vector<VkDescriptorBufferInfo> infos(buffers.size());
    std::vector<VkWriteDescriptorSet> writes(buffers.size());
    for (std::size_t i = 0; i < buffers.size(); ++i) {
      infos[i] = {buffers[i]->buffer, 0, VK_WHOLE_SIZE};
      writes[i] = {VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET};
      writes[i].dstSet = set;
      writes[i].dstBinding = static_cast<std::uint32_t>(i);
      writes[i].descriptorCount = 1;
      writes[i].descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER;
      writes[i].pBufferInfo = &infos[i];
      in_flight_.push_back(buffers[i]);
    }
    vkUpdateDescriptorSets(device_, static_cast<std::uint32_t>(writes.size()), writes.data(), 0, nullptr);
    vkCmdBindPipeline(commands_, VK_PIPELINE_BIND_POINT_COMPUTE, p.pipeline);
    vkCmdBindDescriptorSets(commands_, VK_PIPELINE_BIND_POINT_COMPUTE, p.layout, 0, 1, &set, 0, nullptr);
    vkCmdDispatch(commands_, groups_x, groups_y, 1);
    full_barrier(commands_);
    ++recorded_;
  }
}

void Context::flush() {
  std::vector<std::shared_ptr<Buffer>> done;
  {
    std::lock_guard lock(mutex_);
    if (!recording_) return;
    KILN_VK_CHECK(vkEndCommandBuffer(commands_));
    VkSubmitInfo submit{VK_STRUCTURE_TYPE_SUBMIT_INFO};
    submit.commandBufferCount = 1;
    submit.pCommandBuffers = &commands_;
    KILN_VK_CHECK(vkQueueSubmit(queue_, 1, &submit, fence_));
    KILN_VK_CHECK(vkWaitForFences(device_, 1, &fence_, VK_TRUE, UINT64_MAX));
    KILN_VK_CHECK(vkResetFences(device_, 1, &fence_));
    KILN_VK_CHECK(vkResetCommandBuffer(commands_, 0));
    KILN_VK_CHECK(vkResetDescriptorPool(device_, descriptor_pool_, 0));
    recording_ = false;
    recorded_ = 0;
    done.swap(in_flight_);
  }
  // Released outside the lock: pooled buffers take it again to return.
  done.clear();
}

}  // namespace kiln::vulkan
