// Shared by gather.comp and scatter.comp (backends/vulkan/src/indexing.cpp): the bindings of
// the output, the indexed tensor x and the index buffer. Indices were validated and wrapped
// on the host (the CPU's errors) and arrive as a contiguous int buffer.
//
// Knob: T, the element type in the buffers.
#define MAX_RANK 8  // indexing.cpp's kMaxRank: the parameter blocks of dims and strides

layout(std430, binding = 1) writeonly buffer Out { T out_data[]; };
layout(std430, binding = 2) readonly buffer X { T x_data[]; };
layout(std430, binding = 3) readonly buffer Index { int index_data[]; };
