// A transformer encoder layer (d_model 256, 4 heads, feed-forward 1024, no dropout) on a
// batch of 32 sequences of 128, forward + backward on Autodiff<Cpu>, built from kiln::nn as
// a user writes it. Its twin in bench/torch_workloads.py is torch.nn.TransformerEncoderLayer.
#include <kiln/kiln.hpp>
#include <kiln/nn.hpp>

#include <benchmark/benchmark.h>

namespace {

using AD = kiln::Autodiff<kiln::Cpu>;

void transformer_encoder_layer(benchmark::State& state) {
  kiln::manual_seed(0);
  const kiln::nn::TransformerEncoderLayer<AD> layer(256, 4, {.dim_feedforward = 1024, .dropout = 0.0});
  const auto x = kiln::Tensor<AD, 3>::random({32, 128, 256}, kiln::Distribution::normal(0, 1)).require_grad();
  for (auto _ : state) {
    const auto grads = layer.forward(x).sum().backward();
    benchmark::DoNotOptimize(x.grad(grads)->primitive().storage->ptr);
  }
}
BENCHMARK(transformer_encoder_layer)
    ->Name("transformer_encoder_layer_fwd_bwd_d256_h4_ff1024_s128_b32")
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

}  // namespace
