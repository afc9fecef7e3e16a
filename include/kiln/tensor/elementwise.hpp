// Elementwise tensor ops: arithmetic (methods and operators), math, activations,
// comparisons, Bool logic and selection. Each forwards to the backend with an op from
// the catalogue (kiln/ops/elementwise.hpp); composites (softmax, clamp...) are written
// here in terms of those ops, so every backend and Autodiff get them for free.
#pragma once

#include "kiln/tensor/fwd.hpp"

#include <cmath>
#include <string_view>
#include <type_traits>
#include <utility>
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

// A unary op as two overloads: on a tensor the caller keeps, and on one it gives up (an
// rvalue), whose buffer the backend may write the result over. A binary op as six: each
// operand kept or given up, and the scalar forms. The requirement (`...`) picks the kinds.
#define KILN_UNARY_METHOD(name, Op, ...)                                 \
  Self name() const& requires __VA_ARGS__ { return unary<ops::Op>(); } \
  Self name() && requires __VA_ARGS__ { return std::move(*this).template unary<ops::Op>(); }
#define KILN_BINARY_METHOD(name, Op, ...)                                                                         \
  Self name(const Self& o) const& requires __VA_ARGS__ { return binary_of<ops::Op>(self(), o); }                 \
  Self name(const Self& o) && requires __VA_ARGS__ { return binary_of<ops::Op>(std::move(self()), o); }          \
  Self name(Self&& o) const& requires __VA_ARGS__ { return binary_of<ops::Op>(self(), std::move(o)); }           \
  Self name(Self&& o) && requires __VA_ARGS__ { return binary_of<ops::Op>(std::move(self()), std::move(o)); }    \
  Self name(double s) const& requires __VA_ARGS__ { return binary<ops::Op>(s); }                                 \
  Self name(double s) && requires __VA_ARGS__ { return std::move(*this).template binary<ops::Op>(s); }

