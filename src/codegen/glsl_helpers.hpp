// The GLSL helper library of the GLSL renderer (glsl.hpp): the functions a rendered
// expression calls where GLSL has no builtin with the catalogue's meaning (erf, log1p,
// tanh, pow of negative bases, the integer Div / Rem / Pow, and every transcendental
// function in f64), and exact GLSL constants. Private to Kiln (src/codegen/); the tests
// compile the same helper text as C++.
#pragma once

#include "codegen/cstyle.hpp"
#include "kiln/codegen/expr.hpp"

#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace kiln::codegen {

// ---------------------------------------------------------------- helpers
// Each helper is written once, as a macro in the subset where C++ and GLSL read the same:
// KILN_GLSL_SOURCE turns it into the GLSL text that render_glsl emits, and the tests
// (tests/codegen) compile the very same text as C++, with GLSL's builtins mapped to
// <cmath>, and check it against the op catalogue and the C library. So the body of a
// helper uses only: T(x) casts for every literal (a bare 0.5 would be a double in C++;
// the f64 helpers spell theirs D(x), see there), if / for / ?:, the operators, and GLSL
// builtins that have a <cmath> namesake (abs, exp, log, pow, floor, isnan, isinf, ldexp)
// or a tiny shim in the tests (uintBitsToFloat, floatBitsToUint, packDouble2x32,
// unpackDouble2x32, frexp with its out parameter). Comments live outside the macros,
// which are single logical lines.
#define KILN_GLSL_STRINGIFY_(...) #__VA_ARGS__
#define KILN_GLSL_SOURCE(...) KILN_GLSL_STRINGIFY_(__VA_ARGS__)

// The integer helpers mirror the catalogue's integer branches of ops::Div, ops::Rem and
// ops::Pow exactly (keep them in step): floor division and a remainder with the divisor's
// sign, 0 when dividing by 0, the most negative value / -1 wrapping to itself, negative
// exponents giving the truncated real power. GLSL's / is undefined for b == 0 and for
// MIN / -1, and its % for negative operands, so the signed helpers divide only where /
// is defined and take the remainder as a - q * b (right whether / truncates, as SPIR-V's
// OpSDiv does, or floors). Integer arithmetic wraps in GLSL; the tests compile the
// helpers with -fwrapv to match.
#define KILN_GLSL_INT_DIV(T, sfx)                                         \
  T kiln_int_div_##sfx(T a, T b) {                                        \
    if (b == T(0)) return T(0);                                           \
    if (b == T(-1)) return T(0) - a;                                      \
    T q = a / b;                                                          \
    T r = a - q * b;                                                      \
    return (r != T(0) && ((r < T(0)) != (b < T(0)))) ? T(q - T(1)) : q;   \
  }
#define KILN_GLSL_INT_REM(T, sfx)                                         \
  T kiln_int_rem_##sfx(T a, T b) {                                        \
    if (b == T(0) || b == T(-1)) return T(0);                             \
    T r = a - (a / b) * b;                                                \
    return (r != T(0) && ((r < T(0)) != (b < T(0)))) ? T(r + b) : r;      \
  }
#define KILN_GLSL_POW_BY_SQUARING(T)                                      \
  T result = T(1);                                                        \
  T base = a;                                                             \
  for (T e = b; e > T(0); e >>= 1) {                                      \
    if ((e & T(1)) != T(0)) result = T(result * base);                    \
    base = T(base * base);                                                \
  }                                                                       \
  return result;
#define KILN_GLSL_INT_POW(T, sfx)                                         \
  T kiln_int_pow_##sfx(T a, T b) {                                        \
    if (b < T(0))                                                         \
      return a == T(1) ? T(1) : (a == T(-1) ? ((b & T(1)) != T(0) ? T(-1) : T(1)) : T(0)); \
    KILN_GLSL_POW_BY_SQUARING(T)                                          \
  }
// Unsigned (u8): no negative operands, so plain / and % after the zero check.
#define KILN_GLSL_UINT_DIV(T, sfx)                                        \
  T kiln_int_div_##sfx(T a, T b) {                                        \
    if (b == T(0)) return T(0);                                           \
    return T(a / b);                                                      \
  }
#define KILN_GLSL_UINT_REM(T, sfx)                                        \
  T kiln_int_rem_##sfx(T a, T b) {                                        \
    if (b == T(0)) return T(0);                                           \
    return T(a % b);                                                      \
  }
#define KILN_GLSL_UINT_POW(T, sfx)                                        \
  T kiln_int_pow_##sfx(T a, T b) {                                        \
    KILN_GLSL_POW_BY_SQUARING(T)                                          \
  }

