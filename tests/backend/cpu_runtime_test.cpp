// The CPU backend's process-wide settings: the thread count (kiln::cpu::set_num_threads,
// KILN_NUM_THREADS) reaching every thread, the caching allocator's statistics and
// empty_cache and its huge-page placement, and the instruction set the loader chose
// (kiln::cpu::capability); the convolution algorithm; Adam's step and elementwise ops over
// given-up buffers.
#include "expect_error.hpp"
#include "golden.hpp"

#include <kiln/cpu/backend.hpp>
#include <kiln/cpu/instances.hpp>
#include <kiln/optim/adam.hpp>
#include <kiln/tensor.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

using namespace kiln;
using kiln::cpu::ConvAlgorithm;

namespace {

// Whether this CPU runs code compiled with -march=<level>.
bool cpu_has(const std::string& level) {
#if defined(__x86_64__) && defined(__GNUC__)
  if (level == "x86-64-v2") return __builtin_cpu_supports("x86-64-v2");
  if (level == "x86-64-v3") return __builtin_cpu_supports("x86-64-v3");
  if (level == "x86-64-v4") return __builtin_cpu_supports("x86-64-v4");
#endif
  return true;  // "native" or the compiler's default: the machine that built it
}

// The levels the CPU backend was built for, lowest first (tests/CMakeLists.txt), and the one
// the loader must have chosen: the highest this CPU has, at most KILN_TEST_CPU_LEVEL where
// ctest capped the loader's choice with glibc's tunable.
TEST(CpuRuntime, CapabilityIsTheHighestLevelBuiltThatTheCpuHas) {
  std::vector<std::string> built;
  std::istringstream list(KILN_TEST_CPU_LEVELS);
  for (std::string level; std::getline(list, level, ',');) built.push_back(level);
  ASSERT_FALSE(built.empty());
  const char* cap = std::getenv("KILN_TEST_CPU_LEVEL");
  if (cap != nullptr && !cpu_has(cap)) GTEST_SKIP() << "SKIPPED: this CPU cannot run " << cap << " code";
  std::string expected;
  for (const std::string& level : built) {
    if (cpu_has(level)) expected = level;
    if (cap != nullptr && level == cap) break;
  }
  EXPECT_EQ(cpu::capability(), expected);
}

TEST(CpuRuntime, TheThreadCountReachesEveryThread) {
  const int before = cpu::num_threads();
  ASSERT_GE(before, 1);
  cpu::set_num_threads(1);
  EXPECT_EQ(cpu::num_threads(), 1);
  int seen = 0;
  std::thread([&] { seen = cpu::num_threads(); }).join();  // a thread started after the change
  EXPECT_EQ(seen, 1);
  // Work on more threads than asked still gives the same result.
  const double total = Tensor<Cpu, 1>::ones({1 << 20}).sum().item();
  EXPECT_DOUBLE_EQ(total, 1048576.0);
  cpu::set_num_threads(0);  // the default again
  EXPECT_EQ(cpu::num_threads(), before);
  std::thread([&] { seen = cpu::num_threads(); }).join();
  EXPECT_EQ(seen, before);
}

TEST(CpuRuntime, ABadThreadCountIsAnError) {
  try {
    cpu::set_num_threads(-2);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("cpu::set_num_threads: -2 is not a thread count"), std::string::npos)
        << e.what();
  }
}

// ctest runs this one again with KILN_NUM_THREADS=1 (cpu.threads_from_environment).
TEST(CpuRuntime, KilnNumThreadsSetsTheDefault) {
  const char* text = std::getenv("KILN_NUM_THREADS");
  if (text == nullptr) GTEST_SKIP() << "KILN_NUM_THREADS is not set (ctest's cpu.threads_from_environment sets it)";
  EXPECT_EQ(cpu::num_threads(), std::atoi(text));
  int seen = 0;
  std::thread([&] { seen = cpu::num_threads(); }).join();
  EXPECT_EQ(seen, std::atoi(text));
}

