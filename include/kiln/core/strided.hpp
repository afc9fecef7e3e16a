// A strided view of a buffer's elements: shape, element strides and offset, and dtype.
// Backends whose tensors are views into device or host buffers (CPU, Vulkan) build their
// handles on it; a broadcast dim has stride 0.
#pragma once

#include "kiln/core/dtype.hpp"
#include "kiln/core/shape.hpp"

#include <cstdint>
#include <vector>

namespace kiln {

struct StridedView {
  Shape shape;
  std::vector<std::int64_t> strides;  // in elements; 0 on broadcast dims
  std::int64_t offset = 0;            // in elements
  DType dtype = DType::f32;

  std::int64_t numel() const { return shape.numel(); }
  // Row-major and dense (size-1 dims may have any stride); the offset may be non-zero.
  bool is_contiguous() const {
    std::int64_t expected = 1;
    for (std::size_t i = shape.rank(); i-- > 0;) {
      if (shape[i] != 1 && strides[i] != expected) return false;
      expected *= shape[i];
    }
    return true;
  }
};

}  // namespace kiln
