// Vulkan::elementwise and Vulkan::row_program: a program's outputs are rendered to GLSL
// through the renderer table (src/codegen/glsl.hpp) and run by generated kernels: one
// elementwise kernel (kernels.cpp) writing all of them where its buffers fit the bindings,
// or, for a row program, a row kernel (codegen/row_kernel.hpp) per output.
// A program's specs are made once and kept by its id, so a repeated program traces and
// renders nothing and finds its pipeline by the spec's key. Parameters travel in the kernel's
// layout buffer, so a new scalar value compiles no new kernel and allocates no buffer.
#include "context.hpp"
#include "kernels.hpp"

#include "codegen/glsl.hpp"
#include "codegen/row_kernel.hpp"
#include "kiln/codegen/program.hpp"
#include "kiln/vulkan/backend.hpp"

#include <algorithm>
#include <mutex>
#include <unordered_map>

namespace kiln {

using vulkan::VulkanTensor;

namespace {

// The spec of outputs [first, first + count) of a program: one kernel computing them.
vulkan::ElementwiseSpec spec_of(const codegen::Program& program, std::size_t first, std::size_t count) {
  vulkan::count_render();
  codegen::ElementwiseKernel k = codegen::program_kernel(codegen::glsl(), program, first, count);
  vulkan::ElementwiseSpec spec;
  spec.inputs = std::move(k.inputs);
  spec.outputs = std::move(k.outputs);
  spec.helpers = std::move(k.helpers);
  spec.raw_bits = k.raw_bits;
  spec.params = k.params;
  spec.param_type = k.param_type;
  return spec;
}

// A program's inputs, as the kernels take them.
std::vector<const VulkanTensor*> operands(std::span<const Vulkan::Primitive> inputs) {
  std::vector<const VulkanTensor*> all;
  all.reserve(inputs.size());
  for (const Vulkan::Primitive& x : inputs) all.push_back(&x);
  return all;
}

// What a Vulkan kernel can take: its dtypes on this device, its inputs within the buffer
// bindings, its outputs within a spec slot.
void check_kernel(std::string_view op, const codegen::Program& program, std::span<const Vulkan::Primitive> inputs) {
  KILN_CHECK(inputs.size() <= Vulkan::max_program_inputs,
             "{}: the Vulkan backend runs programs of up to {} inputs (a kernel binds at most 8 buffers), got {} ({})",
             op, Vulkan::max_program_inputs, inputs.size(), program.key());
  for (const Vulkan::Primitive& x : inputs) vulkan::check_dtype_supported(op, x.dtype);
  const std::span<const codegen::ProgramOutput> outputs = program.outputs();
  for (const codegen::ProgramOutput& out : outputs) vulkan::check_dtype_supported(op, out.dtype);
  KILN_CHECK(outputs.size() < 256, "{}: the Vulkan backend runs programs of up to 255 outputs, got {}", op,
             outputs.size());
}

// The pipeline of a row program's output k: its row kernel, made once per program and output.
const vulkan::Pipeline& row_pipeline(const codegen::Program& program, std::size_t k) {
  static std::mutex mutex;
  static std::unordered_map<std::uint64_t, const vulkan::Pipeline*> pipelines;
  const std::uint64_t slot = program.id() << 8 | k;
  {
    const std::lock_guard lock(mutex);
    if (auto it = pipelines.find(slot); it != pipelines.end()) return *it->second;
  }
  vulkan::count_render();
  const int inputs = static_cast<int>(program.inputs().size());
  const codegen::RowKernel kernel =
      codegen::program_row_kernel(codegen::glsl(), program, k, static_cast<int>(vulkan::kWorkgroupSize));
  const std::string source = codegen::row_kernel(codegen::glsl(), codegen::glsl_kernels(), kernel);
  const vulkan::Pipeline& pipeline =
      vulkan::Context::get().pipeline(source, static_cast<std::uint32_t>(2 + inputs));
  const std::lock_guard lock(mutex);
  return *pipelines.emplace(slot, &pipeline).first->second;
}

}  // namespace

std::vector<Vulkan::Primitive> Vulkan::row_program(const codegen::Program& program, std::span<const Primitive> inputs,
                                                   std::span<const double> params, const Shape& domain) {
  codegen::check_row_program_call<Vulkan>(program, inputs, params, domain);
  check_kernel("row_program", program, inputs);
  KILN_CHECK(domain.rank() <= codegen::kMaxRank, "row_program: the Vulkan backend runs domains of rank up to {}, got {}",
             codegen::kMaxRank, domain);
  const std::int64_t cols = domain[domain.rank() - 1];
  const std::int64_t rows = domain.numel() / cols;
  vulkan::checked_int(domain.numel(), "a domain of", "row_program");
  const std::vector<const VulkanTensor*> all = operands(inputs);
  Shape row_shape = domain;
  row_shape[row_shape.rank() - 1] = 1;

  // The layout (codegen/row_kernel.hpp): rows, rank, dims, each input's offset and strides,
  // the parameters.
  constexpr auto first = static_cast<std::size_t>(codegen::kFirstLayout);
  std::vector<std::int32_t> layout(first + codegen::kLayoutStride * all.size(), 0);
  layout[0] = vulkan::checked_int(rows, "a row count of", "row_program");
  layout[1] = static_cast<std::int32_t>(domain.rank());
  for (std::size_t d = 0; d < domain.rank(); ++d) layout[2 + d] = vulkan::checked_int(domain[d], "a dim of", "row_program");
  for (std::size_t k = 0; k < all.size(); ++k) {
    const VulkanTensor& t = *all[k];
    const std::size_t base = first + k * codegen::kLayoutStride;
    layout[base] = vulkan::checked_int(t.offset, "an offset of", "row_program");
    const std::size_t lead = domain.rank() - t.shape.rank();
    for (std::size_t d = 0; d < t.shape.rank(); ++d)
      layout[base + 1 + lead + d] =
          t.shape[d] == 1 ? 0 : vulkan::checked_int(t.strides[d], "a stride of", "row_program");
  }
  vulkan::append_params(layout, all.size(), params, program.type());
  const auto layout_buffer = vulkan::upload_ints(layout);

  std::vector<Primitive> results;
  for (std::size_t k = 0; k < program.outputs().size(); ++k) {
    const codegen::ProgramOutput& out = program.outputs()[k];
    VulkanTensor result = vulkan::empty(out.per_row ? row_shape : domain, out.dtype);
    if (rows > 0) {
      std::vector<std::shared_ptr<vulkan::Buffer>> buffers{layout_buffer, result.buffer};
      for (const VulkanTensor* t : all) buffers.push_back(t->buffer);
      vulkan::dispatch_groups("row_program", row_pipeline(program, k), buffers, rows);
    }
    results.push_back(std::move(result));
  }
  return results;
}

std::vector<Vulkan::Primitive> Vulkan::elementwise(const codegen::Program& program, std::span<const Primitive> inputs,
                                                   std::span<const double> params) {
  const Shape shape = codegen::check_elementwise_call<Vulkan>(program, inputs, params);
  check_kernel("elementwise", program, inputs);
  const std::span<const codegen::ProgramOutput> outputs = program.outputs();

  // Specs by the program's id (a number, so a cache hit hashes no text): one kernel writing
  // every output where its buffers fit the bindings (the layout, the outputs, the inputs),
  // else a kernel per output (slot 255 is the whole program's; outputs number at most 255).
  static vulkan::SpecCache specs;
  if (1 + outputs.size() + inputs.size() <= Vulkan::max_kernel_buffers) {
    const auto& spec = specs.get(program.id() << 8 | 0xff, [&] { return spec_of(program, 0, outputs.size()); });
    return vulkan::run_elementwise_outputs(spec, operands(inputs), shape, params);
  }
  std::vector<Primitive> results;
  results.reserve(outputs.size());
  for (std::size_t k = 0; k < outputs.size(); ++k) {
    const auto& spec = specs.get(program.id() << 8 | k, [&] { return spec_of(program, k, 1); });
    results.push_back(vulkan::run_elementwise(spec, operands(inputs), shape, params));
  }
  return results;
}

#define KILN_VULKAN_DEFAULT_UNARY_instance(Op) \
  template Vulkan::Primitive defaults::unary<Vulkan, ops::Op>(const Vulkan::Primitive&);
#define KILN_VULKAN_DEFAULT_BINARY_instance(Op)                                                                      \
  template Vulkan::Primitive defaults::binary<Vulkan, ops::Op>(const Vulkan::Primitive&, const Vulkan::Primitive&); \
  template Vulkan::Primitive defaults::binary_scalar<Vulkan, ops::Op>(const Vulkan::Primitive&, double);
#define KILN_VULKAN_DEFAULT_UNARY_BACKWARD_instance(Op)                                           \
  template Vulkan::Primitive defaults::unary_backward<Vulkan, ops::Op>(                          \
      const Vulkan::Primitive&, const Vulkan::Primitive&, const Vulkan::Primitive&);
#define KILN_VULKAN_DEFAULT_BINARY_BACKWARD_instance(Op)                                                       \
  template Vulkan::Primitive defaults::binary_backward<Vulkan, ops::Op>(                                      \
      const Vulkan::Primitive&, const Vulkan::Primitive&, const Vulkan::Primitive&, const Vulkan::Primitive&, \
      ops::Operand);
KILN_VULKAN_ELEMENTWISE_DEFAULTS(instance)
template Vulkan::Primitive defaults::where<Vulkan>(const Vulkan::Primitive&, const Vulkan::Primitive&,
                                                   const Vulkan::Primitive&);

}  // namespace kiln
