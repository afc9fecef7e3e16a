// ONNX's elementwise ops: the catalogue's ops where ONNX means the same thing, and one
// elementwise program of ONNX's own where it does not (activations with attributes, the
// inverse and hyperbolic trigonometric functions), so every one runs as one kernel on
// every backend and fuses on Fusion<B>.
#pragma once

#include "kiln/backend/provided_elementwise.hpp"
#include "kiln/onnx/runtime.hpp"

#include <charconv>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

namespace kiln::onnx {

namespace elementwise_detail {

using codegen::Expr;
using codegen::Mask;
using Ins = std::span<const Expr>;

template <class B> using Outs = std::vector<Value<B>>;

template <class B> void check_float(const Args<B>& a, std::size_t i) {
  KILN_CHECK(is_float(a.dtype(i)), "input {} must be a float tensor, got {} {}", i, a.shape(i), a.dtype(i));
}
template <class B> void check_same(const Args<B>& a, std::size_t i, std::size_t j) {
  KILN_CHECK(a.dtype(i) == a.dtype(j), "inputs {} and {} must have one element type, got {} {} and {} {}", i, j,
             a.shape(i), a.dtype(i), a.shape(j), a.dtype(j));
}

template <class B, class Op> Kernel<B> unary() {
  return [](const Args<B>& a) -> Outs<B> { return {provided::unary<B, Op>(a[0])}; };
}
template <class B, class Op> Kernel<B> binary() {
  return [](const Args<B>& a) -> Outs<B> {
    check_same(a, 0, 1);
    return {provided::binary<B, Op>(a[0], a[1])};
  };
}
// A comparison; bool operands compare through xor (Equal) since the catalogue's comparisons
// take numbers.
template <class B, class Op> Kernel<B> compare() {
  return [](const Args<B>& a) -> Outs<B> {
    check_same(a, 0, 1);
    if (a.dtype(0) == DType::boolean && std::is_same_v<Op, ops::Equal>)
      return {provided::unary<B, ops::LogicalNot>(provided::binary<B, ops::LogicalXor>(a[0], a[1]))};
    if (a.dtype(0) == DType::boolean) {
      // false < true, as numbers.
      return {provided::binary<B, Op>(B::cast(a[0], DType::u8), B::cast(a[1], DType::u8))};
    }
    return {provided::binary<B, Op>(a[0], a[1])};
  };
}

// A float op of one input and attribute parameters: formula(x, params) in one program.
template <class B, class Formula>
Outs<B> float_program(const Args<B>& a, std::string_view name, std::vector<double> params, Formula formula) {
  check_float(a, 0);
  const codegen::Program& p = detail::program(name, a.dtype(0), 1, static_cast<int>(params.size()),
                                              [&](Ins in, Ins ps) { return formula(in[0], ps); });
  return {detail::run<B>(p, {a[0]}, std::move(params))};
}

// Variadic Sum / Max / Min / Mean: a fold over the inputs, broadcast.
template <class B, class Op> Kernel<B> fold(bool mean) {
  return [mean](const Args<B>& a) -> Outs<B> {
    KILN_CHECK(a.size() >= 1, "takes at least one input");
    typename B::Primitive acc = a[0];
    for (std::size_t i = 1; i < a.size(); ++i) {
      check_same(a, 0, i);
      acc = provided::binary<B, Op>(acc, a[i]);
    }
    if (mean) {
      check_float(a, 0);
      acc = provided::binary_scalar<B, ops::Div>(acc, static_cast<double>(a.size()));
    }
    if (a.size() == 1) acc = provided::binary_scalar<B, ops::Mul>(acc, 1.0);  // a new tensor, as ONNX's result
    return {acc};
  };
}

inline Expr relu_part(const Expr& x) { return (x > Expr(0.0)).select(x, Expr(0.0)); }

// ---- Cast: between Kiln's dtypes on the backend; to and from STRING and the integer types held
// wider (INT8...) on the host.

// A number as Cast writes it into a STRING tensor: the shortest decimal that reads back as the
// same value of its type (floats as float), NaN and infinities as ONNX spells them.
inline std::string cast_string(double value, DType from) {
  if (std::isnan(value)) return "NaN";
  if (std::isinf(value)) return value > 0 ? "INF" : "-INF";
  char buffer[64];
  std::to_chars_result r{};
  if (from == DType::f64) r = std::to_chars(buffer, buffer + sizeof buffer, value);
  else if (is_float(from)) r = std::to_chars(buffer, buffer + sizeof buffer, static_cast<float>(value));
  else r = std::to_chars(buffer, buffer + sizeof buffer, static_cast<std::int64_t>(value));
  return std::string(buffer, r.ptr);
}

// A STRING element read as a number ("1.5", "-3", "1e-3", "NaN", "INF", "+INF", "-inf").
inline double parse_number(const std::string& text, std::size_t index) {
  std::string_view t = text;
  if (!t.empty() && t.front() == '+') t.remove_prefix(1);
  double value = 0;
  const auto r = std::from_chars(t.data(), t.data() + t.size(), value);
  KILN_CHECK(r.ec == std::errc{} && r.ptr == t.data() + t.size() && !t.empty(),
             "element {} is the string '{}', which is not a number", index, text);
  return value;
}

// Integers of a type held wider, wrapped into its range as integer conversions wrap (INT8 from
// 200 is -56); a UINT64 value beyond what i64 holds (a negative one, wrapped) is Unsupported.
inline TensorData wrap_into(const TensorData& held, ElementType to) {
  const auto [lo, hi] = widened_range(to);
  std::vector<std::int64_t> values = held.to_vec<std::int64_t>();
  for (std::int64_t& v : values) {
    if (to == ElementType::uint64) {
      if (v < 0) unsupported("the value {} as UINT64 is {}, beyond what Kiln holds (up to 2^63 - 1)", v,
                             static_cast<std::uint64_t>(v));
      continue;
    }
    const std::uint64_t span = static_cast<std::uint64_t>(hi - lo) + 1;
    const std::uint64_t offset = static_cast<std::uint64_t>(v) - static_cast<std::uint64_t>(lo);
    v = lo + static_cast<std::int64_t>(offset % span);
  }
  TensorData wide = TensorData::from(values, held.shape());
  return held.dtype() == DType::i64 ? wide : TensorData::from(wide.to_vec<std::int32_t>(), held.shape());
}

template <class B> Value<B> cast_value(const Args<B>& a, const Value<B>& x, ElementType to) {
  if (x.type() == to) return x;
  if (to == ElementType::string) {
    const TensorData& d = x.data();
    const std::vector<double> numbers = d.to_vec<double>();
    std::vector<std::string> out;
    out.reserve(numbers.size());
    for (const double v : numbers) out.push_back(cast_string(v, d.dtype()));
    return Value<B>::strings(d.shape(), std::move(out));
  }
  const std::optional<DType> held = held_dtype_of(to);
  if (!held) unsupported("Kiln holds no {} tensors", element_type_name(to));
  typename B::Primitive y;
  if (x.kind() == Value<B>::Kind::strings) {
    const std::vector<std::string>& text = x.string_values();
    std::vector<double> numbers(text.size());
    for (std::size_t i = 0; i < text.size(); ++i) numbers[i] = parse_number(text[i], i);
    if (*held == DType::f64) {
      y = B::from_data(TensorData::from(numbers, x.shape()), a.device);
    } else if (is_float(*held)) {
      y = B::cast(B::from_data(TensorData::from(std::vector<float>(numbers.begin(), numbers.end()), x.shape()), a.device), *held);
    } else {
      std::vector<std::int64_t> ints(numbers.size());
      for (std::size_t i = 0; i < numbers.size(); ++i) {
        KILN_CHECK(std::abs(numbers[i]) < 9.2e18, "element {} is the string '{}', beyond int64", i, text[i]);
        ints[i] = static_cast<std::int64_t>(numbers[i]);
      }
      y = B::from_data(TensorData::from(ints, x.shape()), a.device);
      if (*held != DType::i64 && dtype_of(to)) y = B::cast(y, *held);
    }
  } else {
    y = x.dtype() == *held ? x.tensor() : B::cast(x.tensor(), *held);
  }
  if (dtype_of(to)) return y;
  return Value<B>::typed(Value<B>::host(wrap_into(B::into_data(y), to), a.device), to);
}

}  // namespace elementwise_detail

// The op types add_elementwise_ops registers (checked when a table is built): a module that
// kiln-onnx2cpp generates takes only the groups its graph uses.
inline constexpr std::string_view kElementwiseOps[] = {
    "Abs", "Neg", "Exp", "Log", "Sqrt", "Reciprocal", "Sin", "Cos", "Tan", "Tanh", "Erf", "Floor", "Ceil",
    "Round", "Sigmoid", "Relu", "Sign", "IsNaN", "Not", "Add", "Sub", "Mul", "Div", "And", "Or", "Xor",
    "Equal", "Less", "LessOrEqual", "Greater", "GreaterOrEqual", "Sum", "Mean", "Max", "Min", "Softplus",
    "Asin", "Acos", "Atan", "Sinh", "Cosh", "Asinh", "Acosh", "Atanh", "Softsign", "LeakyRelu", "Elu", "Selu",
    "Celu", "ThresholdedRelu", "HardSigmoid", "HardSwish", "Mish", "Gelu", "Shrink", "IsInf", "PRelu", "Pow",
    "Mod", "Clip", "Where", "Cast", "CastLike"};
inline constexpr OpGroup kElementwiseGroup{"elementwise", kElementwiseOps};

template <class B> void add_elementwise_ops(OpTable<B>& t) {
  using namespace elementwise_detail;
  using P = typename B::Primitive;

  // ---- the catalogue's ops, as ONNX means them. The unary ones mean the same since opset 1
  // (the legacy consumed_inputs attribute of opsets 1 to 5 changes nothing), the binary ones
  // broadcast NumPy's way from opset 7.
  t["Abs"] = {unary<B, ops::Abs>(), 1};
  t["Neg"] = {unary<B, ops::Neg>(), 1};
  t["Exp"] = {unary<B, ops::Exp>(), 1};
  t["Log"] = {unary<B, ops::Log>(), 1};
  t["Sqrt"] = {unary<B, ops::Sqrt>(), 1};
  t["Reciprocal"] = {unary<B, ops::Recip>(), 1};
  t["Sin"] = {unary<B, ops::Sin>(), 1};
  t["Cos"] = {unary<B, ops::Cos>(), 1};
  t["Tan"] = {unary<B, ops::Tan>(), 1};
  t["Tanh"] = {unary<B, ops::Tanh>(), 1};
  t["Erf"] = {unary<B, ops::Erf>(), 1};
  t["Floor"] = {unary<B, ops::Floor>(), 1};
  t["Ceil"] = {unary<B, ops::Ceil>(), 1};
  t["Round"] = {unary<B, ops::Round>(), 1};
  t["Sigmoid"] = {unary<B, ops::Sigmoid>(), 1};
  t["Relu"] = {unary<B, ops::Relu>(), 1};
  t["Sign"] = {unary<B, ops::Sign>(), 1};
  t["IsNaN"] = {unary<B, ops::IsNan>(), 1};
  t["Not"] = {unary<B, ops::LogicalNot>(), 1};
  t["Add"] = {binary<B, ops::Add>()};
  t["Sub"] = {binary<B, ops::Sub>()};
  t["Mul"] = {binary<B, ops::Mul>()};
  t["Div"] = {binary<B, ops::Div>()};
  t["And"] = {binary<B, ops::LogicalAnd>()};
  t["Or"] = {binary<B, ops::LogicalOr>()};
  t["Xor"] = {binary<B, ops::LogicalXor>()};
  t["Equal"] = {compare<B, ops::Equal>()};
  t["Less"] = {compare<B, ops::Less>()};
  t["LessOrEqual"] = {compare<B, ops::LessEqual>()};
  t["Greater"] = {compare<B, ops::Greater>()};
  t["GreaterOrEqual"] = {compare<B, ops::GreaterEqual>()};
  t["Sum"] = {fold<B, ops::Add>(false)};
  t["Mean"] = {fold<B, ops::Add>(true)};
  t["Max"] = {fold<B, ops::Maximum>(false)};
  t["Min"] = {fold<B, ops::Minimum>(false)};

  t["Softplus"] = {[](const Args<B>& a) -> Outs<B> {
    // ONNX's softplus is log(1 + e^x) everywhere (the catalogue's switches to x above 20,
    // which is the same value in float precision).
    return {provided::unary<B, ops::Softplus>(a[0])};
  }, 1};

  // The inverse and hyperbolic trigonometric functions are the catalogue's (since opset 7
  // and 9), which keep their precision at the ends of their domains.
  t["Asin"] = {unary<B, ops::Asin>()};
  t["Acos"] = {unary<B, ops::Acos>()};
  t["Atan"] = {unary<B, ops::Atan>()};
  t["Sinh"] = {unary<B, ops::Sinh>()};
  t["Cosh"] = {unary<B, ops::Cosh>()};
  t["Asinh"] = {unary<B, ops::Asinh>()};
  t["Acosh"] = {unary<B, ops::Acosh>()};
  t["Atanh"] = {unary<B, ops::Atanh>()};

  // ---- ONNX's own formulas (Softsign, Elu, Selu and HardSigmoid, like the catalogue's unary
  // ops, mean the same since opset 1: their first versions differ only by consumed_inputs)
  t["Softsign"] = {[](const Args<B>& a) {
    return float_program(a, "softsign", {}, [](Expr x, Ins) { return x / (Expr(1.0) + x.abs()); });
  }, 1};
  t["LeakyRelu"] = {[](const Args<B>& a) {
    return float_program(a, "leaky_relu", {a.node.attr_float("alpha", 0.01)},
                         [](Expr x, Ins p) { return (x < Expr(0.0)).select(x * p[0], x); });
  }};
  t["Elu"] = {[](const Args<B>& a) {
    return float_program(a, "elu", {a.node.attr_float("alpha", 1.0)},
                         [](Expr x, Ins p) { return (x < Expr(0.0)).select(p[0] * x.expm1(), x); });
  }, 1};
  t["Selu"] = {[](const Args<B>& a) {
    return float_program(a, "selu",
                         {a.node.attr_float("alpha", 1.67326319217681884765625),
                          a.node.attr_float("gamma", 1.05070102214813232421875)},
                         [](Expr x, Ins p) { return p[1] * (x <= Expr(0.0)).select(p[0] * x.expm1(), x); });
  }, 1};
  t["Celu"] = {[](const Args<B>& a) {
    return float_program(a, "celu", {a.node.attr_float("alpha", 1.0)}, [](Expr x, Ins p) {
      return relu_part(x) + (x < Expr(0.0)).select(p[0] * (x / p[0]).expm1(), Expr(0.0));
    });
  }};
  t["ThresholdedRelu"] = {[](const Args<B>& a) {
    return float_program(a, "thresholded_relu", {a.node.attr_float("alpha", 1.0)},
                         [](Expr x, Ins p) { return (x > p[0]).select(x, Expr(0.0)); });
  }};
  t["HardSigmoid"] = {[](const Args<B>& a) {
    return float_program(a, "hard_sigmoid", {a.node.attr_float("alpha", 0.2), a.node.attr_float("beta", 0.5)},
                         [](Expr x, Ins p) {
                           const Expr v = x * p[0] + p[1];
                           return (v < Expr(0.0)).select(Expr(0.0), (v > Expr(1.0)).select(Expr(1.0), v));
                         });
  }, 1};
  t["HardSwish"] = {[](const Args<B>& a) {
    return float_program(a, "hard_swish", {}, [](Expr x, Ins) {
      const Expr v = x * Expr(1.0 / 6.0) + Expr(0.5);
      return x * (v < Expr(0.0)).select(Expr(0.0), (v > Expr(1.0)).select(Expr(1.0), v));
    });
  }};
  t["Mish"] = {[](const Args<B>& a) {
    return float_program(a, "mish", {}, [](Expr x, Ins) {
      const Expr sp = (x > Expr(20.0)).select(x, x.exp().log1p());
      return x * sp.tanh();
    });
  }};
  t["Gelu"] = {[](const Args<B>& a) -> Outs<B> {
    const std::string approximate = a.node.attr_string("approximate", "none");
    if (approximate == "tanh") return {provided::unary<B, ops::GeluTanh>(a[0])};
    KILN_CHECK(approximate == "none", "approximate must be 'none' or 'tanh', got '{}'", approximate);
    return {provided::unary<B, ops::GeluErf>(a[0])};
  }};
  t["Shrink"] = {[](const Args<B>& a) {
    return float_program(a, "shrink", {a.node.attr_float("bias", 0.0), a.node.attr_float("lambd", 0.5)},
                         [](Expr x, Ins p) {
                           return (x < -p[1]).select(x + p[0], (x > p[1]).select(x - p[0], Expr(0.0)));
                         });
  }};
  t["IsInf"] = {[](const Args<B>& a) -> Outs<B> {
    check_float(a, 0);
    const bool pos = a.node.attr_int("detect_positive", 1) != 0, neg = a.node.attr_int("detect_negative", 1) != 0;
    const std::string name = std::string("isinf") + (pos ? "+" : "") + (neg ? "-" : "");
    const codegen::Program& p = detail::program(name, a.dtype(0), 1, 0, [&](Ins in, Ins) {
      const Expr x = in[0];
      const Mask inf = x.isInf();
      if (pos && neg) return inf;
      if (pos) return inf && (x > Expr(0.0));
      if (neg) return inf && (x < Expr(0.0));
      return inf && !inf;
    });
    return {detail::run<B>(p, {a[0]})};
  }};
  t["PRelu"] = {[](const Args<B>& a) -> Outs<B> {
    check_same(a, 0, 1);
    const codegen::Program& p = detail::program("prelu", a.dtype(0), 2, 0, [](Ins in, Ins) {
      return (in[0] < Expr(0.0)).select(in[0] * in[1], in[0]);
    });
    return {detail::run<B>(p, {a[0], a[1]})};
  }};
  t["Pow"] = {[](const Args<B>& a) -> Outs<B> {
    // The result has the base's type; an exponent of another type is cast to it, and an
    // integer base with a float exponent computes in the exponent's type.
    const DType base = a.dtype(0), exponent = a.dtype(1);
    if (base == exponent) return {provided::binary<B, ops::Pow>(a[0], a[1])};
    if (is_float(base)) return {provided::binary<B, ops::Pow>(a[0], B::cast(a[1], base))};
    return {B::cast(provided::binary<B, ops::Pow>(B::cast(a[0], exponent), a[1]), base)};
  }};
  t["Mod"] = {[](const Args<B>& a) -> Outs<B> {
    check_same(a, 0, 1);
    const bool c_style = a.node.attr_int("fmod", 0) != 0;
    if (!c_style) {
      KILN_CHECK(!is_float(a.dtype(0)), "fmod must be 1 for float inputs");
      return {provided::binary<B, ops::Rem>(a[0], a[1])};
    }
    // fmod: the remainder with the dividend's sign, a - trunc(a / b) * b.
    const codegen::Program& p = detail::program("fmod", a.dtype(0), 2, 0, [&](Ins in, Ins) {
      const Expr x = in[0], y = in[1];
      if (is_float(a.dtype(0))) {
        const Expr q = x / y;
        const Expr tq = (q < Expr(0.0)).select(q.ceil(), q.floor());
        return x - tq * y;
      }
      // From the floored remainder r: where r is not 0 and r and x differ in sign, r - y.
      const Expr r(codegen::make_node(codegen::Kind::int_rem, {x.node(), y.node()}));
      const Mask fix = (r != Expr(0.0)) && ((r < Expr(0.0)) != (x < Expr(0.0)));
      return fix.select(r - y, r);
    });
    return {detail::run<B>(p, {a[0], a[1]})};
  }};
  t["Clip"] = {[](const Args<B>& a) -> Outs<B> {
    double lo = -std::numeric_limits<double>::infinity(), hi = std::numeric_limits<double>::infinity();
    if (a.opset < 11) {
      lo = a.node.attr_float("min", lo);
      hi = a.node.attr_float("max", hi);
    } else {
      if (a.has(1)) lo = a.scalar(1);
      if (a.has(2)) hi = a.scalar(2);
    }
    const DType dtype = a.dtype(0);
    KILN_CHECK(dtype != DType::boolean, "expected a numeric tensor, got bool");
    if (!is_float(dtype)) {
      // Integer bounds beyond the dtype's range bound nothing (and must fit it as parameters).
      const double low = dtype == DType::i32 ? -2147483648.0 : dtype == DType::u8 ? 0.0 : -9.2e18;
      const double high = dtype == DType::i32 ? 2147483647.0 : dtype == DType::u8 ? 255.0 : 9.2e18;
      lo = std::clamp(lo, low, high);
      hi = std::clamp(hi, low, high);
    }
    const codegen::Program& p = detail::program("clip", dtype, 1, 2, [](Ins in, Ins ps) {
      const Expr lower = (in[0] < ps[0]).select(ps[0], in[0]);
      return (lower > ps[1]).select(ps[1], lower);
    });
    return {detail::run<B>(p, {a[0]}, {lo, hi})};
  }};
  t["Where"] = {[](const Args<B>& a) -> Outs<B> {
    KILN_CHECK(a.dtype(0) == DType::boolean, "the condition must be bool, got {} {}", a.shape(0), a.dtype(0));
    check_same(a, 1, 2);
    return {provided::where<B>(a[0], a[1], a[2])};
  }};
  t["Cast"] = {[](const Args<B>& a) -> Outs<B> {
    return {cast_value(a, a.value(0), static_cast<ElementType>(a.node.attr_int("to", 0)))};
  }};
  t["CastLike"] = {[](const Args<B>& a) -> Outs<B> { return {cast_value(a, a.value(0), a.value(1).type())}; }};
  (void)sizeof(P);
}

}  // namespace kiln::onnx
