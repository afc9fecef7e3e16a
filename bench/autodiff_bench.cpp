// Training-step benchmark of Autodiff<Cpu> (and of Autodiff<Fusion<Cpu>>, named @fusion_cpu, and
// Autodiff<Dispatch> on the CPU, @dispatch_cpu): a 784-1024-1024-10 ReLU MLP at batch 256,
// cross-entropy loss, forward + backward + an Adam update (kiln::optim::adam_step), as a
// user writes it. Its twin in bench/torch_workloads.py uses torch.nn and torch.optim.Adam.
#include <kiln/dispatch/backend.hpp>
#include <kiln/dispatch/instances.hpp>
#include <kiln/kiln.hpp>

#include <benchmark/benchmark.h>

#include <array>
#include <cmath>
#include <vector>

namespace {

using kiln::Cpu;

// Adam over a list of parameters, with kiln::optim::adam_step (one fused pass on the CPU). The
// parameters and moments are given up to the step (std::move), which then writes over their
// buffers, as torch.optim.Adam updates in place.
template <class B> struct Adam {
  using AD = kiln::Autodiff<B>;
  template <std::size_t D> using T = kiln::Tensor<AD, D>;
  template <std::size_t D> using Plain = kiln::Tensor<B, D>;
  kiln::ops::AdamStep options;
  std::vector<Plain<2>> m, v;

  void update(std::vector<T<2>*>& params, const typename AD::Gradients& grads) {
    ++options.step;
    for (std::size_t i = 0; i < params.size(); ++i) {
      const Plain<2> g = *params[i]->grad(grads);
      if (m.size() <= i) {
        m.push_back(g.zeros_like());
        v.push_back(g.zeros_like());
      }
      auto next = kiln::optim::adam_step(std::move(*params[i]).into_inner(), g, std::move(m[i]), std::move(v[i]),
                                         options);
      m[i] = std::move(next.m);
      v[i] = std::move(next.v);
      *params[i] = T<2>::from_inner(next.param).require_grad();
    }
  }
};

template <class AD>
kiln::Tensor<AD, 2> linear(const kiln::Tensor<AD, 2>& x, const kiln::Tensor<AD, 2>& w, const kiln::Tensor<AD, 2>& b) {
  return x.matmul(w) + b;
}

// The parameters' value on the host side of B: materialised (Fusion<B> computes it here).
template <class B> const void* value_of(const typename B::Primitive& p) {
  if constexpr (std::is_same_v<B, kiln::Dispatch>) return p.value.get();  // on the CPU: computed
  else if constexpr (requires { B::value(p); }) return B::value(p).storage->ptr;
  else return p.storage->ptr;
}

template <class B> void mlp_train_step(benchmark::State& state) {
  using AD = kiln::Autodiff<B>;
  using T2 = kiln::Tensor<AD, 2>;
  kiln::manual_seed(0);
  const std::int64_t batch = 256;
  const std::array<std::int64_t, 4> sizes{784, 1024, 1024, 10};
  std::vector<T2> weights, biases;
  for (std::size_t i = 0; i + 1 < sizes.size(); ++i) {
    const double bound = 1.0 / std::sqrt(static_cast<double>(sizes[i]));
    weights.push_back(T2::random({sizes[i], sizes[i + 1]}, kiln::Distribution::uniform(-bound, bound)).require_grad());
    biases.push_back(T2::random({1, sizes[i + 1]}, kiln::Distribution::uniform(-bound, bound)).require_grad());
  }
  std::vector<T2*> params;
  for (std::size_t i = 0; i < weights.size(); ++i) params.insert(params.end(), {&weights[i], &biases[i]});
  const auto x = T2::random({batch, sizes[0]}, kiln::Distribution::normal(0, 1));
  const auto labels = kiln::Tensor<AD, 2, kiln::Int>::random({batch, 1}, kiln::Distribution::uniform(0, 10),
                                                             {}, kiln::DType::i64);
  Adam<B> adam;
  adam.options.step = 0;
  for (auto _ : state) {
    T2 h = x;
    for (std::size_t i = 0; i < weights.size(); ++i) {
      h = linear(h, weights[i], biases[i]);
      if (i + 1 < weights.size()) h = h.relu();
    }
    const auto loss = h.log_softmax(1).gather(1, labels).mean().neg();
    const auto grads = loss.backward();
    adam.update(params, grads);
    benchmark::DoNotOptimize(value_of<B>(params[0]->primitive().value));
  }
}
BENCHMARK(mlp_train_step<Cpu>)->Name("mlp_train_step_784_1024_1024_10_b256")->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(mlp_train_step<kiln::Fusion<Cpu>>)
    ->Name("mlp_train_step_784_1024_1024_10_b256@fusion_cpu")->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(mlp_train_step<kiln::Dispatch>)
    ->Name("mlp_train_step_784_1024_1024_10_b256@dispatch_cpu")->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace
