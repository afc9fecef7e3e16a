// The CUDA backend's benchmarks, run on a GPU machine by scripts/gpu-check.sh beside the
// PyTorch twins of bench/torch_gpu.py on the same GPU: GEMM in f32, f16 and bf16 at n = 4096
// and 8192 (TFLOP/s), a copy-like kernel and the fused elementwise expression of
// fusion_bench.cpp over 256 Mi elements (GB/s, bytes read and written), and the transformer
// encoder layer of transformer_bench.cpp. Every timed iteration ends with the device idle
// (kiln::cuda::synchronize), so a row times the GPU's work, not its queueing.
#include <kiln/cuda/backend.hpp>
#include <kiln/cuda/instances.hpp>
#include <kiln/kiln.hpp>
#include <kiln/nn.hpp>

#include <benchmark/benchmark.h>

#include <string>

namespace {

using kiln::Cuda;
using kiln::Fusion;

bool skip_without_device(benchmark::State& state) {
  const std::string why = kiln::cuda::unavailable_reason();
  if (!why.empty()) state.SkipWithError(why.c_str());
  return !why.empty();
}

// The value computed, and the device done computing it.
template <class B, std::size_t D> void finish(const kiln::Tensor<B, D>& t) {
  if constexpr (requires { B::value(t.primitive()); }) benchmark::DoNotOptimize(B::value(t.primitive()).buffer.get());
  else benchmark::DoNotOptimize(t.primitive().buffer.get());
  kiln::cuda::synchronize();
}

void gemm(benchmark::State& state, kiln::DType dtype) {
  if (skip_without_device(state)) return;
  const std::int64_t n = state.range(0);
  kiln::manual_seed(0);
  const auto a = kiln::Tensor<Cuda, 2>::random({n, n}, kiln::Distribution::normal(0, 1)).cast(dtype);
  const auto b = kiln::Tensor<Cuda, 2>::random({n, n}, kiln::Distribution::normal(0, 1)).cast(dtype);
  finish(a.matmul(b));
  for (auto _ : state) finish(a.matmul(b));
  state.counters["TFLOP/s"] = benchmark::Counter(2.0 * n * n * n * 1e-12 * state.iterations(), benchmark::Counter::kIsRate);
}
BENCHMARK_CAPTURE(gemm, f32, kiln::DType::f32)->Name("gemm_f32@cuda")->Arg(4096)->Arg(8192)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK_CAPTURE(gemm, f16, kiln::DType::f16)->Name("gemm_f16@cuda")->Arg(4096)->Arg(8192)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK_CAPTURE(gemm, bf16, kiln::DType::bf16)->Name("gemm_bf16@cuda")->Arg(4096)->Arg(8192)->Unit(benchmark::kMillisecond)->UseRealTime();

constexpr std::int64_t kRows = 16384, kCols = 16384;  // 256 Mi f32: 1 GiB, far beyond the L2

// -x: one read and one write per element, the copy bandwidth of a generated kernel.
void neg_256M(benchmark::State& state) {
  if (skip_without_device(state)) return;
  const auto x = kiln::Tensor<Cuda, 2>::zeros({kRows, kCols});
  finish(-x);
  for (auto _ : state) finish(-x);
  state.SetBytesProcessed(state.iterations() * kRows * kCols * 8);
}
BENCHMARK(neg_256M)->Name("neg_256M@cuda")->Unit(benchmark::kMillisecond)->UseRealTime();

// gelu(x * a + b) * sigmoid(x), a and b broadcast over the rows (fusion_bench.cpp's, larger).
template <class B> void fused_expr(benchmark::State& state) {
  if (skip_without_device(state)) return;
  kiln::manual_seed(0);
  // A row plus a column of normal values, added on the device (drawing 256 Mi values on the
  // host would take most of the row's time limit), then made a tensor of B of its own.
  const auto sum = kiln::Tensor<Cuda, 2>::random({1, kCols}, kiln::Distribution::normal(0, 1)) +
                   kiln::Tensor<Cuda, 2>::random({kRows, 1}, kiln::Distribution::normal(0, 1));
  const auto x = kiln::Tensor<B, 2>::from_data(sum.into_data());
  const auto a = kiln::Tensor<B, 2>::random({1, kCols}, kiln::Distribution::normal(1, 0.1));
  const auto b = kiln::Tensor<B, 2>::random({1, kCols}, kiln::Distribution::normal(0, 0.1));
  finish(x + a + b);
  for (auto _ : state) finish((x * a + b).gelu() * x.sigmoid());
  state.SetBytesProcessed(state.iterations() * kRows * kCols * 8);  // x read, y written
}
BENCHMARK(fused_expr<Cuda>)->Name("fused_expr_256M@cuda")->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(fused_expr<Fusion<Cuda>>)->Name("fused_expr_256M@fusion_cuda")->Unit(benchmark::kMillisecond)->UseRealTime();

// transformer_bench.cpp's layer (d_model 256, 4 heads, feed-forward 1024, batch 32 x 128),
// forward + backward, and the same at a GPU's scale (d_model 1024, 16 heads, 4096, 32 x 512).
template <class B> void transformer_layer(benchmark::State& state) {
  if (skip_without_device(state)) return;
  using AD = kiln::Autodiff<B>;
  const std::int64_t d = state.range(0), heads = state.range(1), ff = state.range(2), seq = state.range(3);
  kiln::manual_seed(0);
  const kiln::nn::TransformerEncoderLayer<AD> layer(d, heads, {.dim_feedforward = ff, .dropout = 0.0});
  const auto x = kiln::Tensor<AD, 3>::random({32, seq, d}, kiln::Distribution::normal(0, 1)).require_grad();
  auto step = [&] {
    const auto grads = layer.forward(x).sum().backward();
    finish(*x.grad(grads));
  };
  step();
  for (auto _ : state) step();
}
BENCHMARK(transformer_layer<Cuda>)->Name("transformer_encoder_layer_fwd_bwd@cuda")
    ->Args({256, 4, 1024, 128})->Args({1024, 16, 4096, 512})->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(transformer_layer<Fusion<Cuda>>)->Name("transformer_encoder_layer_fwd_bwd@fusion_cuda")
    ->Args({256, 4, 1024, 128})->Args({1024, 16, 4096, 512})->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace
