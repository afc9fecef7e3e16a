// The CPU backend's tensor handle: a reference-counted buffer from the caching
// allocator, viewed through a shape, element strides and an element offset. Views
// (reshape of contiguous data, permute, expand, slice) share the buffer.
#pragma once

#include "kiln/backend/strided.hpp"

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

namespace kiln::cpu {

// One allocation. Its destructor returns the memory to the caching allocator.
struct Storage {
  std::byte* ptr = nullptr;
  std::size_t bytes = 0;
  explicit Storage(std::size_t bytes);
  ~Storage();
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;
};

struct CpuTensor : StridedView {
  std::shared_ptr<Storage> storage;

  std::byte* bytes() const { return storage->ptr + offset * static_cast<std::int64_t>(dtype_size(dtype)); }
  template <class T> T* data() const { return reinterpret_cast<T*>(bytes()); }
};

// Memory statistics of the caching allocator, for tests and benchmarks.
struct AllocatorStats {
  std::size_t live_bytes = 0;     // held by live tensors
  std::size_t cached_bytes = 0;   // freed, kept for reuse
  std::size_t live_buffers = 0;
};
AllocatorStats allocator_stats();
void release_cached_memory();

// Threads used by Kiln's CPU kernels (OpenMP and oneDNN share them). 0 = the default.
void set_num_threads(int threads);
int num_threads();

}  // namespace kiln::cpu
