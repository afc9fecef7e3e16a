// pow(x, b) with the scalar exponents that PyTorch computes as other ops: x * x for 2,
// sqrt(x) for 0.5, 1 / x for -1... Every backend's binary_scalar<Pow> on float tensors
// takes the same shortcuts (kiln::defaults::pow_scalar, kiln/backend/provided_elementwise.hpp),
// so that results agree wherever the two differ (pow(-inf, 0.5) is +inf, sqrt(-inf) NaN;
// pow(-0, 0.5) is +0, sqrt(-0) -0) and the common powers run as cheap ops.
#pragma once

#include "kiln/ops/elementwise.hpp"


namespace kiln::ops {

enum class PowShortcut { none, square, cube, sqrt, rsqrt, recip, recip_square };

constexpr PowShortcut pow_shortcut(double exponent) {
  if (exponent == 2.0) return PowShortcut::square;
  if (exponent == 3.0) return PowShortcut::cube;
  if (exponent == 0.5) return PowShortcut::sqrt;
  if (exponent == -0.5) return PowShortcut::rsqrt;
  if (exponent == -1.0) return PowShortcut::recip;
  if (exponent == -2.0) return PowShortcut::recip_square;
  return PowShortcut::none;
}

}  // namespace kiln::ops
