// Unary elementwise kernels: Cpu::unary<Op> for every unary op of the catalogue
// (math, activations, predicates). The loops live in elementwise_kernels.hpp; binary
// ops compile beside this file, in elementwise_binary.cpp.
#include "elementwise_kernels.hpp"

namespace kiln {

template <class Op> Cpu::Primitive Cpu::unary(const Primitive& x) {
  ops::check_domain<Op>(x.dtype);
  constexpr bool predicate = ops::is_predicate<Op>;
  if (cpu::is_half(x.dtype)) {
    // f16 and bf16 compute in f32 and round once at the end.
    Primitive r = unary<Op>(cast(x, DType::f32));
    return predicate ? r : cast(r, x.dtype);
  }
  cpu::CpuTensor out = cpu::empty(x.shape, predicate ? DType::boolean : x.dtype);
  const std::array<const cpu::CpuTensor*, 1> inputs{&x};
  cpu::dispatch_domain<Op>(x.dtype, [&]<class T>() {
    using R = std::conditional_t<predicate, bool, T>;
    cpu::run_elementwise(inputs, out, cpu::unary_kernel<Op, T, R>);
  });
  return out;
}

#define KILN_CPU_INSTANTIATE_UNARY(Op) template Cpu::Primitive Cpu::unary<ops::Op>(const Cpu::Primitive&);
KILN_UNARY_OPS(KILN_CPU_INSTANTIATE_UNARY)
#undef KILN_CPU_INSTANTIATE_UNARY

}  // namespace kiln
