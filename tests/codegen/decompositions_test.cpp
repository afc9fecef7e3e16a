// The decompositions of src/codegen/decompositions.hpp (what the GLSL table renders for
// expm1 and atan2), evaluated as trees in f32 and f64 against the C library: relative
// accuracy near 0 for expm1, every octant and the signed zeros, infinities and NaN of
// atan2, and the precision each type promises.
#include "evaluate.hpp"

#include "codegen/decompositions.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

namespace {

using kiln::codegen::decomposition;
using kiln::codegen::Kind;
using kiln::codegen::make_input;
using kiln::codegen::make_node;
using kiln::codegen::ScalarType;
using kiln::codegen::test::evaluate;

constexpr double inf = std::numeric_limits<double>::infinity();
constexpr double nan = std::numeric_limits<double>::quiet_NaN();

// Both NaN, or equal with the same sign (so -0 differs from 0), or within rtol of want.
template <class T> ::testing::AssertionResult close(T got, double want, double rtol) {
  if (std::isnan(want) && std::isnan(got)) return ::testing::AssertionSuccess();
  if (!std::isfinite(want) || want == 0) {
    if (got == static_cast<T>(want) && std::signbit(got) == std::signbit(want)) return ::testing::AssertionSuccess();
  } else if (std::abs(static_cast<double>(got) - want) <= rtol * std::abs(want)) {
    return ::testing::AssertionSuccess();
  }
  return ::testing::AssertionFailure() << got << " != " << want;
}

std::vector<double> arguments() {
  std::vector<double> xs{0.0, -0.0, inf, -inf, nan, 1e-30, -1e-30, 1e-8, -1e-8, 1e-4, -3e-4, 0.3, -0.7, 1.0, -1.0,
                         2.5, -4.0, 10.0, -20.0, 40.0, 80.0, -100.0, 700.0, -800.0};
  for (int i = -60; i <= 60; ++i) xs.push_back(std::ldexp(1.0 + i / 64.0, i / 4));
  return xs;
}

template <class T> void check_expm1(double rtol) {
  const ScalarType t = std::is_same_v<T, float> ? ScalarType::f32 : ScalarType::f64;
  const auto tree = decomposition(*make_node(Kind::expm1, {make_input(0)}), t);
  for (double x : arguments()) {
    const T in[] = {static_cast<T>(x)};
    const double want = std::expm1(static_cast<double>(in[0]));
    const double rounded = static_cast<double>(static_cast<T>(want));  // what T can hold
    EXPECT_TRUE(close(evaluate<T>(tree, in), rounded, rtol)) << "expm1(" << in[0] << ")";
  }
}

template <class T> void check_atan2(double rtol) {
  const ScalarType t = std::is_same_v<T, float> ? ScalarType::f32 : ScalarType::f64;
  const auto tree = decomposition(*make_node(Kind::atan2, {make_input(0), make_input(1)}), t);
  std::vector<double> values{0.0, -0.0, inf, -inf, nan, 1e-20, -3e-7, 0.4142, 0.5, -1.0, 1.0, 2.0, -2.4142, 7.5,
                             -1e6, 3e30};
  for (double y : values) {
    for (double x : values) {
      const T in[] = {static_cast<T>(y), static_cast<T>(x)};
      const double want = std::atan2(static_cast<double>(in[0]), static_cast<double>(in[1]));
      EXPECT_TRUE(close(evaluate<T>(tree, in), static_cast<double>(static_cast<T>(want)), rtol))
          << "atan2(" << in[0] << ", " << in[1] << ")";
    }
  }
  // Dense angles all around the circle, at several radii.
  for (int i = 0; i < 720; ++i) {
    const double angle = -3.14159 + i * (6.28318 / 720);
    for (double radius : {1e-3, 1.0, 1e5}) {
      const T in[] = {static_cast<T>(radius * std::sin(angle)), static_cast<T>(radius * std::cos(angle))};
      const double want = std::atan2(static_cast<double>(in[0]), static_cast<double>(in[1]));
      EXPECT_TRUE(close(evaluate<T>(tree, in), want, rtol)) << "atan2(" << in[0] << ", " << in[1] << ")";
    }
  }
}

TEST(CodegenDecompositions, Expm1KeepsItsMeaningAndPrecision) {
  check_expm1<float>(5e-7);
  check_expm1<double>(2e-15);
}

TEST(CodegenDecompositions, Atan2KeepsItsMeaningAndPrecision) {
  check_atan2<float>(5e-7);
  check_atan2<double>(2e-15);
}

TEST(CodegenDecompositions, KindsWithoutOneAreErrors) {
  EXPECT_THROW(decomposition(*make_node(Kind::exp, {make_input(0)}), ScalarType::f32), kiln::Error);
}

}  // namespace
