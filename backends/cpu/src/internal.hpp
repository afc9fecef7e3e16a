// Shared machinery of the CPU kernels: allocation, threading, strided walks and
// dtype dispatch. Private to backends/cpu/src.
#pragma once

#include "kiln/core/error.hpp"
#include "kiln/cpu/backend.hpp"

#ifdef _OPENMP
#include <omp.h>
#else
// The embedded build (kiln_cpu_embedded: no OpenMP, no oneDNN) runs on the calling thread:
// the few OpenMP queries the kernels make answer as a team of one, and their pragmas are
// ignored.
inline int omp_get_max_threads() { return 1; }
inline int omp_get_num_procs() { return 1; }
inline int omp_get_thread_num() { return 0; }
inline int omp_in_parallel() { return 0; }
inline void omp_set_num_threads(int) {}
#endif

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <string_view>
#include <vector>

namespace kiln::cpu {

// A fresh contiguous tensor (uninitialized memory from the caching allocator).
CpuTensor empty(const Shape& shape, DType dtype);
// Whether an op may write over `t`, an operand the caller gave up: nothing else holds its
// buffer (no other tensor, view or saved value reads it) and its elements are dense. Writing
// over it saves a fresh buffer and the memory traffic of bringing that buffer into the cache
// before it is written.
inline bool can_write_over(const CpuTensor& t) { return t.storage && t.storage.use_count() == 1 && t.is_contiguous(); }
// The result of an elementwise op: the first of `given` (operands the caller gave up) that the
// op may write over and that has the result's shape and dtype, else a fresh tensor.
inline CpuTensor result_over(std::initializer_list<const CpuTensor*> given, const Shape& shape, DType dtype) {
  for (const CpuTensor* t : given)
    if (t->shape == shape && t->dtype == dtype && can_write_over(*t)) return *t;
  return empty(shape, dtype);
}
// `x` itself when it is contiguous, else a contiguous copy.
CpuTensor contiguous(const CpuTensor& x);
// `x` itself when it is contiguous, else a contiguous copy held here: a kernel's input
// without copying its handle (the shape and strides are an allocation each).
class ContiguousInput {
 public:
  explicit ContiguousInput(const CpuTensor& x) : tensor_(&x) {
    if (!x.is_contiguous()) tensor_ = &(copy_ = contiguous(x));
  }
  ContiguousInput(const ContiguousInput&) = delete;
  ContiguousInput& operator=(const ContiguousInput&) = delete;
  const CpuTensor& operator*() const { return *tensor_; }
  const CpuTensor* operator->() const { return tensor_; }