// Beside threads that hold every core, the calling thread's team gives up its second thread;
// once they stop, it takes it back. ctest runs this alone (cpu.shared_cores, RUN_SERIAL):
// other tests beside it would hold the cores too.
TEST(SharedCores, ATeamGivesUpAThreadWhileTheCoresAreBusyAndTakesItBackAfter) {
  if (std::getenv("KILN_TEST_SHARED_CORES") == nullptr)
    GTEST_SKIP() << "KILN_TEST_SHARED_CORES is not set (ctest's cpu.shared_cores runs this alone)";
  const unsigned cores = std::max(1u, std::thread::hardware_concurrency());
  if (cores < 2) GTEST_SKIP() << "one core: no team to shrink";
  cpu::set_num_threads(2);
  cpu::set_adaptive_threads(true);
  const auto x = Tensor<Cpu, 1>::ones({1 << 20});
  const auto work = [&] { EXPECT_DOUBLE_EQ(x.exp().sum().item(), std::exp(1.0f) * 1048576.0); };
  // Runs ops until the team has `threads` or `limit` has passed; returns the team's size.
  const auto run_until = [&](int threads, std::chrono::milliseconds limit) {
    const auto end = std::chrono::steady_clock::now() + limit;
    while (cpu::active_threads() != threads && std::chrono::steady_clock::now() < end) work();
    return cpu::active_threads();
  };
  std::atomic<bool> stop{false};
  std::vector<std::thread> spinners;
  const auto spin = [&] {
    stop = false;
    for (unsigned i = 0; i < 2 * cores; ++i)
      spinners.emplace_back([&] {
        while (!stop.load(std::memory_order_relaxed)) {
        }
      });
  };
  const auto end_spinning = [&] {
    stop = true;
    for (std::thread& t : spinners) t.join();
    spinners.clear();
  };

  spin();
  EXPECT_EQ(run_until(1, std::chrono::seconds(5)), 1) << "the team kept its threads beside " << 2 * cores << " spinners";
  end_spinning();
  EXPECT_EQ(run_until(2, std::chrono::seconds(10)), 2) << "the team did not take its thread back";
  EXPECT_EQ(cpu::num_threads(), 2);

  // Kept at the set count: the team stays whole beside the spinners.
  cpu::set_adaptive_threads(false);
  spin();
  EXPECT_EQ(run_until(1, std::chrono::milliseconds(500)), 2);
  end_spinning();
  cpu::set_adaptive_threads(true);
  cpu::set_num_threads(0);
}

TEST(CpuRuntime, MemoryStatsCountLivePeakAndCachedBytes) {
  cpu::empty_cache();
  const cpu::MemoryStats start = cpu::memory_stats();
  EXPECT_EQ(start.cached_bytes, 0u);
  cpu::reset_peak_memory_stats();
  EXPECT_EQ(cpu::memory_stats().peak_live_bytes, start.live_bytes);
  constexpr std::size_t bytes = std::size_t{1} << 20;
  {
    const auto x = Tensor<Cpu, 1>::zeros({static_cast<std::int64_t>(bytes / 4)}, {});
    const cpu::MemoryStats held = cpu::memory_stats();
    EXPECT_GE(held.live_bytes, start.live_bytes + bytes);
    EXPECT_EQ(held.live_buffers, start.live_buffers + 1);
    EXPECT_EQ(held.peak_live_bytes, held.live_bytes);
  }
  const cpu::MemoryStats freed = cpu::memory_stats();
  EXPECT_EQ(freed.live_bytes, start.live_bytes);
  EXPECT_GE(freed.cached_bytes, bytes);                       // kept for reuse
  EXPECT_GE(freed.peak_live_bytes, start.live_bytes + bytes);  // the peak stays
  cpu::empty_cache();
  EXPECT_EQ(cpu::memory_stats().cached_bytes, 0u);
  cpu::reset_peak_memory_stats();
  EXPECT_EQ(cpu::memory_stats().peak_live_bytes, start.live_bytes);
}