// erf, f32: the Taylor series of erf through x^19 below 0.75 (relative accuracy down to
// the tiniest x, where 1 - erfc would cancel), Numerical Recipes' erfc (Chebyshev fit,
// relative error < 1.2e-7) up to 4, and +-1 beyond, where erf is 1 in float. Measured
// (tests/codegen, every 256th float, the C library's exp): relative error <= 1.9e-7.
#define KILN_GLSL_ERF_F32                                                                                        \
  float kiln_erf_f32(float x) {                                                                                  \
    float z = abs(x);                                                                                            \
    if (z < float(0.75)) {                                                                                       \
      float s = x * x;                                                                                           \
      return x * (float(1.1283791670955126) + s * (float(-0.37612638903183754) + s * (float(0.11283791670955126) + \
             s * (float(-0.026866170645131252) + s * (float(0.005223977625442188) +                              \
             s * (float(-0.0008548327023450852) + s * (float(0.00012055332981789664) +                           \
             s * (float(-1.492565035840625e-05) + s * (float(1.6462114365889246e-06) +                           \
             s * float(-1.6365844691234924e-07))))))))));                                                        \
    }                                                                                                            \
    if (z >= float(4)) return x < float(0) ? float(-1) : float(1);                                               \
    float t = float(1) / (float(1) + float(0.5) * z);                                                            \
    float erfc = t * exp(-z * z - float(1.26551223) + t * (float(1.00002368) + t * (float(0.37409196) +          \
                 t * (float(0.09678418) + t * (float(-0.18628806) + t * (float(0.27886807) +                     \
                 t * (float(-1.13520398) + t * (float(1.48851587) + t * (float(-0.82215223) +                    \
                 t * float(0.17087277))))))))));                                                                 \
    return x < float(0) ? erfc - float(1) : float(1) - erfc;                                                     \
  }

// log1p, f32: below |x| = 0.5, log1p(x) = 2 atanh(s) with s = x / (2 + x), as its series
// through s^17 (GPU logs are only accurate to ~2^-21 absolute near 1, which would be no
// relative accuracy at all for small x); elsewhere log(u) * x / (u - 1) with u = 1 + x,
// which cancels the rounding of u. The edges are explicit, since GLSL's log is undefined
// for u <= 0: -1 gives -inf, below -1 NaN, +inf itself. Measured: relative error <= 2.2e-7.
#define KILN_GLSL_LOG1P_F32                                                                                      \
  float kiln_log1p_f32(float x) {                                                                                \
    if (abs(x) < float(0.5)) {                                                                                   \
      float s = x / (float(2) + x);                                                                              \
      float s2 = s * s;                                                                                          \
      return s * (float(2) + s2 * (float(0.6666666666666666) + s2 * (float(0.4) + s2 * (float(0.2857142857142857) + \
             s2 * (float(0.2222222222222222) + s2 * (float(0.18181818181818182) +                                \
             s2 * (float(0.15384615384615385) + s2 * (float(0.13333333333333333) +                               \
             s2 * float(0.11764705882352941)))))))));                                                            \
    }                                                                                                            \
    if (x <= float(-1)) return x == float(-1) ? uintBitsToFloat(0xff800000u) : uintBitsToFloat(0x7fc00000u);    \
    if (isinf(x)) return x;                                                                                      \
    float u = float(1) + x;                                                                                      \
    return log(u) * (x / (u - float(1)));                                                                        \
  }

// tanh, f32: its Taylor series through x^17 below 0.5 (the builtin is often
// (e^x - e^-x) / (e^x + e^-x), which has no relative accuracy near 0, and some drivers
// clamp the argument, turning NaN into +-1), 1 - 2 / (e^2|x| + 1) up to 10, +-1 beyond.
// Measured: relative error <= 1.7e-7.
#define KILN_GLSL_TANH_F32                                                                                       \
  float kiln_tanh_f32(float x) {                                                                                 \
    float z = abs(x);                                                                                            \
    if (z < float(0.5)) {                                                                                        \
      float s = x * x;                                                                                           \
      return x * (float(1) + s * (float(-0.3333333333333333) + s * (float(0.13333333333333333) +                \
             s * (float(-0.05396825396825397) + s * (float(0.021869488536155203) +                               \
             s * (float(-0.008863235529902197) + s * (float(0.003592128036572481) +                              \
             s * (float(-0.0014558343870513183) + s * float(0.000590027440945586)))))))));                       \
    }                                                                                                            \
    if (z > float(10)) return x < float(0) ? float(-1) : float(1);                                               \
    float r = float(1) - float(2) / (exp(float(2) * z) + float(1));                                             \
    return x < float(0) ? -r : r;                                                                                \
  }

