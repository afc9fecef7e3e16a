// Fusion<B> (kiln/fusion/backend.hpp): elementwise chains recorded lazily and run as one
// fused program. Every test counts the B::elementwise calls Fusion makes (launched) and
// compares the values with the same expression on B itself.
#include "backends.hpp"
#include "golden.hpp"

#include <kiln/nn.hpp>

#include <cmath>
#include <limits>
#include <string>
#include <thread>
#include <utility>
#include <vector>

using namespace kiln;

template <class B> class FusionChains : public ::kiln::test::BackendTest<B> {};
TYPED_TEST_SUITE(FusionChains, ::kiln::test::HardwareBackends, ::kiln::test::BackendNames);

static_assert(Backend<Fusion<Cpu>>, "Fusion<B> is a backend");
static_assert(FusionTarget<Cpu> && !FusionTarget<Autodiff<Cpu>> && !FusionTarget<Fusion<Cpu>>,
              "fusion goes under Autodiff, once");
static_assert(AutodiffBackend<Autodiff<Fusion<Cpu>>>);
static_assert(Fusion<Cpu>::name == "fusion_cpu" && Autodiff<Fusion<Cpu>>::name == "autodiff_fusion_cpu");

namespace {

template <class B> std::uint64_t launched() { return Fusion<B>::counters().launched.load(); }

// The same values on Fusion<B> as a tensor of B.
template <class B, std::size_t D> Tensor<B, D> random(const std::array<std::int64_t, D>& dims, std::uint64_t seed) {
  manual_seed(seed);
  return Tensor<B, D>::random(dims, Distribution::normal(0, 1));
}
template <class B, std::size_t D> Tensor<Fusion<B>, D> on_fusion(const Tensor<B, D>& t) {
  return Tensor<Fusion<B>, D>::from_data(t.into_data());
}

}  // namespace

TYPED_TEST(FusionChains, AChainIsOneKernelWithTheValuesOfTheUnfusedOps) {
  using B = TypeParam;
  using F = Fusion<B>;
  const auto x = random<B, 2>({64, 33}, 1), a = random<B, 2>({1, 33}, 2), b = random<B, 2>({64, 1}, 3);
  const auto expected = ((x * a + b).gelu() * x.sigmoid()).into_data();
  const auto fx = on_fusion(x), fa = on_fusion(a), fb = on_fusion(b);
  const std::uint64_t before = launched<B>();
  const auto y = (fx * fa + fb).gelu() * fx.sigmoid();  // broadcasting both ways
  EXPECT_EQ(launched<B>(), before) << "recording runs nothing";
  EXPECT_TRUE(F::is_pending(y.primitive()));
  EXPECT_EQ(y.shape(), (Shape{64, 33}));
  EXPECT_TRUE(test::all_close(y.into_data(), expected, 1e-5, 1e-6));
  EXPECT_EQ(launched<B>(), before + 1) << "gelu(x * a + b) * sigmoid(x) is one fused program";
  EXPECT_FALSE(F::is_pending(y.primitive()));
  (void)y.into_data();
  EXPECT_EQ(launched<B>(), before + 1) << "a materialised tensor is not computed again";
}

TYPED_TEST(FusionChains, ScalarsAreParametersAndMasksFuseIntoWhere) {
  using B = TypeParam;
  const auto x = random<B, 1>({1000}, 4);
  const auto expected = where(x.gt(0.25), x * 0.5, (x - 1.5).exp()).clamp(-0.75, 2.0).into_data();
  const auto fx = on_fusion(x);
  const std::uint64_t before = launched<B>();
  const auto y = where(fx.gt(0.25), fx * 0.5, (fx - 1.5).exp()).clamp(-0.75, 2.0);
  EXPECT_TRUE(test::all_close(y.into_data(), expected, 1e-6, 1e-7));
  EXPECT_EQ(launched<B>(), before + 1);
}

TYPED_TEST(FusionChains, ReadingAnIntermediateComputesItAndTheRestStillFuses) {
  using B = TypeParam;
  const auto x = random<B, 1>({777}, 5);
  const auto fx = on_fusion(x);
  const std::uint64_t before = launched<B>();
  const auto mid = (fx * 3.0).tanh();
  const auto end = (mid + fx).square() - 1.0;
  EXPECT_TRUE(test::all_close(mid.into_data(), (x * 3.0).tanh().into_data(), 1e-6, 1e-7));
  EXPECT_EQ(launched<B>(), before + 1) << "only the intermediate ran";
  const auto later = end * mid;  // mid is now a leaf; end is still pending and fuses into later
  const auto unfused = (((x * 3.0).tanh() + x).square() - 1.0) * (x * 3.0).tanh();
  EXPECT_TRUE(test::all_close(later.into_data(), unfused.into_data(), 1e-5, 1e-6));
  EXPECT_EQ(launched<B>(), before + 2) << "end was never materialised on its own";
}

TYPED_TEST(FusionChains, ADroppedIntermediateIsNeverComputed) {
  using B = TypeParam;
  const auto fx = on_fusion(random<B, 1>({256}, 6));
  const std::uint64_t before = launched<B>();
  {
    const auto unused = (fx * 2.0).exp();  // dropped while pending
  }
  const auto kept = fx + 1.0;
  (void)kept.into_data();
  EXPECT_EQ(launched<B>(), before + 1);
}

TYPED_TEST(FusionChains, AnIntermediateThatAnotherPendingTensorReadsIsWrittenOnce) {
  using B = TypeParam;
  auto& c = Fusion<B>::counters();
  const auto x = random<B, 2>({40, 33}, 60), y = random<B, 2>({40, 33}, 61), b = random<B, 2>({1, 33}, 62);
  const auto fx = on_fusion(x), fy = on_fusion(y), fb = on_fusion(b);
  const auto shared = (fx * fy).exp();  // read by two pending tensors
  const auto first = shared + 1.0;
  const auto second = shared.tanh() * fx;
  std::uint64_t before = launched<B>(), written = c.written.load(), reused = c.reused.load();
  EXPECT_TRUE(test::all_close(first.into_data(), ((x * y).exp() + 1.0).into_data(), 1e-5, 1e-6));
  EXPECT_EQ(launched<B>(), before + 1);
  EXPECT_EQ(c.written.load(), written + 2) << "first, and beside it the intermediate that second still reads";
  EXPECT_FALSE(Fusion<B>::is_pending(shared.primitive()));
  EXPECT_TRUE(test::all_close(second.into_data(), ((x * y).exp().tanh() * x).into_data(), 1e-5, 1e-6));
  EXPECT_EQ(launched<B>(), before + 2);
  EXPECT_EQ(c.written.load(), written + 3);
  EXPECT_EQ(c.reused.load(), reused + 1) << "second read the intermediate instead of computing it";
  EXPECT_TRUE(test::all_close(shared.into_data(), (x * y).exp().into_data(), 1e-5, 1e-6));
  EXPECT_EQ(launched<B>(), before + 2) << "the intermediate was written already";

  // An intermediate that only a handle (or a temporary) holds is not written: it is computed
  // again where it is read.
  before = launched<B>(), written = c.written.load();
  const auto held = (fx * fy).sin();
  EXPECT_TRUE(test::all_close(((held + 1.0) * 2.0).into_data(), (((x * y).sin() + 1.0) * 2.0).into_data(), 1e-5, 1e-6));
  EXPECT_EQ(c.written.load(), written + 1);
  EXPECT_TRUE(Fusion<B>::is_pending(held.primitive()));
  // Nor one of another shape than the program's (it broadcasts into it).
  const auto small = (fb * 3.0).exp();
  const auto big = small + fx, other = small * fb;
  EXPECT_TRUE(test::all_close(big.into_data(), ((b * 3.0).exp() + x).into_data(), 1e-5, 1e-6));
  EXPECT_TRUE(Fusion<B>::is_pending(small.primitive()));
  EXPECT_TRUE(test::all_close(other.into_data(), ((b * 3.0).exp() * b).into_data(), 1e-5, 1e-6));
  EXPECT_EQ(c.written.load(), written + 3);
  EXPECT_EQ(launched<B>(), before + 3);
}

