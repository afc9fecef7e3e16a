// Codegen: structural keys, by which GPU backends cache their kernels: equal for the same
// computation (however subtrees are shared), different for different ones.
#include <kiln/codegen/expr.hpp>

#include <gtest/gtest.h>

#include <map>
#include <string>

namespace {

namespace ops = kiln::ops;
using kiln::codegen::Expr;
using kiln::codegen::NodePtr;
using kiln::codegen::ScalarType;
using kiln::codegen::structural_key;

template <class Op> ScalarType forward_type() {
  return Op::domain == ops::Domain::boolean ? ScalarType::boolean : ScalarType::f32;
}

TEST(CodegenKey, TracingTwiceGivesTheSameKey) {
#define KILN_CHECK_OP(Op)                                                                            \
  EXPECT_EQ(structural_key(kiln::codegen::trace_unary<ops::Op>(forward_type<ops::Op>())),            \
            structural_key(kiln::codegen::trace_unary<ops::Op>(forward_type<ops::Op>())))            \
      << #Op;
  KILN_UNARY_OPS(KILN_CHECK_OP)
#undef KILN_CHECK_OP
#define KILN_CHECK_OP(Op)                                                                            \
  EXPECT_EQ(structural_key(kiln::codegen::trace_binary<ops::Op>(forward_type<ops::Op>())),           \
            structural_key(kiln::codegen::trace_binary<ops::Op>(forward_type<ops::Op>())))           \
      << #Op;
  KILN_BINARY_OPS(KILN_CHECK_OP)
#undef KILN_CHECK_OP
}

TEST(CodegenKey, DifferentOpsGetDifferentKeys) {
  std::map<std::string, std::string> op_of_key;
  auto add = [&](const NodePtr& tree, const std::string& op) {
    const auto [it, added] = op_of_key.emplace(structural_key(tree), op);
    EXPECT_TRUE(added) << op << " has the key of " << it->second << ": " << it->first;
  };
#define KILN_ADD_OP(Op) add(kiln::codegen::trace_unary<ops::Op>(forward_type<ops::Op>()), #Op);
  KILN_UNARY_OPS(KILN_ADD_OP)
#undef KILN_ADD_OP
#define KILN_ADD_OP(Op) add(kiln::codegen::trace_binary<ops::Op>(forward_type<ops::Op>()), #Op);
  KILN_BINARY_OPS(KILN_ADD_OP)
#undef KILN_ADD_OP
  // Integer Div, Rem and Pow are other trees than the float ones.
  add(kiln::codegen::trace_binary<ops::Div>(ScalarType::i32), "Div i32");
  add(kiln::codegen::trace_binary<ops::Rem>(ScalarType::i32), "Rem i32");
  add(kiln::codegen::trace_binary<ops::Pow>(ScalarType::i32), "Pow i32");
  EXPECT_EQ(op_of_key.size(), static_cast<std::size_t>(ops::unary_op_count + ops::binary_op_count + 3));
}

// The key is the structure, not the op: gradients with the same formula share it, and a
// tree's type is not part of it (backends key their cache by (key, type)).
TEST(CodegenKey, TheKeyIsTheStructure) {
  using kiln::codegen::trace_unary_grad;
  EXPECT_EQ(structural_key(trace_unary_grad<ops::Floor>(ScalarType::f32)),
            structural_key(trace_unary_grad<ops::Ceil>(ScalarType::f32)));
  EXPECT_NE(structural_key(trace_unary_grad<ops::Exp>(ScalarType::f32)),
            structural_key(trace_unary_grad<ops::Log>(ScalarType::f32)));
  EXPECT_EQ(structural_key(kiln::codegen::trace_unary<ops::Exp>(ScalarType::f32)),
            structural_key(kiln::codegen::trace_unary<ops::Exp>(ScalarType::f64)));
  EXPECT_EQ(structural_key(kiln::codegen::trace_binary<ops::Mul>(ScalarType::f32)), "in0;in1;mul(0,1)");
  EXPECT_EQ(structural_key(kiln::codegen::trace_unary<ops::Relu>(ScalarType::f32)), "in0;c0;lt(0,1);select(2,1,0)");
}

TEST(CodegenKey, SharingDoesNotChangeTheKey) {
  const Expr x = Expr::input(0);
  const Expr shared = x * x;
  const Expr separate = Expr::input(0) * Expr::input(0);
  EXPECT_EQ(structural_key(shared.node()), structural_key(separate.node()));
  EXPECT_EQ(structural_key((shared + shared).node()), structural_key(((x * x) + (Expr::input(0) * x)).node()));
}

TEST(CodegenKey, ConstantsInputsAndMasksAreDistinguished) {
  const Expr x = Expr::input(0);
  auto key = [](const Expr& e) { return structural_key(e.node()); };
  EXPECT_NE(key(x * 0.5), key(x * 0.25));
  EXPECT_NE(key(x * 0.0), key(x * -0.0));
  EXPECT_NE(key(x * 0.1), key(x * 0.10000000000000002));  // the next double
  EXPECT_NE(key(x + Expr::input(1)), key(Expr::input(1) + x));
  EXPECT_NE(key(x - Expr::input(1)), key(x + Expr::input(1)));
  EXPECT_NE(structural_key(kiln::codegen::Mask::input(0).node()), key(x));
}

// Each distinct subtree is listed once, so a deeply shared tree has a short key.
TEST(CodegenKey, KeysAreLinearInTheDistinctNodes) {
  Expr x = Expr::input(0);
  for (int i = 0; i < 64; ++i) x = x * x;  // 2^64 leaves when expanded
  const std::string key = structural_key(x.node());
  EXPECT_LT(key.size(), 64u * 16u);
  EXPECT_EQ(kiln::codegen::input_count(x.node()), 1);
}

}  // namespace
