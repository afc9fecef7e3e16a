// A transformer encoder layer (d_model 256, 4 heads, feed-forward 1024, no dropout) on a
// batch of 32 sequences of 128, forward + backward on Autodiff<Cpu> (and Autodiff<Fusion<Cpu>>, @fusion_cpu), built from kiln::nn as
// a user writes it. Its twin in bench/torch_workloads.py is torch.nn.TransformerEncoderLayer.
#include <kiln/kiln.hpp>
#include <kiln/nn.hpp>

#include <benchmark/benchmark.h>

namespace {

template <class B> void transformer_encoder_layer(benchmark::State& state) {
  using AD = kiln::Autodiff<B>;
  kiln::manual_seed(0);
  const kiln::nn::TransformerEncoderLayer<AD> layer(256, 4, {.dim_feedforward = 1024, .dropout = 0.0});
  const auto x = kiln::Tensor<AD, 3>::random({32, 128, 256}, kiln::Distribution::normal(0, 1)).require_grad();
  for (auto _ : state) {
    const auto grads = layer.forward(x).sum().backward();
    const auto dx = x.grad(grads)->primitive();
    if constexpr (requires { B::value(dx); }) benchmark::DoNotOptimize(B::value(dx).storage->ptr);  // Fusion computes it
    else benchmark::DoNotOptimize(dx.storage->ptr);
  }
}
BENCHMARK(transformer_encoder_layer<kiln::Cpu>)
    ->Name("transformer_encoder_layer_fwd_bwd_d256_h4_ff1024_s128_b32")
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
BENCHMARK(transformer_encoder_layer<kiln::Fusion<kiln::Cpu>>)
    ->Name("transformer_encoder_layer_fwd_bwd_d256_h4_ff1024_s128_b32@fusion_cpu")
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

}  // namespace