// pow, f32, with std::pow's meaning: GLSL's pow(x, y) is exp2(y * log2(x)), undefined for
// x < 0 and for x == 0 with y <= 0. So the builtin only ever sees a finite |a| > 0; a
// negative base (by its sign bit, so -0 counts) gives the real power for integral b, its
// sign from b's parity, and NaN otherwise; zeros, infinities and NaN follow C's pow.
#define KILN_GLSL_POW_F32                                                                                        \
  float kiln_pow_f32(float a, float b) {                                                                         \
    if (b == float(0) || a == float(1)) return float(1);                                                         \
    if (isnan(a) || isnan(b)) return a + b;                                                                      \
    float x = abs(a);                                                                                            \
    if (isinf(b))                                                                                                \
      return x == float(1) ? float(1) : ((x < float(1)) == (b < float(0)) ? uintBitsToFloat(0x7f800000u) : float(0)); \
    float m = x == float(0) ? (b < float(0) ? uintBitsToFloat(0x7f800000u) : float(0))                          \
              : (isinf(x) ? (b < float(0) ? float(0) : uintBitsToFloat(0x7f800000u)) : pow(x, b));               \
    if (floatBitsToUint(a) < 0x80000000u) return m;                                                              \
    if (floor(b) != b) return (x == float(0) || isinf(x)) ? m : uintBitsToFloat(0x7fc00000u);                    \
    return floor(b * float(0.5)) != b * float(0.5) ? -m : m;                                                     \
  }

// ---------------------------------------------------------------- f64 helpers
// GLSL has exp, log, pow, sin, cos, tan and tanh for float only; for double it has the
// arithmetic, abs, floor, sqrt, fma, ldexp, frexp and the bit casts. So the f64 helpers
// compute everything from those, with the classic argument reductions and published
// minimax coefficients of double-precision math libraries. Two
// GLSL spellings C++ lacks: a double literal needs the lf suffix (a bare 0.1 is a float,
// and double(0.1) would round it to float first), so these helpers take the spelling of a
// literal as their parameter D (KILN_GLSL_DOUBLE here, a plain double(x) in the tests); and
// `precise` keeps a compiler from contracting or reassociating the few sums that carry
// rounding errors on purpose (it is defined away in the tests). Integers stay double(n).
// Measured accuracy (tests/codegen, against the C library in long double, millions of
// arguments over the whole range and the hard cases): see each helper.
#define KILN_GLSL_DOUBLE(x) double(x##lf)
#define KILN_GLSL_INF_F64 packDouble2x32(uvec2(0u, 0x7ff00000u))
#define KILN_GLSL_NAN_F64 packDouble2x32(uvec2(0u, 0x7ff80000u))
// x with the low 32 bits of its significand cleared: 21 significant bits, so the product of
// two such halves, or of one with the 32-bit rest x - hi(x), is exact.
#define KILN_GLSL_HIGH_HALF_F64(x) packDouble2x32(uvec2(0u, unpackDouble2x32(x).y))

// roundEven, f64 (halves to even): GLSL's builtin rounds double ties the wrong way on some
// drivers (lavapipe gives -1 for -1.5), so it is done from floor, where every step is exact;
// |x| >= 2^52, infinities and NaN are their own rounding, and -0.3 gives -0 as in C.
#define KILN_GLSL_ROUND_EVEN_F64(D)                                                                              \
  double kiln_round_even_f64(double x) {                                                                         \
    if (!(abs(x) < D(4503599627370496.0))) return x;                                                             \
    double r = floor(x);                                                                                         \
    double d = x - r;                                                                                            \
    if (d > D(0.5) || (d == D(0.5) && floor(r * D(0.5)) * double(2) != r)) r = r + double(1);                    \
    return (r == double(0) && x < double(0)) ? -double(0) : r;                                                   \
  }

// exp, f64: x = k ln2 + r with |r| <= ln2 / 2, ln2 in two parts (the
// first has trailing zero bits, so k times it is exact); exp(r) = 1 + r + r c / (2 - c)
// with c = r - r^2 P(r^2), P a minimax fit; then 2^k, in two ldexp steps so that neither
// leaves the exponents GLSL defines (2^1024 near the overflow, subnormal results). Above
// 709.78 +inf, below -745.13 0, NaN stays NaN. Measured: relative error <= 1.7e-16.
#define KILN_GLSL_EXP_F64(D)                                                                                     \
  double kiln_exp_f64(double x) {                                                                                \
    if (isnan(x)) return x;                                                                                      \
    if (x > D(709.782712893384)) return KILN_GLSL_INF_F64;                                                       \
    if (x < D(-745.1332191019411)) return double(0);                                                             \
    double k = floor(x * D(1.4426950408889634) + D(0.5));                                                        \
    double hi = x - k * D(0.6931471803691238);                                                                   \
    double lo = k * D(1.9082149292705877e-10);                                                                   \
    double r = hi - lo;                                                                                          \
    double t = r * r;                                                                                            \
    double c = r - t * (D(0.16666666666666602) + t * (D(-0.0027777777777015593) + t * (D(6.613756321437934e-05) + \
               t * (D(-1.6533902205465252e-06) + t * D(4.1381367970572385e-08)))));                               \
    double y = double(1) - ((lo - (r * c) / (double(2) - c)) - hi);                                              \
    int h = int(k * D(0.5));                                                                                     \
    return ldexp(ldexp(y, h), int(k) - h);                                                                       \
  }

