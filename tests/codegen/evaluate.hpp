// A reference interpreter for codegen trees, so the tests can check that a traced tree
// computes what the catalogue formula computes. Masks evaluate to 1 / 0.
#pragma once

#include "glsl_cpp.hpp"

#include "codegen/decompositions.hpp"

#include <kiln/codegen/expr.hpp>

#include <cmath>
#include <span>
#include <stdexcept>
#include <type_traits>

namespace kiln::codegen::test {

// Evaluates `n` on one element of each input, in T: double runs the C library's
// functions (the meaning the IR promises); float runs the GLSL helpers (glsl_cpp.hpp) for
// erf, log1p, tanh and pow and the decompositions of expm1 and atan2, as a shader does; integer types run the integer helpers.
// max / min are the comparison forms of kiln::fn's scalar max / min without its NaN rule
// (a GPU's max ignores NaN too), so a traced formula propagates NaN only through its own
// isNaN selects, and the tests see whether it does.
template <class T> T evaluate(const NodePtr& n, std::span<const T> in) {
  auto arg = [&](int i) { return evaluate<T>(n->args[static_cast<std::size_t>(i)], in); };
  auto flag = [](bool b) { return b ? T(1) : T(0); };
  constexpr bool floating = std::is_floating_point_v<T>;
  auto float_only = [&]<class F>(F f) -> T {
    if constexpr (floating) return f(arg(0));
    else throw std::logic_error("evaluate: a float kind in an integer tree");
  };
  switch (n->kind) {
    case Kind::input: return in[static_cast<std::size_t>(n->index)];
    case Kind::constant: return fn::constant(T(0), n->value);
    case Kind::param: throw std::logic_error("evaluate: parameters are not evaluated here");
    case Kind::neg: return T(-arg(0));
    case Kind::abs:
      if constexpr (std::is_unsigned_v<T>) return arg(0);
      else return T(std::abs(arg(0)));
    case Kind::exp: return float_only([](T x) { return std::exp(x); });
    case Kind::log: return float_only([](T x) { return std::log(x); });
    case Kind::sqrt: return float_only([](T x) { return std::sqrt(x); });
    case Kind::sin: return float_only([](T x) { return std::sin(x); });
    case Kind::cos: return float_only([](T x) { return std::cos(x); });
    case Kind::tan: return float_only([](T x) { return std::tan(x); });
    case Kind::floor: return float_only([](T x) { return std::floor(x); });
    case Kind::ceil: return float_only([](T x) { return std::ceil(x); });
    case Kind::round_even: return float_only([](T x) { return std::nearbyint(x); });
    case Kind::log1p:
      return float_only([](T x) {
        if constexpr (std::is_same_v<T, float>) return glsl_cpp::kiln_log1p_f32(x);
        else return std::log1p(x);
      });
    case Kind::expm1:
    case Kind::atan2:
      // float: as a shader computes it, through the decomposition its renderer emits.
      if constexpr (std::is_same_v<T, float>) return evaluate<T>(decomposition(*n, ScalarType::f32), in);
      else if constexpr (floating) return n->kind == Kind::expm1 ? std::expm1(arg(0)) : std::atan2(arg(0), arg(1));
      else throw std::logic_error("evaluate: a float kind in an integer tree");
    case Kind::tanh:
      return float_only([](T x) {
        if constexpr (std::is_same_v<T, float>) return glsl_cpp::kiln_tanh_f32(x);
        else return std::tanh(x);
      });
    case Kind::erf:
      return float_only([](T x) {
        if constexpr (std::is_same_v<T, float>) return glsl_cpp::kiln_erf_f32(x);
        else return std::erf(x);
      });
    case Kind::pow:
      if constexpr (std::is_same_v<T, float>) return glsl_cpp::kiln_pow_f32(arg(0), arg(1));
      else if constexpr (floating) return std::pow(arg(0), arg(1));
      else throw std::logic_error("evaluate: pow in an integer tree");
    case Kind::add: return T(arg(0) + arg(1));
    case Kind::sub: return T(arg(0) - arg(1));
    case Kind::mul: return T(arg(0) * arg(1));
    case Kind::div: return T(arg(0) / arg(1));
    case Kind::max: {
      const T a = arg(0), b = arg(1);
      return a > b ? a : b;
    }
    case Kind::min: {
      const T a = arg(0), b = arg(1);
      return a < b ? a : b;
    }
    case Kind::int_div:
    case Kind::int_rem:
    case Kind::int_pow:
      if constexpr (floating) {
        throw std::logic_error("evaluate: an integer kind in a float tree");
      } else {
        const T a = arg(0), b = arg(1);
        return n->kind == Kind::int_div ? glsl_cpp::int_div(a, b)
               : n->kind == Kind::int_rem ? glsl_cpp::int_rem(a, b)
                                          : glsl_cpp::int_pow(a, b);
      }
    case Kind::select: return arg(0) != T(0) ? arg(1) : arg(2);
    case Kind::isnan:
      if constexpr (floating) return flag(std::isnan(arg(0)));
      else return T(0);
    case Kind::isinf:
      if constexpr (floating) return flag(std::isinf(arg(0)));
      else return T(0);
    case Kind::lt: return flag(arg(0) < arg(1));
    case Kind::le: return flag(arg(0) <= arg(1));
    case Kind::gt: return flag(arg(0) > arg(1));
    case Kind::ge: return flag(arg(0) >= arg(1));
    case Kind::eq: return flag(arg(0) == arg(1));
    case Kind::ne: return flag(arg(0) != arg(1));
    case Kind::logical_and: return flag(arg(0) != T(0) && arg(1) != T(0));
    case Kind::logical_or: return flag(arg(0) != T(0) || arg(1) != T(0));
    case Kind::logical_xor: return flag((arg(0) != T(0)) != (arg(1) != T(0)));
    case Kind::logical_not: return flag(arg(0) == T(0));
    case Kind::row_sum:
    case Kind::row_max:
    case Kind::row_min: throw std::logic_error("evaluate: row reductions are evaluated by row programs only");
  }
  throw std::logic_error("evaluate: unknown kind");
}

inline double evaluate(const NodePtr& n, std::span<const double> inputs) { return evaluate<double>(n, inputs); }

}  // namespace kiln::codegen::test
