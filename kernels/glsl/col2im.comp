// col2im for the input gradient of GEMM convolution (backends/vulkan/src/conv.cpp): the
// gradient of each input element of a chunk of samples is the sum of the column entries
// that read it (layout and parameters: columns.glsl; the x offset and strides describe the
// contiguous gradient written). A gather: one invocation per input element, over the taps
// (ky, kx) that meet an output position, in a fixed order, so the result is deterministic
// without atomics.
//
// Knobs: T, the element type (float, double).
// Bindings: 0 params, 1 dx, 2 cols.
#version 450
#include "kiln.glsl"
#include "columns.glsl"

layout(local_size_x = WORKGROUP_SIZE) in;
layout(std430, binding = 1) writeonly buffer Dx { T dx_data[]; };
layout(std430, binding = 2) readonly buffer Cols { T cols_data[]; };

// The output row / column that input position i meets through tap k, or -1 (the CPU's
// source_index).
int source_index(int i, int k, int s, int p, int d, int n) {
  const int t = i + p - k * d;
  if (t < 0 || t % s != 0) return -1;
  const int o = t / s;
  return o < n ? o : -1;
}

void main() {
  const int i = invocation_index();
  if (i >= params[0]) return;
  const Columns c = columns();
  const int ix = i % c.W, iy = (i / c.W) % c.H, channel = (i / (c.W * c.H)) % c.C, n = i / (c.W * c.H * c.C);
  T acc = T(0);
  for (int ky = 0; ky < c.KH; ++ky) {
    const int oy = source_index(iy, ky, c.SH, c.PH, c.DH, c.OH);
    if (oy < 0) continue;
    for (int kx = 0; kx < c.KW; ++kx) {
      const int ox = source_index(ix, kx, c.SW, c.PW, c.DW, c.OW);
      if (ox < 0) continue;
      acc += cols_data[column_index(c, n, channel, ky, kx, oy * c.OW + ox)];
    }
  }
  dx_data[c.x_offset + n * c.xs_n + channel * c.xs_c + iy * c.xs_h + ix * c.xs_w] = acc;
}