// Buffers of 4 MiB and more start on a 2 MiB boundary (where Linux can back them with one
// transparent huge page per 2 MiB); smaller ones on a 64-byte boundary, as before.
TEST(CpuRuntime, LargeBuffersStartOnHugePageBoundaries) {
  const auto address = [](const auto& t) { return reinterpret_cast<std::uintptr_t>(t.primitive().storage->ptr); };
  constexpr std::uintptr_t huge_page = std::uintptr_t{2} << 20;
  for (const std::int64_t mib : {4, 5, 9}) {
    const auto big = Tensor<Cpu, 1>::full({mib * (1 << 20) / 4}, 1.5, {});
    EXPECT_EQ(address(big) % huge_page, 0u) << mib << " MiB";
    EXPECT_EQ(big.sum().item(), 1.5 * static_cast<double>(mib * (1 << 20) / 4)) << mib << " MiB";
  }
  const auto below = Tensor<Cpu, 1>::zeros({(std::int64_t{4} << 20) / 4 - 1024}, {});
  EXPECT_EQ(address(below) % 64, 0u);
  // The statistics count the whole pages such a buffer holds: 5 MiB asked, 6 MiB held.
  const std::size_t live = cpu::memory_stats().live_bytes;
  const auto five = Tensor<Cpu, 1>::zeros({(std::int64_t{5} << 20) / 4}, {});
  EXPECT_EQ(cpu::memory_stats().live_bytes - live, std::size_t{6} << 20);
}

// Convolutions by either algorithm keep f32's accuracy on a training-sized 3x3 layer (batch
// 16, 32 channels, 28x28: where oneDNN's heuristics pick Winograd's algorithm on AVX-512),
// forward and both gradients, against the f64 reference loops; and the two algorithms are
// different computations there.
TEST(CpuConv, EitherAlgorithmKeepsF32AccuracyOnATrainingSizedLayer) {
  using T4 = Tensor<Cpu, 4>;
  const ops::Conv2dOptions options{{1, 1}, {1, 1}, {1, 1}, 1};
  manual_seed(7);
  const T4 x = T4::random({16, 32, 28, 28}, Distribution::normal(0, 1), {}, DType::f64);
  const T4 w = T4::random({32, 32, 3, 3}, Distribution::normal(0, 0.06), {}, DType::f64);
  const T4 dy = T4::random({16, 32, 28, 28}, Distribution::normal(0, 1), {}, DType::f64);
  const Shape xs = x.shape(), ws = w.shape();
  // y, dx and dw of (x, w, dy) in their dtype.
  const auto run = [&](const T4& x, const T4& w, const T4& dy) {
    return std::array<T4, 3>{T4(Cpu::conv2d(x.primitive(), w.primitive(), std::nullopt, options)),
                             T4(Cpu::conv2d_backward_input(dy.primitive(), w.primitive(), xs, options)),
                             T4(Cpu::conv2d_backward_weight(x.primitive(), dy.primitive(), ws, options))};
  };
  const auto reference = run(x, w, dy);
  // The largest error relative to the largest value.
  const auto error = [](const T4& actual, const T4& expected) {
    const auto a = actual.into_data().to_vec<double>(), e = expected.into_data().to_vec<double>();
    double worst = 0, largest = 0;
    for (std::size_t i = 0; i < a.size(); ++i) {
      worst = std::max(worst, std::abs(a[i] - e[i]));
      largest = std::max(largest, std::abs(e[i]));
    }
    return worst / largest;
  };
  const ConvAlgorithm before = cpu::conv_algorithm();
  std::array<std::vector<float>, 2> forward;
  for (const ConvAlgorithm algorithm : {ConvAlgorithm::automatic, ConvAlgorithm::direct}) {
    cpu::set_conv_algorithm(algorithm);
    EXPECT_EQ(cpu::conv_algorithm(), algorithm);
    const auto f32 = run(x.cast(DType::f32), w.cast(DType::f32), dy.cast(DType::f32));
    const char* name = algorithm == ConvAlgorithm::direct ? "direct" : "automatic";
    for (std::size_t k = 0; k < 3; ++k) EXPECT_LT(error(f32[k], reference[k]), 2e-5) << name << ", output " << k;
    forward[algorithm == ConvAlgorithm::direct] = f32[0].into_data().to_vec<float>();
  }
  cpu::set_conv_algorithm(before);
#if defined(__x86_64__) && defined(__GNUC__)
  if (__builtin_cpu_supports("avx512f"))
    EXPECT_NE(forward[0], forward[1]) << "oneDNN chose the direct algorithm for automatic on an AVX-512 CPU";
#endif
}

