// Autodiff graph semantics: require_grad / detach / no-grad scopes, accumulation over
// several uses, which gradients exist, freeing the graph after backward, the errors, a
// leak check over 100 training steps, and an MLP that learns XOR.
#include "backends.hpp"
#include "golden.hpp"

#include <functional>
#include <map>

using namespace kiln;

template <class B> class AutodiffGraph : public ::kiln::test::BackendTest<B> {};
TYPED_TEST_SUITE(AutodiffGraph, ::kiln::test::HardwareBackends, ::kiln::test::BackendNames);

static_assert(AutodiffBackend<Autodiff<Cpu>>);
static_assert(!AutodiffBackend<Cpu>);

namespace {
template <class T> std::vector<double> values(const T& t) { return t.template to_vec<double>(); }
}  // namespace

TYPED_TEST(AutodiffGraph, GradientOfAProductAndASum) {
  using AD = Autodiff<TypeParam>;
  const auto x = Tensor<AD, 2>::from({{1.0, 2.0}, {3.0, 4.0}}).require_grad();
  const auto y = Tensor<AD, 2>::from({{0.5, -1.0}, {2.0, 0.0}}).require_grad();
  const auto grads = (x * y + x).sum().backward();
  EXPECT_EQ(values(*x.grad(grads)), (std::vector<double>{1.5, 0.0, 3.0, 1.0}));
  EXPECT_EQ(values(*y.grad(grads)), (std::vector<double>{1.0, 2.0, 3.0, 4.0}));
}

TYPED_TEST(AutodiffGraph, UsesOfOneTensorAccumulate) {
  using AD = Autodiff<TypeParam>;
  const auto x = Tensor<AD, 1>::from({1.0, -2.0, 3.0}).require_grad();
  // d/dx (x^2 + 3x + x * x) = 4x + 3, through three paths that meet again.
  const auto a = x * x, b = x * 3.0;
  const auto grads = (a + b + x.mul(x)).sum().backward();
  EXPECT_EQ(values(*x.grad(grads)), (std::vector<double>{7.0, -5.0, 15.0}));
}

// A weight's gradient xᵀ dy is computed in whichever orientation has fewer rows (a wide
// product, transposed back when in > out): both give dyᵀ x for a linear layer's weight, with
// x of rank 2 and of rank 3 (its rows folded into one product).
TYPED_TEST(AutodiffGraph, MatmulRhsGradientInBothOrientations) {
  using AD = Autodiff<TypeParam>;
  const std::int64_t rows = 5;
  for (const auto [in, out] : {std::pair<std::int64_t, std::int64_t>{7, 3}, {3, 7}}) {
    for (const std::int64_t batch : {1, 2}) {
      const auto x = Tensor<AD, 3>::random({batch, rows, in}, Distribution::normal(0, 1), {}, DType::f64);
      const auto w = Tensor<AD, 2>::random({out, in}, Distribution::normal(0, 1), {}, DType::f64).require_grad();
      const auto dy = Tensor<AD, 3>::random({batch, rows, out}, Distribution::normal(0, 1), {}, DType::f64);
      const auto y = batch == 1
                         ? x.template reshape<2>({rows, in}).matmul(w.transpose()).template reshape<3>({1, rows, out})
                         : x.matmul(w.transpose().template unsqueeze<3>());
      const auto grads = (y * dy).sum().backward();
      const auto got = values(*w.grad(grads)), xs = values(x), dys = values(dy);
      ASSERT_EQ(got.size(), static_cast<std::size_t>(out * in));
      for (std::int64_t o = 0; o < out; ++o)
        for (std::int64_t i = 0; i < in; ++i) {
          double expected = 0;
          for (std::int64_t r = 0; r < batch * rows; ++r)
            expected += dys[static_cast<std::size_t>(r * out + o)] * xs[static_cast<std::size_t>(r * in + i)];
          EXPECT_NEAR(got[static_cast<std::size_t>(o * in + i)], expected, 1e-12)
              << in << " -> " << out << " at " << o << ", " << i;
        }
    }
  }
}

