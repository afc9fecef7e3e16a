// Cpu::matmul_program: a @ b with an elementwise program applied to the product inside the
// GEMM, as oneDNN post-ops: the kernel adds the bias, applies the activation or adds the
// residual to each block of the product while it is in registers, so the product is never
// written and read back. Programs that are a chain of such steps from the product (input 0)
// run this way; for any other program, operand layout or dtype it returns nothing, and the
// caller (Fusion<Cpu>) runs the product and the program apart.
//
// A chain step is one of: a binary op (add, sub, mul, div, max, min) with a tensor input that
// is the product's shape, one row [1, n] or one value; add, sub or mul with a scalar (a
// parameter or a constant: oneDNN's linear step); and relu, gelu, gelu_tanh, sigmoid, silu,
// tanh, exp, abs, sqrt, log and neg of the chain so far.
#include "gemm.hpp"
#include "onednn.hpp"
#include "program_eval.hpp"

#include "kiln/ops/elementwise.hpp"
#include "kiln/ops/matmul.hpp"

#include <bit>
#include <map>
#include <mutex>

namespace kiln::cpu {
namespace {

using codegen::Instruction;
using codegen::Kind;
using dnnl::algorithm;
using dnnl::memory;

// One post-op: an eltwise step (alg, alpha, beta) or a binary step with program input `input`.
struct PostOp {
  bool binary = false;
  algorithm alg = algorithm::undef;
  float alpha = 0, beta = 0;
  int input = 0;
};

// The catalogue formulas that are oneDNN eltwise steps, traced once as program trees.
struct EltwiseFormula {
  codegen::NodePtr tree;
  algorithm alg;
  float alpha;
};
const std::vector<EltwiseFormula>& eltwise_formulas() {
  static const std::vector<EltwiseFormula> table = [] {
    const auto t = codegen::ScalarType::f32;
    return std::vector<EltwiseFormula>{
        {codegen::trace_unary<ops::Relu>(t), algorithm::eltwise_relu, 0.0f},
        {codegen::trace_unary<ops::GeluErf>(t), algorithm::eltwise_gelu_erf, 0.0f},
        {codegen::trace_unary<ops::GeluTanh>(t), algorithm::eltwise_gelu_tanh, 0.0f},
        {codegen::trace_unary<ops::Sigmoid>(t), algorithm::eltwise_logistic, 0.0f},
        {codegen::trace_unary<ops::Silu>(t), algorithm::eltwise_swish, 1.0f},
    };
  }();
  return table;
}

std::optional<algorithm> unary_step(Kind kind) {
  switch (kind) {
    case Kind::tanh: return algorithm::eltwise_tanh;
    case Kind::exp: return algorithm::eltwise_exp;
    case Kind::abs: return algorithm::eltwise_abs;
    case Kind::sqrt: return algorithm::eltwise_sqrt;
    case Kind::log: return algorithm::eltwise_log;
    default: return std::nullopt;
  }
}

std::optional<algorithm> binary_step(Kind kind) {
  switch (kind) {
    case Kind::add: return algorithm::binary_add;
    case Kind::sub: return algorithm::binary_sub;
    case Kind::mul: return algorithm::binary_mul;
    case Kind::div: return algorithm::binary_div;
    case Kind::max: return algorithm::binary_max;
    case Kind::min: return algorithm::binary_min;
    default: return std::nullopt;
  }
}

// The post-ops that compute step s of `code` from the product (input 0), appended to `out`;
// false where s is not such a chain.
bool chain(std::span<const Instruction> code, std::uint32_t s, std::span<const double> params,
           std::vector<PostOp>& out) {
  const Instruction& step = code[s];
  if (step.mask) return false;
  if (step.kind == Kind::input) return step.index == 0;
  for (const EltwiseFormula& f : eltwise_formulas()) {
    std::array<std::int64_t, 4> bind{-1, -1, -1, -1};
    std::vector<std::uint32_t> inside;
    if (f.tree->kind != step.kind || !program_eval::matches(*f.tree, s, code, bind, inside) || bind[0] < 0) continue;
    if (!chain(code, static_cast<std::uint32_t>(bind[0]), params, out)) return false;
    out.push_back({false, f.alg, f.alpha, 0.0f, 0});
    return true;
  }
  if (step.kind == Kind::neg) {
    if (!chain(code, step.args[0], params, out)) return false;
    out.push_back({false, algorithm::eltwise_linear, -1.0f, 0.0f, 0});
    return true;
  }
  if (const auto alg = unary_step(step.kind)) {
    if (!chain(code, step.args[0], params, out)) return false;
    out.push_back({false, *alg, 0.0f, 0.0f, 0});
    return true;
  }
  const auto alg = binary_step(step.kind);
  if (!alg) return false;
  // Which argument is the chain: the other is a tensor input (not the product), a parameter
  // or a constant.
  const auto operand = [&](std::uint32_t a) {
    const Kind k = code[a].kind;
    return (k == Kind::input && code[a].index > 0) || k == Kind::param || k == Kind::constant;
  };
  const bool lhs_chain = operand(step.args[1]), rhs_chain = !lhs_chain && operand(step.args[0]);
  if (!lhs_chain && !rhs_chain) return false;
  const Instruction& other = code[lhs_chain ? step.args[1] : step.args[0]];
  if (!chain(code, lhs_chain ? step.args[0] : step.args[1], params, out)) return false;
  if (other.kind == Kind::input) {
    if (rhs_chain && step.kind == Kind::div) return false;
    if (rhs_chain && step.kind == Kind::sub) {  // x - chain is (-chain) + x
      out.push_back({false, algorithm::eltwise_linear, -1.0f, 0.0f, 0});
      out.push_back({true, algorithm::binary_add, 0.0f, 0.0f, other.index});
      return true;
    }
    out.push_back({true, *alg, 0.0f, 0.0f, other.index});
    return true;
  }
  // A scalar: oneDNN's linear step alpha * x + beta, where it computes what the program does
  // (a sum or product of two floats, rounded once).
  const double c = other.kind == Kind::param ? params[static_cast<std::size_t>(other.index)] : other.value;
  const auto v = static_cast<float>(c);
  switch (step.kind) {
    case Kind::add: out.push_back({false, algorithm::eltwise_linear, 1.0f, v, 0}); return true;
    case Kind::mul: out.push_back({false, algorithm::eltwise_linear, v, 0.0f, 0}); return true;
    case Kind::sub:
      out.push_back({false, algorithm::eltwise_linear, lhs_chain ? 1.0f : -1.0f, lhs_chain ? -v : v, 0});
      return true;
    default: return false;
  }
}

// Two linear steps in a row as one (alpha2 (alpha1 x + beta1) + beta2). oneDNN 2.6 gives
// every eltwise post-op of one algorithm in a chain the parameters of the first (measured:
// x * s + 0.5 came out as x * s * s), so a chain that still has one algorithm twice with
// other parameters is refused (false).
bool merge_linear_steps(std::vector<PostOp>& ops) {
  std::vector<PostOp> merged;
  for (const PostOp& op : ops) {
    if (!merged.empty() && !op.binary && op.alg == algorithm::eltwise_linear && !merged.back().binary &&
        merged.back().alg == algorithm::eltwise_linear) {
      PostOp& last = merged.back();
      last.beta = op.alpha * last.beta + op.beta;
      last.alpha *= op.alpha;
      continue;
    }
    merged.push_back(op);
  }
  for (std::size_t i = 0; i < merged.size(); ++i)
    for (std::size_t j = 0; j < i; ++j)
      if (!merged[i].binary && !merged[j].binary && merged[i].alg == merged[j].alg &&
          (merged[i].alpha != merged[j].alpha || merged[i].beta != merged[j].beta))
        return false;
  ops = std::move(merged);
  return true;
}

// A program input as oneDNN's second operand of a binary step over the [rows, n] product: the
// product's own shape (contiguous), one row [n] or one value, as dims and strides; nullopt
// for other shapes (a column, a partial broadcast) and layouts.
std::optional<memory::desc> binary_operand(const CpuTensor& x, const Shape& product, std::int64_t rows,
                                           std::int64_t n) {
  if (x.shape == product && x.is_contiguous()) return memory::desc({rows, n}, memory::data_type::f32, memory::dims{n, 1});
  const std::size_t r = x.shape.rank();
  for (std::size_t d = 0; d + 1 < r; ++d)
    if (x.shape[d] != 1) return std::nullopt;
  const std::int64_t last = r == 0 ? 1 : x.shape[r - 1];
  if (last != 1 && last != n) return std::nullopt;
  if (last != 1 && x.strides[r - 1] != 1) return std::nullopt;
  return memory::desc({1, last}, memory::data_type::f32, memory::dims{last, 1});
}

// A oneDNN matmul with its post-ops, cached for the process by everything that shapes it.
struct Plan {
  std::optional<dnnl::matmul> primitive;  // nullopt: oneDNN has no kernel for it
};

}  // namespace
}  // namespace kiln::cpu

