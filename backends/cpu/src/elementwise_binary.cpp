// Binary elementwise kernels: Cpu::binary<Op> and Cpu::binary_scalar<Op> for every
// binary op of the catalogue (arithmetic, comparisons, Bool logic). The loops live in
// elementwise_kernels.hpp; unary ops compile beside this file, in elementwise_unary.cpp.
#include "elementwise_kernels.hpp"

#include "kiln/ops/pow_scalar.hpp"

namespace kiln::cpu {
namespace {

// The scalar operand of binary_scalar as the tensor's element type. Integer and Bool
// tensors take only values they can hold exactly: truncating 2.5 would silently change the op.
template <class T> T scalar_as(std::string_view op, double value, DType dtype) {
  if constexpr (std::is_floating_point_v<T>) {
    return static_cast<T>(value);
  } else if constexpr (std::is_same_v<T, bool>) {
    KILN_CHECK(value == 0.0 || value == 1.0, "{}: a bool tensor takes the scalars 0 and 1, got {}", op, value);
    return value != 0.0;
  } else {
    // -(double)min is 2^(bits-1) exactly, so the upper bound is exclusive and never rounds.
    const double lo = static_cast<double>(std::numeric_limits<T>::min());
    const double hi = std::is_signed_v<T> ? -lo : static_cast<double>(std::numeric_limits<T>::max()) + 1.0;
    KILN_CHECK(std::trunc(value) == value && value >= lo && value < hi,
               "{}: the scalar {} is not a {} value; cast the tensor to a float dtype first", op, value, dtype);
    return static_cast<T>(value);
  }
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
    // The exponents PyTorch computes as other ops (ops/pow_scalar.hpp).
    if (is_float(a.dtype))
      if (auto shortcut = ops::pow_scalar<Cpu>(a, b)) return *shortcut;
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
