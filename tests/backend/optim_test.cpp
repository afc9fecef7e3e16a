// Conformance: optimizer steps against torch.optim (tests/golden/gen_optim.py). A backend
// that fuses the step (Cpu::adam_step) and one that builds it from tensor ops (Autodiff<Cpu>
// runs the composite on its values) must both follow torch.
#include "backends.hpp"
#include "golden.hpp"

#include <kiln/optim/adam.hpp>

#include <optional>

using namespace kiln;
using kiln::test::golden;

KILN_BACKEND_TEST_SUITE(Optim);

namespace {

struct AdamCase {
  const char* name;
  ops::AdamStep options;
};
const AdamCase kAdamCases[] = {
    {"adam", {0.05, 0.8, 0.95, 1e-6, 0.1, false, 1}},
    {"adamw", {0.05, 0.9, 0.99, 1e-8, 0.2, true, 1}},
};

}  // namespace

TYPED_TEST(Optim, AdamFollowsTorchOverThreeSteps) {
  using B = TypeParam;
  for (const AdamCase& k : kAdamCases) {
    const auto& c = golden("optim", k.name);
    for (DType dtype : {DType::f64, DType::f32}) {
      SCOPED_TRACE(std::string(k.name) + " " + std::string(dtype_name(dtype)));
      const double tol = dtype == DType::f64 ? 1e-12 : 2e-5;
      auto p = c.tensor<B, 2>("p", dtype);
      auto m = p.zeros_like(), v = p.zeros_like();
      for (int step = 0; step < 3; ++step) {
        ops::AdamStep options = k.options;
        options.step = step + 1;
        const std::string s = std::to_string(step);
        auto next = optim::adam_step(p, c.tensor<B, 2>("g" + s, dtype), m, v, options);
        p = next.param;
        m = next.m;
        v = next.v;
        EXPECT_CLOSE(p, c["p" + s], tol, tol);
        EXPECT_CLOSE(m, c["m" + s], tol, tol);
        EXPECT_CLOSE(v, c["v" + s], tol, tol);
      }
    }
  }
}

// The same steps with the parameter and the moments given up (std::move), as an optimizer
// passes them: a backend may write over their buffers, and the values must not change. A
// copy of a moment kept by the caller keeps its values.
TYPED_TEST(Optim, AdamOnGivenUpTensorsFollowsTorchAndLeavesKeptCopiesAlone) {
  using B = TypeParam;
  const auto& c = golden("optim", "adamw");
  auto p = c.tensor<B, 2>("p", DType::f32);
  auto m = p.zeros_like(), v = p.zeros_like();
  std::optional<Tensor<B, 2>> kept;
  TensorData kept_values;
  for (int step = 0; step < 3; ++step) {
    ops::AdamStep options = kAdamCases[1].options;
    options.step = step + 1;
    const std::string s = std::to_string(step);
    if (step == 1) {
      kept = m;
      kept_values = m.into_data();
    }
    auto next = optim::adam_step(std::move(p), c.tensor<B, 2>("g" + s, DType::f32), std::move(m), std::move(v),
                                 options);
    p = std::move(next.param);
    m = std::move(next.m);
    v = std::move(next.v);
    EXPECT_CLOSE(p, c["p" + s], 2e-5, 2e-5);
    EXPECT_CLOSE(m, c["m" + s], 2e-5, 2e-5);
    EXPECT_CLOSE(v, c["v" + s], 2e-5, 2e-5);
  }
  EXPECT_TRUE(test::all_close(kept->into_data(), kept_values, 0, 0));
  EXPECT_FALSE(test::all_close(m.into_data(), kept_values, 1e-3, 0));
}

TYPED_TEST(Optim, AdamRejectsMismatchedShapesAndSteps) {
  using B = TypeParam;
  const auto p = Tensor<B, 2>::zeros({2, 3});
  const auto g = Tensor<B, 2>::zeros({3, 2});
  EXPECT_KILN_ERROR(optim::adam_step(p, g, p, p, {}), "adam_step: param [2, 3], grad [3, 2]");
  ops::AdamStep zero_step;
  zero_step.step = 0;
  EXPECT_KILN_ERROR(optim::adam_step(p, p, p, p, zero_step), "step must count from 1");
}
