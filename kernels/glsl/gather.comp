// Gather (torch.gather) and index_select (backends/vulkan/src/indexing.cpp): one invocation
// per output element reads x at the output's coordinates with the indexed dim replaced by
// its index. index_select is a gather whose index is read with stride 0 outside the dim.
// Elements only move, so one variant serves every dtype of a size.
//
// Knob: T, the element's bits: uint8_t, uint16_t, uint or uvec2.
// Bindings: indexing.glsl's (0 params, 1 out, contiguous, 2 x, 3 index).
// Parameters (ints): [0] elements, [1] rank, [2] dim, [3] x offset, then MAX_RANK each of
// the output dims, x strides and index strides (index strides apply to the output's
// coordinates).
#version 450
#include "kiln.glsl"

layout(local_size_x = WORKGROUP_SIZE) in;
#include "indexing.glsl"

const int kDims = 4, kXStrides = kDims + MAX_RANK, kIndexStrides = kDims + 2 * MAX_RANK;

void main() {
  const int i = invocation_index();
  if (i >= params[0]) return;
  const int rank = params[1], dim = params[2];
  int rest = i, x_at = params[3], index_at = 0, dim_stride = 0;
  for (int d = rank - 1; d >= 0; --d) {
    const int size = params[kDims + d];
    const int c = rest % size;
    rest /= size;
    index_at += c * params[kIndexStrides + d];
    if (d == dim) dim_stride = params[kXStrides + d];
    else x_at += c * params[kXStrides + d];
  }
  out_data[i] = x_data[x_at + index_data[index_at] * dim_stride];
}
