// Conformance: every elementwise op of the catalogue against PyTorch golden values
// (tests/golden/gen_elementwise.py) in f64, f32, f16, bf16, i64, i32 and Bool, with NaN/inf,
// broadcasting, non-contiguous and empty inputs, large inputs (threads, streaming stores),
// bad input, and each op's gradient formula against finite differences.
#include "backends.hpp"
#include "golden.hpp"

#include <cmath>
#include <functional>
#include <limits>
#include <set>
#include <string>
#include <utility>
#include <vector>

using namespace kiln;
using kiln::test::golden;

KILN_BACKEND_TEST_SUITE(Elementwise);

namespace {

constexpr double kRtol32 = 1e-5, kAtol32 = 1e-6;
constexpr double kRtol64 = 1e-10, kAtol64 = 1e-12;

template <class B, std::size_t D> using UnaryFn = std::function<Tensor<B, D>(const Tensor<B, D>&)>;
template <class B, std::size_t D>
using BinaryFn = std::function<Tensor<B, D>(const Tensor<B, D>&, const Tensor<B, D>&)>;
template <class B, std::size_t D>
using CompareFn = std::function<Tensor<B, D, Bool>(const Tensor<B, D>&, const Tensor<B, D>&)>;

// The unary float ops of the Tensor API, by their case names in the fixture.
template <class B, std::size_t D> std::vector<std::pair<std::string, UnaryFn<B, D>>> unary_ops() {
  return {
      {"exp", [](const auto& x) { return x.exp(); }},
      {"log", [](const auto& x) { return x.log(); }},
      {"log1p", [](const auto& x) { return x.log1p(); }},
      {"expm1", [](const auto& x) { return x.expm1(); }},
      {"sqrt", [](const auto& x) { return x.sqrt(); }},
      {"rsqrt", [](const auto& x) { return x.rsqrt(); }},
      {"recip", [](const auto& x) { return x.recip(); }},
      {"sin", [](const auto& x) { return x.sin(); }},
      {"cos", [](const auto& x) { return x.cos(); }},
      {"tan", [](const auto& x) { return x.tan(); }},
      {"tanh", [](const auto& x) { return x.tanh(); }},
      {"erf", [](const auto& x) { return x.erf(); }},
      {"floor", [](const auto& x) { return x.floor(); }},
      {"ceil", [](const auto& x) { return x.ceil(); }},
      {"round", [](const auto& x) { return x.round(); }},
      {"sigmoid", [](const auto& x) { return x.sigmoid(); }},
      {"silu", [](const auto& x) { return x.silu(); }},
      {"softplus", [](const auto& x) { return x.softplus(); }},
      {"softplus_beta", [](const auto& x) { return x.softplus(2.0, 5.0); }},
      {"hard_sigmoid", [](const auto& x) { return x.hard_sigmoid(); }},
      {"gelu", [](const auto& x) { return x.gelu(); }},
      {"gelu_tanh", [](const auto& x) { return x.gelu(true); }},
      {"relu", [](const auto& x) { return x.relu(); }},
      {"leaky_relu", [](const auto& x) { return x.leaky_relu(0.1); }},
      {"neg", [](const auto& x) { return x.neg(); }},
      {"abs", [](const auto& x) { return x.abs(); }},
      {"sign", [](const auto& x) { return x.sign(); }},
      {"square", [](const auto& x) { return x.square(); }},
      {"asin", [](const auto& x) { return x.asin(); }},
      {"acos", [](const auto& x) { return x.acos(); }},
      {"atan", [](const auto& x) { return x.atan(); }},
      {"sinh", [](const auto& x) { return x.sinh(); }},
      {"cosh", [](const auto& x) { return x.cosh(); }},
      {"asinh", [](const auto& x) { return x.asinh(); }},
      {"acosh", [](const auto& x) { return x.acosh(); }},
      {"atanh", [](const auto& x) { return x.atanh(); }},
      {"log2", [](const auto& x) { return x.log2(); }},
      {"log10", [](const auto& x) { return x.log10(); }},
      {"exp2", [](const auto& x) { return x.exp2(); }},
      {"trunc", [](const auto& x) { return x.trunc(); }},
      {"frac", [](const auto& x) { return x.frac(); }},
  };
}

template <class B, std::size_t D> std::vector<std::pair<std::string, BinaryFn<B, D>>> arithmetic_ops() {
  return {
      {"add", [](const auto& a, const auto& b) { return a + b; }},
      {"sub", [](const auto& a, const auto& b) { return a - b; }},
      {"mul", [](const auto& a, const auto& b) { return a * b; }},
      {"div", [](const auto& a, const auto& b) { return a / b; }},
      {"rem", [](const auto& a, const auto& b) { return a % b; }},
      {"maximum", [](const auto& a, const auto& b) { return a.maximum(b); }},
      {"minimum", [](const auto& a, const auto& b) { return a.minimum(b); }},
      {"pow", [](const auto& a, const auto& b) { return a.pow(b); }},
      {"atan2", [](const auto& a, const auto& b) { return a.atan2(b); }},
      {"hypot", [](const auto& a, const auto& b) { return a.hypot(b); }},
      {"copysign", [](const auto& a, const auto& b) { return a.copysign(b); }},
      {"logaddexp", [](const auto& a, const auto& b) { return a.logaddexp(b); }},
  };
}

template <class B, std::size_t D> std::vector<std::pair<std::string, CompareFn<B, D>>> compare_ops() {
  return {
      {"eq", [](const auto& a, const auto& b) { return a.eq(b); }},
      {"ne", [](const auto& a, const auto& b) { return a.ne(b); }},
      {"lt", [](const auto& a, const auto& b) { return a.lt(b); }},
      {"le", [](const auto& a, const auto& b) { return a.le(b); }},
      {"gt", [](const auto& a, const auto& b) { return a.gt(b); }},
      {"ge", [](const auto& a, const auto& b) { return a.ge(b); }},
  };
}

// The unary predicates, by their case names in the fixture ("special_<name>").
template <class B, std::size_t D>
std::vector<std::pair<std::string, std::function<Tensor<B, D, Bool>(const Tensor<B, D>&)>>> predicate_ops() {
  return {
      {"isnan", [](const auto& x) { return x.isnan(); }},
      {"isinf", [](const auto& x) { return x.isinf(); }},
  };
}

// The Bool ops on the "logic" case's p and q, each with the label of its expected result.
template <class B> struct LogicOp {
  std::string name, label;
  std::function<Tensor<B, 2, Bool>(const Tensor<B, 2, Bool>&, const Tensor<B, 2, Bool>&)> fn;
};
template <class B> std::vector<LogicOp<B>> logic_ops() {
  return {
      {"and", "and_", [](const auto& p, const auto& q) { return p.logical_and(q); }},
      {"or", "or_", [](const auto& p, const auto& q) { return p.logical_or(q); }},
      {"xor", "xor", [](const auto& p, const auto& q) { return p.logical_xor(q); }},
      {"not", "not_p", [](const auto& p, const auto&) { return p.logical_not(); }},
  };
}

// Checks op(x) in f64 against the case's "out" and in f32 against "out32" (torch computing
// in f32), and that the result keeps the input's dtype (or is Bool, for predicates).
template <class B, std::size_t D, class Fn> void check_unary(const std::string& name, Fn&& op) {
  SCOPED_TRACE(name);
  const test::GoldenCase& c = golden("elementwise", name);
  for (DType dtype : {DType::f64, DType::f32}) {
    const auto y = op(c.tensor<B, D>("x", dtype));
    EXPECT_EQ(y.dtype(), y.dtype() == DType::boolean ? DType::boolean : dtype);
    if (dtype == DType::f64) EXPECT_CLOSE(y, c["out"], kRtol64, kAtol64);
    else EXPECT_CLOSE(y, c["out32"], kRtol32, kAtol32);
  }
}

template <class B, std::size_t D, class Fn> void check_binary(const std::string& name, Fn&& op) {
  SCOPED_TRACE(name);
  const test::GoldenCase& c = golden("elementwise", name);
  for (DType dtype : {DType::f64, DType::f32}) {
    const auto y = op(c.tensor<B, D>("a", dtype), c.tensor<B, D>("b", dtype));
    if (dtype == DType::f64) EXPECT_CLOSE(y, c["out"], kRtol64, kAtol64);
    else EXPECT_CLOSE(y, c["out32"], kRtol32, kAtol32);
  }
}

double first_value(const TensorData& data) { return data.to_vec<double>()[0]; }

}  // namespace

