// The machine's own limits, measured in the same run as the workloads: fma_peak, the
// single-precision FMA throughput of every thread together (the widest FMA the CPU has,
// picked at run time: this file is compiled for no particular CPU). compare_torch.py gives
// each GEMM row's speed as a share of it. (stream_triad, the memory bandwidth, is in
// fusion_bench.cpp.)
#include <benchmark/benchmark.h>

#include <omp.h>

#include <cstdint>

namespace {

// kChains independent accumulators of one vector each: more than the FMA units times their
// latency, so the units never wait; few enough to stay in registers.
constexpr int kChains = 10;
constexpr std::int64_t kRounds = 1 << 16;

template <class V> [[gnu::always_inline]] inline float chains(float seed) {
  V acc[kChains];
  V mul, add;
  for (auto& lane : acc) lane = V{} + seed;
  mul = V{} + 0.999999f;
  add = V{} + 1e-7f;
  for (std::int64_t r = 0; r < kRounds; ++r) {
    for (auto& lane : acc) lane = lane * mul + add;
    // Keeps the compiler from folding rounds together (a vector register operand).
#if defined(__x86_64__)
    asm volatile("" : "+x"(mul));
#elif defined(__aarch64__)
    asm volatile("" : "+w"(mul));
#else
    benchmark::DoNotOptimize(mul);
#endif
  }
  V total = V{};
  for (const auto& lane : acc) total += lane;
  return total[0];
}

using F16 = float __attribute__((vector_size(64)));
using F8 = float __attribute__((vector_size(32)));
using F4 = float __attribute__((vector_size(16)));

#if defined(__x86_64__)
[[gnu::target("avx512f")]] float chains_avx512(float seed) { return chains<F16>(seed); }
[[gnu::target("avx2,fma")]] float chains_avx2(float seed) { return chains<F8>(seed); }
#endif

// The FLOPs of one call of `run` at `lanes` floats per vector (an FMA is two).
struct Kernel {
  float (*run)(float);
  int lanes;
};

Kernel widest() {
#if defined(__x86_64__)
  if (__builtin_cpu_supports("avx512f")) return {chains_avx512, 16};
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return {chains_avx2, 8};
#endif
  return {[](float seed) { return chains<F4>(seed); }, 4};
}

void fma_peak(benchmark::State& state) {
  const Kernel kernel = widest();
  int threads = 1;
  float sink = 0;
  for (auto _ : state) {
#pragma omp parallel reduction(+ : sink)
    {
#pragma omp single
      threads = omp_get_num_threads();
      sink += kernel.run(1.0f + static_cast<float>(omp_get_thread_num()));
    }
    benchmark::DoNotOptimize(sink);
  }
  const double flops = 2.0 * kChains * kernel.lanes * static_cast<double>(kRounds) * threads;
  state.counters["flops"] = benchmark::Counter(flops * static_cast<double>(state.iterations()),
                                               benchmark::Counter::kIsRate);
  state.SetLabel(std::to_string(threads) + " threads, " + std::to_string(kernel.lanes * 32) + "-bit FMA");
}
BENCHMARK(fma_peak)->Name("fma_peak")->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace
