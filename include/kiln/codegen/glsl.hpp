// GLSL rendering of codegen trees (codegen/expr.hpp): one GLSL 4.50 expression per tree,
// plus the helper functions it calls where GLSL has no builtin with the catalogue's
// meaning (erf, log1p, tanh, pow of negative bases, the integer Div / Rem / Pow).
#pragma once

#include "kiln/codegen/expr.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
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
// helper uses only: T(x) casts for every literal (a bare 0.5 would be a double in C++),
// if / for / ?:, the operators, and GLSL builtins that have a <cmath> namesake (abs, exp,
// log, pow, floor, isnan, isinf) or a tiny shim in the tests (uintBitsToFloat,
// floatBitsToUint). Comments live outside the macros, which are single logical lines.
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

// ---------------------------------------------------------------- rendering
struct GlslExpression {
  std::string helpers;  // GLSL functions that `value` calls, each once, to place before its use
  std::string value;    // one expression over in0, in1...; of glsl_type(t), or bool for a mask root
};

namespace detail {

struct GlslHelper {
  std::string_view name;
  std::string_view source;
};

// The helper function that renders `kind` in type t. Only called for the kinds below.
inline GlslHelper glsl_helper(Kind kind, ScalarType t) {
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

// Renders `root`, a tree computing in type t. Throws kiln::Error for what GLSL cannot do:
// f64 transcendentals (exp, log, log1p, sin, cos, tan, tanh, erf, pow), since GLSL's
// builtins for them take float only and Kiln has no double-precision replacements (rather
// than silently computing through float); float-only kinds in integer trees; integer
// kinds in float trees; numbers in a bool tree.
// NaN, infinities and signed zeros behave as in the catalogue only where the shader keeps
// them: Vulkan lets drivers assume they never occur unless the SPIR-V declares
// SignedZeroInfNanPreserve (VK_KHR_shader_float_controls), which the caller should request.
// Shared subtrees repeat in the text (GLSL has no let); shader compilers merge them.
inline GlslExpression render_glsl(const NodePtr& root, ScalarType t) {
  KILN_CHECK(root != nullptr, "render_glsl: null tree");
  GlslExpression out;
  std::vector<std::string_view> used;                    // helpers already in out.helpers
  std::unordered_map<const Node*, std::string> rendered;  // shared subtrees render once (and repeat as text)

  auto helper = [&](Kind kind) {
    const detail::GlslHelper h = detail::glsl_helper(kind, t);
    if (std::find(used.begin(), used.end(), h.name) == used.end()) {
      used.push_back(h.name);
      out.helpers += h.source;
      out.helpers += '\n';
    }
    return std::string(h.name);
  };
  // isnan / isinf of an integer, or of a finite constant, is false: kiln::fn::max's NaN
  // checks vanish for integer trees and for constant operands (fn::min(x, constant(x, 20))).
  auto always_false = [&](const Node& n) {
    if (n.kind != Kind::isnan && n.kind != Kind::isinf) return false;
    const Node& x = *n.args[0];
    return !is_float(t) || (x.kind == Kind::constant && std::isfinite(x.value));
  };

  auto render = [&](auto& self, const Node& n) -> std::string {
    if (auto it = rendered.find(&n); it != rendered.end()) return it->second;
    const std::string_view name = kind_name(n.kind);
    KILN_CHECK(t != ScalarType::boolean || n.mask, "render_glsl: a bool tree has the numeric node {}", name);
    std::vector<std::string> a;
    for (const NodePtr& arg : n.args) {
      // The folded select never renders its dead branch (or the condition).
      if (n.kind == Kind::select && always_false(*n.args[0])) break;
      a.push_back(self(self, *arg));
    }
    auto require_float = [&](bool f64_ok) {
      KILN_CHECK(is_float(t), "render_glsl: {} needs a float type, got {}", name, scalar_type_name(t));
      KILN_CHECK(t == ScalarType::f32 || f64_ok,
                 "render_glsl: {} is not available for f64: GLSL's transcendental functions (exp, log, sin, cos, "
                 "tan, tanh, pow) take float only, and Kiln has no double-precision versions of them yet",
                 name);
    };
    auto call = [&](std::string_view fn) { return fmt::format("{}({})", fn, fmt::join(a, ", ")); };
    auto infix = [&](std::string_view op) { return fmt::format("({} {} {})", a[0], op, a[1]); };

    std::string s;
    switch (n.kind) {
      case Kind::input: s = fmt::format("in{}", n.index); break;
      case Kind::constant: s = glsl_constant(n.value, t); break;
      case Kind::neg:  // u8 wraps, as T(-x) does in C++
        s = t == ScalarType::u8 ? fmt::format("(uint8_t(0) - {})", a[0]) : fmt::format("(-{})", a[0]);
        break;
      case Kind::abs: s = t == ScalarType::u8 ? a[0] : call("abs"); break;  // std::abs of a u8 is the value
      case Kind::exp: case Kind::log: case Kind::sin: case Kind::cos: case Kind::tan:
        require_float(false);
        s = call(name);
        break;
      case Kind::sqrt: case Kind::floor: case Kind::ceil:
        require_float(true);
        s = call(name);
        break;
      case Kind::round_even:
        require_float(true);
        s = call("roundEven");
        break;
      case Kind::log1p: case Kind::tanh: case Kind::erf: case Kind::pow:
        require_float(false);
        s = call(helper(n.kind));
        break;
      case Kind::add: s = infix("+"); break;
      case Kind::sub: s = infix("-"); break;
      case Kind::mul: s = infix("*"); break;
      case Kind::div: s = infix("/"); break;
      case Kind::max: s = call("max"); break;
      case Kind::min: s = call("min"); break;
      case Kind::int_div: case Kind::int_rem: case Kind::int_pow:
        KILN_CHECK(is_integer(t), "render_glsl: {} needs an integer type, got {}", name, scalar_type_name(t));
        s = call(helper(n.kind));
        break;
      case Kind::select:
        s = always_false(*n.args[0]) ? self(self, *n.args[2]) : fmt::format("({} ? {} : {})", a[0], a[1], a[2]);
        break;
      case Kind::isnan: case Kind::isinf: s = always_false(n) ? "false" : call(name); break;
      case Kind::lt: s = infix("<"); break;
      case Kind::le: s = infix("<="); break;
      case Kind::gt: s = infix(">"); break;
      case Kind::ge: s = infix(">="); break;
      case Kind::eq: s = infix("=="); break;
      case Kind::ne: s = infix("!="); break;
      case Kind::logical_and: s = infix("&&"); break;
      case Kind::logical_or: s = infix("||"); break;
      case Kind::logical_xor: s = infix("!="); break;
      case Kind::logical_not: s = fmt::format("(!{})", a[0]); break;
    }
    rendered.emplace(&n, s);
    return s;
  };
  out.value = render(render, *root);
  return out;
}

}  // namespace kiln::codegen
