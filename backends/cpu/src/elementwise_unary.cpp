// Unary elementwise kernels: Cpu::unary<Op> for every unary op of the catalogue
// (math, activations, predicates). The loops live in elementwise_kernels.hpp; binary
// ops compile beside this file, in elementwise_binary.cpp.
#include "elementwise_kernels.hpp"

namespace kiln::cpu {
namespace {

// Op(x), written over x where the caller gave it up (`given`) and may be written over.
template <class Op> CpuTensor unary_over(const CpuTensor& x, bool given) {
  ops::check_domain<Op>(x.dtype);
  constexpr bool predicate = ops::is_predicate<Op>;
  if (is_half(x.dtype)) {
    // f16 and bf16 compute in f32 (over the f32 copy) and round once at the end.
    CpuTensor r = unary_over<Op>(Cpu::cast(x, DType::f32), true);
    return predicate ? r : Cpu::cast(r, x.dtype);
  }
  const DType dtype = predicate ? DType::boolean : x.dtype;
  CpuTensor out = given ? result_over({&x}, x.shape, dtype) : empty(x.shape, dtype);
  const std::array<const CpuTensor*, 1> inputs{&x};
  dispatch_domain<Op>(x.dtype, [&]<class T>() {
    using R = std::conditional_t<predicate, bool, T>;
    run_elementwise(inputs, out, unary_kernel<Op, T, R>);
  });
  return out;
}

}  // namespace
}  // namespace kiln::cpu

namespace kiln {

template <class Op> Cpu::Primitive Cpu::unary(const Primitive& x) { return cpu::unary_over<Op>(x, false); }
template <class Op> Cpu::Primitive Cpu::unary(Primitive&& x) { return cpu::unary_over<Op>(x, true); }

#define KILN_CPU_INSTANTIATE_UNARY(Op)                                   \
  template Cpu::Primitive Cpu::unary<ops::Op>(const Cpu::Primitive&); \
  template Cpu::Primitive Cpu::unary<ops::Op>(Cpu::Primitive&&);
KILN_UNARY_OPS(KILN_CPU_INSTANTIATE_UNARY)
#undef KILN_CPU_INSTANTIATE_UNARY

}  // namespace kiln
