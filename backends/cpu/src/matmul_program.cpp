// Cpu::matmul_program: a @ b with an elementwise program applied to the product inside the
// GEMM, as oneDNN post-ops (post_ops.hpp): the kernel adds the bias, applies the activation or
// adds the residual to each block of the product while it is in registers, so the product is
// never written and read back. A binary step's tensor is the product's shape, one row [1, n]
// or one value. For any other program, operand layout or dtype it returns nothing, and the
// caller (Fusion<Cpu>) runs the product and the program apart.
#if KILN_CPU_ONEDNN
#include "gemm.hpp"
#include "onednn.hpp"
#include "post_ops.hpp"

#include "kiln/ops/matmul.hpp"

#include <bit>
#include <map>
#include <mutex>

namespace kiln::cpu {
namespace {

using dnnl::memory;

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
  // f32 only, the product and every input f32, and nothing empty.
  if (a.dtype != DType::f32 || product.numel() == 0 || shape.k == 0) return {};
  for (const Primitive& x : inputs)
    if (x.dtype != DType::f32 || broadcast_shapes("matmul_program", x.shape, product) != product) return {};
  const auto chain = cpu::post_op_chain(program, params);
  if (!chain) return {};
  std::span<const PostOp> post_ops = *chain;

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
  // A row [n] added first (a linear layer's bias) is the matmul's bias argument rather than a
  // binary post-op, which oneDNN's kernels apply more cheaply: on a 2-core Xeon VM,
  // [4096, 256] @ [256, 1024] + bias, relu took 6.8-7.2 ms this way, 7.5-7.8 with a post-op.
  const CpuTensor* bias = nullptr;
  const memory::desc bias_desc({1, n}, memory::data_type::f32, memory::dims{n, 1});
  if (!post_ops.empty() && post_ops[0].binary && post_ops[0].alg == cpu::PostAlg::add &&
      operands[0].dims() == memory::dims{1, n}) {
    bias = &inputs[static_cast<std::size_t>(post_ops[0].input - 1)];
    post_ops = post_ops.subspan(1);
    operands.erase(operands.begin());
  }

  // The plan's key: the GEMM's sizes and layouts, the bias, and each post-op with its operand's dims.
  std::vector<std::int64_t> key{rows, n, k, pa.layout.transposed, pa.layout.ld, pb.layout.transposed, pb.layout.ld,
                                bias != nullptr};
  cpu::append_key(post_ops, operands, key);
  key.push_back(cpu::prepare_team());  // oneDNN fixes a matmul's thread count when it creates it
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
    dnnl::primitive_attr attr;
    attr.set_post_ops(cpu::to_dnnl(post_ops, operands));
    try {
      const auto desc = bias ? dnnl::matmul::desc(a_desc, b_desc, bias_desc, out_desc)
                             : dnnl::matmul::desc(a_desc, b_desc, out_desc);
      made->primitive = dnnl::matmul(dnnl::matmul::primitive_desc(desc, attr, cpu::onednn_engine()));
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
  if (bias) args.emplace(DNNL_ARG_BIAS, memory(bias_desc, cpu::onednn_engine(), f32_ptr(*bias, bias->offset)));
  std::size_t next_operand = 0;
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
#else
// The embedded build has no oneDNN: the product is computed, then the program's relu, linear
// and binary steps (each operand a row [n] or one value) are applied to it row by row in
// place; for any other program it returns nothing, and the caller runs the product and the
// program apart.
#include "internal.hpp"
#include "post_ops.hpp"

#include "kiln/ops/matmul.hpp"

#include <array>

namespace kiln {

using cpu::CpuTensor;

std::vector<Cpu::Primitive> Cpu::matmul_program(const Primitive& a, const Primitive& b, const codegen::Program& program,
                                                std::span<const Primitive> inputs, std::span<const double> params) {
  const ops::MatmulShape shape = ops::matmul_shape(a.shape, a.dtype, b.shape, b.dtype);
  const Shape product = shape.out();
  KILN_CHECK(program.inputs().size() == inputs.size() + 1 && static_cast<int>(params.size()) == program.param_count(),
             "matmul_program: the program reads {} inputs and {} parameters, given the product and {} inputs and {} "
             "parameters", program.inputs().size(), program.param_count(), inputs.size(), params.size());
  if (a.dtype != DType::f32 || b.dtype != DType::f32 || product.numel() == 0 || shape.k == 0) return {};
  const auto chain = cpu::post_op_chain(program, params);
  if (!chain || !cpu::applies(*chain)) return {};
  // At most kOperands binary steps (a bias, a residual...): their operands held here.
  constexpr std::size_t kOperands = 4;
  std::array<CpuTensor, kOperands> held;
  std::array<const float*, kOperands> operands{};
  std::array<std::int64_t, kOperands> widths{};
  std::size_t count_operands = 0;
  for (const cpu::PostOp& op : *chain) {
    if (!op.binary) continue;
    if (count_operands == kOperands) return {};
    const CpuTensor& x = inputs[static_cast<std::size_t>(op.input - 1)];
    if (x.dtype != DType::f32) return {};
    const std::int64_t count = x.numel();
    bool row = count == shape.n && x.shape.rank() >= 1 && x.shape[x.shape.rank() - 1] == shape.n;
    for (std::size_t d = 0; row && d + 1 < x.shape.rank(); ++d) row = x.shape[d] == 1;
    if (!row && count != 1) return {};
    if (broadcast_shapes("matmul_program", x.shape, product) != product) return {};
    held[count_operands] = cpu::contiguous(x);
    operands[count_operands] = held[count_operands].data<float>();
    widths[count_operands++] = count;
  }
  CpuTensor out = matmul(a, b);
  float* y = out.data<float>();
  const std::int64_t rows = out.numel() / shape.n;
  const std::span<const float* const> ops(operands.data(), count_operands);
  const std::span<const std::int64_t> op_widths(widths.data(), count_operands);
  for (std::int64_t r = 0; r < rows; ++r) cpu::apply_post_ops(*chain, y + r * shape.n, shape.n, 0, ops, op_widths);
  return {out};
}

}  // namespace kiln
#endif
