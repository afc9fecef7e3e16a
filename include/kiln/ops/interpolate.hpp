// The index and weight rules of interpolate (nearest, bilinear, bicubic), as
// torch.nn.functional.interpolate defines them, written once for every backend: each mode
// is separable, and an output position along an axis reads K input positions (K = 1, 2, 4)
// with these weights. Backends compute the taps of both axes and apply them.
#pragma once

#include "kiln/ops/nn.hpp"

#include "kiln/core/dtype.hpp"
#include "kiln/core/error.hpp"
#include "kiln/core/shape.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

namespace kiln::ops {

// Taps per output position: 1 for nearest, 2 for bilinear, 4 for bicubic.
constexpr int taps_of(InterpolateMode mode) {
  switch (mode) {
    case InterpolateMode::nearest: return 1;
    case InterpolateMode::bilinear: return 2;
    case InterpolateMode::bicubic: return 4;
  }
  return 1;
}

// The input taps of every output position along one axis: index[o * K + k], weight[o * K + k].
template <class T>
struct AxisTaps {
  std::vector<std::int64_t> index;
  std::vector<T> weight;
};

// PyTorch's ratio between input and output coordinates.
template <class T>
T source_scale(std::int64_t in, std::int64_t out, bool align_corners) {
  if (align_corners) return out > 1 ? static_cast<T>(in - 1) / static_cast<T>(out - 1) : T(0);
  return static_cast<T>(in) / static_cast<T>(out);
}

// The input coordinate of output position o; linear modes clamp it at 0, cubic does not.
template <class T>
T source_coordinate(T scale, std::int64_t o, bool align_corners, bool cubic) {
  if (align_corners) return scale * static_cast<T>(o);
  const T src = scale * (static_cast<T>(o) + T(0.5)) - T(0.5);
  return !cubic && src < T(0) ? T(0) : src;
}

// Keys' cubic convolution with A = -0.75, the weights of the taps at -1, 0, 1, 2 for offset t.
template <class T>
std::array<T, 4> cubic_weights(T t) {
  constexpr T a = T(-0.75);
  auto near = [&](T x) { return ((a + 2) * x - (a + 3)) * x * x + 1; };       // |x| <= 1
  auto far = [&](T x) { return ((a * x - 5 * a) * x + 8 * a) * x - 4 * a; };  // 1 < |x| < 2
  return {far(t + 1), near(t), near(1 - t), far(2 - t)};
}

template <class T, int K>
AxisTaps<T> axis_taps(std::int64_t in, std::int64_t out, bool align_corners) {
  AxisTaps<T> taps;
  taps.index.resize(static_cast<std::size_t>(out * K));
  taps.weight.resize(static_cast<std::size_t>(out * K));
  for (std::int64_t o = 0; o < out; ++o) {
    std::int64_t* index = taps.index.data() + o * K;
    T* weight = taps.weight.data() + o * K;
    if constexpr (K == 1) {
      // PyTorch computes the nearest index in float whatever the dtype; so does this.
      std::int64_t src = o;
      if (out == 2 * in)
        src = o >> 1;
      else if (out != in)
        src = std::min(static_cast<std::int64_t>(
                           std::floor(static_cast<float>(o) * (static_cast<float>(in) / static_cast<float>(out)))),
                       in - 1);
      index[0] = src;
      weight[0] = T(1);
    } else if constexpr (K == 2) {
      if (out == in) {
        index[0] = index[1] = o;
        weight[0] = T(1);
        weight[1] = T(0);
        continue;
      }
      const T real = source_coordinate(source_scale<T>(in, out, align_corners), o, align_corners, false);
      const std::int64_t i0 = std::min(static_cast<std::int64_t>(std::floor(real)), in - 1);
      const T lambda = std::min(std::max(real - static_cast<T>(i0), T(0)), T(1));
      index[0] = i0;
      index[1] = i0 + (i0 < in - 1 ? 1 : 0);
      weight[0] = T(1) - lambda;
      weight[1] = lambda;
    } else {
      const T real = source_coordinate(source_scale<T>(in, out, align_corners), o, align_corners, true);
      const T floor = std::floor(real);
      const std::array<T, 4> w = cubic_weights(real - floor);
      for (int k = 0; k < 4; ++k) {
        // Taps past the border read the border value, as in PyTorch.
        index[k] = std::clamp<std::int64_t>(static_cast<std::int64_t>(floor) - 1 + k, 0, in - 1);
        weight[k] = w[static_cast<std::size_t>(k)];
      }
    }
  }
  return taps;
}

// The checks every backend's interpolate primitives make, with the same messages.
inline void check_interpolate_input(std::string_view op, const Shape& x, DType dtype) {
  KILN_CHECK(is_float(dtype), "{}: expected a float tensor, got {} {}", op, x, dtype);
  KILN_CHECK(x.rank() == 4, "{}: expected an NCHW input of rank 4, got shape {}", op, x);
  KILN_CHECK(x[2] > 0 && x[3] > 0, "{}: input {} has an empty spatial dim", op, x);
}
inline void check_interpolate(const Shape& x, DType dtype, std::span<const std::int64_t> output_size) {
  check_interpolate_input("interpolate", x, dtype);
  KILN_CHECK(output_size.size() == 2 && output_size[0] > 0 && output_size[1] > 0,
             "interpolate: expected 2 positive output sizes, got {} (input {})", output_size, x);
}
inline void check_interpolate_backward(const Shape& x, DType x_dtype, const Shape& dy, DType dy_dtype) {
  check_interpolate_input("interpolate_backward", x, x_dtype);
  KILN_CHECK(dy_dtype == x_dtype, "interpolate_backward: dy must have the input's dtype {}, got {}", x_dtype, dy_dtype);
  KILN_CHECK(dy.rank() == 4 && dy[0] == x[0] && dy[1] == x[1] && dy[2] > 0 && dy[3] > 0,
             "interpolate_backward: dy of shape {} does not match an input of shape {}", dy, x);
}

}  // namespace kiln::ops