TYPED_TEST(FusionChains, AnIntermediateReadMidChainIsNotComputedAgain) {
  using B = TypeParam;
  auto& c = Fusion<B>::counters();
  const auto x = random<B, 1>({500}, 63);
  const auto fx = on_fusion(x);
  const auto mid = (fx * 3.0).erf();
  const auto end = (mid + fx).square() * 0.5;  // holds mid's tree
  EXPECT_TRUE(test::all_close(mid.into_data(), (x * 3.0).erf().into_data(), 1e-6, 1e-7));
  const std::uint64_t reused = c.reused.load();
  EXPECT_TRUE(test::all_close(end.into_data(), (((x * 3.0).erf() + x).square() * 0.5).into_data(), 1e-5, 1e-6));
  EXPECT_EQ(c.reused.load(), reused + 1) << "end read mid's value instead of computing erf again";
  // A cheap intermediate of one leaf is computed again: reading it would cost a read more.
  const auto cheap = fx * 3.0;
  const auto after = (cheap + 1.0).exp();
  (void)cheap.into_data();
  EXPECT_TRUE(test::all_close(after.into_data(), (x * 3.0 + 1.0).exp().into_data(), 1e-5, 1e-6));
  EXPECT_EQ(c.reused.load(), reused + 1);
}

TYPED_TEST(FusionChains, AnOpThatDoesNotFuseMaterialisesItsInputs) {
  using B = TypeParam;
  const auto x = random<B, 2>({8, 5}, 7), w = random<B, 2>({5, 3}, 8);
  const auto fx = on_fusion(x), fw = on_fusion(w);
  const std::uint64_t before = launched<B>();
  const auto y = ((fx * 2.0).relu().matmul(fw) + 1.0).sum_dim(1);
  EXPECT_GE(launched<B>(), before + 1) << "relu(2x) ran before the matmul";
  EXPECT_TRUE(test::all_close(y.into_data(), ((x * 2.0).relu().matmul(w) + 1.0).sum_dim(1).into_data(), 1e-5, 1e-6));
  EXPECT_EQ(launched<B>(), before + 2)
      << "relu(2x) before the matmul; + 1 and the sum after it (one row program where B runs them)";
}

TYPED_TEST(FusionChains, ViewsOfAPendingTensorFuseIntoTheirConsumers) {
  using B = TypeParam;
  const auto x = random<B, 2>({6, 8}, 12), y = random<B, 2>({8, 6}, 13), b = random<B, 2>({1, 8}, 16);
  const auto z = random<B, 1>({48}, 14), w = random<B, 2>({6, 5}, 15);
  const auto fx = on_fusion(x), fy = on_fusion(y), fz = on_fusion(z), fw = on_fusion(w), fb = on_fusion(b);
  const auto a = fx * 2.0 + fb;  // pending, with a broadcast leaf
  const auto ea = x * 2.0 + b;
  const std::uint64_t before = launched<B>();
  const auto check = [&](std::string_view name, const auto& fused, const auto& unfused, std::uint64_t kernels) {
    SCOPED_TRACE(name);
    EXPECT_TRUE(Fusion<B>::is_pending(fused.primitive()));
    EXPECT_TRUE(test::all_close(fused.into_data(), unfused.into_data(), 1e-5, 1e-6));
    EXPECT_EQ(launched<B>(), before + kernels);
  };
  check("permute", (a.transpose() + fy).exp(), (ea.transpose() + y).exp(), 1);
  check("reshape", ((fx * 2.0).reshape(std::array<std::int64_t, 1>{48}) * fz).tanh(),
        ((x * 2.0).reshape(std::array<std::int64_t, 1>{48}) * z).tanh(), 2);
  check("slice", a.slice({ops::Slice(1, 4), ops::Slice(0, std::nullopt, 2)}).sigmoid() * 3.0,
        ea.slice({ops::Slice(1, 4), ops::Slice(0, std::nullopt, 2)}).sigmoid() * 3.0, 3);
  check("expand of a view", a.transpose().unsqueeze_dim(0).expand({3, -1, -1}).abs() - 1.0,
        ea.transpose().unsqueeze_dim(0).expand({3, -1, -1}).abs() - 1.0, 4);
  // A matmul reads the view of the materialised source, as without fusion.
  const auto m = a.transpose().matmul(fw.slice({ops::Slice(), ops::Slice(0, 5)}));
  EXPECT_TRUE(test::all_close(m.into_data(), ea.transpose().matmul(w).into_data(), 1e-5, 1e-6));
  EXPECT_EQ(launched<B>(), before + 5) << "a itself, once, for the matmul";
  // A reshape whose leaves do not all have the tensor's shape materialises first.
  EXPECT_TRUE(test::all_close(a.reshape(std::array<std::int64_t, 1>{48}).into_data(),
                              ea.reshape(std::array<std::int64_t, 1>{48}).into_data(), 1e-6, 1e-7));
  EXPECT_KILN_ERROR(a.reshape(std::array<std::int64_t, 1>{47}), "reshape", "[6, 8]", "[47]");
  const std::vector<std::int64_t> twice{0, 0};
  EXPECT_KILN_ERROR(Fusion<B>::permute((fx * 2.0).primitive(), twice), "permute", "[6, 8]");
}

TYPED_TEST(FusionChains, IntegerAndHalfChains) {
  using B = TypeParam;
  const auto i = Tensor<B, 1, Int>::from({-7, 3, 12, 0, 5});
  const auto fi = Tensor<Fusion<B>, 1, Int>::from({-7, 3, 12, 0, 5});
  const std::uint64_t before = launched<B>();
  EXPECT_EQ(((fi * 3 + 2) % 5).into_data().template to_vec<std::int64_t>(),
            ((i * 3 + 2) % 5).into_data().template to_vec<std::int64_t>());
  EXPECT_EQ(launched<B>(), before + 1);
  // An f16 result rounds to 16 bits: it is materialised before another op reads it, so
  // fused and unfused f16 chains agree exactly.
  const auto h = random<B, 1>({300}, 9).cast(DType::f16);
  const auto fh = on_fusion(h);
  EXPECT_TRUE(test::all_close(((fh * 1.7).exp() + fh).into_data(), ((h * 1.7).exp() + h).into_data(), 0, 0));
}

