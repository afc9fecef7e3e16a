// The program chains that the CPU's kernels run as post-ops (post_ops.hpp).
#include "post_ops.hpp"

#include "program_eval.hpp"

#include "kiln/ops/elementwise.hpp"

#include <bit>
#include <memory>
#include <mutex>
#include <unordered_map>

namespace kiln::cpu {
namespace {

using codegen::Instruction;
using codegen::Kind;

// The catalogue formulas that are oneDNN eltwise steps, traced once as program trees.
struct EltwiseFormula {
  codegen::NodePtr tree;
  PostAlg alg;
  float alpha;
};
const std::vector<EltwiseFormula>& eltwise_formulas() {
  static const std::vector<EltwiseFormula> table = [] {
    const auto t = codegen::ScalarType::f32;
    return std::vector<EltwiseFormula>{
        {codegen::trace_unary<ops::Relu>(t), PostAlg::relu, 0.0f},
        {codegen::trace_unary<ops::GeluErf>(t), PostAlg::gelu_erf, 0.0f},
        {codegen::trace_unary<ops::GeluTanh>(t), PostAlg::gelu_tanh, 0.0f},
        {codegen::trace_unary<ops::Sigmoid>(t), PostAlg::logistic, 0.0f},
        {codegen::trace_unary<ops::Silu>(t), PostAlg::swish, 1.0f},
    };
  }();
  return table;
}

std::optional<PostAlg> unary_step(Kind kind) {
  switch (kind) {
    case Kind::tanh: return PostAlg::tanh;
    case Kind::exp: return PostAlg::exp;
    case Kind::abs: return PostAlg::abs;
    case Kind::sqrt: return PostAlg::sqrt;
    case Kind::log: return PostAlg::log;
    default: return std::nullopt;
  }
}

std::optional<PostAlg> binary_step(Kind kind) {
  switch (kind) {
    case Kind::add: return PostAlg::add;
    case Kind::sub: return PostAlg::sub;
    case Kind::mul: return PostAlg::mul;
    case Kind::div: return PostAlg::div;
    case Kind::max: return PostAlg::max;
    case Kind::min: return PostAlg::min;
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
    out.push_back({false, PostAlg::linear, -1.0f, 0.0f, 0});
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
      out.push_back({false, PostAlg::linear, -1.0f, 0.0f, 0});
      out.push_back({true, PostAlg::add, 0.0f, 0.0f, other.index});
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
    case Kind::add: out.push_back({false, PostAlg::linear, 1.0f, v, 0}); return true;
    case Kind::mul: out.push_back({false, PostAlg::linear, v, 0.0f, 0}); return true;
    case Kind::sub:
      out.push_back({false, PostAlg::linear, lhs_chain ? 1.0f : -1.0f, lhs_chain ? -v : v, 0});
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
    if (!merged.empty() && !op.binary && op.alg == PostAlg::linear && !merged.back().binary &&
        merged.back().alg == PostAlg::linear) {
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

std::optional<std::vector<PostOp>> chain_of(const codegen::Program& program, std::span<const double> params) {
  if (program.type() != codegen::ScalarType::f32 || program.outputs().size() != 1 ||
      program.outputs()[0].dtype != DType::f32 || program.reduces_rows())
    return std::nullopt;
  for (const DType d : program.inputs())
    if (d != DType::f32) return std::nullopt;
  std::vector<PostOp> ops;
  if (!chain(program.code(), program.output_slots()[0], params, ops) || !merge_linear_steps(ops)) return std::nullopt;
  return ops;
}

}  // namespace

std::shared_ptr<const std::vector<PostOp>> post_op_chain(const codegen::Program& program,
                                                         std::span<const double> params) {
  const auto made = [&]() -> std::shared_ptr<const std::vector<PostOp>> {
    auto ops = chain_of(program, params);
    return ops ? std::make_shared<const std::vector<PostOp>>(std::move(*ops)) : nullptr;
  };
  // A program without parameters is recognized once per structure (its id): a network's
  // epilogues come back on every call. With parameters (scalars that may change every call)
  // it is recognized each time.
  if (!params.empty()) return made();
  static std::mutex mutex;
  static auto& known = *new std::unordered_map<std::uint64_t, std::shared_ptr<const std::vector<PostOp>>>();
  {
    const std::lock_guard lock(mutex);
    if (const auto it = known.find(program.id()); it != known.end()) return it->second;
  }
  auto ops = made();
  const std::lock_guard lock(mutex);
  return known.emplace(program.id(), std::move(ops)).first->second;
}

#if KILN_CPU_ONEDNN
namespace {

dnnl::algorithm dnnl_algorithm(PostAlg alg) {
  using dnnl::algorithm;
  switch (alg) {
    case PostAlg::relu: return algorithm::eltwise_relu;
    case PostAlg::gelu_erf: return algorithm::eltwise_gelu_erf;
    case PostAlg::gelu_tanh: return algorithm::eltwise_gelu_tanh;
    case PostAlg::logistic: return algorithm::eltwise_logistic;
    case PostAlg::swish: return algorithm::eltwise_swish;
    case PostAlg::tanh: return algorithm::eltwise_tanh;
    case PostAlg::exp: return algorithm::eltwise_exp;
    case PostAlg::abs: return algorithm::eltwise_abs;
    case PostAlg::sqrt: return algorithm::eltwise_sqrt;
    case PostAlg::log: return algorithm::eltwise_log;
    case PostAlg::linear: return algorithm::eltwise_linear;
    case PostAlg::add: return algorithm::binary_add;
    case PostAlg::sub: return algorithm::binary_sub;
    case PostAlg::mul: return algorithm::binary_mul;
    case PostAlg::div: return algorithm::binary_div;
    case PostAlg::max: return algorithm::binary_max;
    case PostAlg::min: return algorithm::binary_min;
  }
  return algorithm::undef;
}

}  // namespace

dnnl::post_ops to_dnnl(std::span<const PostOp> ops, std::span<const dnnl::memory::desc> operands) {
  dnnl::post_ops out;
  std::size_t next = 0;
  for (const PostOp& op : ops) {
    if (op.binary) out.append_binary(dnnl_algorithm(op.alg), operands[next++]);
    else out.append_eltwise(1.0f, dnnl_algorithm(op.alg), op.alpha, op.beta);
  }
  return out;
}

void append_key(std::span<const PostOp> ops, std::span<const dnnl::memory::desc> operands,
                std::vector<std::int64_t>& key) {
  std::size_t next = 0;
  for (const PostOp& op : ops) {
    key.insert(key.end(), {op.binary, static_cast<std::int64_t>(op.alg), std::bit_cast<std::int32_t>(op.alpha),
                           std::bit_cast<std::int32_t>(op.beta)});
    if (!op.binary) continue;
    for (const auto d : operands[next++].dims()) key.push_back(d);
  }
}
#endif

bool applies(std::span<const PostOp> ops) {
  for (const PostOp& op : ops)
    if (!op.binary && op.alg != PostAlg::relu && op.alg != PostAlg::linear) return false;
  return true;
}

void apply_post_ops(std::span<const PostOp> ops, float* y, std::int64_t count, std::int64_t column,
                    std::span<const float* const> operands, std::span<const std::int64_t> operand_width) {
  std::size_t next = 0;
  for (const PostOp& op : ops) {
    if (!op.binary) {
      if (op.alg == PostAlg::relu) {
        for (std::int64_t i = 0; i < count; ++i) y[i] = y[i] > 0.0f ? y[i] : 0.0f;
      } else {
        const float alpha = op.alpha, beta = op.beta;
        for (std::int64_t i = 0; i < count; ++i) y[i] = alpha * y[i] + beta;
      }
      continue;
    }
    const bool row = operand_width[next] > 1;
    const float* b = operands[next++] + (row ? column : 0);
    const auto each = [&](auto fn) {
      if (row) {
        for (std::int64_t i = 0; i < count; ++i) y[i] = fn(y[i], b[i]);
      } else {
        const float v = b[0];
        for (std::int64_t i = 0; i < count; ++i) y[i] = fn(y[i], v);
      }
    };
    switch (op.alg) {
      case PostAlg::add: each([](float u, float v) { return u + v; }); break;
      case PostAlg::sub: each([](float u, float v) { return u - v; }); break;
      case PostAlg::mul: each([](float u, float v) { return u * v; }); break;
      case PostAlg::div: each([](float u, float v) { return u / v; }); break;
      case PostAlg::max: each([](float u, float v) { return u > v ? u : v; }); break;
      case PostAlg::min: each([](float u, float v) { return u < v ? u : v; }); break;
      default: break;
    }
  }
}

}  // namespace kiln::cpu