// ---------------------------------------------------------------- unary float ops

TYPED_TEST(Elementwise, UnaryOpsMatchTorchInF32AndF64) {
  using B = TypeParam;
  for (const auto& [name, op] : unary_ops<B, 2>()) check_unary<B, 2>("unary_" + name, op);
}

TYPED_TEST(Elementwise, UnaryOpsHandleNanInfAndSignedZerosLikeTorch) {
  // exp(inf) = inf, log(0) = -inf, log(-1) = nan, sqrt(-1) = nan, tanh(nan) = nan...
  using B = TypeParam;
  for (const auto& [name, op] : unary_ops<B, 1>()) check_unary<B, 1>("special_" + name, op);
}

TYPED_TEST(Elementwise, IsNanAndIsInfGiveBool) {
  using B = TypeParam;
  for (const auto& [name, op] : predicate_ops<B, 1>()) check_unary<B, 1>("special_" + name, op);
}

TYPED_TEST(Elementwise, ExpMatchesTorchInF32AndF64) {
  using B = TypeParam;
  const test::GoldenCase& c = golden("elementwise", "exp");
  for (DType dtype : {DType::f32, DType::f64}) {
    const auto x = c.tensor<B, 2>("x", dtype);
    EXPECT_CLOSE(x.exp(), c["out"], dtype == DType::f32 ? 1e-5 : 1e-12);
  }
}

// Where f64 exp underflows to subnormals and zero, and log of subnormals: a backend's own
// math (vectorized on the CPU, Kiln's helpers on GPUs) against the C library.
TYPED_TEST(Elementwise, F64ExpAndLogReachTheSubnormalRange) {
  using B = TypeParam;
  const double inf = std::numeric_limits<double>::infinity();
  const std::vector<double> xs{-inf, -800.0, -745.2, -720.0, -709.5, -708.5, -1.0, 0.0, 700.0, 710.0};
  const std::vector<double> tiny{5e-324, 1e-315, 1e-310, 2.2250738585072014e-308, 1e-300, 1.0};
  std::vector<double> exps, logs;
  for (double x : xs) exps.push_back(std::exp(x));
  for (double x : tiny) logs.push_back(std::log(x));
  auto f64 = [](const std::vector<double>& v) { return TensorData::from(v, Shape{static_cast<std::int64_t>(v.size())}); };
  const auto x = Tensor<B, 1>::from_data(f64(xs));
  const auto t = Tensor<B, 1>::from_data(f64(tiny));
  // Relative only: an absolute tolerance would accept anything this small.
  EXPECT_CLOSE(x.exp(), f64(exps), 1e-13, 0.0);
  EXPECT_CLOSE(t.log(), f64(logs), 1e-13, 0.0);
}

// The CPU's f32 exp and expm1 at the ends of their range: up to the overflow threshold
// (exp(88.72) is 3.39e38, below the largest float; exp(88.73) overflows) and down through the
// subnormals (exp(-100) is 3.8e-44, exp(-104) rounds to 0; expm1 goes to -1 there), on plain
// Cpu and in Fusion<Cpu>'s programs, against the C library's double functions rounded to
// float: 1e-6 relative, or two subnormal steps. A NaN stays NaN.
TEST(CpuElementwise, F32ExpAndExpm1ReachTheirOverflowThresholdAndTheSubnormals) {
  const float inf = std::numeric_limits<float>::infinity();
  const std::vector<float> xs{-inf, -150.0f, -104.0f, -103.9f, -100.0f, -95.0f, -88.5f, -87.3f, -20.0f, -1.0f,
                              -1e-3f, 0.0f, 1e-3f, 0.5f, 20.0f, 88.0f, 88.4f, 88.5f, 88.7f, 88.72f, 88.73f,
                              100.0f, inf, std::numeric_limits<float>::quiet_NaN()};
  const auto check = [&]<class B>(const char* backend, bool expm1) {
    SCOPED_TRACE(std::string(backend) + (expm1 ? " expm1" : " exp"));
    const auto x = Tensor<B, 1>::from_data(TensorData::from(xs, Shape{static_cast<std::int64_t>(xs.size())}));
    // + 0.0: on Fusion<Cpu>, the function runs as a step of a program, not as the per-op kernel.
    const std::vector<float> got = ((expm1 ? x.expm1() : x.exp()) + 0.0).template to_vec<float>();
    ASSERT_EQ(got.size(), xs.size());
    for (std::size_t i = 0; i < xs.size(); ++i) {
      const double xd = static_cast<double>(xs[i]);
      const auto want = static_cast<float>(expm1 ? std::expm1(xd) : std::exp(xd));
      if (std::isnan(want)) {
        EXPECT_TRUE(std::isnan(got[i])) << "at " << xs[i] << ": " << got[i];
      } else if (std::isinf(want)) {
        EXPECT_EQ(got[i], want) << "at " << xs[i];
      } else {
        EXPECT_NEAR(got[i], want, 1e-6 * std::abs(want) + 3e-45) << "at " << xs[i];
      }
    }
  };
  for (bool expm1 : {false, true}) {
    check.operator()<Cpu>("cpu", expm1);
    check.operator()<Fusion<Cpu>>("fusion_cpu", expm1);
  }
}

// The CPU's f32 erf (a rational approximation clamped at +-4) over every 97th float from
// 1e-30 to 4.5 and their negatives, on plain Cpu and in Fusion<Cpu>'s programs: within 8 ulp
// of the C library's double erf rounded to float (the worst measured is 7.4 ulp, at 3.9; one
// coefficient of such a fit wrong in its 5th digit is off by about 200). Past the clamp it is
// exactly +-1 (GELU's x/2 (1 + erf) is NaN at -inf, as in PyTorch); a NaN stays NaN (signed
// zeros: UnaryOpsHandleNanInfAndSignedZerosLikeTorch). GELU, which calls it, within 1e-6
// relative and 8 ulp of 1 times |x| / 2 (where x/2 (1 + erf) cancels).
TEST(CpuElementwise, F32ErfAndGeluAgainstTheCLibrary) {
  std::vector<float> xs;
  for (float x = 1e-30f; x < 4.5f;) {
    xs.push_back(x);
    xs.push_back(-x);
    for (int k = 0; k < 97; ++k) x = std::nextafter(x, 5.0f);
  }
  const float inf = std::numeric_limits<float>::infinity();
  for (float x : {0.0f, -0.0f, 3.99f, 4.0f, 4.01f, 9.0f, inf, -inf, std::numeric_limits<float>::quiet_NaN()})
    xs.push_back(x);
  const auto check = [&]<class B>(const char* backend) {
    SCOPED_TRACE(backend);
    const auto x = Tensor<B, 1>::from_data(TensorData::from(xs, Shape{static_cast<std::int64_t>(xs.size())}));
    // + 0.0: on Fusion<Cpu>, the function runs as a step of a program, not as the per-op kernel.
    const std::vector<float> erf = (x.erf() + 0.0).template to_vec<float>();
    const std::vector<float> gelu = (x.gelu() + 0.0).template to_vec<float>();
    ASSERT_EQ(erf.size(), xs.size());
    double worst = 0;
    for (std::size_t i = 0; i < xs.size(); ++i) {
      const double xd = static_cast<double>(xs[i]);
      const auto want = static_cast<float>(std::erf(xd));
      const auto want_gelu = static_cast<float>(0.5 * xd * (1.0 + std::erf(xd / std::sqrt(2.0))));
      if (std::isnan(xs[i])) {
        EXPECT_TRUE(std::isnan(erf[i]) && std::isnan(gelu[i])) << erf[i] << " " << gelu[i];
        continue;
      }
      if (std::abs(xs[i]) >= 4.0f) EXPECT_EQ(erf[i], want) << "at " << xs[i];
      const double ulp = std::nextafter(std::abs(want), 2.0f) - std::abs(want);
      worst = std::max(worst, std::abs(static_cast<double>(erf[i]) - want) / ulp);
      EXPECT_LE(std::abs(static_cast<double>(erf[i]) - want), 8 * ulp) << "erf at " << xs[i] << ": " << erf[i];
      if (!std::isinf(xs[i]))
        EXPECT_NEAR(gelu[i], want_gelu, 1e-6 * std::abs(want_gelu) + 2.4e-7 * std::abs(xd)) << "gelu at " << xs[i];
    }
    EXPECT_GT(worst, 0.5);  // the sweep reaches the approximation's error, not only exact points
  };
  check.operator()<Cpu>("cpu");
  check.operator()<Fusion<Cpu>>("fusion_cpu");
}