// log(1 + f) for 1 + f in [sqrt(1/2), sqrt(2)), the kernel of kiln_log_f64: with
// s = f / (2 + f), log(1 + f) = 2 atanh(s) = f - hfsq + s (hfsq + R(s^2)) where hfsq = f^2 / 2
// and R a minimax fit. Statements: they leave hfsq and sr = s (hfsq + R) to the caller.
#define KILN_GLSL_LOG_KERNEL_F64(D)                                                                              \
  double hfsq = D(0.5) * f * f;                                                                                  \
  double s = f / (double(2) + f);                                                                                \
  double z = s * s;                                                                                              \
  double w = z * z;                                                                                              \
  double sr = s * (hfsq + (z * (D(0.6666666666666735) + w * (D(0.2857142874366239) + w * (D(0.1818357216161805) + \
              w * D(0.14798198605116586)))) + w * (D(0.3999999999940942) + w * (D(0.22222198432149784) +        \
              w * D(0.15313837699209373)))));

// log, f64: x = 2^k (1 + f) with 1 + f in [sqrt(1/2), sqrt(2)) by frexp
// (subnormals scaled by 2^54 first, as GLSL's frexp need not handle them), then the kernel
// plus k ln2 in two parts. 0 gives -inf, negatives NaN, +inf itself. Measured: <= 1.6e-16.
#define KILN_GLSL_LOG_F64(D)                                                                                     \
  double kiln_log_f64(double x) {                                                                                \
    if (!(x > double(0))) return x == double(0) ? -KILN_GLSL_INF_F64 : KILN_GLSL_NAN_F64;                        \
    if (isinf(x)) return x;                                                                                      \
    double k = double(0);                                                                                        \
    if (x < D(2.2250738585072014e-308)) {                                                                        \
      x = x * D(18014398509481984.0);                                                                            \
      k = double(-54);                                                                                           \
    }                                                                                                            \
    int e;                                                                                                       \
    double f = frexp(x, e);                                                                                      \
    if (f < D(0.7071067811865476)) {                                                                             \
      f = f * double(2);                                                                                         \
      e = e - 1;                                                                                                 \
    }                                                                                                            \
    f = f - double(1);                                                                                           \
    k = k + double(e);                                                                                           \
    KILN_GLSL_LOG_KERNEL_F64(D)                                                                                  \
    return k * D(0.6931471803691238) - ((hfsq - (sr + k * D(1.9082149292705877e-10))) - f);                      \
  }

// log1p, f64: where 1 + x is in the log kernel's range, the kernel of x itself (no rounding
// of 1 + x at all); elsewhere log(u) * x / (u - 1) with u = 1 + x, which cancels the rounding
// of u, as in the f32 helper. -1 gives -inf, below it NaN. Needs kiln_log_f64.
// Measured: relative error <= 3e-16.
#define KILN_GLSL_LOG1P_F64(D)                                                                                   \
  double kiln_log1p_f64(double x) {                                                                              \
    if (x > D(-0.29) && x < D(0.41)) {                                                                           \
      double f = x;                                                                                              \
      KILN_GLSL_LOG_KERNEL_F64(D)                                                                                \
      return f - (hfsq - sr);                                                                                    \
    }                                                                                                            \
    if (x <= double(-1)) return x == double(-1) ? -KILN_GLSL_INF_F64 : KILN_GLSL_NAN_F64;                        \
    if (isinf(x)) return x;                                                                                      \
    double u = double(1) + x;                                                                                    \
    return kiln_log_f64(u) * (x / (u - double(1)));                                                              \
  }

// sin, cos, tan, f64: x = k pi/2 + r, pi/2 in six parts (five of 21 bits, so k times each is
// exact for |k| < 2^32, and the rest), subtracted in turn: a step that cancels is exact, so
// r keeps its relative accuracy next to a multiple of pi/2 too. That holds for |x| < 2^32 pi/2
// (about 6.7e9); beyond, k times a part rounds and the absolute error grows like |x| 2^-53, so
// from 2^50 on, where it would pass 0.1, the helpers return NaN, as for inf and NaN. On
// [-pi/4, pi/4] minimax polynomials for sin and cos; the quadrant k mod 4 picks
// +-sin r or +-cos r. Statements: they leave q, sin_r and cos_r; |x| < 2^50 is the caller's.
#define KILN_GLSL_REDUCE_PIO2_F64(D)                                                                             \
  double k = floor(x * D(0.6366197723675814) + D(0.5));                                                         \
  double r = x - k * D(1.570796012878418);                                                                       \
  r = r - k * D(3.139164164167596e-07);                                                                          \
  r = r - k * D(6.223369259164557e-14);                                                                          \
  r = r - k * D(2.9127304114676625e-20);                                                                         \
  r = r - k * D(1.644624610775752e-26);                                                                          \
  r = r - k * D(1.082856673921914e-32);                                                                          \
  int q = int(k - double(4) * floor(k * D(0.25)));                                                               \
  double z = r * r;                                                                                              \
  double sin_r = r + r * z * (D(-0.16666666666666632) + z * (D(0.00833333333332249) +                            \
                 z * (D(-0.0001984126982985795) + z * (D(2.7557313707070068e-06) +                               \
                 z * (D(-2.5050760253406863e-08) + z * D(1.58969099521155e-10))))));                             \
  double hz = D(0.5) * z;                                                                                        \
  double w = double(1) - hz;                                                                                     \
  double cos_r = w + (((double(1) - w) - hz) + z * z * (D(0.0416666666666666) + z * (D(-0.001388888888887411) +  \
                 z * (D(2.480158728947673e-05) + z * (D(-2.7557314351390663e-07) +                               \
                 z * (D(2.087572321298175e-09) + z * D(-1.1359647557788195e-11)))))));
