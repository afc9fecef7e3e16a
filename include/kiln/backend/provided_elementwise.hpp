// The catalogue's elementwise ops and gradient formulas as provided primitives: each default
// builds the op's one-op program (kiln/codegen/program.hpp) once per dtype and runs it with
// the backend's one elementwise primitive, B::elementwise. A backend overrides them only for
// speed (the CPU keeps compile-time SIMD kernels per op), by defining the member templates
//   template <class Op> static Primitive unary(const Primitive& x);   // and binary...
// Everything above the backends calls kiln::provided::unary<B, Op>(x) and its siblings.
#pragma once

#include "kiln/codegen/program.hpp"
#include "kiln/core/dtype.hpp"
#include "kiln/core/error.hpp"
#include "kiln/core/shape.hpp"
#include "kiln/core/tensor_data.hpp"
#include "kiln/ops/elementwise.hpp"
#include "kiln/ops/pow_scalar.hpp"

#include <array>
#include <cmath>
#include <cstddef>
#include <optional>
#include <span>
#include <string_view>
#include <type_traits>
#include <vector>

namespace kiln {

namespace defaults::detail {

inline std::size_t dtype_slot(DType dtype) { return static_cast<std::size_t>(dtype); }

// The one output of a one-op program run on `inputs`.
template <class B, std::size_t N>
typename B::Primitive run_program(const codegen::Program& program, const std::array<typename B::Primitive, N>& inputs,
                                  std::span<const double> params = {}) {
  std::vector<typename B::Primitive> out = B::elementwise(program, inputs, params);
  return std::move(out.front());
}

// Integer and Bool tensors take only scalars they hold exactly: truncating 2.5 would
// silently change the op.
inline void check_scalar(std::string_view op, double value, DType dtype) {
  if (is_float(dtype)) return;
  if (dtype == DType::boolean) {
    KILN_CHECK(value == 0.0 || value == 1.0, "{}: a bool tensor takes the scalars 0 and 1, got {}", op, value);
    return;
  }
  // -(double)min is 2^(bits-1) exactly, so the upper bounds are exclusive and never round.
  const double lo = dtype == DType::u8 ? 0.0 : dtype == DType::i32 ? -2147483648.0 : -9223372036854775808.0;
  const double hi = dtype == DType::u8 ? 256.0 : dtype == DType::i32 ? 2147483648.0 : 9223372036854775808.0;
  KILN_CHECK(std::trunc(value) == value && value >= lo && value < hi,
             "{}: the scalar {} is not a {} value; cast the tensor to a float dtype first", op, value, dtype);
}

template <class B>
void check_gradient_operands(std::string_view op, std::initializer_list<const typename B::Primitive*> operands) {
  const typename B::Primitive& first = **operands.begin();
  for (const typename B::Primitive* t : operands) {
    KILN_CHECK(is_float(B::dtype(*t)) && B::dtype(*t) == B::dtype(first),
               "{}: gradient operands must share one float dtype, got {} {} and {} {}", op, B::shape(first),
               B::dtype(first), B::shape(*t), B::dtype(*t));
  }
}

}  // namespace defaults::detail

namespace defaults {

// Op(x), elementwise.
template <class B, class Op> typename B::Primitive unary(const typename B::Primitive& x) {
  const DType dtype = B::dtype(x);
  ops::check_domain<Op>(dtype);
  static codegen::ProgramTable<dtype_count> programs;
  const auto& program = programs.get(detail::dtype_slot(dtype), [&] { return codegen::unary_program<Op>(dtype); });
  return detail::run_program<B, 1>(program, {x});
}

// Op(a, b), broadcast.
template <class B, class Op> typename B::Primitive binary(const typename B::Primitive& a, const typename B::Primitive& b) {
  const DType dtype = B::dtype(a);
  KILN_CHECK(dtype == B::dtype(b), "{}: both operands must have the same dtype, got {} {} and {} {}", Op::name,
             B::shape(a), dtype, B::shape(b), B::dtype(b));
  ops::check_domain<Op>(dtype);
  if (B::shape(a) != B::shape(b)) (void)broadcast_shapes(Op::name, B::shape(a), B::shape(b));  // names the op
  static codegen::ProgramTable<dtype_count> programs;
  const auto& program =
      programs.get(detail::dtype_slot(dtype), [&] { return codegen::binary_program<Op>(dtype, false); });
  return detail::run_program<B, 2>(program, {a, b});
}

template <class B> std::optional<typename B::Primitive> pow_scalar(const typename B::Primitive& x, double exponent);

// Op(a, scalar): the scalar is the program's parameter, so every scalar runs one kernel.
// f16 / bf16 tensors get it at f32 precision (they compute in f32); a bool tensor's
// scalar is a one-element bool tensor (bool programs have no parameters).
template <class B, class Op> typename B::Primitive binary_scalar(const typename B::Primitive& a, double scalar) {
  const DType dtype = B::dtype(a);
  ops::check_domain<Op>(dtype);
  detail::check_scalar(Op::name, scalar, dtype);
  if constexpr (std::is_same_v<Op, ops::Pow>) {
    if (is_float(dtype))
      if (auto shortcut = pow_scalar<B>(a, scalar)) return *shortcut;
  }
  if (dtype == DType::boolean) {
    const std::vector<std::byte> byte{static_cast<std::byte>(scalar != 0.0 ? 1 : 0)};
    return binary<B, Op>(a, B::from_data(TensorData(byte, Shape{1}, DType::boolean), B::device(a)));
  }
  static codegen::ProgramTable<dtype_count> programs;
  const auto& program =
      programs.get(detail::dtype_slot(dtype), [&] { return codegen::binary_program<Op>(dtype, true); });
  const std::array<double, 1> params{scalar};
  return detail::run_program<B, 1>(program, {a}, params);
}

// cond ? a : b, broadcast; cond is bool.
template <class B>
typename B::Primitive where(const typename B::Primitive& cond, const typename B::Primitive& a,
                            const typename B::Primitive& b) {
  KILN_CHECK(B::dtype(cond) == DType::boolean, "where: the condition must be bool, got {} {}", B::shape(cond),
             B::dtype(cond));
  const DType dtype = B::dtype(a);
  KILN_CHECK(dtype == B::dtype(b), "where: both branches must have the same dtype, got {} {} and {} {}", B::shape(a),
             dtype, B::shape(b), B::dtype(b));
  (void)broadcast_shapes("where", broadcast_shapes("where", B::shape(cond), B::shape(a)), B::shape(b));
  static codegen::ProgramTable<dtype_count> programs;
  const auto& program = programs.get(detail::dtype_slot(dtype), [&] { return codegen::where_program(dtype); });
  return detail::run_program<B, 3>(program, {cond, a, b});
}

// Op::grad(x, y, dy): dL/dx from the op's input x, output y and the output's gradient dy.
template <class B, class Op>
typename B::Primitive unary_backward(const typename B::Primitive& x, const typename B::Primitive& y,
                                     const typename B::Primitive& dy) {
  detail::check_gradient_operands<B>(Op::name, {&x, &y, &dy});
  KILN_CHECK(B::shape(x) == B::shape(dy) && B::shape(y) == B::shape(dy),
             "{} backward: x {}, y {} and dy {} must have the same shape", Op::name, B::shape(x), B::shape(y),
             B::shape(dy));
  const DType dtype = B::dtype(dy);
  static codegen::ProgramTable<dtype_count> programs;
  const auto& program =
      programs.get(detail::dtype_slot(dtype), [&] { return codegen::unary_grad_program<Op>(dtype); });
  return detail::run_program<B, 3>(program, {x, y, dy});
}

// The gradient of one operand of Op(a, b) at dy's (the broadcast) shape.
template <class B, class Op>
typename B::Primitive binary_backward(const typename B::Primitive& a, const typename B::Primitive& b,
                                      const typename B::Primitive& y, const typename B::Primitive& dy,
                                      ops::Operand operand) {
  detail::check_gradient_operands<B>(Op::name, {&a, &b, &y, &dy});
  const Shape shape = broadcast_shapes(Op::name, B::shape(a), B::shape(b));
  KILN_CHECK(shape == B::shape(dy) && B::shape(y) == B::shape(dy),
             "{} backward: operands {} and {} broadcast to {}, but y is {} and dy is {}", Op::name, B::shape(a),
             B::shape(b), shape, B::shape(y), B::shape(dy));
  const DType dtype = B::dtype(dy);
  static codegen::ProgramTable<2 * dtype_count> programs;
  const std::size_t side = operand == ops::Operand::lhs ? 0 : dtype_count;
  const auto& program = programs.get(side + detail::dtype_slot(dtype),
                                     [&] { return codegen::binary_grad_program<Op>(dtype, operand); });
  return detail::run_program<B, 4>(program, {a, b, y, dy});
}

}  // namespace defaults

// Which of them B overrides (all or none: the CPU's are templates over every op).
namespace provided::detail {
template <class B>
concept HasUnary = requires(const typename B::Primitive& p) { B::template unary<ops::Exp>(p); };
template <class B>
concept HasBinary = requires(const typename B::Primitive& p) { B::template binary<ops::Add>(p, p); };
template <class B>
concept HasBinaryScalar = requires(const typename B::Primitive& p, double s) { B::template binary_scalar<ops::Add>(p, s); };
template <class B>
concept HasWhere = requires(const typename B::Primitive& p) { B::where(p, p, p); };
template <class B>
concept HasUnaryBackward = requires(const typename B::Primitive& p) { B::template unary_backward<ops::Exp>(p, p, p); };
template <class B>
concept HasBinaryBackward = requires(const typename B::Primitive& p, ops::Operand o) {
  B::template binary_backward<ops::Mul>(p, p, p, p, o);
};
}  // namespace provided::detail

namespace provided {

template <class B, class Op> typename B::Primitive unary(const typename B::Primitive& x) {
  if constexpr (detail::HasUnary<B>) return B::template unary<Op>(x);
  else return defaults::unary<B, Op>(x);
}
template <class B, class Op> typename B::Primitive binary(const typename B::Primitive& a, const typename B::Primitive& b) {
  if constexpr (detail::HasBinary<B>) return B::template binary<Op>(a, b);
  else return defaults::binary<B, Op>(a, b);
}
// a op scalar
template <class B, class Op> typename B::Primitive binary_scalar(const typename B::Primitive& a, double scalar) {
  if constexpr (detail::HasBinaryScalar<B>) return B::template binary_scalar<Op>(a, scalar);
  else return defaults::binary_scalar<B, Op>(a, scalar);
}
// The same on operands the caller gives up (a temporary, or std::move(x)): a backend whose
// override takes `Primitive&&` may write the result over a given-up operand's buffer where
// nothing else holds it (as PyTorch's in-place ops, without the caller asking); any other
// computes into a fresh one. A kept operand of binary is passed as a copy of its handle.
template <class B, class Op> typename B::Primitive unary(typename B::Primitive&& x) {
  if constexpr (detail::HasUnary<B>) return B::template unary<Op>(std::move(x));
  else return defaults::unary<B, Op>(x);
}
template <class B, class Op> typename B::Primitive binary(typename B::Primitive&& a, typename B::Primitive&& b) {
  if constexpr (detail::HasBinary<B>) return B::template binary<Op>(std::move(a), std::move(b));
  else return defaults::binary<B, Op>(a, b);
}
template <class B, class Op> typename B::Primitive binary_scalar(typename B::Primitive&& a, double scalar) {
  if constexpr (detail::HasBinaryScalar<B>) return B::template binary_scalar<Op>(std::move(a), scalar);
  else return defaults::binary_scalar<B, Op>(a, scalar);
}
// cond ? a : b
template <class B>
typename B::Primitive where(const typename B::Primitive& cond, const typename B::Primitive& a,
                            const typename B::Primitive& b) {
  if constexpr (detail::HasWhere<B>) return B::where(cond, a, b);
  else return defaults::where<B>(cond, a, b);
}
// (x, y, dy) -> dx
template <class B, class Op>
typename B::Primitive unary_backward(const typename B::Primitive& x, const typename B::Primitive& y,
                                     const typename B::Primitive& dy) {
  if constexpr (detail::HasUnaryBackward<B>) return B::template unary_backward<Op>(x, y, dy);
  else return defaults::unary_backward<B, Op>(x, y, dy);
}
// (a, b, y, dy) -> the gradient of `operand` at dy's shape
template <class B, class Op>
typename B::Primitive binary_backward(const typename B::Primitive& a, const typename B::Primitive& b,
                                      const typename B::Primitive& y, const typename B::Primitive& dy,
                                      ops::Operand operand) {
  if constexpr (detail::HasBinaryBackward<B>) return B::template binary_backward<Op>(a, b, y, dy, operand);
  else return defaults::binary_backward<B, Op>(a, b, y, dy, operand);
}
// The same on a dy the caller gives up (Autodiff's rules, at dy's last use): a backend whose
// override takes `Primitive&& dy` may write the gradient over dy's buffer where nothing else
// holds it, as the elementwise ops do over given-up operands; any other computes into a
// fresh one.
template <class B, class Op>
typename B::Primitive unary_backward(const typename B::Primitive& x, const typename B::Primitive& y,
                                     typename B::Primitive&& dy) {
  if constexpr (detail::HasUnaryBackward<B>) return B::template unary_backward<Op>(x, y, std::move(dy));
  else return defaults::unary_backward<B, Op>(x, y, dy);
}
template <class B, class Op>
typename B::Primitive binary_backward(const typename B::Primitive& a, const typename B::Primitive& b,
                                      const typename B::Primitive& y, typename B::Primitive&& dy,
                                      ops::Operand operand) {
  if constexpr (detail::HasBinaryBackward<B>) return B::template binary_backward<Op>(a, b, y, std::move(dy), operand);
  else return defaults::binary_backward<B, Op>(a, b, y, dy, operand);
}

}  // namespace provided

// x^exponent for a float tensor x through the shortcut's ops (kiln/ops/pow_scalar.hpp), or
// nothing where the exponent has none (the caller then runs the general pow). Every
// backend's binary_scalar<Pow> takes these, overrides included.
template <class B>
std::optional<typename B::Primitive> defaults::pow_scalar(const typename B::Primitive& x, double exponent) {
  using ops::PowShortcut;
  switch (ops::pow_shortcut(exponent)) {
    case PowShortcut::square: return provided::binary<B, ops::Mul>(x, x);
    case PowShortcut::cube: return provided::binary<B, ops::Mul>(provided::binary<B, ops::Mul>(x, x), x);
    case PowShortcut::sqrt: return provided::unary<B, ops::Sqrt>(x);
    case PowShortcut::rsqrt: return provided::unary<B, ops::Rsqrt>(x);
    case PowShortcut::recip: return provided::unary<B, ops::Recip>(x);
    case PowShortcut::recip_square: return provided::unary<B, ops::Recip>(provided::binary<B, ops::Mul>(x, x));
    case PowShortcut::none: break;
  }
  return std::nullopt;
}

}  // namespace kiln