TYPED_TEST(FusionChains, CastsThatChangeNoComputationTypeFuse) {
  using B = TypeParam;
  const auto x = random<B, 1>({300}, 17);
  const auto fx = on_fusion(x);
  std::uint64_t before = launched<B>();
  // An f32 chain stored as f16 or bf16: one program that rounds once, at its output.
  const auto h = (fx * 1.7).exp().cast(DType::f16);
  const auto bh = (fx * 1.7).exp().cast(DType::bf16);
  EXPECT_TRUE(Fusion<B>::is_pending(h.primitive()));
  EXPECT_TRUE(test::all_close(h.into_data(), (x * 1.7).exp().cast(DType::f16).into_data(), 0, 0));
  EXPECT_TRUE(test::all_close(bh.into_data(), (x * 1.7).exp().cast(DType::bf16).into_data(), 0, 0));
  EXPECT_EQ(launched<B>(), before + 2);
  // A mask as numbers of its program's type joins the work around it.
  before = launched<B>();
  const auto m = fx.gt(0.25).to_float() * fx + 1.0;
  EXPECT_TRUE(test::all_close(m.into_data(), (x.gt(0.25).to_float() * x + 1.0).into_data(), 0, 0));
  EXPECT_EQ(launched<B>(), before + 1);
  // A cast that changes the computation type runs on B, on the materialised chain.
  before = launched<B>();
  const auto i = (fx * 10.0).to_int(DType::i32);
  EXPECT_FALSE(Fusion<B>::is_pending(i.primitive()));
  EXPECT_EQ(i.into_data().template to_vec<std::int32_t>(), (x * 10.0).to_int(DType::i32).into_data().template to_vec<std::int32_t>());
  EXPECT_EQ(launched<B>(), before + 1);
}

TYPED_TEST(FusionChains, WideChainsSplitAtTheLeafLimit) {
  using B = TypeParam;
  using F = Fusion<B>;
  std::vector<Tensor<B, 1>> xs;
  for (std::uint64_t k = 0; k < 2 * F::kMaxLeaves + 3; ++k) xs.push_back(random<B, 1>({50}, 10 + k));
  Tensor<B, 1> expected = xs[0];
  Tensor<F, 1> sum = on_fusion(xs[0]);
  for (std::size_t k = 1; k < xs.size(); ++k) {
    expected = expected + xs[k];
    sum = sum + on_fusion(xs[k]);
  }
  const std::uint64_t before = launched<B>();
  EXPECT_TRUE(test::all_close(sum.into_data(), expected.into_data(), 1e-5, 1e-6));
  EXPECT_GE(launched<B>(), before + 1);
  EXPECT_LE(launched<B>() - before, 1u) << "the earlier parts ran while recording, when the leaves ran out";
}

TYPED_TEST(FusionChains, AutodiffOverFusionTrainsWithTheSameGradients) {
  using B = TypeParam;
  using AD = Autodiff<B>;
  using AF = Autodiff<Fusion<B>>;
  const auto x = random<B, 2>({16, 7}, 30), w = random<B, 2>({7, 4}, 31);
  const auto x1 = Tensor<AD, 2>::from_data(x.into_data()), w1 = Tensor<AD, 2>::from_data(w.into_data()).require_grad();
  const auto x2 = Tensor<AF, 2>::from_data(x.into_data()), w2 = Tensor<AF, 2>::from_data(w.into_data()).require_grad();
  const auto l1 = ((x1.matmul(w1) * 0.5).tanh().square() + x1.sum_dim(1) * 0.1).mean();
  const auto l2 = ((x2.matmul(w2) * 0.5).tanh().square() + x2.sum_dim(1) * 0.1).mean();
  const auto g1 = l1.backward();
  const auto g2 = l2.backward();
  EXPECT_TRUE(test::all_close(l2.into_data(), l1.into_data(), 1e-6, 1e-7));
  EXPECT_TRUE(test::all_close(w2.grad(g2)->into_data(), w1.grad(g1)->into_data(), 1e-5, 1e-6));
}

TYPED_TEST(FusionChains, TwoThreadsRecordAndReadAtOnce) {
  using B = TypeParam;
  const auto x = random<B, 1>({4096}, 40);
  const auto fx = on_fusion(x);
  const auto shared = (fx * 0.25).exp();  // pending, read by both threads' chains
  std::vector<TensorData> got(2);
  std::vector<std::thread> threads;
  for (int t = 0; t < 2; ++t)
    threads.emplace_back([&, t] {
      auto y = shared + static_cast<double>(t);
      for (int k = 0; k < 20; ++k) y = (y * 0.9).sin() + shared;
      got[static_cast<std::size_t>(t)] = y.into_data();
    });
  for (auto& th : threads) th.join();
  const auto s = (x * 0.25).exp();
  for (int t = 0; t < 2; ++t) {
    auto y = s + static_cast<double>(t);
    for (int k = 0; k < 20; ++k) y = (y * 0.9).sin() + s;
    EXPECT_TRUE(test::all_close(got[static_cast<std::size_t>(t)], y.into_data(), 1e-5, 1e-6)) << "thread " << t;
  }
}

TYPED_TEST(FusionChains, BadInputFailsAtTheCallNamingTheShapes) {
  using B = TypeParam;
  const auto a = on_fusion(random<B, 1>({4}, 50)), b = on_fusion(random<B, 1>({5}, 51));
  EXPECT_KILN_ERROR((a * 2.0 + b), "[4]", "[5]");
}

TYPED_TEST(FusionChains, ANewSizeOrScalarFindsTheProgramByItsStructure) {
  using B = TypeParam;
  auto& c = Fusion<B>::counters();
  auto chain = [](const auto& x, double scale) { return ((x * scale).sigmoid() + x).abs(); };
  // A structure no other test launches: its first launch is new, whatever ran before.
  const auto first = chain(on_fusion(random<B, 2>({3, 5}, 20)), 0.25).erf();
  const std::uint64_t compiled = c.compiled.load(), cached = c.cached.load(), written = c.written.load();
  (void)first.into_data();
  EXPECT_EQ(c.compiled.load(), compiled + 1) << "a structure launched for the first time";
  EXPECT_EQ(c.written.load(), written + 1) << "one output buffer";
  const auto x = random<B, 2>({70, 9}, 21);
  const auto again = chain(on_fusion(x), -1.75).erf();  // another batch size and scalar
  EXPECT_TRUE(test::all_close(again.into_data(), chain(x, -1.75).erf().into_data(), 1e-5, 1e-6));
  EXPECT_EQ(c.compiled.load(), compiled + 1) << "the same structure is not new";
  EXPECT_EQ(c.cached.load(), cached + 1);
  EXPECT_EQ(c.written.load(), written + 2);
}