// The automatic setting keeps direct sums where Winograd's algorithm costs more than it saves
// (conv.cpp's winograd_may_pay): a first layer's forward pass and weight gradient (1 input
// channel), and a 16 -> 16 layer's forward pass and input gradient, come out bit for bit as
// under `direct`; the 16 -> 16 layer's weight gradient is left to oneDNN's heuristics, which
// take Winograd's there on AVX-512.
TEST(CpuConv, AutomaticKeepsDirectSumsWhereWinogradDoesNotPay) {
  using T4 = Tensor<Cpu, 4>;
  const ops::Conv2dOptions options{{1, 1}, {1, 1}, {1, 1}, 1};
  // Every run on one thread: oneDNN's direct weight gradient sums in an order that follows the
  // threads it gets, and a team gives up a thread while other processes hold the cores (ctest
  // -j2), so two runs on two threads need not agree bit for bit.
  cpu::set_num_threads(1);
  const struct Restore {
    ~Restore() { cpu::set_num_threads(0); }
  } restore;
  manual_seed(11);
  // y, dx and dw of a 3x3 layer of `in` -> `out` channels on a batch of 64 28x28 images, under `algorithm`.
  const auto run = [&](std::int64_t in, std::int64_t out, ConvAlgorithm algorithm) {
    manual_seed(in * 100 + out);
    const T4 x = T4::random({64, in, 28, 28}, Distribution::normal(0, 1));
    const T4 w = T4::random({out, in, 3, 3}, Distribution::normal(0, 0.1));
    const T4 dy = T4::random({64, out, 28, 28}, Distribution::normal(0, 1));
    const ConvAlgorithm before = cpu::conv_algorithm();
    cpu::set_conv_algorithm(algorithm);
    std::array<std::vector<float>, 3> result{
        T4(Cpu::conv2d(x.primitive(), w.primitive(), std::nullopt, options)).into_data().to_vec<float>(),
        T4(Cpu::conv2d_backward_input(dy.primitive(), w.primitive(), x.shape(), options)).into_data().to_vec<float>(),
        T4(Cpu::conv2d_backward_weight(x.primitive(), dy.primitive(), w.shape(), options)).into_data().to_vec<float>()};
    cpu::set_conv_algorithm(before);
    return result;
  };
  const auto first_auto = run(1, 32, ConvAlgorithm::automatic), first_direct = run(1, 32, ConvAlgorithm::direct);
  EXPECT_EQ(first_auto[0], first_direct[0]) << "forward of a 1 -> 32 layer";
  EXPECT_EQ(first_auto[2], first_direct[2]) << "weight gradient of a 1 -> 32 layer";
  const auto narrow_auto = run(16, 16, ConvAlgorithm::automatic), narrow_direct = run(16, 16, ConvAlgorithm::direct);
  EXPECT_EQ(narrow_auto[0], narrow_direct[0]) << "forward of a 16 -> 16 layer";
  EXPECT_EQ(narrow_auto[1], narrow_direct[1]) << "input gradient of a 16 -> 16 layer";
#if defined(__x86_64__) && defined(__GNUC__)
  if (__builtin_cpu_supports("avx512f"))
    EXPECT_NE(narrow_auto[2], narrow_direct[2]) << "the 16 -> 16 layer's weight gradient was kept direct";
#endif
}

// ctest runs this one with KILN_CONV_ALGORITHM=direct (cpu.threads_from_environment).
TEST(CpuRuntime, KilnConvAlgorithmSetsTheDefault) {
  const char* text = std::getenv("KILN_CONV_ALGORITHM");
  if (text == nullptr) GTEST_SKIP() << "KILN_CONV_ALGORITHM is not set (ctest's cpu.threads_from_environment sets it)";
  EXPECT_EQ(std::string(text), "direct");
  EXPECT_EQ(cpu::conv_algorithm(), ConvAlgorithm::direct);
}

