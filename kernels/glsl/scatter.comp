// Scatter (torch.scatter, assign and add) and index_add (backends/vulkan/src/indexing.cpp):
// one invocation per element of x starts from x's element and walks the fiber of index
// entries that can land on it (same coordinates outside the dim), in order, assigning (the
// last match wins, as on the CPU) or adding (in index order, so duplicates accumulate
// deterministically and bit-for-bit like the CPU; no atomics). index_add is a scatter add
// whose index is read with stride 0 outside the dim.
//
// Knobs: T, the element type in the buffers; V, the type an element is held in (T, or uint
// for 16-bit elements); one of
// - KIND_ASSIGN: elements only move, so one variant serves every dtype of a size (T is
//   uint8_t, uint16_t, uint or uvec2);
// - KIND_ADD: acc + v in T; KIND_ADD_BOOL: logical or;
// - KIND_ADD_F16, KIND_ADD_BF16: the bits converted to float, added, and rounded back to
//   16 bits at each add, as the CPU backend adds them one at a time.
// Bindings: indexing.glsl's (0 params, 1 out, contiguous, 2 x, 3 index), 4 src.
// Parameters (ints): [0] elements of x, [1] rank, [2] dim, [3] x offset, [4] src offset,
// then MAX_RANK each of the x dims, x strides, index dims (the positions that scatter), src
// strides and index strides.
#version 450
#include "kiln.glsl"

layout(local_size_x = WORKGROUP_SIZE) in;
#include "indexing.glsl"
layout(std430, binding = 4) readonly buffer Src { T src_data[]; };

const int kDims = 5, kXStrides = kDims + MAX_RANK, kIndexDims = kDims + 2 * MAX_RANK,
          kSrcStrides = kDims + 3 * MAX_RANK, kIndexStrides = kDims + 4 * MAX_RANK;

#if defined(KIND_ADD_F16) || defined(KIND_ADD_BF16)
#include "kiln_half.glsl"
#endif

V combine(V acc, V v) {
#if defined(KIND_ASSIGN)
  return v;
#elif defined(KIND_ADD_BOOL)
  return (acc != uint8_t(0) || v != uint8_t(0)) ? uint8_t(1) : uint8_t(0);
#elif defined(KIND_ADD_F16)
  return kiln_f32_to_f16(kiln_f16_to_f32(acc) + kiln_f16_to_f32(v));
#elif defined(KIND_ADD_BF16)
  return kiln_f32_to_bf16(kiln_bf16_to_f32(acc) + kiln_bf16_to_f32(v));
#elif defined(KIND_ADD)
  return T(acc + v);
#else
#error "scatter.comp: define one of the KIND_ knobs"
#endif
}

void main() {
  const int i = invocation_index();
  if (i >= params[0]) return;
  const int rank = params[1], dim = params[2];
  int rest = i, x_at = params[3], src_at = params[4], index_at = 0, j = 0;
  bool covered = true;
  for (int d = rank - 1; d >= 0; --d) {
    const int size = params[kDims + d];
    const int c = rest % size;
    rest /= size;
    x_at += c * params[kXStrides + d];
    if (d == dim) {
      j = c;
      continue;
    }
    covered = covered && c < params[kIndexDims + d];
    src_at += c * params[kSrcStrides + d];
    index_at += c * params[kIndexStrides + d];
  }
  V acc = V(x_data[x_at]);
  if (covered) {
    const int fiber = params[kIndexDims + dim], src_step = params[kSrcStrides + dim],
              index_step = params[kIndexStrides + dim];
    for (int f = 0; f < fiber; ++f) {
      if (index_data[index_at + f * index_step] != j) continue;
      const V v = V(src_data[src_at + f * src_step]);
      acc = combine(acc, v);
    }
  }
  out_data[i] = T(acc);
}
