// The small portability header of the GPU backends: the runtime calls that kiln::Cuda and
// kiln::Rocm make, spelled once. The backends' sources (backends/cuda/src) are compiled
// twice: against CUDA's runtime and NVRTC (kiln::cuda), and with KILN_GPU_HIP against HIP's
// runtime and hiprtc (kiln::rocm, backends/rocm). Kernels load as a CUDA library
// (cudaLibrary_t, launched through the runtime) or a HIP module. Private to the backends.
#pragma once

#include "kiln/core/error.hpp"

#include <cstddef>

#if defined(KILN_GPU_HIP)
#include <hip/hip_runtime.h>
#include <hip/hiprtc.h>
#else
#include <cuda_runtime.h>
#include <nvrtc.h>
#endif

// KILN_GPU_ID names the backend in messages ("cuda: ...") and KILN_GPU_NAME its devices
// ("no CUDA device"); both are string literals, for format strings.
#if defined(KILN_GPU_HIP)
#define KILN_GPU_ID "rocm"
#define KILN_GPU_NAME "ROCm"
#else
#define KILN_GPU_ID "cuda"
#define KILN_GPU_NAME "CUDA"
#endif

// One inline namespace per runtime: both backends' libraries hold these functions (where
// they are not inlined), and a process that loads both must not resolve one library's calls
// to the other's.
namespace kiln::gpu_api {

#if defined(KILN_GPU_HIP)
inline namespace hip_runtime {
using Error = hipError_t;
using Stream = hipStream_t;
using Event = hipEvent_t;
using Library = hipModule_t;
using Function = hipFunction_t;
using DeviceProp = hipDeviceProp_t;
inline constexpr Error success = hipSuccess;
inline bool out_of_memory(Error e) { return e == hipErrorOutOfMemory; }
inline const char* error_string(Error e) { return hipGetErrorString(e); }
inline Error last_error() { return hipGetLastError(); }
inline Error device_count(int* n) { return hipGetDeviceCount(n); }
inline Error properties(DeviceProp* p, int device) { return hipGetDeviceProperties(p, device); }
inline Error set_device(int device) { return hipSetDevice(device); }
inline Error stream_create(Stream* s) { return hipStreamCreateWithFlags(s, hipStreamNonBlocking); }
inline Error stream_synchronize(Stream s) { return hipStreamSynchronize(s); }
inline Error event_create(Event* e) { return hipEventCreateWithFlags(e, hipEventDisableTiming); }
inline Error event_record(Event e, Stream s) { return hipEventRecord(e, s); }
inline Error event_synchronize(Event e) { return hipEventSynchronize(e); }
inline Error malloc(void** p, std::size_t bytes) { return hipMalloc(p, bytes); }
inline Error free(void* p) { return hipFree(p); }
inline Error host_alloc(void** p, std::size_t bytes) { return hipHostMalloc(p, bytes, hipHostMallocDefault); }
inline Error host_free(void* p) { return hipHostFree(p); }
inline Error to_device(void* dst, const void* src, std::size_t bytes, Stream s) {
  return hipMemcpyAsync(dst, src, bytes, hipMemcpyHostToDevice, s);
}
inline Error to_host(void* dst, const void* src, std::size_t bytes, Stream s) {
  return hipMemcpyAsync(dst, src, bytes, hipMemcpyDeviceToHost, s);
}
inline Error zero(void* dst, std::size_t bytes, Stream s) { return hipMemsetAsync(dst, 0, bytes, s); }
inline Error peer_copy(void* dst, int dst_device, const void* src, int src_device, std::size_t bytes, Stream s) {
  return hipMemcpyPeerAsync(dst, dst_device, src, src_device, bytes, s);
}
inline Error load(Library* library, const void* image) { return hipModuleLoadData(library, image); }
inline Error unload(Library library) { return hipModuleUnload(library); }
inline Error function(Function* f, Library library, const char* name) { return hipModuleGetFunction(f, library, name); }
inline Error launch(Function f, dim3 grid, dim3 block, void** args, std::size_t shared, Stream s) {
  return hipModuleLaunchKernel(f, grid.x, grid.y, grid.z, block.x, block.y, block.z, static_cast<unsigned>(shared), s,
                               args, nullptr);
}
}  // namespace hip_runtime
#else
inline namespace cuda_runtime {
using Error = cudaError_t;
using Stream = cudaStream_t;
using Event = cudaEvent_t;
using Library = cudaLibrary_t;
using Function = cudaKernel_t;
using DeviceProp = cudaDeviceProp;
inline constexpr Error success = cudaSuccess;
inline bool out_of_memory(Error e) { return e == cudaErrorMemoryAllocation; }
inline const char* error_string(Error e) { return cudaGetErrorString(e); }
inline Error last_error() { return cudaGetLastError(); }
inline Error device_count(int* n) { return cudaGetDeviceCount(n); }
inline Error properties(DeviceProp* p, int device) { return cudaGetDeviceProperties(p, device); }
inline Error set_device(int device) { return cudaSetDevice(device); }
inline Error stream_create(Stream* s) { return cudaStreamCreateWithFlags(s, cudaStreamNonBlocking); }
inline Error stream_synchronize(Stream s) { return cudaStreamSynchronize(s); }
inline Error event_create(Event* e) { return cudaEventCreateWithFlags(e, cudaEventDisableTiming); }
inline Error event_record(Event e, Stream s) { return cudaEventRecord(e, s); }
inline Error event_synchronize(Event e) { return cudaEventSynchronize(e); }
inline Error malloc(void** p, std::size_t bytes) { return cudaMalloc(p, bytes); }
inline Error free(void* p) { return cudaFree(p); }
inline Error host_alloc(void** p, std::size_t bytes) { return cudaHostAlloc(p, bytes, cudaHostAllocDefault); }
inline Error host_free(void* p) { return cudaFreeHost(p); }
inline Error to_device(void* dst, const void* src, std::size_t bytes, Stream s) {
  return cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, s);
}
inline Error to_host(void* dst, const void* src, std::size_t bytes, Stream s) {
  return cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, s);
}
inline Error zero(void* dst, std::size_t bytes, Stream s) { return cudaMemsetAsync(dst, 0, bytes, s); }
inline Error peer_copy(void* dst, int dst_device, const void* src, int src_device, std::size_t bytes, Stream s) {
  return cudaMemcpyPeerAsync(dst, dst_device, src, src_device, bytes, s);
}
// A cudaLibrary_t belongs to no device: its kernels launch on whichever is current.
inline Error load(Library* library, const void* image) {
  return cudaLibraryLoadData(library, image, nullptr, nullptr, 0, nullptr, nullptr, 0);
}
inline Error unload(Library library) { return cudaLibraryUnload(library); }
inline Error function(Function* f, Library library, const char* name) { return cudaLibraryGetKernel(f, library, name); }
inline Error launch(Function f, dim3 grid, dim3 block, void** args, std::size_t shared, Stream s) {
  return cudaLaunchKernel(reinterpret_cast<const void*>(f), grid, block, args, shared, s);
}
}  // namespace cuda_runtime
#endif

}  // namespace kiln::gpu_api

// Runs a runtime call and throws a kiln::Error naming it and the runtime's message.
#define KILN_GPU_CHECK(call)                                                                                   \
  do {                                                                                                         \
    const ::kiln::gpu_api::Error kiln_gpu_error = (call);                                                      \
    KILN_CHECK(kiln_gpu_error == ::kiln::gpu_api::success, KILN_GPU_ID ": {} failed: {} ({})", #call,          \
               ::kiln::gpu_api::error_string(kiln_gpu_error), static_cast<int>(kiln_gpu_error));               \
  } while (0)
