// Gradient kernels: Cpu::unary_backward<Op> and Cpu::binary_backward<Op> evaluate the
// catalogue's grad / grad_lhs / grad_rhs formulas with the same SIMD loops as the forward
// ops (elementwise_kernels.hpp), over inputs of any strides that broadcast to dy's shape.
#include "elementwise_kernels.hpp"

namespace kiln::cpu {
namespace {

// The gradient loops fetch nothing ahead (Ahead in elementwise_kernels.hpp): holding three or
// four input pointers for it made tanh's gradient over 1k floats, in cache, 30 ns slower (min
// of 7: 189-194 ns without, 218-235 with), and no gain past the cache was measured for them.

template <class Op, class T>
void unary_backward_kernel(const void*, const std::byte* const* in, const std::int64_t* s, std::byte* out,
                           std::int64_t n, bool stream) {
  const T* x = reinterpret_cast<const T*>(in[0]);
  const T* y = reinterpret_cast<const T*>(in[1]);
  const T* dy = reinterpret_cast<const T*>(in[2]);
  const bool streamed = stream && light_op<Op>;
  simd_loop<T>(reinterpret_cast<T*>(out), n, streamed, Ahead<T, 0>{},
               [=](std::int64_t i, std::int64_t count) KILN_INLINE_LAMBDA {
    return Op::grad(load_run(x, s[0], i, count), load_run(y, s[1], i, count), load_run(dy, s[2], i, count));
  });
}

template <class Op, ops::Operand side, class T>
void binary_backward_kernel(const void*, const std::byte* const* in, const std::int64_t* s, std::byte* out,
                            std::int64_t n, bool stream) {
  const T* a = reinterpret_cast<const T*>(in[0]);
  const T* b = reinterpret_cast<const T*>(in[1]);
  const T* y = reinterpret_cast<const T*>(in[2]);
  const T* dy = reinterpret_cast<const T*>(in[3]);
  const bool streamed = stream && light_op<Op>;
  simd_loop<T>(reinterpret_cast<T*>(out), n, streamed, Ahead<T, 0>{},
               [=](std::int64_t i, std::int64_t count) KILN_INLINE_LAMBDA {
    const auto va = load_run(a, s[0], i, count), vb = load_run(b, s[1], i, count);
    const auto vy = load_run(y, s[2], i, count), vdy = load_run(dy, s[3], i, count);
    if constexpr (side == ops::Operand::lhs) return Op::grad_lhs(va, vb, vy, vdy);
    else return Op::grad_rhs(va, vb, vy, vdy);
  });
}

void check_float_operands(std::string_view op, std::initializer_list<const CpuTensor*> operands) {
  const DType dtype = (*operands.begin())->dtype;
  for (const CpuTensor* t : operands) {
    KILN_CHECK(is_float(t->dtype) && t->dtype == dtype,
               "{}: gradient operands must share one float dtype, got {} {} and {} {}", op,
               (*operands.begin())->shape, dtype, t->shape, t->dtype);
  }
}

// Op's gradient dx from (x, y, dy), written over dy where the caller gave it up (`given`) and
// it may be written over: each element of dy is read before the same element of dx is
// written.
template <class Op>
CpuTensor unary_backward_over(const CpuTensor& x, const CpuTensor& y, const CpuTensor& dy, bool given) {
  check_float_operands(Op::name, {&x, &y, &dy});
  if (is_half(dy.dtype))
    // f16 and bf16 compute in f32, over dy's f32 copy.
    return Cpu::cast(unary_backward_over<Op>(Cpu::cast(x, DType::f32), Cpu::cast(y, DType::f32),
                                             Cpu::cast(dy, DType::f32), true),
                     dy.dtype);
  KILN_CHECK(x.shape == dy.shape && y.shape == dy.shape,
             "{} backward: x {}, y {} and dy {} must have the same shape", Op::name, x.shape, y.shape, dy.shape);
  CpuTensor out = given ? result_over({&dy}, dy.shape, dy.dtype) : empty(dy.shape, dy.dtype);
  const std::array<const CpuTensor*, 3> inputs{&x, &y, &dy};
  dispatch_float(Op::name, dy.dtype, [&]<class T>() { run_elementwise(inputs, out, unary_backward_kernel<Op, T>); });
  return out;
}

// The gradient of `operand` at dy's shape, written over dy as unary_backward_over's.
template <class Op>
CpuTensor binary_backward_over(const CpuTensor& a, const CpuTensor& b, const CpuTensor& y, const CpuTensor& dy,
                               ops::Operand operand, bool given) {
  check_float_operands(Op::name, {&a, &b, &y, &dy});
  if (is_half(dy.dtype)) {
    const auto f = [](const CpuTensor& p) { return Cpu::cast(p, DType::f32); };
    return Cpu::cast(binary_backward_over<Op>(f(a), f(b), f(y), f(dy), operand, true), dy.dtype);
  }
  const Shape shape = broadcast_shapes(Op::name, a.shape, b.shape);
  KILN_CHECK(shape == dy.shape && y.shape == dy.shape,
             "{} backward: operands {} and {} broadcast to {}, but y is {} and dy is {}", Op::name, a.shape, b.shape,
             shape, y.shape, dy.shape);
  CpuTensor out = given ? result_over({&dy}, dy.shape, dy.dtype) : empty(dy.shape, dy.dtype);
  const std::array<const CpuTensor*, 4> inputs{&a, &b, &y, &dy};
  dispatch_float(Op::name, dy.dtype, [&]<class T>() {
    if (operand == ops::Operand::lhs)
      run_elementwise(inputs, out, binary_backward_kernel<Op, ops::Operand::lhs, T>);
    else
      run_elementwise(inputs, out, binary_backward_kernel<Op, ops::Operand::rhs, T>);
  });
  return out;
}

}  // namespace
}  // namespace kiln::cpu