// ---------------------------------------------------------------- the CPU's plans
// Cpu::elementwise runs a catalogue formula found in a program as one compiled step.

TEST(CpuProgramPlans, CatalogueFormulasRunAsOneCompiledStep) {
  using codegen::Expr;
  const Expr x = Expr::input(0);
  const Expr root = ops::GeluErf::apply(Expr(x * Expr::param(0) + 1.0)) + ops::Sigmoid::apply(x);
  const codegen::Program program(codegen::ScalarType::f32, {DType::f32}, 1, {{root.node(), DType::f32}});
  // gelu over x * p0 + 1 is one step (the affine argument stays in registers); the final add
  // is not taken for a mul_add, which would split gelu's formula.
  EXPECT_EQ(Cpu::program_steps(program), (std::vector<std::string>{"input", "mul_add_gelu", "sigmoid", "add"}));
  const Expr scaled = x * Expr::param(0) + x;
  const codegen::Program affine(codegen::ScalarType::f32, {DType::f32}, 1,
                                {{(scaled.exp() * scaled).node(), DType::f32}});
  EXPECT_EQ(Cpu::program_steps(affine), (std::vector<std::string>{"input", "mul_add", "mul_add_exp", "mul"}))
      << "an affine value that another step reads too is computed for it as well (two ops in registers)";
  // A gradient formula, as Autodiff's backward records it: one step over its three inputs.
  const codegen::Program grad = codegen::unary_grad_program<ops::GeluTanh>(DType::f64);
  EXPECT_EQ(Cpu::program_steps(grad), (std::vector<std::string>{"input", "input", "gelu_tanh_backward"}));
  EXPECT_KILN_ERROR(Cpu::program_steps(codegen::unary_program<ops::Neg>(DType::i32)), "program_steps", "i32");
}

TEST(CpuProgramPlans, EveryFormulaInAChainHasTheValuesOfTheUnfusedOps) {
  const auto x = random<Cpu, 2>({19, 67}, 60) * 3.0;
  const auto fx = on_fusion(x);
  const auto check = [&](std::string_view name, const auto& fused, const auto& unfused) {
    SCOPED_TRACE(name);
    EXPECT_TRUE(test::all_close(fused.into_data(), unfused.into_data(), 1e-6, 1e-7));
  };
  const auto shift = [](const auto& t) { return t * 0.5 + 0.25; };
  check("sigmoid", shift(fx).sigmoid() * 2.0, shift(x).sigmoid() * 2.0);
  check("silu", shift(fx).silu() * 2.0, shift(x).silu() * 2.0);
  check("softplus", shift(fx).softplus() * 2.0, shift(x).softplus() * 2.0);
  check("gelu", shift(fx).gelu() * 2.0, shift(x).gelu() * 2.0);
  check("gelu_tanh", shift(fx).gelu(true) * 2.0, shift(x).gelu(true) * 2.0);
  check("relu", shift(fx).relu() * 2.0, shift(x).relu() * 2.0);
  check("hard_sigmoid", shift(fx).hard_sigmoid() * 2.0, shift(x).hard_sigmoid() * 2.0);
  check("rsqrt", (fx.abs() + 0.5).rsqrt() * 2.0, (x.abs() + 0.5).rsqrt() * 2.0);
  check("exp of an affine value", shift(fx).exp() - fx, shift(x).exp() - x);
  check("an affine value", shift(fx) * fx, shift(x) * x);
  // Steps inside sigmoid's formula that another branch reads are computed for it as well.
  check("shared steps", fx.sigmoid() + (-fx).exp(), x.sigmoid() + (-x).exp());
}

TEST(CpuProgramPlans, TwoArithmeticStepsInARowRunAsOneStep) {
  using codegen::Expr;
  const Expr x = Expr::input(0), y = Expr::input(1);
  const auto steps = [](const Expr& root) {
    const codegen::Program program(codegen::ScalarType::f32, {DType::f32, DType::f32}, 1, {{root.node(), DType::f32}});
    return Cpu::program_steps(program);
  };
  using Steps = std::vector<std::string>;
  EXPECT_EQ(steps(x * y * x), (Steps{"input", "input", "mul_mul"}));
  EXPECT_EQ(steps(x - x * y), (Steps{"input", "input", "mul_sub_right"}));
  EXPECT_EQ(steps((x + y) * Expr::param(0)), (Steps{"input", "input", "add_mul"}));
  EXPECT_EQ(steps(x * y + x), (Steps{"input", "input", "mul_add"})) << "the catalogue's own name for it";
  EXPECT_EQ(steps(x / y * x), (Steps{"input", "input", "div", "mul"})) << "a division stays a step of its own";
  EXPECT_EQ(steps((x - y).exp()), (Steps{"input", "input", "sub_exp"}));
}

TEST(CpuProgramPlans, ChainsOfTwoArithmeticStepsHaveTheValuesOfTheUnfusedOps) {
  // 67 columns: whole registers and a partial one on every ISA level.
  const auto op = [](int k, const auto& a, const auto& b) { return k == 0 ? a + b : k == 1 ? a - b : a * b; };
  for (const DType dtype : {DType::f32, DType::f64}) {
    const auto x = random<Cpu, 2>({19, 67}, 62).cast(dtype), y = random<Cpu, 2>({19, 67}, 63).cast(dtype);
    const auto z = random<Cpu, 2>({1, 67}, 64).cast(dtype);
    const auto fx = on_fusion(x), fy = on_fusion(y), fz = on_fusion(z);
    for (int inner = 0; inner < 3; ++inner)
      for (int outer = 0; outer < 3; ++outer) {
        SCOPED_TRACE(fmt::format("{} inner {} outer {}", dtype_name(dtype), inner, outer));
        EXPECT_TRUE(test::all_close(op(outer, op(inner, fx, fy), fz).into_data(),
                                    op(outer, op(inner, x, y), z).into_data(), 1e-6, 1e-7));
        EXPECT_TRUE(test::all_close(op(outer, fz, op(inner, fx, fy)).into_data(),
                                    op(outer, z, op(inner, x, y)).into_data(), 1e-6, 1e-7));
      }
    EXPECT_TRUE(test::all_close((fx - fz).exp().into_data(), (x - z).exp().into_data(), 1e-6, 1e-7));
  }
}

// ---------------------------------------------------------------- row programs
// B::row_program runs programs with reductions along rows (the CPU row by row on its
// threads, Vulkan a workgroup per row); Fusion<B> records softmax, layer norm and sums over
// the last dim into them.

template <class B> class BackendRowPrograms : public ::kiln::test::BackendTest<B> {};
TYPED_TEST_SUITE(BackendRowPrograms, ::kiln::test::HardwareBackends, ::kiln::test::BackendNames);
template <class B> class FusionRows : public ::kiln::test::BackendTest<B> {};
TYPED_TEST_SUITE(FusionRows, ::kiln::test::HardwareBackends, ::kiln::test::BackendNames);

