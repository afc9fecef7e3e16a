// Shared by arg_reduce_rows.comp and arg_reduce_tree.comp (backends/vulkan/src/reduce.cpp):
// the first index of the max (min) along a dim, a NaN counting as the max (min).
//
// Knobs: T, the element type; CMP, the type elements compare in (T, or uint for u8 and
// bool); OP_ARGMAX or OP_ARGMIN.
// Bindings: 0 params, 1 out (i64 indices), 2 in. Parameters: rows.glsl.
#include "rows.glsl"

layout(std430, binding = 1) writeonly buffer Out { int64_t out_data[]; };
layout(std430, binding = 2) readonly buffer In { T in_data[]; };

// Whether v replaces a best value of a lower index.
bool better(CMP v, CMP best) {
#if defined(OP_ARGMAX)
  const bool strict = v > best;
#else
  const bool strict = v < best;
#endif
#if defined(CMP_F32) || defined(CMP_F64)
  return strict || (isnan(v) && !isnan(best));
#else
  return strict;
#endif
}