namespace kiln {

using cpu::CpuTensor;

template <class Op> Cpu::Primitive Cpu::unary_backward(const Primitive& x, const Primitive& y, const Primitive& dy) {
  return cpu::unary_backward_over<Op>(x, y, dy, false);
}
template <class Op> Cpu::Primitive Cpu::unary_backward(const Primitive& x, const Primitive& y, Primitive&& dy) {
  return cpu::unary_backward_over<Op>(x, y, dy, true);
}
template <class Op>
Cpu::Primitive Cpu::binary_backward(const Primitive& a, const Primitive& b, const Primitive& y, const Primitive& dy,
                                    ops::Operand operand) {
  return cpu::binary_backward_over<Op>(a, b, y, dy, operand, false);
}
template <class Op>
Cpu::Primitive Cpu::binary_backward(const Primitive& a, const Primitive& b, const Primitive& y, Primitive&& dy,
                                    ops::Operand operand) {
  return cpu::binary_backward_over<Op>(a, b, y, dy, operand, true);
}

#define KILN_CPU_INSTANTIATE_UNARY_BACKWARD(Op)                                                                \
  template Cpu::Primitive Cpu::unary_backward<ops::Op>(const Cpu::Primitive&, const Cpu::Primitive&,         \
                                                       const Cpu::Primitive&);                                \
  template Cpu::Primitive Cpu::unary_backward<ops::Op>(const Cpu::Primitive&, const Cpu::Primitive&,         \
                                                       Cpu::Primitive&&);
#define KILN_CPU_INSTANTIATE_BINARY_BACKWARD(Op)                                                               \
  template Cpu::Primitive Cpu::binary_backward<ops::Op>(const Cpu::Primitive&, const Cpu::Primitive&,        \
                                                        const Cpu::Primitive&, const Cpu::Primitive&,        \
                                                        ops::Operand);                                       \
  template Cpu::Primitive Cpu::binary_backward<ops::Op>(const Cpu::Primitive&, const Cpu::Primitive&,        \
                                                        const Cpu::Primitive&, Cpu::Primitive&&, ops::Operand);
KILN_DIFFERENTIABLE_UNARY_OPS(KILN_CPU_INSTANTIATE_UNARY_BACKWARD)
KILN_DIFFERENTIABLE_BINARY_OPS(KILN_CPU_INSTANTIATE_BINARY_BACKWARD)
#undef KILN_CPU_INSTANTIATE_UNARY_BACKWARD
#undef KILN_CPU_INSTANTIATE_BINARY_BACKWARD

}  // namespace kiln
