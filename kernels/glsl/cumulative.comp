// Cumulative sum and product along a dim (backends/vulkan/src/reduce.cpp):
// out[o, j, i] = x[o, 0, i] op ... op x[o, j, i], one invocation per line, a sequential scan.
// The output is contiguous.
//
// Knobs: T, the element type; ACC, the accumulator (double for f32 where the device has
// it, uint for u8, else T); OP_SUM or OP_PROD.
// Bindings: 0 params, 1 out, 2 in. Parameters: rows.glsl.
#version 450
#include "kiln.glsl"
#include "rows.glsl"

layout(local_size_x = WORKGROUP_SIZE) in;
layout(std430, binding = 1) writeonly buffer Out { T out_data[]; };
layout(std430, binding = 2) readonly buffer In { T in_data[]; };

#if defined(OP_SUM)
#define IDENTITY ACC(0)
ACC combine(ACC a, ACC b) { return a + b; }
#else
#define IDENTITY ACC(1)
ACC combine(ACC a, ACC b) { return a * b; }
#endif

void main() {
  const int t = invocation_index();
  if (t >= params[6]) return;
  const int n = params[1], inner = params[2];
  const int base = row_start(t);
  ACC acc = IDENTITY;
  for (int j = 0; j < n; ++j) {
    acc = combine(acc, ACC(in_data[params[5] + base + j * inner]));
    out_data[base + j * inner] = T(acc);
  }
}
