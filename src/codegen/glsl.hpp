// The GLSL 4.50 table of the renderer base (cstyle.hpp): how GLSL spells each node kind in
// each type, its constants, and its helpers (glsl_helpers.hpp) for what GLSL's builtins do
// not compute with the catalogue's meaning: erf, log1p, tanh and pow in every float type,
// the integer Div / Rem / Pow, and every transcendental function in f64, since GLSL's
// exp, log, sin, cos and tan take float only. expm1 and atan2 are decomposed into other
// kinds (decompositions.hpp).
// NaN, infinities and signed zeros behave as in the catalogue only where the shader keeps
// them: Vulkan lets drivers assume they never occur unless the SPIR-V declares
// SignedZeroInfNanPreserve (VK_KHR_shader_float_controls), which the caller should request.
// Private to Kiln (src/codegen/): the Vulkan backend and tests/codegen use it.
#pragma once

#include "codegen/cstyle.hpp"
#include "codegen/glsl_helpers.hpp"

namespace kiln::codegen {

namespace detail {

// Columns: f32, f64, i32, i64, u8, bool.
inline constexpr Language glsl_language = [] {
  Language l = c_operators("glsl");
  auto row = [&](Kind k, std::array<Spelling, 6> spellings) { l.spellings[static_cast<std::size_t>(k)] = spellings; };
  constexpr Spelling none{};
  constexpr Spelling h = call_helper;
  constexpr Spelling decompose = decomposed;
  // The f32 builtins, f64 through Kiln's helpers.
  auto transcendental = [&](Kind k, std::string_view f32) { row(k, {Spelling{f32}, h, none, none, none, none}); };
  row(Kind::neg, {Spelling{"(-{0})"}, Spelling{"(-{0})"}, Spelling{"(-{0})"}, Spelling{"(-{0})"},
                  Spelling{"(uint8_t(0) - {0})"}, none});  // u8 wraps, as T(-x) does in C++
  row(Kind::abs, {Spelling{"abs({0})"}, Spelling{"abs({0})"}, Spelling{"abs({0})"}, Spelling{"abs({0})"},
                  Spelling{"{0}"}, none});  // std::abs of a u8 is the value
  transcendental(Kind::exp, "exp({0})");
  transcendental(Kind::log, "log({0})");
  transcendental(Kind::sin, "sin({0})");
  transcendental(Kind::cos, "cos({0})");
  transcendental(Kind::tan, "tan({0})");
  transcendental(Kind::round_even, "roundEven({0})");
  for (Kind k : {Kind::log1p, Kind::tanh, Kind::erf, Kind::pow}) row(k, {h, h, none, none, none, none});
  row(Kind::expm1, {decompose, decompose, none, none, none, none});
  row(Kind::atan2, {decompose, decompose, none, none, none, none});
  row(Kind::sqrt, {Spelling{"sqrt({0})"}, Spelling{"sqrt({0})"}, none, none, none, none});
  row(Kind::floor, {Spelling{"floor({0})"}, Spelling{"floor({0})"}, none, none, none, none});
  row(Kind::ceil, {Spelling{"ceil({0})"}, Spelling{"ceil({0})"}, none, none, none, none});
  row(Kind::max, every_type({"max({0}, {1})"}));
  row(Kind::min, every_type({"min({0}, {1})"}));
  for (Kind k : {Kind::int_div, Kind::int_rem, Kind::int_pow}) row(k, {none, none, h, h, h, none});
  row(Kind::isnan, every_type({"isnan({0})"}));
  row(Kind::isinf, every_type({"isinf({0})"}));
  l.constant = [](double value, ScalarType t) { return glsl_constant(value, t); };
  l.helper = [](Kind kind, ScalarType t) { return glsl_helper(kind, t); };
  return l;
}();

}  // namespace detail

inline const Language& glsl() { return detail::glsl_language; }

using GlslExpression = Expression;

// `root`, a tree computing in type t, as one GLSL expression and the helpers it calls.
inline Expression render_glsl(const NodePtr& root, ScalarType t) { return render(glsl(), root, t); }

}  // namespace kiln::codegen