// A linear layer is one node (kiln::provided::linear): its output and the gradients of x,
// the weight and the bias equal those of the matmul, add and relu it replaces, for x of rank
// 2 and 3, in > out and in < out, with and without the bias and relu.
TYPED_TEST(AutodiffGraph, LinearNodeMatchesTheComposition) {
  using AD = Autodiff<TypeParam>;
  const auto normal = Distribution::normal(0, 1);
  // f32 runs the CPU's one GEMM with its epilogue, f64 the provided default.
  for (const DType dtype : {DType::f32, DType::f64}) {
    const double tolerance = dtype == DType::f32 ? 1e-5 : 1e-12;
    const auto close = [&](const TensorData& a, const TensorData& b) {
      return test::all_close(a, b, tolerance, tolerance);
    };
    for (const auto [in, out] : {std::pair<std::int64_t, std::int64_t>{7, 3}, {3, 7}}) {
      const auto x = Tensor<AD, 3>::random({2, 5, in}, normal, {}, dtype).require_grad();
      const auto w = Tensor<AD, 2>::random({out, in}, normal, {}, dtype).require_grad();
      const auto b = Tensor<AD, 1>::random({out}, normal, {}, dtype).require_grad();
      const auto dy = Tensor<AD, 3>::random({2, 5, out}, normal, {}, dtype);
      for (const bool with_bias : {false, true})
        for (const bool relu : {false, true})
          for (const bool flat : {false, true}) {
            SCOPED_TRACE(
                fmt::format("{} {} -> {} bias {} relu {} rank {}", dtype, in, out, with_bias, relu, flat ? 2 : 3));
            const auto activation = relu ? ops::LinearActivation::relu : ops::LinearActivation::none;
            const auto bias = with_bias ? std::optional(b) : std::nullopt;
            const auto fused = flat ? functional::linear(x.template reshape<2>({10, in}), w, bias, activation)
                                          .template reshape<3>({2, 5, out})
                                    : functional::linear(x, w, bias, activation);
            auto composed = x.matmul(w.transpose().template unsqueeze<3>());
            if (with_bias) composed = composed + b.template unsqueeze<3>();
            if (relu) composed = composed.relu();
            EXPECT_TRUE(close(fused.into_data(), composed.into_data()));
            const auto got = (fused * dy).sum().backward();
            const auto want = (composed * dy).sum().backward();
            EXPECT_TRUE(close(x.grad(got)->into_data(), x.grad(want)->into_data()));
            EXPECT_TRUE(close(w.grad(got)->into_data(), w.grad(want)->into_data()));
            EXPECT_EQ(b.grad(got).has_value(), with_bias);
            if (with_bias) EXPECT_TRUE(close(b.grad(got)->into_data(), b.grad(want)->into_data()));
          }
    }
  }
}

TYPED_TEST(AutodiffGraph, BackwardOfANonScalarSeedsOnes) {
  using AD = Autodiff<TypeParam>;
  const auto x = Tensor<AD, 1>::from({1.0, 2.0}).require_grad();
  const auto grads = (x * 5.0).backward();
  EXPECT_EQ(values(*x.grad(grads)), (std::vector<double>{5.0, 5.0}));
}

TYPED_TEST(AutodiffGraph, OnlyTensorsThatRequireGradGetGradients) {
  using AD = Autodiff<TypeParam>;
  const auto w = Tensor<AD, 1>::from({1.0, 2.0}).require_grad();
  const auto c = Tensor<AD, 1>::from({3.0, 4.0});
  EXPECT_TRUE(w.is_require_grad());
  EXPECT_FALSE(c.is_require_grad());
  const auto e = c.exp();  // nothing to differentiate: no node is recorded
  EXPECT_FALSE(e.is_require_grad());
  const auto live_before = autodiff::live_node_count().load();
  const auto loss = (w * e).sum();
  EXPECT_EQ(autodiff::live_node_count().load() - live_before, 2);  // the product and the sum
  const auto grads = loss.backward();
  EXPECT_EQ(grads.size(), 1u);
  EXPECT_FALSE(c.grad(grads).has_value());
  EXPECT_FALSE(e.grad(grads).has_value());
  EXPECT_TRUE(w.grad(grads).has_value());
}

