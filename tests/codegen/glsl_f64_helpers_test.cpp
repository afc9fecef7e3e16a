// Codegen: the f64 GLSL helpers of src/codegen/glsl_helpers.hpp (exp, log, log1p, sin, cos, tan,
// tanh, erf, pow), compiled as C++ from the very text the shaders get (glsl_cpp.hpp):
// accuracy against the C library in long double on millions of arguments over the whole
// double range and near the hard spots (overflow and underflow thresholds, subnormals,
// multiples of pi/2, pow's large exponents), and the special values, pow's as std::pow.
#include "glsl_cpp.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <iomanip>
#include <iostream>
#include <limits>
#include <random>
#include <vector>

namespace {

namespace cpp = kiln::codegen::test::glsl_cpp;

using Long = long double;  // the reference's precision: 64 significant bits on x86-64
constexpr double inf = std::numeric_limits<double>::infinity();
constexpr double nan = std::numeric_limits<double>::quiet_NaN();
constexpr double min_normal = std::numeric_limits<double>::min();
constexpr double min_subnormal = std::numeric_limits<double>::denorm_min();

// Random bit patterns: every exponent equally often, both signs, no inf or NaN.
std::vector<double> random_doubles(int n, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<double> xs;
  while (static_cast<int>(xs.size()) < n) {
    const double x = std::bit_cast<double>(rng());
    if (std::isfinite(x)) xs.push_back(x);
  }
  return xs;
}

std::vector<double> uniform(double lo, double hi, int n, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> dist(lo, hi);
  std::vector<double> xs(static_cast<std::size_t>(n));
  for (double& x : xs) x = dist(rng);
  return xs;
}

std::vector<double> operator+(std::vector<double> a, const std::vector<double>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

bool same_bits(double a, double b) { return std::bit_cast<std::uint64_t>(a) == std::bit_cast<std::uint64_t>(b); }

struct Accuracy {
  double max_relative = 0;
  double worst = 0;
};

// The largest |f(x) - ref(x)| / |ref(x)|, ref in long double; where the reference rounds to
// 0, inf or NaN, f must give exactly that (sign included). Below DBL_MIN the error is
// relative to DBL_MIN: subnormal results have fewer bits (and GPUs may flush them).
template <class F, class Ref> Accuracy measure(F f, Ref ref, const std::vector<double>& xs, const char* name) {
  Accuracy acc;
  int mismatches = 0;
  for (const double x : xs) {
    const Long want = ref(static_cast<Long>(x));
    const double got = f(x), rounded = static_cast<double>(want);
    if (!std::isfinite(rounded) || rounded == 0) {
      const bool same = std::isnan(rounded) ? std::isnan(got) : same_bits(got, rounded);
      if (!same && ++mismatches < 5) ADD_FAILURE() << name << "(" << x << ") = " << got << ", want " << rounded;
      continue;
    }
    const double err = static_cast<double>(std::abs(static_cast<Long>(got) - want) /
                                           std::max<Long>(std::abs(want), min_normal));
    if (err > acc.max_relative) acc = {err, x};
  }
  std::cout << "  " << name << ": max relative error " << std::setprecision(2) << acc.max_relative << " at x = "
            << std::setprecision(17) << acc.worst << "\n";
  return acc;
}

TEST(CodegenGlslF64Helpers, ExpIsAccurateOverTheDoubleRange) {
  const std::vector<double> edges = {0.0, -0.0, min_subnormal, -min_subnormal, 1e-300, 709.782712893384,
                                     std::nextafter(709.782712893384, inf), -708.39641853226408, -708.4, -745.0,
                                     -745.1332191019411, -745.1332191019412, -746.0, 710.0, inf, -inf, nan};
  const auto xs = random_doubles(1 << 20, 1) + uniform(-746, 710, 1 << 20, 2) + uniform(-1, 1, 1 << 18, 3) + edges;
  const Accuracy acc = measure(cpp::kiln_exp_f64, [](Long x) { return std::exp(x); }, xs, "exp");
  EXPECT_LT(acc.max_relative, 3e-16);
  EXPECT_EQ(cpp::kiln_exp_f64(-745.1332191019411), min_subnormal);  // the last that does not round to 0
  EXPECT_EQ(cpp::kiln_exp_f64(-745.14), 0.0);
  EXPECT_EQ(cpp::kiln_exp_f64(709.782712893384), 1.7976931348622732e308);  // 2^1024 (1 - 2^-42): the ldexp halves
  EXPECT_EQ(cpp::kiln_exp_f64(std::nextafter(709.782712893384, inf)), inf);
  EXPECT_EQ(cpp::kiln_exp_f64(-0.0), 1.0);
}

TEST(CodegenGlslF64Helpers, LogIsAccurateOverTheDoubleRange) {
  std::vector<double> positive = random_doubles(1 << 20, 4);
  for (double& x : positive) x = std::abs(x);
  const std::vector<double> edges = {0.0, -0.0, -1.0, -min_subnormal, min_subnormal, 3 * min_subnormal, min_normal,
                                     std::nextafter(min_normal, 0.0), 1.0, std::nextafter(1.0, 2.0),
                                     std::nextafter(1.0, 0.0), 0.7071067811865476, 1.414213562373095,
                                     std::numeric_limits<double>::max(), inf, -inf, nan};
  const auto xs = positive + uniform(0, 4, 1 << 20, 5) + uniform(1 - 1e-6, 1 + 1e-6, 1 << 18, 6) + edges;
  const Accuracy acc = measure(cpp::kiln_log_f64, [](Long x) { return std::log(x); }, xs, "log");
  EXPECT_LT(acc.max_relative, 3e-16);
  EXPECT_EQ(cpp::kiln_log_f64(0.0), -inf);
  EXPECT_EQ(cpp::kiln_log_f64(-0.0), -inf);
  EXPECT_TRUE(std::isnan(cpp::kiln_log_f64(-min_subnormal)));
  EXPECT_TRUE(std::isnan(cpp::kiln_log_f64(-inf)));
  EXPECT_TRUE(same_bits(cpp::kiln_log_f64(1.0), 0.0));
}

TEST(CodegenGlslF64Helpers, Log1pIsAccurateOverTheDoubleRange) {
  const std::vector<double> edges = {0.0, -0.0, min_subnormal, -min_subnormal, 1e-300, -1e-300, -0.29, 0.41,
                                     std::nextafter(-0.29, 0.0), std::nextafter(0.41, 0.0), -1.0,
                                     std::nextafter(-1.0, 0.0), -1.5, 1e308, inf, -inf, nan};
  const auto xs = random_doubles(1 << 20, 7) + uniform(-1, 2, 1 << 20, 8) + uniform(-1e-3, 1e-3, 1 << 18, 9) + edges;
  const Accuracy acc = measure(cpp::kiln_log1p_f64, [](Long x) { return std::log1p(x); }, xs, "log1p");
  EXPECT_LT(acc.max_relative, 6e-16);
  EXPECT_EQ(cpp::kiln_log1p_f64(-1.0), -inf);
  EXPECT_TRUE(std::isnan(cpp::kiln_log1p_f64(-1.5)));
  EXPECT_TRUE(same_bits(cpp::kiln_log1p_f64(-0.0), -0.0));
  EXPECT_EQ(cpp::kiln_log1p_f64(min_subnormal), min_subnormal);
}

// Doubles next to multiples of pi/2 (the hard cases of the reduction), for k up to 2^32.
std::vector<double> near_multiples_of_pi_over_2(int n, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<double> xs;
  for (int i = 0; i < n; ++i) {
    const Long k = static_cast<Long>(rng() >> (32 + i % 32));
    const double x = static_cast<double>(k * 1.57079632679489661923132169163975144L);
    xs.push_back(i % 2 ? -x : x);
    xs.push_back(std::nextafter(x, inf));
  }
  return xs;
}

template <class F, class Ref> void check_trig(F f, Ref ref, const char* name, double bound, bool bounded) {
  constexpr double accurate = 6.7e9;  // < 2^32 pi/2
  std::vector<double> tiny = random_doubles(1 << 18, 10);
  for (double& x : tiny) x = std::fmod(x, 1e-5);
  const std::vector<double> edges = {0.0, -0.0, min_subnormal, 7.450580596923828e-09, 0.7853981633974483,
                                     1.5707963267948966, 3.141592653589793, 6.283185307179586, accurate, -accurate};
  const auto xs = uniform(-10, 10, 1 << 20, 11) + uniform(-accurate, accurate, 1 << 20, 12) +
                  near_multiples_of_pi_over_2(1 << 17, 13) + tiny + edges;
  const Accuracy acc = measure(f, ref, xs, name);
  EXPECT_LT(acc.max_relative, bound) << name;
  // Beyond, the error of the reduced argument grows like |x| 2^-53 (so sin's and cos's
  // absolute error); from 2^50 on the result is NaN.
  if (bounded) {
    double worst = 0;
    for (const double x : uniform(accurate, 1e12, 1 << 16, 14)) {
      worst = std::max(worst, static_cast<double>(std::abs(f(x) - ref(static_cast<Long>(x))) / x));
    }
    EXPECT_LT(worst, 0x1p-52) << name;
  }
  for (const double x : {0x1p50, -0x1p50, 1e300, inf, -inf, nan}) {
    EXPECT_TRUE(std::isnan(f(x))) << name << "(" << x << ")";
  }
  EXPECT_FALSE(std::isnan(f(std::nextafter(0x1p50, 0.0)))) << name;
}

TEST(CodegenGlslF64Helpers, SinCosTanAreAccurateWhereTheReductionIs) {
  check_trig(cpp::kiln_sin_f64, [](Long x) { return std::sin(x); }, "sin", 8e-16, true);
  check_trig(cpp::kiln_cos_f64, [](Long x) { return std::cos(x); }, "cos", 8e-16, true);
  check_trig(cpp::kiln_tan_f64, [](Long x) { return std::tan(x); }, "tan", 1e-15, false);
  EXPECT_TRUE(same_bits(cpp::kiln_sin_f64(-0.0), -0.0));
  EXPECT_TRUE(same_bits(cpp::kiln_tan_f64(-0.0), -0.0));
  EXPECT_EQ(cpp::kiln_cos_f64(-0.0), 1.0);
  EXPECT_EQ(cpp::kiln_sin_f64(min_subnormal), min_subnormal);
}

TEST(CodegenGlslF64Helpers, TanhIsAccurateOverTheDoubleRange) {
  const std::vector<double> edges = {0.0, -0.0, min_subnormal, -min_subnormal, 0.55, std::nextafter(0.55, 0.0),
                                     -0.55, 22.0, std::nextafter(22.0, inf), -22.0, 19.0, inf, -inf, nan};
  const auto xs = random_doubles(1 << 20, 15) + uniform(-3, 3, 1 << 20, 16) + uniform(-25, 25, 1 << 18, 17) + edges;
  const Accuracy acc = measure(cpp::kiln_tanh_f64, [](Long x) { return std::tanh(x); }, xs, "tanh");
  EXPECT_LT(acc.max_relative, 6e-16);
  EXPECT_TRUE(same_bits(cpp::kiln_tanh_f64(-0.0), -0.0));
  EXPECT_EQ(cpp::kiln_tanh_f64(inf), 1.0);
  EXPECT_EQ(cpp::kiln_tanh_f64(-inf), -1.0);
}

TEST(CodegenGlslF64Helpers, ErfIsAccurateOverTheDoubleRange) {
  const std::vector<double> edges = {0.0, -0.0, min_subnormal, -min_subnormal, 1e-300, 2.0, std::nextafter(2.0, 0.0),
                                     -2.0, 5.9, 6.0, std::nextafter(6.0, 0.0), -6.0, inf, -inf, nan};
  const auto xs =
      random_doubles(1 << 20, 18) + uniform(-6.5, 6.5, 1 << 20, 19) + uniform(-0.1, 0.1, 1 << 18, 20) + edges;
  const Accuracy acc = measure(cpp::kiln_erf_f64, [](Long x) { return std::erf(x); }, xs, "erf");
  EXPECT_LT(acc.max_relative, 1e-15);
  EXPECT_TRUE(same_bits(cpp::kiln_erf_f64(-0.0), -0.0));
  EXPECT_EQ(cpp::kiln_erf_f64(inf), 1.0);
  EXPECT_EQ(cpp::kiln_erf_f64(-inf), -1.0);
}

// pow: exactly std::pow where that is 0, inf or NaN (the special cases, as in the f32
// helper's test), and where it is finite, accurate; x and x * x for b = 1 and 2.
TEST(CodegenGlslF64Helpers, PowHasTheMeaningOfStdPow) {
  const std::vector<double> values = {0.0, -0.0, 1.0, -1.0, 2.0, -2.0, 3.0, -3.0, 0.5, -0.5, 2.5, -2.5, 0.1, 10.0,
                                      -10.0, 1e300, -1e300, 1e-300, -1e-300, min_subnormal, -min_subnormal,
                                      9007199254740992.0, -9007199254740993.0, 18014398509481984.0, 1.7e308, -1.7e308,
                                      inf, -inf, nan};
  for (const double a : values) {
    for (const double b : values) {
      const double want = std::pow(a, b), got = cpp::kiln_pow_f64(a, b);
      const double error = std::abs(got - want) / std::max(std::abs(want), min_normal);
      const bool same = std::isnan(want)                       ? std::isnan(got)
                        : (want == 0 || !std::isfinite(want)) ? same_bits(got, want)
                                                              : error <= 5e-16;
      EXPECT_TRUE(same) << "pow(" << a << ", " << b << ") = " << got << ", want " << want;
    }
  }
  for (const double a : uniform(-1e10, 1e10, 1000, 21)) {
    EXPECT_TRUE(same_bits(cpp::kiln_pow_f64(a, 1.0), a)) << a;
    EXPECT_TRUE(same_bits(cpp::kiln_pow_f64(a, 2.0), a * a)) << a;
  }
}

// An error e in b log a is a relative error e in a^b, so the hard cases are large b log a
// (up to 745) and bases at the ends of the reduction's intervals.
TEST(CodegenGlslF64Helpers, PowIsAccurate) {
  std::mt19937_64 rng(22);
  std::uniform_real_distribution<double> unit(-1, 1);
  std::vector<std::pair<double, double>> cases;
  for (const double a : random_doubles(1 << 19, 23)) {  // any base, b log a uniform in [-750, 750]
    if (a != 0) cases.emplace_back(std::abs(a), 750 * unit(rng) / std::log(std::abs(a)));
  }
  for (int i = 0; i < 1 << 19; ++i) {  // bases at sqrt(1/2), sqrt(2), the intervals' ends and 1
    const double ends[] = {0.7071067811865476, 1.414213562373095, 0.89, 1.12, 1.0};
    const double a = ends[i % 5] * (1 + unit(rng) * (i % 5 == 4 ? 1e-9 : 1e-3));
    cases.emplace_back(a, 745 * unit(rng) / std::log(a));
  }
  for (int i = 0; i < 1 << 18; ++i) {  // negative bases, integral exponents
    cases.emplace_back(10 * unit(rng), std::floor(300 * unit(rng)));
  }
  for (int i = 0; i < 1 << 18; ++i) {  // subnormal results and bases
    const double a = 4 * std::abs(unit(rng));
    cases.emplace_back(a, -1074 * std::log(2.0) / std::log(a) * (0.97 + 0.05 * std::abs(unit(rng))));
    cases.emplace_back(std::bit_cast<double>(rng() >> 12), 2 * unit(rng));
  }
  for (int i = 0; i < 1 << 19; ++i) {  // any bits
    cases.emplace_back(std::bit_cast<double>(rng()), std::bit_cast<double>(rng()));
  }
  Accuracy acc;
  double worst_b = 0;
  int mismatches = 0;
  for (const auto& [a, b] : cases) {
    const Long want = std::pow(static_cast<Long>(a), static_cast<Long>(b));
    const double got = cpp::kiln_pow_f64(a, b), rounded = static_cast<double>(want);
    if (!std::isfinite(rounded) || rounded == 0) {
      const bool same = std::isnan(rounded) ? std::isnan(got) : same_bits(got, rounded);
      if (!same && ++mismatches < 5) {
        ADD_FAILURE() << "pow(" << a << ", " << b << ") = " << got << ", want " << rounded;
      }
      continue;
    }
    const double err = static_cast<double>(std::abs(static_cast<Long>(got) - want) /
                                           std::max<Long>(std::abs(want), min_normal));
    if (err > acc.max_relative) {
      acc = {err, a};
      worst_b = b;
    }
  }
  std::cout << "  pow: max relative error " << std::setprecision(2) << acc.max_relative << " at pow("
            << std::setprecision(17) << acc.worst << ", " << worst_b << ")\n";
  EXPECT_LT(acc.max_relative, 8e-16);
}

// roundEven: exactly std::nearbyint (halves to even, signs of zero kept) on every tie from
// -1000.5 to 1000.5, their neighbours, random doubles of every size and the specials.
TEST(CodegenGlslF64Helpers, RoundEvenMatchesNearbyint) {
  std::vector<double> xs = random_doubles(1 << 16, 31);
  for (int i = -2001; i <= 2001; ++i) {
    const double tie = i * 0.5;
    for (double x : {tie, std::nextafter(tie, -inf), std::nextafter(tie, inf)}) xs.push_back(x);
  }
  for (double x : {0.0, -0.0, 0.3, -0.3, 4503599627370495.5, -4503599627370495.5, 4503599627370496.0, 1e300,
                   min_subnormal, -min_subnormal, inf, -inf})
    xs.push_back(x);
  for (const double x : xs)
    if (!std::isnan(x)) EXPECT_TRUE(same_bits(cpp::kiln_round_even_f64(x), std::nearbyint(x))) << x;
  EXPECT_TRUE(std::isnan(cpp::kiln_round_even_f64(nan)));
}

}  // namespace