TEST(CpuRuntime, ABadConvAlgorithmIsAnError) {
  const ConvAlgorithm before = cpu::conv_algorithm();
  try {
    cpu::set_conv_algorithm(static_cast<ConvAlgorithm>(7));
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("set_conv_algorithm: 7 is no ConvAlgorithm"), std::string::npos) << e.what();
  }
  EXPECT_EQ(cpu::conv_algorithm(), before) << "the setting is kept";
}

}  // namespace

// Adam's fused step writes its results over the parameter and moments given up to it where
// nothing else holds their buffers, and into fresh buffers where something does (a copy
// kept by the caller, a strided view); the values are the same either way.
TEST(CpuAdam, WritesOverGivenUpBuffersThatNothingElseHolds) {
  using T1 = Tensor<Cpu, 1>;
  const ops::AdamStep options{.lr = 0.1, .weight_decay = 0.01, .decoupled_weight_decay = true, .step = 2};
  manual_seed(3);
  const auto fresh = [] { return T1::random({5000}, Distribution::normal(0, 1)); };
  const T1 p0 = fresh(), g = fresh(), m0 = fresh(), v0 = fresh().abs();
  const auto address = [](const T1& t) { return t.primitive().data<float>(); };
  const auto copy = [](const auto& t) { return std::remove_cvref_t<decltype(t)>::from_data(t.into_data()); };
  // The reference: tensors passed as they are, results in fresh buffers.
  const auto expected = optim::adam_step(p0, g, m0, v0, options);
  for (const T1* t : {&expected.param, &expected.m, &expected.v})
    for (const T1* input : {&p0, &m0, &v0}) EXPECT_NE(address(*t), address(*input));
  EXPECT_FALSE(test::all_close(expected.param.into_data(), p0.into_data(), 0, 0));  // a step that moves

  // Given up, held by nothing else: the same values, over the same buffers.
  T1 p = copy(p0), m = copy(m0), v = copy(v0);
  const float *pa = address(p), *ma = address(m), *va = address(v);
  const auto given = optim::adam_step(std::move(p), g, std::move(m), std::move(v), options);
  EXPECT_EQ(address(given.param), pa);
  EXPECT_EQ(address(given.m), ma);
  EXPECT_EQ(address(given.v), va);
  EXPECT_TRUE(test::all_close(given.param.into_data(), expected.param.into_data(), 0, 0));
  EXPECT_TRUE(test::all_close(given.m.into_data(), expected.m.into_data(), 0, 0));
  EXPECT_TRUE(test::all_close(given.v.into_data(), expected.v.into_data(), 0, 0));

  // Given up while a copy is kept: the copy keeps the old values, the result is elsewhere.
  T1 p2 = copy(p0), m2 = copy(m0);
  const T1 kept = m2;
  const auto shared = optim::adam_step(std::move(p2), g, std::move(m2), copy(v0), options);
  EXPECT_NE(address(shared.m), address(kept));
  EXPECT_TRUE(test::all_close(kept.into_data(), m0.into_data(), 0, 0));
  EXPECT_TRUE(test::all_close(shared.m.into_data(), expected.m.into_data(), 0, 0));

  // A strided view given up: a fresh, dense result.
  using T2 = Tensor<Cpu, 2>;
  const T2 square = T2::random({50, 50}, Distribution::normal(0, 1));
  const T2 grad2 = copy(square.transpose());
  T2 strided = copy(square).transpose();
  ASSERT_FALSE(strided.primitive().is_contiguous());
  const auto transposed = optim::adam_step(std::move(strided), grad2, grad2.zeros_like(), grad2.zeros_like(), options);
  EXPECT_TRUE(transposed.param.primitive().is_contiguous());
  const auto dense = optim::adam_step(copy(square.transpose()), grad2, grad2.zeros_like(), grad2.zeros_like(),
                                      options);
  EXPECT_TRUE(test::all_close(transposed.param.into_data(), dense.param.into_data(), 0, 0));
}

