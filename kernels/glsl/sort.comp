// Stable sort along a dim (backends/vulkan/src/sort.cpp), exactly the CPU backend's order:
// NaN sorts last ascending and first descending, equal values (and NaNs among themselves)
// keep their input order in both directions, -0.0 and 0.0 compare equal.
//
// A rank sort: the (contiguous) input is seen as [outer, n, inner]; one invocation per
// element counts the elements of its line that sort before it under the strict total order
// (key, then input position), which is its output position, and writes its value and index
// there. O(n^2) work per line, but exact, stable and deterministic, with one dispatch.
//
// Knobs: T, the element type; KEY, the type elements compare in (T, or uint for u8 and
// bool); DESCENDING for a descending sort.
// Bindings: 0 params, 1 values (T), 2 indices (i64 as (low, high) pairs of ints, so only
// i64 values need shaderInt64), 3 in (T).
// Parameters (ints): [0] elements, [1] n, [2] inner, [3] input element offset.
#version 450
#include "kiln.glsl"

layout(local_size_x = WORKGROUP_SIZE) in;
layout(std430, binding = 1) writeonly buffer Values { T values_data[]; };
layout(std430, binding = 2) writeonly buffer Indices { int indices_data[]; };
layout(std430, binding = 3) readonly buffer In { T in_data[]; };

// lt(a, b): a's key sorts strictly before b's; same(a, b): equal keys (two NaNs are equal).
#if defined(KEY_F32) || defined(KEY_F64)
#if defined(DESCENDING)
bool lt(KEY a, KEY b) { return (isnan(a) && !isnan(b)) || a > b; }
#else
bool lt(KEY a, KEY b) { return (!isnan(a) && isnan(b)) || a < b; }
#endif
bool same(KEY a, KEY b) { return a == b || (isnan(a) && isnan(b)); }
#else
#if defined(DESCENDING)
bool lt(KEY a, KEY b) { return a > b; }
#else
bool lt(KEY a, KEY b) { return a < b; }
#endif
bool same(KEY a, KEY b) { return a == b; }
#endif

void main() {
  const int t = invocation_index();
  if (t >= params[0]) return;
  const int n = params[1], inner = params[2], offset = params[3];
  const int o = t / (n * inner), r = t - o * n * inner;
  const int j = r / inner, i = r - j * inner;
  const int base = o * n * inner + i;
  const KEY v = KEY(in_data[offset + t]);
  int rank = 0;
  for (int k = 0; k < n; ++k) {
    const KEY u = KEY(in_data[offset + base + k * inner]);
    if (lt(u, v) || (k < j && same(u, v))) ++rank;
  }
  const int p = base + rank * inner;
  values_data[p] = in_data[offset + t];
  indices_data[2 * p] = j;
  indices_data[2 * p + 1] = 0;
}
