// The ROCm backend's tensor handle and device: a reference-counted device allocation viewed
// through a shape, element strides and an element offset, like the CUDA handle (the two
// backends are one set of sources, kiln/cuda/tensor.hpp's functions have the same meaning
// here). No HIP header reaches this file.
#pragma once

#include "kiln/backend/strided.hpp"

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace kiln::rocm {

struct Buffer;  // device memory from the backend's caching allocator (backends/cuda/src)

struct RocmTensor : StridedView {
  std::shared_ptr<Buffer> buffer;
  int device = 0;  // the ROCm device index the buffer lives on
};

// A ROCm device as Kiln sees it.
struct DeviceInfo {
  int index = 0;
  std::string name;
  int major = 0, minor = 0;  // the GCN architecture's version
  std::string arch;          // what kernels compile for: "gfx90a"
  std::int64_t memory = 0;   // bytes
  int multiprocessors = 0;
};

// The devices the HIP runtime reports: empty where there is no driver or no device.
std::vector<DeviceInfo> devices();
// Why ROCm cannot run here ("no ROCm device: ..."), or an empty string when it can.
std::string unavailable_reason();

// The caching allocator's figures for one device (KILN_ROCM_DEVICE's when -1).
struct MemoryStats {
  std::int64_t allocated = 0;  // bytes held by live tensors (rounded to their size classes)
  std::int64_t reserved = 0;   // bytes taken from the device: live and cached
  std::int64_t peak_allocated = 0;
  std::uint64_t device_allocations = 0;  // hipMalloc calls
  std::uint64_t cache_hits = 0;          // allocations served from the cache
};
MemoryStats memory_stats(int device = -1);
// Returns the cached (unused) blocks of a device to the driver.
void empty_cache(int device = -1);

// Run-time compilation, for tests and benchmarks: hiprtc compilations this process ran,
// programs found in the disk cache (KILN_CACHE_DIR), and kernels launched.
std::uint64_t compilations();
std::uint64_t disk_cache_hits();
std::uint64_t launches();
// The folder of the disk cache of compiled kernels: $KILN_CACHE_DIR, else
// $XDG_CACHE_HOME/kiln, else ~/.cache/kiln; "" when none can be used.
std::string cache_dir();

// Waits until every kernel queued on the device has run (a host read does this itself).
void synchronize(int device = -1);

}  // namespace kiln::rocm

namespace kiln {

// Which ROCm device a tensor lives on: an index, or -1 for the default (KILN_ROCM_DEVICE
// when set, else 0). Several devices work in one process; an op runs on its inputs' device.
struct RocmDevice {
  int index = -1;
  friend bool operator==(const RocmDevice&, const RocmDevice&) = default;
};

}  // namespace kiln