namespace {

// Softmax along the rows, exp(x - max) / sum, with the sum as a per-row output.
codegen::Program softmax_rows(DType dtype) {
  using namespace codegen;
  const NodePtr x = make_input(0);
  const NodePtr e = make_node(Kind::exp, {make_node(Kind::sub, {x, make_node(Kind::row_max, {x})})});
  const NodePtr sum = make_node(Kind::row_sum, {e});
  return Program(scalar_type_of(dtype), {dtype}, 0, {{make_node(Kind::div, {e, sum}), dtype}, {sum, dtype, true}});
}

}  // namespace

TYPED_TEST(BackendRowPrograms, SoftmaxWithItsSumPerRowOverRowsOfAnyLength) {
  using B = TypeParam;
  // Rows shorter than a chunk (and than a Vulkan workgroup), of one CPU chunk (1024), of
  // several and a partial one (2500), past the CPU's fold of partial sums into double
  // (20000: two folds of 8192 and a rest), of one element, and no rows at all.
  for (const auto& [rows, cols] : std::vector<std::pair<std::int64_t, std::int64_t>>{
           {37, 301}, {5, 1024}, {3, 2500}, {2, 20000}, {3, 7}, {4, 1}, {0, 6}}) {
    SCOPED_TRACE(fmt::format("[{}, {}]", rows, cols));
    for (const DType dtype : {DType::f32, DType::f64}) {
      const auto x = (random<B, 2>({rows, cols}, 70) * 4.0).cast(dtype);
      const auto out = B::row_program(softmax_rows(dtype), std::vector{x.primitive()}, {}, Shape{rows, cols});
      ASSERT_EQ(out.size(), 2u);
      EXPECT_EQ(B::shape(out[0]), (Shape{rows, cols}));
      EXPECT_EQ(B::shape(out[1]), (Shape{rows, 1}));
      EXPECT_TRUE(test::all_close(Tensor<B, 2>(out[0]).into_data(), x.softmax(1).into_data(), 1e-5, 1e-7));
      EXPECT_TRUE(test::all_close(Tensor<B, 2>(out[1]).into_data(), (x - x.max_dim(1)).exp().sum_dim(1).into_data(),
                                  1e-5, 1e-6));
    }
  }
}

// Outputs of 20 and 24 MB, which the CPU writes with streaming stores where they are larger
// than half its last-level cache (the 32 MB of the CI's machines): rows that start on a
// register boundary ([3000, 2048]) and rows that mostly do not ([5000, 1002], a row every 16
// aligned), each row's values against softmax.
TYPED_TEST(BackendRowPrograms, OutputsPastTheCacheWithAlignedAndUnalignedRows) {
  using B = TypeParam;
  for (const auto& [rows, cols] : std::vector<std::pair<std::int64_t, std::int64_t>>{{3000, 2048}, {5000, 1002}}) {
    SCOPED_TRACE(fmt::format("[{}, {}]", rows, cols));
    const auto x = random<B, 2>({rows, cols}, 74) * 4.0;
    const auto out = B::row_program(softmax_rows(DType::f32), std::vector{x.primitive()}, {}, Shape{rows, cols});
    EXPECT_TRUE(test::all_close(Tensor<B, 2>(out[0]).into_data(), x.softmax(1).into_data(), 1e-5, 1e-7));
    EXPECT_TRUE(test::all_close(Tensor<B, 2>(out[1]).into_data(), (x - x.max_dim(1)).exp().sum_dim(1).into_data(),
                                1e-5, 1e-6));
  }
}

TYPED_TEST(BackendRowPrograms, NestedReductionsUniformInputsAndNaN) {
  using B = TypeParam;
  using namespace codegen;
  // Layer norm with a per-row scale s ([rows, 1], read once per row) and a per-column
  // weight w ([cols]): (x - mean) * rsqrt(mean((x - mean)^2) + p1) * s * w, mean = sum * p0.
  const NodePtr x = make_input(0), s = make_input(1), w = make_input(2);
  const NodePtr mean = make_node(Kind::mul, {make_node(Kind::row_sum, {x}), make_param(0)});
  const NodePtr c = make_node(Kind::sub, {x, mean});
  const NodePtr var = make_node(Kind::mul, {make_node(Kind::row_sum, {make_node(Kind::mul, {c, c})}), make_param(0)});
  const NodePtr rstd = make_node(Kind::div, {make_constant(1.0), make_node(Kind::sqrt, {make_node(Kind::add, {var, make_param(1)})})});
  const NodePtr y = make_node(Kind::mul, {make_node(Kind::mul, {make_node(Kind::mul, {c, rstd}), s}), w});
  const Program program(ScalarType::f32, {DType::f32, DType::f32, DType::f32}, 2,
                        {{y, DType::f32}, {make_node(Kind::row_min, {c}), DType::f32, true},
                         {make_node(Kind::mul, {rstd, s}), DType::f32, true}});
  auto xt = random<B, 2>({9, 300}, 71) * 2.0 + 1.0;
  const auto st = random<B, 2>({9, 1}, 72);
  const auto wt = random<B, 1>({300}, 73);
  const auto out = B::row_program(program, std::vector{xt.primitive(), st.primitive(), wt.primitive()},
                                    std::vector{1.0 / 300, 1e-5}, Shape{9, 300});
  const auto ct = xt - xt.mean_dim(1);
  const auto rt = ((ct * ct).mean_dim(1) + 1e-5).rsqrt();
  EXPECT_TRUE(test::all_close(Tensor<B, 2>(out[0]).into_data(), (ct * rt * st * wt.unsqueeze_dim(0)).into_data(), 1e-4, 1e-5));
  EXPECT_TRUE(test::all_close(Tensor<B, 2>(out[1]).into_data(), ct.min_dim(1).into_data(), 1e-5, 1e-6));
  EXPECT_TRUE(test::all_close(Tensor<B, 2>(out[2]).into_data(), (rt * st).into_data(), 1e-4, 1e-6));
  // A NaN anywhere in a row (in a whole chunk, or in the row's partial last chunk: 2100 is
  // 2 * 1024 + 52 on the CPU) makes its max NaN, and only that row's.
  std::vector<float> values(3 * 2100, 1.0f);
  values[2100 + 1417] = std::numeric_limits<float>::quiet_NaN();
  values[4200 + 2090] = std::numeric_limits<float>::quiet_NaN();
  values[5] = 3.0f;
  const auto nan = Tensor<B, 2>::from_data(TensorData::from(values, Shape{3, 2100}));
  const NodePtr in = make_input(0);
  const Program max(ScalarType::f32, {DType::f32}, 0, {{make_node(Kind::row_max, {in}), DType::f32, true}});
  const auto m = Tensor<B, 2>(B::row_program(max, std::vector{nan.primitive()}, {}, Shape{3, 2100})[0]).into_data().template to_vec<float>();
  EXPECT_EQ(m[0], 3.0f);
  EXPECT_TRUE(std::isnan(m[1]));
  EXPECT_TRUE(std::isnan(m[2]));
}

