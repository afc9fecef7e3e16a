// Conformance: the small numeric ops of kiln/tensor/numeric.hpp (lerp, fmod, isfinite,
// nan_to_num, count_nonzero, diff, dot, logcumsumexp, kthvalue, linspace, normalize)
// against PyTorch golden values (tests/golden/gen_numeric.py) on every backend, with bad
// input. Their gradients are checked in tests/autodiff (grad_cases.hpp).
#include "backends.hpp"
#include "golden.hpp"

#include <kiln/tensor/numeric.hpp>

using namespace kiln;
using kiln::test::golden;

KILN_BACKEND_TEST_SUITE(NumericOps);

namespace {
constexpr double kTol = 1e-12;
}

TYPED_TEST(NumericOps, LerpAndFmodMatchTorch) {
  using B = TypeParam;
  const auto& c = golden("numeric", "lerp");
  const auto a = c.tensor<B, 2>("a"), b = c.tensor<B, 2>("b");
  EXPECT_CLOSE(lerp(a, b, 0.3), c["scalar"], kTol, kTol);
  EXPECT_CLOSE(lerp(a, b, c.tensor<B, 2>("t")), c["tensor"], kTol, kTol);
  const auto& f = golden("numeric", "fmod");
  const auto x = f.tensor<B, 2>("x");
  EXPECT_CLOSE(fmod(x, -1.5), f["scalar"], kTol, kTol);
  EXPECT_CLOSE(fmod(x, f.tensor<B, 2>("d")), f["tensor"], kTol, kTol);
}

TYPED_TEST(NumericOps, IsfiniteAndNanToNumMatchTorch) {
  using B = TypeParam;
  const auto& c = golden("numeric", "nan_to_num");
  const auto x = c.tensor<B, 1>("x");
  EXPECT_CLOSE(isfinite(x), c["isfinite"], 0, 0);
  EXPECT_CLOSE(nan_to_num(x), c["default"], 0, 0);
  EXPECT_CLOSE(nan_to_num(x, 1.5, 100.0, -7.0), c["given"], 0, 0);
  EXPECT_CLOSE(nan_to_num(x.cast(DType::f32)), c["f32"], 0, 0);
  EXPECT_TRUE(isfinite(Tensor<B, 1, Int>::from({1, -5})).all().item());
}

TYPED_TEST(NumericOps, CountNonzeroDiffAndDotMatchTorch) {
  using B = TypeParam;
  const auto& c = golden("numeric", "count_nonzero");
  const auto z = c.tensor<B, 2>("x");
  EXPECT_CLOSE(count_nonzero(z), c["all"], 0, 0);
  EXPECT_CLOSE(count_nonzero(z, 1), c["dim1"], 0, 0);
  EXPECT_CLOSE(count_nonzero(z, 0), c["dim0"], 0, 0);
  EXPECT_CLOSE(count_nonzero(z.ne(0.0)), c["all"], 0, 0);
  const auto& d = golden("numeric", "diff");
  const auto v = d.tensor<B, 2>("x");
  EXPECT_CLOSE(diff(v), d["once"], kTol, kTol);
  EXPECT_CLOSE(diff(v, 2), d["twice"], kTol, kTol);
  EXPECT_CLOSE(diff(v, 1, 0), d["rows"], kTol, kTol);
  EXPECT_CLOSE(diff(z.to_int(), 1, 1), d["ints"], 0, 0);
  EXPECT_EQ(diff(v, 9).shape(), Shape({3, 0}));
  EXPECT_KILN_ERROR(diff(v, -1), "diff: n must be >= 0, got -1");
  const auto& p = golden("numeric", "dot");
  EXPECT_CLOSE(dot(p.tensor<B, 1>("a"), p.tensor<B, 1>("b")), p["out"], kTol, kTol);
  EXPECT_KILN_ERROR(dot(p.tensor<B, 1>("a"), p.tensor<B, 1>("a").narrow(0, 0, 3)),
                    "dot: the vectors have shapes [7] and [3], not one length");
}

TYPED_TEST(NumericOps, LogcumsumexpAndKthvalueMatchTorch) {
  using B = TypeParam;
  const auto& c = golden("numeric", "logcumsumexp");
  const auto x = c.tensor<B, 2>("x");
  EXPECT_CLOSE(logcumsumexp(x, 1), c["dim1"], 1e-12, 1e-12);
  EXPECT_CLOSE(logcumsumexp(x, 0), c["dim0"], 1e-12, 1e-12);
  const auto& k = golden("numeric", "kthvalue");
  const auto m = k.tensor<B, 2>("x");
  // The values are torch's; an index (a tie may pick either) points at its value.
  const auto [values, indices] = kthvalue(m, 3, 1);
  EXPECT_CLOSE(values, k["values"], 0, 0);
  EXPECT_CLOSE(m.gather(1, indices), k["values"], 0, 0);
  const auto [values0, indices0] = kthvalue(m, 2, 0);
  EXPECT_CLOSE(values0, k["values0"], 0, 0);
  EXPECT_CLOSE(indices0, k["indices0"], 0, 0);
  EXPECT_KILN_ERROR(kthvalue(m, 8, 1), "kthvalue: k = 8 is outside [1, 7] for dim 1 of shape [4, 7]");
}

TYPED_TEST(NumericOps, LinspaceAndNormalizeMatchTorch) {
  using B = TypeParam;
  const auto& c = golden("numeric", "linspace");
  // Within a unit in the last place: torch's vectorized loop rounds some points differently.
  EXPECT_CLOSE(linspace<B>(-1.0, 2.5, 7, {}, DType::f64), c["odd"], 1e-15, 1e-15);
  EXPECT_CLOSE(linspace<B>(0.1, 1.0, 10, {}, DType::f64), c["even"], 1e-15, 1e-15);
  EXPECT_CLOSE(linspace<B>(3.0, 5.0, 1, {}, DType::f64), c["one"], 0, 0);
  EXPECT_CLOSE(linspace<B>(0.0, 1.0, 11), c["f32"], 0, 0);
  EXPECT_KILN_ERROR(linspace<B>(0.0, 1.0, -2), "linspace: steps must be >= 0, got -2");
  const auto& n = golden("numeric", "normalize");
  const auto x = n.tensor<B, 3>("x");
  EXPECT_CLOSE(functional::normalize(x), n["default"], kTol, kTol);
  EXPECT_CLOSE(functional::normalize(x, 1.0, -1, 1e-3), n["l1_last"], kTol, kTol);
}
