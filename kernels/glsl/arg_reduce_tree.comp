// Arg-reduction of long rows: one workgroup per output element. Each invocation keeps the
// first best of its strided elements (ascending indices); the tree in shared memory takes
// the better value, or on a tie (or two NaNs) the lower index.
// Knobs, bindings and parameters: arg_reduce.glsl.
#version 450
#include "kiln.glsl"

layout(local_size_x = WORKGROUP_SIZE) in;
#include "arg_reduce.glsl"

shared CMP best_value[WORKGROUP_SIZE];
shared int best_index[WORKGROUP_SIZE];

void main() {
  const int item = workgroup_index();
  if (item >= params[6]) return;  // uniform over the workgroup: no barrier is skipped by some only
  const int lid = int(gl_LocalInvocationID.x);
  const int n = params[1], inner = params[2];
  const int base = params[5] + row_start(item);
  int index = -1;
  CMP best = CMP(0);
  for (int j = lid; j < n; j += WORKGROUP_SIZE) {
    const CMP v = CMP(in_data[base + j * inner]);
    if (index < 0 || better(v, best)) {
      best = v;
      index = j;
    }
  }
  best_value[lid] = best;
  best_index[lid] = index;
  memoryBarrierShared();
  barrier();
  for (int w = WORKGROUP_SIZE / 2; w > 0; w >>= 1) {
    if (lid < w) {
      const int bi = best_index[lid + w];
      const CMP bv = best_value[lid + w], av = best_value[lid];
      const int ai = best_index[lid];
      const bool take = bi >= 0 && (ai < 0 || better(bv, av) || (!better(av, bv) && bi < ai));
      if (take) {
        best_value[lid] = bv;
        best_index[lid] = bi;
      }
    }
    memoryBarrierShared();
    barrier();
  }
  if (lid == 0) out_data[item] = int64_t(best_index[0]);
}
