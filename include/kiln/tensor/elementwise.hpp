// Elementwise tensor ops: arithmetic (methods and operators), math, activations,
// comparisons, Bool logic and selection. Each forwards to the backend with an op from
// the catalogue (kiln/ops/elementwise.hpp); composites (softmax, clamp...) are written
// here in terms of those ops, so every backend and Autodiff get them for free.
#pragma once

#include "kiln/tensor/fwd.hpp"

#include <cmath>
#include <string_view>
#include <vector>

namespace kiln {

namespace detail {
// Int and Bool tensors take only scalars they hold exactly: truncating 2.5 to 2 would
// silently change the op (backends check their own scalar ops the same way).
template <class K> void check_scalar_for_kind(std::string_view op, double value) {
  if constexpr (std::same_as<K, Int>)
    KILN_CHECK(std::trunc(value) == value,
               "{}: the scalar {} is not an integer; convert the tensor with to_float() first", op, value);
  else if constexpr (std::same_as<K, Bool>)
    KILN_CHECK(value == 0.0 || value == 1.0, "{}: a Bool tensor takes the scalars 0 and 1, got {}", op, value);
}
}  // namespace detail

template <class B, std::size_t D, class K> class ElementwiseApi : public TensorMixin<B, D, K, ElementwiseApi<B, D, K>> {
  using Base = TensorMixin<B, D, K, ElementwiseApi<B, D, K>>;
  using typename Base::Self;
  using Base::prim;
  using Base::self;
  using Base::wrap;
  using BoolTensor = Tensor<B, D, Bool>;

  template <class Op> Self unary() const { return wrap(provided::unary<B, Op>(prim())); }
  template <class Op> Self binary(const Self& other) const {
    return wrap(provided::binary<B, Op>(prim(), other.primitive()));
  }
  template <class Op> Self binary(double scalar) const { return wrap(provided::binary_scalar<B, Op>(prim(), scalar)); }
  template <class Op> BoolTensor predicate() const { return BoolTensor(provided::unary<B, Op>(prim())); }
  template <class Op> BoolTensor compare(const Self& other) const {
    return BoolTensor(provided::binary<B, Op>(prim(), other.primitive()));
  }
  template <class Op> BoolTensor compare(double scalar) const {
    return BoolTensor(provided::binary_scalar<B, Op>(prim(), scalar));
  }
  std::int64_t fused_dim(const char* op, std::int64_t dim) const {
    return static_cast<std::int64_t>(normalize_dim(op, dim, D));
  }
  Self softmax_shift(std::int64_t dim) const {
    const Self max = self().max_dim(dim);
    if constexpr (AutodiffBackend<B>) return max.detach();
    else return max;
  }

 public:
  // ---- arithmetic (Float and Int); NumPy broadcasting between tensors of the same rank
  Self add(const Self& o) const requires Numeric<K> { return binary<ops::Add>(o); }
  Self add(double s) const requires Numeric<K> { return binary<ops::Add>(s); }
  Self sub(const Self& o) const requires Numeric<K> { return binary<ops::Sub>(o); }
  Self sub(double s) const requires Numeric<K> { return binary<ops::Sub>(s); }
  Self mul(const Self& o) const requires Numeric<K> { return binary<ops::Mul>(o); }
  Self mul(double s) const requires Numeric<K> { return binary<ops::Mul>(s); }
  // Float: true division. Int: floor division (Python's //).
  Self div(const Self& o) const requires Numeric<K> { return binary<ops::Div>(o); }
  Self div(double s) const requires Numeric<K> { return binary<ops::Div>(s); }
  // Remainder with the divisor's sign (Python's %, torch.remainder).
  Self rem(const Self& o) const requires Numeric<K> { return binary<ops::Rem>(o); }
  Self rem(double s) const requires Numeric<K> { return binary<ops::Rem>(s); }
  Self pow(const Self& o) const requires Numeric<K> { return binary<ops::Pow>(o); }
  Self pow(double s) const requires Numeric<K> { return binary<ops::Pow>(s); }
  // atan2(self, o): the angle of the point (o, self), as torch.atan2.
  Self atan2(const Self& o) const requires std::same_as<K, Float> { return binary<ops::Atan2>(o); }
  Self atan2(double s) const requires std::same_as<K, Float> { return binary<ops::Atan2>(s); }
  Self maximum(const Self& o) const requires Numeric<K> { return binary<ops::Maximum>(o); }
  Self maximum(double s) const requires Numeric<K> { return binary<ops::Maximum>(s); }
  Self minimum(const Self& o) const requires Numeric<K> { return binary<ops::Minimum>(o); }
  Self minimum(double s) const requires Numeric<K> { return binary<ops::Minimum>(s); }
  Self clamp(double lo, double hi) const requires Numeric<K> { return maximum(lo).minimum(hi); }
  Self clamp_min(double lo) const requires Numeric<K> { return maximum(lo); }
  Self clamp_max(double hi) const requires Numeric<K> { return minimum(hi); }
  Self neg() const requires Numeric<K> { return unary<ops::Neg>(); }
  Self abs() const requires Numeric<K> { return unary<ops::Abs>(); }
  Self sign() const requires Numeric<K> { return unary<ops::Sign>(); }

  // ---- math (Float)
  Self recip() const requires std::same_as<K, Float> { return unary<ops::Recip>(); }
  Self exp() const requires std::same_as<K, Float> { return unary<ops::Exp>(); }
  Self log() const requires std::same_as<K, Float> { return unary<ops::Log>(); }
  Self log1p() const requires std::same_as<K, Float> { return unary<ops::Log1p>(); }
  Self expm1() const requires std::same_as<K, Float> { return unary<ops::Expm1>(); }
  Self sqrt() const requires std::same_as<K, Float> { return unary<ops::Sqrt>(); }
  Self rsqrt() const requires std::same_as<K, Float> { return unary<ops::Rsqrt>(); }
  Self sin() const requires std::same_as<K, Float> { return unary<ops::Sin>(); }
  Self cos() const requires std::same_as<K, Float> { return unary<ops::Cos>(); }
  Self tan() const requires std::same_as<K, Float> { return unary<ops::Tan>(); }
  Self tanh() const requires std::same_as<K, Float> { return unary<ops::Tanh>(); }
  Self erf() const requires std::same_as<K, Float> { return unary<ops::Erf>(); }
  Self floor() const requires std::same_as<K, Float> { return unary<ops::Floor>(); }
  Self ceil() const requires std::same_as<K, Float> { return unary<ops::Ceil>(); }
  // Halves round to even, as in PyTorch.
  Self round() const requires std::same_as<K, Float> { return unary<ops::Round>(); }
  Self square() const requires Numeric<K> { return mul(self()); }

  // ---- activations (Float)
  Self relu() const requires std::same_as<K, Float> { return unary<ops::Relu>(); }
  Self leaky_relu(double negative_slope = 0.01) const requires std::same_as<K, Float> {
    return mask_where(self().lt(0.0), mul(negative_slope));
  }
  Self sigmoid() const requires std::same_as<K, Float> { return unary<ops::Sigmoid>(); }
  Self silu() const requires std::same_as<K, Float> { return unary<ops::Silu>(); }
  // softplus(x) = log(1 + exp(beta x)) / beta, linear above threshold / beta (torch's defaults).
  Self softplus(double beta = 1.0, double threshold = 20.0) const requires std::same_as<K, Float> {
    if (beta == 1.0 && threshold == 20.0) return unary<ops::Softplus>();
    const Self scaled = mul(beta);
    return mask_where(scaled.gt(threshold).logical_not(), scaled.template unary<ops::Softplus>().div(beta));
  }
  Self hard_sigmoid() const requires std::same_as<K, Float> { return unary<ops::HardSigmoid>(); }
  // The exact (erf) GELU, or its tanh approximation.
  Self gelu(bool tanh_approximation = false) const requires std::same_as<K, Float> {
    return tanh_approximation ? unary<ops::GeluTanh>() : unary<ops::GeluErf>();
  }
  // softmax along `dim`, computed as exp(x - max) / sum for stability.
  // A backend with a fused softmax (FusedSoftmax) runs it in one pass; this composition is
  // the reference. The max is detached: softmax does not depend on the shift.
  Self softmax(std::int64_t dim) const requires std::same_as<K, Float> {
    if constexpr (FusedSoftmax<B>) return wrap(B::softmax(prim(), fused_dim("softmax", dim), false));
    const Self shifted = sub(softmax_shift(dim));
    const Self e = shifted.exp();
    return e.div(e.sum_dim(dim));
  }
  Self log_softmax(std::int64_t dim) const requires std::same_as<K, Float> {
    if constexpr (FusedSoftmax<B>) return wrap(B::softmax(prim(), fused_dim("log_softmax", dim), true));
    const Self shifted = sub(softmax_shift(dim));
    return shifted.sub(shifted.exp().sum_dim(dim).log());
  }

  // ---- comparisons → Bool
  // Bool tensors compare through xor: the comparison ops of the catalogue are numeric.
  BoolTensor eq(const Self& o) const {
    if constexpr (std::same_as<K, Bool>) return self().logical_xor(o).logical_not();
    else return compare<ops::Equal>(o);
  }
  BoolTensor eq(double s) const requires Numeric<K> { return compare<ops::Equal>(s); }
  BoolTensor ne(const Self& o) const {
    if constexpr (std::same_as<K, Bool>) return self().logical_xor(o);
    else return compare<ops::NotEqual>(o);
  }
  BoolTensor ne(double s) const requires Numeric<K> { return compare<ops::NotEqual>(s); }
  BoolTensor lt(const Self& o) const requires Numeric<K> { return compare<ops::Less>(o); }
  BoolTensor lt(double s) const requires Numeric<K> { return compare<ops::Less>(s); }
  BoolTensor le(const Self& o) const requires Numeric<K> { return compare<ops::LessEqual>(o); }
  BoolTensor le(double s) const requires Numeric<K> { return compare<ops::LessEqual>(s); }
  BoolTensor gt(const Self& o) const requires Numeric<K> { return compare<ops::Greater>(o); }
  BoolTensor gt(double s) const requires Numeric<K> { return compare<ops::Greater>(s); }
  BoolTensor ge(const Self& o) const requires Numeric<K> { return compare<ops::GreaterEqual>(o); }
  BoolTensor ge(double s) const requires Numeric<K> { return compare<ops::GreaterEqual>(s); }
  BoolTensor isnan() const requires std::same_as<K, Float> { return predicate<ops::IsNan>(); }
  BoolTensor isinf() const requires std::same_as<K, Float> { return predicate<ops::IsInf>(); }

  // ---- Bool logic
  Self logical_and(const Self& o) const requires std::same_as<K, Bool> { return binary<ops::LogicalAnd>(o); }
  Self logical_or(const Self& o) const requires std::same_as<K, Bool> { return binary<ops::LogicalOr>(o); }
  Self logical_xor(const Self& o) const requires std::same_as<K, Bool> { return binary<ops::LogicalXor>(o); }
  Self logical_not() const requires std::same_as<K, Bool> { return unary<ops::LogicalNot>(); }

  // ---- selection
  // Takes `value` where mask is true, this tensor elsewhere (Burn's mask_where).
  Self mask_where(const BoolTensor& mask, const Self& value) const {
    return wrap(provided::where<B>(mask.primitive(), value.primitive(), prim()));
  }
  // Writes `value` where mask is true.
  Self mask_fill(const BoolTensor& mask, double value) const {
    detail::check_scalar_for_kind<K>("mask_fill", value);
    return wrap(provided::where<B>(mask.primitive(), provided::full<B>(Shape{}, value, self().dtype(), self().device()), prim()));
  }

  // A one-element tensor of this rank, dtype and device, which broadcasts against this one.
  Self scalar_like(std::string_view op, double value) const {
    detail::check_scalar_for_kind<K>(op, value);
    return wrap(provided::full<B>(Shape(std::vector<std::int64_t>(D, 1)), value, self().dtype(), self().device()));
  }

};

// cond ? a : b, elementwise with broadcasting.
template <class B, std::size_t D, class K>
Tensor<B, D, K> where(const Tensor<B, D, Bool>& cond, const Tensor<B, D, K>& a, const Tensor<B, D, K>& b) {
  return Tensor<B, D, K>(provided::where<B>(cond.primitive(), a.primitive(), b.primitive()));
}

// ---- operators (Float and Int)
#define KILN_TENSOR_OPERATOR(op, method)                                                                  \
  template <class B, std::size_t D, Numeric K>                                                            \
  Tensor<B, D, K> operator op(const Tensor<B, D, K>& a, const Tensor<B, D, K>& b) { return a.method(b); } \
  template <class B, std::size_t D, Numeric K>                                                            \
  Tensor<B, D, K> operator op(const Tensor<B, D, K>& a, double s) { return a.method(s); }
KILN_TENSOR_OPERATOR(+, add)
KILN_TENSOR_OPERATOR(-, sub)
KILN_TENSOR_OPERATOR(*, mul)
KILN_TENSOR_OPERATOR(/, div)
KILN_TENSOR_OPERATOR(%, rem)
#undef KILN_TENSOR_OPERATOR

template <class B, std::size_t D, Numeric K> Tensor<B, D, K> operator+(double s, const Tensor<B, D, K>& a) {
  return a.add(s);
}
template <class B, std::size_t D, Numeric K> Tensor<B, D, K> operator*(double s, const Tensor<B, D, K>& a) {
  return a.mul(s);
}
// s - a and s / a take a broadcast one-element tensor on the left: one pass, and no
// tensor of a's size filled with s.
template <class B, std::size_t D, Numeric K> Tensor<B, D, K> operator-(double s, const Tensor<B, D, K>& a) {
  return a.scalar_like("sub", s).sub(a);
}
template <class B, std::size_t D, Numeric K> Tensor<B, D, K> operator/(double s, const Tensor<B, D, K>& a) {
  return a.scalar_like("div", s).div(a);
}
template <class B, std::size_t D, Numeric K> Tensor<B, D, K> operator-(const Tensor<B, D, K>& a) { return a.neg(); }

// ---- Bool operators
template <class B, std::size_t D> Tensor<B, D, Bool> operator&(const Tensor<B, D, Bool>& a, const Tensor<B, D, Bool>& b) {
  return a.logical_and(b);
}
template <class B, std::size_t D> Tensor<B, D, Bool> operator|(const Tensor<B, D, Bool>& a, const Tensor<B, D, Bool>& b) {
  return a.logical_or(b);
}
template <class B, std::size_t D> Tensor<B, D, Bool> operator^(const Tensor<B, D, Bool>& a, const Tensor<B, D, Bool>& b) {
  return a.logical_xor(b);
}
template <class B, std::size_t D> Tensor<B, D, Bool> operator!(const Tensor<B, D, Bool>& a) { return a.logical_not(); }

}  // namespace kiln