// A step that fails (a gradient of another dtype) leaves the tensors given up to it whole.
TEST(CpuAdam, AnErrorLeavesGivenUpTensorsWhole) {
  using T1 = Tensor<Cpu, 1>;
  const auto vec = [](std::vector<double> values, DType dtype) {
    return T1::from_data(TensorData::from(values, Shape{3}).convert(dtype));
  };
  const T1 p0 = vec({1, 2, 3}, DType::f32), m0 = vec({0.5, 0.25, 0.125}, DType::f32), v0 = vec({1, 4, 9}, DType::f32);
  const T1 g64 = vec({1, 1, 1}, DType::f64);
  const auto copy = [](const T1& t) { return T1::from_data(t.into_data()); };
  T1 p = copy(p0), m = copy(m0), v = copy(v0);
  EXPECT_KILN_ERROR(optim::adam_step(std::move(p), g64, std::move(m), std::move(v), {}),
                    "adam_step: param [3] f32, grad [3] f64");
  EXPECT_TRUE(test::all_close(p.into_data(), p0.into_data(), 0, 0));
  EXPECT_TRUE(test::all_close(m.into_data(), m0.into_data(), 0, 0));
  EXPECT_TRUE(test::all_close(v.into_data(), v0.into_data(), 0, 0));
}

// Elementwise ops on tensors the caller gives up (temporaries, std::move) write over their
// buffers where nothing else holds them: a chain of temporaries allocates one result. A
// given-up tensor that a kept copy shares, a strided view or a broadcast operand gets a
// fresh buffer; the values are those of the kept path in every case.
TEST(CpuElementwise, GivenUpOperandsAreWrittenOverWhereNothingElseHoldsThem) {
  using T = Tensor<Cpu, 2>;
  manual_seed(4);
  const T x = T::random({64, 48}, Distribution::normal(0, 1)), w = T::random({1, 48}, Distribution::normal(0, 1));
  const auto address = [](const T& t) { return t.primitive().data<float>(); };
  const auto same = [](const T& a, const T& b) { return test::all_close(a.into_data(), b.into_data(), 0, 0); };
  const T twice = x * 2.0;  // kept: each op below computes into a fresh buffer
  const T expected = ((twice * w).exp() + 1.0).gelu();
  EXPECT_NE(address(expected), address(twice));

  // x * 2 * w, exp, + 1, gelu: the first product's buffer carries the chain.
  T t = x * 2.0;
  const float* buffer = address(t);
  const T chain = ((std::move(t) * w).exp() + 1.0).gelu();
  EXPECT_EQ(address(chain), buffer);
  EXPECT_TRUE(same(chain, expected));
  // The temporary on the right: w * (x * 2) writes over the product.
  T u = x * 2.0;
  const float* right = address(u);
  const T product = w * std::move(u);
  EXPECT_EQ(address(product), right);
  EXPECT_TRUE(same(product, w * twice));
  // Both given up: the result goes over the first that has its shape.
  T a = x * 2.0, b = x * 2.0;
  const float* second = address(b);
  const T sum = std::move(a).sum_dim(1) + std::move(b);  // a's sum is [64, 1]: only b's buffer fits
  EXPECT_EQ(address(sum), second);
  EXPECT_TRUE(same(sum, twice.sum_dim(1) + twice));

  // A copy kept: it keeps its values, the result is elsewhere.
  T shared = x * 2.0;
  const T kept = shared;
  const T exp = std::move(shared).exp();
  EXPECT_NE(address(exp), address(kept));
  EXPECT_TRUE(same(kept, twice));
  EXPECT_TRUE(same(exp, twice.exp()));
  // A strided view that alone holds its buffer: a fresh, dense result.
  T strided = (x * 2.0).transpose();
  ASSERT_EQ(strided.primitive().storage.use_count(), 1);
  const float* under = strided.primitive().data<float>();
  const T transposed = std::move(strided).exp();
  EXPECT_NE(address(transposed), under);
  EXPECT_TRUE(transposed.primitive().is_contiguous());
  EXPECT_TRUE(same(transposed, twice.transpose().exp()));
  // One tensor as both operands.
  T y = x * 2.0;
  EXPECT_TRUE(same(std::move(y) * y, twice * twice));
  T z = x * 2.0;
  EXPECT_TRUE(same(std::move(z) * std::move(z), twice * twice));
  // f16 computes in an f32 copy, which the op writes over: the kept path's values.
  const T half = twice.cast(DType::f16);
  EXPECT_TRUE(same(twice.cast(DType::f16).exp(), half.exp()));
}

