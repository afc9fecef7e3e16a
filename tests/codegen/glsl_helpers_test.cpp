// Codegen: the GLSL helpers of src/codegen/glsl_helpers.hpp, compiled as C++ from the very text
// the shaders get (glsl_cpp.hpp): accuracy of erf, log1p and tanh over the float range,
// std::pow's special cases, and the integer helpers exhaustively (u8) or on edge grids
// against the catalogue's integer branches.
#include "glsl_cpp.hpp"

#include <kiln/ops/elementwise.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <iostream>
#include <limits>
#include <vector>

namespace {

namespace cpp = kiln::codegen::test::glsl_cpp;
namespace ops = kiln::ops;

// Every 256th float of the whole range, both signs: 2^24 inputs, all exponents.
std::vector<float> sampled_floats() {
  std::vector<float> xs;
  for (std::uint64_t bits = 0; bits < 0x7f800000u; bits += 256) {
    xs.push_back(std::bit_cast<float>(static_cast<std::uint32_t>(bits)));
    xs.push_back(-std::bit_cast<float>(static_cast<std::uint32_t>(bits)));
  }
  return xs;
}

struct Accuracy {
  double max_relative = 0;
  float worst = 0;
};

// The largest |f(x) - ref(x)| / |ref(x)|, with ref in double; non-finite results must agree.
// Below FLT_MIN the error is relative to FLT_MIN: subnormal results have fewer bits (and
// GPUs may flush them to zero).
template <class F, class Ref> Accuracy measure(F f, Ref ref, const std::vector<float>& xs, const char* name) {
  Accuracy acc;
  int mismatches = 0;
  for (const float x : xs) {
    const double want = ref(static_cast<double>(x));
    const double got = f(x);
    if (!std::isfinite(want) || !std::isfinite(got) || want == 0) {
      const bool same = (std::isnan(want) && std::isnan(got)) || want == got;
      if (!same && ++mismatches < 5) ADD_FAILURE() << name << "(" << x << ") = " << got << ", want " << want;
      continue;
    }
    const double err = std::abs(got - want) / std::max<double>(std::abs(want), std::numeric_limits<float>::min());
    if (err > acc.max_relative) acc = {err, x};
  }
  std::cout << "  " << name << ": max relative error " << acc.max_relative << " at x = " << acc.worst << "\n";
  return acc;
}

TEST(CodegenGlslHelpers, ErfIsAccurateOverTheFloatRange) {
  const Accuracy acc = measure(cpp::kiln_erf_f32, [](double x) { return std::erf(x); }, sampled_floats(), "erf");
  EXPECT_LT(acc.max_relative, 5e-7);
  EXPECT_EQ(cpp::kiln_erf_f32(1e-40f), static_cast<float>(1.1283791670955126 * 1e-40f));  // subnormal
  EXPECT_TRUE(std::signbit(cpp::kiln_erf_f32(-0.0f)));
  EXPECT_EQ(cpp::kiln_erf_f32(std::numeric_limits<float>::infinity()), 1.0f);
  EXPECT_EQ(cpp::kiln_erf_f32(-std::numeric_limits<float>::infinity()), -1.0f);
  EXPECT_TRUE(std::isnan(cpp::kiln_erf_f32(std::numeric_limits<float>::quiet_NaN())));
}

TEST(CodegenGlslHelpers, Log1pIsAccurateOverTheFloatRange) {
  const Accuracy acc =
      measure(cpp::kiln_log1p_f32, [](double x) { return std::log1p(x); }, sampled_floats(), "log1p");
  EXPECT_LT(acc.max_relative, 5e-7);
  EXPECT_EQ(cpp::kiln_log1p_f32(-1.0f), -std::numeric_limits<float>::infinity());
  EXPECT_TRUE(std::isnan(cpp::kiln_log1p_f32(-1.5f)));
  EXPECT_TRUE(std::isnan(cpp::kiln_log1p_f32(-std::numeric_limits<float>::infinity())));
  EXPECT_EQ(cpp::kiln_log1p_f32(std::numeric_limits<float>::infinity()), std::numeric_limits<float>::infinity());
  EXPECT_TRUE(std::signbit(cpp::kiln_log1p_f32(-0.0f)));
}

TEST(CodegenGlslHelpers, TanhIsAccurateOverTheFloatRange) {
  const Accuracy acc = measure(cpp::kiln_tanh_f32, [](double x) { return std::tanh(x); }, sampled_floats(), "tanh");
  EXPECT_LT(acc.max_relative, 5e-7);
  EXPECT_TRUE(std::signbit(cpp::kiln_tanh_f32(-0.0f)));
  EXPECT_TRUE(std::isnan(cpp::kiln_tanh_f32(std::numeric_limits<float>::quiet_NaN())));
}

// GLSL's pow is only called on finite positive bases, so with <cmath>'s pow behind it the
// helper must equal std::pow exactly, special cases included.
TEST(CodegenGlslHelpers, PowHasTheMeaningOfStdPow) {
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  const std::vector<float> values = {0.0f, -0.0f, 1.0f, -1.0f, 2.0f, -2.0f, 3.0f, -3.0f, 0.5f,  -0.5f, 2.5f,
                                     -2.5f, 0.1f, 10.0f, -10.0f, 1e20f, -1e20f, 1e-20f, 16777216.0f, -16777217.0f,
                                     33554432.0f, 1e38f, -1e38f, inf, -inf, nan};
  for (const float a : values) {
    for (const float b : values) {
      const float want = std::pow(a, b), got = cpp::kiln_pow_f32(a, b);
      const bool same = std::isnan(want) ? std::isnan(got)
                                         : std::bit_cast<std::uint32_t>(got) == std::bit_cast<std::uint32_t>(want);
      EXPECT_TRUE(same) << "pow(" << a << ", " << b << ") = " << got << ", want " << want;
    }
  }
}

template <class T> void expect_integer_helpers_match(T a, T b) {
  EXPECT_EQ(cpp::int_div(a, b), ops::Div::apply(a, b)) << +a << " / " << +b;
  EXPECT_EQ(cpp::int_rem(a, b), ops::Rem::apply(a, b)) << +a << " % " << +b;
  EXPECT_EQ(cpp::int_pow(a, b), ops::Pow::apply(a, b)) << +a << " ** " << +b;
}

TEST(CodegenGlslHelpers, IntegerHelpersMatchTheCatalogueForEveryU8Pair) {
  for (int a = 0; a < 256; ++a)
    for (int b = 0; b < 256; ++b)
      expect_integer_helpers_match(static_cast<std::uint8_t>(a), static_cast<std::uint8_t>(b));
}

template <class T> void check_signed_helpers() {
  using L = std::numeric_limits<T>;
  std::vector<T> values = {L::min(), T(L::min() + 1), T(L::min() / 2), L::max(), T(L::max() - 1), T(L::max() / 2)};
  for (int v = -70; v <= 70; ++v) values.push_back(static_cast<T>(v));
  for (const T a : values)
    for (const T b : values) expect_integer_helpers_match(a, b);
  // Big exponents that wrap, like the catalogue's loop.
  for (const T a : {T(3), T(-3), T(7), T(-1), T(2)}) {
    for (const T b : {T(30), T(31), T(62), T(63), T(1000), L::max()}) expect_integer_helpers_match(a, b);
  }
}

TEST(CodegenGlslHelpers, SignedIntegerHelpersMatchTheCatalogue) {
  check_signed_helpers<std::int32_t>();
  check_signed_helpers<std::int64_t>();
}

}  // namespace
