// The elementwise op catalogue: every elementwise op of Kiln, defined once.
//
// Each op is a struct with
//   name                      the op's name in errors and generated code;
//   apply(x) / apply(a, b)    the forward formula, written with kiln::fn so that it
//                             instantiates for numbers, Eigen arrays and symbolic values;
//   grad(x, y, dy)            (unary) dL/dx from the input x, the output y and dL/dy;
//   grad_lhs / grad_rhs       (binary) the same for each operand;
//   domain                    which kinds of tensor it accepts (see Domain);
//   predicate                 true when the result is Bool (comparisons, isnan...).
// Backends instantiate apply; Autodiff<B> instantiates grad, so a new op is one struct
// here plus its entry in the lists at the bottom, and it runs and differentiates on
// every backend.
#pragma once

#include "kiln/core/dtype.hpp"
#include "kiln/core/error.hpp"
#include "kiln/ops/math.hpp"

#include <cstdint>
#include <limits>
#include <string_view>
#include <tuple>
#include <type_traits>

namespace kiln::ops {

// Which tensor kinds an op accepts.
enum class Domain : std::uint8_t { float_only, numeric, boolean };

#define KILN_OP_HEADER(Name, text, dom)           \
  static constexpr std::string_view name = text;  \
  static constexpr Domain domain = Domain::dom;

template <class T> using S = fn::scalar_t<T>;

// ---------------------------------------------------------------- unary, float
// Step functions (floor, ceil, round, sign) have a zero gradient, even where dy is NaN
// (as in PyTorch): their grad is the constant 0, not dy * 0.
struct Exp {
  KILN_OP_HEADER(Exp, "exp", float_only)
  template <class T> static T apply(const T& x) { return fn::exp(x); }
  template <class T> static T grad(const T&, const T& y, const T& dy) { return dy * y; }
};
struct Log {
  KILN_OP_HEADER(Log, "log", float_only)
  template <class T> static T apply(const T& x) { return fn::log(x); }
  template <class T> static T grad(const T& x, const T&, const T& dy) { return dy / x; }
};
struct Log1p {
  KILN_OP_HEADER(Log1p, "log1p", float_only)
  template <class T> static T apply(const T& x) { return fn::log1p(x); }
  template <class T> static T grad(const T& x, const T&, const T& dy) { return dy / (x + S<T>(1)); }
};
struct Expm1 {
  KILN_OP_HEADER(Expm1, "expm1", float_only)
  template <class T> static T apply(const T& x) { return fn::expm1(x); }
  template <class T> static T grad(const T&, const T& y, const T& dy) { return dy * (y + S<T>(1)); }
};
struct Sqrt {
  KILN_OP_HEADER(Sqrt, "sqrt", float_only)
  template <class T> static T apply(const T& x) { return fn::sqrt(x); }
  template <class T> static T grad(const T&, const T& y, const T& dy) { return dy / (y * S<T>(2)); }
};
struct Rsqrt {
  KILN_OP_HEADER(Rsqrt, "rsqrt", float_only)
  template <class T> static T apply(const T& x) { return T(S<T>(1) / fn::sqrt(x)); }
  template <class T> static T grad(const T& x, const T& y, const T& dy) { return dy * y / x * S<T>(-0.5); }
};
struct Recip {
  KILN_OP_HEADER(Recip, "recip", float_only)
  template <class T> static T apply(const T& x) { return T(S<T>(1) / x); }
  template <class T> static T grad(const T&, const T& y, const T& dy) { return -dy * y * y; }
};
struct Sin {
  KILN_OP_HEADER(Sin, "sin", float_only)
  template <class T> static T apply(const T& x) { return fn::sin(x); }
  template <class T> static T grad(const T& x, const T&, const T& dy) { return dy * fn::cos(x); }
};
struct Cos {
  KILN_OP_HEADER(Cos, "cos", float_only)
  template <class T> static T apply(const T& x) { return fn::cos(x); }
  template <class T> static T grad(const T& x, const T&, const T& dy) { return -dy * fn::sin(x); }
};
struct Tan {
  KILN_OP_HEADER(Tan, "tan", float_only)
  template <class T> static T apply(const T& x) { return fn::tan(x); }
  template <class T> static T grad(const T&, const T& y, const T& dy) { return dy * (y * y + S<T>(1)); }
};
struct Tanh {
  KILN_OP_HEADER(Tanh, "tanh", float_only)
  template <class T> static T apply(const T& x) { return fn::tanh(x); }
  template <class T> static T grad(const T&, const T& y, const T& dy) { return dy * (S<T>(1) - y * y); }
};
struct Erf {
  KILN_OP_HEADER(Erf, "erf", float_only)
  template <class T> static T apply(const T& x) { return fn::erf(x); }
  template <class T> static T grad(const T& x, const T&, const T& dy) {
    return dy * fn::exp(T(-x * x)) * S<T>(1.1283791670955126);  // 2/sqrt(pi)
  }
};
struct Floor {
  KILN_OP_HEADER(Floor, "floor", float_only)
  template <class T> static T apply(const T& x) { return fn::floor(x); }
  template <class T> static T grad(const T&, const T&, const T& dy) { return fn::constant(dy, 0); }
};
struct Ceil {
  KILN_OP_HEADER(Ceil, "ceil", float_only)
  template <class T> static T apply(const T& x) { return fn::ceil(x); }
  template <class T> static T grad(const T&, const T&, const T& dy) { return fn::constant(dy, 0); }
};
struct Round {
  KILN_OP_HEADER(Round, "round", float_only)
  template <class T> static T apply(const T& x) { return fn::round(x); }
  template <class T> static T grad(const T&, const T&, const T& dy) { return fn::constant(dy, 0); }
};
struct Sigmoid {
  KILN_OP_HEADER(Sigmoid, "sigmoid", float_only)
  template <class T> static T apply(const T& x) { return T(S<T>(1) / (fn::exp(T(-x)) + S<T>(1))); }
  template <class T> static T grad(const T&, const T& y, const T& dy) { return dy * y * (S<T>(1) - y); }
};
struct Silu {
  KILN_OP_HEADER(Silu, "silu", float_only)
  template <class T> static T apply(const T& x) { return T(x / (fn::exp(T(-x)) + S<T>(1))); }
  template <class T> static T grad(const T& x, const T&, const T& dy) {
    const T s = Sigmoid::apply(x);
    return dy * s * (S<T>(1) + x * (S<T>(1) - s));
  }
};
// softplus(x) = log(1 + e^x), returning x itself above 20 like torch.nn.functional.softplus.
struct Softplus {
  KILN_OP_HEADER(Softplus, "softplus", float_only)
  template <class T> static T apply(const T& x) {
    return fn::select(x > S<T>(20), x, fn::log1p(fn::exp(fn::min(x, fn::constant(x, 20)))));
  }
  template <class T> static T grad(const T& x, const T&, const T& dy) { return dy * Sigmoid::apply(x); }
};
// hard_sigmoid(x) = clamp(x / 6 + 1/2, 0, 1), as torch.nn.functional.hardsigmoid.
struct HardSigmoid {
  KILN_OP_HEADER(HardSigmoid, "hard_sigmoid", float_only)
  template <class T> static T apply(const T& x) {
    return fn::min(fn::max(T(x * S<T>(1.0 / 6.0) + S<T>(0.5)), fn::constant(x, 0)), fn::constant(x, 1));
  }
  template <class T> static T grad(const T& x, const T&, const T& dy) {
    return fn::select((x > S<T>(-3)) && (x < S<T>(3)), T(dy * S<T>(1.0 / 6.0)), fn::constant(x, 0));
  }
};
// gelu(x) = x/2 (1 + erf(x / sqrt 2)).
struct GeluErf {
  KILN_OP_HEADER(GeluErf, "gelu", float_only)
  template <class T> static T apply(const T& x) {
    return x * S<T>(0.5) * (fn::erf(T(x * S<T>(0.70710678118654752))) + S<T>(1));
  }
  template <class T> static T grad(const T& x, const T&, const T& dy) {
    const T cdf = (fn::erf(T(x * S<T>(0.70710678118654752))) + S<T>(1)) * S<T>(0.5);
    const T pdf = fn::exp(T(x * x * S<T>(-0.5))) * S<T>(0.39894228040143268);  // 1/sqrt(2 pi)
    return dy * (cdf + x * pdf);
  }
};
// The tanh approximation: x/2 (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))).
struct GeluTanh {
  KILN_OP_HEADER(GeluTanh, "gelu_tanh", float_only)
  template <class T> static T apply(const T& x) {
    const T inner = (x + x * x * x * S<T>(0.044715)) * S<T>(0.79788456080286536);
    return x * S<T>(0.5) * (fn::tanh(inner) + S<T>(1));
  }
  template <class T> static T grad(const T& x, const T&, const T& dy) {
    const T inner = (x + x * x * x * S<T>(0.044715)) * S<T>(0.79788456080286536);
    const T t = fn::tanh(inner);
    const T dinner = (x * x * S<T>(3 * 0.044715) + S<T>(1)) * S<T>(0.79788456080286536);
    return dy * ((t + S<T>(1)) * S<T>(0.5) + x * S<T>(0.5) * (S<T>(1) - t * t) * dinner);
  }
};

// Integer arithmetic wraps around (two's complement), as PyTorch's integer tensors and
// every GPU give it. C++'s signed overflow is undefined behaviour, so integer Add, Sub, Mul,
// Neg, Abs and Pow compute in the unsigned type (at least unsigned int, so that u8 does not
// promote to a signed int) and convert back, which C++20 defines as modular.
template <class T> inline constexpr bool wraps_v = std::is_integral_v<T> && !std::is_same_v<T, bool>;
template <class T> using wrap_unsigned_t = std::make_unsigned_t<std::common_type_t<T, unsigned int>>;
template <class T> constexpr T wrap_add(T a, T b) {
  return static_cast<T>(static_cast<wrap_unsigned_t<T>>(a) + static_cast<wrap_unsigned_t<T>>(b));
}
template <class T> constexpr T wrap_sub(T a, T b) {
  return static_cast<T>(static_cast<wrap_unsigned_t<T>>(a) - static_cast<wrap_unsigned_t<T>>(b));
}
template <class T> constexpr T wrap_mul(T a, T b) {
  return static_cast<T>(static_cast<wrap_unsigned_t<T>>(a) * static_cast<wrap_unsigned_t<T>>(b));
}

// ---------------------------------------------------------------- unary, numeric
struct Neg {
  KILN_OP_HEADER(Neg, "neg", numeric)
  template <class T> static T apply(const T& x) {
    if constexpr (wraps_v<T>) return wrap_sub(T(0), x);
    else return T(-x);
  }
  template <class T> static T grad(const T&, const T&, const T& dy) { return -dy; }
};
struct Sign {
  KILN_OP_HEADER(Sign, "sign", numeric)
  template <class T> static T apply(const T& x) {
    const T zero = fn::constant(x, 0);
    return fn::select(x > S<T>(0), fn::constant(x, 1), fn::select(x < S<T>(0), fn::constant(x, -1), zero));
  }
  template <class T> static T grad(const T&, const T&, const T& dy) { return fn::constant(dy, 0); }
};
struct Abs {
  KILN_OP_HEADER(Abs, "abs", numeric)
  template <class T> static T apply(const T& x) {
    if constexpr (wraps_v<T> && std::is_signed_v<T>) return x < 0 ? wrap_sub(T(0), x) : x;
    else return fn::abs(x);
  }
  template <class T> static T grad(const T& x, const T&, const T& dy) { return dy * Sign::apply(x); }
};
struct Relu {
  KILN_OP_HEADER(Relu, "relu", numeric)
  // Written as "below 0 → 0" so that NaN passes through, as in PyTorch.
  template <class T> static T apply(const T& x) { return fn::select(x < S<T>(0), fn::constant(x, 0), x); }
  template <class T> static T grad(const T&, const T& y, const T& dy) {
    return fn::select(y > S<T>(0), dy, fn::constant(dy, 0));
  }
};

// ---------------------------------------------------------------- unary predicates (→ Bool)
struct IsNan {
  KILN_OP_HEADER(IsNan, "isnan", float_only)
  static constexpr bool predicate = true;
  template <class T> static auto apply(const T& x) { return fn::isnan(x); }
};
struct IsInf {
  KILN_OP_HEADER(IsInf, "isinf", float_only)
  static constexpr bool predicate = true;
  template <class T> static auto apply(const T& x) { return fn::isinf(x); }
};
struct LogicalNot {
  KILN_OP_HEADER(LogicalNot, "not", boolean)
  static constexpr bool predicate = true;
  template <class T> static auto apply(const T& x) { return !x; }
};

// ---------------------------------------------------------------- binary, numeric
struct Add {
  KILN_OP_HEADER(Add, "add", numeric)
  template <class T> static T apply(const T& a, const T& b) {
    if constexpr (wraps_v<T>) return wrap_add(a, b);
    else return T(a + b);
  }
  template <class T> static T grad_lhs(const T&, const T&, const T&, const T& dy) { return dy; }
  template <class T> static T grad_rhs(const T&, const T&, const T&, const T& dy) { return dy; }
};
struct Sub {
  KILN_OP_HEADER(Sub, "sub", numeric)
  template <class T> static T apply(const T& a, const T& b) {
    if constexpr (wraps_v<T>) return wrap_sub(a, b);
    else return T(a - b);
  }
  template <class T> static T grad_lhs(const T&, const T&, const T&, const T& dy) { return dy; }
  template <class T> static T grad_rhs(const T&, const T&, const T&, const T& dy) { return -dy; }
};
struct Mul {
  KILN_OP_HEADER(Mul, "mul", numeric)
  template <class T> static T apply(const T& a, const T& b) {
    if constexpr (wraps_v<T>) return wrap_mul(a, b);
    else return T(a * b);
  }
  template <class T> static T grad_lhs(const T&, const T& b, const T&, const T& dy) { return dy * b; }
  template <class T> static T grad_rhs(const T& a, const T&, const T&, const T& dy) { return dy * a; }
};
// Float division is true division; integer division floors, like Python's // and
// torch.div(rounding_mode="floor"). Integer division by zero gives 0 (PyTorch raises; a
// kernel cannot, and 0 keeps the result defined); the most negative value divided by -1
// wraps to itself instead of trapping.
struct Div {
  KILN_OP_HEADER(Div, "div", numeric)
  template <class T> static T apply(const T& a, const T& b) {
    if constexpr (std::is_integral_v<T>) {
      if (b == 0) return 0;
      if constexpr (std::is_signed_v<T>) {
        if (b == -1) return static_cast<T>(std::make_unsigned_t<T>(0) - static_cast<std::make_unsigned_t<T>>(a));
      }
      const T q = a / b;
      return (a % b != 0 && ((a < 0) != (b < 0))) ? T(q - 1) : q;
    } else {
      return T(a / b);
    }
  }
  template <class T> static T grad_lhs(const T&, const T& b, const T&, const T& dy) { return dy / b; }
  template <class T> static T grad_rhs(const T& a, const T& b, const T&, const T& dy) { return -dy * a / (b * b); }
};
// Remainder with the sign of the divisor, like Python's % and torch.remainder: a - floor(a / b) * b.
// Integer remainder by zero gives 0, like Div (PyTorch raises).
struct Rem {
  KILN_OP_HEADER(Rem, "rem", numeric)
  template <class T> static T apply(const T& a, const T& b) {
    if constexpr (std::is_integral_v<T>) {
      if (b == 0) return 0;
      if constexpr (std::is_signed_v<T>) {
        if (b == -1) return 0;  // a % -1 traps on x86 for the most negative a
      }
      const T r = a % b;
      return (r != 0 && ((r < 0) != (b < 0))) ? T(r + b) : r;
    } else {
      return T(a - fn::floor(T(a / b)) * b);
    }
  }
  template <class T> static T grad_lhs(const T&, const T&, const T&, const T& dy) { return dy; }
  template <class T> static T grad_rhs(const T& a, const T& b, const T&, const T& dy) {
    return -dy * fn::floor(T(a / b));
  }
};
// Integer powers with a negative exponent give the truncated real result (1 for base 1,
// +-1 for base -1, else 0), where PyTorch raises.
struct Pow {
  KILN_OP_HEADER(Pow, "pow", numeric)
  template <class T> static T apply(const T& a, const T& b) {
    if constexpr (std::is_integral_v<T>) {
      if (b < 0) return a == 1 ? 1 : (a == -1 ? ((b % 2) ? -1 : 1) : 0);
      T result = 1, base = a;
      for (T e = b; e > 0; e >>= 1, base = wrap_mul(base, base))
        if (e & 1) result = wrap_mul(result, base);
      return result;
    } else {
      return fn::pow(a, b);
    }
  }
  template <class T> static T grad_lhs(const T& a, const T& b, const T&, const T& dy) {
    return dy * b * fn::pow(a, T(b - S<T>(1)));
  }
  template <class T> static T grad_rhs(const T& a, const T&, const T& y, const T& dy) {
    // d(a^b)/db = a^b log a; zero where a == 0 (the limit PyTorch uses).
    return fn::select(a == S<T>(0), fn::constant(a, 0), T(dy * y * fn::log(a)));
  }
};
// atan2(a, b): the angle of the point (b, a), in [-pi, pi], with std::atan2's meaning for
// zeros, infinities and NaN.
struct Atan2 {
  KILN_OP_HEADER(Atan2, "atan2", float_only)
  template <class T> static T apply(const T& a, const T& b) { return fn::atan2(a, b); }
  template <class T> static T grad_lhs(const T& a, const T& b, const T&, const T& dy) {
    return dy * b / (a * a + b * b);
  }
  template <class T> static T grad_rhs(const T& a, const T& b, const T&, const T& dy) {
    return -dy * a / (a * a + b * b);
  }
};
// Pairwise maximum / minimum; NaN propagates. Ties send the gradient half to each side, like PyTorch.
struct Maximum {
  KILN_OP_HEADER(Maximum, "maximum", numeric)
  template <class T> static T apply(const T& a, const T& b) { return fn::max(a, b); }
  template <class T> static T grad_lhs(const T& a, const T& b, const T&, const T& dy) {
    return fn::select(a > b, dy, fn::select(a == b, T(dy * S<T>(0.5)), fn::constant(dy, 0)));
  }
  template <class T> static T grad_rhs(const T& a, const T& b, const T&, const T& dy) {
    return fn::select(b > a, dy, fn::select(a == b, T(dy * S<T>(0.5)), fn::constant(dy, 0)));
  }
};
struct Minimum {
  KILN_OP_HEADER(Minimum, "minimum", numeric)
  template <class T> static T apply(const T& a, const T& b) { return fn::min(a, b); }
  template <class T> static T grad_lhs(const T& a, const T& b, const T&, const T& dy) {
    return fn::select(a < b, dy, fn::select(a == b, T(dy * S<T>(0.5)), fn::constant(dy, 0)));
  }
  template <class T> static T grad_rhs(const T& a, const T& b, const T&, const T& dy) {
    return fn::select(b < a, dy, fn::select(a == b, T(dy * S<T>(0.5)), fn::constant(dy, 0)));
  }
};

// ---------------------------------------------------------------- comparisons (→ Bool)
#define KILN_COMPARE_OP(Name, text, expr)                                      \
  struct Name {                                                                \
    KILN_OP_HEADER(Name, text, numeric)                                        \
    static constexpr bool predicate = true;                                    \
    template <class T> static auto apply(const T& a, const T& b) { return expr; } \
  };
KILN_COMPARE_OP(Equal, "eq", a == b)
KILN_COMPARE_OP(NotEqual, "ne", a != b)
KILN_COMPARE_OP(Less, "lt", a < b)
KILN_COMPARE_OP(LessEqual, "le", a <= b)
KILN_COMPARE_OP(Greater, "gt", a > b)
KILN_COMPARE_OP(GreaterEqual, "ge", a >= b)
#undef KILN_COMPARE_OP

// ---------------------------------------------------------------- Bool logic
#define KILN_LOGIC_OP(Name, text, expr)                                        \
  struct Name {                                                                \
    KILN_OP_HEADER(Name, text, boolean)                                        \
    static constexpr bool predicate = true;                                    \
    template <class T> static auto apply(const T& a, const T& b) { return expr; } \
  };
KILN_LOGIC_OP(LogicalAnd, "and", a && b)
KILN_LOGIC_OP(LogicalOr, "or", a || b)
KILN_LOGIC_OP(LogicalXor, "xor", a != b)
#undef KILN_LOGIC_OP

// ---------------------------------------------------------------- more math, float
// Written with the functions above (atan2, expm1, log1p, exp, log, sqrt, floor, ceil), so
// that every renderer already spells them; each keeps torch's values at zeros, infinities
// and NaN, and its precision where a direct formula would cancel or overflow.
namespace detail {
inline constexpr double ln2 = 0.693147180559945309417232121458176568;
inline constexpr double ln10 = 2.30258509299404568401799145468436421;
// Beyond this, asinh(|x|) and acosh(x) are log(x) + ln 2 to within 1/(4 x^2): x^2 would overflow in f32.
inline constexpr double large_argument = 1e8;
}  // namespace detail
// asin(x) = atan2(x, sqrt((1 - x)(1 + x))): +-pi/2 at +-1, NaN beyond.
struct Asin {
  KILN_OP_HEADER(Asin, "asin", float_only)
  template <class T> static T apply(const T& x) {
    return fn::atan2(x, fn::sqrt(T((S<T>(1) - x) * (S<T>(1) + x))));
  }
  template <class T> static T grad(const T& x, const T&, const T& dy) {
    return dy / fn::sqrt(T((S<T>(1) - x) * (S<T>(1) + x)));
  }
};
// acos(x) = atan2(sqrt((1 - x)(1 + x)), x): 0 at 1, pi at -1.
struct Acos {
  KILN_OP_HEADER(Acos, "acos", float_only)
  template <class T> static T apply(const T& x) {
    return fn::atan2(fn::sqrt(T((S<T>(1) - x) * (S<T>(1) + x))), x);
  }
  template <class T> static T grad(const T& x, const T&, const T& dy) {
    return -dy / fn::sqrt(T((S<T>(1) - x) * (S<T>(1) + x)));
  }
};
struct Atan {
  KILN_OP_HEADER(Atan, "atan", float_only)
  template <class T> static T apply(const T& x) { return fn::atan2(x, fn::constant(x, 1)); }
  template <class T> static T grad(const T& x, const T&, const T& dy) { return dy / (x * x + S<T>(1)); }
};
namespace detail {
// sinh: (expm1(x) - expm1(-x)) / 2 below |x| = 1 (no cancellation near 0); above, from
// h = exp(|x| / 2) as h (h / 2) - 1 / (2 h^2), which reaches the largest finite results.
template <class T> T sinh_of(const T& x) {
  const T a = fn::abs(x);
  const T h = fn::exp(T(a * S<T>(0.5)));
  const T large = T(h * S<T>(0.5) * h - S<T>(0.5) / (h * h));
  const T small = T((fn::expm1(x) - fn::expm1(T(-x))) * S<T>(0.5));
  return fn::select(a < S<T>(1), small, fn::select(x < S<T>(0), T(-large), large));
}
// cosh from h = exp(|x| / 2): h (h / 2) + 1 / (2 h^2), a sum of positive terms.
template <class T> T cosh_of(const T& x) {
  const T h = fn::exp(T(fn::abs(x) * S<T>(0.5)));
  return T(h * S<T>(0.5) * h + S<T>(0.5) / (h * h));
}
}  // namespace detail
struct Sinh {
  KILN_OP_HEADER(Sinh, "sinh", float_only)
  template <class T> static T apply(const T& x) { return detail::sinh_of(x); }
  template <class T> static T grad(const T& x, const T&, const T& dy) { return dy * detail::cosh_of(x); }
};
struct Cosh {
  KILN_OP_HEADER(Cosh, "cosh", float_only)
  template <class T> static T apply(const T& x) { return detail::cosh_of(x); }
  template <class T> static T grad(const T& x, const T&, const T& dy) { return dy * detail::sinh_of(x); }
};
// asinh(x) = sign(x) log1p(a + a^2 / (1 + sqrt(1 + a^2))), a = |x|; log(a) + ln 2 for large a;
// +-0 stays +-0.
struct Asinh {
  KILN_OP_HEADER(Asinh, "asinh", float_only)
  template <class T> static T apply(const T& x) {
    const T a = fn::abs(x);
    const T small = fn::log1p(T(a + a * a / (fn::sqrt(T(a * a + S<T>(1))) + S<T>(1))));
    const T large = T(fn::log(a) + S<T>(detail::ln2));
    const T r = fn::select(a > S<T>(detail::large_argument), large, small);
    return fn::select(x == S<T>(0), x, fn::select(x < S<T>(0), T(-r), r));
  }
  template <class T> static T grad(const T& x, const T&, const T& dy) { return dy / fn::sqrt(T(x * x + S<T>(1))); }
};
// acosh(x) = log1p(t + sqrt(t (x + 1))), t = x - 1 (exact near 1); log(x) + ln 2 for large x.
struct Acosh {
  KILN_OP_HEADER(Acosh, "acosh", float_only)
  template <class T> static T apply(const T& x) {
    const T t = T(x - S<T>(1));
    const T small = fn::log1p(T(t + fn::sqrt(T(t * (x + S<T>(1))))));
    const T large = T(fn::log(x) + S<T>(detail::ln2));
    return fn::select(x > S<T>(detail::large_argument), large, small);
  }
  template <class T> static T grad(const T& x, const T&, const T& dy) {
    return dy / fn::sqrt(T((x - S<T>(1)) * (x + S<T>(1))));
  }
};
// atanh(x) = log1p(2x / (1 - x)) / 2: +-inf at +-1, NaN beyond.
struct Atanh {
  KILN_OP_HEADER(Atanh, "atanh", float_only)
  template <class T> static T apply(const T& x) {
    return T(fn::log1p(T(x * S<T>(2) / (S<T>(1) - x))) * S<T>(0.5));
  }
  template <class T> static T grad(const T& x, const T&, const T& dy) {
    return dy / ((S<T>(1) - x) * (S<T>(1) + x));
  }
};
struct Log2 {
  KILN_OP_HEADER(Log2, "log2", float_only)
  template <class T> static T apply(const T& x) { return T(fn::log(x) * S<T>(1 / detail::ln2)); }
  template <class T> static T grad(const T& x, const T&, const T& dy) { return dy / (x * S<T>(detail::ln2)); }
};
struct Log10 {
  KILN_OP_HEADER(Log10, "log10", float_only)
  template <class T> static T apply(const T& x) { return T(fn::log(x) * S<T>(1 / detail::ln10)); }
  template <class T> static T grad(const T& x, const T&, const T& dy) { return dy / (x * S<T>(detail::ln10)); }
};
struct Exp2 {
  KILN_OP_HEADER(Exp2, "exp2", float_only)
  template <class T> static T apply(const T& x) { return fn::exp(T(x * S<T>(detail::ln2))); }
  template <class T> static T grad(const T&, const T& y, const T& dy) { return dy * y * S<T>(detail::ln2); }
};
// Rounds toward zero: ceil below 0, floor above (-0.5 gives -0).
struct Trunc {
  KILN_OP_HEADER(Trunc, "trunc", float_only)
  template <class T> static T apply(const T& x) { return fn::select(x < S<T>(0), fn::ceil(x), fn::floor(x)); }
  template <class T> static T grad(const T&, const T&, const T& dy) { return fn::constant(dy, 0); }
};
// x - trunc(x), with x's sign; NaN at +-inf, as torch.frac.
struct Frac {
  KILN_OP_HEADER(Frac, "frac", float_only)
  template <class T> static T apply(const T& x) { return T(x - Trunc::apply(x)); }
  template <class T> static T grad(const T&, const T&, const T& dy) { return dy; }
};
// sqrt(a^2 + b^2) without overflow: m sqrt(1 + (n / m)^2), m and n the larger and smaller of
// |a| and |b|; inf where either is infinite (NaN too), 0 where both are 0.
struct Hypot {
  KILN_OP_HEADER(Hypot, "hypot", float_only)
  template <class T> static T apply(const T& a, const T& b) {
    const T x = fn::abs(a), y = fn::abs(b);
    const T m = fn::max(x, y), n = fn::min(x, y);
    const T q = T(n / m);
    const T r = T(m * fn::sqrt(T(q * q + S<T>(1))));
    const T finite = fn::select(m == S<T>(0), fn::constant(a, 0), r);
    return fn::select(fn::isinf(a) || fn::isinf(b), fn::constant(a, std::numeric_limits<double>::infinity()), finite);
  }
  template <class T> static T grad_lhs(const T& a, const T&, const T& y, const T& dy) { return dy * a / y; }
  template <class T> static T grad_rhs(const T&, const T& b, const T& y, const T& dy) { return dy * b / y; }
};
// |a| with the sign of b, the sign of -0 included.
struct Copysign {
  KILN_OP_HEADER(Copysign, "copysign", float_only)
  template <class T> static T apply(const T& a, const T& b) {
    const T x = fn::abs(a);
    return fn::select(b < S<T>(0), T(-x), fn::select(T(S<T>(1) / b) < S<T>(0), T(-x), x));
  }
  // y / a (the sign that a got), 0 where a is 0; none for b, as torch.
  template <class T> static T grad_lhs(const T& a, const T&, const T& y, const T& dy) {
    return fn::select(a == S<T>(0), fn::constant(a, 0), T(dy * y / a));
  }
  template <class T> static T grad_rhs(const T&, const T&, const T&, const T& dy) { return fn::constant(dy, 0); }
};
// log(e^a + e^b) = max + log1p(e^-|a - b|); the infinity itself where a and b are the same one.
struct Logaddexp {
  KILN_OP_HEADER(Logaddexp, "logaddexp", float_only)
  template <class T> static T apply(const T& a, const T& b) {
    const T m = fn::max(a, b);
    const T r = T(m + fn::log1p(fn::exp(T(-fn::abs(T(a - b))))));
    return fn::select(fn::isinf(a) && (a == b), a, r);
  }
  template <class T> static T grad_lhs(const T& a, const T&, const T& y, const T& dy) {
    return dy * fn::exp(T(a - y));
  }
  template <class T> static T grad_rhs(const T&, const T& b, const T& y, const T& dy) {
    return dy * fn::exp(T(b - y));
  }
};

#undef KILN_OP_HEADER

// ---------------------------------------------------------------- the lists
// X-macro lists of the catalogue: backends instantiate their kernels over them, and the
// counts are tripwires for a table somewhere that forgot an op.
#define KILN_UNARY_OPS(X)                                                                                      \
  X(Exp) X(Log) X(Log1p) X(Expm1) X(Sqrt) X(Rsqrt) X(Recip) X(Sin) X(Cos) X(Tan) X(Tanh) X(Erf) X(Floor) X(Ceil) \
  X(Round) X(Sigmoid) X(Silu) X(Softplus) X(HardSigmoid) X(GeluErf) X(GeluTanh) X(Neg) X(Abs) X(Sign) X(Relu)    \
  X(IsNan) X(IsInf) X(LogicalNot) X(Asin) X(Acos) X(Atan) X(Sinh) X(Cosh) X(Asinh) X(Acosh) X(Atanh) X(Log2)       \
  X(Log10) X(Exp2) X(Trunc) X(Frac)
#define KILN_BINARY_OPS(X)                                                                                     \
  X(Add) X(Sub) X(Mul) X(Div) X(Rem) X(Pow) X(Atan2) X(Maximum) X(Minimum) X(Equal) X(NotEqual) X(Less)         \
  X(LessEqual) X(Greater) X(GreaterEqual) X(LogicalAnd) X(LogicalOr) X(LogicalXor) X(Hypot) X(Copysign)         \
  X(Logaddexp)

#define KILN_COUNT_OP(Op) +1
inline constexpr int unary_op_count = 0 KILN_UNARY_OPS(KILN_COUNT_OP);
inline constexpr int binary_op_count = 0 KILN_BINARY_OPS(KILN_COUNT_OP);
#undef KILN_COUNT_OP
static_assert(unary_op_count == 41, "a unary op was added or removed: update the tests and every backend's table");
static_assert(binary_op_count == 21, "a binary op was added or removed: update the tests and every backend's table");

// The ops that have a gradient: Autodiff<B> differentiates exactly these, and backends
// instantiate their unary_backward / binary_backward kernels over these lists.
#define KILN_DIFFERENTIABLE_UNARY_OPS(X)                                                                       \
  X(Exp) X(Log) X(Log1p) X(Expm1) X(Sqrt) X(Rsqrt) X(Recip) X(Sin) X(Cos) X(Tan) X(Tanh) X(Erf) X(Floor) X(Ceil) \
  X(Round) X(Sigmoid) X(Silu) X(Softplus) X(HardSigmoid) X(GeluErf) X(GeluTanh) X(Neg) X(Abs) X(Sign) X(Relu)    \
  X(Asin) X(Acos) X(Atan) X(Sinh) X(Cosh) X(Asinh) X(Acosh) X(Atanh) X(Log2) X(Log10) X(Exp2) X(Trunc) X(Frac)
#define KILN_DIFFERENTIABLE_BINARY_OPS(X)                                                                      \
  X(Add) X(Sub) X(Mul) X(Div) X(Rem) X(Pow) X(Atan2) X(Maximum) X(Minimum) X(Hypot) X(Copysign) X(Logaddexp)

template <class Op> concept DifferentiableUnary = requires(double v) { Op::grad(v, v, v); };
template <class Op> concept DifferentiableBinary = requires(double v) {
  Op::grad_lhs(v, v, v, v);
  Op::grad_rhs(v, v, v, v);
};

// Tripwire: the lists above name every op that has a gradient formula, and only those.
#define KILN_COUNT_DIFFERENTIABLE_UNARY(Op) +(DifferentiableUnary<Op> ? 1 : 0)
#define KILN_COUNT_DIFFERENTIABLE_BINARY(Op) +(DifferentiableBinary<Op> ? 1 : 0)
#define KILN_COUNT_OP(Op) +1
static_assert(0 KILN_UNARY_OPS(KILN_COUNT_DIFFERENTIABLE_UNARY) == 0 KILN_DIFFERENTIABLE_UNARY_OPS(KILN_COUNT_OP) &&
                  0 KILN_DIFFERENTIABLE_UNARY_OPS(KILN_COUNT_DIFFERENTIABLE_UNARY) ==
                      0 KILN_DIFFERENTIABLE_UNARY_OPS(KILN_COUNT_OP),
              "KILN_DIFFERENTIABLE_UNARY_OPS must list exactly the unary ops that define grad");
static_assert(0 KILN_BINARY_OPS(KILN_COUNT_DIFFERENTIABLE_BINARY) == 0 KILN_DIFFERENTIABLE_BINARY_OPS(KILN_COUNT_OP) &&
                  0 KILN_DIFFERENTIABLE_BINARY_OPS(KILN_COUNT_DIFFERENTIABLE_BINARY) ==
                      0 KILN_DIFFERENTIABLE_BINARY_OPS(KILN_COUNT_OP),
              "KILN_DIFFERENTIABLE_BINARY_OPS must list exactly the binary ops that define grad_lhs and grad_rhs");
#undef KILN_COUNT_OP
#undef KILN_COUNT_DIFFERENTIABLE_UNARY
#undef KILN_COUNT_DIFFERENTIABLE_BINARY

// Which operand of a binary op a gradient is for.
enum class Operand : std::uint8_t { lhs, rhs };

// Whether a tensor of `dtype` is in the op's domain; backends check it with these words.
template <class Op> void check_domain(DType dtype) {
  if constexpr (Op::domain == Domain::float_only)
    KILN_CHECK(is_float(dtype), "{}: expected a float tensor, got {}", Op::name, dtype);
  else if constexpr (Op::domain == Domain::numeric)
    KILN_CHECK(!is_bool(dtype), "{}: expected a float or int tensor, got {}", Op::name, dtype);
  else
    KILN_CHECK(is_bool(dtype), "{}: expected a bool tensor, got {}", Op::name, dtype);
}

template <class Op, class = void> struct IsPredicate : std::false_type {};
template <class Op> struct IsPredicate<Op, std::void_t<decltype(Op::predicate)>> : std::bool_constant<Op::predicate> {};
template <class Op> inline constexpr bool is_predicate = IsPredicate<Op>::value;

}  // namespace kiln::ops
