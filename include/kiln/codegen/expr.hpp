// A small expression IR for generating kernel source: the op catalogue's formulas,
// instantiated with the symbolic Expr / Mask types below, record a tree of Nodes that a
// renderer (src/codegen/cstyle.hpp with a table per language: GLSL, CUDA) turns into one kernel
// expression.
#pragma once

#include "kiln/core/dtype.hpp"
#include "kiln/core/error.hpp"
#include "kiln/ops/elementwise.hpp"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <iterator>
#include <memory>
#include <string>
#include <string_view>
#include <type_traits>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

namespace kiln::codegen {

// ---------------------------------------------------------------- scalar types
// The type a kernel computes in. One tree computes in one type; Masks are bool whatever it is.
enum class ScalarType : std::uint8_t { f32, f64, i32, i64, u8, boolean };

constexpr std::string_view scalar_type_name(ScalarType t) {
  switch (t) {
    case ScalarType::f32: return "f32";
    case ScalarType::f64: return "f64";
    case ScalarType::i32: return "i32";
    case ScalarType::i64: return "i64";
    case ScalarType::u8: return "u8";
    case ScalarType::boolean: return "bool";
  }
  return "?";
}
constexpr bool is_float(ScalarType t) { return t == ScalarType::f32 || t == ScalarType::f64; }
constexpr bool is_integer(ScalarType t) { return t == ScalarType::i32 || t == ScalarType::i64 || t == ScalarType::u8; }

// f16 and bf16 compute in f32, as on the CPU: kernels convert on load and store, and the
// formulas (and their constants) run at f32 precision.
constexpr ScalarType scalar_type_of(DType dtype) {
  switch (dtype) {
    case DType::f32:
    case DType::f16:
    case DType::bf16: return ScalarType::f32;
    case DType::f64: return ScalarType::f64;
    case DType::i32: return ScalarType::i32;
    case DType::i64: return ScalarType::i64;
    case DType::u8: return ScalarType::u8;
    case DType::boolean: return ScalarType::boolean;
  }
  return ScalarType::f32;
}

// ---------------------------------------------------------------- nodes
// The node kinds, one row each and nowhere else: the enum, the names, the arities and the
// operand and result types below are all derived from this table.
//   X(kind, name, arity, operands, result, types)
// operands: none, numbers, masks, or select (a mask, then two values of one type);
// result: number, mask, branches (select: the type of its branches) or given (an input
// is numeric or a mask as it was made); types: the tree types it exists in (any, floats,
// integers), which every renderer checks.
// The numeric kinds have the meaning of kiln::fn and of C++'s operators on the tree's type
// (so div on integers truncates; the catalogue's integer Div is int_div); round_even is
// fn::round, halves to even. max / min need not handle NaN: fn::max checks isnan first.
// int_div, int_rem and int_pow are the catalogue's integer branches of Div, Rem and Pow
// (integer trees only).
// row_sum, row_max and row_min are reductions along the last dim of a row program's domain
// (kiln/codegen/program.hpp): the value of their argument summed (max, min; NaN propagating)
// over the row, the same for every element of the row. Only B::row_program runs them.
#define KILN_CODEGEN_NODE_KINDS(X)                                                                 \
  X(input, "input", 0, none, given, any)          /* in<index>: a kernel operand */                \
  X(constant, "constant", 0, none, number, any)   /* typed by the tree's ScalarType */             \
  X(param, "param", 0, none, number, any)         /* p<index>: a scalar given at run time */       \
  X(neg, "neg", 1, numbers, number, any)                                                           \
  X(exp, "exp", 1, numbers, number, floats)                                                        \
  X(log, "log", 1, numbers, number, floats)                                                        \
  X(log1p, "log1p", 1, numbers, number, floats)                                                    \
  X(expm1, "expm1", 1, numbers, number, floats)                                                    \
  X(sqrt, "sqrt", 1, numbers, number, floats)                                                      \
  X(abs, "abs", 1, numbers, number, any)                                                           \
  X(sin, "sin", 1, numbers, number, floats)                                                        \
  X(cos, "cos", 1, numbers, number, floats)                                                        \
  X(tan, "tan", 1, numbers, number, floats)                                                        \
  X(tanh, "tanh", 1, numbers, number, floats)                                                      \
  X(erf, "erf", 1, numbers, number, floats)                                                        \
  X(floor, "floor", 1, numbers, number, floats)                                                    \
  X(ceil, "ceil", 1, numbers, number, floats)                                                      \
  X(round_even, "round_even", 1, numbers, number, floats)                                          \
  X(add, "add", 2, numbers, number, any)                                                           \
  X(sub, "sub", 2, numbers, number, any)                                                           \
  X(mul, "mul", 2, numbers, number, any)                                                           \
  X(div, "div", 2, numbers, number, any)                                                           \
  X(max, "max", 2, numbers, number, any)                                                           \
  X(min, "min", 2, numbers, number, any)                                                           \
  X(pow, "pow", 2, numbers, number, floats)                                                        \
  X(atan2, "atan2", 2, numbers, number, floats)                                                    \
  X(int_div, "int_div", 2, numbers, number, integers)                                              \
  X(int_rem, "int_rem", 2, numbers, number, integers)                                              \
  X(int_pow, "int_pow", 2, numbers, number, integers)                                              \
  X(select, "select", 3, select, branches, any)   /* (mask, a, b): a where mask else b */          \
  X(isnan, "isnan", 1, numbers, mask, any)                                                         \
  X(isinf, "isinf", 1, numbers, mask, any)                                                         \
  X(lt, "lt", 2, numbers, mask, any)                                                               \
  X(le, "le", 2, numbers, mask, any)                                                               \
  X(gt, "gt", 2, numbers, mask, any)                                                               \
  X(ge, "ge", 2, numbers, mask, any)                                                               \
  X(eq, "eq", 2, numbers, mask, any)                                                               \
  X(ne, "ne", 2, numbers, mask, any)                                                               \
  X(logical_and, "and", 2, masks, mask, any)                                                       \
  X(logical_or, "or", 2, masks, mask, any)                                                         \
  X(logical_xor, "xor", 2, masks, mask, any)                                                       \
  X(logical_not, "not", 1, masks, mask, any)                                                       \
  X(row_sum, "row_sum", 1, numbers, number, floats) /* row programs only */                         \
  X(row_max, "row_max", 1, numbers, number, floats)                                                \
  X(row_min, "row_min", 1, numbers, number, floats)

// What a node computes. An enum rather than strings, so that a renderer's switch is
// checked by the compiler (-Wswitch) when a kind is added.
#define KILN_DETAIL_KIND_ENUM(kind, name, arity, operands, result, types) kind,
enum class Kind : std::uint8_t { KILN_CODEGEN_NODE_KINDS(KILN_DETAIL_KIND_ENUM) };
#undef KILN_DETAIL_KIND_ENUM

enum class Operands : std::uint8_t { none, numbers, masks, select };
enum class Result : std::uint8_t { given, number, mask, branches };
enum class Types : std::uint8_t { any, floats, integers };
struct KindInfo {
  std::string_view name;
  int arity;
  Operands operands;
  Result result;
  Types types;
};

#define KILN_DETAIL_KIND_INFO(kind, name, arity, operands, result, types) \
  KindInfo{name, arity, Operands::operands, Result::result, Types::types},
inline constexpr KindInfo kind_infos[] = {KILN_CODEGEN_NODE_KINDS(KILN_DETAIL_KIND_INFO)};
#undef KILN_DETAIL_KIND_INFO
inline constexpr std::size_t kind_count = std::size(kind_infos);

constexpr const KindInfo& kind_info(Kind k) { return kind_infos[static_cast<std::size_t>(k)]; }
constexpr std::string_view kind_name(Kind k) { return kind_info(k).name; }
// How many arguments a kind takes.
constexpr int kind_arity(Kind k) { return kind_info(k).arity; }
// Whether a kind reduces along a row program's rows.
constexpr bool is_row_reduction(Kind k) { return k == Kind::row_sum || k == Kind::row_max || k == Kind::row_min; }

struct Node;
using NodePtr = std::shared_ptr<const Node>;

// One immutable node; trees share subtrees (a formula that uses a value twice points at it twice).
struct Node {
  Kind kind;
  bool mask = false;  // the value is a bool
  std::vector<NodePtr> args;
  double value = 0;  // Kind::constant
  int index = 0;     // Kind::input, Kind::param
};

inline NodePtr make_input(int index, bool mask = false) {
  KILN_CHECK(index >= 0, "codegen: input index {} is negative", index);
  return std::make_shared<const Node>(Node{Kind::input, mask, {}, 0, index});
}
// A scalar operand whose value is given when the program runs (kiln/codegen/program.hpp):
// x * 0.5 and x * 0.7 are one program with different parameters, so one kernel.
inline NodePtr make_param(int index) {
  KILN_CHECK(index >= 0, "codegen: parameter index {} is negative", index);
  return std::make_shared<const Node>(Node{Kind::param, false, {}, 0, index});
}
inline NodePtr make_constant(double value) {
  return std::make_shared<const Node>(Node{Kind::constant, false, {}, value, 0});
}
// An operation node; checks the arity and that masks go where masks belong, so that a
// renderer can trust any tree it is given.
inline NodePtr make_node(Kind kind, std::vector<NodePtr> args) {
  const std::string_view name = kind_name(kind);
  KILN_CHECK(kind != Kind::input && kind != Kind::constant && kind != Kind::param,
             "codegen: use make_input / make_constant / make_param for {}", name);
  KILN_CHECK(static_cast<int>(args.size()) == kind_arity(kind), "codegen: {} takes {} arguments, got {}", name,
             kind_arity(kind), args.size());
  for (const NodePtr& a : args) KILN_CHECK(a != nullptr, "codegen: {} got a null argument", name);
  const KindInfo& info = kind_info(kind);
  switch (info.operands) {
    case Operands::select:
      KILN_CHECK(args[0]->mask && args[1]->mask == args[2]->mask,
                 "codegen: select takes a mask and two values of the same kind");
      break;
    case Operands::masks:
      for (const NodePtr& a : args) KILN_CHECK(a->mask, "codegen: {} takes masks", name);
      break;
    case Operands::numbers:
      for (const NodePtr& a : args) KILN_CHECK(!a->mask, "codegen: {} takes numbers, not masks", name);
      break;
    case Operands::none: break;
  }
  const bool mask = info.result == Result::mask || (info.result == Result::branches && args[1]->mask);
  return std::make_shared<const Node>(Node{kind, mask, std::move(args), 0, 0});
}

// A canonical text of the tree's structure: equal for trees that compute the same thing
// the same way (however their subtrees are shared), so kernels can be cached by it. Each
// distinct subtree is listed once, in post-order, arguments referring to earlier entries:
// "in0;c0.5;mul(0,1)" is in0 * 0.5. Linear in the number of nodes, not in the expanded tree.
inline std::string structural_key(const NodePtr& root) {
  std::string key;
  std::unordered_map<const Node*, int> id_of_node;
  std::unordered_map<std::string, int> id_of_entry;
  auto visit = [&](auto& self, const Node& n) -> int {
    if (auto it = id_of_node.find(&n); it != id_of_node.end()) return it->second;
    std::string entry;
    if (n.kind == Kind::input) entry = fmt::format("in{}{}", n.index, n.mask ? "b" : "");
    else if (n.kind == Kind::param) entry = fmt::format("p{}", n.index);
    else if (n.kind == Kind::constant) entry = fmt::format("c{}", n.value);  // shortest exact form; -0 and 0 differ
    else {
      entry = fmt::format("{}(", kind_name(n.kind));
      for (std::size_t i = 0; i < n.args.size(); ++i)
        entry += fmt::format("{}{}", i ? "," : "", self(self, *n.args[i]));
      entry += ')';
    }
    auto [it, added] = id_of_entry.emplace(std::move(entry), static_cast<int>(id_of_entry.size()));
    if (added) key += (key.empty() ? "" : ";") + it->first;
    id_of_node.emplace(&n, it->second);
    return it->second;
  };
  visit(visit, *root);
  return key;
}

// How many operands the kernel reads: one more than the largest input index.
inline int input_count(const NodePtr& root) {
  int count = 0;
  std::unordered_set<const Node*> seen;
  auto visit = [&](auto& self, const Node& n) -> void {
    if (!seen.insert(&n).second) return;
    if (n.kind == Kind::input) count = std::max(count, n.index + 1);
    for (const NodePtr& a : n.args) self(self, *a);
  };
  visit(visit, *root);
  return count;
}

// ---------------------------------------------------------------- Expr and Mask
// Symbolic scalars offering exactly the array interface kiln::fn calls (x.exp(),
// a.max(b), mask.select(a, b), T::Constant, ...), so that each catalogue formula,
// instantiated with them, builds its own tree. No simplification happens: a formula's
// `dy * 0` stays, since it is NaN for NaN dy.
class Mask;

class Expr {
 public:
  using Scalar = Expr;  // so fn::scalar_t<Expr> is Expr, and S<T>(0.5) is a constant