TYPED_TEST(BackendRowPrograms, SumsOfSumsDifferencesAndProducts) {
  using B = TypeParam;
  using namespace codegen;
  // Per row: sum(x * w), sum(x - s) and sum(x + x), each step read by its sum alone (the CPU
  // accumulates those from the operands, the step never stored), and sum(x * w) again beside
  // x * w as an output (a step that the sum shares with the output).
  const NodePtr x = make_input(0), w = make_input(1), s = make_input(2);
  const NodePtr xw = make_node(Kind::mul, {x, w});
  for (const auto& [rows, cols] :
       std::vector<std::pair<std::int64_t, std::int64_t>>{{37, 301}, {5, 1024}, {3, 2500}, {2, 20000}, {3, 7}}) {
    SCOPED_TRACE(fmt::format("[{}, {}]", rows, cols));
    for (const DType dtype : {DType::f32, DType::f64}) {
      const ScalarType type = scalar_type_of(dtype);
      const Program alone(type, {dtype, dtype, dtype}, 0,
                          {{make_node(Kind::row_sum, {xw}), dtype, true},
                           {make_node(Kind::row_sum, {make_node(Kind::sub, {x, s})}), dtype, true},
                           {make_node(Kind::row_sum, {make_node(Kind::add, {x, x})}), dtype, true}});
      const Program shared(type, {dtype, dtype}, 0, {{make_node(Kind::row_sum, {xw}), dtype, true}, {xw, dtype}});
      const auto xt = (random<B, 2>({rows, cols}, 78) + 0.5).cast(dtype);
      const auto wt = random<B, 1>({cols}, 79).cast(dtype);
      const auto st = random<B, 2>({rows, 1}, 80).cast(dtype);
      const auto out = B::row_program(alone, std::vector{xt.primitive(), wt.primitive(), st.primitive()}, {}, Shape{rows, cols});
      const auto products = xt * wt.unsqueeze_dim(0);
      const double tol = static_cast<double>(cols) * 1e-6;
      EXPECT_TRUE(test::all_close(Tensor<B, 2>(out[0]).into_data(), products.sum_dim(1).into_data(), 1e-5, tol));
      EXPECT_TRUE(test::all_close(Tensor<B, 2>(out[1]).into_data(), (xt - st).sum_dim(1).into_data(), 1e-5, tol));
      EXPECT_TRUE(test::all_close(Tensor<B, 2>(out[2]).into_data(), (xt + xt).sum_dim(1).into_data(), 1e-5, tol));
      const auto both = B::row_program(shared, std::vector{xt.primitive(), wt.primitive()}, {}, Shape{rows, cols});
      EXPECT_TRUE(test::all_close(Tensor<B, 2>(both[0]).into_data(), products.sum_dim(1).into_data(), 1e-5, tol));
      EXPECT_TRUE(test::all_close(Tensor<B, 2>(both[1]).into_data(), products.into_data(), 1e-6, 1e-7));
    }
  }
  // Over a 3-D domain: a contiguous x and the every-other-row view of one (rows one stride
  // apart), and the first half of the middle dim (rows 40 apart within a block, 240 across).
  const Program squares(ScalarType::f32, {DType::f32}, 0,
                        {{make_node(Kind::row_sum, {make_node(Kind::mul, {x, x})}), DType::f32, true}});
  const auto x3 = random<B, 3>({2, 6, 40}, 81);
  const auto every_other = x3.slice({ops::Slice(), ops::Slice(0, std::nullopt, 2), ops::Slice()});
  const auto first_half = x3.slice({ops::Slice(), ops::Slice(0, 3), ops::Slice()});
  for (const auto& t : {x3, every_other, first_half}) {
    const Shape domain = t.shape();
    const auto out = B::row_program(squares, std::vector{t.primitive()}, {}, domain);
    EXPECT_TRUE(test::all_close(Tensor<B, 3>(out[0]).into_data(), (t * t).sum_dim(2).into_data(), 1e-5, 1e-5));
  }
}

TEST(CpuRowPlans, ProductsThatOnlyASumReadsAreNeverStored) {
  using namespace codegen;
  // RMS norm, x * rsqrt(sum(x * x) * p0 + eps) * w: the sum accumulates x * x from x (read
  // once a register), the rsqrt is computed once per row, and x * r * w is one step.
  const NodePtr x = make_input(0), w = make_input(1);
  const NodePtr mean = make_node(Kind::mul, {make_node(Kind::row_sum, {make_node(Kind::mul, {x, x})}), make_param(0)});
  const NodePtr r = make_node(Kind::div, {make_constant(1.0), make_node(Kind::sqrt, {make_node(Kind::add, {mean, make_constant(1e-6)})})});
  const Program rms(ScalarType::f32, {DType::f32, DType::f32}, 1, {{make_node(Kind::mul, {make_node(Kind::mul, {x, r}), w}), DType::f32}});
  EXPECT_EQ(Cpu::program_steps(rms), (std::vector<std::string>{"pass 0", "input", "row_sum(mul)", "pass 1",
                                                                "per row: mul_add_rsqrt", "input", "input", "mul_mul"}));
  // Softmax: the max reads x; exp(x - max) is one step, kept for the last pass and summed.
  const Program softmax = softmax_rows(DType::f32);
  EXPECT_EQ(Cpu::program_steps(softmax), (std::vector<std::string>{"pass 0", "input", "row_max", "pass 1", "input",
                                                                    "sub_exp", "row_sum", "pass 2", "div"}));
}

TYPED_TEST(BackendRowPrograms, InputsBroadcastAndViewedOverAThreeDimDomain) {
  using B = TypeParam;
  using namespace codegen;
  // Domain [4, 3, 50]: x read through a permute (strided), s one value per middle index
  // ([3, 1]), w varying along the row and the first dim ([4, 1, 50]).
  const auto x = random<B, 3>({4, 50, 3}, 75).permute({0, 2, 1});
  const auto s = random<B, 2>({3, 1}, 76), w = random<B, 3>({4, 1, 50}, 77);
  const NodePtr xi = make_input(0), si = make_input(1), wi = make_input(2);
  const NodePtr y = make_node(Kind::mul, {make_node(Kind::sub, {xi, make_node(Kind::row_max, {make_node(Kind::mul, {xi, si})})}), wi});
  const NodePtr per_row = make_node(Kind::mul, {make_node(Kind::row_sum, {make_node(Kind::mul, {xi, wi})}), si});
  const Program program(ScalarType::f32, {DType::f32, DType::f32, DType::f32}, 0,
                        {{y, DType::f32}, {per_row, DType::f32, true}});
  const auto out = B::row_program(program, std::vector{x.primitive(), s.primitive(), w.primitive()}, {}, Shape{4, 3, 50});
  const auto s3 = s.unsqueeze_dim(0);  // [1, 3, 1], for the tensor ops
  EXPECT_TRUE(test::all_close(Tensor<B, 3>(out[0]).into_data(), ((x - (x * s3).max_dim(2)) * w).into_data(), 1e-5, 1e-6));
  EXPECT_TRUE(test::all_close(Tensor<B, 3>(out[1]).into_data(), ((x * w).sum_dim(2) * s3).into_data(), 1e-4, 1e-5));
}

