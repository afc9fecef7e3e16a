// Vulkan::elementwise: each output of a program is rendered to GLSL through the renderer
// table (src/codegen/glsl.hpp) and run by the generated elementwise kernel (kernels.cpp).
// A program's specs are made once and kept by its id, so a repeated program traces and
// renders nothing and finds its pipeline by the spec's key. Parameters travel as
// one-element tensors, so a new scalar value compiles no new kernel.
#include "kernels.hpp"

#include "codegen/glsl.hpp"
#include "kiln/codegen/program.hpp"
#include "kiln/vulkan/backend.hpp"

namespace kiln {

using vulkan::VulkanTensor;

namespace {

// The dtype a parameter of a program computing in t travels as.
DType param_dtype(codegen::ScalarType t) {
  switch (t) {
    case codegen::ScalarType::f32: return DType::f32;
    case codegen::ScalarType::f64: return DType::f64;
    case codegen::ScalarType::i32: return DType::i32;
    case codegen::ScalarType::i64: return DType::i64;
    case codegen::ScalarType::u8: return DType::u8;
    case codegen::ScalarType::boolean: break;
  }
  KILN_FAIL("elementwise: a bool program has no parameters");
}

vulkan::ElementwiseSpec spec_of(const codegen::Program& program, std::size_t output) {
  vulkan::count_render();
  const codegen::ProgramOutput& out = program.outputs()[output];
  const int inputs = static_cast<int>(program.inputs().size());
  const codegen::NodePtr root = codegen::params_as_inputs(out.root, inputs);
  codegen::Expression e = codegen::render_glsl(root, program.type());
  std::vector<DType> dtypes(program.inputs().begin(), program.inputs().end());
  for (int p = 0; p < program.param_count(); ++p) dtypes.push_back(param_dtype(program.type()));
  return {std::move(dtypes), out.dtype, std::move(e.helpers), std::move(e.value), out.root->mask,
          codegen::moves_only(out.root)};
}

}  // namespace

std::vector<Vulkan::Primitive> Vulkan::elementwise(const codegen::Program& program, std::span<const Primitive> inputs,
                                                   std::span<const double> params) {
  const Shape shape = codegen::check_elementwise_call<Vulkan>(program, inputs, params);
  for (const Primitive& x : inputs) vulkan::check_dtype_supported("elementwise", x.dtype);
  const std::span<const codegen::ProgramOutput> outputs = program.outputs();
  for (const codegen::ProgramOutput& out : outputs) vulkan::check_dtype_supported("elementwise", out.dtype);
  KILN_CHECK(outputs.size() < 256, "elementwise: the Vulkan backend runs programs of up to 255 outputs, got {}",
             outputs.size());

  std::vector<VulkanTensor> param_tensors;
  param_tensors.reserve(params.size());
  for (double p : params) param_tensors.push_back(full(Shape{1}, p, param_dtype(program.type()), {}));
  std::vector<const VulkanTensor*> operands;
  operands.reserve(inputs.size() + params.size());
  for (const Primitive& x : inputs) operands.push_back(&x);
  for (const VulkanTensor& p : param_tensors) operands.push_back(&p);

  // One spec per output, by the program's id: a number, so a cache hit hashes no text.
  static vulkan::SpecCache specs;
  std::vector<Primitive> results;
  results.reserve(outputs.size());
  for (std::size_t k = 0; k < outputs.size(); ++k) {
    const auto& spec = specs.get(program.id() << 8 | k, [&] { return spec_of(program, k); });
    results.push_back(vulkan::run_elementwise(spec, operands, shape));
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
