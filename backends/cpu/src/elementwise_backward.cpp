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

}  // namespace
}  // namespace kiln::cpu

namespace kiln {

using cpu::CpuTensor;

template <class Op> Cpu::Primitive Cpu::unary_backward(const Primitive& x, const Primitive& y, const Primitive& dy) {
  cpu::check_float_operands(Op::name, {&x, &y, &dy});
  if (cpu::is_half(dy.dtype))
    return cast(unary_backward<Op>(cast(x, DType::f32), cast(y, DType::f32), cast(dy, DType::f32)), dy.dtype);
  KILN_CHECK(x.shape == dy.shape && y.shape == dy.shape,
             "{} backward: x {}, y {} and dy {} must have the same shape", Op::name, x.shape, y.shape, dy.shape);
  CpuTensor out = cpu::empty(dy.shape, dy.dtype);
  const std::array<const CpuTensor*, 3> inputs{&x, &y, &dy};
  cpu::dispatch_float(Op::name, dy.dtype,
                      [&]<class T>() { cpu::run_elementwise(inputs, out, cpu::unary_backward_kernel<Op, T>); });
  return out;
}

template <class Op>
Cpu::Primitive Cpu::binary_backward(const Primitive& a, const Primitive& b, const Primitive& y, const Primitive& dy,
                                    ops::Operand operand) {
  cpu::check_float_operands(Op::name, {&a, &b, &y, &dy});
  if (cpu::is_half(dy.dtype)) {
    const auto f = [](const Primitive& p) { return cast(p, DType::f32); };
    return cast(binary_backward<Op>(f(a), f(b), f(y), f(dy), operand), dy.dtype);
  }
  const Shape shape = broadcast_shapes(Op::name, a.shape, b.shape);
  KILN_CHECK(shape == dy.shape && y.shape == dy.shape,
             "{} backward: operands {} and {} broadcast to {}, but y is {} and dy is {}", Op::name, a.shape, b.shape,
             shape, y.shape, dy.shape);
  CpuTensor out = cpu::empty(dy.shape, dy.dtype);
  const std::array<const CpuTensor*, 4> inputs{&a, &b, &y, &dy};
  cpu::dispatch_float(Op::name, dy.dtype, [&]<class T>() {
    if (operand == ops::Operand::lhs)
      cpu::run_elementwise(inputs, out, cpu::binary_backward_kernel<Op, ops::Operand::lhs, T>);
    else
      cpu::run_elementwise(inputs, out, cpu::binary_backward_kernel<Op, ops::Operand::rhs, T>);
  });
  return out;
}

#define KILN_CPU_INSTANTIATE_UNARY_BACKWARD(Op)                                                                \
  template Cpu::Primitive Cpu::unary_backward<ops::Op>(const Cpu::Primitive&, const Cpu::Primitive&,         \
                                                       const Cpu::Primitive&);
#define KILN_CPU_INSTANTIATE_BINARY_BACKWARD(Op)                                                               \
  template Cpu::Primitive Cpu::binary_backward<ops::Op>(const Cpu::Primitive&, const Cpu::Primitive&,        \
                                                        const Cpu::Primitive&, const Cpu::Primitive&,        \
                                                        ops::Operand);
KILN_DIFFERENTIABLE_UNARY_OPS(KILN_CPU_INSTANTIATE_UNARY_BACKWARD)
KILN_DIFFERENTIABLE_BINARY_OPS(KILN_CPU_INSTANTIATE_BINARY_BACKWARD)
#undef KILN_CPU_INSTANTIATE_UNARY_BACKWARD
#undef KILN_CPU_INSTANTIATE_BINARY_BACKWARD

}  // namespace kiln