TYPED_TEST(BackendRowPrograms, BadCallsFailNamingTheProgram) {
  using B = TypeParam;
  using namespace codegen;
  const auto x = random<B, 2>({4, 6}, 74);
  const Program program = softmax_rows(DType::f32);
  EXPECT_KILN_ERROR(B::elementwise(program, std::vector{x.primitive()}, {}), "elementwise", "row_program");
  EXPECT_KILN_ERROR(B::row_program(program, std::vector{x.primitive()}, {}, Shape{4, 7}), "row_program", "[4, 6]",
                    "[4, 7]");
  EXPECT_KILN_ERROR(B::row_program(program, std::vector{x.primitive()}, {}, Shape{4, 0}), "row_program", "[4, 0]");
  // A per-row output must not vary along the row.
  const NodePtr in = make_input(0);
  const Program varying(ScalarType::f32, {DType::f32}, 0,
                        {{make_node(Kind::add, {in, make_node(Kind::row_sum, {in})}), DType::f32, true}});
  EXPECT_KILN_ERROR(B::row_program(varying, std::vector{x.primitive()}, {}, Shape{4, 6}), "row_program",
                    "varies along the row");
  // More inputs than one kernel of B takes: B::max_program_inputs for elementwise programs;
  // row programs up to 64 on the CPU (their inputs are read row by row, not as a walk's
  // operands), as many as bind on Vulkan.
  auto wide = [&](std::size_t n, NodePtr root) {
    for (std::size_t k = 1; k < n; ++k) root = make_node(Kind::add, {root, make_input(static_cast<int>(k))});
    return Program(ScalarType::f32, std::vector<DType>(n, DType::f32), 0, {{root, DType::f32}});
  };
  const std::size_t n = B::max_program_inputs + 1;
  EXPECT_KILN_ERROR(B::elementwise(wide(n, make_input(0)), std::vector<typename B::Primitive>(n, x.primitive()), {}),
                    "elementwise", "inputs");
  EXPECT_KILN_ERROR(B::row_program(wide(65, make_node(Kind::row_sum, {make_input(0)})),
                                   std::vector<typename B::Primitive>(65, x.primitive()), {}, Shape{4, 6}),
                    "row_program", "inputs");
  EXPECT_KILN_ERROR(Program(ScalarType::f32, {DType::f32}, 0, {{in, DType::f32, true}}), "per-row");
  EXPECT_KILN_ERROR(Program(ScalarType::i32, {DType::i32}, 0, {{make_node(Kind::row_sum, {in}), DType::i32}}),
                    "row_sum", "i32");
}

TYPED_TEST(FusionRows, SoftmaxLayerNormAndRmsNormAreOneKernelEach) {
  using B = TypeParam;
  const auto x = random<B, 2>({64, 300}, 80) * 3.0;
  const auto w = random<B, 2>({1, 300}, 81), b = random<B, 2>({1, 300}, 82);
  const auto fx = on_fusion(x), fw = on_fusion(w), fb = on_fusion(b);
  // Softmax and layer norm as the tensor API composes them where a backend has no
  // hand-fused kernels (Fusion<B> calls the CPU's, which are faster: docs/fusion.md).
  const auto softmax = [](const auto& t) {
    const auto e = (t - t.max_dim(1)).exp();
    return e / e.sum_dim(1);
  };
  const auto layer_norm = [&](const auto& t, const auto& weight, const auto& bias) {
    const auto centered = t - t.mean_dim(1);
    return centered * ((centered * centered).mean_dim(1) + 1e-5).rsqrt() * weight + bias;
  };
  std::uint64_t before = launched<B>();
  const auto y = softmax(fx * 0.5);
  EXPECT_TRUE(Fusion<B>::is_pending(y.primitive()));
  EXPECT_TRUE(test::all_close(y.into_data(), (x * 0.5).softmax(1).into_data(), 1e-5, 1e-7));
  EXPECT_EQ(launched<B>(), before + 1) << "softmax with the work before it is one kernel";
  before = launched<B>();
  const auto z = layer_norm((fx * 0.5).gelu(), fw, fb).relu();
  EXPECT_TRUE(test::all_close(z.into_data(), layer_norm((x * 0.5).gelu(), w, b).relu().into_data(), 1e-4, 1e-5));
  EXPECT_EQ(launched<B>(), before + 1) << "gelu, layer norm, its affine part and relu are one kernel";
  // nn::RmsNorm (no hand-fused kernel) is one kernel as it is.
  nn::RmsNorm<B, 1> norm({300});
  norm.weight.replace(random<B, 1>({300}, 83));
  nn::RmsNorm<Fusion<B>, 1> fnorm({300});
  fnorm.weight.replace(on_fusion(*norm.weight));
  before = launched<B>();
  EXPECT_TRUE(test::all_close(fnorm.forward(fx).into_data(), norm.forward(x).into_data(), 1e-5, 1e-6));
  EXPECT_EQ(launched<B>(), before + 1) << "RMS norm is one kernel";
  // The hand-fused kernels give the same values on Fusion<B>.
  EXPECT_TRUE(test::all_close(fx.log_softmax(-1).into_data(), x.log_softmax(-1).into_data(), 1e-5, 1e-6));
}

TYPED_TEST(FusionRows, SumsOverTheLastDimFuseAndOthersRunOnTheBackend) {
  using B = TypeParam;
  const auto x = random<B, 3>({6, 5, 40}, 83), t = random<B, 3>({6, 5, 40}, 84);
  const auto fx = on_fusion(x), ft = on_fusion(t);
  std::uint64_t before = launched<B>();
  // A cross-entropy shape: -(log_softmax(x) * t).sum over the last dim, then a mean per row.
  const auto loss = (fx.log_softmax(2) * ft).sum_dim(2).neg() * 0.5;
  EXPECT_TRUE(test::all_close(loss.into_data(), ((x.log_softmax(2) * t).sum_dim(2).neg() * 0.5).into_data(), 1e-5, 1e-6));
  EXPECT_EQ(launched<B>(), before + 1) << "nested reductions along the same rows are one kernel";
  before = launched<B>();
  const auto mse = ((fx - ft).square().mean_dim(2) + (fx * 2.0).max_dim(2) - fx.min_dim(2)).sqrt();
  EXPECT_TRUE(test::all_close(mse.into_data(),
                              ((x - t).square().mean_dim(2) + (x * 2.0).max_dim(2) - x.min_dim(2)).sqrt().into_data(),
                              1e-5, 1e-6));
  EXPECT_EQ(launched<B>(), before + 1);
  // Over another dim, the work before the sum is one program and B's reduction runs on it.
  before = launched<B>();
  EXPECT_TRUE(test::all_close((fx * ft).sum_dim(1).into_data(), (x * t).sum_dim(1).into_data(), 1e-5, 1e-6));
  EXPECT_EQ(launched<B>(), before + 1);
  // A row result read with another shape is materialised first, then read as a leaf.
  before = launched<B>();
  const auto rows = fx.sum_dim(2);  // [6, 5, 1]
  const auto cross = rows + fx.sum_dim(2).reshape(std::array<std::int64_t, 3>{6, 1, 5});  // [6, 5, 5]
  EXPECT_TRUE(test::all_close(cross.into_data(),
                              (x.sum_dim(2) + x.sum_dim(2).reshape(std::array<std::int64_t, 3>{6, 1, 5})).into_data(),
                              1e-5, 1e-6));
  EXPECT_EQ(launched<B>(), before + 3);
}

