// Dispatch's catalogue ops (kiln/dispatch/backend.hpp): each forwarded to the target's own
// kernel through the provided layer (the CPU's compile-time kernels, another backend's
// one-op program), compiled here for every op of the catalogue.
#include "forward.hpp"

namespace kiln {

using dispatch::on;
using dispatch::target;
using dispatch::given_up;
using dispatch::unwrap;
using dispatch::wrap;

template <class Op> Dispatch::Primitive Dispatch::unary(const Primitive& x) {
  return on(target(Op::name, {&x}), [&]<class B>() { return wrap<B>(provided::unary<B, Op>(unwrap<B>(x))); });
}
template <class Op> Dispatch::Primitive Dispatch::binary(const Primitive& a, const Primitive& b) {
  return on(target(Op::name, {&a, &b}),
            [&]<class B>() { return wrap<B>(provided::binary<B, Op>(unwrap<B>(a), unwrap<B>(b))); });
}
template <class Op> Dispatch::Primitive Dispatch::binary_scalar(const Primitive& a, double b) {
  return on(target(Op::name, {&a}), [&]<class B>() { return wrap<B>(provided::binary_scalar<B, Op>(unwrap<B>(a), b)); });
}
template <class Op> Dispatch::Primitive Dispatch::unary(Primitive&& x) {
  return on(target(Op::name, {&x}), [&]<class B>() { return wrap<B>(provided::unary<B, Op>(given_up<B>(x))); });
}
template <class Op> Dispatch::Primitive Dispatch::binary(Primitive&& a, Primitive&& b) {
  if (&a == &b) return binary<Op>(static_cast<const Primitive&>(a), static_cast<const Primitive&>(b));
  return on(target(Op::name, {&a, &b}), [&]<class B>() {
    typename B::Primitive first = given_up<B>(a);
    return wrap<B>(provided::binary<B, Op>(std::move(first), given_up<B>(b)));
  });
}
template <class Op> Dispatch::Primitive Dispatch::binary_scalar(Primitive&& a, double b) {
  return on(target(Op::name, {&a}),
            [&]<class B>() { return wrap<B>(provided::binary_scalar<B, Op>(given_up<B>(a), b)); });
}
Dispatch::Primitive Dispatch::where(const Primitive& cond, const Primitive& a, const Primitive& b) {
  return on(target("where", {&cond, &a, &b}), [&]<class B>() {
    return wrap<B>(provided::where<B>(unwrap<B>(cond), unwrap<B>(a), unwrap<B>(b)));
  });
}
template <class Op>
Dispatch::Primitive Dispatch::unary_backward(const Primitive& x, const Primitive& y, const Primitive& dy) {
  return on(target(Op::name, {&x, &y, &dy}), [&]<class B>() {
    return wrap<B>(provided::unary_backward<B, Op>(unwrap<B>(x), unwrap<B>(y), unwrap<B>(dy)));
  });
}
template <class Op>
Dispatch::Primitive Dispatch::binary_backward(const Primitive& a, const Primitive& b, const Primitive& y,
                                              const Primitive& dy, ops::Operand operand) {
  return on(target(Op::name, {&a, &b, &y, &dy}), [&]<class B>() {
    return wrap<B>(provided::binary_backward<B, Op>(unwrap<B>(a), unwrap<B>(b), unwrap<B>(y), unwrap<B>(dy), operand));
  });
}
// dy given up: its primitive is taken before the kept operands are read, and a dy that is also
// one of them (the same handle) is read as kept.
template <class Op>
Dispatch::Primitive Dispatch::unary_backward(const Primitive& x, const Primitive& y, Primitive&& dy) {
  if (&dy == &x || &dy == &y) return unary_backward<Op>(x, y, static_cast<const Primitive&>(dy));
  return on(target(Op::name, {&x, &y, &dy}), [&]<class B>() {
    typename B::Primitive d = given_up<B>(dy);
    return wrap<B>(provided::unary_backward<B, Op>(unwrap<B>(x), unwrap<B>(y), std::move(d)));
  });
}
template <class Op>
Dispatch::Primitive Dispatch::binary_backward(const Primitive& a, const Primitive& b, const Primitive& y,
                                              Primitive&& dy, ops::Operand operand) {
  if (&dy == &a || &dy == &b || &dy == &y)
    return binary_backward<Op>(a, b, y, static_cast<const Primitive&>(dy), operand);
  return on(target(Op::name, {&a, &b, &y, &dy}), [&]<class B>() {
    typename B::Primitive d = given_up<B>(dy);
    return wrap<B>(provided::binary_backward<B, Op>(unwrap<B>(a), unwrap<B>(b), unwrap<B>(y), std::move(d), operand));
  });
}

#define KILN_DISPATCH_UNARY(Op)                                               \
  template Dispatch::Primitive Dispatch::unary<ops::Op>(const Primitive&); \
  template Dispatch::Primitive Dispatch::unary<ops::Op>(Primitive&&);
#define KILN_DISPATCH_BINARY(Op)                                                                   \
  template Dispatch::Primitive Dispatch::binary<ops::Op>(const Primitive&, const Primitive&);      \
  template Dispatch::Primitive Dispatch::binary<ops::Op>(Primitive&&, Primitive&&);                \
  template Dispatch::Primitive Dispatch::binary_scalar<ops::Op>(const Primitive&, double);         \
  template Dispatch::Primitive Dispatch::binary_scalar<ops::Op>(Primitive&&, double);
#define KILN_DISPATCH_UNARY_BACKWARD(Op)                                                           \
  template Dispatch::Primitive Dispatch::unary_backward<ops::Op>(const Primitive&, const Primitive&, \
                                                                 const Primitive&);                 \
  template Dispatch::Primitive Dispatch::unary_backward<ops::Op>(const Primitive&, const Primitive&, \
                                                                 Primitive&&);
#define KILN_DISPATCH_BINARY_BACKWARD(Op)                                                          \
  template Dispatch::Primitive Dispatch::binary_backward<ops::Op>(                                 \
      const Primitive&, const Primitive&, const Primitive&, const Primitive&, ops::Operand);       \
  template Dispatch::Primitive Dispatch::binary_backward<ops::Op>(                                 \
      const Primitive&, const Primitive&, const Primitive&, Primitive&&, ops::Operand);
KILN_UNARY_OPS(KILN_DISPATCH_UNARY)
KILN_BINARY_OPS(KILN_DISPATCH_BINARY)
KILN_DIFFERENTIABLE_UNARY_OPS(KILN_DISPATCH_UNARY_BACKWARD)
KILN_DIFFERENTIABLE_BINARY_OPS(KILN_DISPATCH_BINARY_BACKWARD)
#undef KILN_DISPATCH_UNARY
#undef KILN_DISPATCH_BINARY
#undef KILN_DISPATCH_UNARY_BACKWARD
#undef KILN_DISPATCH_BINARY_BACKWARD

}  // namespace kiln