TYPED_TEST(Elementwise, HalfAndBFloat16ComputeThroughF32) {
  using B = TypeParam;
  const std::vector<std::pair<std::string, UnaryFn<B, 2>>> ops_ = {
      {"exp", [](const auto& x) { return x.exp(); }},
      {"tanh", [](const auto& x) { return x.tanh(); }},
      {"gelu", [](const auto& x) { return x.gelu(); }},
      {"sigmoid", [](const auto& x) { return x.sigmoid(); }},
      {"sqrt", [](const auto& x) { return x.sqrt(); }},
  };
  for (const auto& [name, op] : ops_) {
    SCOPED_TRACE(name);
    const test::GoldenCase& c = golden("elementwise", "half_" + name);
    for (DType dtype : {DType::f16, DType::bf16}) {
      const auto y = op(c.tensor<B, 2>("x", dtype));
      EXPECT_EQ(y.dtype(), dtype);
      EXPECT_CLOSE(y, c[dtype == DType::f16 ? "f16" : "bf16"], 1e-2, 1e-2);
    }
  }
  const test::GoldenCase& add = golden("elementwise", "half_add");
  const test::GoldenCase& mul = golden("elementwise", "half_mul_scalar");
  const test::GoldenCase& lt = golden("elementwise", "half_lt");
  for (DType dtype : {DType::f16, DType::bf16}) {
    const char* label = dtype == DType::f16 ? "f16" : "bf16";
    const auto sum = add.tensor<B, 2>("a", dtype) + add.tensor<B, 2>("b", dtype);
    EXPECT_EQ(sum.dtype(), dtype);
    EXPECT_CLOSE(sum, add[label], 1e-2, 1e-2);
    EXPECT_CLOSE(mul.tensor<B, 2>("a", dtype) * 1.5, mul[label], 1e-2, 1e-2);
    EXPECT_CLOSE(lt.tensor<B, 2>("a", dtype).lt(lt.tensor<B, 2>("b", dtype)), lt[label]);
  }
}

// ---------------------------------------------------------------- binary float ops

TYPED_TEST(Elementwise, BinaryOpsMatchTorchInF32AndF64) {
  using B = TypeParam;
  for (const auto& [name, op] : arithmetic_ops<B, 2>()) check_binary<B, 2>("binary_" + name, op);
  for (const auto& [name, op] : compare_ops<B, 2>()) check_binary<B, 2>("binary_" + name, op);
}

TYPED_TEST(Elementwise, PowHandlesNegativeBasesAndSpecialValues) {
  using B = TypeParam;
  check_binary<B, 1>("pow_special", [](const auto& a, const auto& b) { return a.pow(b); });
}

// Every quadrant and axis, with signed zeros, infinities and NaN, as std::atan2.
TYPED_TEST(Elementwise, Atan2HandlesEveryQuadrantAndSpecialValues) {
  using B = TypeParam;
  check_binary<B, 1>("atan2_special", [](const auto& a, const auto& b) { return a.atan2(b); });
}

// Zeros of either sign, infinities, NaN and a pair that would overflow a^2 + b^2.
TYPED_TEST(Elementwise, HypotCopysignAndLogaddexpHandleSpecialValues) {
  using B = TypeParam;
  check_binary<B, 1>("hypot_special", [](const auto& a, const auto& b) { return a.hypot(b); });
  check_binary<B, 1>("copysign_special", [](const auto& a, const auto& b) { return a.copysign(b); });
  check_binary<B, 1>("logaddexp_special", [](const auto& a, const auto& b) { return a.logaddexp(b); });
}

TYPED_TEST(Elementwise, RemKeepsTheSignOfTheDivisor) {
  using B = TypeParam;
  check_binary<B, 1>("rem_signs", [](const auto& a, const auto& b) { return a.rem(b); });
}

TYPED_TEST(Elementwise, MaximumMinimumAndComparisonsHandleNan) {
  using B = TypeParam;
  check_binary<B, 1>("maximum_nan", [](const auto& a, const auto& b) { return a.maximum(b); });
  check_binary<B, 1>("minimum_nan", [](const auto& a, const auto& b) { return a.minimum(b); });
  for (const auto& [name, op] : compare_ops<B, 1>()) check_binary<B, 1>("compare_nan_" + name, op);
}

TYPED_TEST(Elementwise, BroadcastingStretchesSizeOneDimsOnBothSides) {
  // [2, 1, 4] op [1, 3, 1] -> [2, 3, 4]
  using B = TypeParam;
  const std::vector<std::pair<std::string, BinaryFn<B, 3>>> ops_ = {
      {"add", [](const auto& a, const auto& b) { return a + b; }},
      {"sub", [](const auto& a, const auto& b) { return a - b; }},
      {"mul", [](const auto& a, const auto& b) { return a * b; }},
      {"div", [](const auto& a, const auto& b) { return a / b; }},
      {"maximum", [](const auto& a, const auto& b) { return a.maximum(b); }},
  };
  for (const auto& [name, op] : ops_) {
    SCOPED_TRACE(name);
    const test::GoldenCase& c = golden("elementwise", "broadcast_" + name);
    for (DType dtype : {DType::f64, DType::f32}) {
      const auto a = c.tensor<B, 3>("a", dtype);
      const auto b = c.tensor<B, 2>("b", dtype).template unsqueeze<3>();
      // Both operand orders: the broadcast operand on the left and on the right.
      const auto y = op(a, b);
      EXPECT_EQ(y.shape(), Shape({2, 3, 4}));
      EXPECT_CLOSE(y, c[dtype == DType::f64 ? "out" : "out32"], dtype == DType::f64 ? kRtol64 : kRtol32);
    }
  }
  const test::GoldenCase& lt = golden("elementwise", "broadcast_lt");
  EXPECT_CLOSE(lt.tensor<B, 3>("a").lt(lt.tensor<B, 2>("b").template unsqueeze<3>()), lt["out"]);
}

TYPED_TEST(Elementwise, AddBroadcastsSizeOneAndMissingDims) {
  using B = TypeParam;
  const test::GoldenCase& c = golden("elementwise", "add_broadcast");
  const auto a = c.tensor<B, 3>("a");
  const auto b = c.tensor<B, 2>("b").template unsqueeze<3>();
  EXPECT_CLOSE(a + b, c["out"]);
  EXPECT_CLOSE(b + a, c["out"]);
}