template <class B, std::size_t D, class K> class ElementwiseApi : public TensorMixin<B, D, K, ElementwiseApi<B, D, K>> {
  using Base = TensorMixin<B, D, K, ElementwiseApi<B, D, K>>;
  using typename Base::Self;
  using Base::prim;
  using Base::self;
  using Base::wrap;
  using BoolTensor = Tensor<B, D, Bool>;

  // An op on a tensor the caller keeps, or on one it gives up (an rvalue: a temporary or
  // std::move(x)), whose handle goes to the backend: the Cpu backend writes the result over
  // a given-up buffer that nothing else holds, so that x * r * w allocates one result.
  template <class Op> Self unary() const& { return wrap(provided::unary<B, Op>(prim())); }
  template <class Op> Self unary() && { return wrap(provided::unary<B, Op>(this->given_up())); }
  template <class Op> Self binary(double scalar) const& { return wrap(provided::binary_scalar<B, Op>(prim(), scalar)); }
  template <class Op> Self binary(double scalar) && {
    return wrap(provided::binary_scalar<B, Op>(this->given_up(), scalar));
  }
  // a op b, either of them given up: its handle is taken out (a kept one's is copied), so the
  // backend may write the result over its buffer. One tensor as both operands (std::move(x) *
  // x) is read as kept.
  template <class Op, class A, class C> static Self binary_of(A&& a, C&& b) {
    if constexpr (std::is_lvalue_reference_v<A> && std::is_lvalue_reference_v<C>) {
      return wrap(provided::binary<B, Op>(a.primitive(), b.primitive()));
    } else {
      if (static_cast<const void*>(&a) == static_cast<const void*>(&b))
        return wrap(provided::binary<B, Op>(a.primitive(), b.primitive()));
      const auto handle = []<class T>(T&& t) -> typename B::Primitive {
        if constexpr (std::is_lvalue_reference_v<T>) return t.primitive();
        else return std::move(t).into_primitive();
      };
      typename B::Primitive first = handle(std::forward<A>(a));
      return wrap(provided::binary<B, Op>(std::move(first), handle(std::forward<C>(b))));
    }
  }
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
  // x * scale where x > 0, (e^(x * input_scale) - 1) * negative_scale elsewhere: elu, selu and
  // celu as torch computes them. e^x - 1 is taken of the non-positive part only: of a large x
  // it would be inf, and its zero gradient times inf NaN.
  Self exponential_unit(double negative_scale, double scale, double input_scale) const {
    const BoolTensor negative = self().le(0.0);
    const Self positive = scale == 1.0 ? self() : mul(scale);
    return positive.mask_where(negative,
                               mul(negative.to_float(self().dtype()).mul(input_scale)).expm1().mul(negative_scale));
  }
  // The two halves of `dim`, which must have an even size.
  std::pair<Self, Self> halves(const char* op, std::int64_t dim) const {
    const std::int64_t size = self().dim(dim);
    KILN_CHECK(size % 2 == 0, "{}: dim {} of shape {} has odd size {}; it must split in two halves", op, dim,
               self().shape(), size);
    return {self().narrow(dim, 0, size / 2), self().narrow(dim, size / 2, size / 2)};
  }
  Self softmax_shift(std::int64_t dim) const {
    const Self max = self().max_dim(dim);
    if constexpr (AutodiffBackend<B>) return max.detach();
    else return max;
  }

 public:
  // ---- arithmetic (Float and Int); NumPy broadcasting between tensors of the same rank
  KILN_BINARY_METHOD(add, Add, Numeric<K>)
  KILN_BINARY_METHOD(sub, Sub, Numeric<K>)
  KILN_BINARY_METHOD(mul, Mul, Numeric<K>)
  // Float: true division. Int: floor division (Python's //).
  KILN_BINARY_METHOD(div, Div, Numeric<K>)
  // Remainder with the divisor's sign (Python's %, torch.remainder).
  KILN_BINARY_METHOD(rem, Rem, Numeric<K>)
  KILN_BINARY_METHOD(pow, Pow, Numeric<K>)
  // atan2(self, o): the angle of the point (o, self), as torch.atan2.
  KILN_BINARY_METHOD(atan2, Atan2, std::same_as<K, Float>)
  KILN_UNARY_METHOD(asin, Asin, std::same_as<K, Float>)
  KILN_UNARY_METHOD(acos, Acos, std::same_as<K, Float>)
  KILN_UNARY_METHOD(atan, Atan, std::same_as<K, Float>)
  KILN_UNARY_METHOD(sinh, Sinh, std::same_as<K, Float>)
  KILN_UNARY_METHOD(cosh, Cosh, std::same_as<K, Float>)
  KILN_UNARY_METHOD(asinh, Asinh, std::same_as<K, Float>)
  KILN_UNARY_METHOD(acosh, Acosh, std::same_as<K, Float>)
  KILN_UNARY_METHOD(atanh, Atanh, std::same_as<K, Float>)
  KILN_UNARY_METHOD(log2, Log2, std::same_as<K, Float>)
  KILN_UNARY_METHOD(log10, Log10, std::same_as<K, Float>)
  KILN_UNARY_METHOD(exp2, Exp2, std::same_as<K, Float>)
  // Rounds toward zero; frac is x - trunc(x).
  KILN_UNARY_METHOD(trunc, Trunc, std::same_as<K, Float>)
  KILN_UNARY_METHOD(frac, Frac, std::same_as<K, Float>)
  // sqrt(self^2 + o^2) without overflow, as torch.hypot.
  KILN_BINARY_METHOD(hypot, Hypot, std::same_as<K, Float>)
  // |self| with the sign of o (of -0 too), as torch.copysign.
  KILN_BINARY_METHOD(copysign, Copysign, std::same_as<K, Float>)
  // log(exp(self) + exp(o)) without overflow, as torch.logaddexp.
  KILN_BINARY_METHOD(logaddexp, Logaddexp, std::same_as<K, Float>)
  KILN_BINARY_METHOD(maximum, Maximum, Numeric<K>)
  KILN_BINARY_METHOD(minimum, Minimum, Numeric<K>)
  Self clamp(double lo, double hi) const requires Numeric<K> { return maximum(lo).minimum(hi); }
  Self clamp_min(double lo) const requires Numeric<K> { return maximum(lo); }
  Self clamp_max(double hi) const requires Numeric<K> { return minimum(hi); }
  KILN_UNARY_METHOD(neg, Neg, Numeric<K>)
  KILN_UNARY_METHOD(abs, Abs, Numeric<K>)
  KILN_UNARY_METHOD(sign, Sign, Numeric<K>)

  // ---- math (Float)
  KILN_UNARY_METHOD(recip, Recip, std::same_as<K, Float>)
  KILN_UNARY_METHOD(exp, Exp, std::same_as<K, Float>)
  KILN_UNARY_METHOD(log, Log, std::same_as<K, Float>)
  KILN_UNARY_METHOD(log1p, Log1p, std::same_as<K, Float>)
  KILN_UNARY_METHOD(expm1, Expm1, std::same_as<K, Float>)
  KILN_UNARY_METHOD(sqrt, Sqrt, std::same_as<K, Float>)
  KILN_UNARY_METHOD(rsqrt, Rsqrt, std::same_as<K, Float>)
  KILN_UNARY_METHOD(sin, Sin, std::same_as<K, Float>)
  KILN_UNARY_METHOD(cos, Cos, std::same_as<K, Float>)
  KILN_UNARY_METHOD(tan, Tan, std::same_as<K, Float>)
  KILN_UNARY_METHOD(tanh, Tanh, std::same_as<K, Float>)
  KILN_UNARY_METHOD(erf, Erf, std::same_as<K, Float>)
  KILN_UNARY_METHOD(floor, Floor, std::same_as<K, Float>)
  KILN_UNARY_METHOD(ceil, Ceil, std::same_as<K, Float>)
  // Halves round to even, as in PyTorch.
  KILN_UNARY_METHOD(round, Round, std::same_as<K, Float>)
  Self square() const requires Numeric<K> { return mul(self()); }

  // ---- activations (Float)
  KILN_UNARY_METHOD(relu, Relu, std::same_as<K, Float>)
  Self leaky_relu(double negative_slope = 0.01) const requires std::same_as<K, Float> {
    return mask_where(self().lt(0.0), mul(negative_slope));
  }
  KILN_UNARY_METHOD(sigmoid, Sigmoid, std::same_as<K, Float>)
  KILN_UNARY_METHOD(silu, Silu, std::same_as<K, Float>)
  // softplus(x) = log(1 + exp(beta x)) / beta, linear above threshold / beta (torch's defaults).
  Self softplus(double beta = 1.0, double threshold = 20.0) const requires std::same_as<K, Float> {
    if (beta == 1.0 && threshold == 20.0) return unary<ops::Softplus>();
    const Self scaled = mul(beta);
    return mask_where(scaled.gt(threshold).logical_not(), scaled.template unary<ops::Softplus>().div(beta));
  }
  KILN_UNARY_METHOD(hard_sigmoid, HardSigmoid, std::same_as<K, Float>)
  // The exact (erf) GELU, or its tanh approximation.
  Self gelu(bool tanh_approximation = false) const& requires std::same_as<K, Float> {
    return tanh_approximation ? unary<ops::GeluTanh>() : unary<ops::GeluErf>();
  }
  Self gelu(bool tanh_approximation = false) && requires std::same_as<K, Float> {
    if (tanh_approximation) return std::move(*this).template unary<ops::GeluTanh>();
    return std::move(*this).template unary<ops::GeluErf>();
  }
  // elu(x) = x where x > 0, alpha (e^x - 1) elsewhere (torch.nn.functional.elu).
  Self elu(double alpha = 1.0) const requires std::same_as<K, Float> { return exponential_unit(alpha, 1.0, 1.0); }
  // selu(x) = scale elu(x, alpha) with the self-normalizing constants (torch.selu).
  Self selu() const requires std::same_as<K, Float> {
    constexpr double alpha = 1.6732632423543772848170429916717, scale = 1.0507009873554804934193349852946;
    return exponential_unit(alpha * scale, scale, 1.0);
  }
  // celu(x) = x where x > 0, alpha (e^(x / alpha) - 1) elsewhere; alpha must not be 0.
  Self celu(double alpha = 1.0) const requires std::same_as<K, Float> {
    KILN_CHECK(alpha != 0 && std::isfinite(alpha), "celu: alpha must be finite and not 0, got {}", alpha);
    return exponential_unit(alpha, 1.0, 1.0 / alpha);
  }
  // x clamped to [min_val, max_val], its gradient 1 strictly inside and 0 elsewhere, as torch's.
  Self hardtanh(double min_val = -1.0, double max_val = 1.0) const requires std::same_as<K, Float> {
    KILN_CHECK(min_val <= max_val, "hardtanh: min_val {} is above max_val {}", min_val, max_val);
    return self().mask_fill(self().le(min_val), min_val).mask_fill(self().ge(max_val), max_val);
  }
  Self relu6() const requires std::same_as<K, Float> { return hardtanh(0.0, 6.0); }
  // hardswish(x) = x relu6(x + 3) / 6.
  Self hardswish() const requires std::same_as<K, Float> { return mul(add(3.0).relu6()).div(6.0); }
  // mish(x) = x tanh(softplus(x)).
  Self mish() const requires std::same_as<K, Float> { return mul(unary<ops::Softplus>().tanh()); }
  // log_sigmoid(x) = -softplus(-x), finite for large |x|.
  Self log_sigmoid() const requires std::same_as<K, Float> { return neg().template unary<ops::Softplus>().neg(); }
  // softsign(x) = x / (1 + |x|).
  Self softsign() const requires std::same_as<K, Float> { return div(abs().add(1.0)); }
  // tanhshrink(x) = x - tanh(x).
  Self tanhshrink() const requires std::same_as<K, Float> { return sub(tanh()); }
  // 0 where |x| <= lambd, x elsewhere.
  Self hardshrink(double lambd = 0.5) const requires std::same_as<K, Float> {
    return self().mask_fill(abs().le(lambd), 0.0);
  }
  // x - lambd above lambd, x + lambd below -lambd, 0 between (and for NaN, as torch's).
  Self softshrink(double lambd = 0.5) const requires std::same_as<K, Float> {
    KILN_CHECK(lambd >= 0, "softshrink: lambd must be >= 0, got {}", lambd);
    return self().zeros_like().mask_where(self().gt(lambd), sub(lambd)).mask_where(self().lt(-lambd), add(lambd));
  }
  // value where x <= threshold, x elsewhere (torch.nn.functional.threshold).
  Self threshold(double threshold, double value) const requires std::same_as<K, Float> {
    return self().mask_fill(self().le(threshold), value);
  }
  // softmin along `dim`: softmax(-x).
  Self softmin(std::int64_t dim) const requires std::same_as<K, Float> { return neg().softmax(dim); }
  // The gated linear unit: the first half of `dim` times the sigmoid of the second half.
  Self glu(std::int64_t dim = -1) const requires std::same_as<K, Float> {
    const auto [a, b] = halves("glu", dim);
    return a.mul(b.sigmoid());
  }
  // SwiGLU: silu of the first half of `dim` times the second half (the gate of LLaMA-style
  // feed-forward layers; no torch function has it).
  Self swiglu(std::int64_t dim = -1) const requires std::same_as<K, Float> {
    const auto [a, b] = halves("swiglu", dim);
    return a.silu().mul(b);
  }
  // Randomized leaky ReLU: in training each negative element gets its own slope drawn from
  // U(lower, upper) (kiln::manual_seed sets the stream); in evaluation the slope is their
  // mean, as torch.nn.functional.rrelu.
  Self rrelu(double lower = 1.0 / 8, double upper = 1.0 / 3, bool training = false) const
    requires std::same_as<K, Float> {
    KILN_CHECK(std::isfinite(lower) && std::isfinite(upper) && lower <= upper,
               "rrelu: lower {} and upper {} must be finite with lower <= upper", lower, upper);
    if (!training || lower == upper) return leaky_relu((lower + upper) / 2);
    const Self slopes = Self::random(self().dims(), Distribution::uniform(lower, upper), self().device(), self().dtype());
    return mask_where(self().lt(0.0), mul(slopes));
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
  Self logical_and(const Self& o) const requires std::same_as<K, Bool> { return binary_of<ops::LogicalAnd>(self(), o); }
  Self logical_or(const Self& o) const requires std::same_as<K, Bool> { return binary_of<ops::LogicalOr>(self(), o); }
  Self logical_xor(const Self& o) const requires std::same_as<K, Bool> { return binary_of<ops::LogicalXor>(self(), o); }
  KILN_UNARY_METHOD(logical_not, LogicalNot, std::same_as<K, Bool>)

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

#undef KILN_UNARY_METHOD
#undef KILN_BINARY_METHOD

// cond ? a : b, elementwise with broadcasting.
template <class B, std::size_t D, class K>
Tensor<B, D, K> where(const Tensor<B, D, Bool>& cond, const Tensor<B, D, K>& a, const Tensor<B, D, K>& b) {
  return Tensor<B, D, K>(provided::where<B>(cond.primitive(), a.primitive(), b.primitive()));
}

// ---- operators (Float and Int)
// A temporary operand (x * r * w: the product x * r) is given up, so the backend may write
// the result over it.
#define KILN_TENSOR_OPERATOR(op, method)                                                                           \
  template <class B, std::size_t D, Numeric K>                                                                     \
  Tensor<B, D, K> operator op(const Tensor<B, D, K>& a, const Tensor<B, D, K>& b) { return a.method(b); }          \
  template <class B, std::size_t D, Numeric K>                                                                     \
  Tensor<B, D, K> operator op(Tensor<B, D, K>&& a, const Tensor<B, D, K>& b) { return std::move(a).method(b); }    \
  template <class B, std::size_t D, Numeric K>                                                                     \
  Tensor<B, D, K> operator op(const Tensor<B, D, K>& a, Tensor<B, D, K>&& b) { return a.method(std::move(b)); }    \
  template <class B, std::size_t D, Numeric K>                                                                     \
  Tensor<B, D, K> operator op(Tensor<B, D, K>&& a, Tensor<B, D, K>&& b) {                                          \
    return std::move(a).method(std::move(b));                                                                      \
  }                                                                                                                \
  template <class B, std::size_t D, Numeric K>                                                                     \
  Tensor<B, D, K> operator op(const Tensor<B, D, K>& a, double s) { return a.method(s); }                          \
  template <class B, std::size_t D, Numeric K>                                                                     \
  Tensor<B, D, K> operator op(Tensor<B, D, K>&& a, double s) { return std::move(a).method(s); }
KILN_TENSOR_OPERATOR(+, add)
KILN_TENSOR_OPERATOR(-, sub)
KILN_TENSOR_OPERATOR(*, mul)
KILN_TENSOR_OPERATOR(/, div)
KILN_TENSOR_OPERATOR(%, rem)
#undef KILN_TENSOR_OPERATOR

template <class B, std::size_t D, Numeric K> Tensor<B, D, K> operator+(double s, const Tensor<B, D, K>& a) {
  return a.add(s);
}
template <class B, std::size_t D, Numeric K> Tensor<B, D, K> operator+(double s, Tensor<B, D, K>&& a) {
  return std::move(a).add(s);
}
template <class B, std::size_t D, Numeric K> Tensor<B, D, K> operator*(double s, const Tensor<B, D, K>& a) {
  return a.mul(s);
}
template <class B, std::size_t D, Numeric K> Tensor<B, D, K> operator*(double s, Tensor<B, D, K>&& a) {
  return std::move(a).mul(s);
}
// s - a and s / a take a broadcast one-element tensor on the left: one pass, and no
// tensor of a's size filled with s.
template <class B, std::size_t D, Numeric K> Tensor<B, D, K> operator-(double s, const Tensor<B, D, K>& a) {
  return a.scalar_like("sub", s).sub(a);
}
template <class B, std::size_t D, Numeric K> Tensor<B, D, K> operator-(double s, Tensor<B, D, K>&& a) {
  return a.scalar_like("sub", s).sub(std::move(a));
}
template <class B, std::size_t D, Numeric K> Tensor<B, D, K> operator/(double s, const Tensor<B, D, K>& a) {
  return a.scalar_like("div", s).div(a);
}
template <class B, std::size_t D, Numeric K> Tensor<B, D, K> operator/(double s, Tensor<B, D, K>&& a) {
  return a.scalar_like("div", s).div(std::move(a));
}
template <class B, std::size_t D, Numeric K> Tensor<B, D, K> operator-(const Tensor<B, D, K>& a) { return a.neg(); }
template <class B, std::size_t D, Numeric K> Tensor<B, D, K> operator-(Tensor<B, D, K>&& a) {
  return std::move(a).neg();
}

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
