// Parameters and shape rules of the neural-network ops: convolution, pooling and
// interpolation. Backends get them already validated and in 2-d form (1-d ops are the
// 2-d ops with a height of 1).
#pragma once

#include "kiln/core/error.hpp"
#include "kiln/core/shape.hpp"

#include <array>
#include <cstdint>
#include <string_view>

namespace kiln::ops {

struct Conv2dOptions {
  std::array<std::int64_t, 2> stride{1, 1};
  std::array<std::int64_t, 2> padding{0, 0};
  std::array<std::int64_t, 2> dilation{1, 1};
  std::int64_t groups = 1;
};

struct ConvTranspose2dOptions {
  std::array<std::int64_t, 2> stride{1, 1};
  std::array<std::int64_t, 2> padding{0, 0};
  std::array<std::int64_t, 2> output_padding{0, 0};
  std::array<std::int64_t, 2> dilation{1, 1};
  std::int64_t groups = 1;
};

struct Pool2dOptions {
  std::array<std::int64_t, 2> kernel{1, 1};
  std::array<std::int64_t, 2> stride{1, 1};
  std::array<std::int64_t, 2> padding{0, 0};
  std::array<std::int64_t, 2> dilation{1, 1};  // max pooling only
  bool ceil_mode = false;
  bool count_include_pad = true;  // average pooling only
};

enum class InterpolateMode : std::uint8_t { nearest, bilinear, bicubic };

struct InterpolateOptions {
  InterpolateMode mode = InterpolateMode::nearest;
  bool align_corners = false;  // bilinear / bicubic only, as in torch.nn.functional.interpolate
};

// Output extent of a convolution or pooling window along one axis.
inline std::int64_t window_output_size(std::int64_t in, std::int64_t kernel, std::int64_t stride,
                                       std::int64_t padding, std::int64_t dilation, bool ceil_mode = false) {
  const std::int64_t span = dilation * (kernel - 1) + 1;
  const std::int64_t numerator = in + 2 * padding - span;
  if (numerator < 0) return 0;
  std::int64_t out = (ceil_mode ? (numerator + stride - 1) / stride : numerator / stride) + 1;
  // A window that would start entirely in the right padding is dropped (PyTorch's rule).
  if (ceil_mode && (out - 1) * stride >= in + padding) --out;
  return out;
}

}  // namespace kiln::ops
