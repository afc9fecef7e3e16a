// Codegen: every catalogue formula, traced into a tree (trace_unary, trace_binary and the
// gradient traces), computes exactly what the formula computes, on grids that include
// NaN, infinities, signed zeros and, for integers, b = 0, negatives and MIN / -1.
#include "evaluate.hpp"

#include <kiln/codegen/expr.hpp>

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <set>
#include <string_view>
#include <vector>

namespace {

namespace ops = kiln::ops;
using kiln::codegen::NodePtr;
using kiln::codegen::ScalarType;
using kiln::codegen::test::evaluate;

constexpr double inf = std::numeric_limits<double>::infinity();
constexpr double nan = std::numeric_limits<double>::quiet_NaN();

template <class T> constexpr ScalarType scalar_type() {
  if constexpr (std::is_same_v<T, double>) return ScalarType::f64;
  else if constexpr (std::is_same_v<T, float>) return ScalarType::f32;
  else if constexpr (std::is_same_v<T, std::int32_t>) return ScalarType::i32;
  else if constexpr (std::is_same_v<T, std::int64_t>) return ScalarType::i64;
  else return ScalarType::u8;
}

template <class T> std::vector<T> grid() {
  if constexpr (std::is_floating_point_v<T>) {
    return {0.0, -0.0, 0.5, -0.5, 1.0, -1.0, 1.5, -1.5, 2.0, -2.0, 2.5, -2.5, 3.0, -3.0, 0.1, -0.1, 0.7, -0.7, 1e-7,
            -1e-7, 1e-30, -1e-30, 7.25, -7.25, 19.5, 20.0, 20.5, -20.5, 100.0, -100.0, 1e30, -1e30, inf, -inf, nan};
  } else if constexpr (std::is_unsigned_v<T>) {
    std::vector<T> all;
    for (int v = 0; v < 256; ++v) all.push_back(static_cast<T>(v));
    return all;
  } else {
    using L = std::numeric_limits<T>;
    return {0, 1, -1, 2, -2, 3, -3, 5, -5, 7, -7, 10, -10, 31, -31, 62, -64, 100, -100, 46340, -46341,
            L::max(), L::min(), T(L::min() + 1), T(L::max() - 1), T(L::min() / 2), T(L::max() / 3)};
  }
}

// Equal as values of T: NaN equals NaN, and zeros must agree in sign.
template <class T> bool same(T a, T b) {
  if constexpr (std::is_floating_point_v<T>) {
    if (std::isnan(a) || std::isnan(b)) return std::isnan(a) && std::isnan(b);
    return a == b && std::signbit(a) == std::signbit(b);
  } else {
    return a == b;
  }
}

// The formula's own result as T (predicates give bool: 1 or 0 like evaluate's masks).
template <class T, class R> T as_value(R r) {
  if constexpr (std::is_same_v<R, bool>) return r ? T(1) : T(0);
  else return r;
}

template <class Op, class T> void check_unary_in() {
  SCOPED_TRACE(::testing::Message() << Op::name << " in " << kiln::codegen::scalar_type_name(scalar_type<T>()));
  const NodePtr tree = kiln::codegen::trace_unary<Op>(scalar_type<T>());
  for (const T x : grid<T>()) {
    const T in[] = {x};
    const T want = as_value<T>(Op::apply(x));
    const T got = evaluate<T>(tree, in);
    EXPECT_TRUE(same(got, want)) << "x = " << +x << ": traced " << +got << ", formula " << +want;
  }
}

template <class Op, class T> void check_binary_in() {
  SCOPED_TRACE(::testing::Message() << Op::name << " in " << kiln::codegen::scalar_type_name(scalar_type<T>()));
  const NodePtr tree = kiln::codegen::trace_binary<Op>(scalar_type<T>());
  for (const T a : grid<T>()) {
    for (const T b : grid<T>()) {
      const T in[] = {a, b};
      const T want = as_value<T>(Op::apply(a, b));
      const T got = evaluate<T>(tree, in);
      EXPECT_TRUE(same(got, want)) << "a = " << +a << ", b = " << +b << ": traced " << +got << ", formula " << +want;
    }
  }
}

// Bool ops: traced with Mask inputs, evaluated on 0 / 1.
template <class Op> void check_bool_unary() {
  SCOPED_TRACE(Op::name);
  const NodePtr tree = kiln::codegen::trace_unary<Op>(ScalarType::boolean);
  EXPECT_TRUE(tree->mask);
  for (const bool x : {false, true}) {
    const double in[] = {x ? 1.0 : 0.0};
    EXPECT_EQ(evaluate(tree, in), Op::apply(x) ? 1.0 : 0.0) << x;
  }
}
template <class Op> void check_bool_binary() {
  SCOPED_TRACE(Op::name);
  const NodePtr tree = kiln::codegen::trace_binary<Op>(ScalarType::boolean);
  EXPECT_TRUE(tree->mask);
  for (const bool a : {false, true}) {
    for (const bool b : {false, true}) {
      const double in[] = {a ? 1.0 : 0.0, b ? 1.0 : 0.0};
      EXPECT_EQ(evaluate(tree, in), Op::apply(a, b) ? 1.0 : 0.0) << a << ", " << b;
    }
  }
}

template <class Op> void check_unary() {
  using ops::Domain;
  if constexpr (Op::domain == Domain::boolean) {
    check_bool_unary<Op>();
  } else {
    check_unary_in<Op, double>();
    if constexpr (Op::domain == Domain::numeric) {
      check_unary_in<Op, std::int32_t>();
      check_unary_in<Op, std::int64_t>();
      check_unary_in<Op, std::uint8_t>();
    }
  }
}
template <class Op> void check_binary() {
  using ops::Domain;
  if constexpr (Op::domain == Domain::boolean) {
    check_bool_binary<Op>();
  } else {
    check_binary_in<Op, double>();
    if constexpr (Op::domain == Domain::numeric) {
      check_binary_in<Op, std::int32_t>();
      check_binary_in<Op, std::int64_t>();
      check_binary_in<Op, std::uint8_t>();
    }
  }
}

const std::vector<double> dys = {1.5, -0.75, 0.0, nan, inf};

template <class Op> void check_unary_grad() {
  SCOPED_TRACE(Op::name);
  const NodePtr tree = kiln::codegen::trace_unary_grad<Op>(ScalarType::f64);
  for (const double x : grid<double>()) {
    const double y = Op::apply(x);
    for (const double dy : dys) {
      const double in[] = {x, y, dy};
      const double want = Op::grad(x, y, dy), got = evaluate(tree, in);
      EXPECT_TRUE(same(got, want)) << "x = " << x << ", dy = " << dy << ": traced " << got << ", formula " << want;
    }
  }
}

template <class Op> void check_binary_grad() {
  SCOPED_TRACE(Op::name);
  const NodePtr lhs = kiln::codegen::trace_binary_grad<Op, ops::Operand::lhs>(ScalarType::f64);
  const NodePtr rhs = kiln::codegen::trace_binary_grad<Op, ops::Operand::rhs>(ScalarType::f64);
  for (const double a : grid<double>()) {
    for (const double b : grid<double>()) {
      const double y = Op::apply(a, b);
      for (const double dy : dys) {
        const double in[] = {a, b, y, dy};
        const double want_a = Op::grad_lhs(a, b, y, dy), got_a = evaluate(lhs, in);
        const double want_b = Op::grad_rhs(a, b, y, dy), got_b = evaluate(rhs, in);
        EXPECT_TRUE(same(got_a, want_a)) << "lhs, a = " << a << ", b = " << b << ", dy = " << dy << ": traced "
                                         << got_a << ", formula " << want_a;
        EXPECT_TRUE(same(got_b, want_b)) << "rhs, a = " << a << ", b = " << b << ", dy = " << dy << ": traced "
                                         << got_b << ", formula " << want_b;
      }
    }
  }
}

TEST(CodegenTrace, EveryUnaryOpComputesItsFormula) {
#define KILN_CHECK_OP(Op) check_unary<ops::Op>();
  KILN_UNARY_OPS(KILN_CHECK_OP)
#undef KILN_CHECK_OP
}

TEST(CodegenTrace, EveryBinaryOpComputesItsFormula) {
#define KILN_CHECK_OP(Op) check_binary<ops::Op>();
  KILN_BINARY_OPS(KILN_CHECK_OP)
#undef KILN_CHECK_OP
}

TEST(CodegenTrace, EveryUnaryGradientComputesItsFormula) {
#define KILN_CHECK_OP(Op) check_unary_grad<ops::Op>();
  KILN_DIFFERENTIABLE_UNARY_OPS(KILN_CHECK_OP)
#undef KILN_CHECK_OP
}

TEST(CodegenTrace, EveryBinaryGradientComputesItsFormula) {
#define KILN_CHECK_OP(Op) check_binary_grad<ops::Op>();
  KILN_DIFFERENTIABLE_BINARY_OPS(KILN_CHECK_OP)
#undef KILN_CHECK_OP
}

// The integer branches of Div, Rem and Pow become one node each, whose helpers the tests
// above ran against the catalogue; here, their edge cases by name.
TEST(CodegenTrace, IntegerDivRemPowFollowTheCatalogue) {
  using kiln::codegen::Kind;
  EXPECT_EQ(kiln::codegen::trace_binary<ops::Div>(ScalarType::i32)->kind, Kind::int_div);
  EXPECT_EQ(kiln::codegen::trace_binary<ops::Rem>(ScalarType::i64)->kind, Kind::int_rem);
  EXPECT_EQ(kiln::codegen::trace_binary<ops::Pow>(ScalarType::u8)->kind, Kind::int_pow);
  EXPECT_EQ(kiln::codegen::trace_binary<ops::Div>(ScalarType::f32)->kind, Kind::div);

  const NodePtr div = kiln::codegen::trace_binary<ops::Div>(ScalarType::i32);
  const NodePtr rem = kiln::codegen::trace_binary<ops::Rem>(ScalarType::i32);
  const NodePtr pow = kiln::codegen::trace_binary<ops::Pow>(ScalarType::i32);
  auto run = [](const NodePtr& tree, std::int32_t a, std::int32_t b) {
    const std::int32_t in[] = {a, b};
    return evaluate<std::int32_t>(tree, in);
  };
  constexpr std::int32_t min = std::numeric_limits<std::int32_t>::min();
  EXPECT_EQ(run(div, 7, 2), 3);
  EXPECT_EQ(run(div, -7, 2), -4);  // floor, not truncation
  EXPECT_EQ(run(div, 7, -2), -4);
  EXPECT_EQ(run(div, -7, -2), 3);
  EXPECT_EQ(run(div, 5, 0), 0);
  EXPECT_EQ(run(div, min, -1), min);  // wraps
  EXPECT_EQ(run(rem, -7, 2), 1);      // the divisor's sign
  EXPECT_EQ(run(rem, 7, -2), -1);
  EXPECT_EQ(run(rem, 5, 0), 0);
  EXPECT_EQ(run(rem, min, -1), 0);
  EXPECT_EQ(run(pow, 3, 4), 81);
  EXPECT_EQ(run(pow, 2, -1), 0);
  EXPECT_EQ(run(pow, -1, -3), -1);
  EXPECT_EQ(run(pow, 1, -5), 1);
  EXPECT_EQ(run(pow, 0, 0), 1);
}

// Tracing checks the op's domain, and gradients are for float types only.
TEST(CodegenTrace, RejectsTypesOutsideTheDomain) {
  EXPECT_THROW(kiln::codegen::trace_unary<ops::Exp>(ScalarType::i32), kiln::Error);
  EXPECT_THROW(kiln::codegen::trace_unary<ops::Neg>(ScalarType::boolean), kiln::Error);
  EXPECT_THROW(kiln::codegen::trace_unary<ops::LogicalNot>(ScalarType::f32), kiln::Error);
  EXPECT_THROW(kiln::codegen::trace_binary<ops::LogicalAnd>(ScalarType::u8), kiln::Error);
  EXPECT_THROW(kiln::codegen::trace_unary_grad<ops::Neg>(ScalarType::i32), kiln::Error);
  EXPECT_THROW((kiln::codegen::trace_binary_grad<ops::Mul, ops::Operand::lhs>(ScalarType::i64)), kiln::Error);
  try {
    kiln::codegen::trace_unary<ops::Sqrt>(ScalarType::u8);
    FAIL() << "no error";
  } catch (const kiln::Error& e) {
    EXPECT_STREQ(e.what(), "sqrt: expected a float type, got u8");
  }
}

TEST(CodegenTrace, ScalarTypeOfDtype) {
  using kiln::DType;
  using kiln::codegen::scalar_type_of;
  EXPECT_EQ(scalar_type_of(DType::f32), ScalarType::f32);
  EXPECT_EQ(scalar_type_of(DType::f16), ScalarType::f32);  // half types compute in f32
  EXPECT_EQ(scalar_type_of(DType::bf16), ScalarType::f32);
  EXPECT_EQ(scalar_type_of(DType::f64), ScalarType::f64);
  EXPECT_EQ(scalar_type_of(DType::i32), ScalarType::i32);
  EXPECT_EQ(scalar_type_of(DType::i64), ScalarType::i64);
  EXPECT_EQ(scalar_type_of(DType::u8), ScalarType::u8);
  EXPECT_EQ(scalar_type_of(DType::boolean), ScalarType::boolean);
}

// Nodes check their arguments, so renderers can trust any tree.
TEST(CodegenTrace, NodesCheckTheirArguments) {
  using kiln::codegen::Kind;
  using kiln::codegen::make_input;
  using kiln::codegen::make_node;
  const NodePtr x = make_input(0), m = make_input(1, true);
  EXPECT_THROW(make_node(Kind::add, {x}), kiln::Error);
  EXPECT_THROW(make_node(Kind::add, {x, m}), kiln::Error);
  EXPECT_THROW(make_node(Kind::logical_not, {x}), kiln::Error);
  EXPECT_THROW(make_node(Kind::select, {x, x, x}), kiln::Error);
  EXPECT_THROW(make_node(Kind::select, {m, x, m}), kiln::Error);
  EXPECT_THROW(make_node(Kind::input, {}), kiln::Error);
  EXPECT_THROW(make_node(Kind::neg, {nullptr}), kiln::Error);
  EXPECT_TRUE(make_node(Kind::select, {m, m, m})->mask);
  EXPECT_FALSE(make_node(Kind::select, {m, x, x})->mask);
  EXPECT_TRUE(make_node(Kind::lt, {x, x})->mask);
  EXPECT_EQ(kiln::codegen::input_count(make_node(Kind::add, {make_input(3), x})), 4);
}

// The node kinds' table: distinct names, and make_node accepts each kind with the operands
// its row names (and types the result as the row says), rejecting the other operand type.
TEST(CodegenTrace, EveryKindOfTheTableMakesANode) {
  using namespace kiln::codegen;
  const NodePtr x = make_input(0), m = make_input(1, true);
  std::set<std::string_view> names;
  for (std::size_t i = 0; i < kind_count; ++i) {
    const Kind kind = static_cast<Kind>(i);
    const KindInfo& info = kind_info(kind);
    SCOPED_TRACE(info.name);
    EXPECT_TRUE(names.insert(info.name).second) << "two kinds are named " << info.name;
    if (info.operands == Operands::none) continue;
    const NodePtr good = info.operands == Operands::masks ? m : x, bad = good == m ? x : m;
    std::vector<NodePtr> args(static_cast<std::size_t>(info.arity), good);
    if (info.operands == Operands::select) args[0] = m;
    const NodePtr n = make_node(kind, args);
    EXPECT_EQ(n->mask, info.result == Result::mask) << "result type";
    if (info.operands != Operands::select) {
      args.back() = bad;
      EXPECT_THROW(make_node(kind, args), kiln::Error);
    }
    args.push_back(good);
    EXPECT_THROW(make_node(kind, args), kiln::Error) << "one argument too many";
  }
  EXPECT_EQ(names.size(), kind_count);
}

}  // namespace
