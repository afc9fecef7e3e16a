// Codegen: render_glsl for every op, gradient and type: it renders, each helper defined
// once and before its use, f64 trees through the f64 helpers only; exact renderings of a
// few ops and constants, the formulas run with the GLSL helpers in f32, and, where glslc is
// installed, every rendering compiled as part of a GLSL 4.50 compute shader.
#include "evaluate.hpp"
#include "glslc.hpp"

#include "codegen/glsl.hpp"
#include "codegen/row_kernel.hpp"
#include "kiln/codegen/program.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <limits>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

namespace {

namespace ops = kiln::ops;
using kiln::codegen::Kind;
using kiln::codegen::NodePtr;
using kiln::codegen::render_glsl;
using kiln::codegen::ScalarType;

// A rendering's whole text: its lets' values, then its value.
std::string text(const kiln::codegen::Expression& e) {
  std::string all;
  for (const kiln::codegen::Let& let : e.lets) all += let.value + "\n";
  return all + e.value;
}

constexpr ScalarType all_types[] = {ScalarType::f32, ScalarType::f64, ScalarType::i32,
                                    ScalarType::i64, ScalarType::u8,  ScalarType::boolean};

bool in_domain(ops::Domain d, ScalarType t) {
  if (d == ops::Domain::float_only) return kiln::codegen::is_float(t);
  if (d == ops::Domain::numeric) return t != ScalarType::boolean;
  return t == ScalarType::boolean;
}

// One traced tree: what, in which type.
struct Traced {
  std::string name;
  ScalarType type;
  NodePtr tree;
};

// Every forward op in every type of its domain, every gradient in f32 and f64.
std::vector<Traced> every_trace() {
  std::vector<Traced> all;
  for (const ScalarType t : all_types) {
    const std::string ts(kiln::codegen::scalar_type_name(t));
#define KILN_ADD(Op) \
  if (in_domain(ops::Op::domain, t)) all.push_back({#Op " " + ts, t, kiln::codegen::trace_unary<ops::Op>(t)});
    KILN_UNARY_OPS(KILN_ADD)
#undef KILN_ADD
#define KILN_ADD(Op) \
  if (in_domain(ops::Op::domain, t)) all.push_back({#Op " " + ts, t, kiln::codegen::trace_binary<ops::Op>(t)});
    KILN_BINARY_OPS(KILN_ADD)
#undef KILN_ADD
    if (!kiln::codegen::is_float(t)) continue;
#define KILN_ADD(Op) all.push_back({#Op " grad " + ts, t, kiln::codegen::trace_unary_grad<ops::Op>(t)});
    KILN_DIFFERENTIABLE_UNARY_OPS(KILN_ADD)
#undef KILN_ADD
#define KILN_ADD(Op)                                                                                          \
  all.push_back({#Op " grad_lhs " + ts, t, kiln::codegen::trace_binary_grad<ops::Op, ops::Operand::lhs>(t)}); \
  all.push_back({#Op " grad_rhs " + ts, t, kiln::codegen::trace_binary_grad<ops::Op, ops::Operand::rhs>(t)});
    KILN_DIFFERENTIABLE_BINARY_OPS(KILN_ADD)
#undef KILN_ADD
  }
  return all;
}

std::size_t count(const std::string& text, const std::string& what) {
  std::size_t n = 0;
  for (auto p = text.find(what); p != std::string::npos; p = text.find(what, p + 1)) ++n;
  return n;
}

// Where `text` names the function `name` followed by "(" (a call, or the definition), not
// one whose name ends in it (ldexp for exp).
std::vector<std::size_t> find_calls(const std::string& text, const std::string& name) {
  std::vector<std::size_t> at;
  for (auto p = text.find(name + "("); p != std::string::npos; p = text.find(name + "(", p + 1)) {
    const char before = p == 0 ? ' ' : text[p - 1];
    if (!std::isalnum(static_cast<unsigned char>(before)) && before != '_') at.push_back(p);
  }
  return at;
}
bool calls(const std::string& text, const std::string& name) { return !find_calls(text, name).empty(); }

// Every helper render_glsl may emit, by the text that starts its definition.
const std::vector<std::pair<std::string, std::string>> all_helpers = [] {
  std::vector<std::pair<std::string, std::string>> all;
  for (const char* f : {"erf", "log1p", "tanh", "pow"}) all.emplace_back(fmt::format("kiln_{}_f32", f), "float");
  for (const char* f : {"exp", "log", "log1p", "sin", "cos", "tan", "tanh", "erf", "pow"})
    all.emplace_back(fmt::format("kiln_{}_f64", f), "double");
  for (const char* f : {"div", "rem", "pow"}) {
    all.emplace_back(fmt::format("kiln_int_{}_i32", f), "int");
    all.emplace_back(fmt::format("kiln_int_{}_i64", f), "int64_t");
    all.emplace_back(fmt::format("kiln_int_{}_u8", f), "uint8_t");
  }
  return all;
}();

TEST(CodegenGlsl, RendersEveryOpAndGradientInEveryType) {
  int rendered = 0, f64_transcendental = 0;
  for (const Traced& t : every_trace()) {
    SCOPED_TRACE(t.name);
    const kiln::codegen::GlslExpression e = render_glsl(t.tree, t.type);
    ++rendered;
    EXPECT_FALSE(e.value.empty());
    const struct {
      std::string value, helpers;
    } g{text(e), e.helpers};
    // Only the inputs the tree reads, and each helper defined once if the value or another
    // helper calls it (and not at all otherwise), before its first call.
    const int inputs = kiln::codegen::input_count(t.tree);
    EXPECT_EQ(count(g.value, "in" + std::to_string(inputs)), 0u);
    for (const auto& [helper, type] : all_helpers) {
      const std::string definition = type + " " + helper + "(";
      const std::size_t defined = count(g.helpers, definition);
      const bool called = calls(g.value, helper) || find_calls(g.helpers, helper).size() > defined;
      EXPECT_EQ(defined, called ? 1u : 0u) << helper << "\n" << g.helpers;
      if (defined == 1) {
        EXPECT_FALSE(calls(g.helpers.substr(0, g.helpers.find(definition)), helper)) << helper << " called before";
      }
    }
    // f64 trees compute GLSL's float-only functions with the f64 helpers; f32 trees never
    // get those.
    bool transcendental = false;
    for (const char* fn : {"exp", "log", "log1p", "sin", "cos", "tan", "tanh", "erf", "pow"}) {
      if (t.type == ScalarType::f64) {
        EXPECT_FALSE(calls(g.value, fn)) << fn << " in " << g.value;
        EXPECT_FALSE(calls(g.helpers, fn)) << fn << " in " << g.helpers;
      }
      transcendental = transcendental || calls(g.value, fmt::format("kiln_{}_f64", fn));
    }
    if (t.type == ScalarType::f64 && transcendental) ++f64_transcendental;
    if (t.type != ScalarType::f64) {
      EXPECT_EQ(count(g.value + g.helpers, "_f64"), 0u);
    }
    EXPECT_EQ(count(g.value, "("), count(g.value, ")"));
  }
  EXPECT_GT(rendered, 180);
  EXPECT_GT(f64_transcendental, 20);
}

TEST(CodegenGlsl, ExactRenderings) {
  auto value = [](const NodePtr& tree, ScalarType t) { return render_glsl(tree, t).value; };
  using kiln::codegen::trace_binary;
  using kiln::codegen::trace_unary;
  EXPECT_EQ(value(trace_unary<ops::Exp>(ScalarType::f32), ScalarType::f32), "exp(in0)");
  EXPECT_EQ(value(trace_unary<ops::Round>(ScalarType::f64), ScalarType::f64), "kiln_round_even_f64(in0)");
  EXPECT_EQ(value(trace_unary<ops::Sqrt>(ScalarType::f64), ScalarType::f64), "sqrt(in0)");
  EXPECT_EQ(value(trace_unary<ops::GeluErf>(ScalarType::f32), ScalarType::f32),
            "((in0 * float(0.5)) * (kiln_erf_f32((in0 * float(0.7071067811865476))) + float(1.0)))");
  EXPECT_EQ(value(trace_unary<ops::Relu>(ScalarType::f64), ScalarType::f64),
            "((in0 < double(0.0lf)) ? double(0.0lf) : in0)");
  EXPECT_EQ(value(trace_unary<ops::Relu>(ScalarType::i64), ScalarType::i64),
            "((in0 < int64_t(0)) ? int64_t(0) : in0)");
  EXPECT_EQ(value(trace_unary<ops::Sign>(ScalarType::u8), ScalarType::u8),
            "((in0 > uint8_t(0)) ? uint8_t(1) : ((in0 < uint8_t(0)) ? uint8_t(255) : uint8_t(0)))");
  EXPECT_EQ(value(trace_unary<ops::Abs>(ScalarType::u8), ScalarType::u8), "in0");
  EXPECT_EQ(value(trace_unary<ops::Neg>(ScalarType::u8), ScalarType::u8), "(uint8_t(0) - in0)");
  EXPECT_EQ(value(trace_unary<ops::LogicalNot>(ScalarType::boolean), ScalarType::boolean), "(!in0)");
  EXPECT_EQ(value(trace_binary<ops::LogicalXor>(ScalarType::boolean), ScalarType::boolean), "(in0 != in1)");
  EXPECT_EQ(value(trace_binary<ops::Less>(ScalarType::i32), ScalarType::i32), "(in0 < in1)");
  // fn::max keeps NaN for floats; the checks vanish where nothing can be NaN.
  EXPECT_EQ(value(trace_binary<ops::Maximum>(ScalarType::f32), ScalarType::f32),
            "(isnan(in0) ? in0 : (isnan(in1) ? in1 : max(in0, in1)))");
  EXPECT_EQ(value(trace_binary<ops::Maximum>(ScalarType::i32), ScalarType::i32), "max(in0, in1)");
  EXPECT_EQ(value(trace_unary<ops::Softplus>(ScalarType::f32), ScalarType::f32),
            "((in0 > float(20.0)) ? in0 : kiln_log1p_f32(exp((isnan(in0) ? in0 : min(in0, float(20.0))))))");

  const auto div = render_glsl(trace_binary<ops::Div>(ScalarType::i32), ScalarType::i32);
  EXPECT_EQ(div.value, "kiln_int_div_i32(in0, in1)");
  EXPECT_EQ(div.helpers,
            "int kiln_int_div_i32(int a, int b) { if (b == int(0)) return int(0); "
            "if (b == int(-1)) return int(0) - a; int q = a / b; int r = a - q * b; "
            "return (r != int(0) && ((r < int(0)) != (b < int(0)))) ? int(q - int(1)) : q; }\n");
  const auto pow = render_glsl(trace_binary<ops::Pow>(ScalarType::f32), ScalarType::f32);
  EXPECT_EQ(pow.value, "kiln_pow_f32(in0, in1)");
  EXPECT_EQ(pow.helpers.rfind("float kiln_pow_f32(float a, float b) {", 0), 0u);
  // f64: the helpers, each after the ones it calls; double literals with GLSL's lf suffix.
  EXPECT_EQ(value(trace_unary<ops::Exp>(ScalarType::f64), ScalarType::f64), "kiln_exp_f64(in0)");
  EXPECT_EQ(value(trace_unary<ops::Sin>(ScalarType::f64), ScalarType::f64), "kiln_sin_f64(in0)");
  const auto erf64 = render_glsl(trace_unary<ops::Erf>(ScalarType::f64), ScalarType::f64);
  EXPECT_EQ(erf64.value, "kiln_erf_f64(in0)");
  EXPECT_EQ(erf64.helpers.rfind("double kiln_exp_f64(double x) {", 0), 0u);
  EXPECT_NE(erf64.helpers.find("\ndouble kiln_erf_f64(double x) {"), std::string::npos);
  EXPECT_NE(erf64.helpers.find("double(1.1283791670955126lf)"), std::string::npos);
  const auto log1p64 = render_glsl(trace_unary<ops::Log1p>(ScalarType::f64), ScalarType::f64);
  EXPECT_EQ(log1p64.helpers.rfind("double kiln_log_f64(double x) {", 0), 0u);
  EXPECT_EQ(count(log1p64.helpers, "\n"), 2u);
  // GeluTanh's gradient reads tanh three times: one call, a let; its helper once.
  const auto gelu = render_glsl(kiln::codegen::trace_unary_grad<ops::GeluTanh>(ScalarType::f32), ScalarType::f32);
  EXPECT_EQ(count(text(gelu), "kiln_tanh_f32("), 1u);
  EXPECT_EQ(count(gelu.value, "kiln_tanh_f32("), 0u);
  EXPECT_EQ(count(gelu.helpers, "kiln_tanh_f32("), 1u);
}

TEST(CodegenGlsl, ConstantsAreExactAndTyped) {
  using kiln::codegen::glsl_constant;
  const double inf = std::numeric_limits<double>::infinity(), nan = std::numeric_limits<double>::quiet_NaN();
  EXPECT_EQ(glsl_constant(0.5, ScalarType::f32), "float(0.5)");
  EXPECT_EQ(glsl_constant(20, ScalarType::f32), "float(20.0)");
  EXPECT_EQ(glsl_constant(-0.0, ScalarType::f32), "float(-0.0)");
  EXPECT_EQ(glsl_constant(1.0 / 6.0, ScalarType::f32), "float(0.16666666666666666)");
  EXPECT_EQ(glsl_constant(1e-30, ScalarType::f32), "float(1e-30)");
  EXPECT_EQ(glsl_constant(0.1, ScalarType::f64), "double(0.1lf)");
  EXPECT_EQ(glsl_constant(3, ScalarType::f64), "double(3.0lf)");
  EXPECT_EQ(glsl_constant(inf, ScalarType::f32), "uintBitsToFloat(0x7f800000u)");
  EXPECT_EQ(glsl_constant(-inf, ScalarType::f32), "uintBitsToFloat(0xff800000u)");
  EXPECT_EQ(glsl_constant(nan, ScalarType::f32), "uintBitsToFloat(0x7fc00000u)");
  EXPECT_EQ(glsl_constant(-inf, ScalarType::f64), "packDouble2x32(uvec2(0u, 0xfff00000u))");
  EXPECT_EQ(glsl_constant(3, ScalarType::i32), "int(3)");
  EXPECT_EQ(glsl_constant(-1, ScalarType::i32), "int(-1)");
  EXPECT_EQ(glsl_constant(0.5, ScalarType::i32), "int(0)");  // truncates, like fn::constant
  EXPECT_EQ(glsl_constant(-2147483648.0, ScalarType::i32), "(int(-2147483647) - int(1))");
  EXPECT_EQ(glsl_constant(3, ScalarType::i64), "int64_t(3)");
  EXPECT_EQ(glsl_constant(5e9, ScalarType::i64), "int64_t(5000000000l)");
  EXPECT_EQ(glsl_constant(-1, ScalarType::u8), "uint8_t(255)");  // wraps, like fn::constant
  EXPECT_THROW(glsl_constant(nan, ScalarType::i32), kiln::Error);
  EXPECT_THROW(glsl_constant(1, ScalarType::boolean), kiln::Error);
}

TEST(CodegenGlsl, RefusesWhatGlslCannotDo) {
  using kiln::codegen::make_input;
  using kiln::codegen::make_node;
  const NodePtr x = make_input(0), y = make_input(1);
  try {
    render_glsl(make_node(Kind::exp, {x}), ScalarType::i32);
    FAIL() << "no error";
  } catch (const kiln::Error& e) {
    EXPECT_EQ(std::string(e.what()).rfind("render_glsl: exp needs a float type, got i32", 0), 0u) << e.what();
  }
  for (const Kind k : {Kind::log, Kind::sin, Kind::tanh, Kind::erf, Kind::sqrt}) {
    EXPECT_THROW(render_glsl(make_node(k, {x}), ScalarType::i64), kiln::Error) << kiln::codegen::kind_name(k);
  }
  EXPECT_THROW(render_glsl(make_node(Kind::pow, {x, y}), ScalarType::u8), kiln::Error);
  EXPECT_THROW(render_glsl(make_node(Kind::int_div, {x, y}), ScalarType::f32), kiln::Error);
  EXPECT_THROW(render_glsl(make_node(Kind::add, {x, y}), ScalarType::boolean), kiln::Error);
  EXPECT_THROW(render_glsl(nullptr, ScalarType::f32), kiln::Error);
}

// The forward formulas and gradients in f32 with the GLSL helpers (erf, log1p, tanh, pow)
// agree with the catalogue in f32 with the C library: NaN and infinities exactly, finite
// values to a few float roundings of the inputs' size (GeluErf's erf(x) + 1 cancels, so
// the error is relative to |x|, not to the result).
const std::vector<float> float_grid = {0.0f,  -0.0f, 0.5f,  -0.5f, 1.0f,   -1.0f,  1.5f,   -2.0f,  2.5f,  -3.0f,
                                       0.1f,  -0.1f, 0.7f,  -0.7f, 1e-6f,  -1e-6f, 1e-30f, -1e-30f, 3.9f, -4.5f,
                                       7.25f, 19.5f, 20.0f, 20.5f, -20.5f, 100.0f, -100.0f, 1e30f, -1e30f,
                                       std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity(),
                                       std::numeric_limits<float>::quiet_NaN()};

template <class R> float as_float(R r) {
  if constexpr (std::is_same_v<R, bool>) return r ? 1.0f : 0.0f;
  else return r;
}

void expect_close(const char* what, std::initializer_list<float> inputs, float got, float want) {
  std::ostringstream where;
  where << what << " at";
  float size = 1;
  for (const float x : inputs) {
    where << ' ' << x;
    if (std::isfinite(x)) size = std::max(size, std::abs(x));
  }
  if (!std::isfinite(want) || !std::isfinite(got)) {
    const bool same = std::isnan(want) ? std::isnan(got) : got == want;
    EXPECT_TRUE(same) << where.str() << ": " << got << ", the catalogue " << want;
  } else {
    EXPECT_LE(std::abs(got - want), 1e-6f * std::max(size, std::abs(want))) << where.str() << ": " << got
                                                                           << ", the catalogue " << want;
  }
}

template <class Op> void check_f32() {
  using kiln::codegen::test::evaluate;
  if constexpr (Op::domain != ops::Domain::boolean) {
    const NodePtr tree = kiln::codegen::trace_unary<Op>(ScalarType::f32);
    for (const float x : float_grid) {
      const float in[] = {x};
      expect_close(Op::name.data(), {x}, evaluate<float>(tree, in), as_float(Op::apply(x)));
    }
  }
}
template <class Op> void check_f32_binary() {
  using kiln::codegen::test::evaluate;
  if constexpr (Op::domain != ops::Domain::boolean) {
    const NodePtr tree = kiln::codegen::trace_binary<Op>(ScalarType::f32);
    for (const float a : float_grid) {
      for (const float b : float_grid) {
        const float in[] = {a, b};
        expect_close(Op::name.data(), {a, b}, evaluate<float>(tree, in), as_float(Op::apply(a, b)));
      }
    }
  }
}
template <class Op> void check_f32_grad() {
  using kiln::codegen::test::evaluate;
  const NodePtr tree = kiln::codegen::trace_unary_grad<Op>(ScalarType::f32);
  for (const float x : float_grid) {
    const float y = Op::apply(x);
    for (const float dy : {1.5f, -0.75f}) {
      const float in[] = {x, y, dy};
      expect_close(Op::name.data(), {x, dy}, evaluate<float>(tree, in), Op::grad(x, y, dy));
    }
  }
}
template <class Op> void check_f32_binary_grad() {
  using kiln::codegen::test::evaluate;
  const NodePtr lhs = kiln::codegen::trace_binary_grad<Op, ops::Operand::lhs>(ScalarType::f32);
  const NodePtr rhs = kiln::codegen::trace_binary_grad<Op, ops::Operand::rhs>(ScalarType::f32);
  for (const float a : float_grid) {
    for (const float b : float_grid) {
      const float y = Op::apply(a, b), dy = 1.5f;
      const float in[] = {a, b, y, dy};
      expect_close(Op::name.data(), {a, b}, evaluate<float>(lhs, in), Op::grad_lhs(a, b, y, dy));
      expect_close(Op::name.data(), {a, b}, evaluate<float>(rhs, in), Op::grad_rhs(a, b, y, dy));
    }
  }
}

TEST(CodegenGlsl, FormulasWithTheHelpersMatchTheCatalogueInF32) {
#define KILN_CHECK_OP(Op) check_f32<ops::Op>();
  KILN_UNARY_OPS(KILN_CHECK_OP)
#undef KILN_CHECK_OP
#define KILN_CHECK_OP(Op) check_f32_binary<ops::Op>();
  KILN_BINARY_OPS(KILN_CHECK_OP)
#undef KILN_CHECK_OP
#define KILN_CHECK_OP(Op) check_f32_grad<ops::Op>();
  KILN_DIFFERENTIABLE_UNARY_OPS(KILN_CHECK_OP)
#undef KILN_CHECK_OP
#define KILN_CHECK_OP(Op) check_f32_binary_grad<ops::Op>();
  KILN_DIFFERENTIABLE_BINARY_OPS(KILN_CHECK_OP)
#undef KILN_CHECK_OP
}

#ifndef KILN_GLSLC
TEST(CodegenGlsl, EveryRenderingCompilesWithGlslc) {
  GTEST_SKIP() << "glslc was not found when Kiln was configured (apt-get install glslc)";
}
#else
// One compute shader per type that computes every rendering it can (as the Vulkan backend
// declares them: inputs of the GLSL type, bool for Bool, masks stored as uint), compiled
// with glslc for Vulkan 1.1.
std::string shader_for(ScalarType t, const std::vector<Traced>& traces) {
  const bool boolean = t == ScalarType::boolean;
  const std::string type = boolean ? "uint" : kiln::codegen::glsl_type(t);
  std::vector<std::string> helper_lines;
  std::string body;
  int slot = 0;
  for (const Traced& traced : traces) {
    if (traced.type != t) continue;
    const auto g = render_glsl(traced.tree, t);
    std::istringstream lines(g.helpers);
    for (std::string line; std::getline(lines, line);)
      if (std::find(helper_lines.begin(), helper_lines.end(), line) == helper_lines.end()) helper_lines.push_back(line);
    body += "  {  // " + traced.name + "\n";
    body += kiln::codegen::let_statements(g.lets, kiln::codegen::glsl_type(t), "    ");
    if (traced.tree->mask) body += fmt::format("    masks[{}] = ({}) ? 1u : 0u;\n  }}\n", slot++, g.value);
    else body += fmt::format("    values[{}] = {};\n  }}\n", slot++, g.value);
  }
  std::string src =
      "#version 450\n"
      "#extension GL_EXT_shader_explicit_arithmetic_types_int64 : require\n"
      "#extension GL_EXT_shader_explicit_arithmetic_types_int8 : require\n"
      "#extension GL_EXT_shader_8bit_storage : require\n"
      "layout(local_size_x = 64) in;\n";
  src += fmt::format("layout(std430, binding = 0) readonly buffer In {{ {} inputs[]; }};\n", type);
  src += fmt::format("layout(std430, binding = 1) writeonly buffer Values {{ {} values[]; }};\n", type);
  src += "layout(std430, binding = 2) writeonly buffer Masks { uint masks[]; };\n";
  for (const std::string& line : helper_lines) src += line + "\n";
  src += "void main() {\n  uint i = gl_GlobalInvocationID.x;\n";
  for (int k = 0; k < 4; ++k) {
    if (boolean) src += fmt::format("  bool in{} = inputs[4u * i + {}u] != 0u;\n", k, k);
    else src += fmt::format("  {} in{} = inputs[4u * i + {}u];\n", type, k, k);
  }
  return src + body + "}\n";
}

TEST(CodegenGlsl, EveryRenderingCompilesWithGlslc) {
  const std::vector<Traced> traces = every_trace();
  for (const ScalarType t : all_types) {
    const std::string name(kiln::codegen::scalar_type_name(t));
    SCOPED_TRACE(name);
    EXPECT_TRUE(kiln::codegen::test::compiles_with_glslc(shader_for(t, traces), "codegen_" + name));
  }
}
#endif

}  // namespace

// Row programs as row kernels (codegen/row_kernel.hpp): the reductions in dependency order,
// each later one reading the earlier ones as inputs, and one shader per output.
TEST(CodegenGlsl, RowKernelsReduceInOrderAndCompile) {
  using namespace kiln::codegen;
  // Layer norm's shape: mean = sum(x) * p0, var = sum((x - mean)^2) * p0, then erf of the
  // normalised value (a helper, rendered once for both roots that call it).
  const NodePtr x = make_input(0);
  const NodePtr mean = make_node(Kind::mul, {make_node(Kind::row_sum, {x}), make_param(0)});
  const NodePtr c = make_node(Kind::sub, {x, mean});
  const NodePtr var = make_node(Kind::mul, {make_node(Kind::row_sum, {make_node(Kind::erf, {make_node(Kind::mul, {c, c})})}), make_param(0)});
  const NodePtr y = make_node(Kind::erf, {make_node(Kind::div, {c, make_node(Kind::sqrt, {var})})});
  const RowTree tree = row_tree(y, 1);
  ASSERT_EQ(tree.reductions.size(), 2u);
  EXPECT_EQ(structural_key(tree.reductions[0].argument), "in0");
  EXPECT_EQ(structural_key(tree.reductions[1].argument), "in0;in1;p0;mul(1,2);sub(0,3);mul(4,4);erf(5)");
  EXPECT_EQ(structural_key(tree.value), "in0;in1;p0;mul(1,2);sub(0,3);in2;mul(5,2);sqrt(6);div(4,7);erf(8)");
  const std::vector<NodePtr> roots{tree.reductions[0].argument, tree.reductions[1].argument, tree.value};
  const Expressions e = render(glsl(), roots, ScalarType::f32, RootScope::separate);
  ASSERT_EQ(e.values.size(), 3u);
  // (x - mean) is read twice by the second reduction's argument, once by the value: a let of
  // the reduction's loop, and written out in the value's, a scope of its own.
  ASSERT_EQ(e.lets[1].size(), 1u);
  EXPECT_EQ(e.lets[1][0].value, "(in0 - (in1 * p0))");
  EXPECT_EQ(e.values[1], fmt::format("kiln_erf_f32(({0} * {0}))", e.lets[1][0].name));
  EXPECT_TRUE(e.lets[0].empty() && e.lets[2].empty());
  const std::string erf_helper = render_glsl(make_node(Kind::erf, {make_input(0)}), ScalarType::f32).helpers;
  EXPECT_EQ(e.helpers, erf_helper) << "each helper once";

  RowKernel kernel;
  kernel.kernel.inputs = {kiln::DType::f32};
  kernel.kernel.params = 1;
  kernel.kernel.helpers = e.helpers;
  kernel.kernel.outputs = {{kiln::DType::f32, e.values[2]}};
  kernel.reductions = {{Kind::row_sum, e.values[0]}, {Kind::row_max, e.values[1], e.lets[1]}};
  const std::string source = row_kernel(glsl(), glsl_kernels(), kernel);
  const std::string let = fmt::format("const float {} = (in0 - (in1 * p0));", e.lets[1][0].name);
  EXPECT_NE(source.find(let), std::string::npos) << source;
  EXPECT_LT(source.find("for (int c = lid; c < cols; c += 256)", source.find("float in1;")), source.find(let));
  EXPECT_NE(source.find("shared float kiln_partial[256];"), std::string::npos) << source;
  EXPECT_NE(source.find("float in1;"), std::string::npos) << source;
  EXPECT_NE(source.find("float in2;"), std::string::npos) << source;
  EXPECT_LT(source.find("float in1;"), source.find("float in2;"));
  EXPECT_NE(source.find(fmt::format("const float p0 = intBitsToFloat(params[{}]);", param_layout(1))), std::string::npos)
      << source;
  EXPECT_NE(source.find("isnan(v) || v > acc"), std::string::npos) << "max keeps NaN: " << source;
  EXPECT_NE(source.find("out0_data[row * cols + c]"), std::string::npos) << source;
  kernel.per_row = true;
  kernel.kernel.outputs[0].value = "in2";
  const std::string per_row = row_kernel(glsl(), glsl_kernels(), kernel);
  EXPECT_NE(per_row.find("out0_data[row] = float(in2);"), std::string::npos) << per_row;
#ifdef KILN_GLSLC
  EXPECT_TRUE(test::compiles_with_glslc(source, "row_kernel"));
  EXPECT_TRUE(test::compiles_with_glslc(per_row, "row_kernel_per_row"));
#endif
  // A dialect without workgroups here, or a workgroup that is not a power of two, is refused.
  KernelDialect no_groups = glsl_kernels();
  no_groups.group_index = {};
  EXPECT_THROW(row_kernel(glsl(), no_groups, kernel), kiln::Error);
  kernel.kernel.workgroup_size = 100;
  EXPECT_THROW(row_kernel(glsl(), glsl_kernels(), kernel), kiln::Error);
}

// A subtree read twice is a let, computed once: a chain whose every step reads the step
// before twice renders in text that grows by a line a step, not twice over (2^40 copies of
// in0 here, written out).
TEST(CodegenGlsl, ASubtreeReadTwiceIsComputedOnce) {
  using namespace kiln::codegen;
  NodePtr v = make_input(0);
  for (int k = 0; k < 40; ++k) v = make_node(Kind::mul, {make_node(Kind::add, {v, make_constant(1.0)}), v});
  const Expression e = render_glsl(v, ScalarType::f32);
  ASSERT_EQ(e.lets.size(), 39u);
  EXPECT_EQ(e.lets[0].name, "e0");
  EXPECT_EQ(e.lets[0].value, "((in0 + float(1.0)) * in0)");
  EXPECT_EQ(e.lets[1].value, "((e0 + float(1.0)) * e0)");
  EXPECT_EQ(e.value, "((e38 + float(1.0)) * e38)");
  // A node read twice only through a node that is itself a let is read once.
  const NodePtr x = make_node(Kind::exp, {make_input(0)});
  const NodePtr twice = make_node(Kind::add, {make_node(Kind::sin, {x}), make_node(Kind::cos, {x})});
  const Expression once = render_glsl(make_node(Kind::mul, {twice, twice}), ScalarType::f32);
  ASSERT_EQ(once.lets.size(), 2u);
  EXPECT_EQ(once.lets[0].value, "exp(in0)");
  EXPECT_EQ(once.lets[1].value, "(sin(e0) + cos(e0))");
  EXPECT_EQ(once.value, "(e1 * e1)");
  EXPECT_FALSE(once.lets[0].mask);
  // Masks are bool lets.
  const NodePtr less = make_node(Kind::lt, {make_input(0), make_input(1)});
  const Expression mask = render_glsl(make_node(Kind::select, {less, make_input(0), make_node(Kind::neg, {make_input(1)})}),
                                      ScalarType::f32);
  EXPECT_TRUE(mask.lets.empty()) << "read once";
  const Expression masks = render_glsl(make_node(Kind::logical_and, {less, make_node(Kind::logical_not, {less})}),
                                       ScalarType::f32);
  ASSERT_EQ(masks.lets.size(), 1u);
  EXPECT_TRUE(masks.lets[0].mask);
  EXPECT_EQ(let_statements(masks.lets, "float", ""), "const bool e0 = (in0 < in1);\n");
}

// An elementwise kernel of several outputs: each its own buffer after the layout, the inputs
// after them, every output written by the same invocation from inputs loaded once.
TEST(CodegenGlsl, AKernelOfSeveralOutputsBindsEachAndWritesThemTogether) {
  using namespace kiln::codegen;
  const NodePtr e = make_node(Kind::exp, {make_input(0)});
  const Expressions r = render(glsl(), std::vector<NodePtr>{e, make_node(Kind::gt, {e, make_input(1)})}, ScalarType::f32);
  ElementwiseKernel k;
  k.inputs = {kiln::DType::f32, kiln::DType::f16};
  // exp(in0) is read by both: computed once, before the first output.
  ASSERT_EQ(r.lets[0].size(), 1u);
  EXPECT_TRUE(r.lets[1].empty());
  EXPECT_EQ(r.values[0], r.lets[0][0].name);
  k.outputs = {{kiln::DType::bf16, r.values[0], false, r.lets[0]}, {kiln::DType::boolean, r.values[1], true}};
  k.helpers = r.helpers;
  const std::string source = elementwise_kernel(glsl_kernels(), k, {});
  EXPECT_NE(source.find(fmt::format("const float {} = exp(in0);", r.lets[0][0].name)), std::string::npos) << source;
  EXPECT_NE(source.find("layout(std430, binding = 1) writeonly buffer Out0 { uint16_t out0_data[]; };"), std::string::npos)
      << source;
  EXPECT_NE(source.find("layout(std430, binding = 2) writeonly buffer Out1 { uint8_t out1_data[]; };"), std::string::npos)
      << source;
  EXPECT_NE(source.find("layout(std430, binding = 3) readonly buffer In0 { float in0_data[]; };"), std::string::npos)
      << source;
  EXPECT_NE(source.find("layout(std430, binding = 4) readonly buffer In1 { uint16_t in1_data[]; };"), std::string::npos)
      << source;
  EXPECT_EQ(source.find("in0_data[params"), source.rfind("in0_data[params")) << "each input is loaded once: " << source;
  EXPECT_NE(source.find("out0_data[i] = uint16_t(kiln_f32_to_bf16("), std::string::npos) << source;
  EXPECT_NE(source.find("out1_data[i] = ("), std::string::npos) << source;
  k.outputs.clear();
  EXPECT_THROW(elementwise_kernel(glsl_kernels(), k, {}), kiln::Error);
#ifdef KILN_GLSLC
  EXPECT_TRUE(kiln::codegen::test::compiles_with_glslc(source, "two_outputs"));
#endif
}