TYPED_TEST(AutodiffGraph, DetachAndNoGradStopTheGraph) {
  using AD = Autodiff<TypeParam>;
  const auto x = Tensor<AD, 1>::from({1.0, 2.0}).require_grad();
  const auto d = x.detach();
  EXPECT_FALSE(d.is_require_grad());
  EXPECT_EQ(values(d), values(x));
  // Only the first factor carries a gradient: d/dx (x * stop(x)) = stop(x).
  const auto grads = (x * d).sum().backward();
  EXPECT_EQ(values(*x.grad(grads)), (std::vector<double>{1.0, 2.0}));
  {
    NoGradGuard guard;
    EXPECT_FALSE(is_grad_enabled());
    EXPECT_FALSE((x * 2.0).is_require_grad());
  }
  EXPECT_TRUE(is_grad_enabled());
  EXPECT_TRUE((x * 2.0).is_require_grad());
  EXPECT_FALSE(x.set_require_grad(false).is_require_grad());
  // Casts to Int end the graph.
  EXPECT_FALSE(x.to_int().to_float().is_require_grad());
}

TYPED_TEST(AutodiffGraph, InnerAndFromInnerRoundTrip) {
  using B = TypeParam;
  using AD = Autodiff<B>;
  const auto plain = Tensor<B, 2>::from({{1.0, 2.0}, {3.0, 4.0}});
  const auto wrapped = Tensor<AD, 2>::from_inner(plain);
  EXPECT_FALSE(wrapped.is_require_grad());
  const Tensor<B, 2> back = wrapped.require_grad().mul(2.0).inner();
  EXPECT_EQ(values(back), (std::vector<double>{2.0, 4.0, 6.0, 8.0}));
}

TYPED_TEST(AutodiffGraph, GradRemoveTakesTheGradientOut) {
  using AD = Autodiff<TypeParam>;
  const auto x = Tensor<AD, 1>::from({1.0}).require_grad();
  auto grads = (x * 2.0).sum().backward();
  EXPECT_TRUE(x.grad_remove(grads).has_value());
  EXPECT_FALSE(x.grad(grads).has_value());
  EXPECT_TRUE(grads.empty());
}

TYPED_TEST(AutodiffGraph, TheGraphIsFreedAfterBackward) {
  using AD = Autodiff<TypeParam>;
  const auto live_before = autodiff::live_node_count().load();
  {
    const auto x = Tensor<AD, 2>::from({{1.0, 2.0}, {3.0, 4.0}}).require_grad();
    const auto hidden = x.matmul(x).tanh();
    const auto loss = hidden.sum();
    EXPECT_EQ(autodiff::live_node_count().load() - live_before, 4);  // leaf, matmul, tanh, sum
    const auto grads = loss.backward();
    // The nodes stay while tensors refer to them, but their saved tensors are gone and a
    // second backward through them is refused.
    EXPECT_KILN_ERROR(loss.backward(), "already freed by an earlier backward()");
    EXPECT_KILN_ERROR(hidden.sum().backward(), "through a tanh result was already freed");
    // The leaf is still a leaf: a new forward pass differentiates again.
    const auto again = x.matmul(x).tanh().sum().backward();
    EXPECT_CLOSE(x.grad(again)->into_data(), x.grad(grads)->into_data(), 0.0, 0.0);
  }
  EXPECT_EQ(autodiff::live_node_count().load(), live_before);
}

TYPED_TEST(AutodiffGraph, BadUseIsAnError) {
  using AD = Autodiff<TypeParam>;
  const auto c = Tensor<AD, 1>::from({1.0, 2.0});
  EXPECT_KILN_ERROR(c.sum().backward(), "does not require grad");
  const auto i = Tensor<AD, 1>::from({1.0}).require_grad();
  const auto x = i * 1.0;
  // Gradient formulas are evaluated, not differentiated.
  EXPECT_KILN_ERROR(AD::template unary_backward<ops::Exp>(x.primitive(), x.primitive(), x.primitive()),
                    "second-order gradients are not supported");
}

