// src/onnx/shape_rules_other.cpp: the shape rules of the loss, signal, vision and misc ops
// (kiln/onnx/ops_loss.hpp, ops_signal.hpp, ops_vision.hpp and ops_misc.hpp): the losses,
// the window functions, DFT and STFT, GridSample, RoiAlign, NonMaxSuppression, MaxUnpool,
// Unique, Compress, CenterCropPad and Col2Im; and of the quantization ops (ops_quant.hpp).
// Named by the table in src/onnx/shapes.cpp, over the shared pieces of src/onnx/shape_rules.hpp.
#include "shape_rules.hpp"

namespace kiln::onnx::shape_rules {

// ---------------------------------------------------------------- loss, signal, vision, misc

Outs loss(const Context& c) {
  const std::optional<Dims>& scores = c.dims(0);
  const std::string reduction = c.node.attr_string("reduction", "mean");
  std::optional<Dims> out = Dims{};
  if (reduction == "none") {
    out = scores;
    if (out && out->size() >= 2) out->erase(out->begin() + 1);
  }
  return {tensor(c.dtype(0), out), tensor(c.dtype(0), scores)};
}

Outs window_function(const Context& c) {
  const std::optional<DType> dtype = held(c.node.attr_int("output_datatype", 1));
  const std::optional<std::int64_t> n = c.scalar(0);
  return {tensor(dtype, Dims{n ? *n : kUnknown})};
}

namespace {

std::int64_t bins(std::int64_t size, bool onesided) {
  if (!known(size)) return kUnknown;
  return onesided ? size / 2 + 1 : size;
}

// An optional one-number input (DFT's length and axis, STFT's step): the fallback when
// omitted, unknown when given but not known before running.
std::int64_t int_input(const Context& c, std::size_t i, std::int64_t fallback) {
  if (!c.given(i)) return fallback;
  return c.scalar(i).value_or(kUnknown);
}

}  // namespace

Outs dft(const Context& c) {
  const std::optional<Dims>& in = c.dims(0);
  if (!in) return {tensor(c.dtype(0), std::nullopt)};
  const std::int64_t axis = c.opset >= 20 ? int_input(c, 2, -2) : c.node.attr_int("axis", 1);
  if (c.opset >= 20 && c.given(2) && !c.scalar(2)) return {of_rank(c.dtype(0), in->size())};
  const std::size_t dim = axis_of(axis, in->size());
  const bool onesided = c.node.attr_int("onesided", 0) != 0;
  Dims out = *in;
  out[dim] = bins(int_input(c, 1, (*in)[dim]), onesided);
  out.back() = 2;
  return {tensor(c.dtype(0), out)};
}

Outs stft(const Context& c) {
  const std::optional<Dims>& in = c.dims(0);
  if (!in) return {of_rank(c.dtype(0), 4)};
  KILN_CHECK(in->size() == 3, "expected a signal [batch, length, 1 or 2], got {}", text(*in));
  const std::int64_t step = int_input(c, 1, kUnknown);
  std::int64_t frame = int_input(c, 3, kUnknown);
  if (c.given(2) && c.dims(2) && c.dims(2)->size() == 1) frame = (*c.dims(2))[0];
  std::int64_t frames = kUnknown;
  if (known(step) && known(frame) && known((*in)[1])) frames = 1 + ((*in)[1] - frame) / step;
  return {tensor(c.dtype(0), Dims{(*in)[0], frames, bins(frame, c.node.attr_int("onesided", 1) != 0), 2})};
}

Outs grid_sample(const Context& c) {
  const std::optional<Dims>&x = c.dims(0), &grid = c.dims(1);
  if (!x || !grid) return {tensor(c.dtype(0), std::nullopt)};
  KILN_CHECK(grid->size() == x->size() && x->size() >= 3,
             "expected an input [N, C, spatial...] and a grid of its rank, got {} and {}", text(*x), text(*grid));
  Dims out{merge((*x)[0], (*grid)[0], "the batch of the input and of the grid"), (*x)[1]};
  out.insert(out.end(), grid->begin() + 1, grid->end() - 1);
  return {tensor(c.dtype(0), out)};
}

Outs roi_align(const Context& c) {
  const std::optional<Dims>&x = c.dims(0), &rois = c.dims(1);
  return {tensor(c.dtype(0), Dims{rois ? (*rois)[0] : kUnknown, x && x->size() > 1 ? (*x)[1] : kUnknown,
                                  c.node.attr_int("output_height", 1), c.node.attr_int("output_width", 1)})};
}

Outs non_max_suppression(const Context&) { return {tensor(DType::i64, Dims{kUnknown, 3})}; }

Outs max_unpool(const Context& c) {
  const std::optional<Dims>& x = c.dims(0);
  if (c.given(2)) {
    if (const auto out = c.ints(2)) return {tensor(c.dtype(0), out)};
    return {of_rank(c.dtype(0), rank_of(x))};
  }
  if (!x) return {tensor(c.dtype(0), std::nullopt)};
  KILN_CHECK(x->size() >= 3, "expected an input [N, C, spatial...], got {}", text(*x));
  const std::size_t n = x->size() - 2;
  const Dims kernel = spatial_attr(c.node, "kernel_shape", n, 1), stride = spatial_attr(c.node, "strides", n, 1);
  const Dims pads = spatial_attr(c.node, "pads", 2 * n, 0);
  Dims out = *x;
  for (std::size_t i = 0; i < n; ++i)
    if (known(out[2 + i])) out[2 + i] = (out[2 + i] - 1) * stride[i] - pads[i] - pads[n + i] + kernel[i];
  return {tensor(c.dtype(0), out)};
}

// Unique: Y (the unique slices along `axis`, or elements), indices, inverse_indices, counts.
Outs unique(const Context& c) {
  const std::optional<Dims>& in = c.dims(0);
  const InferredValue found = tensor(DType::i64, Dims{kUnknown});
  if (!in) return {tensor(c.dtype(0), std::nullopt), found, found, found};
  if (!c.node.find("axis"))
    return {tensor(c.dtype(0), Dims{kUnknown}), found, tensor(DType::i64, Dims{product(*in)}), found};
  const std::size_t d = axis_of(c.node.attr_int("axis", 0), in->size());
  Dims y = *in;
  y[d] = kUnknown;
  return {tensor(c.dtype(0), y), found, tensor(DType::i64, Dims{(*in)[d]}), found};
}

Outs compress(const Context& c) {
  const std::optional<Dims>& in = c.dims(0);
  if (!c.node.find("axis")) return {tensor(c.dtype(0), Dims{kUnknown})};
  if (!in) return {tensor(c.dtype(0), std::nullopt)};
  Dims out = *in;
  out[axis_of(c.node.attr_int("axis", 0), in->size())] = kUnknown;
  return {tensor(c.dtype(0), out)};
}

Outs center_crop_pad(const Context& c) {
  const std::optional<Dims>& in = c.dims(0);
  if (!in) return {tensor(c.dtype(0), std::nullopt)};
  const std::optional<Dims> sizes = c.ints(1);
  Dims listed_axes = c.node.attr_ints("axes");
  if (listed_axes.empty()) listed_axes = iota(static_cast<std::int64_t>(in->size()));
  const std::vector<std::size_t> axes = axes_of(listed_axes, in->size());
  Dims out = *in;
  for (std::size_t i = 0; i < axes.size(); ++i) out[axes[i]] = sizes && i < sizes->size() ? (*sizes)[i] : kUnknown;
  return {tensor(c.dtype(0), out)};
}

Outs col2im(const Context& c) {
  const std::optional<Dims>& in = c.dims(0);
  const std::optional<Dims> image = c.ints(1), block = c.ints(2);
  if (!in || !image || !block) return {tensor(c.dtype(0), std::nullopt)};
  KILN_CHECK(in->size() == 3, "expected an input [N, C * prod(block), L], got {}", text(*in));
  const std::int64_t k = product(*block);
  KILN_CHECK(!known((*in)[1]) || (k >= 1 && (*in)[1] % k == 0),
             "the input's dim 1 ({}) must be a multiple of prod(block_shape {})", (*in)[1], *block);
  Dims out{(*in)[0], known((*in)[1]) ? (*in)[1] / k : kUnknown};
  out.insert(out.end(), image->begin(), image->end());
  return {tensor(c.dtype(0), out)};
}

// ---------------------------------------------------------------- quantization
// (kiln/onnx/ops_quant.hpp): the products take MatMul's and Conv's rules over their two
// quantized operands.

namespace {
// `rule` over two of the node's inputs (x and w, or a and b), its output of dtype `to`.
Outs product_of(const Context& c, Outs (*rule)(const Context&), std::size_t first, std::size_t second, DType to) {
  const InferredValue* pair[] = {c.has(first) ? c.inputs[first] : nullptr, c.has(second) ? c.inputs[second] : nullptr};
  Outs out = rule(Context{c.node, pair, c.opset});
  out.resize(1);
  out[0].dtype = to;
  out[0].value.reset();
  return out;
}
}  // namespace

Outs quantize_linear(const Context& c) { return {tensor(DType::u8, c.dims(0))}; }
Outs dequantize_linear(const Context& c) { return {tensor(c.dtype(1), c.dims(0))}; }
Outs dynamic_quantize_linear(const Context& c) {
  return {tensor(DType::u8, c.dims(0)), tensor(c.dtype(0), Dims{}), tensor(DType::u8, Dims{})};
}
Outs matmul_integer(const Context& c) { return product_of(c, matmul, 0, 1, DType::i32); }
Outs conv_integer(const Context& c) { return product_of(c, conv, 0, 1, DType::i32); }
Outs qlinear_matmul(const Context& c) { return product_of(c, matmul, 0, 3, DType::u8); }
Outs qlinear_conv(const Context& c) { return product_of(c, conv, 0, 3, DType::u8); }

}  // namespace kiln::onnx::shape_rules