 private:
  const CpuTensor* tensor_;
  CpuTensor copy_;
};
// A view of `x`'s storage with another shape and strides.
CpuTensor view_of(const CpuTensor& x, Shape shape, Strides strides, std::int64_t offset);
// A view of `x` broadcast to `shape` (stride 0 on broadcast dims); `shape` must be a valid broadcast target.
CpuTensor broadcast_view(const CpuTensor& x, const Shape& shape);
// Copies the elements of `src` (any strides) into `dst` (same shape and dtype, any strides).
void copy_into(const CpuTensor& src, const CpuTensor& dst);

// Readies the calling thread's OpenMP team and returns its size: applies the process-wide
// thread count (KILN_NUM_THREADS, kiln::cpu::set_num_threads) to this thread, one thread
// fewer for each window in which the team waited for cores that other work held (threads.cpp
// says how), and makes the team's workers block asynchronous signals (SIGINT, SIGTERM,
// SIGUSR1...) whenever it grows: a signal frame pushed on a worker in the middle of oneDNN's
// JIT-compiled kernels corrupted the heap, so signals go to the program's own threads. Cheap
// (thread_local compares and a clock read; a schedstat read per member every 20 ms); called
// before every parallel region and oneDNN call.
int prepare_team();

// Splits [0, n) into blocks of at least `grain` and runs fn(begin, end) on the OpenMP threads.
template <class F> void parallel_for(std::int64_t n, std::int64_t grain, F&& fn) {
  if (n <= 0) return;
  if ((n + grain - 1) / grain <= 1 || omp_in_parallel()) {
    fn(std::int64_t{0}, n);
    return;
  }
  const std::int64_t blocks = std::min<std::int64_t>((n + grain - 1) / grain, prepare_team());
  if (blocks <= 1) {
    fn(std::int64_t{0}, n);
    return;
  }
#pragma omp parallel for num_threads(static_cast<int>(blocks)) schedule(static)
  for (std::int64_t b = 0; b < blocks; ++b) fn(n * b / blocks, n * (b + 1) / blocks);
}

// Element-offset walk over `shape` for N operands with their own strides. Adjacent dims
// are merged where every operand allows it, so the inner rows are as long as possible;
// fn(offsets, inner_strides, count) is called for runs of at most `chunk` elements along the
// innermost dim, from the OpenMP threads.
template <std::size_t N, class F>
void strided_walk(const Shape& shape, const std::array<const Strides*, N>& strides,
                  std::int64_t chunk, F&& fn) {
  const std::int64_t total = shape.numel();
  if (total == 0) return;
  // Coalesce: drop size-1 dims, merge dim i into i+1 when stride[i] == stride[i+1] * size[i+1] for all.
  Extents dims;
  std::array<Extents, N> st;
  for (std::size_t d = 0; d < shape.rank(); ++d) {
    if (shape[d] == 1) continue;
    dims.push_back(shape[d]);
    for (std::size_t k = 0; k < N; ++k) st[k].push_back((*strides[k])[d]);
  }
  if (dims.empty()) {
    dims.push_back(1);
    for (std::size_t k = 0; k < N; ++k) st[k].push_back(0);
  }
  for (std::size_t d = dims.size() - 1; d-- > 0;) {
    bool mergeable = true;
    for (std::size_t k = 0; k < N; ++k) mergeable = mergeable && st[k][d] == st[k][d + 1] * dims[d + 1];
    if (!mergeable) continue;
    dims[d] *= dims[d + 1];
    dims.erase(d + 1);
    for (std::size_t k = 0; k < N; ++k) {
      st[k][d] = st[k][d + 1];
      st[k].erase(d + 1);
    }
  }
  const std::size_t rank = dims.size();
  const std::int64_t inner = dims[rank - 1];
  const std::int64_t chunks_per_row = (inner + chunk - 1) / chunk;
  const std::int64_t rows = total / inner;
  std::array<std::int64_t, N> inner_strides;
  for (std::size_t k = 0; k < N; ++k) inner_strides[k] = st[k][rank - 1];
  parallel_for(rows * chunks_per_row, std::max<std::int64_t>(1, 32768 / std::min(chunk, inner)),
               [&](std::int64_t begin, std::int64_t end) {
                 for (std::int64_t item = begin; item < end; ++item) {
                   std::int64_t row = item / chunks_per_row;
                   const std::int64_t c = item % chunks_per_row;
                   std::array<std::int64_t, N> offsets{};
                   for (std::size_t d = rank - 1; d-- > 0;) {
                     const std::int64_t i = row % dims[d];
                     row /= dims[d];
                     for (std::size_t k = 0; k < N; ++k) offsets[k] += i * st[k][d];
                   }
                   for (std::size_t k = 0; k < N; ++k) offsets[k] += c * chunk * inner_strides[k];
                   fn(offsets, inner_strides, std::min(chunk, inner - c * chunk));
                 }
               });
}

// Calls fn.template operator()<T>() for a floating dtype computed in place (f32, f64).
template <class F> decltype(auto) dispatch_float(std::string_view op, DType dtype, F&& fn) {
  switch (dtype) {
    case DType::f32: return fn.template operator()<float>();
    case DType::f64: return fn.template operator()<double>();
    default: KILN_FAIL("{}: the CPU backend computes this op on f32 and f64 tensors, got {}", op, dtype);
  }
}

// Floating dtypes with native kernels; f16/bf16 compute through f32.
inline bool is_native_float(DType d) { return d == DType::f32 || d == DType::f64; }

// Reads an integer index tensor (i32 or i64) as i64 values, checking each against [0, limit)
// (negative indices count from the end); names `op` in the error.
std::vector<std::int64_t> read_indices(std::string_view op, const CpuTensor& index, std::int64_t limit);

}  // namespace kiln::cpu
