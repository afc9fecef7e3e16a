// Fusion<Cpu> beside plain Cpu. Rows named <workload>@<backend> compare with the PyTorch
// twin named <workload> (bench/compare_torch.py); stream_triad is this machine's memory
// bandwidth (STREAM's triad, a[i] = b[i] + s * c[i] over 64 MiB arrays), which
// compare_torch.py reports beside the fused rows' bandwidth.
#include <kiln/kiln.hpp>

#include <benchmark/benchmark.h>

#include <cstdlib>
#include <memory>
#include <new>

#include <sys/mman.h>

namespace {

using kiln::Cpu;
using kiln::Fusion;

// The value computed (Fusion<B> materialises a pending tensor here).
template <class B, std::size_t D> void keep(const kiln::Tensor<B, D>& t) {
  if constexpr (requires { B::value(t.primitive()); }) benchmark::DoNotOptimize(B::value(t.primitive()).storage->ptr);
  else benchmark::DoNotOptimize(t.primitive().storage->ptr);
}

void stream_triad(benchmark::State& state) {
  const std::int64_t n = std::int64_t{1} << 24;
  // On 2 MiB pages, as the CPU backend's allocator places tensors of 4 MiB and more.
  const auto huge = [n] {
    const std::size_t bytes = static_cast<std::size_t>(n) * sizeof(float);
    void* p = std::aligned_alloc(std::size_t{2} << 20, bytes);
    if (p == nullptr) throw std::bad_alloc();
    madvise(p, bytes, MADV_HUGEPAGE);
    return std::unique_ptr<float[], decltype(&std::free)>(static_cast<float*>(p), &std::free);
  };
  const auto a = huge(), b = huge(), c = huge();
  float* pa = a.get();
  const float *pb = b.get(), *pc = c.get();
  const float s = 3.0f;
#pragma omp parallel for schedule(static)
  for (std::int64_t i = 0; i < n; ++i) a[i] = 1.0f, b[i] = 2.0f, c[i] = 0.5f;  // pages placed as the loop runs
  for (auto _ : state) {
#pragma omp parallel for simd schedule(static)
    for (std::int64_t i = 0; i < n; ++i) pa[i] = pb[i] + s * pc[i];
    benchmark::DoNotOptimize(pa);
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(state.iterations() * n * 12);  // STREAM's count: two reads, one write
}
BENCHMARK(stream_triad)->Name("stream_triad")->Unit(benchmark::kMillisecond)->UseRealTime();

// gelu(x * a + b) * sigmoid(x), x [4096, 4096] f32, a and b [4096] broadcast over the rows
// (a per-feature scale and shift). Fused, it reads x once and writes the result once.
template <class B> void fused_expr(benchmark::State& state) {
  kiln::manual_seed(0);
  const auto x = kiln::Tensor<B, 2>::random({4096, 4096}, kiln::Distribution::normal(0, 1));
  const auto a = kiln::Tensor<B, 2>::random({1, 4096}, kiln::Distribution::normal(1, 0.1));
  const auto b = kiln::Tensor<B, 2>::random({1, 4096}, kiln::Distribution::normal(0, 0.1));
  keep(x + a + b);
  for (auto _ : state) keep((x * a + b).gelu() * x.sigmoid());
  state.SetBytesProcessed(state.iterations() * 4096 * 4096 * 8);  // x read, y written
}
BENCHMARK(fused_expr<Cpu>)->Name("fused_expr_16M@cpu")->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(fused_expr<Fusion<Cpu>>)->Name("fused_expr_16M@fusion_cpu")->Unit(benchmark::kMillisecond)->UseRealTime();

// Softmax and layer norm over the rows of [4096, 1024].
template <class B> void softmax_rows(benchmark::State& state) {
  const auto x = kiln::Tensor<B, 2>::random({4096, 1024}, kiln::Distribution::normal(0, 1));
  keep(x.softmax(1));
  for (auto _ : state) keep(x.softmax(1));
}
BENCHMARK(softmax_rows<Cpu>)->Name("softmax_4096x1024@cpu")->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(softmax_rows<Fusion<Cpu>>)->Name("softmax_4096x1024@fusion_cpu")->Unit(benchmark::kMillisecond)->UseRealTime();

template <class B> void layer_norm_rows(benchmark::State& state) {
  const auto x = kiln::Tensor<B, 2>::random({4096, 1024}, kiln::Distribution::normal(0, 1));
  const auto step = [&] { return kiln::Tensor<B, 2>(B::layer_norm(x.primitive(), 1, 1e-5)); };
  keep(step());
  for (auto _ : state) keep(step());
}
BENCHMARK(layer_norm_rows<Cpu>)->Name("layer_norm_4096x1024@cpu")->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(layer_norm_rows<Fusion<Cpu>>)
    ->Name("layer_norm_4096x1024@fusion_cpu")->Unit(benchmark::kMillisecond)->UseRealTime();

// RMS norm over the rows of [4096, 1024] as nn::RmsNorm writes it: x * rsqrt(mean(x^2) + eps)
// * w. On Fusion<Cpu> it is one row program; on Cpu, four elementwise passes and a reduction.
template <class B> void rms_norm_rows(benchmark::State& state) {
  const auto x = kiln::Tensor<B, 2>::random({4096, 1024}, kiln::Distribution::normal(0, 1));
  const auto w = kiln::Tensor<B, 2>::random({1, 1024}, kiln::Distribution::normal(0, 1));
  const auto step = [&] { return x * ((x * x).mean_dim(1) + 1e-6).rsqrt() * w; };
  keep(step());
  for (auto _ : state) keep(step());
}
BENCHMARK(rms_norm_rows<Cpu>)->Name("rms_norm_4096x1024@cpu")->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(rms_norm_rows<Fusion<Cpu>>)->Name("rms_norm_4096x1024@fusion_cpu")->Unit(benchmark::kMillisecond)->UseRealTime();

// Softmax over the rows as a row program (the composition a backend without a hand-fused
// softmax records), beside the hand-fused kernel that Fusion<Cpu> calls.
void softmax_row_program(benchmark::State& state) {
  using F = Fusion<Cpu>;
  const auto x = kiln::Tensor<F, 2>::random({4096, 1024}, kiln::Distribution::normal(0, 1));
  const auto step = [&] {
    const auto e = (x - x.max_dim(1)).exp();
    return e / e.sum_dim(1);
  };
  keep(step());
  for (auto _ : state) keep(step());
}
BENCHMARK(softmax_row_program)->Name("softmax_4096x1024_row_program@fusion_cpu")->Unit(benchmark::kMillisecond)->UseRealTime();

// Recording on Fusion<Cpu>, 1k floats: one op recorded and dropped (never computed), and a
// chain of eight ops recorded and then computed as one program (the time is per chain).
void record_op(benchmark::State& state) {
  const auto x = kiln::Tensor<Fusion<Cpu>, 1>::random({1024}, kiln::Distribution::normal(0, 1));
  for (auto _ : state) benchmark::DoNotOptimize(x.exp().primitive().node.get());
}
BENCHMARK(record_op)->Name("op_overhead_1k/exp@fusion_cpu")->UseRealTime();

void record_chain(benchmark::State& state) {
  const auto x = kiln::Tensor<Fusion<Cpu>, 1>::random({1024}, kiln::Distribution::normal(0, 1));
  for (auto _ : state) keep(((((x * 0.5 + 1.0).exp() - x) * x).tanh() + 2.0).abs() * x);
}
BENCHMARK(record_chain)->Name("fusion_chain_1k/8ops@fusion_cpu")->UseRealTime();

}  // namespace
