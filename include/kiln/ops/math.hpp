// The scalar vocabulary that elementwise op formulas are written in. Each function
// works on a plain number (float, double, integers) and on any "vector scalar" type
// that offers Eigen's array methods (x.exp(), a.max(b), c.select(a, b), ...): the CPU
// backend passes SIMD registers (backends/cpu/src/elementwise_kernels.hpp), Eigen arrays
// work too, code generators pass symbolic values. This header does not include Eigen;
// it only calls the methods.
#pragma once

#include <cmath>
#include <cstdint>
#include <type_traits>

namespace kiln::fn {

template <class T> inline constexpr bool is_number = std::is_arithmetic_v<T>;

// The element type of T: T itself for numbers, T::Scalar for array types.
template <class T, class = void> struct ScalarOf { using type = T; };
template <class T> struct ScalarOf<T, std::void_t<typename T::Scalar>> { using type = typename T::Scalar; };
template <class T> using scalar_t = typename ScalarOf<T>::type;

#define KILN_FN_UNARY(name, std_expr, method)                  \
  template <class T> auto name(const T& x) {                   \
    if constexpr (is_number<T>) return std_expr;               \
    else return (x.method()).eval();                            \
  }

KILN_FN_UNARY(exp, std::exp(x), exp)
KILN_FN_UNARY(log, std::log(x), log)
KILN_FN_UNARY(log1p, std::log1p(x), log1p)
KILN_FN_UNARY(expm1, std::expm1(x), expm1)
KILN_FN_UNARY(sqrt, std::sqrt(x), sqrt)
KILN_FN_UNARY(abs, std::abs(x), abs)
KILN_FN_UNARY(sin, std::sin(x), sin)
KILN_FN_UNARY(cos, std::cos(x), cos)
KILN_FN_UNARY(tan, std::tan(x), tan)
KILN_FN_UNARY(tanh, std::tanh(x), tanh)
KILN_FN_UNARY(erf, std::erf(x), erf)
KILN_FN_UNARY(floor, std::floor(x), floor)
KILN_FN_UNARY(ceil, std::ceil(x), ceil)
KILN_FN_UNARY(round, std::nearbyint(x), rint)  // halves go to even, as in PyTorch
KILN_FN_UNARY(isnan, std::isnan(x), isNaN)
KILN_FN_UNARY(isinf, std::isinf(x), isInf)
#undef KILN_FN_UNARY

template <class T> auto pow(const T& a, const T& b) {
  if constexpr (is_number<T>) return static_cast<T>(std::pow(a, b));
  else return (a.pow(b)).eval();
}
template <class T> auto atan2(const T& a, const T& b) {
  if constexpr (is_number<T>) return static_cast<T>(std::atan2(a, b));
  else return (a.atan2(b)).eval();
}
template <class T> T max(const T& a, const T& b) {
  if constexpr (is_number<T>) return (a > b || a != a) ? a : b;  // nan wins, as in torch.maximum
  else return (a.isNaN()).select(a, (b.isNaN()).select(b, a.max(b)));
}
template <class T> T min(const T& a, const T& b) {
  if constexpr (is_number<T>) return (a < b || a != a) ? a : b;
  else return (a.isNaN()).select(a, (b.isNaN()).select(b, a.min(b)));
}
// cond ? a : b, elementwise.
template <class C, class T> T select(const C& cond, const T& a, const T& b) {
  if constexpr (std::is_same_v<C, bool>) return cond ? a : b;
  else return cond.select(a, b);
}
// A constant broadcast to the shape of `like`.
template <class T> T constant(const T& like, double value) {
  using S = scalar_t<T>;
  // Through a signed integer: -1 for u8 then wraps to 255, where a double → u8 cast is undefined.
  if constexpr (std::is_integral_v<T>) return static_cast<T>(static_cast<long long>(value));
  else if constexpr (is_number<T>) return static_cast<T>(value);
  else return T::Constant(like.size(), static_cast<S>(value));
}

}  // namespace kiln::fn