TYPED_TEST(Elementwise, ScalarOperandsOnEitherSide) {
  using B = TypeParam;
  const double x00 = first_value(golden("elementwise", "scalar_eq")["x"]);
  const std::vector<std::pair<std::string, UnaryFn<B, 2>>> ops_ = {
      {"add", [](const auto& x) { return x + 2.5; }},
      {"sub", [](const auto& x) { return x - 2.5; }},
      {"mul", [](const auto& x) { return x * 2.5; }},
      {"div", [](const auto& x) { return x / 2.5; }},
      {"rem", [](const auto& x) { return x % 2.5; }},
      {"rem_neg", [](const auto& x) { return x.rem(-2.5); }},
      {"pow2", [](const auto& x) { return x.pow(2.0); }},
      {"pow3", [](const auto& x) { return x.pow(3.0); }},
      {"maximum", [](const auto& x) { return x.clamp_min(0.5); }},
      {"minimum", [](const auto& x) { return x.clamp_max(0.5); }},
      {"clamp", [](const auto& x) { return x.clamp(-1.0, 1.5); }},
      {"rsub", [](const auto& x) { return 2.0 - x; }},
      {"rdiv", [](const auto& x) { return 2.0 / x; }},
      {"radd", [](const auto& x) { return 2.0 + x; }},
      {"rmul", [](const auto& x) { return 2.0 * x; }},
  };
  for (const auto& [name, op] : ops_) check_unary<B, 2>("scalar_" + name, op);
  check_unary<B, 2>("scalar_eq", [&](const auto& x) { return x.eq(x00); });
  check_unary<B, 2>("scalar_ne", [&](const auto& x) { return x.ne(x00); });
  check_unary<B, 2>("scalar_lt", [](const auto& x) { return x.lt(0.5); });
  check_unary<B, 2>("scalar_le", [&](const auto& x) { return x.le(x00); });
  check_unary<B, 2>("scalar_gt", [](const auto& x) { return x.gt(0.5); });
  check_unary<B, 2>("scalar_ge", [&](const auto& x) { return x.ge(x00); });
}

TYPED_TEST(Elementwise, PowWithScalarExponents) {
  // 2, 3, 0.5, -0.5, -1 and -2 take faster paths (x * x, sqrt, rsqrt, recip...); all must agree with torch.
  using B = TypeParam;
  for (const std::string e : {"0.5", "-0.5", "-1", "1.7", "-2"})
    check_unary<B, 2>("scalar_pow_" + e, [&](const auto& x) { return x.pow(std::stod(e)); });
  for (const std::string e : {"2", "3", "0.5", "-0.5", "-1", "-2", "1.7"})
    check_unary<B, 1>("special_pow_" + e, [&](const auto& x) { return x.pow(std::stod(e)); });
}

// ---------------------------------------------------------------- layouts

TYPED_TEST(Elementwise, NonContiguousInputsTransposedAndSlicedWithSteps) {
  using B = TypeParam;
  const test::GoldenCase& c = golden("elementwise", "strided_inputs");
  for (DType dtype : {DType::f64, DType::f32}) {
    const double rtol = dtype == DType::f64 ? kRtol64 : kRtol32;
    const auto transposed = c.tensor<B, 2>("base", dtype).transpose();                           // [3, 4]
    const auto sliced = c.tensor<B, 2>("grid", dtype).slice({ops::Slice(0, 6, 2), ops::Slice(1, 8, 2)});  // [3, 4]
    EXPECT_CLOSE(transposed.exp(), c["exp_t"], rtol);
    EXPECT_CLOSE(sliced.gelu(), c["gelu_s"], rtol);
    EXPECT_CLOSE(transposed + sliced, c["add"], rtol);
    EXPECT_CLOSE(sliced + transposed - sliced + sliced, c["add"], rtol * 10, 1e-6);
    EXPECT_CLOSE(transposed * 3.0, c["mul_scalar"], rtol);
    EXPECT_CLOSE(transposed.lt(sliced), c["lt"]);
    EXPECT_CLOSE(sliced.sign(), c["sign_s"]);
  }
}

TYPED_TEST(Elementwise, EmptyTensorsGiveEmptyResults) {
  using B = TypeParam;
  const auto x = Tensor<B, 2>::zeros({0, 3});
  EXPECT_EQ(x.exp().shape(), Shape({0, 3}));
  EXPECT_EQ(x.gelu().shape(), Shape({0, 3}));
  EXPECT_EQ((x + x).shape(), Shape({0, 3}));
  EXPECT_EQ((x + 1.0).shape(), Shape({0, 3}));
  EXPECT_EQ((2.0 - x).shape(), Shape({0, 3}));
  EXPECT_EQ((x + Tensor<B, 2>::ones({1, 3})).shape(), Shape({0, 3}));
  EXPECT_EQ(x.lt(x).shape(), Shape({0, 3}));
  EXPECT_EQ(x.isnan().shape(), Shape({0, 3}));
  EXPECT_EQ(where(x.lt(1.0), x, x).shape(), Shape({0, 3}));
  EXPECT_EQ(x.mask_fill(x.gt(0.0), 1.0).shape(), Shape({0, 3}));
  const auto i = Tensor<B, 2, Int>::zeros({0, 3});
  EXPECT_EQ((i / i).shape(), Shape({0, 3}));
  EXPECT_EQ(x.cast(DType::f16).exp().shape(), Shape({0, 3}));
}

// Sizes past the parallel grain and the last-level cache: split among threads, streamed
// stores, runs that start at unaligned addresses, and tails shorter than a register.
TYPED_TEST(Elementwise, LargeInputsMatchTheScalarFormulas) {
  using B = TypeParam;
  const std::int64_t n = 100003;
  const auto x = Tensor<B, 1>::random({n}, Distribution::normal(0, 2));
  const auto y = Tensor<B, 1>::random({n}, Distribution::normal(0, 2));
  const auto xs = x.template to_vec<float>(), ys = y.template to_vec<float>();
  const auto sum = (x + y).template to_vec<float>();
  const auto gelu = x.gelu().template to_vec<float>();
  const auto less = x.lt(y).template to_vec<bool>();
  const auto scaled = (x * 0.5).template to_vec<float>();
  for (std::size_t i = 0; i < xs.size(); ++i) {
    ASSERT_EQ(sum[i], xs[i] + ys[i]) << i;
    ASSERT_NEAR(gelu[i], ops::GeluErf::apply<double>(xs[i]), 1e-5 + 1e-5 * std::abs(gelu[i])) << i;
    ASSERT_EQ(less[i], xs[i] < ys[i]) << i;
    ASSERT_EQ(scaled[i], xs[i] * 0.5f) << i;
  }
  // 5000 rows of 1001 of a [5000, 1002] tensor: 40 MB touched, past the cache, rows at unaligned offsets.
  const auto big = Tensor<B, 2>::random({5000, 1002}, Distribution::uniform(-1, 1));
  const auto view = big.slice({ops::Slice(), ops::Slice(1, std::nullopt)});
  const auto doubled = (view + view).template to_vec<float>();
  const auto expected = view.template to_vec<float>();
  ASSERT_EQ(doubled.size(), expected.size());
  for (std::size_t i = 0; i < expected.size(); ++i) ASSERT_EQ(doubled[i], expected[i] * 2) << i;
  const auto contiguous_sum = (big + big).template to_vec<float>();
  const auto big_values = big.template to_vec<float>();
  for (std::size_t i = 0; i < big_values.size(); i += 997) ASSERT_EQ(contiguous_sum[i], big_values[i] * 2) << i;
  // Ops with long formulas past the cache (their contiguous inputs fetched ahead on the CPU),
  // on the whole tensor, on the strided view and beside a broadcast operand.
  const auto row = Tensor<B, 2>::random({1, 1001}, Distribution::uniform(-1, 1));
  const auto whole_gelu = big.gelu().template to_vec<float>();
  const auto view_gelu = view.gelu().template to_vec<float>();
  const auto angle = view.atan2(row).template to_vec<float>();
  const auto angle_twice = big.atan2(big + 0.5).template to_vec<float>();
  const auto rows = row.template to_vec<float>();
  for (std::size_t i = 0; i < big_values.size(); i += 331) {
    ASSERT_NEAR(whole_gelu[i], ops::GeluErf::apply<double>(big_values[i]), 1e-5) << i;
    ASSERT_NEAR(angle_twice[i], std::atan2(double(big_values[i]), big_values[i] + 0.5), 1e-5) << i;
  }
  for (std::size_t i = 0; i < expected.size(); i += 331) {
    ASSERT_NEAR(view_gelu[i], ops::GeluErf::apply<double>(expected[i]), 1e-5) << i;
    ASSERT_NEAR(angle[i], std::atan2(double(expected[i]), rows[i % 1001]), 1e-5) << i;
  }
}

