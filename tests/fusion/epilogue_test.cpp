// Matmul epilogues: B::matmul_program (MatmulPrograms; the CPU runs chains from the product as
// oneDNN post-ops), and Fusion<B> deferring a product so that the elementwise work after it
// (a bias add, an activation, a residual add) is computed inside the GEMM where B takes it.
// Every value is compared with the same expression on B itself.
#include "backends.hpp"

#include <kiln/nn.hpp>

#include <optional>
#include <string>
#include <tuple>
#include <vector>

using namespace kiln;

namespace {

template <class B, std::size_t D> Tensor<B, D> random(const std::array<std::int64_t, D>& dims, std::uint64_t seed) {
  manual_seed(seed);
  return Tensor<B, D>::random(dims, Distribution::normal(0, 1));
}
template <class B, std::size_t D> Tensor<Fusion<B>, D> on_fusion(const Tensor<B, D>& t) {
  return Tensor<Fusion<B>, D>::from_data(t.into_data());
}

static_assert(MatmulPrograms<Cpu>, "the CPU runs matmul programs");
static_assert(!MatmulPrograms<Fusion<Cpu>> && !MatmulPrograms<Autodiff<Cpu>>);

using codegen::Expr;
using codegen::Program;

// A program over the product (in0) and `extra` more f32 inputs, computing `root`.
Program over_product(const Expr& root, int extra, int params = 0) {
  return Program(codegen::ScalarType::f32, std::vector<DType>(static_cast<std::size_t>(extra) + 1, DType::f32), params,
                 {{root.node(), DType::f32}});
}

// a @ b with `program` as its epilogue, and the same as a matmul and the program apart.
std::pair<std::vector<Cpu::Primitive>, TensorData> both_ways(const Cpu::Primitive& a, const Cpu::Primitive& b,
                                                             const Program& program, std::vector<Cpu::Primitive> inputs,
                                                             std::vector<double> params = {}) {
  auto fused = Cpu::matmul_program(a, b, program, inputs, params);
  inputs.insert(inputs.begin(), Cpu::matmul(a, b));
  return {std::move(fused), Cpu::into_data(Cpu::elementwise(program, inputs, params).at(0))};
}

}  // namespace

