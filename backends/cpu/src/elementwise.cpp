// The shared driver of the CPU elementwise kernels (contiguous fast path, strided walk,
// threads, streaming-store policy) and Cpu::where. The per-op kernels are compiled in
// elementwise_unary.cpp and elementwise_binary.cpp, so the two build in parallel.
#include "elementwise_kernels.hpp"

#include <fstream>
#include <string>

#include <unistd.h>

namespace kiln::cpu {
namespace {

// Elements per task: below this a second thread costs more than it saves.
constexpr std::int64_t kParallelGrain = std::int64_t{1} << 15;
// Elements per run that the strided walk hands to a kernel.
constexpr std::int64_t kWalkChunk = std::int64_t{1} << 13;

// How the flat loop over `shape` reads operand `t`: stride 1 when it is contiguous with
// that shape, stride 0 when it is a single element, -1 when it needs the strided walk.
std::int64_t flat_stride(const CpuTensor& t, const Shape& shape) {
  if (t.numel() == 1) return 0;
  return t.shape == shape && t.is_contiguous() ? 1 : -1;
}

// Splits [0, n) among the threads at multiples of 64 output bytes, so that no cache line
// of the output is written by two threads.
template <class F> void parallel_runs(std::int64_t n, std::int64_t element_size, F&& fn) {
  const std::int64_t line = std::max<std::int64_t>(1, 64 / element_size);
  const std::int64_t lines = (n + line - 1) / line;
  parallel_for(lines, std::max<std::int64_t>(1, kParallelGrain / line), [&](std::int64_t begin, std::int64_t end) {
    const std::int64_t b = begin * line, e = std::min(n, end * line);
    if (b < e) fn(b, e);
  });
}

// The condition is read as bytes (bool loads do not vectorize in GCC) and both branches
// unconditionally, so that the choice becomes a vector blend instead of a branch, which a
// random mask would mispredict half the time.
template <class T>
void where_run(const std::uint8_t* c, std::int64_t sc, const T* a, std::int64_t sa, const T* b, std::int64_t sb,
               T* y, std::int64_t n) {
  if (sc == 1 && sa == 1 && sb == 1) {
    for (std::int64_t i = 0; i < n; ++i) {
      const T x = a[i], z = b[i];
      y[i] = c[i] != 0 ? x : z;
    }
  } else if (sc == 1 && sa == 0 && sb == 1) {  // mask_fill
    const T value = *a;
    for (std::int64_t i = 0; i < n; ++i) {
      const T z = b[i];
      y[i] = c[i] != 0 ? value : z;
    }
  } else {
    for (std::int64_t i = 0; i < n; ++i) y[i] = c[i * sc] != 0 ? a[i * sa] : b[i * sb];
  }
}

template <class T>
void where_kernel(const void*, const std::byte* const* in, const std::int64_t* s, std::byte* out, std::int64_t n,
                  bool) {
  where_run(reinterpret_cast<const std::uint8_t*>(in[0]), s[0], reinterpret_cast<const T*>(in[1]), s[1],
            reinterpret_cast<const T*>(in[2]), s[2], reinterpret_cast<T*>(out), n);
}

// The size of the last-level cache this CPU shares, from sysfs: sysconf reports the whole
// package's L3 on some machines (256 MiB on a 2-core EPYC VM whose CPUs share 32 MiB).
std::int64_t last_level_cache_bytes() {
  std::int64_t best = 0;
  for (int index = 0; index < 8; ++index) {
    std::ifstream in("/sys/devices/system/cpu/cpu0/cache/index" + std::to_string(index) + "/size");
    std::int64_t value = 0;
    std::string unit;
    if (!(in >> value)) continue;
    in >> unit;
    best = std::max(best, value * (unit == "K" ? 1024 : unit == "M" ? 1024 * 1024 : 1));
  }
  if (best > 0) return best;
  const long bytes = sysconf(_SC_LEVEL3_CACHE_SIZE);
  return bytes > 0 ? static_cast<std::int64_t>(bytes) : std::int64_t{32} << 20;
}

// The part of the last-level cache that this process's cores can hold data in: at most 16 MiB
// per online core. A VM's few cores report the whole package's cache (480 MiB on a 2-core
// Xeon VM) but hold a small part of it. There, on 2 threads, a 64 MiB add (a loop of its
// own) took 4.3 ms with streaming stores and 6.1 ms through the cache, 8.1 against 9.0 ms
// with a sum reading its output after it; a 16 MiB output was read back faster from the
// cache (1.40 against 1.67 ms), as on a machine with a 32 MiB cache.
std::int64_t usable_cache_bytes() {
  const long cores = sysconf(_SC_NPROCESSORS_ONLN);
  return std::min(last_level_cache_bytes(), (std::int64_t{16} << 20) * std::max<std::int64_t>(1, cores));
}

}  // namespace

bool use_streaming_stores(std::int64_t bytes_written, std::int64_t bytes_touched) {
  static const std::int64_t last_level_cache = usable_cache_bytes();
  return bytes_written > last_level_cache / 2 || bytes_touched > 2 * last_level_cache;
}

void run_elementwise(std::span<const CpuTensor* const> inputs, const CpuTensor& out, RunKernel kernel,
                     const void* context) {
  constexpr std::size_t kMaxInputs = kMaxElementwiseInputs;
  const std::size_t k = inputs.size();
  KILN_CHECK(k >= 1 && k <= kMaxInputs, "cpu elementwise: {} inputs, expected 1 to {}", k, kMaxInputs);
  const Shape& shape = out.shape;
  const std::int64_t n = shape.numel();
  if (n == 0) return;
  const auto out_size = static_cast<std::int64_t>(dtype_size(out.dtype));
  std::byte* const out_base = out.bytes();
  std::array<std::int64_t, kMaxInputs> size{}, flat{};
  std::int64_t bytes = n * out_size;
  bool all_flat = true;
  for (std::size_t i = 0; i < k; ++i) {
    size[i] = static_cast<std::int64_t>(dtype_size(inputs[i]->dtype));
    flat[i] = flat_stride(*inputs[i], shape);
    all_flat = all_flat && flat[i] >= 0;
    if (flat[i] != 0) bytes += n * size[i];
  }
  const bool stream = use_streaming_stores(n * out_size, bytes);

  if (all_flat) {
    parallel_runs(n, out_size, [&](std::int64_t begin, std::int64_t end) {
      std::array<const std::byte*, kMaxInputs> ptr{};
      for (std::size_t i = 0; i < k; ++i) ptr[i] = inputs[i]->bytes() + begin * flat[i] * size[i];
      kernel(context, ptr.data(), flat.data(), out_base + begin * out_size, end - begin, stream);
    });
    return;
  }
  std::array<CpuTensor, kMaxInputs> views;
  for (std::size_t i = 0; i < k; ++i) views[i] = broadcast_view(*inputs[i], shape);
  // The walk's last operand is the output; its inner stride is 1 (it is contiguous).
  auto run = [&](const auto& offsets, const auto& inner, std::int64_t count) {
    std::array<const std::byte*, kMaxInputs> ptr{};
    std::array<std::int64_t, kMaxInputs> strides{};
    for (std::size_t i = 0; i < k; ++i) {
      ptr[i] = views[i].bytes() + offsets[i] * size[i];
      strides[i] = inner[i];
    }
    kernel(context, ptr.data(), strides.data(), out_base + offsets[k] * out_size, count, stream);
  };
  switch (k) {
    case 1: strided_walk<2>(shape, {&views[0].strides, &out.strides}, kWalkChunk, run); break;
    case 2: strided_walk<3>(shape, {&views[0].strides, &views[1].strides, &out.strides}, kWalkChunk, run); break;
    case 3:
      strided_walk<4>(shape, {&views[0].strides, &views[1].strides, &views[2].strides, &out.strides}, kWalkChunk,
                      run);
      break;
    case 4:
      strided_walk<5>(shape,
                      {&views[0].strides, &views[1].strides, &views[2].strides, &views[3].strides, &out.strides},
                      kWalkChunk, run);
      break;
    default: {
      // 5 to kMaxInputs: the operands from k on walk with the output's strides, so the
      // output's offset is offsets[k].
      std::array<const Strides*, kMaxInputs + 1> strides;
      strides.fill(&out.strides);
      for (std::size_t i = 0; i < k; ++i) strides[i] = &views[i].strides;
      strided_walk<kMaxInputs + 1>(shape, strides, kWalkChunk, run);
      break;
    }
  }
}

}  // namespace kiln::cpu

namespace kiln {

Cpu::Primitive Cpu::where(const Primitive& cond, const Primitive& a, const Primitive& b) {
  KILN_CHECK(cond.dtype == DType::boolean, "where: the condition must be bool, got {} {}", cond.shape, cond.dtype);
  KILN_CHECK(a.dtype == b.dtype, "where: both branches must have the same dtype, got {} {} and {} {}", a.shape,
             a.dtype, b.shape, b.dtype);
  const Shape shape = broadcast_shapes("where", broadcast_shapes("where", cond.shape, a.shape), b.shape);
  cpu::CpuTensor out = cpu::empty(shape, a.dtype);
  const std::array<const cpu::CpuTensor*, 3> inputs{&cond, &a, &b};
  visit_dtype(a.dtype, [&]<class T>() { cpu::run_elementwise(inputs, out, cpu::where_kernel<T>); });
  return out;
}

}  // namespace kiln
