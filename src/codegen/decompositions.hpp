// Scalar functions as trees of other node kinds, for the languages that lack them: a
// renderer table spells such a kind `decomposed` (cstyle.hpp) and renders the tree below
// instead, so a function is written once here for every language, not once per helper
// library. Each keeps std::'s meaning for zeros, infinities and NaN, given a language that
// keeps signed zeros and infinities (Vulkan's shaders ask for it). Private to Kiln's
// renderers (src/codegen/).
#pragma once

#include "kiln/codegen/expr.hpp"

#include <numbers>

namespace kiln::codegen {

namespace detail {

// expm1(x): below |x| = 0.5, (u - 1) x / log(u) with u = exp(x) (Kahan's form): u - 1 is
// exact there, and the quotient cancels the rounding of u, so the result keeps its relative
// accuracy for small x, where exp(x) - 1 would have none; log(u) is log1p(u - 1), whose
// renderings are accurate near 0 (a GPU's log is not), and x / log(u) (near 1) is taken
// first so that nothing overflows. u == 1 gives x (so -0 stays -0). From |x| = 0.5 on,
// u - 1 itself, which loses at most a factor e^0.5 / (e^0.5 - 1) of exp's accuracy; it is
// -1, +inf and NaN where expm1 is.
inline Expr expm1_of(const Expr& x) {
  const Expr u = x.exp();
  const Expr um1 = u - 1.0;
  const Expr kahan = (u == 1.0).select(x, um1 * (x / um1.log1p()));
  return (x.abs() < 0.5).select(kahan, um1);
}

// Whether v is negative by its sign bit: -0 counts (1 / -0 is -inf).
inline Mask sign_bit(const Expr& v) { return (v < 0.0) || ((v == 0.0) && (Expr(1.0) / v < 0.0)); }

// atan2(y, x): with t = min(|x|, |y|) / max(|x|, |y|) in [0, 1], atan(t) is reduced twice:
// beyond tan(pi/8) by atan(t) = pi/4 + atan((t - 1) / (t + 1)), then halved by
// atan(t) = 2 atan(t / (1 + sqrt(1 + t^2))), to |h| <= 0.199, where the Taylor series
// h - h^3/3 + h^5/5 - ... reaches the type's precision in 5 terms (f32) or 11 (f64). The
// octant gives pi/2 - r where |y| > |x|, pi - r where x is negative (-0 included), and y's
// sign bit the sign. Both zero: 0 or pi; both infinite: pi/4 or 3 pi/4; NaN stays NaN.
inline Expr atan2_of(const Expr& y, const Expr& x, ScalarType t) {
  constexpr double pi = std::numbers::pi;
  const Expr ax = x.abs(), ay = y.abs();
  const Expr big = ax.max(ay), small = ax.min(ay);
  const Expr ratio = (big == 0.0).select(Expr(0.0), small.isInf().select(Expr(1.0), small / big));
  const Mask reduced = ratio > 0.41421356237309503;  // tan(pi/8)
  const Expr r1 = reduced.select((ratio - 1.0) / (ratio + 1.0), ratio);
  const Expr h = r1 / ((r1 * r1 + 1.0).sqrt() + 1.0);
  const Expr h2 = h * h;
  const int terms = t == ScalarType::f64 ? 10 : 4;
  Expr series = (terms % 2 == 0 ? 1.0 : -1.0) / (2.0 * terms + 1.0);
  for (int k = terms - 1; k >= 1; --k) series = series * h2 + (k % 2 == 0 ? 1.0 : -1.0) / (2.0 * k + 1.0);
  const Expr atan_h = h + h * h2 * series;
  Expr r = atan_h + atan_h;
  r = reduced.select(r + pi / 4, r);
  r = (ay > ax).select(Expr(pi / 2) - r, r);
  r = sign_bit(x).select(Expr(pi) - r, r);
  r = sign_bit(y).select(-r, r);
  return (x.isNaN() || y.isNaN()).select(x + y, r);
}

}  // namespace detail

// The tree that computes node n in type t from other kinds.
inline NodePtr decomposition(const Node& n, ScalarType t) {
  switch (n.kind) {
    case Kind::expm1: return detail::expm1_of(Expr(n.args[0])).node();
    case Kind::atan2: return detail::atan2_of(Expr(n.args[0]), Expr(n.args[1]), t).node();
    default: break;
  }
  KILN_FAIL("codegen: {} has no decomposition", kind_name(n.kind));
}

}  // namespace kiln::codegen
