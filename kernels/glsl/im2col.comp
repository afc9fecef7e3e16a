// im2col for GEMM convolution (backends/vulkan/src/conv.cpp): writes the column matrix of a
// chunk of samples of x (layout and parameters: columns.glsl), one invocation per column
// entry, ox fastest so that neighbouring invocations write neighbouring entries.
//
// Knobs: T, the element type (float, double).
// Bindings: 0 params, 1 cols, 2 x (read through its strides).
#version 450
#include "kiln.glsl"
#include "columns.glsl"

layout(local_size_x = WORKGROUP_SIZE) in;
layout(std430, binding = 1) writeonly buffer Cols { T cols_data[]; };
layout(std430, binding = 2) readonly buffer X { T x_data[]; };

void main() {
  const int i = invocation_index();
  if (i >= params[0]) return;
  const Columns c = columns();
  // i runs over (n, channel, ky, kx, oy, ox).
  const int ox = i % c.OW, oy = (i / c.OW) % c.OH;
  int rest = i / (c.OW * c.OH);
  const int kx = rest % c.KW, ky = (rest / c.KW) % c.KH;
  rest /= c.KW * c.KH;
  const int channel = rest % c.C, n = rest / c.C;
  const int iy = oy * c.SH - c.PH + ky * c.DH, ix = ox * c.SW - c.PW + kx * c.DW;
  T v = T(0);
  if (iy >= 0 && iy < c.H && ix >= 0 && ix < c.W)
    v = x_data[c.x_offset + n * c.xs_n + channel * c.xs_c + iy * c.xs_h + ix * c.xs_w];
  cols_data[column_index(c, n, channel, ky, kx, oy * c.OW + ox)] = v;
}