// The gradient formulas on a given-up dy (Autodiff's rules pass each dy on as an rvalue):
// written over dy's buffer where nothing else holds it, into a fresh one otherwise, and the
// same values either way.
TEST(CpuElementwise, GivenUpGradientsAreWrittenOverWhereNothingElseHoldsThem) {
  using T = Tensor<Cpu, 2>;
  using P = Cpu::Primitive;
  manual_seed(5);
  const T x = T::random({32, 40}, Distribution::normal(0, 1)), b = T::random({1, 40}, Distribution::uniform(1, 2));
  const T y = x.tanh(), dy = T::random({32, 40}, Distribution::normal(0, 1));
  const auto same = [](const P& a, const P& b) { return test::all_close(T(a).into_data(), T(b).into_data(), 0, 0); };
  const P kept_tanh = Cpu::unary_backward<ops::Tanh>(x.primitive(), y.primitive(), dy.primitive());
  const P kept_div = Cpu::binary_backward<ops::Div>(x.primitive(), b.primitive(), (x / b).primitive(),
                                                    dy.primitive(), ops::Operand::lhs);

  // dy alone on its buffer: the gradient goes over it.
  P given = (dy * 1.0).primitive();
  const float* buffer = given.data<float>();
  const P tanh = Cpu::unary_backward<ops::Tanh>(x.primitive(), y.primitive(), std::move(given));
  EXPECT_EQ(tanh.data<float>(), buffer);
  EXPECT_TRUE(same(tanh, kept_tanh));
  P given_div = (dy * 1.0).primitive();
  const float* div_buffer = given_div.data<float>();
  const P div = Cpu::binary_backward<ops::Div>(x.primitive(), b.primitive(), (x / b).primitive(),
                                               std::move(given_div), ops::Operand::lhs);
  EXPECT_EQ(div.data<float>(), div_buffer);
  EXPECT_TRUE(same(div, kept_div));

  // Another holder: it keeps its values, the gradient is elsewhere.
  P shared = (dy * 1.0).primitive();
  const P holder = shared;
  const P elsewhere = Cpu::unary_backward<ops::Tanh>(x.primitive(), y.primitive(), std::move(shared));
  EXPECT_NE(elsewhere.data<float>(), holder.data<float>());
  EXPECT_TRUE(same(holder, dy.primitive()));
  EXPECT_TRUE(same(elsewhere, kept_tanh));
  // A strided dy alone on its buffer: a fresh, dense gradient.
  P strided = (dy.transpose() * 1.0).transpose().primitive();
  ASSERT_EQ(strided.storage.use_count(), 1);
  ASSERT_FALSE(strided.is_contiguous());
  const float* under = strided.data<float>();
  const P dense = Cpu::unary_backward<ops::Tanh>(x.primitive(), y.primitive(), std::move(strided));
  EXPECT_NE(dense.data<float>(), under);
  EXPECT_TRUE(dense.is_contiguous());
  EXPECT_TRUE(same(dense, kept_tanh));
  // f16 computes over dy's f32 copy: the kept path's values.
  const auto half = [](const T& t) { return t.cast(DType::f16).primitive(); };
  const P half_dy = half(dy);
  EXPECT_TRUE(same(Cpu::unary_backward<ops::Tanh>(half(x), half(y), half_dy),
                   Cpu::unary_backward<ops::Tanh>(half(x), half(y), half(dy))));
}
