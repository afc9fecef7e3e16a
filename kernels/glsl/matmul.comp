// Matrix multiplication [..., m, k] @ [..., k, n] with NumPy-broadcast batch dims
// (backends/vulkan/src/matmul.cpp). Each TILE x TILE workgroup computes a TILE x TILE block
// of one batch's output, staging TILE x TILE tiles of A and B in shared memory per step
// along k. Operands are read in place through their strides, so transposed, sliced and
// broadcast (stride-0) views need no copy; the output is contiguous.
//
// Knobs: T, the element type (float, double).
// Bindings: 0 params, 1 out [batch, m, n], 2 a, 3 b.
// Parameters (ints): [0] m, [1] n, [2] k, [3] batch rank, [4] row tiles, [5] first batch of
// this dispatch, [6] a offset, [7] b offset, [8] a row stride, [9] a col stride, [10] b row
// stride, [11] b col stride, [12..20) batch dims, [20..28) a batch strides, [28..36) b batch
// strides (0 on broadcast dims).
// Workgroups: x over the column tiles, y over (batch, row tile) pairs.
#version 450
#include "kiln.glsl"

#define TILE 16  // matmul.cpp's kTile
layout(local_size_x = TILE, local_size_y = TILE) in;
layout(std430, binding = 1) writeonly buffer Out { T out_data[]; };
layout(std430, binding = 2) readonly buffer A { T a_data[]; };
layout(std430, binding = 3) readonly buffer B { T b_data[]; };

shared T tile_a[TILE][TILE];
shared T tile_b[TILE][TILE];

void main() {
  const int m = params[0], n = params[1], k = params[2], nb = params[3], row_tiles = params[4];
  const int group_y = int(gl_WorkGroupID.y);
  const int batch = params[5] + group_y / row_tiles;
  const int lx = int(gl_LocalInvocationID.x), ly = int(gl_LocalInvocationID.y);
  const int row = (group_y % row_tiles) * TILE + ly;
  const int col = int(gl_WorkGroupID.x) * TILE + lx;
  int a_base = params[6], b_base = params[7];
  int rest = batch;
  for (int d = nb - 1; d >= 0; --d) {
    const int size = params[12 + d];
    const int c = rest % size;
    rest /= size;
    a_base += c * params[20 + d];
    b_base += c * params[28 + d];
  }
  const int ars = params[8], acs = params[9], brs = params[10], bcs = params[11];
  T acc = T(0);
  for (int k0 = 0; k0 < k; k0 += TILE) {
    T va = T(0);
    if (row < m && k0 + lx < k) va = a_data[a_base + row * ars + (k0 + lx) * acs];
    tile_a[ly][lx] = va;
    T vb = T(0);
    if (k0 + ly < k && col < n) vb = b_data[b_base + (k0 + ly) * brs + col * bcs];
    tile_b[ly][lx] = vb;
    barrier();
    for (int i = 0; i < TILE; ++i) acc += tile_a[ly][i] * tile_b[i][lx];
    barrier();
  }
  if (row < m && col < n) out_data[(batch * m + row) * n + col] = acc;
}
