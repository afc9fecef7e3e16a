// Resampling of NCHW tensors, nearest, bilinear and bicubic, forward and backward
// (backends/vulkan/src/interpolate.cpp). Every mode is separable: output (oh, ow) reads
// K x K inputs (K = 1, 2, 4) through the taps of its row and column, which the host
// computes with the CPU backend's formulas and uploads (input index and weight per output
// position and axis), so the kernels use the very same indices and weights. Arithmetic is
// `precise` (no fused multiply-add, a fixed evaluation order).
//
// Knobs: T, the element type (float, double); one of
// - KIND_FORWARD: one invocation per output element, summing in the CPU's order;
// - KIND_BACKWARD: one invocation per INPUT element, looping over the output taps that read
//   it (inverse tap lists per axis: the (o, k) slots whose index is i, o ascending), in the
//   CPU's scatter order (oh, ow, then the taps a, c). Deterministic, no atomics.
// Bindings: 0 params, 1 out, 2 in (x forward, dy backward), 3 taps (ints), 4 weights (T):
// the row weights (OH * K) then the column weights (OW * K).
//   forward taps: [row index (OH * K)] [column index (OW * K)];
//   backward taps: [row inverse: start (H + 1), slots (OH * K)] [column inverse: start
//   (W + 1), slots (OW * K)], a slot being the position of its weight (column slots counted
//   from params[7]).
// Parameters (ints): [0] invocations, [1] H, [2] W, [3] OH, [4] OW, [5] K, [6] the input's
// element offset, [7] the first column weight (OH * K); backward adds [8] the row inverse's
// start and [9] the column inverse's start in the taps buffer.
#version 450
#include "kiln.glsl"

layout(local_size_x = WORKGROUP_SIZE) in;
layout(std430, binding = 1) writeonly buffer Out { T out_data[]; };
layout(std430, binding = 2) readonly buffer In { T in_data[]; };
layout(std430, binding = 3) readonly buffer Taps { int taps[]; };
layout(std430, binding = 4) readonly buffer Weights { T weights[]; };

void main() {
  const int i = invocation_index();
  if (i >= params[0]) return;
  const int H = params[1], W = params[2], OH = params[3], OW = params[4], K = params[5];
  const int offset = params[6], cols = params[7];
#if defined(KIND_FORWARD)
  const int p = i / (OH * OW), r = i - p * OH * OW;
  const int oh = r / OW, ow = r - oh * OW;
  const int plane = offset + p * H * W;
  precise T sum = T(0);
  for (int a = 0; a < K; ++a) {
    const int row = plane + taps[oh * K + a] * W;
    precise T inner = T(0);
    for (int c = 0; c < K; ++c)
      inner += weights[cols + ow * K + c] * in_data[row + taps[cols + ow * K + c]];
    sum += weights[oh * K + a] * inner;
  }
  out_data[i] = sum;
#elif defined(KIND_BACKWARD)
  const int p = i / (H * W), r = i - p * H * W;
  const int ih = r / W, iw = r - ih * W;
  const int rows_at = params[8], cols_at = params[9];
  const int r0 = taps[rows_at + ih], r1 = taps[rows_at + ih + 1];
  const int c0 = taps[cols_at + iw], c1 = taps[cols_at + iw + 1];
  const int rslots = rows_at + H + 1, cslots = cols_at + W + 1;
  const int grad = offset + p * OH * OW;
  precise T acc = T(0);
  int ra = r0;
  while (ra < r1) {
    const int oh = taps[rslots + ra] / K;
    int re = ra + 1;
    while (re < r1 && taps[rslots + re] / K == oh) ++re;
    int ca = c0;
    while (ca < c1) {
      const int ow = (taps[cslots + ca] - cols) / K;
      int ce = ca + 1;
      while (ce < c1 && (taps[cslots + ce] - cols) / K == ow) ++ce;
      const T g = in_data[grad + oh * OW + ow];
      for (int a = ra; a < re; ++a)
        for (int c = ca; c < ce; ++c) {
          precise T term = weights[taps[rslots + a]] * weights[taps[cslots + c]];
          term = term * g;
          acc += term;
        }
      ca = ce;
    }
    ra = re;
  }
  out_data[i] = acc;
#else
#error "interpolate.comp: define KIND_FORWARD or KIND_BACKWARD"
#endif
}
