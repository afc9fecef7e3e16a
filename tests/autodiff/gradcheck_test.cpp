// Gradient checks for every case of grad_cases.hpp on Autodiff<B>: the forward value and
// the gradients against torch.autograd (tests/golden/grad.golden), and the gradients
// against central finite differences in f64; each with contiguous and non-contiguous inputs.
#include "backends.hpp"
#include "grad_cases.hpp"

#include <set>

using namespace kiln;
using kiln::test::golden;
using kiln::test::GradCase;
using kiln::test::GradCheck;
using kiln::test::GradInputs;

template <class B> class GradCheckSuite : public ::kiln::test::BackendTest<B> {};
TYPED_TEST_SUITE(GradCheckSuite, ::kiln::test::HardwareBackends, ::kiln::test::BackendNames);

namespace {

// The float inputs x0, x1... of a case, as flat f64 data.
std::vector<TensorData> case_inputs(const test::GoldenCase& c) {
  std::vector<TensorData> inputs;
  for (std::size_t i = 0; c.tensors.count("x" + std::to_string(i)); ++i) {
    const TensorData& x = c["x" + std::to_string(i)];
    inputs.push_back(x.convert(DType::f64).reshaped(Shape{x.numel()}));
  }
  return inputs;
}

template <class AD> std::vector<Tensor<AD, 1>> leaves_of(const std::vector<TensorData>& inputs) {
  std::vector<Tensor<AD, 1>> leaves;
  for (const auto& x : inputs) leaves.push_back(Tensor<AD, 1>::from_data(x).require_grad());
  return leaves;
}

// sum(f(x) * dy): the loss whose gradients equal the vector-Jacobian product with dy.
template <class AD>
Tensor<AD, 1> weighted_loss(const GradCase<AD>& k, const test::GoldenCase& c, const std::vector<Tensor<AD, 1>>& leaves,
                            bool noncontiguous, Tensor<AD, 1>* out = nullptr) {
  const Tensor<AD, 1> y = k.fn(GradInputs<AD>(c, leaves, noncontiguous));
  if (out) *out = y;
  const auto dy = Tensor<AD, 1>::from_data(c["dy"].convert(DType::f64).reshaped(Shape{c["dy"].numel()}));
  return (y * dy).sum();
}

}  // namespace

TYPED_TEST(GradCheckSuite, EveryGoldenCaseHasAFunctionAndBack) {
  using AD = Autodiff<TypeParam>;
  std::set<std::string> functions;
  for (const auto& k : test::grad_cases<AD>()) {
    EXPECT_TRUE(functions.insert(k.name).second) << "duplicate grad case " << k.name;
  }
  const auto names = test::golden_case_names("grad");
  const std::set<std::string> fixtures(names.begin(), names.end());
  for (const auto& name : functions) EXPECT_TRUE(fixtures.count(name)) << name << " has no case in grad.golden";
  for (const auto& name : fixtures) EXPECT_TRUE(functions.count(name)) << name << " has no function in grad_cases.hpp";
}

// The gradient cases are checked against the op catalogue: every op with a gradient
// formula needs a case, named after it for unary ops, "<name>_broadcast" and
// "<name>_scalar" for binary ones; an op without one fails here by name.
TEST(GradCatalogue, EveryDifferentiableOpHasAGradientCheck) {
  std::set<std::string> cases;
  for (const auto& k : test::grad_cases<Autodiff<Cpu>>()) cases.insert(k.name);
  auto require = [&](std::string_view op, const std::string& name) {
    EXPECT_TRUE(cases.count(name)) << "the catalogue op '" << op << "' has no gradient check '" << name
                                   << "' in tests/autodiff/grad_cases.hpp";
  };
#define KILN_CHECK_UNARY(Op) require(ops::Op::name, std::string(ops::Op::name));
#define KILN_CHECK_BINARY(Op)                                          \
  require(ops::Op::name, std::string(ops::Op::name) + "_broadcast"); \
  require(ops::Op::name, std::string(ops::Op::name) + "_scalar");
  KILN_DIFFERENTIABLE_UNARY_OPS(KILN_CHECK_UNARY)
  KILN_DIFFERENTIABLE_BINARY_OPS(KILN_CHECK_BINARY)
#undef KILN_CHECK_UNARY
#undef KILN_CHECK_BINARY
}

TYPED_TEST(GradCheckSuite, GradientsMatchTorchAutograd) {
  using AD = Autodiff<TypeParam>;
  for (const auto& k : test::grad_cases<AD>()) {
    const auto& c = golden("grad", k.name);
    const auto inputs = case_inputs(c);
    for (bool noncontiguous : {false, true}) {
      SCOPED_TRACE(k.name + (noncontiguous ? " (non-contiguous inputs)" : ""));
      const auto leaves = leaves_of<AD>(inputs);
      Tensor<AD, 1> y = leaves.at(0);
      const auto grads = weighted_loss(k, c, leaves, noncontiguous, &y).backward();
      EXPECT_CLOSE(y.into_data(), c["y"].reshaped(Shape{c["y"].numel()}), 1e-10, 1e-12);
      for (std::size_t i = 0; i < leaves.size(); ++i) {
        const auto g = leaves[i].grad(grads);
        const TensorData& expected = c["g" + std::to_string(i)];
        ASSERT_TRUE(g.has_value()) << "x" << i << " received no gradient";
        EXPECT_CLOSE(g->into_data().reshaped(expected.shape()), expected, 1e-9, 1e-11) << "gradient of x" << i;
      }
    }
  }
}

TYPED_TEST(GradCheckSuite, GradientsMatchFiniteDifferences) {
  using AD = Autodiff<TypeParam>;
  constexpr double eps = 1e-6;
  for (const auto& k : test::grad_cases<AD>()) {
    if (k.check != GradCheck::all) continue;
    const auto& c = golden("grad", k.name);
    const auto inputs = case_inputs(c);
    for (bool noncontiguous : {false, true}) {
      SCOPED_TRACE(k.name + (noncontiguous ? " (non-contiguous inputs)" : ""));
      const auto leaves = leaves_of<AD>(inputs);
      const auto grads = weighted_loss(k, c, leaves, noncontiguous).backward();
      NoGradGuard no_grad;
      for (std::size_t i = 0; i < inputs.size(); ++i) {
        const auto analytic = leaves[i].grad(grads)->template to_vec<double>();
        for (std::int64_t j = 0; j < inputs[i].numel(); ++j) {
          auto at = [&](double delta) {
            std::vector<TensorData> moved = inputs;
            moved[i].template as_mut<double>()[static_cast<std::size_t>(j)] += delta;
            return weighted_loss(k, c, leaves_of<AD>(moved), noncontiguous).item();
          };
          const double numeric = (at(eps) - at(-eps)) / (2 * eps);
          EXPECT_NEAR(analytic[static_cast<std::size_t>(j)], numeric, 1e-6 + 1e-5 * std::abs(numeric))
              << "d/dx" << i << "[" << j << "]";
        }
      }
    }
  }
}