namespace kiln {

using cpu::CpuTensor;

std::vector<Cpu::Primitive> Cpu::matmul_program(const Primitive& a, const Primitive& b, const codegen::Program& program,
                                                std::span<const Primitive> inputs, std::span<const double> params) {
  using cpu::PostOp;
  using dnnl::memory;
  const ops::MatmulShape shape = ops::matmul_shape(a.shape, a.dtype, b.shape, b.dtype);
  const Shape product = shape.out();
  KILN_CHECK(program.inputs().size() == inputs.size() + 1 && static_cast<int>(params.size()) == program.param_count(),
             "matmul_program: the program reads {} inputs and {} parameters, given the product and {} inputs and {} "
             "parameters", program.inputs().size(), program.param_count(), inputs.size(), params.size());
  // f32 only, one f32 output, the product and every input f32, and nothing empty.
  if (a.dtype != DType::f32 || program.type() != codegen::ScalarType::f32 || program.outputs().size() != 1 ||
      program.outputs()[0].dtype != DType::f32 || program.reduces_rows() || product.numel() == 0 || shape.k == 0)
    return {};
  for (std::size_t i = 0; i < program.inputs().size(); ++i)
    if (program.inputs()[i] != DType::f32 || (i > 0 && inputs[i - 1].dtype != DType::f32)) return {};
  for (const Primitive& x : inputs)
    if (broadcast_shapes("matmul_program", x.shape, product) != product) return {};

  std::vector<PostOp> post_ops;
  if (!cpu::chain(program.code(), program.output_slots()[0], params, post_ops)) return {};
  if (!cpu::merge_linear_steps(post_ops)) return {};

  const Shape batch(shape.batch);
  const cpu::GemmOperand pa = cpu::gemm_operand(a, batch), pb = cpu::gemm_operand(b, batch);
  if (!cpu::folds_to_one_gemm(pa, pb, shape.m)) return {};
  const std::int64_t rows = batch.numel() * shape.m, n = shape.n, k = shape.k;

  std::vector<memory::desc> operands;
  for (const PostOp& op : post_ops) {
    if (!op.binary) continue;
    auto desc = cpu::binary_operand(inputs[static_cast<std::size_t>(op.input - 1)], product, rows, n);
    if (!desc) return {};
    operands.push_back(*desc);
  }

  // The plan's key: the GEMM's sizes and layouts, and each post-op with its operand's dims.
  std::vector<std::int64_t> key{rows, n, k, pa.layout.transposed, pa.layout.ld, pb.layout.transposed, pb.layout.ld};
  std::size_t next_operand = 0;
  for (const PostOp& op : post_ops) {
    key.insert(key.end(), {op.binary, static_cast<std::int64_t>(op.alg), std::bit_cast<std::int32_t>(op.alpha),
                           std::bit_cast<std::int32_t>(op.beta)});
    if (!op.binary) continue;
    const memory::desc& d = operands[next_operand++];
    key.insert(key.end(), {d.dims()[0], d.dims()[1]});
  }
  static std::mutex mutex;
  static auto& plans = *new std::map<std::vector<std::int64_t>, std::shared_ptr<const cpu::Plan>>();
  std::shared_ptr<const cpu::Plan> plan;
  {
    const std::lock_guard lock(mutex);
    if (auto it = plans.find(key); it != plans.end()) plan = it->second;
  }
  const auto matrix = [](std::int64_t r, std::int64_t c, const cpu::GemmLayout& l) {
    return memory::desc({r, c}, memory::data_type::f32, l.transposed ? memory::dims{1, l.ld} : memory::dims{l.ld, 1});
  };
  const memory::desc a_desc = matrix(rows, k, pa.layout), b_desc = matrix(k, n, pb.layout);
  const memory::desc out_desc({rows, n}, memory::data_type::f32, memory::dims{n, 1});
  if (!plan) {
    auto made = std::make_shared<cpu::Plan>();
    dnnl::post_ops chain;
    next_operand = 0;
    for (const PostOp& op : post_ops) {
      if (op.binary) chain.append_binary(op.alg, operands[next_operand++]);
      else chain.append_eltwise(1.0f, op.alg, op.alpha, op.beta);
    }
    dnnl::primitive_attr attr;
    attr.set_post_ops(chain);
    try {
      made->primitive = dnnl::matmul(
          dnnl::matmul::primitive_desc(dnnl::matmul::desc(a_desc, b_desc, out_desc), attr, cpu::onednn_engine()));
    } catch (const dnnl::error&) {
      // No kernel for these post-ops or layouts: the caller runs the product and the program apart.
    }
    const std::lock_guard lock(mutex);
    plan = plans.emplace(key, std::move(made)).first->second;
  }
  if (!plan->primitive) return {};

  CpuTensor out = cpu::empty(product, DType::f32);
  const auto f32_ptr = [](const CpuTensor& t, std::int64_t offset) {
    return const_cast<float*>(reinterpret_cast<const float*>(t.storage->ptr)) + offset;
  };
  dnnl::stream& stream = cpu::onednn_stream();
  std::unordered_map<int, memory> args{
      {DNNL_ARG_SRC, memory(a_desc, cpu::onednn_engine(), f32_ptr(pa.view, pa.batch_offsets[0]))},
      {DNNL_ARG_WEIGHTS, memory(b_desc, cpu::onednn_engine(), f32_ptr(pb.view, pb.batch_offsets[0]))},
      {DNNL_ARG_DST, memory(out_desc, cpu::onednn_engine(), out.data<float>())}};
  next_operand = 0;
  for (std::size_t i = 0; i < post_ops.size(); ++i) {
    if (!post_ops[i].binary) continue;
    const CpuTensor& x = inputs[static_cast<std::size_t>(post_ops[i].input - 1)];
    args.emplace(DNNL_ARG_ATTR_MULTIPLE_POST_OP(static_cast<int>(i)) | DNNL_ARG_SRC_1,
                 memory(operands[next_operand++], cpu::onednn_engine(), f32_ptr(x, x.offset)));
  }
  try {
    plan->primitive->execute(stream, args);
    stream.wait();
  } catch (const dnnl::error& e) {
    KILN_FAIL("matmul_program: oneDNN failed on {} @ {}: {}", a.shape, b.shape, e.what());
  }
  return {out};
}

}  // namespace kiln
