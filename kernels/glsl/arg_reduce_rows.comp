// Arg-reduction of short rows: one invocation per output element scans its row in order.
// Knobs, bindings and parameters: arg_reduce.glsl.
#version 450
#include "kiln.glsl"

layout(local_size_x = WORKGROUP_SIZE) in;
#include "arg_reduce.glsl"

void main() {
  const int t = invocation_index();
  if (t >= params[6]) return;
  const int n = params[1], inner = params[2];
  const int base = params[5] + row_start(t);
  CMP best = CMP(in_data[base]);
  int index = 0;
  for (int j = 1; j < n; ++j) {
    const CMP v = CMP(in_data[base + j * inner]);
    if (better(v, best)) {
      best = v;
      index = j;
    }
  }
  out_data[t] = int64_t(index);
}