  Expr(double value) : node_(make_constant(value)) {}  // implicit, so that x * 2.0 reads naturally
  explicit Expr(NodePtr node) : node_(std::move(node)) {
    KILN_CHECK(node_ != nullptr && !node_->mask, "codegen: an Expr needs a numeric node");
  }
  static Expr input(int index) { return Expr(make_input(index)); }
  static Expr param(int index) { return Expr(make_param(index)); }

  // What kiln::fn expects of an array type: one symbolic element.
  static Expr Constant(std::int64_t, const Expr& value) { return value; }
  static constexpr std::int64_t size() { return 1; }
  Expr eval() const { return *this; }

  Expr exp() const { return unary(Kind::exp); }
  Expr log() const { return unary(Kind::log); }
  Expr log1p() const { return unary(Kind::log1p); }
  Expr expm1() const { return unary(Kind::expm1); }
  Expr sqrt() const { return unary(Kind::sqrt); }
  Expr abs() const { return unary(Kind::abs); }
  Expr sin() const { return unary(Kind::sin); }
  Expr cos() const { return unary(Kind::cos); }
  Expr tan() const { return unary(Kind::tan); }
  Expr tanh() const { return unary(Kind::tanh); }
  Expr erf() const { return unary(Kind::erf); }
  Expr floor() const { return unary(Kind::floor); }
  Expr ceil() const { return unary(Kind::ceil); }
  Expr rint() const { return unary(Kind::round_even); }
  // NaN handling is the caller's, as for the CPU's Simd (kiln::fn::max checks isNaN first).
  Expr max(const Expr& o) const { return binary(Kind::max, o); }
  Expr min(const Expr& o) const { return binary(Kind::min, o); }
  Expr pow(const Expr& e) const { return binary(Kind::pow, e); }
  Expr atan2(const Expr& x) const { return binary(Kind::atan2, x); }
  Mask isNaN() const;
  Mask isInf() const;

