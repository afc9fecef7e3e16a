// The GLSL 4.50 table of the renderer base (cstyle.hpp), and GLSL's dialect of the
// elementwise kernel generator (kernel.hpp): the Vulkan backend's compute shaders. The
// table says how GLSL spells each node kind in each type, its constants, and its helpers
// (glsl_helpers.hpp) for what GLSL's builtins do not compute with the catalogue's meaning:
// erf, log1p, tanh and pow in every float type, the integer Div / Rem / Pow, and every
// transcendental function in f64, since GLSL's exp, log, sin, cos and tan take float only.
// expm1 and atan2 are decomposed into other kinds (decompositions.hpp).
// NaN, infinities and signed zeros behave as in the catalogue only where the shader keeps
// them: Vulkan lets drivers assume they never occur unless the SPIR-V declares
// SignedZeroInfNanPreserve (VK_KHR_shader_float_controls), which the caller should request.
// Private to Kiln (src/codegen/): the Vulkan backend and tests/codegen use it.
#pragma once

#include "codegen/cstyle.hpp"
#include "codegen/glsl_half.hpp"
#include "codegen/glsl_helpers.hpp"
#include "codegen/kernel.hpp"

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

// GLSL spelling of a dtype in storage buffers (bool: uint8_t; f16 and bf16: uint16_t bits).
inline std::string_view glsl_storage_type(DType d) {
  switch (d) {
    case DType::f32: return "float";
    case DType::f64: return "double";
    case DType::i32: return "int";
    case DType::i64: return "int64_t";
    case DType::u8:
    case DType::boolean: return "uint8_t";
    case DType::f16:
    case DType::bf16: return "uint16_t";
  }
  return "?";
}
inline std::string_view glsl_value_type(DType d) {
  if (d == DType::boolean) return "bool";
  return is_half(d) ? "float" : glsl_storage_type(d);
}
inline std::string_view glsl_scalar_type(ScalarType t) {
  constexpr std::string_view names[] = {"float", "double", "int", "int64_t", "uint8_t", "bool"};
  return names[static_cast<std::size_t>(t)];
}

// The #extension lines for buffers of these dtypes (doubles are core GLSL 4.50).
inline std::string glsl_extensions(std::span<const DType> dtypes) {
  bool int64 = false, int8 = false, int16 = false;
  for (DType d : dtypes) {
    int64 = int64 || d == DType::i64;
    int8 = int8 || d == DType::u8 || d == DType::boolean;
    int16 = int16 || is_half(d);
  }
  std::string out;
  if (int64) out += "#extension GL_EXT_shader_explicit_arithmetic_types_int64 : require\n";
  if (int8)
    out += "#extension GL_EXT_shader_explicit_arithmetic_types_int8 : require\n"
           "#extension GL_EXT_shader_8bit_storage : require\n";
  if (int16) out += "#extension GL_EXT_shader_16bit_storage : require\n";
  return out;
}

// A compute shader: the layout integers in binding 0, output o in 1 + o, input k after the
// outputs.
inline std::string glsl_declarations(const ElementwiseKernel& k, const KernelLayout&) {
  const std::vector<DType> dtypes = buffer_dtypes(k);
  std::string s = "#version 450\n" + glsl_extensions(dtypes);
  s += fmt::format("layout(local_size_x = {}) in;\n", k.workgroup_size);
  s += "layout(std430, binding = 0) readonly buffer Params { int params[]; };\n";
  for (std::size_t o = 0; o < k.outputs.size(); ++o)
    s += fmt::format("layout(std430, binding = {}) writeonly buffer Out{} {{ {} out{}_data[]; }};\n", 1 + o, o,
                     glsl_storage_type(k.outputs[o].dtype), o);
  for (std::size_t n = 0; n < k.inputs.size(); ++n)
    s += fmt::format("layout(std430, binding = {}) readonly buffer In{} {{ {} in{}_data[]; }};\n",
                     1 + k.outputs.size() + n, n, glsl_storage_type(k.inputs[n]), n);
  bool half = false;
  for (DType d : dtypes) half = half || is_half(d);
  if (half && !k.raw_bits) s += glsl_half_conversions;
  return s;
}

inline constexpr KernelDialect glsl_dialect{
    .name = "glsl",
    .index_type = "int",
    .storage_type = glsl_storage_type,
    .value_type = glsl_value_type,
    .scalar_type = glsl_scalar_type,
    .cast = [](std::string_view type, std::string_view value) { return fmt::format("{}({})", type, value); },
    .declarations = glsl_declarations,
    .entry = [](const ElementwiseKernel&) { return std::string("void main() {\n"); },
    // A dispatch larger than 65535 workgroups is two-dimensional (x rows of workgroups).
    .thread_index = "int(gl_GlobalInvocationID.x + gl_GlobalInvocationID.y * gl_NumWorkGroups.x * gl_WorkGroupSize.x)",
    .layout_at = "params[{}]",
    .input_at = "in{0}_data[{1}]",
    .output_at = "out{0}_data[{1}]",
    .group_index = "int(gl_WorkGroupID.x + gl_WorkGroupID.y * gl_NumWorkGroups.x)",
    .local_index = "int(gl_LocalInvocationID.x)",
    .shared_array = "shared {0} {1}[{2}];\n",
    // barrier() orders the workgroup's shared memory in Vulkan's memory model too; the
    // explicit memory barrier says so to every compiler.
    .barrier = "memoryBarrierShared();\n  barrier();",
    // A shader has no scalar arguments: parameters travel in the layout buffer.
    .param_load = [](ScalarType t, const std::string& low, const std::string& high) -> std::string {
      switch (t) {
        case ScalarType::f32: return fmt::format("intBitsToFloat({})", low);
        case ScalarType::f64: return fmt::format("packDouble2x32(uvec2(uint({}), uint({})))", low, high);
        case ScalarType::i32: return low;
        case ScalarType::i64: return fmt::format("int64_t(packInt2x32(ivec2({}, {})))", low, high);
        case ScalarType::u8: return fmt::format("uint8_t({})", low);
        case ScalarType::boolean: break;
      }
      KILN_FAIL("elementwise_kernel_glsl: a bool program has no parameters");
    },
};

}  // namespace detail

inline const Language& glsl() { return detail::glsl_language; }
// The elementwise compute shader around a GLSL rendering (kernel.hpp); its parameters are
// read from the layout buffer (codegen::param_layout).
inline const KernelDialect& glsl_kernels() { return detail::glsl_dialect; }

using GlslExpression = Expression;

// `root`, a tree computing in type t, as one GLSL expression and the helpers it calls.
inline Expression render_glsl(const NodePtr& root, ScalarType t) { return render(glsl(), root, t); }

}  // namespace kiln::codegen