// ---------------------------------------------------------------- integers

TYPED_TEST(Elementwise, IntOpsMatchTorchInI64AndI32) {
  using B = TypeParam;
  const test::GoldenCase& c = golden("elementwise", "int_ops");
  for (DType dtype : {DType::i64, DType::i32}) {
    SCOPED_TRACE(dtype_name(dtype));
    const auto a = c.tensor<B, 1, Int>("a", dtype);
    const auto b = c.tensor<B, 1, Int>("b", dtype);
    EXPECT_EQ((a + b).dtype(), dtype);
    EXPECT_CLOSE(a + b, c["add"]);
    EXPECT_CLOSE(a - b, c["sub"]);
    EXPECT_CLOSE(a * b, c["mul"]);
    EXPECT_CLOSE(a / b, c["div"]);  // floor division
    EXPECT_CLOSE(a % b, c["rem"]);  // divisor's sign
    if (dtype == DType::i64) EXPECT_CLOSE(a.pow(b.abs()), c["pow"]);  // 100^7 needs i64
    EXPECT_CLOSE(a.abs(), c["abs"]);
    EXPECT_CLOSE(-a, c["neg"]);
    EXPECT_CLOSE(a.sign(), c["sign"]);
    EXPECT_CLOSE(a.maximum(b), c["maximum"]);
    EXPECT_CLOSE(a.minimum(b), c["minimum"]);
    EXPECT_CLOSE(a.eq(b), c["eq"]);
    EXPECT_CLOSE(a.ne(b), c["ne"]);
    EXPECT_CLOSE(a.lt(b), c["lt"]);
    EXPECT_CLOSE(a.le(b), c["le"]);
    EXPECT_CLOSE(a.gt(b), c["gt"]);
    EXPECT_CLOSE(a.ge(b), c["ge"]);
    EXPECT_CLOSE(a + 3.0, c["add_s"]);
    EXPECT_CLOSE(a * -2.0, c["mul_s"]);
    EXPECT_CLOSE(a / 3.0, c["div_s"]);
    EXPECT_CLOSE(a % -3.0, c["rem_s"]);
    EXPECT_CLOSE(a.pow(2.0), c["pow_s"]);
    EXPECT_CLOSE(a.lt(3.0), c["lt_s"]);
    EXPECT_CLOSE(a.clamp(-5, 5), c["clamp"]);
    EXPECT_CLOSE(10.0 - a, c["rsub"]);
    EXPECT_CLOSE(10.0 / b, c["rdiv"]);
  }
}

TYPED_TEST(Elementwise, IntDivisionByZeroGivesZeroAndNeverTraps) {
  // PyTorch raises; Kiln's kernels return 0 (see ops::Div and ops::Rem).
  using B = TypeParam;
  for (DType dtype : {DType::i64, DType::i32}) {
    SCOPED_TRACE(dtype_name(dtype));
    const auto a = Tensor<B, 1, Int>::from({7, -7, 0}, {}, dtype);
    const auto zero = Tensor<B, 1, Int>::zeros({3}, {}, dtype);
    EXPECT_EQ((a / zero).to_vec(), (std::vector<std::int64_t>{0, 0, 0}));
    EXPECT_EQ((a % zero).to_vec(), (std::vector<std::int64_t>{0, 0, 0}));
    EXPECT_EQ((a / 0.0).to_vec(), (std::vector<std::int64_t>{0, 0, 0}));
    // The most negative value divided by -1 wraps instead of trapping (x86 raises SIGFPE on it).
    const std::int64_t lowest = dtype == DType::i64 ? std::numeric_limits<std::int64_t>::min()
                                                    : std::numeric_limits<std::int32_t>::min();
    const auto m = Tensor<B, 1, Int>::from({lowest, 9}, {}, dtype);
    EXPECT_EQ((m / -1.0).to_vec(), (std::vector<std::int64_t>{lowest, -9}));
    EXPECT_EQ((m % -1.0).to_vec(), (std::vector<std::int64_t>{0, 0}));
  }
}

TYPED_TEST(Elementwise, IntPowWithNegativeExponentTruncates) {
  using B = TypeParam;
  const auto base = Tensor<B, 1, Int>::from({1, -1, -1, 2, 0});
  const auto exponent = Tensor<B, 1, Int>::from({-3, -3, -2, -1, 2});
  EXPECT_EQ(base.pow(exponent).to_vec(), (std::vector<std::int64_t>{1, -1, 1, 0, 0}));
}

// Integer overflow wraps around (two's complement), as in PyTorch: no undefined behaviour
// in the kernels (UBSan found 3^40 in i32), the same bits on every backend. Values go in
// and out through TensorData's i64, exactly (from({...}) and to_vec() pass through double,
// exact only up to 2^53).
TYPED_TEST(Elementwise, IntArithmeticWrapsOnOverflow) {
  using B = TypeParam;
  for (DType dtype : {DType::i64, DType::i32}) {
    SCOPED_TRACE(dtype_name(dtype));
    const auto ints = [&](const std::vector<std::int64_t>& v) {
      return Tensor<B, 1, Int>::from_data(TensorData::from(v, Shape{static_cast<std::int64_t>(v.size())}).convert(dtype));
    };
    const auto values = [](const Tensor<B, 1, Int>& t) {
      const TensorData data = t.into_data().convert(DType::i64);
      const auto span = data.as<std::int64_t>();
      return std::vector<std::int64_t>(span.begin(), span.end());
    };
    const bool wide = dtype == DType::i64;
    const std::int64_t max = wide ? std::numeric_limits<std::int64_t>::max() : std::numeric_limits<std::int32_t>::max();
    const std::int64_t min = wide ? std::numeric_limits<std::int64_t>::min() : std::numeric_limits<std::int32_t>::min();
    const auto a = ints({max, min, max});
    const auto b = ints({1, -1, 2});
    EXPECT_EQ(values(a + b), (std::vector<std::int64_t>{min, max, min + 1}));
    EXPECT_EQ(values(a - b), (std::vector<std::int64_t>{max - 1, min + 1, max - 2}));
    EXPECT_EQ(values(a * b), (std::vector<std::int64_t>{max, min, -2}));
    EXPECT_EQ(values(-a), (std::vector<std::int64_t>{min + 1, min, min + 1}));
    EXPECT_EQ(values(a.abs()), (std::vector<std::int64_t>{max, min, max}));
    // 3^40 = 12157665459056928801 and 3^20 = 3486784401, mod 2^64 or 2^32, as signed values.
    EXPECT_EQ(values(ints({3, 3}).pow(ints({40, 20}))),
              (std::vector<std::int64_t>{wide ? -6289078614652622815 : 689956897,
                                         wide ? 3486784401 : 3486784401 - 4294967296}));
  }
}