  const NodePtr& node() const { return node_; }

  friend Expr operator+(const Expr& a, const Expr& b) { return a.binary(Kind::add, b); }
  friend Expr operator-(const Expr& a, const Expr& b) { return a.binary(Kind::sub, b); }
  friend Expr operator*(const Expr& a, const Expr& b) { return a.binary(Kind::mul, b); }
  friend Expr operator/(const Expr& a, const Expr& b) { return a.binary(Kind::div, b); }
  friend Expr operator-(const Expr& a) { return a.unary(Kind::neg); }
  friend Mask operator<(const Expr& a, const Expr& b);
  friend Mask operator<=(const Expr& a, const Expr& b);
  friend Mask operator>(const Expr& a, const Expr& b);
  friend Mask operator>=(const Expr& a, const Expr& b);
  friend Mask operator==(const Expr& a, const Expr& b);
  friend Mask operator!=(const Expr& a, const Expr& b);

 private:
  Expr unary(Kind k) const { return Expr(make_node(k, {node_})); }
  Expr binary(Kind k, const Expr& o) const { return Expr(make_node(k, {node_, o.node_})); }
  NodePtr node_;
};

// A symbolic bool: comparisons, isNaN/isInf, and Bool tensors' elements.
class Mask {
 public:
  explicit Mask(NodePtr node) : node_(std::move(node)) {
    KILN_CHECK(node_ != nullptr && node_->mask, "codegen: a Mask needs a boolean node");
  }
  static Mask input(int index) { return Mask(make_input(index, true)); }