// Measured, over the accurate range: relative error <= 4.2e-16 for sin and cos, 5.7e-16 for tan.
#define KILN_GLSL_SIN_F64(D)                                                                                     \
  double kiln_sin_f64(double x) {                                                                                \
    if (!(abs(x) < D(1125899906842624.0))) return KILN_GLSL_NAN_F64;                                             \
    if (abs(x) < D(7.450580596923828e-09)) return x;                                                             \
    KILN_GLSL_REDUCE_PIO2_F64(D)                                                                                 \
    return q == 0 ? sin_r : (q == 1 ? cos_r : (q == 2 ? -sin_r : -cos_r));                                       \
  }
#define KILN_GLSL_COS_F64(D)                                                                                     \
  double kiln_cos_f64(double x) {                                                                                \
    if (!(abs(x) < D(1125899906842624.0))) return KILN_GLSL_NAN_F64;                                             \
    KILN_GLSL_REDUCE_PIO2_F64(D)                                                                                 \
    return q == 0 ? cos_r : (q == 1 ? -sin_r : (q == 2 ? -cos_r : sin_r));                                       \
  }
#define KILN_GLSL_TAN_F64(D)                                                                                     \
  double kiln_tan_f64(double x) {                                                                                \
    if (!(abs(x) < D(1125899906842624.0))) return KILN_GLSL_NAN_F64;                                             \
    if (abs(x) < D(7.450580596923828e-09)) return x;                                                             \
    KILN_GLSL_REDUCE_PIO2_F64(D)                                                                                 \
    return (q == 0 || q == 2) ? sin_r / cos_r : -cos_r / sin_r;                                                  \
  }

// tanh, f64: below |x| = 0.55, x + x^3 P(x^2) with P a Chebyshev fit of (tanh x - x) / x^3
// (relative error 2.3e-18 on the interval; x itself below 2^-27, which keeps -0);
// 1 - 2 / (e^2|x| + 1) up to 22, +-1 beyond.
// Needs kiln_exp_f64. Measured: relative error <= 3.1e-16.
#define KILN_GLSL_TANH_F64(D)                                                                                    \
  double kiln_tanh_f64(double x) {                                                                               \
    double z = abs(x);                                                                                           \
    if (z < D(7.450580596923828e-09)) return x;                                                                  \
    if (z < D(0.55)) {                                                                                           \
      double s = x * x;                                                                                          \
      return x + x * s * (D(-0.3333333333333333) + s * (D(0.13333333333332714) + s * (D(-0.053968253967434016) + \
             s * (D(0.021869488493666944) + s * (D(-0.008863234397814355) + s * (D(0.003592110378689024) +       \
             s * (D(-0.001455661830100716) + s * (D(0.0005889360520074057) + s * (D(-0.0002346347410887237) +    \
             s * (D(8.511313685577672e-05) + s * D(-2.060276537636634e-05)))))))))));                            \
    }                                                                                                            \
    if (z > double(22)) return x < double(0) ? double(-1) : double(1);                                           \
    double r = double(1) - double(2) / (kiln_exp_f64(double(2) * z) + double(1));                                \
    return x < double(0) ? -r : r;                                                                               \
  }

