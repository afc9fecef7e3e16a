// Elementwise ops on the Vulkan backend: each op's formula from the catalogue is traced
// into the codegen IR, rendered to GLSL and run by the generated elementwise kernel
// (kernels.cpp). Each op's spec is made once per dtype (a SpecCache per op), so a repeated
// op traces and renders nothing and finds its pipeline by the spec's key.
#include "kernels.hpp"

#include "codegen/glsl.hpp"
#include "kiln/ops/pow_scalar.hpp"
#include "kiln/vulkan/backend.hpp"

#include <cmath>

namespace kiln {

using vulkan::VulkanTensor;

namespace {

vulkan::ElementwiseSpec spec_of(const codegen::NodePtr& root, codegen::ScalarType type, std::vector<DType> inputs,
                                DType out, bool predicate) {
  vulkan::count_render();
  codegen::GlslExpression e = codegen::render_glsl(root, type);
  return {std::move(inputs), predicate ? DType::boolean : out, std::move(e.helpers), std::move(e.value), predicate};
}

// Int and bool tensors take only scalars they hold exactly, as on the CPU.
void check_scalar(std::string_view op, double value, DType dtype) {
  if (is_float(dtype)) return;
  if (dtype == DType::boolean) {
    KILN_CHECK(value == 0.0 || value == 1.0, "{}: a bool tensor takes the scalars 0 and 1, got {}", op, value);
    return;
  }
  const double lo = dtype == DType::u8 ? 0.0 : dtype == DType::i32 ? -2147483648.0 : -9223372036854775808.0;
  const double hi = dtype == DType::u8 ? 256.0 : dtype == DType::i32 ? 2147483648.0 : 9223372036854775808.0;
  KILN_CHECK(std::trunc(value) == value && value >= lo && value < hi,
             "{}: the scalar {} is not a {} value; cast the tensor to a float dtype first", op, value, dtype);
}

// Runs Op on a and b (b of a's dtype, or f32 where a is f16 / bf16: the kernel computes
// in float either way and rounds to a's dtype once).
template <class Op> VulkanTensor run_binary(const VulkanTensor& a, const VulkanTensor& b) {
  const Shape shape = a.shape == b.shape ? a.shape : broadcast_shapes(Op::name, a.shape, b.shape);
  static vulkan::SpecCache cache(dtype_count * dtype_count);
  const auto& spec = cache.get(vulkan::dtype_slot(a.dtype, b.dtype), [&] {
    const auto type = codegen::scalar_type_of(a.dtype);
    return spec_of(codegen::trace_binary<Op>(type), type, {a.dtype, b.dtype}, a.dtype, ops::is_predicate<Op>);
  });
  const std::array<const VulkanTensor*, 2> inputs{&a, &b};
  return vulkan::run_elementwise(spec, inputs, shape);
}

}  // namespace

template <class Op> Vulkan::Primitive Vulkan::unary(const Primitive& x) {
  ops::check_domain<Op>(x.dtype);
  vulkan::check_dtype_supported(Op::name, x.dtype);
  static vulkan::SpecCache cache(dtype_count);
  const auto& spec = cache.get(static_cast<std::size_t>(x.dtype), [&] {
    const auto type = codegen::scalar_type_of(x.dtype);
    return spec_of(codegen::trace_unary<Op>(type), type, {x.dtype}, x.dtype, ops::is_predicate<Op>);
  });
  const std::array<const VulkanTensor*, 1> inputs{&x};
  return vulkan::run_elementwise(spec, inputs, x.shape);
}

template <class Op> Vulkan::Primitive Vulkan::binary(const Primitive& a, const Primitive& b) {
  KILN_CHECK(a.dtype == b.dtype, "{}: both operands must have the same dtype, got {} {} and {} {}", Op::name, a.shape,
             a.dtype, b.shape, b.dtype);
  ops::check_domain<Op>(a.dtype);
  vulkan::check_dtype_supported(Op::name, a.dtype);
  return run_binary<Op>(a, b);
}

// The scalar travels as a one-element tensor, so a new scalar does not compile a new kernel.
// f16 / bf16 tensors get it as f32, as the CPU backend computes them (not rounded to 16 bits).
template <class Op> Vulkan::Primitive Vulkan::binary_scalar(const Primitive& a, double b) {
  ops::check_domain<Op>(a.dtype);
  check_scalar(Op::name, b, a.dtype);
  vulkan::check_dtype_supported(Op::name, a.dtype);
  if constexpr (std::is_same_v<Op, ops::Pow>) {
    // The exponents PyTorch computes as other ops, as on every backend (ops/pow_scalar.hpp).
    if (is_float(a.dtype))
      if (auto shortcut = ops::pow_scalar<Vulkan>(a, b)) return *shortcut;
  }
  return run_binary<Op>(a, full(Shape{1}, b, vulkan::is_half(a.dtype) ? DType::f32 : a.dtype, {}));
}

Vulkan::Primitive Vulkan::where(const Primitive& cond, const Primitive& a, const Primitive& b) {
  KILN_CHECK(cond.dtype == DType::boolean, "where: the condition must be bool, got {} {}", cond.shape, cond.dtype);
  KILN_CHECK(a.dtype == b.dtype, "where: both branches must have the same dtype, got {} {} and {} {}", a.shape,
             a.dtype, b.shape, b.dtype);
  vulkan::check_dtype_supported("where", a.dtype);
  const Shape shape = broadcast_shapes("where", broadcast_shapes("where", cond.shape, a.shape), b.shape);
  // Selection moves elements: 16-bit floats as their bits.
  static vulkan::SpecCache cache(dtype_count);
  const auto& spec = cache.get(static_cast<std::size_t>(a.dtype), [&] {
    vulkan::count_render();
    return vulkan::ElementwiseSpec{{cond.dtype, a.dtype, b.dtype}, a.dtype, "", "in0 ? in1 : in2",
                                   a.dtype == DType::boolean, true};
  });
  const std::array<const VulkanTensor*, 3> inputs{&cond, &a, &b};
  return vulkan::run_elementwise(spec, inputs, shape);
}

template <class Op>
Vulkan::Primitive Vulkan::unary_backward(const Primitive& x, const Primitive& y, const Primitive& dy) {
  for (const Primitive* t : {&x, &y}) {
    KILN_CHECK(t->dtype == dy.dtype && t->shape == dy.shape, "{} backward: x {} {}, y {} {} and dy {} {} must match",
               Op::name, x.shape, x.dtype, y.shape, y.dtype, dy.shape, dy.dtype);
  }
  KILN_CHECK(is_float(dy.dtype), "{} backward: expected float tensors, got {}", Op::name, dy.dtype);
  vulkan::check_dtype_supported(Op::name, dy.dtype);
  static vulkan::SpecCache cache(dtype_count);
  const auto& spec = cache.get(static_cast<std::size_t>(dy.dtype), [&] {
    const auto type = codegen::scalar_type_of(dy.dtype);
    return spec_of(codegen::trace_unary_grad<Op>(type), type, {x.dtype, y.dtype, dy.dtype}, dy.dtype, false);
  });
  const std::array<const VulkanTensor*, 3> inputs{&x, &y, &dy};
  return vulkan::run_elementwise(spec, inputs, dy.shape);
}

template <class Op>
Vulkan::Primitive Vulkan::binary_backward(const Primitive& a, const Primitive& b, const Primitive& y,
                                          const Primitive& dy, ops::Operand operand) {
  for (const Primitive* t : {&a, &b, &y}) {
    KILN_CHECK(t->dtype == dy.dtype, "{} backward: operands {} {}, {} {}, y {} {} and dy {} {} must share a dtype",
               Op::name, a.shape, a.dtype, b.shape, b.dtype, y.shape, y.dtype, dy.shape, dy.dtype);
  }
  KILN_CHECK(is_float(dy.dtype), "{} backward: expected float tensors, got {}", Op::name, dy.dtype);
  const Shape shape = broadcast_shapes(Op::name, a.shape, b.shape);
  KILN_CHECK(shape == dy.shape && y.shape == dy.shape,
             "{} backward: operands {} and {} broadcast to {}, but y is {} and dy is {}", Op::name, a.shape, b.shape,
             shape, y.shape, dy.shape);
  vulkan::check_dtype_supported(Op::name, dy.dtype);
  static vulkan::SpecCache cache(2 * dtype_count);
  const std::size_t side = operand == ops::Operand::lhs ? 0 : 1;
  const auto& spec = cache.get(side * dtype_count + static_cast<std::size_t>(dy.dtype), [&] {
    const auto type = codegen::scalar_type_of(dy.dtype);
    const auto root = side == 0 ? codegen::trace_binary_grad<Op, ops::Operand::lhs>(type)
                                : codegen::trace_binary_grad<Op, ops::Operand::rhs>(type);
    return spec_of(root, type, {a.dtype, b.dtype, y.dtype, dy.dtype}, dy.dtype, false);
  });
  const std::array<const VulkanTensor*, 4> inputs{&a, &b, &y, &dy};
  return vulkan::run_elementwise(spec, inputs, dy.shape);
}

#define KILN_VULKAN_INSTANTIATE_UNARY(Op) template Vulkan::Primitive Vulkan::unary<ops::Op>(const Vulkan::Primitive&);
#define KILN_VULKAN_INSTANTIATE_BINARY(Op)                                                                  \
  template Vulkan::Primitive Vulkan::binary<ops::Op>(const Vulkan::Primitive&, const Vulkan::Primitive&); \
  template Vulkan::Primitive Vulkan::binary_scalar<ops::Op>(const Vulkan::Primitive&, double);
#define KILN_VULKAN_INSTANTIATE_UNARY_BACKWARD(Op)                                           \
  template Vulkan::Primitive Vulkan::unary_backward<ops::Op>(const Vulkan::Primitive&,     \
                                                             const Vulkan::Primitive&, const Vulkan::Primitive&);
#define KILN_VULKAN_INSTANTIATE_BINARY_BACKWARD(Op)                                                          \
  template Vulkan::Primitive Vulkan::binary_backward<ops::Op>(const Vulkan::Primitive&, const Vulkan::Primitive&, \
                                                              const Vulkan::Primitive&, const Vulkan::Primitive&, \
                                                              ops::Operand);
KILN_UNARY_OPS(KILN_VULKAN_INSTANTIATE_UNARY)
KILN_BINARY_OPS(KILN_VULKAN_INSTANTIATE_BINARY)
KILN_DIFFERENTIABLE_UNARY_OPS(KILN_VULKAN_INSTANTIATE_UNARY_BACKWARD)
KILN_DIFFERENTIABLE_BINARY_OPS(KILN_VULKAN_INSTANTIATE_BINARY_BACKWARD)

}  // namespace kiln