  Mask eval() const { return *this; }
  Expr select(const Expr& a, const Expr& b) const { return Expr(make_node(Kind::select, {node_, a.node(), b.node()})); }
  Mask select(const Mask& a, const Mask& b) const { return Mask(make_node(Kind::select, {node_, a.node_, b.node_})); }

  const NodePtr& node() const { return node_; }

  friend Mask operator&&(const Mask& a, const Mask& b) { return a.binary(Kind::logical_and, b); }
  friend Mask operator||(const Mask& a, const Mask& b) { return a.binary(Kind::logical_or, b); }
  friend Mask operator!=(const Mask& a, const Mask& b) { return a.binary(Kind::logical_xor, b); }  // xor
  friend Mask operator!(const Mask& a) { return Mask(make_node(Kind::logical_not, {a.node_})); }

 private:
  Mask binary(Kind k, const Mask& o) const { return Mask(make_node(k, {node_, o.node_})); }
  NodePtr node_;
};

inline Mask Expr::isNaN() const { return Mask(make_node(Kind::isnan, {node_})); }
inline Mask Expr::isInf() const { return Mask(make_node(Kind::isinf, {node_})); }
inline Mask operator<(const Expr& a, const Expr& b) { return Mask(make_node(Kind::lt, {a.node_, b.node_})); }
inline Mask operator<=(const Expr& a, const Expr& b) { return Mask(make_node(Kind::le, {a.node_, b.node_})); }
inline Mask operator>(const Expr& a, const Expr& b) { return Mask(make_node(Kind::gt, {a.node_, b.node_})); }
inline Mask operator>=(const Expr& a, const Expr& b) { return Mask(make_node(Kind::ge, {a.node_, b.node_})); }
inline Mask operator==(const Expr& a, const Expr& b) { return Mask(make_node(Kind::eq, {a.node_, b.node_})); }
inline Mask operator!=(const Expr& a, const Expr& b) { return Mask(make_node(Kind::ne, {a.node_, b.node_})); }

// ---------------------------------------------------------------- tracing
namespace detail {

template <class Op> void check_trace_domain(ScalarType t) {
  using ops::Domain;
  if constexpr (Op::domain == Domain::float_only)
    KILN_CHECK(is_float(t), "{}: expected a float type, got {}", Op::name, scalar_type_name(t));
  else if constexpr (Op::domain == Domain::numeric)
    KILN_CHECK(t != ScalarType::boolean, "{}: expected a float or integer type, got {}", Op::name, scalar_type_name(t));
  else
    KILN_CHECK(t == ScalarType::boolean, "{}: expected bool, got {}", Op::name, scalar_type_name(t));
}
inline void check_grad_type(std::string_view op, ScalarType t) {
  KILN_CHECK(is_float(t), "{}: gradients are traced for float types only, got {}", op, scalar_type_name(t));
}

// Div, Rem and Pow take an `if constexpr (std::is_integral_v<T>)` branch for integers,
// which a symbolic T cannot follow: for integer trees they become one node each, whose
// renderings mirror those branches (see the helpers in src/codegen/glsl_helpers.hpp).
template <class Op> constexpr bool has_integer_branch =
    std::is_same_v<Op, ops::Div> || std::is_same_v<Op, ops::Rem> || std::is_same_v<Op, ops::Pow>;
template <class Op> constexpr Kind integer_kind() {
  if constexpr (std::is_same_v<Op, ops::Div>) return Kind::int_div;
  else if constexpr (std::is_same_v<Op, ops::Rem>) return Kind::int_rem;
  else return Kind::int_pow;
}

}  // namespace detail

// The tree of Op::apply(in0) in type t (Op::apply(Mask in0) for Bool ops).
template <class Op> NodePtr trace_unary(ScalarType t) {
  detail::check_trace_domain<Op>(t);
  if constexpr (Op::domain == ops::Domain::boolean) return Op::apply(Mask::input(0)).node();
  else return Op::apply(Expr::input(0)).node();
}

// The tree of Op::apply(in0, in1) in type t; with `scalar_rhs`, of Op::apply(in0, p0), the
// right operand a parameter (binary_scalar: one program for every scalar). Bool ops take
// tensors only: a bool scalar is a one-element tensor.
template <class Op> NodePtr trace_binary(ScalarType t, bool scalar_rhs = false) {
  detail::check_trace_domain<Op>(t);
  if constexpr (Op::domain == ops::Domain::boolean) {
    KILN_CHECK(!scalar_rhs, "{}: a bool op takes no scalar parameter; pass a one-element tensor", Op::name);
    return Op::apply(Mask::input(0), Mask::input(1)).node();
  } else {
    const Expr rhs = scalar_rhs ? Expr::param(0) : Expr::input(1);
    if constexpr (detail::has_integer_branch<Op>) {
      if (is_integer(t)) return make_node(detail::integer_kind<Op>(), {make_input(0), rhs.node()});
    }
    return Op::apply(Expr::input(0), rhs).node();
  }
}

// The tree of Op::grad(x = in0, y = in1, dy = in2): dL/dx.
template <class Op> NodePtr trace_unary_grad(ScalarType t) {
  detail::check_trace_domain<Op>(t);
  detail::check_grad_type(Op::name, t);
  return Op::grad(Expr::input(0), Expr::input(1), Expr::input(2)).node();
}

// The tree of Op::grad_lhs / grad_rhs(a = in0, b = in1, y = in2, dy = in3).
template <class Op, ops::Operand side> NodePtr trace_binary_grad(ScalarType t) {
  detail::check_trace_domain<Op>(t);
  detail::check_grad_type(Op::name, t);
  const Expr a = Expr::input(0), b = Expr::input(1), y = Expr::input(2), dy = Expr::input(3);
  if constexpr (side == ops::Operand::lhs) return Op::grad_lhs(a, b, y, dy).node();
  else return Op::grad_rhs(a, b, y, dy).node();
}

}  // namespace kiln::codegen
