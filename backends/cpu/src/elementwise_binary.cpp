// Binary elementwise kernels: Cpu::binary<Op> and Cpu::binary_scalar<Op> for every
// binary op of the catalogue (arithmetic, comparisons, Bool logic). The loops live in
// elementwise_kernels.hpp; unary ops compile beside this file, in elementwise_unary.cpp.
#include "elementwise_kernels.hpp"

namespace kiln::cpu {
namespace {

// The scalar operand of binary_scalar as the tensor's element type, checked as every
// backend checks it (integer and bool tensors take only values they hold exactly).
template <class T> T scalar_as(std::string_view op, double value, DType dtype) {
  defaults::detail::check_scalar(op, value, dtype);
  if constexpr (std::is_same_v<T, bool>) return value != 0.0;
  else return static_cast<T>(value);
}

}  // namespace
}  // namespace kiln::cpu

namespace kiln {

using cpu::CpuTensor;

template <class Op> Cpu::Primitive Cpu::binary(const Primitive& a, const Primitive& b) {
  KILN_CHECK(a.dtype == b.dtype, "{}: both operands must have the same dtype, got {} {} and {} {}", Op::name,
             a.shape, a.dtype, b.shape, b.dtype);
  ops::check_domain<Op>(a.dtype);
  constexpr bool predicate = ops::is_predicate<Op>;
  if (cpu::is_half(a.dtype)) {
    Primitive r = binary<Op>(cast(a, DType::f32), cast(b, DType::f32));
    return predicate ? r : cast(r, a.dtype);
  }
  const Shape shape = a.shape == b.shape ? a.shape : broadcast_shapes(Op::name, a.shape, b.shape);
  CpuTensor out = cpu::empty(shape, predicate ? DType::boolean : a.dtype);
  const std::array<const CpuTensor*, 2> inputs{&a, &b};
  cpu::dispatch_domain<Op>(a.dtype, [&]<class T>() {
    using R = std::conditional_t<predicate, bool, T>;
    cpu::run_elementwise(inputs, out, cpu::binary_kernel<Op, T, R>);
  });
  return out;
}

template <class Op> Cpu::Primitive Cpu::binary_scalar(const Primitive& a, double b) {
  ops::check_domain<Op>(a.dtype);
  constexpr bool predicate = ops::is_predicate<Op>;
  if (cpu::is_half(a.dtype)) {
    Primitive r = binary_scalar<Op>(cast(a, DType::f32), b);
    return predicate ? r : cast(r, a.dtype);
  }
  if constexpr (std::is_same_v<Op, ops::Pow>) {
    // The exponents PyTorch computes as other ops, as on every backend.
    if (is_float(a.dtype))
      if (auto shortcut = defaults::pow_scalar<Cpu>(a, b)) return *shortcut;
  }
  CpuTensor out = cpu::empty(a.shape, predicate ? DType::boolean : a.dtype);
  const std::array<const CpuTensor*, 1> inputs{&a};
  cpu::dispatch_domain<Op>(a.dtype, [&]<class T>() {
    using R = std::conditional_t<predicate, bool, T>;
    const T scalar = cpu::scalar_as<T>(Op::name, b, a.dtype);
    cpu::run_elementwise(inputs, out, cpu::binary_scalar_kernel<Op, T, R>, &scalar);
  });
  return out;
}

#define KILN_CPU_INSTANTIATE_BINARY(Op)                                                       \
  template Cpu::Primitive Cpu::binary<ops::Op>(const Cpu::Primitive&, const Cpu::Primitive&); \
  template Cpu::Primitive Cpu::binary_scalar<ops::Op>(const Cpu::Primitive&, double);
KILN_BINARY_OPS(KILN_CPU_INSTANTIATE_BINARY)
#undef KILN_CPU_INSTANTIATE_BINARY

}  // namespace kiln
