// The CPU backend's tensor handle: a reference-counted buffer from the caching
// allocator, viewed through a shape, element strides and an element offset. Views
// (reshape of contiguous data, permute, expand, slice) share the buffer.
#pragma once

#include "kiln/backend/strided.hpp"

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string_view>
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

// The caching allocator behind every CPU tensor, as PyTorch reports and empties its CUDA
// cache: bytes in size classes (a buffer is rounded up to its class).
struct MemoryStats {
  std::size_t live_bytes = 0;       // held by live tensors
  std::size_t peak_live_bytes = 0;  // the most held at once, since the start or the last reset
  std::size_t cached_bytes = 0;     // freed, kept for reuse
  std::size_t live_buffers = 0;
};
MemoryStats memory_stats();
// Starts the peak over from the bytes held now.
void reset_peak_memory_stats();
// Returns every cached (freed) buffer to the system; live tensors keep theirs.
void empty_cache();

// The threads Kiln's CPU kernels use (OpenMP's; oneDNN runs on the same ones), for the whole
// process: `threads`, or 0 for the default (KILN_NUM_THREADS where it is set, else OpenMP's:
// OMP_NUM_THREADS, else one per core). Takes effect at each thread's next op.
void set_num_threads(int threads);
// The count set: the most threads an op may use.
int num_threads();
// The threads the calling thread's next op uses: num_threads(), or fewer while other work
// (another process, the program's own threads) keeps the cores busy. Each calling thread's
// team gives up a thread when its threads wait for cores, and tries one more again after a
// pause (at most 2 s). Kiln's own reductions give the same result on any number of threads;
// oneDNN's GEMM and convolution gradients may round differently on another number.
int active_threads();
// Whether teams shrink while the cores are busy (the default; KILN_ADAPTIVE_THREADS=0 starts
// the process with false): false keeps every team at num_threads(). Takes effect at each
// thread's next op.
void set_adaptive_threads(bool adaptive);

// How f32 convolutions are computed. `automatic` (the default) lets oneDNN choose per layer:
// Winograd's algorithm where its heuristics expect it to be faster (3x3, stride-1 layers
// from a batch of about 16 on AVX-512: forward and input gradient up to twice as fast), at
// a few times direct's rounding error (measured: a relative error of about 1.5e-6 of the
// output's largest value instead of 4e-7), as cuDNN's heuristics choose for PyTorch on a
// GPU. Kiln offers it Winograd's only where it pays: for the forward pass and the input
// gradient from 32 input and 32 output channels (per group), for the weight gradient from 8
// input channels; narrower layers, a first layer on images among them, stay direct.
// `direct` always sums each output's products, as PyTorch's CPU convolutions do.
// KILN_CONV_ALGORITHM=direct starts the process with `direct`. Takes effect at the next
// convolution; f64 and the embedded build (no oneDNN) are always direct.
enum class ConvAlgorithm : std::uint8_t { automatic, direct };
void set_conv_algorithm(ConvAlgorithm algorithm);
ConvAlgorithm conv_algorithm();

// The instruction set of the CPU kernels in use, the -march they were compiled for:
// "x86-64-v2", "x86-64-v3" (AVX2, FMA) or "x86-64-v4" (AVX-512) in a portable build, where
// the dynamic loader chose the highest level the CPU supports (glibc's tunable
// glibc.cpu.hwcaps=-AVX512F or -AVX2,-AVX512F caps it); "native" in a KILN_NATIVE build; the
// processor's name ("aarch64") where the compiler's default was used.
std::string_view capability();

}  // namespace kiln::cpu
