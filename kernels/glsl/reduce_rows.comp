// Reduction of short rows (backends/vulkan/src/reduce.cpp): one invocation per output
// element loops over its row of n elements, in order. Also the second pass of a split row,
// which reduces the parts' accumulators. Knobs, bindings and parameters: reduce.glsl.
#version 450
#include "kiln.glsl"

layout(local_size_x = WORKGROUP_SIZE) in;
#include "reduce.glsl"

void main() {
  const int t = invocation_index();
  if (t >= params[6]) return;
  const int n = params[1], inner = params[2];
  int k = params[5] + row_start(t);
  ACC acc = identity();
  for (int j = 0; j < n; ++j, k += inner) acc = combine(acc, ACC(in_data[k]));
  out_data[t] = finish(acc);
}
