// One training step of the Fashion-MNIST CNN (conv 1→32 3x3 pad 1, relu, max-pool 2; conv
// 32→64, relu, max-pool 2; linear 3136→128, relu, linear 128→10) on a batch of 64 with
// cross-entropy and AdamW, on Autodiff<Cpu> (and Autodiff<Fusion<Cpu>>, @fusion_cpu, and
// Autodiff<Dispatch> on the CPU, @dispatch_cpu), written with kiln::nn as a user writes it. Its
// twin in bench/torch_workloads.py is the same torch.nn model with torch.optim.AdamW.
// An epoch of 60,000 images is 938 such steps.
#include <kiln/dispatch/backend.hpp>
#include <kiln/dispatch/instances.hpp>
#include <kiln/kiln.hpp>
#include <kiln/nn.hpp>
#include <kiln/optim/rules.hpp>

#include <benchmark/benchmark.h>

namespace {

using kiln::Tensor;

template <class B> struct Cnn {
  kiln::nn::Conv2d<B> conv1, conv2;
  kiln::nn::MaxPool2d<B> pool{{2, 2}};
  kiln::nn::Linear<B> fc1, fc2;
  KILN_MODULE(conv1, conv2, pool, fc1, fc2)

  Cnn()
      : conv1(1, 32, {3, 3}, {.padding = {1, 1}}),
        conv2(32, 64, {3, 3}, {.padding = {1, 1}}),
        fc1(64 * 7 * 7, 128),
        fc2(128, 10) {}
  Tensor<B, 2> forward(const Tensor<B, 4>& x) const {
    const auto h = pool.forward(conv2.forward(pool.forward(conv1.forward(x).relu())).relu());
    return fc2.forward(fc1.forward(h.template reshape<2>({x.dim(0), -1})).relu());
  }
};

template <class B> void cnn_train_step(benchmark::State& state) {
  using AD = kiln::Autodiff<B>;
  kiln::manual_seed(0);
  Cnn<AD> model;
  auto optimizer = kiln::optim::adamw<B>();
  const auto x = Tensor<AD, 4>::random({64, 1, 28, 28}, kiln::Distribution::normal(0, 1));
  const auto y = Tensor<AD, 1, kiln::Int>::random({64}, kiln::Distribution::uniform(0, 10));
  for (auto _ : state) {
    auto grads = kiln::nn::cross_entropy(model.forward(x), y).backward();
    optimizer.step(1e-3, model, grads);
  }
}
BENCHMARK(cnn_train_step<kiln::Cpu>)->Name("cnn_train_step_fashion_b64")->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(cnn_train_step<kiln::Fusion<kiln::Cpu>>)
    ->Name("cnn_train_step_fashion_b64@fusion_cpu")->Unit(benchmark::kMillisecond)->UseRealTime();
// The same model compiled once for Autodiff<Dispatch> (as examples/fashion_mnist is), on the CPU.
BENCHMARK(cnn_train_step<kiln::Dispatch>)
    ->Name("cnn_train_step_fashion_b64@dispatch_cpu")->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace
