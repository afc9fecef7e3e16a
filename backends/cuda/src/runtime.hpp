// The CUDA runtime behind kiln::Cuda: per device a context with one stream, a cuBLAS
// handle and a caching allocator; run-time compiled kernels (NVRTC, cached in memory and on
// disk); launches. Kernels run in stream order and the host waits only when it reads data
// back. Only the CUDA runtime (linked statically) and NVRTC and cuBLAS (shared) are used:
// the runtime loads the driver itself at first use, so a binary starts on a machine without
// one, and the first op there throws "no CUDA device". Private to backends/cuda/src.
#pragma once

#include "kiln/core/error.hpp"
#include "kiln/cuda/tensor.hpp"

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace kiln::cuda {

#define KILN_CUDA_CHECK(call)                                                                                  \
  do {                                                                                                         \
    const cudaError_t kiln_cuda_error = (call);                                                                \
    KILN_CHECK(kiln_cuda_error == cudaSuccess, "cuda: {} failed: {} ({})", #call,                              \
               cudaGetErrorString(kiln_cuda_error), static_cast<int>(kiln_cuda_error));                        \
  } while (0)
#define KILN_CUBLAS_CHECK(call)                                                                                \
  do {                                                                                                         \
    const cublasStatus_t kiln_cublas_status = (call);                                                          \
    KILN_CHECK(kiln_cublas_status == CUBLAS_STATUS_SUCCESS, "cuda: {} failed: {} ({})", #call,                 \
               cublasGetStatusString(kiln_cublas_status), static_cast<int>(kiln_cublas_status));               \
  } while (0)

// Device memory of `bytes` (its size class) on `device`; back to the allocator's cache when
// the last reference goes. Blocks are reused in stream order (one stream per device), so a
// block freed while kernels that read it are queued is safe to hand to the next kernel.
struct Buffer {
  void* data = nullptr;
  std::size_t bytes = 0;
  int device = 0;
  ~Buffer();
};

// A compiled kernel, loaded on one device.
struct Kernel {
  cudaKernel_t function = nullptr;
  std::string name;
};

// The device an op runs on: made current for the calling thread.
class Context {
 public:
  // The context of device `index` (-1: the default device), created on first use; throws
  // kiln::Error "no CUDA device" when there is none.
  static Context& get(int index = -1);
  // The default device's index.
  static int default_device();

  int index() const { return info_.index; }
  const DeviceInfo& info() const { return info_; }
  cudaStream_t stream() const { return stream_; }
  cublasHandle_t cublas() const { return cublas_; }
  // The architecture NVRTC compiles for, e.g. "sm_90".
  std::string arch() const;

  // Makes this device current for the calling thread (cheap when it already is).
  void activate() const;

  std::shared_ptr<Buffer> allocate(std::size_t bytes);

  // Host transfers through pinned staging memory; download waits for the queued kernels.
  void upload(void* device_dst, const void* host_src, std::size_t bytes);
  void download(void* host_dst, const void* device_src, std::size_t bytes);
  void synchronize();

  // The kernel `entry` of `source` (CUDA C++; the prelude of codegen/cuda.hpp is put before
  // it), compiled by NVRTC for this device, cached by its text in memory and on disk.
  const Kernel& kernel(const std::string& source, std::string_view entry);

  // Launches `kernel` with `args` (pointers to each argument's value).
  void launch(const Kernel& kernel, dim3 grid, dim3 block, void** args, std::size_t shared_bytes = 0);
  // With KILN_CUDA_PROFILE=1, the work queued between these two calls is timed alone and
  // counted under `name` (runtime.cpp); otherwise they do nothing.
  double profile_begin();
  void profile_end(std::string_view name, double started);

  // The allocator's and staging memory's state (runtime.cpp).
  struct State;
  State* state() const { return state_.get(); }

 private:
  explicit Context(int index);
  DeviceInfo info_;
  cudaStream_t stream_ = nullptr;
  cublasHandle_t cublas_ = nullptr;
  std::unique_ptr<State> state_;
};

// Threads per block of the backend's kernels.
inline constexpr int kBlock = 256;

// A fresh contiguous tensor (uninitialized) on `device`.
CudaTensor empty(const Shape& shape, DType dtype, int device);
// The address of element 0 of t's view (its buffer plus its offset).
void* address(const CudaTensor& t);
template <class T> T* pointer(const CudaTensor& t) { return static_cast<T*>(address(t)); }

// The source of kernels/cuda/<name>.cu as built into the library (every hand-written
// kernel), empty when there is none of that name.
std::string_view kernel_source(std::string_view name);
// The names of every kernels/cuda file, for the compile tests.
std::vector<std::string_view> kernel_sources();

// A kernels/cuda kernel: the source file `file` with `defines` ("T=float", ...) before it,
// its entry point `entry`, compiled for device `device`.
const Kernel& file_kernel(int device, std::string_view file, std::span<const std::string> defines,
                          std::string_view entry);

// Launches `kernel` on `device` over `threads` threads, kBlock per block, with `args...`
// passed by value (each a trivially copyable kernel argument).
template <class... Args>
void launch_threads(int device, const Kernel& kernel, std::int64_t threads, const Args&... args) {
  if (threads <= 0) return;
  std::array<void*, sizeof...(Args) == 0 ? 1 : sizeof...(Args)> pointers{const_cast<void*>(static_cast<const void*>(&args))...};
  const std::int64_t blocks = (threads + kBlock - 1) / kBlock;
  KILN_CHECK(blocks <= 0x7fffffff, "cuda: {} threads are too many for one launch", threads);
  Context::get(device).launch(kernel, dim3(static_cast<unsigned>(blocks)), dim3(kBlock), pointers.data());
}
// Launches `kernel` on `device` with `blocks` blocks of `block` threads.
template <class... Args>
void launch_blocks(int device, const Kernel& kernel, std::int64_t blocks, int block, std::size_t shared_bytes,
                   const Args&... args) {
  if (blocks <= 0) return;
  std::array<void*, sizeof...(Args) == 0 ? 1 : sizeof...(Args)> pointers{const_cast<void*>(static_cast<const void*>(&args))...};
  KILN_CHECK(blocks <= 0x7fffffff, "cuda: {} blocks are too many for one launch", blocks);
  Context::get(device).launch(kernel, dim3(static_cast<unsigned>(blocks)), dim3(static_cast<unsigned>(block)),
                              pointers.data(), shared_bytes);
}

// The CUDA C++ type of a dtype in memory: float, double, unsigned short (f16 / bf16 bits),
// int, long long, unsigned char (u8, bool).
std::string_view storage_type(DType dtype);
// f16 and bf16: stored in 16 bits; the hand-written kernels compute them in f32.
bool is_half(DType dtype);

// The contiguous copy of x (x itself when it already is).
CudaTensor contiguous(const CudaTensor& x);
// Copies `src` (broadcast to dst's shape, any strides) into the view `dst`.
void copy_into(const CudaTensor& src, const CudaTensor& dst);
// x converted to dtype (x itself when it already is).
CudaTensor cast(const CudaTensor& x, DType dtype);

// How many elementwise programs have been rendered and compiled (a repeated program, at
// any shape or with any scalar, compiles nothing).
void count_render();

}  // namespace kiln::cuda