namespace {

// A 2-16-1 tanh MLP trained by plain SGD on a tensor loss, the way a user writes it.
template <class B> struct Mlp {
  using AD = Autodiff<B>;
  Tensor<AD, 2> w1, w2;
  Tensor<AD, 2> b1, b2;

  explicit Mlp(DType dtype, std::int64_t hidden)
      : w1(param({2, hidden}, 1.0, dtype)), w2(param({hidden, 1}, 1.0 / std::sqrt(double(hidden)), dtype)),
        b1(param({1, hidden}, 0.1, dtype)), b2(param({1, 1}, 0.1, dtype)) {}

  static Tensor<AD, 2> param(std::array<std::int64_t, 2> dims, double scale, DType dtype) {
    return Tensor<AD, 2>::random(dims, Distribution::normal(0.0, scale), {}, dtype).require_grad();
  }
  Tensor<AD, 2> forward(const Tensor<AD, 2>& x) const { return (x.matmul(w1) + b1).tanh().matmul(w2) + b2; }

  void sgd_step(const typename AD::Gradients& grads, double lr) {
    for (Tensor<AD, 2>* p : {&w1, &w2, &b1, &b2}) {
      const auto g = p->grad(grads);
      ASSERT_TRUE(g.has_value());
      *p = Tensor<AD, 2>::from_inner(p->inner() - *g * lr).require_grad();
    }
  }
};

}  // namespace

TYPED_TEST(AutodiffGraph, AnMlpLearnsXor) {
  using AD = Autodiff<TypeParam>;
  manual_seed(7);
  Mlp<TypeParam> mlp(DType::f32, 16);
  const auto x = Tensor<AD, 2>::from({{0.0, 0.0}, {0.0, 1.0}, {1.0, 0.0}, {1.0, 1.0}});
  const auto target = Tensor<AD, 2>::from({{0.0}, {1.0}, {1.0}, {0.0}});
  double loss_value = 0.0;
  for (int step = 0; step < 500; ++step) {
    const auto loss = (mlp.forward(x) - target).square().mean();
    loss_value = loss.item();
    mlp.sgd_step(loss.backward(), 0.2);
  }
  NoGradGuard no_grad;
  const auto predicted = mlp.forward(x).gt(0.5).to_int().template to_vec<std::int64_t>();
  EXPECT_EQ(predicted, (std::vector<std::int64_t>{0, 1, 1, 0})) << "final loss " << loss_value;
  EXPECT_LT(loss_value, 0.01);
}

TYPED_TEST(AutodiffGraph, TrainingStepsLeakNothing) {
  using B = TypeParam;
  using AD = Autodiff<B>;
  manual_seed(3);
  Mlp<B> mlp(DType::f32, 64);
  const auto x = Tensor<AD, 2>::random({32, 2}, Distribution::normal(0.0, 1.0));
  const auto target = Tensor<AD, 2>::random({32, 1}, Distribution::uniform(0.0, 1.0));
  auto step = [&] {
    const auto loss = (mlp.forward(x).sigmoid() - target).abs().sum_dim(0).mean();
    mlp.sgd_step(loss.backward(), 0.01);
  };
  step();  // warm the allocator's cache
  const auto nodes = autodiff::live_node_count().load();
  cpu::MemoryStats memory{};
  if constexpr (std::same_as<B, Cpu>) memory = cpu::memory_stats();
  for (int i = 0; i < 100; ++i) step();
  // The parameters are the only nodes and buffers that outlive a step.
  EXPECT_EQ(autodiff::live_node_count().load(), nodes);
  if constexpr (std::same_as<B, Cpu>) {
    const auto after = cpu::memory_stats();
    EXPECT_EQ(after.live_buffers, memory.live_buffers);
    EXPECT_EQ(after.live_bytes, memory.live_bytes);
  }
}

namespace {
// Records what a backward pass tells its observer: each leaf once, with its final gradient,
// and how many nodes had run their rules when it came.
template <class P> struct Recorder final : autodiff::BackwardObserver<P> {
  std::vector<std::uint64_t> order;
  std::map<std::uint64_t, std::vector<double>> grads;
  std::function<std::vector<double>(const P&)> read;
  void leaf_ready(std::uint64_t leaf, const P& grad) override {
    order.push_back(leaf);
    grads[leaf] = read(grad);
  }
};
}  // namespace