// erf, f64: below |x| = 2, erf(x) = 2/sqrt(pi) e^-x^2 sum 2^n x^(2n+1) / (1 3 ... (2n+1)), a
// series of positive terms (no cancellation), summed with Kahan's compensation until a term
// no longer counts; from 2 to 6, 1 - erfc(x) with erfc(x) = e^-x^2 / sqrt(pi) / F and
// F = x + (1/2) / (x + 1 / (x + (3/2) / (x + ...))), the continued fraction to 40 levels
// (converged to 1e-16 at 2, and erfc is below 0.005 there); +-1 beyond, where erf rounds to
// +-1. Needs kiln_exp_f64. Measured: relative error <= 6e-16.
#define KILN_GLSL_ERF_F64(D)                                                                                     \
  double kiln_erf_f64(double x) {                                                                                \
    double z = abs(x);                                                                                           \
    if (z < double(2)) {                                                                                         \
      double x2 = x * x;                                                                                         \
      double t = x;                                                                                              \
      precise double sum = x;                                                                                    \
      precise double carry = double(0);                                                                          \
      for (int n = 1; n < 64; n++) {                                                                             \
        t = t * x2 / (double(n) + D(0.5));                                                                       \
        precise double y = t - carry;                                                                            \
        precise double next = sum + y;                                                                           \
        carry = (next - sum) - y;                                                                                \
        sum = next;                                                                                              \
        if (abs(t) <= abs(sum) * D(1.3877787807814457e-17)) break;                                               \
      }                                                                                                          \
      return D(1.1283791670955126) * sum * kiln_exp_f64(-x2);                                                    \
    }                                                                                                            \
    if (!(z < double(6))) return isnan(x) ? x : (x < double(0) ? double(-1) : double(1));                        \
    double f = z;                                                                                                \
    for (int n = 40; n > 0; n--) f = z + double(n) * D(0.5) / f;                                                 \
    double erfc = kiln_exp_f64(-z * z) / (D(1.7724538509055159) * f);                                            \
    return x < double(0) ? erfc - double(1) : double(1) - erfc;                                                  \
  }

// a^b for finite a > 0 and b, a != 1, b != 0 (the core of kiln_pow_f64; it leaves m): exp(b log a)
// with log a in extra precision, since an error e in b log a is a relative error e in the
// result, and b log a reaches 745. a = 2^k g with g in [sqrt(1/2), sqrt(2)); g = c (1 + s) / (1 - s)
// around the nearest of c = 51/64, 1, 5/4 (short, so g - c is exact; |s| < 0.062), with log c
// in two parts; log g = log c + 2 atanh(s), 2 atanh(s) = 2 s + s^3 P(s^2), P a Chebyshev fit,
// and s's rounding error from the residual g - c - s (g + c), exact in 21-bit halves. Then
// log a = lh + ll, b log a = yh + yl (Dekker's product, in halves again) and
// m = exp(yh) (1 + yl).
#define KILN_GLSL_POW_POSITIVE_F64(D)                                                                            \
  double v = x;                                                                                                  \
  double k = double(0);                                                                                          \
  if (v < D(2.2250738585072014e-308)) {                                                                          \
    v = v * D(18014398509481984.0);                                                                              \
    k = double(-54);                                                                                             \
  }                                                                                                              \
  int e;                                                                                                         \
  double g = frexp(v, e);                                                                                        \
  if (g < D(0.7071067811865476)) {                                                                               \
    g = g * double(2);                                                                                           \
    e = e - 1;                                                                                                   \
  }                                                                                                              \
  k = k + double(e);                                                                                             \
  double c = double(1);                                                                                          \
  double log_c_hi = double(0);                                                                                   \
  double log_c_lo = double(0);                                                                                   \
  if (g < D(0.89)) {                                                                                             \
    c = D(0.796875);                                                                                             \
    log_c_hi = D(-0.22705745068378747);                                                                          \
    log_c_lo = D(4.844138023690714e-11);                                                                         \
  }                                                                                                              \
  if (g > D(1.12)) {                                                                                             \
    c = D(1.25);                                                                                                 \
    log_c_hi = D(0.22314355126582086);                                                                           \
    log_c_lo = D(4.838889490356316e-11);                                                                         \
  }                                                                                                              \
  precise double f = g - c;                                                                                      \
  precise double d = g + c;                                                                                      \
  precise double dg = d - g;                                                                                     \
  precise double dl = (g - (d - dg)) + (c - dg);                                                                 \
  precise double s = f / d;                                                                                      \
  precise double sh = KILN_GLSL_HIGH_HALF_F64(s);                                                                \
  precise double dh = KILN_GLSL_HIGH_HALF_F64(d);                                                                \
  precise double sl = s - sh;                                                                                    \
  precise double dt = d - dh;                                                                                    \
  precise double ds = (((((f - sh * dh) - sh * dt) - sl * dh) - sl * dt) - s * dl) / d;                          \
  double z = s * s;                                                                                              \
  double tail = s * z * (D(0.6666666666666666) + z * (D(0.4000000000000043) + z * (D(0.28571428570150637) +      \
                z * (D(0.22222223619587367) + z * (D(0.18181127852534248) + z * D(0.15541627261352267))))));      \
  precise double kh = k * D(0.6931471803691238) + log_c_hi;                                                      \
  precise double lh = kh + double(2) * s;                                                                        \
  precise double ll = ((kh - lh) + double(2) * s) +                                                              \
                      ((k * D(1.9082149292705877e-10) + log_c_lo) + (double(2) * ds * (double(1) + z) + tail));   \
  precise double yh = b * lh;                                                                                    \
  if (abs(yh) > double(1000)) {                                                                                  \
    m = yh > double(0) ? KILN_GLSL_INF_F64 : double(0);                                                          \
  } else {                                                                                                       \
    precise double bh = KILN_GLSL_HIGH_HALF_F64(b);                                                              \
    precise double lhh = KILN_GLSL_HIGH_HALF_F64(lh);                                                            \
    precise double bl = b - bh;                                                                                  \
    precise double lhl = lh - lhh;                                                                               \
    precise double yl = ((((bh * lhh - yh) + bh * lhl) + bl * lhh) + bl * lhl) + b * ll;                         \
    precise double y = yh + yl;                                                                                  \
    precise double ylo = yl - (y - yh);                                                                          \
    double ex = kiln_exp_f64(y);                                                                                 \
    m = isinf(ex) ? ex : ex + ex * ylo;                                                                          \
  }

