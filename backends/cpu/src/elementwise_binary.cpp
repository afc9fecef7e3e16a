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

// Op(a, b), written over a or b where the caller gave it up (`given`) and may be written over.
template <class Op> CpuTensor binary_over(const CpuTensor& a, const CpuTensor& b, bool given) {
  KILN_CHECK(a.dtype == b.dtype, "{}: both operands must have the same dtype, got {} {} and {} {}", Op::name,
             a.shape, a.dtype, b.shape, b.dtype);
  ops::check_domain<Op>(a.dtype);
  constexpr bool predicate = ops::is_predicate<Op>;
  if (is_half(a.dtype)) {
    CpuTensor r = binary_over<Op>(Cpu::cast(a, DType::f32), Cpu::cast(b, DType::f32), true);
    return predicate ? r : Cpu::cast(r, a.dtype);
  }
  const Shape shape = a.shape == b.shape ? a.shape : broadcast_shapes(Op::name, a.shape, b.shape);
  const DType dtype = predicate ? DType::boolean : a.dtype;
  CpuTensor out = given ? result_over({&a, &b}, shape, dtype) : empty(shape, dtype);
  const std::array<const CpuTensor*, 2> inputs{&a, &b};
  dispatch_domain<Op>(a.dtype, [&]<class T>() {
    using R = std::conditional_t<predicate, bool, T>;
    run_elementwise(inputs, out, binary_kernel<Op, T, R>);
  });
  return out;
}

// Op(a, scalar), written over a where the caller gave it up (`given`) and may be written over.
template <class Op> CpuTensor binary_scalar_over(const CpuTensor& a, double b, bool given) {
  ops::check_domain<Op>(a.dtype);
  constexpr bool predicate = ops::is_predicate<Op>;
  if (is_half(a.dtype)) {
    CpuTensor r = binary_scalar_over<Op>(Cpu::cast(a, DType::f32), b, true);
    return predicate ? r : Cpu::cast(r, a.dtype);
  }
  if constexpr (std::is_same_v<Op, ops::Pow>) {
    // The exponents PyTorch computes as other ops, as on every backend.
    if (is_float(a.dtype))
      if (auto shortcut = defaults::pow_scalar<Cpu>(a, b)) return *shortcut;
  }
  const DType dtype = predicate ? DType::boolean : a.dtype;
  CpuTensor out = given ? result_over({&a}, a.shape, dtype) : empty(a.shape, dtype);
  const std::array<const CpuTensor*, 1> inputs{&a};
  dispatch_domain<Op>(a.dtype, [&]<class T>() {
    using R = std::conditional_t<predicate, bool, T>;
    const T scalar = scalar_as<T>(Op::name, b, a.dtype);
    run_elementwise(inputs, out, binary_scalar_kernel<Op, T, R>, &scalar);
  });
  return out;
}

}  // namespace
}  // namespace kiln::cpu

namespace kiln {

template <class Op> Cpu::Primitive Cpu::binary(const Primitive& a, const Primitive& b) {
  return cpu::binary_over<Op>(a, b, false);
}
template <class Op> Cpu::Primitive Cpu::binary(Primitive&& a, Primitive&& b) {
  return cpu::binary_over<Op>(a, b, true);
}
template <class Op> Cpu::Primitive Cpu::binary_scalar(const Primitive& a, double b) {
  return cpu::binary_scalar_over<Op>(a, b, false);
}
template <class Op> Cpu::Primitive Cpu::binary_scalar(Primitive&& a, double b) {
  return cpu::binary_scalar_over<Op>(a, b, true);
}

#define KILN_CPU_INSTANTIATE_BINARY(Op)                                                          \
  template Cpu::Primitive Cpu::binary<ops::Op>(const Cpu::Primitive&, const Cpu::Primitive&); \
  template Cpu::Primitive Cpu::binary<ops::Op>(Cpu::Primitive&&, Cpu::Primitive&&);           \
  template Cpu::Primitive Cpu::binary_scalar<ops::Op>(const Cpu::Primitive&, double);         \
  template Cpu::Primitive Cpu::binary_scalar<ops::Op>(Cpu::Primitive&&, double);
KILN_BINARY_OPS(KILN_CPU_INSTANTIATE_BINARY)
#undef KILN_CPU_INSTANTIATE_BINARY

}  // namespace kiln
