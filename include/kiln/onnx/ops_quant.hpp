// ONNX's linear quantization ops on uint8 (the quantized type Kiln holds; int8 tensors are
// unsupported where they are read): QuantizeLinear, DequantizeLinear, DynamicQuantizeLinear,
// and the integer and quantized products MatMulInteger, ConvInteger, QLinearMatMul and
// QLinearConv. The products run in floating point on the zero-point-shifted values, which is
// exact while a sum of products stays below 2^24 (f32) and otherwise computes in f64; the
// quantized ones then requantize with one elementwise program (round half to even, saturate).
#pragma once

#include "kiln/onnx/ops_nn.hpp"

#include <cstdint>
#include <vector>

namespace kiln::onnx {

namespace quant_detail {

using nn_detail::Outs;
using nn_detail::P;
using codegen::Expr;

// A scale or zero point: one value, or one per entry of `axis` (negative counts from the end)
// of a tensor of shape x, reshaped to broadcast along it. The axis is read only in the second
// case: a scalar scale of a rank-1 tensor has no axis 1 to name.
template <class B>
P<B> along_axis(const Args<B>& a, std::size_t i, const Shape& x, std::int64_t axis_attr, DType dtype) {
  const Shape s = a.shape(i);
  P<B> v = nn_detail::with_dtype<B>(a[i], dtype);
  if (s.numel() == 1) return B::reshape(v, Shape(std::vector<std::int64_t>(x.rank(), 1)));
  const std::size_t axis = detail::axis(axis_attr, x.rank());
  KILN_CHECK(s.rank() == 1 && s[0] == x[axis], "input {} ({}) must hold one value or one per entry of axis {} of {}",
             i, s, axis, x);
  return B::reshape(v, nn_detail::along(x.rank(), axis, s[0]));
}

template <class B> void check_u8(const Args<B>& a, std::size_t i) {
  if (a.dtype(i) != DType::u8) unsupported("input {} is {}; Kiln runs the quantized ops on uint8", i, a.dtype(i));
}

// round(x / scale) + zero_point, saturated to [0, 255], as uint8.
template <class B> P<B> quantize(const P<B>& x, const P<B>& scale, const P<B>& zero_point) {
  const codegen::Program& p = detail::program("quantize_u8", B::dtype(x), 3, 0, [](auto in, auto) {
    const Expr q = (in[0] / in[1]).rint() + in[2];
    return (q < Expr(0.0)).select(Expr(0.0), (q > Expr(255.0)).select(Expr(255.0), q));
  });
  return B::cast(detail::run<B>(p, {x, scale, zero_point}), DType::u8);
}

// The float type that holds a sum of `terms` products of two uint8 values exactly.
inline DType exact_type(std::int64_t terms) { return terms * 255 * 255 < (std::int64_t{1} << 24) ? DType::f32 : DType::f64; }

// x - zero_point in `dtype` (the zero point broadcast as given, or 0 when absent).
template <class B> P<B> shifted(const Args<B>& a, std::size_t x, std::size_t zp, DType dtype, const P<B>& zero_point) {
  const P<B> v = B::cast(a[x], dtype);
  return a.has(zp) ? nn_detail::sub<B>(v, zero_point) : v;
}

}  // namespace quant_detail

// The op types add_quant_ops registers (checked when a table is built): a module that
// kiln-onnx2cpp generates takes only the groups its graph uses.
inline constexpr std::string_view kQuantOps[] = {"QuantizeLinear", "DequantizeLinear", "DynamicQuantizeLinear",
                                                 "MatMulInteger",  "ConvInteger",      "QLinearMatMul",
                                                 "QLinearConv"};
inline constexpr OpGroup kQuantGroup{"quant", kQuantOps};

template <class B> void add_quant_ops(OpTable<B>& t) {
  using namespace quant_detail;

  t["QuantizeLinear"] = {[](const Args<B>& a) -> Outs<B> {
    nn_detail::check_float(a, 0);
    const Shape x = a.shape(0);
    const std::int64_t axis = a.node.attr_int("axis", 1);
    if (a.has(2)) check_u8(a, 2);
    const DType dtype = a.dtype(0);
    const P<B> zp = a.has(2) ? along_axis(a, 2, x, axis, dtype) : detail::full<B>(Shape{1}, 0.0, dtype, a.device);
    return {quantize<B>(a[0], along_axis(a, 1, x, axis, dtype), zp)};
  }, 10};

  t["DequantizeLinear"] = {[](const Args<B>& a) -> Outs<B> {
    const Shape x = a.shape(0);
    if (a.dtype(0) != DType::i32) check_u8(a, 0);
    const std::int64_t axis = a.node.attr_int("axis", 1);
    const DType dtype = a.dtype(1);
    KILN_CHECK(is_float(dtype), "the scale must be a float tensor, got {}", dtype);
    const P<B> zp = a.has(2) ? along_axis(a, 2, x, axis, dtype) : P<B>{};
    return {nn_detail::mul<B>(shifted(a, 0, 2, dtype, zp), along_axis(a, 1, x, axis, dtype))};
  }, 10};

  t["DynamicQuantizeLinear"] = {[](const Args<B>& a) -> Outs<B> {
    nn_detail::check_float(a, 0);
    const DType dtype = a.dtype(0);
    // The range always includes 0; scale = (max - min) / 255, zero point = round(-min / scale).
    const double lo = std::min(0.0, B::into_data(provided::reduce_all<B>(a[0], ops::ReduceOp::min)).template to_vec<double>()[0]);
    const double hi = std::max(0.0, B::into_data(provided::reduce_all<B>(a[0], ops::ReduceOp::max)).template to_vec<double>()[0]);
    const float scale = static_cast<float>((hi - lo) / 255.0);
    const float zero = scale == 0.0f ? 0.0f : std::clamp(std::nearbyint(-static_cast<float>(lo) / scale), 0.0f, 255.0f);
    const P<B> s = detail::full<B>(Shape{}, scale, dtype, a.device), z = detail::full<B>(Shape{}, zero, dtype, a.device);
    const P<B> y = scale == 0.0f ? B::cast(detail::full<B>(a.shape(0), zero, dtype, a.device), DType::u8)
                                 : quantize<B>(a[0], s, z);
    return {y, s, B::cast(z, DType::u8)};
  }, 11};

  t["MatMulInteger"] = {[](const Args<B>& a) -> Outs<B> {
    check_u8(a, 0);
    check_u8(a, 1);
    const Shape as = a.shape(0);
    const DType dtype = exact_type(as[as.rank() - 1]);
    const P<B> az = a.has(2) ? B::cast(a[2], dtype) : P<B>{}, bz = a.has(3) ? B::cast(a[3], dtype) : P<B>{};
    const P<B> product = B::matmul(shifted(a, 0, 2, dtype, az), shifted(a, 1, 3, dtype, bz));
    return {B::cast(product, DType::i32)};
  }, 10};

  t["ConvInteger"] = {[](const Args<B>& a) -> Outs<B> {
    check_u8(a, 0);
    check_u8(a, 1);
    const Shape ws = a.shape(1);
    const DType dtype = exact_type(ws.numel() / ws[0]);
    const P<B> xz = a.has(2) ? B::cast(a[2], dtype) : P<B>{}, wz = a.has(3) ? B::cast(a[3], dtype) : P<B>{};
    // Conv's kernel on the shifted inputs, without a bias.
    const std::vector<std::optional<Value<B>>> inputs{Value<B>(shifted(a, 0, 2, dtype, xz)),
                                                      Value<B>(shifted(a, 1, 3, dtype, wz))};
    Outs<B> y = nn_detail::conv<B>(Args<B>{a.node, inputs, a.opset, a.device});
    return {B::cast(y.at(0).tensor(), DType::i32)};
  }, 10};

  t["QLinearMatMul"] = {[](const Args<B>& a) -> Outs<B> {
    check_u8(a, 0);
    check_u8(a, 3);
    const DType dtype = DType::f32;
    const Shape as = a.shape(0), bs = a.shape(3);
    const P<B> av = nn_detail::mul<B>(nn_detail::sub<B>(B::cast(a[0], dtype), B::cast(a[2], dtype)),
                                      nn_detail::with_dtype<B>(a[1], dtype));
    const P<B> bv = nn_detail::mul<B>(nn_detail::sub<B>(B::cast(a[3], dtype), B::cast(a[5], dtype)),
                                      nn_detail::with_dtype<B>(a[4], dtype));
    const P<B> y = B::matmul(av, bv);
    return {quantize<B>(y, nn_detail::with_dtype<B>(a[6], dtype), B::cast(a[7], dtype))};
  }, 10};

  t["QLinearConv"] = {[](const Args<B>& a) -> Outs<B> {
    check_u8(a, 0);
    check_u8(a, 3);
    const DType dtype = DType::f32;
    const Shape xs = a.shape(0), ws = a.shape(3);
    // The integer accumulation of ONNX's reference, then one scale: y = acc · sx·sw / sy + zy.
    const P<B> x = nn_detail::sub<B>(B::cast(a[0], dtype), along_axis(a, 2, xs, 1, dtype));
    const P<B> w = nn_detail::sub<B>(B::cast(a[3], dtype), along_axis(a, 5, ws, 0, dtype));
    std::vector<std::optional<Value<B>>> inputs{Value<B>(x), Value<B>(w)};
    if (a.has(8)) inputs.emplace_back(Value<B>(B::cast(a[8], dtype)));
    const P<B> acc = nn_detail::conv<B>(Args<B>{a.node, inputs, a.opset, a.device}).at(0).tensor();
    const Shape ys = B::shape(acc);
    // Per output channel weight scales broadcast along dim 1 of the output.
    const P<B> sw = along_axis(a, 4, ys, 1, dtype);
    const P<B> scale = nn_detail::div<B>(nn_detail::mul<B>(along_axis(a, 1, ys, 1, dtype), sw),
                                         along_axis(a, 6, ys, 1, dtype));
    const codegen::Program& p = detail::program("requantize_u8", dtype, 3, 0, [](auto in, auto) {
      const Expr q = (in[0] * in[1]).rint() + in[2];
      return (q < Expr(0.0)).select(Expr(0.0), (q > Expr(255.0)).select(Expr(255.0), q));
    });
    return {B::cast(detail::run<B>(p, {acc, scale, along_axis(a, 7, ys, 1, dtype)}), DType::u8)};
  }, 10};
}

}  // namespace kiln::onnx
