// Benchmarks of the core workloads. Each CPU benchmark has a twin in
// bench/compare_torch.py (same name, same shapes) so the two are compared side by side.
// The GEMM and elementwise ones also run on Vulkan when it is built, named vulkan/<name>
// (no PyTorch twin), and Vulkan has its own conv2d benchmarks on a smaller layer; they are
// skipped with the reason when no Vulkan device can be created.
#include <kiln/dispatch/backend.hpp>
#include <kiln/dispatch/instances.hpp>
#include <kiln/kiln.hpp>
#ifdef KILN_BENCH_VULKAN
#include <kiln/vulkan/backend.hpp>
#endif

#include <benchmark/benchmark.h>

#include <string>
#include <type_traits>
#include <vector>

namespace {

using kiln::Cpu;
template <std::size_t D> using T = kiln::Tensor<Cpu, D>;

// Ends an iteration with the result computed. The CPU computes eagerly: reading the
// pointer keeps the work from being skipped, without timing a full copy.
template <std::size_t D> void keep(const T<D>& t) { benchmark::DoNotOptimize(t.primitive().storage->ptr); }

#ifdef KILN_BENCH_VULKAN
// Vulkan records dispatches and submits them when data is read back: reading one element
// back waits until the device has finished everything queued before it.
template <std::size_t D> void keep(const kiln::Tensor<kiln::Vulkan, D>& t) {
  const std::vector<kiln::ops::Slice> first_element(D, kiln::ops::Slice(0));
  benchmark::DoNotOptimize(t.slice(first_element).into_data());
}
#endif

// False, with the benchmark skipped and the reason given, when backend B cannot run here.
template <class B> bool ready([[maybe_unused]] benchmark::State& state) {
#ifdef KILN_BENCH_VULKAN
  if constexpr (std::is_same_v<B, kiln::Vulkan>) {
    static const std::string reason = kiln::vulkan::unavailable_reason();
    if (!reason.empty()) state.SkipWithError(("no Vulkan device: " + reason).c_str());
    return reason.empty();
  }
#endif
  return true;
}

// Each workload runs once untimed first: Vulkan compiles its kernels at first use.
template <class B> void matmul(benchmark::State& state) {
  if (!ready<B>(state)) return;
  const std::int64_t n = state.range(0);
  const auto a = kiln::Tensor<B, 2>::random({n, n}, kiln::Distribution::normal(0, 1));
  const auto b = kiln::Tensor<B, 2>::random({n, n}, kiln::Distribution::normal(0, 1));
  keep(a.matmul(b));
  for (auto _ : state) keep(a.matmul(b));
  state.counters["GFLOP/s"] =
      benchmark::Counter(2.0 * n * n * n, benchmark::Counter::kIsIterationInvariantRate, benchmark::Counter::kIs1000);
}
BENCHMARK(matmul<Cpu>)
    ->Name("matmul_f32")
    ->Arg(256)->Arg(512)->Arg(1024)->Arg(2048)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

// A batch of small products, [batch, m, k] @ [batch, k, n]: attention over short sequences and
// other per-sample products, where each GEMM call's own cost counts.
void batched_matmul(benchmark::State& state) {
  const std::int64_t batch = state.range(0), m = state.range(1), k = state.range(2), n = state.range(3);
  const auto a = T<3>::random({batch, m, k}, kiln::Distribution::normal(0, 1));
  const auto b = T<3>::random({batch, k, n}, kiln::Distribution::normal(0, 1));
  keep(a.matmul(b));
  for (auto _ : state) keep(a.matmul(b));
  state.counters["GFLOP/s"] = benchmark::Counter(2.0 * batch * m * n * k, benchmark::Counter::kIsIterationInvariantRate,
                                                 benchmark::Counter::kIs1000);
}
BENCHMARK(batched_matmul)
    ->Name("batched_matmul_f32")
    ->ArgNames({"b", "m", "k", "n"})
    ->Args({256, 17, 33, 9})
    ->Args({64, 64, 64, 32})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

constexpr std::int64_t kElements = 1 << 24;

template <class B> void add(benchmark::State& state) {
  if (!ready<B>(state)) return;
  const auto a = kiln::Tensor<B, 1>::random({kElements}, kiln::Distribution::normal(0, 1));
  const auto b = kiln::Tensor<B, 1>::random({kElements}, kiln::Distribution::normal(0, 1));
  keep(a + b);
  for (auto _ : state) keep(a + b);
  // Bytes moved: two reads and one write of 4-byte floats.
  state.SetBytesProcessed(state.iterations() * kElements * 12);
}
BENCHMARK(add<Cpu>)->Name("add_16M")->Unit(benchmark::kMillisecond)->UseRealTime();

template <class B> void gelu(benchmark::State& state) {
  if (!ready<B>(state)) return;
  const auto a = kiln::Tensor<B, 1>::random({kElements}, kiln::Distribution::normal(0, 1));
  keep(a.gelu());
  for (auto _ : state) keep(a.gelu());
  state.SetBytesProcessed(state.iterations() * kElements * 8);
}
BENCHMARK(gelu<Cpu>)->Name("gelu_16M")->Unit(benchmark::kMillisecond)->UseRealTime();

template <class B> void exp(benchmark::State& state) {
  if (!ready<B>(state)) return;
  const auto a = kiln::Tensor<B, 1>::random({kElements}, kiln::Distribution::normal(0, 1));
  keep(a.exp());
  for (auto _ : state) keep(a.exp());
  state.SetBytesProcessed(state.iterations() * kElements * 8);
}
BENCHMARK(exp<Cpu>)->Name("exp_16M")->Unit(benchmark::kMillisecond)->UseRealTime();

// The cost of one op on a tiny tensor (1k floats), where the host's work around the kernel
// (checks, finding the kernel, allocating the result) is most of the time: a unary op, a
// binary op, and a gradient formula (tanh's, as Autodiff calls it). On Vulkan the
// dispatches are recorded and submitted in batches, so the time per op includes its share
// of the submission and of the kernel run.
enum class Overhead { unary, binary, gradient };
template <class B> void op_overhead(benchmark::State& state, Overhead which) {
  if (!ready<B>(state)) return;
  using V = kiln::Tensor<B, 1>;
  const auto x = V::random({1024}, kiln::Distribution::normal(0, 1));
  const auto y = x.tanh();
  const auto dy = V::random({1024}, kiln::Distribution::normal(0, 1));
  const auto step = [&] {
    switch (which) {
      case Overhead::unary: return x.exp().primitive();
      case Overhead::binary: return (x * y).primitive();
      case Overhead::gradient:
        return kiln::provided::unary_backward<B, kiln::ops::Tanh>(x.primitive(), y.primitive(), dy.primitive());
    }
    return x.primitive();
  };
  benchmark::DoNotOptimize(B::into_data(step()));  // compiles the kernel where there is one to compile
  for (auto _ : state) benchmark::DoNotOptimize(step());
  benchmark::DoNotOptimize(B::into_data(step()));  // waits for what is still queued
}
void op_overhead_cpu(benchmark::State& state, Overhead which) { op_overhead<Cpu>(state, which); }
BENCHMARK_CAPTURE(op_overhead_cpu, exp, Overhead::unary)->Name("op_overhead_1k/exp")->UseRealTime();
BENCHMARK_CAPTURE(op_overhead_cpu, mul, Overhead::binary)->Name("op_overhead_1k/mul")->UseRealTime();
BENCHMARK_CAPTURE(op_overhead_cpu, tanh_backward, Overhead::gradient)
    ->Name("op_overhead_1k/tanh_backward")->UseRealTime();

// The same through kiln::Dispatch on the CPU (its default device): the cost of choosing the
// backend at run time, per op.
void op_overhead_dispatch(benchmark::State& state, Overhead which) { op_overhead<kiln::Dispatch>(state, which); }
BENCHMARK_CAPTURE(op_overhead_dispatch, exp, Overhead::unary)->Name("op_overhead_1k/exp@dispatch_cpu")->UseRealTime();
BENCHMARK_CAPTURE(op_overhead_dispatch, mul, Overhead::binary)->Name("op_overhead_1k/mul@dispatch_cpu")->UseRealTime();
BENCHMARK_CAPTURE(op_overhead_dispatch, tanh_backward, Overhead::gradient)
    ->Name("op_overhead_1k/tanh_backward@dispatch_cpu")->UseRealTime();

#ifdef KILN_BENCH_VULKAN
void op_overhead_vulkan(benchmark::State& state, Overhead which) { op_overhead<kiln::Vulkan>(state, which); }
BENCHMARK_CAPTURE(op_overhead_vulkan, exp, Overhead::unary)->Name("vulkan/op_overhead_1k/exp")->UseRealTime();
BENCHMARK_CAPTURE(op_overhead_vulkan, mul, Overhead::binary)->Name("vulkan/op_overhead_1k/mul")->UseRealTime();
BENCHMARK_CAPTURE(op_overhead_vulkan, tanh_backward, Overhead::gradient)
    ->Name("vulkan/op_overhead_1k/tanh_backward")->UseRealTime();
BENCHMARK(matmul<kiln::Vulkan>)
    ->Name("vulkan/matmul_f32")
    ->Arg(256)->Arg(512)->Arg(1024)->Arg(2048)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
// conv2d on a small CNN layer (lavapipe is slow): x [8, 16, 28, 28], w [32, 16, 3, 3], padding 1,
// forward alone and forward + input and weight gradients.
void vulkan_conv2d(benchmark::State& state, bool backward) {
  using kiln::Vulkan;
  if (!ready<Vulkan>(state)) return;
  using V4 = kiln::Tensor<Vulkan, 4>;
  const auto x = V4::random({8, 16, 28, 28}, kiln::Distribution::normal(0, 1));
  const auto w = V4::random({32, 16, 3, 3}, kiln::Distribution::normal(0, 0.1));
  const auto b = kiln::Tensor<Vulkan, 1>::random({32}, kiln::Distribution::normal(0, 0.1));
  const auto dy = V4::random({8, 32, 28, 28}, kiln::Distribution::normal(0, 1));
  kiln::ops::Conv2dOptions options;
  options.padding = {1, 1};
  const auto step = [&] {
    const V4 y(Vulkan::conv2d(x.primitive(), w.primitive(), b.primitive(), options));
    if (!backward) return keep(y);
    // Recorded together; the first read-back waits for all three.
    const V4 dx(Vulkan::conv2d_backward_input(dy.primitive(), w.primitive(), x.shape(), options));
    const V4 dw(Vulkan::conv2d_backward_weight(x.primitive(), dy.primitive(), w.shape(), options));
    keep(y);
    keep(dx);
    keep(dw);
  };
  step();
  for (auto _ : state) step();
  const double flops = 2.0 * 8 * 32 * 28 * 28 * 16 * 9 * (backward ? 3 : 1);
  state.counters["GFLOP/s"] =
      benchmark::Counter(flops, benchmark::Counter::kIsIterationInvariantRate, benchmark::Counter::kIs1000);
}
BENCHMARK_CAPTURE(vulkan_conv2d, fwd, false)
    ->Name("vulkan/conv2d_fwd_8x16x28x28_k3")->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK_CAPTURE(vulkan_conv2d, fwd_bwd, true)
    ->Name("vulkan/conv2d_fwd_bwd_8x16x28x28_k3")->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(add<kiln::Vulkan>)->Name("vulkan/add_16M")->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(gelu<kiln::Vulkan>)->Name("vulkan/gelu_16M")->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(exp<kiln::Vulkan>)->Name("vulkan/exp_16M")->Unit(benchmark::kMillisecond)->UseRealTime();

// Softmax over the rows of [1024, 1024] as the tensor API composes it on Vulkan (no
// hand-fused kernel): five kernels on plain Vulkan (max, subtract, exp, sum, divide), one
// row program on Fusion<Vulkan>.
template <class B> void vulkan_softmax(benchmark::State& state) {
  if (!ready<kiln::Vulkan>(state)) return;
  const auto x = kiln::Tensor<B, 2>::random({1024, 1024}, kiln::Distribution::normal(0, 1));
  const auto step = [&] {
    if constexpr (std::is_same_v<B, kiln::Vulkan>) keep(x.softmax(1));
    else keep(kiln::Tensor<kiln::Vulkan, 2>(B::value(x.softmax(1).primitive())));
  };
  step();
  for (auto _ : state) step();
}
BENCHMARK(vulkan_softmax<kiln::Vulkan>)->Name("vulkan/softmax_1024x1024")->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(vulkan_softmax<kiln::Fusion<kiln::Vulkan>>)
    ->Name("vulkan/softmax_1024x1024@fusion")->Unit(benchmark::kMillisecond)->UseRealTime();
#endif

void sum_all(benchmark::State& state) {
  const auto a = T<1>::random({kElements}, kiln::Distribution::normal(0, 1));
  for (auto _ : state) keep(a.sum());
  state.SetBytesProcessed(state.iterations() * kElements * 4);
}
BENCHMARK(sum_all)->Name("sum_16M")->Unit(benchmark::kMillisecond)->UseRealTime();

void sum_rows(benchmark::State& state) {
  const auto a = T<2>::random({4096, 4096}, kiln::Distribution::normal(0, 1));
  for (auto _ : state) keep(a.sum_dim(state.range(0)));
  state.SetBytesProcessed(state.iterations() * 4096 * 4096 * 4);
}
BENCHMARK(sum_rows)->Name("sum_dim_4096x4096")->Arg(0)->Arg(1)->Unit(benchmark::kMillisecond)->UseRealTime();

// conv2d forward + backward (input and weight gradients, bias gradient) for a middle CNN layer.
void conv2d_train(benchmark::State& state) {
  const auto x = T<4>::random({64, 32, 28, 28}, kiln::Distribution::normal(0, 1));
  const auto w = T<4>::random({64, 32, 3, 3}, kiln::Distribution::normal(0, 0.1));
  const auto b = T<1>::random({64}, kiln::Distribution::normal(0, 0.1));
  const auto dy = T<4>::random({64, 64, 28, 28}, kiln::Distribution::normal(0, 1));
  kiln::ops::Conv2dOptions options;
  options.padding = {1, 1};
  for (auto _ : state) {
    auto y = Cpu::conv2d(x.primitive(), w.primitive(), b.primitive(), options);
    auto dx = Cpu::conv2d_backward_input(dy.primitive(), w.primitive(), x.shape(), options);
    auto dw = Cpu::conv2d_backward_weight(x.primitive(), dy.primitive(), w.shape(), options);
    auto db = dy.sum_dim(0).sum_dim(2).sum_dim(3);
    benchmark::DoNotOptimize(y.storage->ptr);
    benchmark::DoNotOptimize(dx.storage->ptr);
    benchmark::DoNotOptimize(dw.storage->ptr);
    keep(db);
  }
}
BENCHMARK(conv2d_train)->Name("conv2d_fwd_bwd_64x32x28x28_k3")->Unit(benchmark::kMillisecond)->UseRealTime();

void conv2d_forward(benchmark::State& state) {
  const auto x = T<4>::random({64, 32, 28, 28}, kiln::Distribution::normal(0, 1));
  const auto w = T<4>::random({64, 32, 3, 3}, kiln::Distribution::normal(0, 0.1));
  const auto b = T<1>::random({64}, kiln::Distribution::normal(0, 0.1));
  kiln::ops::Conv2dOptions options;
  options.padding = {1, 1};
  for (auto _ : state) {
    auto y = Cpu::conv2d(x.primitive(), w.primitive(), b.primitive(), options);
    benchmark::DoNotOptimize(y.storage->ptr);
  }
}
BENCHMARK(conv2d_forward)->Name("conv2d_fwd_64x32x28x28_k3")->Unit(benchmark::kMillisecond)->UseRealTime();

// MaxPool2d(2) as training runs it: values and indices forward, the gradient scattered back.
void max_pool2d_train(benchmark::State& state) {
  const auto x = T<4>::random({64, 32, 28, 28}, kiln::Distribution::normal(0, 1));
  const auto dy = T<4>::random({64, 32, 14, 14}, kiln::Distribution::normal(0, 1));
  const kiln::ops::Pool2dOptions options{.kernel = {2, 2}, .stride = {2, 2}};
  for (auto _ : state) {
    const auto [y, indices] = Cpu::max_pool2d(x.primitive(), options);
    auto dx = Cpu::max_pool2d_backward(x.primitive(), dy.primitive(), indices, options);
    benchmark::DoNotOptimize(y.storage->ptr);
    benchmark::DoNotOptimize(dx.storage->ptr);
  }
}
BENCHMARK(max_pool2d_train)->Name("max_pool2d_fwd_bwd_64x32x28x28_k2")->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace
