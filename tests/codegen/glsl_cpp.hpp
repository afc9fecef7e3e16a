// The GLSL helpers of src/codegen/glsl_helpers.hpp compiled as C++: the same macro text that
// render_glsl emits, with GLSL's builtins mapped to <cmath> and shims for the GLSL-only
// ones (the bit casts, frexp's out parameter), so the tests can run exactly the code a
// shader runs (on the CPU's libm). `inline` goes in front of each, as this header is
// included by several test files.
#pragma once

#include "codegen/glsl.hpp"

#include <bit>
#include <cmath>
#include <cstdint>

namespace kiln::codegen::test::glsl_cpp {

using std::abs;
using std::exp;
using std::floor;
using std::isinf;
using std::isnan;
using std::ldexp;
using std::log;
using std::pow;
using std::int64_t;
using std::uint8_t;
inline float uintBitsToFloat(unsigned bits) { return std::bit_cast<float>(bits); }
inline unsigned floatBitsToUint(float x) { return std::bit_cast<unsigned>(x); }
struct uvec2 {
  unsigned x, y;  // GLSL's order for packDouble2x32: x the low word, y the high one
  constexpr uvec2(unsigned low, unsigned high) : x(low), y(high) {}
};
inline double packDouble2x32(uvec2 v) { return std::bit_cast<double>(std::uint64_t{v.y} << 32 | v.x); }
inline uvec2 unpackDouble2x32(double x) {
  const auto bits = std::bit_cast<std::uint64_t>(x);
  return {static_cast<unsigned>(bits), static_cast<unsigned>(bits >> 32)};
}
inline double frexp(double x, int& exponent) { return std::frexp(x, &exponent); }  // GLSL's `out int`

inline KILN_GLSL_ERF_F32
inline KILN_GLSL_LOG1P_F32
inline KILN_GLSL_TANH_F32
inline KILN_GLSL_POW_F32
// The f64 helpers with C++'s double literals; `precise` (GLSL's "no contraction or
// reassociation") is C++'s default without -ffast-math.
#define KILN_GLSL_CPP_DOUBLE(x) double(x)
#define precise
inline KILN_GLSL_EXP_F64(KILN_GLSL_CPP_DOUBLE)
inline KILN_GLSL_LOG_F64(KILN_GLSL_CPP_DOUBLE)
inline KILN_GLSL_LOG1P_F64(KILN_GLSL_CPP_DOUBLE)
inline KILN_GLSL_SIN_F64(KILN_GLSL_CPP_DOUBLE)
inline KILN_GLSL_COS_F64(KILN_GLSL_CPP_DOUBLE)
inline KILN_GLSL_TAN_F64(KILN_GLSL_CPP_DOUBLE)
inline KILN_GLSL_TANH_F64(KILN_GLSL_CPP_DOUBLE)
inline KILN_GLSL_ERF_F64(KILN_GLSL_CPP_DOUBLE)
inline KILN_GLSL_POW_F64(KILN_GLSL_CPP_DOUBLE)
inline KILN_GLSL_ROUND_EVEN_F64(KILN_GLSL_CPP_DOUBLE)
#undef precise
#undef KILN_GLSL_CPP_DOUBLE
inline KILN_GLSL_INT_DIV(int, i32)
inline KILN_GLSL_INT_REM(int, i32)
inline KILN_GLSL_INT_POW(int, i32)
inline KILN_GLSL_INT_DIV(int64_t, i64)
inline KILN_GLSL_INT_REM(int64_t, i64)
inline KILN_GLSL_INT_POW(int64_t, i64)
inline KILN_GLSL_UINT_DIV(uint8_t, u8)
inline KILN_GLSL_UINT_REM(uint8_t, u8)
inline KILN_GLSL_UINT_POW(uint8_t, u8)

// The integer helpers by C++ type, for the interpreter.
template <class T> T int_div(T a, T b) {
  if constexpr (std::is_same_v<T, std::int32_t>) return kiln_int_div_i32(a, b);
  else if constexpr (std::is_same_v<T, std::int64_t>) return kiln_int_div_i64(a, b);
  else return kiln_int_div_u8(a, b);
}
template <class T> T int_rem(T a, T b) {
  if constexpr (std::is_same_v<T, std::int32_t>) return kiln_int_rem_i32(a, b);
  else if constexpr (std::is_same_v<T, std::int64_t>) return kiln_int_rem_i64(a, b);
  else return kiln_int_rem_u8(a, b);
}
template <class T> T int_pow(T a, T b) {
  if constexpr (std::is_same_v<T, std::int32_t>) return kiln_int_pow_i32(a, b);
  else if constexpr (std::is_same_v<T, std::int64_t>) return kiln_int_pow_i64(a, b);
  else return kiln_int_pow_u8(a, b);
}

}  // namespace kiln::codegen::test::glsl_cpp