TYPED_TEST(Elementwise, IntScalarsMustBeIntegers) {
  using B = TypeParam;
  const auto a = Tensor<B, 1, Int>::from({1, 2, 3});
  EXPECT_KILN_ERROR(a + 2.5, "add: the scalar 2.5 is not a i64 value");
  EXPECT_KILN_ERROR(a.lt(0.5), "lt: the scalar 0.5 is not a i64 value");
  EXPECT_KILN_ERROR(a.cast(DType::i32) * 3e9, "mul: the scalar 3000000000 is not a i32 value");
  EXPECT_KILN_ERROR(2.5 / a, "div: the scalar 2.5 is not an integer");
  EXPECT_KILN_ERROR(a.mask_fill(a.gt(1.0), 0.5), "mask_fill: the scalar 0.5 is not an integer");
}

// ---------------------------------------------------------------- Bool logic and selection

TYPED_TEST(Elementwise, LogicOpsAndOperators) {
  using B = TypeParam;
  const test::GoldenCase& c = golden("elementwise", "logic");
  const auto p = c.tensor<B, 2, Bool>("p");
  const auto q = c.tensor<B, 2, Bool>("q");
  for (const auto& op : logic_ops<B>()) EXPECT_CLOSE(op.fn(p, q), c[op.label]) << op.name;
  EXPECT_CLOSE(p & q, c["and_"]);
  EXPECT_CLOSE(p | q, c["or_"]);
  EXPECT_CLOSE(p ^ q, c["xor"]);
  EXPECT_CLOSE(!p, c["not_p"]);
  EXPECT_CLOSE(p.eq(q), c["eq"]);
  EXPECT_CLOSE(p.ne(q), c["ne"]);
  EXPECT_CLOSE(p.transpose().logical_and(q.transpose()).transpose(), c["and_"]);
}

TYPED_TEST(Elementwise, WhereBroadcastsConditionAndBranches) {
  using B = TypeParam;
  const test::GoldenCase& c = golden("elementwise", "where");
  for (DType dtype : {DType::f64, DType::f32}) {
    const auto cond = c.tensor<B, 2, Bool>("cond");  // [3, 1]
    const auto out = where(cond, c.tensor<B, 2>("a", dtype), c.tensor<B, 2>("b", dtype));  // [3, 4] and [1, 4]
    EXPECT_EQ(out.dtype(), dtype);
    EXPECT_CLOSE(out, c["out"], kRtol32);
  }
}

TYPED_TEST(Elementwise, MaskWhereAndMaskFill) {
  using B = TypeParam;
  const test::GoldenCase& c = golden("elementwise", "mask");
  const auto x = c.tensor<B, 2>("x");
  const auto mask = c.tensor<B, 2, Bool>("mask");
  EXPECT_CLOSE(x.mask_where(mask, c.tensor<B, 2>("value")), c["mask_where"]);
  EXPECT_CLOSE(x.mask_fill(mask, -7.5), c["mask_fill"]);
  EXPECT_CLOSE(x.transpose().mask_fill(mask.transpose(), -7.5).transpose(), c["mask_fill"]);
  const test::GoldenCase& ci = golden("elementwise", "mask_int");
  const auto xi = ci.tensor<B, 2, Int>("x");
  EXPECT_CLOSE(xi.mask_fill(xi.gt(2.0), 0.0), ci["mask_fill"]);
  EXPECT_CLOSE(xi.mask_fill(ci.tensor<B, 2, Bool>("mask"), 0.0), ci["mask_fill"]);
}

// ---------------------------------------------------------------- bad input

TYPED_TEST(Elementwise, AddRejectsShapesThatDoNotBroadcast) {
  using B = TypeParam;
  const auto a = Tensor<B, 2>::zeros({2, 3});
  const auto b = Tensor<B, 2>::zeros({4, 3});
  EXPECT_KILN_ERROR(a + b, "add: shapes [2, 3] and [4, 3] do not broadcast");
  EXPECT_KILN_ERROR(a.lt(b), "lt: shapes [2, 3] and [4, 3] do not broadcast");
  EXPECT_KILN_ERROR(a.pow(b), "pow: shapes [2, 3] and [4, 3] do not broadcast");
  EXPECT_KILN_ERROR(where(a.lt(0.0), a, b), "where: shapes");
  const auto p = Tensor<B, 2, Bool>(provided::full<B>(Shape{2, 3}, 1.0, DType::boolean, {}));
  const auto q = Tensor<B, 2, Bool>(provided::full<B>(Shape{4, 3}, 1.0, DType::boolean, {}));
  EXPECT_KILN_ERROR(p & q, "and: shapes [2, 3] and [4, 3] do not broadcast");
}

TYPED_TEST(Elementwise, MixedDtypesAreRejectedNamingOpShapesAndDtypes) {
  using B = TypeParam;
  const auto a = Tensor<B, 2>::zeros({2, 3});
  const auto b = Tensor<B, 2>::zeros({2, 3}, {}, DType::f64);
  EXPECT_KILN_ERROR(a + b, "add: both operands must have the same dtype, got [2, 3] f32 and [2, 3] f64");
  EXPECT_KILN_ERROR(a.div(b), "div: both operands must have the same dtype, got [2, 3] f32 and [2, 3] f64");
  EXPECT_KILN_ERROR(a.ge(b), "ge: both operands must have the same dtype");
  EXPECT_KILN_ERROR(where(a.lt(0.0), a, b),
                    "where: both branches must have the same dtype, got [2, 3] f32 and [2, 3] f64");
}

TYPED_TEST(Elementwise, BackendRejectsDtypesOutsideAnOpsDomain) {
  // The Tensor API rules these out at compile time; the backend checks at run time too.
  using B = TypeParam;
  const auto i = provided::full<B>(Shape{2}, 1.0, DType::i64, {});
  const auto f = provided::full<B>(Shape{2}, 1.0, DType::f32, {});
  const auto x = provided::full<B>(Shape{2}, 1.0, DType::boolean, {});
  EXPECT_KILN_ERROR((provided::unary<B, ops::Exp>(i)), "exp: expected a float tensor, got i64");
  EXPECT_KILN_ERROR((provided::unary<B, ops::Neg>(x)), "neg: expected a float or int tensor, got bool");
  EXPECT_KILN_ERROR((provided::binary<B, ops::LogicalAnd>(f, f)), "and: expected a bool tensor, got f32");
  EXPECT_KILN_ERROR((provided::binary_scalar<B, ops::Add>(x, 1.0)), "add: expected a float or int tensor, got bool");
  EXPECT_KILN_ERROR(provided::where<B>(f, f, f), "where: the condition must be bool, got [2] f32");
}

// ---------------------------------------------------------------- every op is covered