TEST(CpuMatmulPrograms, ChainsFromTheProductRunInsideTheGemm) {
  const auto x = random<Cpu, 2>({37, 19}, 1), w = random<Cpu, 2>({23, 19}, 2);  // weight [out, in], as nn::Linear
  const auto bias = random<Cpu, 2>({1, 23}, 3), residual = random<Cpu, 2>({37, 23}, 4);
  const auto a = x.primitive(), b = w.transpose().primitive();  // b read transposed, in place
  const Expr p = Expr::input(0), in1 = Expr::input(1), in2 = Expr::input(2);
  struct Case {
    const char* name;
    Program program;
    std::vector<Cpu::Primitive> inputs;
    std::vector<double> params;
  };
  const std::vector<Case> cases{
      {"bias + relu", over_product(ops::Relu::apply(Expr(p + in1)), 1), {bias.primitive()}, {}},
      {"bias + gelu", over_product(ops::GeluErf::apply(Expr(p + in1)), 1), {bias.primitive()}, {}},
      {"gelu_tanh", over_product(ops::GeluTanh::apply(p), 0), {}, {}},
      {"sigmoid, silu, tanh", over_product(ops::Silu::apply(Expr(ops::Sigmoid::apply(p).tanh())), 0), {}, {}},
      {"bias + residual", over_product(Expr(p + in1) + in2, 2), {bias.primitive(), residual.primitive()}, {}},
      {"residual - scaled product", over_product(in1 - Expr(p * Expr::param(0) + 0.5), 1, 1), {residual.primitive()}, {-0.25}},
      {"a scaling and a shift in a row", over_product(Expr(p * Expr::param(0)) + 0.5, 0, 1), {}, {-0.25}},
      {"neg, abs, exp, product / tensor", over_product(Expr(-p).abs().exp() / in1, 1), {residual.primitive()}, {}},
      {"max with a scalar tensor", over_product(p.max(in1), 1), {Tensor<Cpu, 1>::full({1}, 0.3).primitive()}, {}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    const auto [fused, expected] = both_ways(a, b, c.program, c.inputs, c.params);
    ASSERT_EQ(fused.size(), 1u) << "the CPU takes this chain";
    EXPECT_EQ(Cpu::shape(fused[0]), (Shape{37, 23}));
    EXPECT_TRUE(test::all_close(Cpu::into_data(fused[0]), expected, 1e-5, 1e-5));
  }
  // A batch of matrices times one weight folds into one GEMM: [2, 6, 19] @ [19, 23].
  const auto x3 = random<Cpu, 3>({2, 6, 19}, 5);
  const auto bias3 = random<Cpu, 3>({1, 1, 23}, 6);
  const auto relu = over_product(ops::Relu::apply(Expr(p + in1)), 1);
  const auto [fused, expected] = both_ways(x3.primitive(), w.transpose().template unsqueeze<3>().primitive(), relu,
                                           {bias3.primitive()});
  ASSERT_EQ(fused.size(), 1u);
  EXPECT_EQ(Cpu::shape(fused[0]), (Shape{2, 6, 23}));
  EXPECT_TRUE(test::all_close(Cpu::into_data(fused[0]), expected, 1e-5, 1e-5));
}

TEST(CpuMatmulPrograms, OtherProgramsAreLeftToTheCaller) {
  const auto x = random<Cpu, 2>({8, 5}, 10), w = random<Cpu, 2>({5, 3}, 11), column = random<Cpu, 2>({1, 3}, 12);
  const Expr p = Expr::input(0), in1 = Expr::input(1);
  const auto none = [&](const Program& program, std::vector<Cpu::Primitive> inputs = {}) {
    return Cpu::matmul_program(x.primitive(), w.primitive(), program, inputs, {}).empty();
  };
  EXPECT_TRUE(none(over_product(p * p, 0))) << "the product twice is not a chain";
  EXPECT_TRUE(none(over_product(Expr(p + in1).exp() + in1.exp(), 1), {column.primitive()})) << "work beside the chain";
  EXPECT_TRUE(none(over_product(in1 / p, 1), {column.primitive()})) << "a tensor divided by the product";
  EXPECT_TRUE(none(over_product(p.erf(), 0))) << "a function oneDNN has no step for";
  // oneDNN 2.6 would run both scalings with the first one's factors (matmul_program.cpp).
  EXPECT_TRUE(none(over_product(Expr(Expr(p * 3.0).tanh() * 0.5) + in1, 1), {column.primitive()}))
      << "one kind of step twice with other parameters";
  const auto x64 = x.cast(DType::f64), w64 = w.cast(DType::f64);
  const Program relu64(codegen::ScalarType::f64, {DType::f64}, 0, {{ops::Relu::apply(p).node(), DType::f64}});
  EXPECT_TRUE(Cpu::matmul_program(x64.primitive(), w64.primitive(), relu64, {}, {}).empty()) << "f64";
  // A batch of products that is not one GEMM: [2, 8, 5] @ [2, 5, 3].
  const auto xb = random<Cpu, 3>({2, 8, 5}, 13), wb = random<Cpu, 3>({2, 5, 3}, 14);
  EXPECT_TRUE(Cpu::matmul_program(xb.primitive(), wb.primitive(), over_product(ops::Relu::apply(p), 0), {}, {}).empty());
  EXPECT_KILN_ERROR(Cpu::matmul_program(x.primitive(), w.primitive(), over_product(p + in1, 1), {}, {}),
                    "matmul_program", "2 inputs");
  EXPECT_KILN_ERROR(Cpu::matmul_program(x.primitive(), x.primitive(), over_product(p, 0), {}, {}), "matmul", "[8, 5]");
}

// ---------------------------------------------------------------- Fusion<B>

template <class B> class FusionEpilogues : public ::kiln::test::BackendTest<B> {};
TYPED_TEST_SUITE(FusionEpilogues, ::kiln::test::HardwareBackends, ::kiln::test::BackendNames);

TYPED_TEST(FusionEpilogues, TheBiasAndActivationAfterAMatmulAreItsEpilogue) {
  using B = TypeParam;
  auto& c = Fusion<B>::counters();
  const auto x = random<B, 2>({48, 20}, 20), w = random<B, 2>({30, 20}, 21), bias = random<B, 2>({1, 30}, 22);
  const auto expected = (x.matmul(w.transpose()) + bias).relu().into_data();
  const auto fx = on_fusion(x), fw = on_fusion(w), fb = on_fusion(bias);
  const std::uint64_t launched = c.launched.load(), written = c.written.load(), epilogues = c.epilogues.load();
  const auto y = (fx.matmul(fw.transpose()) + fb).relu();  // the product's handle is gone after this line
  EXPECT_TRUE(Fusion<B>::is_pending(y.primitive()));
  EXPECT_TRUE(test::all_close(y.into_data(), expected, 1e-5, 1e-5));
  if constexpr (MatmulPrograms<B>) {
    EXPECT_EQ(c.epilogues.load(), epilogues + 1) << "relu(x @ w^T + b) is one GEMM with its epilogue";
    EXPECT_EQ(c.launched.load(), launched + 1);
    EXPECT_EQ(c.written.load(), written + 1) << "the product is never written";
  } else {
    EXPECT_EQ(c.epilogues.load(), epilogues) << "B runs no matmul programs: the matmul, then one fused program";
    EXPECT_EQ(c.launched.load(), launched + 1);
  }
}

TYPED_TEST(FusionEpilogues, AProductSomethingElseStillReadsIsComputedOnce) {
  using B = TypeParam;
  auto& c = Fusion<B>::counters();
  const auto x = random<B, 2>({16, 9}, 30), w = random<B, 2>({9, 12}, 31), bias = random<B, 2>({1, 12}, 32);
  const auto px = x.matmul(w);
  const auto fx = on_fusion(x), fw = on_fusion(w), fb = on_fusion(bias);
  const std::uint64_t epilogues = c.epilogues.load();
  // A handle to the product is not counted (a C++ temporary looks the same): the program
  // is its epilogue, and reading the handle later computes the product again.
  const auto product = fx.matmul(fw);
  const auto y = (product + fb).tanh();
  EXPECT_TRUE(test::all_close(y.into_data(), (px + bias).tanh().into_data(), 1e-5, 1e-5));
  EXPECT_EQ(Fusion<B>::is_pending(product.primitive()), MatmulPrograms<B>) << "computed inside the epilogue only";
  EXPECT_TRUE(test::all_close(product.into_data(), px.into_data(), 1e-5, 1e-5));
  const std::uint64_t after_handle = c.epilogues.load();
  EXPECT_EQ(after_handle, epilogues + (MatmulPrograms<B> ? 1 : 0));
  // A product that Autodiff keeps for its backward pass (retained) is computed apart: here
  // the sum that gelu's gradient reads holds it.
  {
    const auto xa = Tensor<Autodiff<Fusion<B>>, 2>::from_data(x.into_data());
    const auto wa = Tensor<Autodiff<Fusion<B>>, 2>::from_data(w.into_data()).require_grad();
    const auto grads = (xa.matmul(wa) + 1.0).gelu().sum().backward();
    const auto expected = Tensor<Autodiff<B>, 2>::from_data(w.into_data()).require_grad();
    const auto g = (Tensor<Autodiff<B>, 2>::from_data(x.into_data()).matmul(expected) + 1.0).gelu().sum().backward();
    EXPECT_TRUE(test::all_close(wa.grad(grads)->into_data(), expected.grad(g)->into_data(), 1e-4, 1e-5));
    EXPECT_EQ(c.epilogues.load(), after_handle) << "gelu's gradient reads x @ w + 1: no epilogue computes it unwritten";
  }
  // Two pending tensors read one product: neither takes it as an epilogue.
  Tensor<Fusion<B>, 2> y1 = fx, y2 = fx;
  {
    const auto p = fx.matmul(fw);
    y1 = p + fb;
    y2 = p * 2.0;
  }
  EXPECT_TRUE(test::all_close(y1.into_data(), (px + bias).into_data(), 1e-5, 1e-5));
  EXPECT_TRUE(test::all_close(y2.into_data(), (px * 2.0).into_data(), 1e-5, 1e-5));
  // A program that is no chain from the product: the matmul, then the program.
  const auto z = (fx.matmul(fw) * fx.matmul(fw).sigmoid()).sum_dim(1);
  EXPECT_TRUE(test::all_close(z.into_data(), (px * px.sigmoid()).sum_dim(1).into_data(), 1e-5, 1e-5));
  EXPECT_EQ(c.epilogues.load(), after_handle);
  // A product read by a non-elementwise op, and a view of a pending tree over a product.
  const auto s = fx.matmul(fw).sum_dim(0);
  EXPECT_TRUE(test::all_close(s.into_data(), px.sum_dim(0).into_data(), 1e-4, 1e-5));
  const auto v = (fx.matmul(fw) + fb).transpose();
  EXPECT_TRUE(test::all_close(v.into_data(), (px + bias).transpose().into_data(), 1e-5, 1e-5));
}

TYPED_TEST(FusionEpilogues, AnMlpTrainsWithTheSameGradientsAndItsLayersFuse) {
  using B = TypeParam;
  using AD = Autodiff<B>;
  using AF = Autodiff<Fusion<B>>;
  auto& c = Fusion<B>::counters();
  const auto x = random<B, 2>({32, 10}, 40);
  const auto w1 = random<B, 2>({10, 16}, 41), b1 = random<B, 2>({1, 16}, 42);
  const auto w2 = random<B, 2>({16, 4}, 43), b2 = random<B, 2>({1, 4}, 44);
  // Two layers, as a user writes them: each handle replaced by the next.
  const auto loss_of = [](const auto& input, const auto& wa, const auto& ba, const auto& wb, const auto& bb) {
    auto h = input.matmul(wa) + ba;
    h = h.relu();
    h = h.matmul(wb) + bb;
    return h.log_softmax(1).mean();
  };
  auto param = [](const auto& t, auto tag) {
    using T = typename decltype(tag)::type;
    return T::from_data(t.into_data()).require_grad();
  };
  using TD = std::type_identity<Tensor<AD, 2>>;
  using TF = std::type_identity<Tensor<AF, 2>>;
  const auto pd = std::vector{param(w1, TD{}), param(b1, TD{}), param(w2, TD{}), param(b2, TD{})};
  const auto pf = std::vector{param(w1, TF{}), param(b1, TF{}), param(w2, TF{}), param(b2, TF{})};
  const std::uint64_t epilogues = c.epilogues.load();
  const auto ld = loss_of(Tensor<AD, 2>::from_data(x.into_data()), pd[0], pd[1], pd[2], pd[3]);
  const auto lf = loss_of(Tensor<AF, 2>::from_data(x.into_data()), pf[0], pf[1], pf[2], pf[3]);
  if constexpr (MatmulPrograms<B>)
    EXPECT_EQ(c.epilogues.load(), epilogues + 2)
        << "relu(x w1 + b1) and h w2 + b2 (relu's gradient keeps only its output, so nothing retains x w1 + b1)";
  const auto gd = ld.backward();
  const auto gf = lf.backward();
  EXPECT_TRUE(test::all_close(lf.into_data(), ld.into_data(), 1e-5, 1e-6));
  for (std::size_t i = 0; i < pd.size(); ++i)
    EXPECT_TRUE(test::all_close(pf[i].grad(gf)->into_data(), pd[i].grad(gd)->into_data(), 1e-4, 1e-5)) << "param " << i;
}

// ---------------------------------------------------------------- convolutions

TEST(CpuConvPrograms, ActivationsAfterAConvolutionRunInsideIt) {
  const auto x = random<Cpu, 4>({2, 3, 9, 8}, 50), w = random<Cpu, 4>({5, 3, 3, 3}, 51);
  const auto bias = random<Cpu, 1>({5}, 52);
  const ops::Conv2dOptions options{.stride = {2, 1}, .padding = {1, 1}};
  const Expr y = Expr::input(0);
  for (const bool with_bias : {false, true}) {
    const std::optional<Cpu::Primitive> b = with_bias ? std::optional(bias.primitive()) : std::nullopt;
    const Cpu::Primitive plain = Cpu::conv2d(x.primitive(), w.primitive(), b, options);
    for (const auto& [name, program, params] :
         std::vector<std::tuple<const char*, Program, std::vector<double>>>{
             {"relu", over_product(ops::Relu::apply(y), 0), {}},
             {"gelu of a scaling", over_product(ops::GeluErf::apply(Expr(y * Expr::param(0) + 0.25)), 0, 1), {1.5}},
             {"silu", over_product(ops::Silu::apply(y), 0), {}}}) {
      SCOPED_TRACE(std::string(name) + (with_bias ? ", with a bias" : ""));
      const auto fused = Cpu::conv2d_program(x.primitive(), w.primitive(), b, options, program, {}, params);
      ASSERT_EQ(fused.size(), 1u) << "the CPU takes this chain";
      const std::vector<Cpu::Primitive> in{plain};
      EXPECT_TRUE(test::all_close(Cpu::into_data(fused[0]), Cpu::into_data(Cpu::elementwise(program, in, params).at(0)),
                                  1e-5, 1e-5));
    }
  }
  // A tensor beside the output is left to the caller (oneDNN's blocked layout), and bad
  // operands fail as conv2d's do.
  const auto other = random<Cpu, 4>({2, 5, 5, 8}, 53);
  EXPECT_TRUE(Cpu::conv2d_program(x.primitive(), w.primitive(), std::nullopt, options,
                                  over_product(y + Expr::input(1), 1), std::vector{other.primitive()}, {})
                  .empty());
  const auto four_channels = random<Cpu, 4>({5, 4, 3, 3}, 54);
  EXPECT_KILN_ERROR(Cpu::conv2d_program(x.primitive(), four_channels.primitive(), std::nullopt, options,
                                        over_product(y, 0), {}, {}),
                    "conv2d", "[5, 4, 3, 3]");
}

TYPED_TEST(FusionEpilogues, TheActivationAfterAConvolutionIsItsEpilogueAndTrains) {
  using B = TypeParam;
  using AD = Autodiff<B>;
  using AF = Autodiff<Fusion<B>>;
  auto& c = Fusion<B>::counters();
  const auto x = random<B, 4>({2, 3, 8, 8}, 60), w = random<B, 4>({4, 3, 3, 3}, 61);
  const auto bias = random<B, 1>({4}, 62);
  const ops::Conv2dOptions options{.padding = {1, 1}};
  const std::uint64_t epilogues = c.epilogues.load();
  const auto y = functional::conv2d(on_fusion(x), on_fusion(w), std::optional(on_fusion(bias)), options).relu();
  EXPECT_TRUE(test::all_close(y.into_data(), functional::conv2d(x, w, std::optional(bias), options).relu().into_data(),
                              1e-5, 1e-5));
  if constexpr (ConvPrograms<B>) EXPECT_EQ(c.epilogues.load(), epilogues + 1) << "relu inside the convolution";
  else EXPECT_EQ(c.epilogues.load(), epilogues);
  // A deferred convolution checks its operands when it is called, not when it is computed.
  const auto wrong_bias = on_fusion(random<B, 1>({3}, 63));
  EXPECT_KILN_ERROR(Fusion<B>::conv2d(on_fusion(x).primitive(), on_fusion(w).primitive(), wrong_bias.primitive(), options),
                    "conv2d", "[3]", "[4, 3, 3, 3]");
  // In one expression, as nn layers are called: the convolution's temporary is alive while the
  // pool reads the relu, and the relu is still its epilogue.
  const ops::Pool2dOptions pool{.kernel = {2, 2}, .stride = {2, 2}};
  const auto pooled =
      functional::max_pool2d(functional::conv2d(on_fusion(x), on_fusion(w), std::optional(on_fusion(bias)), options).relu(), pool);
  EXPECT_TRUE(test::all_close(
      pooled.into_data(), functional::max_pool2d(functional::conv2d(x, w, std::optional(bias), options).relu(), pool).into_data(),
      1e-5, 1e-5));
  EXPECT_EQ(c.epilogues.load(), epilogues + (ConvPrograms<B> ? 2 : 0));
  // Conv, relu, max pool and a loss under Autodiff: the same gradients as without fusion.
  const auto loss_of = [&](const auto& input, const auto& weight, const auto& b) {
    auto h = functional::conv2d(input, weight, std::optional(b), options);
    h = h.relu();
    return functional::max_pool2d(h, pool).square().mean();
  };
  const auto wd = Tensor<AD, 4>::from_data(w.into_data()).require_grad();
  const auto bd = Tensor<AD, 1>::from_data(bias.into_data()).require_grad();
  const auto wf = Tensor<AF, 4>::from_data(w.into_data()).require_grad();
  const auto bf = Tensor<AF, 1>::from_data(bias.into_data()).require_grad();
  const auto ld = loss_of(Tensor<AD, 4>::from_data(x.into_data()), wd, bd);
  const auto lf = loss_of(Tensor<AF, 4>::from_data(x.into_data()), wf, bf);
  const auto gd = ld.backward();
  const auto gf = lf.backward();
  EXPECT_TRUE(test::all_close(lf.into_data(), ld.into_data(), 1e-5, 1e-6));
  EXPECT_TRUE(test::all_close(wf.grad(gf)->into_data(), wd.grad(gd)->into_data(), 1e-4, 1e-5));
  EXPECT_TRUE(test::all_close(bf.grad(gf)->into_data(), bd.grad(gd)->into_data(), 1e-4, 1e-5));
}

// softmax(q kᵀ · scale) @ v written out on Fusion<B>, the scale on the scores, on q or none:
// where B has fused attention and runs matmul programs, the product and the softmax stay
// deferred and the matmul by v runs B::attention (counters().attentions); values as the same
// composition on B. Not rewritten: a log-softmax, a softmax along another dim. A handle to
// the weights read later computes them.
TYPED_TEST(FusionEpilogues, SoftmaxOfAProductTimesVRunsAsFusedAttention) {
  using B = TypeParam;
  constexpr bool rewrites = FusedAttention<B> && MatmulPrograms<B>;
  auto& c = Fusion<B>::counters();
  const auto q = random<B, 4>({2, 3, 70, 16}, 40), k = random<B, 4>({2, 3, 90, 16}, 41);
  const auto v = random<B, 4>({2, 3, 90, 8}, 42);
  const auto weights = (q.matmul(k.transpose()) * 0.25).softmax(3);
  const auto expected = weights.matmul(v).into_data();
  const auto fq = on_fusion(q), fk = on_fusion(k), fv = on_fusion(v);
  const auto check = [&](const char* what, auto&& compute, std::uint64_t rewritten) {
    SCOPED_TRACE(what);
    const std::uint64_t before = c.attentions.load();
    const auto out = compute();
    EXPECT_TRUE(test::all_close(out.into_data(), expected, 1e-4, 1e-5));
    EXPECT_EQ(c.attentions.load(), before + (rewrites ? rewritten : 0));
  };
  check("scale on the scores", [&] { return (fq.matmul(fk.transpose()) * 0.25).softmax(3).matmul(fv); }, 1);
  check("scale on q", [&] { return (fq * 0.25).matmul(fk.transpose()).softmax(-1).matmul(fv); }, 1);
  check("a handle to the weights", [&] {
    const auto w = (0.25 * fq.matmul(fk.transpose())).softmax(3);
    auto out = w.matmul(fv);
    EXPECT_TRUE(test::all_close(w.into_data(), weights.into_data(), 1e-4, 1e-6)) << "computed when read";
    return out;
  }, 1);
  {
    const std::uint64_t before = c.attentions.load();
    const auto unscaled = fq.matmul(fk.transpose()).softmax(3).matmul(fv);
    EXPECT_TRUE(test::all_close(unscaled.into_data(), q.matmul(k.transpose()).softmax(3).matmul(v).into_data(), 1e-4, 1e-5));
    const auto logs = (fq.matmul(fk.transpose()) * 0.25).log_softmax(3).matmul(fv);
    EXPECT_TRUE(test::all_close(logs.into_data(), (q.matmul(k.transpose()) * 0.25).log_softmax(3).matmul(v).into_data(),
                                1e-4, 1e-5));
    const auto other_dim = (fq.matmul(fq.transpose()) * 0.25).softmax(2).matmul(fq);
    EXPECT_TRUE(test::all_close(other_dim.into_data(),
                                (q.matmul(q.transpose()) * 0.25).softmax(2).matmul(q).into_data(), 1e-4, 1e-5));
    EXPECT_EQ(c.attentions.load(), before + (rewrites ? 1 : 0)) << "only the unscaled softmax is attention";
  }
}

// Under Autodiff, where the weights reach 8M elements, the matmul by v records one attention
// node over q kᵀ and v (Autodiff's attention_of_weights), whose backward is B's fused one:
// the gradients of the composition on B, with the scale on the scores or on q. Where the loss
// also reads the weights, their softmax node computes them and adds its share. Smaller
// weights, and a log-softmax, run as written.
TYPED_TEST(FusionEpilogues, AttentionCompositionUnderAutodiffRecordsOneAttentionNode) {
  using B = TypeParam;
  using AD = Autodiff<Fusion<B>>;
  using Ref = Autodiff<B>;
  auto& c = Fusion<B>::counters();
  const auto check = [&](std::int64_t l, std::int64_t s, std::uint64_t rewritten) {
    SCOPED_TRACE(std::to_string(l) + " queries, " + std::to_string(s) + " keys");
    const auto q = random<B, 4>({1, 2, l, 8}, 43), k = random<B, 4>({1, 2, s, 8}, 44);
    const auto v = random<B, 4>({1, 2, s, 4}, 45);
    const auto dq = Tensor<Ref, 4>::from_data(q.into_data()).require_grad();
    const auto dk = Tensor<Ref, 4>::from_data(k.into_data()).require_grad();
    const auto dv = Tensor<Ref, 4>::from_data(v.into_data()).require_grad();
    const auto weights_too = [](const auto& w, const auto& vv) {
      const auto out = w.matmul(vv);  // before anything reads the weights
      return out.sum() + w.square().sum();
    };
    const auto reference = (dq.matmul(dk.transpose()) * 0.25).softmax(3).matmul(dv).sum().backward();
    const auto reference_weights_too = weights_too((dq.matmul(dk.transpose()) * 0.25).softmax(3), dv).backward();
    // On the CPU, where the loss reads only the output, a rewritten step never allocates the
    // weights (l x s per head): its peak stays below a quarter of their bytes.
    const auto check_grads = [&](const char* what, auto&& loss_of, const auto& expected, std::uint64_t count,
                                 bool reads_weights = false) {
      SCOPED_TRACE(what);
      const std::int64_t nodes = autodiff::live_node_count().load();
      {
        const auto aq = Tensor<AD, 4>::from_data(q.into_data()).require_grad();
        const auto ak = Tensor<AD, 4>::from_data(k.into_data()).require_grad();
        const auto av = Tensor<AD, 4>::from_data(v.into_data()).require_grad();
        const std::uint64_t before = c.attentions.load();
        std::size_t live = 0;
        if constexpr (std::same_as<B, Cpu>) {
          cpu::reset_peak_memory_stats();
          live = cpu::memory_stats().live_bytes;
        }
        const auto grads = loss_of(aq, ak, av).backward();
        EXPECT_EQ(c.attentions.load(), before + count);
        if constexpr (std::same_as<B, Cpu>) {
          const auto weight_bytes = static_cast<std::size_t>(2 * l * s) * sizeof(float);
          if (count > 0 && !reads_weights)
            EXPECT_LT(cpu::memory_stats().peak_live_bytes - live, weight_bytes / 4) << "the weights were made";
        }
        EXPECT_TRUE(test::all_close(aq.grad(grads)->into_data(), dq.grad(expected)->into_data(), 1e-4, 1e-5));
        EXPECT_TRUE(test::all_close(ak.grad(grads)->into_data(), dk.grad(expected)->into_data(), 1e-4, 1e-5));
        EXPECT_TRUE(test::all_close(av.grad(grads)->into_data(), dv.grad(expected)->into_data(), 1e-4, 1e-5));
      }
      EXPECT_EQ(autodiff::live_node_count().load(), nodes) << "every node freed";
    };
    check_grads("scale on the scores", [](const auto& aq, const auto& ak, const auto& av) {
      return (aq.matmul(ak.transpose()) * 0.25).softmax(3).matmul(av).sum();
    }, reference, rewritten);
    check_grads("scale on q", [](const auto& aq, const auto& ak, const auto& av) {
      return (aq * 0.25).matmul(ak.transpose()).softmax(-1).matmul(av).sum();
    }, reference, rewritten);
    check_grads("the loss reads the weights too", [&](const auto& aq, const auto& ak, const auto& av) {
      return weights_too((aq.matmul(ak.transpose()) * 0.25).softmax(3), av);
    }, reference_weights_too, rewritten, /*reads_weights=*/true);
    check_grads("a log-softmax is not attention", [](const auto& aq, const auto& ak, const auto& av) {
      return (aq.matmul(ak.transpose()) * 0.25).log_softmax(3).exp().matmul(av).sum();
    }, reference, 0);
  };
  check(70, 90, 0);
  // 2 heads of 2048 x 2048 weights: 8M elements. Only where the rewrite runs: the same
  // composition on B without it is the small case's.
  if constexpr (FusedAttention<B> && MatmulPrograms<B>) check(2048, 2048, 1);
}