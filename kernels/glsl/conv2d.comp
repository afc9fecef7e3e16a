// 2-d convolution, NCHW with weight [out, in / groups, kh, kw] (backends/vulkan/src/conv.cpp):
// direct kernels with the index math of the CPU's reference loops, one invocation per
// element of the result, each accumulating in the CPU's order (deterministic, no atomics).
//
// Knobs: T, the element type (float, double); one of
// - KIND_FORWARD, KIND_FORWARD_BIAS: a = x, b = weight; per output element (n, oc, oy, ox),
//   the sum over the group's input channels and the taps (ic, ky, kx), from 0 or the bias;
// - KIND_BACKWARD_INPUT: a = dy, b = weight; per input element (n, ci, iy, ix), the sum over
//   the taps (ky, kx) and, for each tap that meets an output position, the group's output
//   channels;
// - KIND_BACKWARD_WEIGHT: a = x, b = dy; per weight element (oc, ic, ky, kx), the sum over
//   the batch and the output positions (n, oy, ox).
// Bindings: 0 params, 1 out, 2 a, 3 b, 4 bias (KIND_FORWARD_BIAS); all contiguous.
// Parameters (ints): [0] invocations, [1] N, [2] C, [3] H, [4] W, [5] O, [6] KH, [7] KW,
// [8] OH, [9] OW, [10] groups, [11..13) stride, [13..15) padding, [15..17) dilation,
// [17] offset of a, [18] of b, [19] of the bias.
#version 450
#include "kiln.glsl"

layout(local_size_x = WORKGROUP_SIZE) in;
layout(std430, binding = 1) writeonly buffer Out { T out_data[]; };
layout(std430, binding = 2) readonly buffer A { T a_data[]; };
layout(std430, binding = 3) readonly buffer B { T b_data[]; };
#if defined(KIND_FORWARD_BIAS)
layout(std430, binding = 4) readonly buffer Bias { T bias_data[]; };
#endif

// The CPU's source_index: the output row / column that input position i meets through tap
// k, or -1.
int source_index(int i, int k, int s, int p, int d, int n) {
  const int t = i + p - k * d;
  if (t < 0 || t % s != 0) return -1;
  const int o = t / s;
  return o < n ? o : -1;
}

void main() {
  const int i = invocation_index();
  if (i >= params[0]) return;
  const int N = params[1], C = params[2], H = params[3], W = params[4], O = params[5];
  const int KH = params[6], KW = params[7], OH = params[8], OW = params[9], G = params[10];
  const int SH = params[11], SW = params[12], PH = params[13], PW = params[14];
  const int DH = params[15], DW = params[16], A0 = params[17], B0 = params[18];
  const int CG = C / G, OG = O / G;
#if defined(KIND_FORWARD) || defined(KIND_FORWARD_BIAS)
  const int ox = i % OW, oy = (i / OW) % OH, oc = (i / (OW * OH)) % O, ni = i / (OW * OH * O);
  const int c0 = oc / OG * CG;
#if defined(KIND_FORWARD_BIAS)
  T acc = bias_data[params[19] + oc];
#else
  T acc = T(0);
#endif
  for (int ic = 0; ic < CG; ++ic) {
    const int xp = A0 + (ni * C + c0 + ic) * H * W;
    const int wp = B0 + (oc * CG + ic) * KH * KW;
    for (int ky = 0; ky < KH; ++ky) {
      const int iy = oy * SH - PH + ky * DH;
      if (iy < 0 || iy >= H) continue;
      for (int kx = 0; kx < KW; ++kx) {
        const int ix = ox * SW - PW + kx * DW;
        if (ix < 0 || ix >= W) continue;
        acc += a_data[xp + iy * W + ix] * b_data[wp + ky * KW + kx];
      }
    }
  }
  out_data[i] = acc;
#elif defined(KIND_BACKWARD_INPUT)
  const int ix = i % W, iy = (i / W) % H, ci = (i / (W * H)) % C, ni = i / (W * H * C);
  const int grp = ci / CG, ic = ci % CG;
  T acc = T(0);
  for (int ky = 0; ky < KH; ++ky) {
    const int oy = source_index(iy, ky, SH, PH, DH, OH);
    if (oy < 0) continue;
    for (int kx = 0; kx < KW; ++kx) {
      const int ox = source_index(ix, kx, SW, PW, DW, OW);
      if (ox < 0) continue;
      for (int oc = grp * OG; oc < (grp + 1) * OG; ++oc)
        acc += a_data[A0 + ((ni * O + oc) * OH + oy) * OW + ox] *
               b_data[B0 + ((oc * CG + ic) * KH + ky) * KW + kx];
    }
  }
  out_data[i] = acc;
#elif defined(KIND_BACKWARD_WEIGHT)
  const int kx = i % KW, ky = (i / KW) % KH, ic = (i / (KW * KH)) % CG, oc = i / (KW * KH * CG);
  const int ci = oc / OG * CG + ic;
  T acc = T(0);
  for (int ni = 0; ni < N; ++ni) {
    const int xp = A0 + (ni * C + ci) * H * W;
    const int dyp = B0 + (ni * O + oc) * OH * OW;
    for (int oy = 0; oy < OH; ++oy) {
      const int iy = oy * SH - PH + ky * DH;
      if (iy < 0 || iy >= H) continue;
      for (int ox = 0; ox < OW; ++ox) {
        const int ix = ox * SW - PW + kx * DW;
        if (ix < 0 || ix >= W) continue;
        acc += a_data[xp + iy * W + ix] * b_data[dyp + oy * OW + ox];
      }
    }
  }
  out_data[i] = acc;
#else
#error "conv2d.comp: define KIND_FORWARD, KIND_FORWARD_BIAS, KIND_BACKWARD_INPUT or KIND_BACKWARD_WEIGHT"
#endif
}
