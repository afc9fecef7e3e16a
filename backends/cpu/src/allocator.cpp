// The caching allocator behind every CPU tensor. Freed buffers are kept in size classes
// and handed out again: on this kind of machine the first touch of fresh pages costs
// more than the arithmetic of most ops (about 3 ms per MiB).
#include "internal.hpp"

#include <algorithm>
#include <cstdlib>
#include <map>
#include <mutex>
#include <new>
#include <vector>

#include <sys/mman.h>

namespace kiln::cpu {
namespace {

constexpr std::size_t kAlignment = 64;
constexpr std::size_t kMaxCachedBytes = std::size_t{4} << 30;

// A block of at least kHugeBytes starts on a 2 MiB boundary and asks the kernel for
// transparent huge pages (THP "madvise", Debian's default, gives them only to memory that
// asks), so that an op streaming through a large tensor takes one TLB entry per 2 MiB
// instead of one per 4 KiB. In a virtual machine each TLB miss walks two page tables: on a
// 2-core VM, sum over 16M floats took 1.4-1.7 ms on 4 KiB pages and 0.93-0.97 on huge ones,
// an add 3.5-4.4 against 2.5.
constexpr std::size_t kHugePage = std::size_t{2} << 20;
constexpr std::size_t kHugeBytes = std::size_t{4} << 20;

// Rounds up to a size class: multiples of 64 B below 4 KiB, then four classes per power of
// two, and whole huge pages from kHugeBytes on (so that the bytes memory_stats counts are
// the bytes the block holds).
std::size_t size_class(std::size_t bytes) {
  if (bytes <= 4096) return std::max<std::size_t>(kAlignment, (bytes + kAlignment - 1) / kAlignment * kAlignment);
  std::size_t power = 4096;
  while (power * 2 < bytes) power *= 2;
  const std::size_t step = bytes > kHugeBytes ? std::max(power / 4, kHugePage) : power / 4;
  return (bytes + step - 1) / step * step;
}

// `bytes` is a size class.
void* fresh(std::size_t bytes) {
  if (bytes < kHugeBytes) return std::aligned_alloc(kAlignment, bytes);
  void* p = std::aligned_alloc(kHugePage, bytes);
#ifdef MADV_HUGEPAGE
  if (p != nullptr) madvise(p, bytes, MADV_HUGEPAGE);  // advice only: a kernel without THP ignores it
#endif
  return p;
}

struct Pool {
  std::mutex mutex;
  // Free blocks by size class. A class's vector keeps its capacity, so that in steady state
  // (a model run again and again) neither taking nor giving a block allocates: a multimap
  // allocated and freed a node for each.
  std::map<std::size_t, std::vector<void*>> free_blocks;
  MemoryStats stats;

  void* take(std::size_t bytes) {
    {
      std::lock_guard lock(mutex);
      auto it = free_blocks.find(bytes);
      if (it != free_blocks.end() && !it->second.empty()) {
        void* p = it->second.back();
        it->second.pop_back();
        stats.cached_bytes -= bytes;
        hold(bytes);
        return p;
      }
    }
    void* p = fresh(bytes);
    if (p == nullptr) {
      release();
      p = fresh(bytes);
    }
    KILN_CHECK(p != nullptr, "cpu allocator: out of memory allocating {} bytes", bytes);
    std::lock_guard lock(mutex);
    hold(bytes);
    return p;
  }

  void hold(std::size_t bytes) {  // under the lock
    stats.live_bytes += bytes;
    stats.peak_live_bytes = std::max(stats.peak_live_bytes, stats.live_bytes);
    ++stats.live_buffers;
  }

  void give(void* p, std::size_t bytes) {
    std::lock_guard lock(mutex);
    stats.live_bytes -= bytes;
    --stats.live_buffers;
    if (stats.cached_bytes + bytes > kMaxCachedBytes) {
      std::free(p);
      return;
    }
    free_blocks[bytes].push_back(p);
    stats.cached_bytes += bytes;
  }

  void release() {
    std::lock_guard lock(mutex);
    for (auto& [bytes, blocks] : free_blocks)
      for (void* p : blocks) std::free(p);
    free_blocks.clear();
    stats.cached_bytes = 0;
  }
};

Pool& pool() {
  static Pool* instance = new Pool();  // never destroyed: tensors may outlive static destruction order
  return *instance;
}

}  // namespace

Storage::Storage(std::size_t requested) : bytes(size_class(requested)) {
  ptr = static_cast<std::byte*>(pool().take(bytes));
}
Storage::~Storage() { pool().give(ptr, bytes); }

MemoryStats memory_stats() {
  std::lock_guard lock(pool().mutex);
  return pool().stats;
}
void reset_peak_memory_stats() {
  std::lock_guard lock(pool().mutex);
  pool().stats.peak_live_bytes = pool().stats.live_bytes;
}
void empty_cache() { pool().release(); }


}  // namespace kiln::cpu
