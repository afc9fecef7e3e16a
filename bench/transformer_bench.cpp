// A transformer encoder layer (d_model 256, 4 heads, feed-forward 1024, no dropout) on a
// batch of 32 sequences of 128, forward + backward on Autodiff<Cpu> (and Autodiff<Fusion<Cpu>>,
// @fusion_cpu), built from kiln::nn as a user writes it. Its twin in bench/torch_workloads.py
// is torch.nn.TransformerEncoderLayer.
// Below it, scaled-dot-product attention alone.
#include <kiln/kiln.hpp>
#include <kiln/nn.hpp>

#include <benchmark/benchmark.h>

#include <cstdint>
#include <string>

namespace {

// The primitive's values in memory (Fusion<B> computes them here).
template <class B> const void* materialised(const typename B::Primitive& p) {
  if constexpr (requires { B::value(p); }) return B::value(p).storage->ptr;  // Fusion computes it
  else return p.storage->ptr;
}

template <class B> void transformer_encoder_layer(benchmark::State& state) {
  using AD = kiln::Autodiff<B>;
  kiln::manual_seed(0);
  const kiln::nn::TransformerEncoderLayer<AD> layer(256, 4, {.dim_feedforward = 1024, .dropout = 0.0});
  const auto x = kiln::Tensor<AD, 3>::random({32, 128, 256}, kiln::Distribution::normal(0, 1)).require_grad();
  for (auto _ : state) {
    const auto grads = layer.forward(x).sum().backward();
    // Every gradient PyTorch's backward computes: x's and each parameter's (Fusion<B> computes
    // only what is read).
    benchmark::DoNotOptimize(materialised<B>(x.grad(grads)->primitive()));
    kiln::nn::for_each_param(layer, [&](const std::string&, const auto& p) {
      benchmark::DoNotOptimize(materialised<B>(p->grad(grads)->primitive()));
    });
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

// Scaled-dot-product attention, q, k, v [1, 8, seq, 64] f32, no mask: the fused
// kernel (flash-attention form) and, @composition, the matmul-softmax-matmul it replaces,
// on Cpu (each op a kernel of its own) and, @composition@fusion_cpu, on Fusion<Cpu> (which
// runs the forward composition as the fused kernel; under Autodiff, from 8M weights on, one
// attention node with the fused backward).
// Twins in bench/torch_workloads.py: torch.nn.functional.scaled_dot_product_attention and
// the same composition.
// Forward alone:
template <class B, bool Fused> void sdpa_forward(benchmark::State& state, std::int64_t seq) {
  using T = kiln::Tensor<B, 4>;
  kiln::manual_seed(0);
  const T q = T::random({1, 8, seq, 64}, kiln::Distribution::normal(0, 1));
  const T k = T::random({1, 8, seq, 64}, kiln::Distribution::normal(0, 1));
  const T v = T::random({1, 8, seq, 64}, kiln::Distribution::normal(0, 1));
  for (auto _ : state) {
    const T out = Fused ? kiln::functional::scaled_dot_product_attention(q, k, v)
                        : kiln::functional::detail::attention_composition(q, k, v, std::nullopt, false, 0.0, 0.125);
    benchmark::DoNotOptimize(materialised<B>(out.primitive()));
  }
}
// Forward and backward (Autodiff<B>): out.backward with dy of ones, gradients of q, k, v.
template <class B, bool Fused> void sdpa_forward_backward(benchmark::State& state, std::int64_t seq) {
  using AD = kiln::Autodiff<B>;
  using T = kiln::Tensor<AD, 4>;
  kiln::manual_seed(0);
  const T q = T::random({1, 8, seq, 64}, kiln::Distribution::normal(0, 1)).require_grad();
  const T k = T::random({1, 8, seq, 64}, kiln::Distribution::normal(0, 1)).require_grad();
  const T v = T::random({1, 8, seq, 64}, kiln::Distribution::normal(0, 1)).require_grad();
  for (auto _ : state) {
    const T out = Fused ? kiln::functional::scaled_dot_product_attention(q, k, v)
                        : kiln::functional::detail::attention_composition(q, k, v, std::nullopt, false, 0.0, 0.125);
    const auto grads = out.sum().backward();
    for (const T* input : {&q, &k, &v}) benchmark::DoNotOptimize(materialised<B>(input->grad(grads)->primitive()));
  }
}
// Registered by full name, so that a composition row reads <workload>@composition (with the
// sequence before the @) and compare_torch.py sets it beside the same PyTorch twin.
const bool sdpa_registered = [] {
  using kiln::Cpu;
  using kiln::Fusion;
  const auto add = [](const std::string& name, auto run, std::int64_t seq) {
    benchmark::RegisterBenchmark(name.c_str(), run, seq)->Unit(benchmark::kMillisecond)->UseRealTime();
  };
  for (const std::int64_t seq : {128, 512, 2048}) {
    const std::string name = "sdpa_fwd_n1_h8_d64/" + std::to_string(seq);
    add(name, sdpa_forward<Cpu, true>, seq);
    add(name + "@composition", sdpa_forward<Cpu, false>, seq);
    add(name + "@composition@fusion_cpu", sdpa_forward<Fusion<Cpu>, false>, seq);
  }
  for (const std::int64_t seq : {512, 2048}) {
    const std::string name = "sdpa_fwd_bwd_n1_h8_d64/" + std::to_string(seq);
    add(name, sdpa_forward_backward<Cpu, true>, seq);
    add(name + "@composition", sdpa_forward_backward<Cpu, false>, seq);
    add(name + "@composition@fusion_cpu", sdpa_forward_backward<Fusion<Cpu>, false>, seq);
  }
  return true;
}();

}  // namespace