TYPED_TEST(Elementwise, EveryCatalogueOpRunsThroughTheBackend) {
  // A tripwire: an op added to the catalogue runs here (and fails until a backend has it).
  using B = TypeParam;
  const auto f = B::from_data(TensorData::from(std::vector<double>{0.25, -1.5, 2.0}, Shape{3}).convert(DType::f32), {});
  const auto i = B::from_data(TensorData::from(std::vector<double>{3, -2, 5}, Shape{3}).convert(DType::i64), {});
  const auto p = B::from_data(TensorData::from(std::vector<double>{1, 0, 1}, Shape{3}).convert(DType::boolean), {});
  std::set<std::string> ran;
  auto operand = [&]<class Op>() {
    if constexpr (Op::domain == ops::Domain::boolean) return p;
    else if constexpr (Op::domain == ops::Domain::numeric) return i;
    else return f;
  };
#define KILN_TEST_UNARY(Op)                                                                       \
  {                                                                                               \
    const auto x = operand.template operator()<ops::Op>();                                        \
    const auto y = provided::unary<B, ops::Op>(x);                                                 \
    EXPECT_EQ(B::dtype(y), ops::is_predicate<ops::Op> ? DType::boolean : B::dtype(x)) << #Op;   \
    ran.insert(std::string(ops::Op::name));                                                       \
  }
#define KILN_TEST_BINARY(Op)                                                                      \
  {                                                                                               \
    const auto x = operand.template operator()<ops::Op>();                                        \
    const auto y = provided::binary<B, ops::Op>(x, x);                                             \
    EXPECT_EQ(B::dtype(y), ops::is_predicate<ops::Op> ? DType::boolean : B::dtype(x)) << #Op;   \
    ran.insert(std::string(ops::Op::name));                                                       \
  }
  KILN_UNARY_OPS(KILN_TEST_UNARY)
  KILN_BINARY_OPS(KILN_TEST_BINARY)
#undef KILN_TEST_UNARY
#undef KILN_TEST_BINARY
  EXPECT_EQ(ran.size(), static_cast<std::size_t>(ops::unary_op_count + ops::binary_op_count));
}

