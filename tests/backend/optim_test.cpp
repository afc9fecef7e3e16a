// Conformance: optimizer steps against torch.optim (tests/golden/gen_optim.py). A backend
// that fuses the step (Cpu::adam_step) and one that builds it from tensor ops (Autodiff<Cpu>
// runs the composite on its values) must both follow torch.
#include "backends.hpp"
#include "golden.hpp"

#include <kiln/optim/adam.hpp>

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

TYPED_TEST(Optim, AdamRejectsMismatchedShapesAndSteps) {
  using B = TypeParam;
  const auto p = Tensor<B, 2>::zeros({2, 3});
  const auto g = Tensor<B, 2>::zeros({3, 2});
  EXPECT_KILN_ERROR(optim::adam_step(p, g, p, p, {}), "adam_step: param [2, 3], grad [3, 2]");
  ops::AdamStep zero_step;
  zero_step.step = 0;
  EXPECT_KILN_ERROR(optim::adam_step(p, p, p, p, zero_step), "step must count from 1");
}