// The observer hears of each leaf once, as soon as no later node can add to its gradient:
// the last layer's weight before the first layer's, a leaf used on two paths with the sum.
TYPED_TEST(AutodiffGraph, AnObserverHearsOfEachLeafOnceWithItsFinalGradient) {
  using AD = Autodiff<TypeParam>;
  using P = typename TypeParam::Primitive;
  const auto w1 = Tensor<AD, 2>::from({{1.0, 2.0}, {-1.0, 0.5}}).require_grad();
  const auto w2 = Tensor<AD, 2>::from({{0.5}, {-2.0}}).require_grad();
  const auto x = Tensor<AD, 2>::from({{1.0, 3.0}}).require_grad();
  Recorder<P> recorder;
  recorder.read = [](const P& p) { return Tensor<TypeParam, 2>(p).template to_vec<double>(); };
  typename AD::Gradients grads;
  {
    autodiff::BackwardObserverScope<P> scope(recorder);
    const auto s = x.sum_dim(1) * x.sum_dim(1);  // made first: its rules run last
    const auto h = x.matmul(w1).tanh();
    const auto y = h.matmul(w2);
    grads = (y + s).sum().backward();
  }
  ASSERT_EQ(recorder.order.size(), 3u);
  const auto id = [](const auto& t) { return t.primitive().node->id; };
  // w2's gradient is final after the last matmul's rule, w1's only after tanh's and the
  // first matmul's; x, used by the first matmul and by both sums, after the sums' rules.
  EXPECT_EQ(recorder.order[0], id(w2));
  EXPECT_EQ(recorder.order[1], id(w1));
  EXPECT_EQ(recorder.order[2], id(x));
  EXPECT_EQ(recorder.grads[id(w1)], values(*w1.grad(grads)));
  EXPECT_EQ(recorder.grads[id(w2)], values(*w2.grad(grads)));
  EXPECT_EQ(recorder.grads[id(x)], values(*x.grad(grads)));
  // Outside the scope, nobody hears: a second pass leaves the record as it was.
  (void)(w1 * 2.0).sum().backward();
  EXPECT_EQ(recorder.order.size(), 3u);
}

// Each rule is given its dy (an rvalue), and an elementwise gradient may be written over it
// where nothing else holds it. Where something does, it must keep its values: Add passes one
// dy to both branches (relu's and tanh's rules each see the other's handle), and Mul needing
// both gradients reads dy twice (the first product must not write over it). Against the
// derivatives in double.
TYPED_TEST(AutodiffGraph, GradientsGivenUpToRulesKeepSharedOnesIntact) {
  using AD = Autodiff<TypeParam>;
  const auto x = Tensor<AD, 1>::from({-1.5, 0.5, 2.0, -0.25}).require_grad();
  const auto w = Tensor<AD, 1>::from({0.75, -2.0, 1.25, 3.0}).require_grad();
  const auto c = Tensor<AD, 1>::from({1.0, 2.0, -3.0, 4.0});  // a constant: Mul's rule reads dy once
  // d/dx sum(c (relu(x) + tanh(x))) = c (relu'(x) + 1 - tanh²(x)); the product with c gives
  // the branches a dense dy of their own.
  const auto branches = ((x.relu() + x.tanh()) * c).sum().backward();
  // d/dx sum(c x w) = c w, d/dw = c x; then exp and sigmoid in a chain, each over its dy:
  // d/dx sum(sigmoid(exp(x w))) = s (1 - s) e w, with e = exp(x w), s = sigmoid(e).
  const auto product = (x * w * c).sum().backward();
  const auto chain = (x * w).exp().sigmoid().sum().backward();
  const std::vector<double> xs = values(x), ws = values(w), cs = values(c);
  for (std::size_t i = 0; i < xs.size(); ++i) {
    const double t = std::tanh(xs[i]), e = std::exp(xs[i] * ws[i]), s = 1 / (1 + std::exp(-e));
    EXPECT_NEAR(values(*x.grad(branches))[i], cs[i] * ((xs[i] > 0 ? 1 : 0) + 1 - t * t), 1e-5) << i;
    EXPECT_NEAR(values(*x.grad(product))[i], cs[i] * ws[i], 1e-6) << i;
    EXPECT_NEAR(values(*w.grad(product))[i], cs[i] * xs[i], 1e-6) << i;
    EXPECT_NEAR(values(*x.grad(chain))[i], s * (1 - s) * e * ws[i], 1e-5 * (1 + std::abs(e))) << i;
    EXPECT_NEAR(values(*w.grad(chain))[i], s * (1 - s) * e * xs[i], 1e-5 * (1 + std::abs(e))) << i;
  }
}