TYPED_TEST(FusionRows, RowResultsThatOthersReadAreWrittenBesideTheOutput) {
  using B = TypeParam;
  auto& c = Fusion<B>::counters();
  const auto x = random<B, 2>({32, 50}, 87);
  const auto fx = on_fusion(x);
  const auto mean = fx.mean_dim(1);              // [32, 1]
  const auto shifted = (fx - mean).exp();        // [32, 50]
  const auto total = shifted.sum_dim(1);         // materialised first
  const auto later = shifted * 2.0 + mean;       // still reads both
  const std::uint64_t before = launched<B>(), written = c.written.load(), reused = c.reused.load();
  const auto e = (x - x.mean_dim(1)).exp();
  EXPECT_TRUE(test::all_close(total.into_data(), e.sum_dim(1).into_data(), 1e-5, 1e-6));
  EXPECT_EQ(launched<B>(), before + 1);
  EXPECT_EQ(c.written.load(), written + 3) << "the sum, and beside it the mean (per row) and exp(x - mean)";
  EXPECT_FALSE(Fusion<B>::is_pending(mean.primitive()));
  EXPECT_FALSE(Fusion<B>::is_pending(shifted.primitive()));
  EXPECT_TRUE(test::all_close(mean.into_data(), x.mean_dim(1).into_data(), 1e-5, 1e-6));
  EXPECT_TRUE(test::all_close(later.into_data(), (e * 2.0 + x.mean_dim(1)).into_data(), 1e-5, 1e-6));
  EXPECT_EQ(launched<B>(), before + 2) << "later: one elementwise program over the two written values";
  EXPECT_EQ(c.reused.load(), reused + 2);
}

TYPED_TEST(FusionRows, ANewBatchSizeFindsTheRowProgram) {
  using B = TypeParam;
  auto& c = Fusion<B>::counters();
  auto program = [](const auto& x) { return (x.softmax(1) * x).sum_dim(1).tanh(); };
  const auto first = program(on_fusion(random<B, 2>({3, 17}, 85)));
  const std::uint64_t compiled = c.compiled.load(), cached = c.cached.load();
  (void)first.into_data();
  EXPECT_EQ(c.compiled.load(), compiled + 1);
  const auto x = random<B, 2>({50, 17}, 86);
  EXPECT_TRUE(test::all_close(program(on_fusion(x)).into_data(), program(x).into_data(), 1e-5, 1e-6));
  EXPECT_EQ(c.compiled.load(), compiled + 1) << "the same structure over more rows";
  EXPECT_EQ(c.cached.load(), cached + 1);
}

TYPED_TEST(FusionRows, AutodiffOverFusionSoftmaxAndLayerNormGradients) {
  using B = TypeParam;
  using AD = Autodiff<B>;
  using AF = Autodiff<Fusion<B>>;
  const auto x = random<B, 2>({12, 40}, 90), t = random<B, 2>({12, 40}, 91);
  auto loss = [&]<class B>(const Tensor<B, 2>& xi, const Tensor<B, 2>& ti) {
    nn::LayerNorm<B, 1> norm({40});
    return ((norm.forward(xi) * 1.5).softmax(1) * ti).sum_dim(1).log().mean() + (xi.log_softmax(1) * ti).mean();
  };
  const auto x1 = Tensor<AD, 2>::from_data(x.into_data()).require_grad();
  const auto x2 = Tensor<AF, 2>::from_data(x.into_data()).require_grad();
  const auto t1 = Tensor<AD, 2>::from_data(t.abs().into_data());
  const auto t2 = Tensor<AF, 2>::from_data(t.abs().into_data());
  const auto l1 = loss(x1, t1);
  const auto l2 = loss(x2, t2);
  const auto g1 = l1.backward();
  const auto g2 = l2.backward();
  EXPECT_TRUE(test::all_close(l2.into_data(), l1.into_data(), 1e-5, 1e-6));
  EXPECT_TRUE(test::all_close(x2.grad(g2)->into_data(), x1.grad(g1)->into_data(), 1e-4, 1e-6));
}

TYPED_TEST(FusionRows, AffineLayerNormRunsAsTheBackendsOneOpWithEveryGradient) {
  using B = TypeParam;
  using AD = Autodiff<B>;
  using AF = Autodiff<Fusion<B>>;
  const auto x = random<B, 3>({6, 5, 40}, 92) * 2.0 + 0.5, t = random<B, 3>({6, 5, 40}, 93);
  const auto w = random<B, 1>({40}, 94), b = random<B, 1>({40}, 95);
  // Where B has the one-op kernel, Fusion<B> runs it and launches no program of its own;
  // elsewhere the default's affine part runs as a program.
  const std::uint64_t before = launched<B>();
  const auto fy = Tensor<Fusion<B>, 3>(provided::layer_norm_affine<Fusion<B>>(
      on_fusion(x).primitive(), on_fusion(w).primitive(), on_fusion(b).primitive(), 1, 1e-5));
  const TensorData values = fy.into_data();
  if constexpr (provided::detail::HasLayerNormAffine<B>) EXPECT_EQ(launched<B>(), before);
  else EXPECT_GT(launched<B>(), before);
  const auto centered = x - x.mean_dim(2);
  const auto expected = centered * ((centered * centered).mean_dim(2) + 1e-5).rsqrt() *
                            w.reshape(std::array<std::int64_t, 3>{1, 1, 40}) +
                        b.reshape(std::array<std::int64_t, 3>{1, 1, 40});
  EXPECT_TRUE(test::all_close(values, expected.into_data(), 1e-4, 1e-5));
  // nn::LayerNorm under Autodiff<Fusion<B>>: x's, the weight's and the bias's gradients.
  auto run = [&]<class A>() {
    nn::LayerNorm<A, 1> norm({40});
    norm.weight->replace(Tensor<A, 1>::from_data(w.into_data()));
    norm.bias->replace(Tensor<A, 1>::from_data(b.into_data()));
    const auto xa = Tensor<A, 3>::from_data(x.into_data()).require_grad();
    const auto grads = (norm.forward(xa) * Tensor<A, 3>::from_data(t.into_data())).sum().backward();
    return std::array{xa.grad(grads)->into_data(), (*norm.weight)->grad(grads)->into_data(),
                      (*norm.bias)->grad(grads)->into_data()};
  };
  const auto reference = run.template operator()<AD>();
  const auto fused = run.template operator()<AF>();
  for (std::size_t i = 0; i < 3; ++i)
    EXPECT_TRUE(test::all_close(fused[i], reference[i], 1e-4, 1e-5)) << "gradient " << i << " (x, weight, bias)";
}
