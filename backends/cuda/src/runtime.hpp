// The GPU runtime behind kiln::Cuda (and kiln::Rocm, the same sources built with
// KILN_GPU_HIP: gpu_api.hpp): per device a context with one stream, a caching allocator and,
// on CUDA, a cuBLAS handle; run-time compiled kernels (NVRTC or hiprtc, cached in memory and
// on disk); launches. Kernels run in stream order and the host waits only when it reads data
// back. CUDA's runtime is linked statically, NVRTC and cuBLAS as shared libraries: the
// runtime loads the driver itself at first use, so a binary starts on a machine without one,
// and the first op there throws "no CUDA device". Private to the GPU backends' sources.
#pragma once

#include "gpu_api.hpp"

#include "codegen/kernel.hpp"
#include "kiln/core/error.hpp"

#if defined(KILN_GPU_HIP)
#include "kiln/rocm/backend.hpp"
#define KILN_GPU_NAMESPACE rocm
#else
#include <cublas_v2.h>

#include "kiln/cuda/backend.hpp"
#define KILN_GPU_NAMESPACE cuda
#endif

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace kiln {
// The backend these sources build, and its namespace, by one name in both builds.
#if defined(KILN_GPU_HIP)
using Gpu = Rocm;
#else
using Gpu = Cuda;
#endif
namespace gpu = KILN_GPU_NAMESPACE;
}  // namespace kiln

namespace kiln::KILN_GPU_NAMESPACE {

#if defined(KILN_GPU_HIP)
using Tensor = RocmTensor;
#else
using Tensor = CudaTensor;
#define KILN_CUBLAS_CHECK(call)                                                                                \
  do {                                                                                                         \
    const cublasStatus_t kiln_cublas_status = (call);                                                          \
    KILN_CHECK(kiln_cublas_status == CUBLAS_STATUS_SUCCESS, "cuda: {} failed: {} ({})", #call,                 \
               cublasGetStatusString(kiln_cublas_status), static_cast<int>(kiln_cublas_status));               \
  } while (0)
#endif

// What the run-time compiled kernels start with, and the dialect of the generated ones
// (src/codegen/cuda.hpp: the CUDA table renders both languages).
std::string prelude();
const codegen::KernelDialect& dialect();

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
  gpu_api::Function function = nullptr;
  std::string name;
};

// The device an op runs on: made current for the calling thread.
class Context {
 public:
  // The context of device `index` (-1: the default device), created on first use; throws
  // kiln::Error "no CUDA device" (ROCm: "no ROCm device") when there is none.
  static Context& get(int index = -1);
  // The default device's index.
  static int default_device();

  int index() const { return info_.index; }
  const DeviceInfo& info() const { return info_; }
  gpu_api::Stream stream() const { return stream_; }
#if !defined(KILN_GPU_HIP)
  cublasHandle_t cublas() const { return cublas_; }
#endif
  // The architecture kernels compile for: "sm_90" (NVRTC), "gfx90a" (hiprtc).
  std::string arch() const;

  // Makes this device current for the calling thread (cheap when it already is).
  void activate() const;

  std::shared_ptr<Buffer> allocate(std::size_t bytes);

  // Host transfers through pinned staging memory; download waits for the queued kernels.
  void upload(void* device_dst, const void* host_src, std::size_t bytes);
  void download(void* host_dst, const void* device_src, std::size_t bytes);
  void synchronize();

  // The kernel `entry` of `source` (a whole source, prelude() included), compiled for this
  // device, cached by its text in memory and on disk.
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
  gpu_api::Stream stream_ = nullptr;
#if !defined(KILN_GPU_HIP)
  cublasHandle_t cublas_ = nullptr;
#endif
  std::string arch_;
  std::unique_ptr<State> state_;
};

// Threads per block of the backend's kernels.
inline constexpr int kBlock = 256;

// A fresh contiguous tensor (uninitialized) on `device`.
Tensor empty(const Shape& shape, DType dtype, int device);
// A fresh contiguous tensor of zero bytes (0.0 in every float dtype) on `device`.
Tensor zeros(const Shape& shape, DType dtype, int device);
// The address of element 0 of t's view (its buffer plus its offset).
void* address(const Tensor& t);
template <class T> T* pointer(const Tensor& t) { return static_cast<T*>(address(t)); }

// The source of kernels/cuda/<name>.cu as built into the library (every hand-written
// kernel, the same for CUDA and HIP), empty when there is none of that name.
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
  KILN_CHECK(blocks <= 0x7fffffff, KILN_GPU_ID ": {} threads are too many for one launch", threads);
  Context::get(device).launch(kernel, dim3(static_cast<unsigned>(blocks)), dim3(kBlock), pointers.data());
}
// Launches `kernel` on `device` with `blocks` blocks of `block` threads.
template <class... Args>
void launch_blocks(int device, const Kernel& kernel, std::int64_t blocks, int block, std::size_t shared_bytes,
                   const Args&... args) {
  if (blocks <= 0) return;
  std::array<void*, sizeof...(Args) == 0 ? 1 : sizeof...(Args)> pointers{const_cast<void*>(static_cast<const void*>(&args))...};
  KILN_CHECK(blocks <= 0x7fffffff, KILN_GPU_ID ": {} blocks are too many for one launch", blocks);
  Context::get(device).launch(kernel, dim3(static_cast<unsigned>(blocks)), dim3(static_cast<unsigned>(block)),
                              pointers.data(), shared_bytes);
}

// The CUDA C++ type of a dtype in memory: float, double, unsigned short (f16 / bf16 bits),
// int, long long, unsigned char (u8, bool).
std::string_view storage_type(DType dtype);
// f16 and bf16: stored in 16 bits; the hand-written kernels compute them in f32.
bool is_half(DType dtype);

// The contiguous copy of x (x itself when it already is).
Tensor contiguous(const Tensor& x);
// Copies `src` (broadcast to dst's shape, any strides) into the view `dst`.
void copy_into(const Tensor& src, const Tensor& dst);
// x converted to dtype (x itself when it already is).
Tensor cast(const Tensor& x, DType dtype);

}  // namespace kiln::KILN_GPU_NAMESPACE