// Every catalogue op on operands the caller gives up (rvalues), whose buffers a backend may
// write the result over: the same values as on kept operands, for a given-up operand with a
// broadcast partner, and a copy of a given-up operand that the caller kept keeps its values.
TYPED_TEST(Elementwise, EveryCatalogueOpOnGivenUpOperandsMatchesKeptOnes) {
  using B = TypeParam;
  using P = typename B::Primitive;
  // Operands of the op's domain, each a fresh buffer that nothing else holds: [2, 2], or its
  // first row alone ([1, 2], which broadcasts over the rows).
  const auto fresh = [&]<class Op>(bool second, bool row = false) -> P {
    std::vector<double> values;
    DType dtype = DType::f32;
    if constexpr (Op::domain == ops::Domain::boolean) {
      values = second ? std::vector<double>{1, 1, 0, 0} : std::vector<double>{1, 0, 1, 0};
      dtype = DType::boolean;
    } else if constexpr (Op::domain == ops::Domain::numeric) {
      values = second ? std::vector<double>{2, -3, 1, 4} : std::vector<double>{3, -2, 5, 7};
      dtype = DType::i64;
    } else {
      values = second ? std::vector<double>{0.5, 1.25, -0.75, 3.0} : std::vector<double>{0.25, -1.5, 2.0, 0.875};
    }
    if (row) values.resize(2);
    const Shape shape{row ? 1 : 2, 2};
    return B::from_data(TensorData::from(std::move(values), shape).convert(dtype), {});
  };
  const auto same = [](const P& actual, const P& expected) {
    return test::all_close(B::into_data(actual), B::into_data(expected), 0, 0);
  };
#define KILN_TEST_UNARY(Op)                                                                      \
  {                                                                                              \
    SCOPED_TRACE(#Op);                                                                           \
    const P x = fresh.template operator()<ops::Op>(false);                                       \
    const P expected = provided::unary<B, ops::Op>(x);                                           \
    EXPECT_TRUE(same(provided::unary<B, ops::Op>(fresh.template operator()<ops::Op>(false)), expected)); \
    P shared = x;                                                                                \
    const TensorData before = B::into_data(x);                                                   \
    EXPECT_TRUE(same(provided::unary<B, ops::Op>(std::move(shared)), expected));                 \
    EXPECT_TRUE(test::all_close(B::into_data(x), before, 0, 0));                                 \
  }
#define KILN_TEST_BINARY(Op)                                                                     \
  {                                                                                              \
    SCOPED_TRACE(#Op);                                                                           \
    const P a = fresh.template operator()<ops::Op>(false), b = fresh.template operator()<ops::Op>(true); \
    const P expected = provided::binary<B, ops::Op>(a, b);                                       \
    EXPECT_TRUE(same(provided::binary<B, ops::Op>(fresh.template operator()<ops::Op>(false),     \
                                                  fresh.template operator()<ops::Op>(true)), expected)); \
    EXPECT_TRUE(same(provided::binary<B, ops::Op>(P(a), fresh.template operator()<ops::Op>(true)), expected)); \
    EXPECT_TRUE(same(provided::binary<B, ops::Op>(fresh.template operator()<ops::Op>(false), P(b)), expected)); \
    const P row = fresh.template operator()<ops::Op>(false, true);                              \
    EXPECT_TRUE(same(provided::binary<B, ops::Op>(fresh.template operator()<ops::Op>(false, true),              \
                                                  fresh.template operator()<ops::Op>(true)),    \
                     provided::binary<B, ops::Op>(row, b)));                                    \
    EXPECT_TRUE(test::all_close(B::into_data(a), B::into_data(fresh.template operator()<ops::Op>(false)), 0, 0)); \
    if constexpr (ops::Op::domain != ops::Domain::boolean) {                                     \
      EXPECT_TRUE(same(provided::binary_scalar<B, ops::Op>(fresh.template operator()<ops::Op>(false), 2.0), \
                       provided::binary_scalar<B, ops::Op>(a, 2.0)));                           \
    }                                                                                            \
  }
  KILN_UNARY_OPS(KILN_TEST_UNARY)
  KILN_BINARY_OPS(KILN_TEST_BINARY)
#undef KILN_TEST_UNARY
#undef KILN_TEST_BINARY
}

// The test lists above are checked against the op catalogue: an op added to
// ops/elementwise.hpp that no list runs, or that has no golden case from PyTorch
// (tests/golden/gen_elementwise.py), fails here by name. Unary ops need "unary_<name>" and
// "special_<name>" (NaN, infinities, signed zeros), predicates "special_<name>", binary ops
// "binary_<name>", the Bool ops the "logic" case.
TEST(ElementwiseCatalogue, EveryOpHasGoldenCasesAndATestThatRunsThem) {
  using B = kiln::Cpu;
  std::set<std::string> listed;
  for (const auto& entry : unary_ops<B, 1>()) listed.insert(entry.first);
  for (const auto& entry : predicate_ops<B, 1>()) listed.insert(entry.first);
  for (const auto& entry : arithmetic_ops<B, 1>()) listed.insert(entry.first);
  for (const auto& entry : compare_ops<B, 1>()) listed.insert(entry.first);
  for (const auto& op : logic_ops<B>()) listed.insert(op.name);
  const std::vector<std::string> case_names = test::golden_case_names("elementwise");
  const std::set<std::string> cases(case_names.begin(), case_names.end());
  auto check = [&]<class Op>(bool binary) {
    const std::string name(Op::name);
    EXPECT_TRUE(listed.count(name)) << "the catalogue op '" << name
                                    << "' is in none of the op lists of tests/backend/elementwise_test.cpp";
    std::vector<std::string> needed;
    if (Op::domain == ops::Domain::boolean) needed = {"logic"};
    else if (binary) needed = {"binary_" + name};
    else if (ops::is_predicate<Op>) needed = {"special_" + name};
    else needed = {"unary_" + name, "special_" + name};
    for (const std::string& golden_case : needed)
      EXPECT_TRUE(cases.count(golden_case)) << "the catalogue op '" << name << "' has no golden case '" << golden_case
                                            << "' in tests/golden/elementwise.golden";
  };
#define KILN_CHECK_UNARY(Op) check.template operator()<ops::Op>(false);
#define KILN_CHECK_BINARY(Op) check.template operator()<ops::Op>(true);
  KILN_UNARY_OPS(KILN_CHECK_UNARY)
  KILN_BINARY_OPS(KILN_CHECK_BINARY)
#undef KILN_CHECK_UNARY
#undef KILN_CHECK_BINARY
}

// ---------------------------------------------------------------- softmax (needs reductions)

TYPED_TEST(Elementwise, SoftmaxAndLogSoftmaxAlongEveryDimAreStable) {
  using B = TypeParam;
  for (std::int64_t dim : {0, 1, -1}) {
    const std::string d = dim < 0 ? "dimm1" : "dim" + std::to_string(dim);
    check_unary<B, 3>("softmax_" + d, [&](const auto& x) { return x.softmax(dim); });
    check_unary<B, 3>("log_softmax_" + d, [&](const auto& x) { return x.log_softmax(dim); });
    // Values around 1e4: exp would overflow without subtracting the max.
    check_unary<B, 3>("softmax_large_" + d, [&](const auto& x) { return x.softmax(dim); });
    check_unary<B, 3>("log_softmax_large_" + d, [&](const auto& x) { return x.log_softmax(dim); });
  }
}

// ---------------------------------------------------------------- gradient formulas

namespace {

// Central finite difference of f at x with a step scaled to x.
template <class F> double numeric_derivative(F&& f, double x) {
  const double h = 1e-6 * std::max(1.0, std::abs(x));
  return (f(x + h) - f(x - h)) / (2 * h);
}

::testing::AssertionResult derivative_close(double analytic, double numeric) {
  if (std::abs(analytic - numeric) <= 1e-5 + 1e-5 * std::abs(numeric)) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "analytic " << analytic << " vs finite difference " << numeric;
}

template <class Op> void check_unary_grad(std::initializer_list<double> points) {
  for (double x : points) {
    const double dy = 0.75;  // dL/dy != 1 checks that grad scales by dy
    const double y = Op::template apply<double>(x);
    const double numeric = dy * numeric_derivative([](double v) { return Op::template apply<double>(v); }, x);
    EXPECT_TRUE(derivative_close(Op::template grad<double>(x, y, dy), numeric)) << Op::name << " at " << x;
  }
}

template <class Op> void check_binary_grad(std::initializer_list<std::pair<double, double>> points) {
  for (const auto& [a, b] : points) {
    const double dy = 0.75;
    const double y = Op::template apply<double>(a, b);
    const double da = dy * numeric_derivative([b = b](double v) { return Op::template apply<double>(v, b); }, a);
    const double db = dy * numeric_derivative([a = a](double v) { return Op::template apply<double>(a, v); }, b);
    EXPECT_TRUE(derivative_close(Op::template grad_lhs<double>(a, b, y, dy), da)) << Op::name << " lhs at " << a
                                                                                     << ", " << b;
    EXPECT_TRUE(derivative_close(Op::template grad_rhs<double>(a, b, y, dy), db)) << Op::name << " rhs at " << a
                                                                                     << ", " << b;
  }
}

}  // namespace

TEST(ElementwiseGrad, UnaryGradFormulasMatchFiniteDifferences) {
  // Points avoid kinks and jumps (0 for abs/relu/sign, integers for floor/ceil, halves for round).
  const auto any = {-2.3, -0.7, 0.4, 1.9};
  check_unary_grad<ops::Exp>(any);
  check_unary_grad<ops::Log>({0.3, 1.0, 4.2});
  check_unary_grad<ops::Log1p>({-0.5, 0.3, 4.2});
  check_unary_grad<ops::Sqrt>({0.3, 1.0, 4.2});
  check_unary_grad<ops::Rsqrt>({0.3, 1.0, 4.2});
  check_unary_grad<ops::Recip>({-2.0, -0.4, 0.3, 4.2});
  check_unary_grad<ops::Sin>(any);
  check_unary_grad<ops::Cos>(any);
  check_unary_grad<ops::Tan>({-1.2, -0.3, 0.4, 1.1});
  check_unary_grad<ops::Tanh>(any);
  check_unary_grad<ops::Erf>(any);
  check_unary_grad<ops::Floor>(any);
  check_unary_grad<ops::Ceil>(any);
  check_unary_grad<ops::Round>({-2.3, -0.7, 0.4, 1.9});
  check_unary_grad<ops::Sigmoid>(any);
  check_unary_grad<ops::Silu>(any);
  check_unary_grad<ops::Softplus>({-25.0, -2.3, 0.4, 19.0, 25.0});
  check_unary_grad<ops::HardSigmoid>({-4.0, -2.3, 0.4, 2.9, 4.0});
  check_unary_grad<ops::GeluErf>(any);
  check_unary_grad<ops::GeluTanh>(any);
  check_unary_grad<ops::Neg>(any);
  check_unary_grad<ops::Abs>(any);
  check_unary_grad<ops::Sign>(any);
  check_unary_grad<ops::Relu>(any);
  const auto inside = {-0.9, -0.3, 0.2, 0.8};  // inside (-1, 1)
  check_unary_grad<ops::Asin>(inside);
  check_unary_grad<ops::Acos>(inside);
  check_unary_grad<ops::Atanh>(inside);
  check_unary_grad<ops::Atan>(any);
  check_unary_grad<ops::Sinh>({-2.3, -0.7, 0.4, 0.99, 1.01, 1.9});  // both sides of the switch at 1
  check_unary_grad<ops::Cosh>(any);
  check_unary_grad<ops::Asinh>({-2.3, -0.7, 0.4, 1.9, 3e3});
  check_unary_grad<ops::Acosh>({1.2, 1.9, 4.2, 3e3});
  check_unary_grad<ops::Log2>({0.3, 1.0, 4.2});
  check_unary_grad<ops::Log10>({0.3, 1.0, 4.2});
  check_unary_grad<ops::Exp2>(any);
  check_unary_grad<ops::Trunc>(any);
  check_unary_grad<ops::Frac>(any);
}

TEST(ElementwiseGrad, BinaryGradFormulasMatchFiniteDifferences) {
  const std::initializer_list<std::pair<double, double>> any = {{1.3, -0.6}, {-2.1, 0.8}, {0.4, 2.5}};
  check_binary_grad<ops::Add>(any);
  check_binary_grad<ops::Sub>(any);
  check_binary_grad<ops::Mul>(any);
  check_binary_grad<ops::Div>(any);
  check_binary_grad<ops::Rem>({{5.3, 2.0}, {-5.3, 2.0}, {5.3, -2.0}, {0.7, 0.3}});
  check_binary_grad<ops::Pow>({{1.3, 2.0}, {0.4, -1.5}, {2.5, 0.7}});
  check_binary_grad<ops::Maximum>(any);
  check_binary_grad<ops::Minimum>(any);
  check_binary_grad<ops::Hypot>(any);
  check_binary_grad<ops::Copysign>(any);
  check_binary_grad<ops::Logaddexp>(any);
}

TEST(ElementwiseGrad, TiesAndSpecialPoints) {
  // maximum/minimum split a tie evenly; pow's exponent gradient is 0 at a zero base.
  EXPECT_EQ(ops::Maximum::grad_lhs<double>(2.0, 2.0, 2.0, 1.0), 0.5);
  EXPECT_EQ(ops::Maximum::grad_rhs<double>(2.0, 2.0, 2.0, 1.0), 0.5);
  EXPECT_EQ(ops::Minimum::grad_lhs<double>(2.0, 2.0, 2.0, 1.0), 0.5);
  EXPECT_EQ(ops::Pow::grad_rhs<double>(0.0, 2.0, 0.0, 1.0), 0.0);
  EXPECT_EQ(ops::Relu::grad<double>(-1.0, 0.0, 1.0), 0.0);
  EXPECT_EQ(ops::Relu::grad<double>(1.0, 1.0, 1.0), 1.0);
}