// pow, f64, with std::pow's meaning: the special cases as in the f32 helper, the finite
// positive powers by the core above. Needs kiln_exp_f64. Measured: relative error <= 4.9e-16.
#define KILN_GLSL_POW_F64(D)                                                                                     \
  double kiln_pow_f64(double a, double b) {                                                                      \
    if (b == double(0) || a == double(1)) return double(1);                                                      \
    if (isnan(a) || isnan(b)) return a + b;                                                                      \
    double x = abs(a);                                                                                           \
    if (isinf(b))                                                                                                \
      return x == double(1) ? double(1) : ((x < double(1)) == (b < double(0)) ? KILN_GLSL_INF_F64 : double(0));  \
    double m;                                                                                                    \
    if (x == double(0)) {                                                                                        \
      m = b < double(0) ? KILN_GLSL_INF_F64 : double(0);                                                         \
    } else if (isinf(x)) {                                                                                       \
      m = b < double(0) ? double(0) : KILN_GLSL_INF_F64;                                                         \
    } else if (b == double(1)) {                                                                                 \
      m = x;                                                                                                     \
    } else if (b == double(2)) {                                                                                 \
      m = x * x;                                                                                                 \
    } else {                                                                                                     \
      KILN_GLSL_POW_POSITIVE_F64(D)                                                                              \
    }                                                                                                            \
    if (unpackDouble2x32(a).y < 0x80000000u) return m;                                                           \
    if (floor(b) != b) return (x == double(0) || isinf(x)) ? m : KILN_GLSL_NAN_F64;                              \
    return floor(b * D(0.5)) != b * D(0.5) ? -m : m;                                                             \
  }

// ---------------------------------------------------------------- types and constants
// The GLSL type of a ScalarType. 64- and 8-bit integers need the caller to enable
// GL_EXT_shader_explicit_arithmetic_types_int64 / _int8 (and 8-bit storage).
inline std::string glsl_type(ScalarType t) {
  switch (t) {
    case ScalarType::f32: return "float";
    case ScalarType::f64: return "double";
    case ScalarType::i32: return "int";
    case ScalarType::i64: return "int64_t";
    case ScalarType::u8: return "uint8_t";
    case ScalarType::boolean: return "bool";
  }
  return "?";
}

// A constant of type t, exact: floats print the shortest decimal that reads back as the
// same double (the CPU rounds that double to float the same way), doubles get GLSL's lf
// suffix (a bare literal would be a float); integers convert as kiln::fn::constant does.
inline std::string glsl_constant(double v, ScalarType t) {
  if (is_float(t)) {
    const bool f32 = t == ScalarType::f32;
    if (std::isnan(v)) return f32 ? "uintBitsToFloat(0x7fc00000u)" : "packDouble2x32(uvec2(0u, 0x7ff80000u))";
    if (std::isinf(v)) {
      if (f32) return v > 0 ? "uintBitsToFloat(0x7f800000u)" : "uintBitsToFloat(0xff800000u)";
      return v > 0 ? "packDouble2x32(uvec2(0u, 0x7ff00000u))" : "packDouble2x32(uvec2(0u, 0xfff00000u))";
    }
    std::string s = fmt::format("{}", v);
    if (s.find_first_of(".e") == std::string::npos) s += ".0";  // 20 → 20.0; keeps -0.0 negative
    return f32 ? "float(" + s + ")" : "double(" + s + "lf)";
  }
  KILN_CHECK(is_integer(t), "render_glsl: a {} tree has the numeric constant {}", scalar_type_name(t), v);
  KILN_CHECK(std::isfinite(v) && std::abs(v) < 9.2e18, "render_glsl: the constant {} is no {} value", v,
             scalar_type_name(t));
  const long long n = static_cast<long long>(v);
  switch (t) {
    case ScalarType::i32: {
      const auto i = static_cast<std::int32_t>(n);
      // A literal -2147483648 would negate 2147483648, which is out of int's range.
      if (i == std::numeric_limits<std::int32_t>::min()) return "(int(-2147483647) - int(1))";
      return fmt::format("int({})", i);
    }
    case ScalarType::i64:
      if (n == std::numeric_limits<long long>::min()) return "(int64_t(-9223372036854775807l) - int64_t(1))";
      if (n == static_cast<std::int32_t>(n)) return fmt::format("int64_t({})", n);
      return fmt::format("int64_t({}l)", n);
    default: return fmt::format("uint8_t({})", static_cast<std::uint8_t>(n));
  }
}

