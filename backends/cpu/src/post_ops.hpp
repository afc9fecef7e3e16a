// Elementwise programs as post-ops: the epilogues that the CPU runs inside a matmul
// (matmul_program.cpp) or a convolution (conv.cpp), as oneDNN post-ops in the full build and
// by Kiln's own kernels in the embedded one (a subset: apply_post_ops). Private to
// backends/cpu/src.
//
// A program runs as post-ops where its one f32 output is a chain of steps from input 0 (the
// product or the convolution's output), each one of: a binary op (add, sub, mul, div, max,
// min) with another input; add, sub or mul with a scalar (a parameter or a constant:
// oneDNN's linear step); relu, gelu, gelu_tanh, sigmoid, silu, tanh, exp, abs, sqrt, log and
// neg of the chain so far.
#pragma once

#include "kiln/codegen/program.hpp"

#if KILN_CPU_ONEDNN
#include <oneapi/dnnl/dnnl.hpp>
#endif

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <vector>

namespace kiln::cpu {

// A post-op's function. Eltwise: relu, gelu (erf and tanh forms), logistic (sigmoid), swish
// (x * sigmoid(alpha x)), tanh, exp, abs, sqrt, log, and linear (alpha x + beta); binary:
// add, sub, mul, div, max, min of the chain so far and an operand.
enum class PostAlg { relu, gelu_erf, gelu_tanh, logistic, swish, tanh, exp, abs, sqrt, log, linear,
                     add, sub, mul, div, max, min };

// One post-op: an eltwise step (alg, alpha, beta) or a binary step with program input `input`.
struct PostOp {
  bool binary = false;
  PostAlg alg = PostAlg::linear;
  float alpha = 0, beta = 0;
  int input = 0;
};

// The post-ops that compute `program` (f32, one f32 output, no row reductions) from its input
// 0, with `params` as its parameters' values; null where it is no such chain.
std::shared_ptr<const std::vector<PostOp>> post_op_chain(const codegen::Program& program,
                                                         std::span<const double> params);

#if KILN_CPU_ONEDNN
// The chain as oneDNN post-ops, the binary steps' operands described by `operands`, in order.
dnnl::post_ops to_dnnl(std::span<const PostOp> ops, std::span<const dnnl::memory::desc> operands);

// Appends what shapes the chain's kernel (each step and its operand's dims) to a plan's key.
void append_key(std::span<const PostOp> ops, std::span<const dnnl::memory::desc> operands,
                std::vector<std::int64_t>& key);
#endif

// Whether apply_post_ops runs every step of the chain: relu and linear steps, and binary
// steps (each operand a row of the output's width or one value).
bool applies(std::span<const PostOp> ops);

// Applies the chain to `count` values y[0..count), the columns [column, column + count) of one
// output row; operand i (of the binary steps, in order) holds `operand_width[i]` values: the
// whole row (indexed by column) or one.
void apply_post_ops(std::span<const PostOp> ops, float* y, std::int64_t count, std::int64_t column,
                    std::span<const float* const> operands, std::span<const std::int64_t> operand_width);

}  // namespace kiln::cpu
