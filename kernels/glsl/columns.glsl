// The column matrices of GEMM convolution (backends/vulkan/src/conv.cpp), shared by
// im2col.comp and col2im.comp. For a chunk of samples, column entry (n, g, k, p), with
// k = (ic * KH + ky) * KW + kx over the group's input channels and the kernel taps and
// p = oy * OW + ox over the output positions, holds x[n, g * C / groups + ic,
// oy * SH - PH + ky * DH, ox * SW - PW + kx * DW], 0 where that falls in the padding. It sits
// at cols offset + n * sample stride + g * group stride + k * row stride + p (p is
// contiguous), so the caller picks the layout the matmul that consumes it needs.
//
// Parameters (ints): [0] invocations, [1] C, [2] H, [3] W, [4] KH, [5] KW, [6] OH, [7] OW,
// [8] groups, [9..11) stride, [11..13) padding, [13..15) dilation, [15] cols offset,
// [16] cols sample stride, [17] cols group stride, [18] cols row stride, [19] x offset
// (its chunk's first sample), [20..24) x strides (n, c, h, w).
// Bindings: 0 params, 1 the written tensor, 2 the read one.

struct Columns {
  int C, H, W, KH, KW, OH, OW, CG;
  int SH, SW, PH, PW, DH, DW;
  int cols_offset, cols_sample, cols_group, cols_row;
  int x_offset, xs_n, xs_c, xs_h, xs_w;
};

Columns columns() {
  Columns c;
  c.C = params[1]; c.H = params[2]; c.W = params[3]; c.KH = params[4]; c.KW = params[5];
  c.OH = params[6]; c.OW = params[7]; c.CG = params[1] / params[8];
  c.SH = params[9]; c.SW = params[10]; c.PH = params[11]; c.PW = params[12];
  c.DH = params[13]; c.DW = params[14];
  c.cols_offset = params[15]; c.cols_sample = params[16]; c.cols_group = params[17]; c.cols_row = params[18];
  c.x_offset = params[19]; c.xs_n = params[20]; c.xs_c = params[21]; c.xs_h = params[22]; c.xs_w = params[23];
  return c;
}

// Where column entry (n, channel, ky, kx, p) sits.
int column_index(Columns c, int n, int channel, int ky, int kx, int p) {
  const int k = ((channel % c.CG) * c.KH + ky) * c.KW + kx;
  return c.cols_offset + n * c.cols_sample + (channel / c.CG) * c.cols_group + k * c.cols_row + p;
}
