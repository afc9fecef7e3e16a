// What the GPU backends' convolutions share (backends/vulkan/src/conv.cpp,
// backends/cuda/src/conv.cpp): both run a convolution as column matrices (im2col / col2im) and
// GEMMs, chunked by samples so that one chunk's columns stay within a memory limit. Private to
// Kiln's backends.
#pragma once

#include "kiln/core/dtype.hpp"
#include "kiln/core/error.hpp"
#include "kiln/core/shape.hpp"
#include "kiln/ops/nn.hpp"

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <string_view>

namespace kiln::columns {

// Both operands float, of one dtype (the CPU's check and message).
inline void check_float(std::string_view op, DType a, DType b, const Shape& sa, const Shape& sb) {
  KILN_CHECK(a == b, "{}: dtypes differ: {} {} and {} {}", op, sa, a, sb, b);
  KILN_CHECK(is_float(a), "{}: expected float tensors, got {} {}", op, sa, a);
}

// The sizes of one convolution: x [N, C, H, W], weight [O, C/G, KH, KW], y [N, O, OH, OW];
// a column matrix has K = C/G*KH*KW rows per group and P = OH*OW entries per sample and row.
struct Geometry {
  std::int64_t N, C, H, W, O, KH, KW, OH, OW, G, K, P;
  ops::Conv2dOptions options;

  Geometry(const Shape& x, const Shape& w, const Shape& y, const ops::Conv2dOptions& o)
      : N(x[0]), C(x[1]), H(x[2]), W(x[3]), O(w[0]), KH(w[2]), KW(w[3]), OH(y[2]), OW(y[3]), G(o.groups),
        K(w[1] * w[2] * w[3]), P(y[2] * y[3]), options(o) {}

  // Samples per chunk: as many as keep one chunk's columns within `limit` bytes (the
  // environment variable `variable` overrides it), at least one.
  std::int64_t chunk(DType dtype, std::int64_t limit, const char* variable) const {
    if (const char* v = std::getenv(variable)) limit = std::atoll(v);
    const auto per_sample = static_cast<std::int64_t>(dtype_size(dtype)) * C * KH * KW * P;
    return per_sample == 0 ? N : std::clamp<std::int64_t>(limit / per_sample, 1, std::max<std::int64_t>(N, 1));
  }
};

// The column memory one chunk may take by default.
inline constexpr std::int64_t kColumnBytes = std::int64_t{256} << 20;

}  // namespace kiln::columns
