// Shared by reduce_rows.comp and reduce_tree.comp (backends/vulkan/src/reduce.cpp): the
// bindings, one accumulation step with its identity, and the value written at the end.
//
// Knobs: IN, ACC, OUT, the input, accumulator and output types (kiln.glsl's type pairs);
// one of OP_SUM (sum, and mean with a divisor), OP_PROD, OP_MAX, OP_MIN. Max and min keep a
// NaN once seen.
// Bindings: 0 params, 1 out, 2 in. Parameters: rows.glsl.
#include "rows.glsl"

layout(std430, binding = 1) writeonly buffer Out { OUT out_data[]; };
layout(std430, binding = 2) readonly buffer In { IN in_data[]; };

#if defined(ACC_F32) || defined(ACC_F64)
#define ACC_IS_FLOAT 1
#else
#define ACC_IS_FLOAT 0
#endif

// The lowest and highest values of ACC: the identities of max and min.
#if ACC_IS_FLOAT
#define ACC_LOWEST ACC(uintBitsToFloat(0xff800000u))  // -inf
#define ACC_HIGHEST ACC(uintBitsToFloat(0x7f800000u))  // +inf
#elif defined(ACC_I32)
#define ACC_LOWEST (-2147483647 - 1)
#define ACC_HIGHEST 2147483647
#elif defined(ACC_I64)
#define ACC_LOWEST (-9223372036854775807l - 1l)
#define ACC_HIGHEST 9223372036854775807l
#else  // u32: the accumulator of u8 and bool
#define ACC_LOWEST 0u
#define ACC_HIGHEST 0xffffffffu
#endif

ACC identity() {
#if defined(OP_SUM)
  return ACC(0);
#elif defined(OP_PROD)
  return ACC(1);
#elif defined(OP_MAX)
  return ACC_LOWEST;
#else
  return ACC_HIGHEST;
#endif
}

ACC combine(ACC a, ACC b) {
#if defined(OP_SUM)
  return a + b;
#elif defined(OP_PROD)
  return a * b;
#elif defined(OP_MAX) && ACC_IS_FLOAT
  return (b > a || isnan(b)) ? b : a;
#elif defined(OP_MAX)
  return b > a ? b : a;
#elif ACC_IS_FLOAT
  return (b < a || isnan(b)) ? b : a;
#else
  return b < a ? b : a;
#endif
}

// The value written for a finished accumulator (or a part's, which OUT holds exactly).
OUT finish(ACC acc) { return params[7] != 0 ? OUT(acc / ACC(params[7])) : OUT(acc); }
