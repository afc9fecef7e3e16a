// Elementwise programs as oneDNN post-ops: the epilogues that the CPU runs inside a matmul
// (matmul_program.cpp) or a convolution (conv.cpp). Private to backends/cpu/src.
//
// A program runs as post-ops where its one f32 output is a chain of steps from input 0 (the
// product or the convolution's output), each one of: a binary op (add, sub, mul, div, max,
// min) with another input; add, sub or mul with a scalar (a parameter or a constant:
// oneDNN's linear step); relu, gelu, gelu_tanh, sigmoid, silu, tanh, exp, abs, sqrt, log and
// neg of the chain so far.
#pragma once

#include "kiln/codegen/program.hpp"

#include <oneapi/dnnl/dnnl.hpp>

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

namespace kiln::cpu {

// One post-op: an eltwise step (alg, alpha, beta) or a binary step with program input `input`.
struct PostOp {
  bool binary = false;
  dnnl::algorithm alg = dnnl::algorithm::undef;
  float alpha = 0, beta = 0;
  int input = 0;
};

// The post-ops that compute `program` (f32, one f32 output, no row reductions) from its input
// 0, with `params` as its parameters' values; nullopt where it is no such chain.
std::optional<std::vector<PostOp>> post_op_chain(const codegen::Program& program, std::span<const double> params);

// The chain as oneDNN post-ops, the binary steps' operands described by `operands`, in order.
dnnl::post_ops to_dnnl(std::span<const PostOp> ops, std::span<const dnnl::memory::desc> operands);

// Appends what shapes the chain's kernel (each step and its operand's dims) to a plan's key.
void append_key(std::span<const PostOp> ops, std::span<const dnnl::memory::desc> operands,
                std::vector<std::int64_t>& key);

}  // namespace kiln::cpu
