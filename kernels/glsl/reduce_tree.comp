// Reduction of long rows (backends/vulkan/src/reduce.cpp): one workgroup per output element,
// or per part of one when a row is split (params[3] parts of params[4] elements; the parts'
// accumulators then go to a scratch buffer that reduce_rows.comp reduces). The invocations
// stride over the row and combine their accumulators with a tree in shared memory.
// Knobs, bindings and parameters: reduce.glsl.
#version 450
#include "kiln.glsl"

layout(local_size_x = WORKGROUP_SIZE) in;
#include "reduce.glsl"

shared ACC partial[WORKGROUP_SIZE];

void main() {
  const int item = workgroup_index();
  if (item >= params[6]) return;  // uniform over the workgroup: no barrier is skipped by some only
  const int lid = int(gl_LocalInvocationID.x);
  const int n = params[1], inner = params[2], parts = params[3], chunk = params[4];
  const int r = item / parts, p = item - r * parts;
  const int base = params[5] + row_start(r);
  const int j1 = min(n, (p + 1) * chunk);
  ACC acc = identity();
  for (int j = p * chunk + lid; j < j1; j += WORKGROUP_SIZE)
    acc = combine(acc, ACC(in_data[base + j * inner]));
  partial[lid] = acc;
  memoryBarrierShared();
  barrier();
  for (int w = WORKGROUP_SIZE / 2; w > 0; w >>= 1) {
    if (lid < w) partial[lid] = combine(partial[lid], partial[lid + w]);
    memoryBarrierShared();
    barrier();
  }
  if (lid == 0) out_data[item] = finish(partial[0]);
}