namespace detail {

using GlslHelper = Helper;

// The helper function that renders `kind` in type t. Only called for the kinds below, and
// in f64 also for exp, log, sin, cos and tan.
inline GlslHelper glsl_helper(Kind kind, ScalarType t) {
  if (t == ScalarType::f64) {
    static constexpr Kind needs_exp[] = {Kind::exp}, needs_log[] = {Kind::log};
    switch (kind) {
      case Kind::exp: return {"kiln_exp_f64", KILN_GLSL_SOURCE(KILN_GLSL_EXP_F64(KILN_GLSL_DOUBLE))};
      case Kind::log: return {"kiln_log_f64", KILN_GLSL_SOURCE(KILN_GLSL_LOG_F64(KILN_GLSL_DOUBLE))};
      case Kind::log1p: return {"kiln_log1p_f64", KILN_GLSL_SOURCE(KILN_GLSL_LOG1P_F64(KILN_GLSL_DOUBLE)), needs_log};
      case Kind::sin: return {"kiln_sin_f64", KILN_GLSL_SOURCE(KILN_GLSL_SIN_F64(KILN_GLSL_DOUBLE))};
      case Kind::cos: return {"kiln_cos_f64", KILN_GLSL_SOURCE(KILN_GLSL_COS_F64(KILN_GLSL_DOUBLE))};
      case Kind::tan: return {"kiln_tan_f64", KILN_GLSL_SOURCE(KILN_GLSL_TAN_F64(KILN_GLSL_DOUBLE))};
      case Kind::tanh: return {"kiln_tanh_f64", KILN_GLSL_SOURCE(KILN_GLSL_TANH_F64(KILN_GLSL_DOUBLE)), needs_exp};
      case Kind::erf: return {"kiln_erf_f64", KILN_GLSL_SOURCE(KILN_GLSL_ERF_F64(KILN_GLSL_DOUBLE)), needs_exp};
      case Kind::pow: return {"kiln_pow_f64", KILN_GLSL_SOURCE(KILN_GLSL_POW_F64(KILN_GLSL_DOUBLE)), needs_exp};
      case Kind::round_even:
        return {"kiln_round_even_f64", KILN_GLSL_SOURCE(KILN_GLSL_ROUND_EVEN_F64(KILN_GLSL_DOUBLE))};
      default: break;
    }
  }
  switch (kind) {
    case Kind::erf: return {"kiln_erf_f32", KILN_GLSL_SOURCE(KILN_GLSL_ERF_F32)};
    case Kind::log1p: return {"kiln_log1p_f32", KILN_GLSL_SOURCE(KILN_GLSL_LOG1P_F32)};
    case Kind::tanh: return {"kiln_tanh_f32", KILN_GLSL_SOURCE(KILN_GLSL_TANH_F32)};
    case Kind::pow: return {"kiln_pow_f32", KILN_GLSL_SOURCE(KILN_GLSL_POW_F32)};
    default: break;
  }
  const int op = kind == Kind::int_div ? 0 : kind == Kind::int_rem ? 1 : 2;
  static constexpr GlslHelper i32[] = {{"kiln_int_div_i32", KILN_GLSL_SOURCE(KILN_GLSL_INT_DIV(int, i32))},
                                       {"kiln_int_rem_i32", KILN_GLSL_SOURCE(KILN_GLSL_INT_REM(int, i32))},
                                       {"kiln_int_pow_i32", KILN_GLSL_SOURCE(KILN_GLSL_INT_POW(int, i32))}};
  static constexpr GlslHelper i64[] = {{"kiln_int_div_i64", KILN_GLSL_SOURCE(KILN_GLSL_INT_DIV(int64_t, i64))},
                                       {"kiln_int_rem_i64", KILN_GLSL_SOURCE(KILN_GLSL_INT_REM(int64_t, i64))},
                                       {"kiln_int_pow_i64", KILN_GLSL_SOURCE(KILN_GLSL_INT_POW(int64_t, i64))}};
  static constexpr GlslHelper u8[] = {{"kiln_int_div_u8", KILN_GLSL_SOURCE(KILN_GLSL_UINT_DIV(uint8_t, u8))},
                                      {"kiln_int_rem_u8", KILN_GLSL_SOURCE(KILN_GLSL_UINT_REM(uint8_t, u8))},
                                      {"kiln_int_pow_u8", KILN_GLSL_SOURCE(KILN_GLSL_UINT_POW(uint8_t, u8))}};
  return t == ScalarType::i32 ? i32[op] : t == ScalarType::i64 ? i64[op] : u8[op];
}

}  // namespace detail

}  // namespace kiln::codegen
