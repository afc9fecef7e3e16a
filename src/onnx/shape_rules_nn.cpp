// src/onnx/shape_rules_nn.cpp: the shape rules of the nn ops (kiln/onnx/ops_nn.hpp,
// ops_rnn.hpp and ops_resize.hpp): MatMul, Gemm, convolutions and pooling over ONNX's
// windows, the normalizations, Dropout, RNN/GRU/LSTM and Resize. Named by the table in
// src/onnx/shapes.cpp, over the shared pieces of src/onnx/shape_rules.hpp.
#include "shape_rules.hpp"

#include <cmath>

namespace kiln::onnx::shape_rules {

// ---------------------------------------------------------------- nn

Outs matmul(const Context& c) {
  const std::optional<DType> dtype = same_dtype(c);
  const std::optional<Dims>&a = c.dims(0), &b = c.dims(1);
  if (!a || !b) return {tensor(dtype, std::nullopt)};
  KILN_CHECK(!a->empty() && !b->empty(), "MatMul takes operands of rank 1 or more, got {} and {}", text(*a), text(*b));
  Dims ad = *a, bd = *b;
  if (ad.size() == 1) ad.insert(ad.begin(), 1);
  if (bd.size() == 1) bd.push_back(1);
  KILN_CHECK(!known(ad.back()) || !known(bd[bd.size() - 2]) || ad.back() == bd[bd.size() - 2],
             "the inner dims of {} and {} differ", text(*a), text(*b));
  Dims out = broadcast(Dims(ad.begin(), ad.end() - 2), Dims(bd.begin(), bd.end() - 2));
  if (a->size() > 1) out.push_back(ad[ad.size() - 2]);
  if (b->size() > 1) out.push_back(bd.back());
  return {tensor(dtype, out)};
}

Outs gemm(const Context& c) {
  const std::optional<DType> dtype = same_dtype(c, 0, 2);
  const std::optional<Dims>&a = c.dims(0), &b = c.dims(1);
  if (!a || !b) return {of_rank(dtype, 2)};
  KILN_CHECK(a->size() == 2 && b->size() == 2, "Gemm takes 2-d A and B, got {} and {}", text(*a), text(*b));
  const bool ta = c.node.attr_int("transA", 0) != 0, tb = c.node.attr_int("transB", 0) != 0;
  const std::int64_t m = (*a)[ta ? 1 : 0], k = (*a)[ta ? 0 : 1], k2 = (*b)[tb ? 1 : 0], n = (*b)[tb ? 0 : 1];
  KILN_CHECK(!known(k) || !known(k2) || k == k2, "A {} (transA {}) and B {} (transB {}) do not multiply", text(*a), ta,
             text(*b), tb);
  return {tensor(dtype, Dims{m, n})};
}

namespace {

// ONNX's output length of a window along one dim (Conv, pooling).
struct Window {
  Dims kernel, stride, dilation, pads;  // pads: n begins, then n ends
  std::string auto_pad;
  bool ceil_mode = false;
};

Window window(const Node& node, std::size_t n, Dims kernel) {
  Window w{std::move(kernel),
           spatial_attr(node, "strides", n, 1),
           spatial_attr(node, "dilations", n, 1),
           spatial_attr(node, "pads", 2 * n, 0),
           node.attr_string("auto_pad", "NOTSET"),
           node.attr_int("ceil_mode", 0) != 0};
  for (std::size_t i = 0; i < n; ++i)
    KILN_CHECK(w.kernel[i] != 0 && w.stride[i] >= 1 && w.dilation[i] >= 1,
               "kernel {}, strides {} and dilations {} must be positive", text(w.kernel), w.stride, w.dilation);
  return w;
}

std::int64_t window_output(const Window& w, std::size_t i, std::int64_t in) {
  const std::size_t n = w.kernel.size();
  if (!known(in)) return kUnknown;
  if (w.auto_pad == "SAME_UPPER" || w.auto_pad == "SAME_LOWER") return (in + w.stride[i] - 1) / w.stride[i];
  if (!known(w.kernel[i])) return kUnknown;
  const bool valid = w.auto_pad == "VALID";
  const std::int64_t begin = valid ? 0 : w.pads[i], end = valid ? 0 : w.pads[n + i];
  const std::int64_t span = w.dilation[i] * (w.kernel[i] - 1) + 1, room = in + begin + end - span;
  KILN_CHECK(room >= 0, "an input of size {} (pads {} and {}) is smaller than the window of {}", in, begin, end, span);
  std::int64_t out = (w.ceil_mode ? room + w.stride[i] - 1 : room) / w.stride[i] + 1;
  // A window that would start entirely in the end padding is dropped.
  if (w.ceil_mode && (out - 1) * w.stride[i] >= in + begin) --out;
  return out;
}

}  // namespace

Outs conv(const Context& c) {
  const std::optional<Dims>&x = c.dims(0), &wd = c.dims(1);
  const std::optional<DType> dtype = c.dtype(0);
  if (!x) return {of_rank(dtype, rank_of(wd))};
  KILN_CHECK(x->size() >= 3, "expected an input [N, C, spatial...] of rank 3 or more, got {}", text(*x));
  const std::size_t n = x->size() - 2;
  Dims w = wd ? *wd : Dims(x->size(), kUnknown);
  KILN_CHECK(w.size() == x->size(), "the weight {} must have the rank of the input {}", text(w), text(*x));
  Dims kernel(w.begin() + 2, w.end());
  if (c.node.find("kernel_shape")) {
    const Dims attr = spatial_attr(c.node, "kernel_shape", n, 1);
    for (std::size_t i = 0; i < n; ++i) kernel[i] = merge(kernel[i], attr[i], "kernel_shape and the weight's kernel");
  }
  const std::int64_t group = c.node.attr_int("group", 1);
  KILN_CHECK(!known((*x)[1]) || !known(w[1]) || (*x)[1] == w[1] * group,
             "the input {} has {} channels, the weight {} takes {} ({} groups)", text(*x), (*x)[1], text(w),
             w[1] * group, group);
  const Window win = window(c.node, n, kernel);
  Dims out{(*x)[0], w[0]};
  for (std::size_t i = 0; i < n; ++i) out.push_back(window_output(win, i, (*x)[2 + i]));
  return {tensor(dtype, out)};
}

Outs conv_transpose(const Context& c) {
  const std::optional<Dims>&x = c.dims(0), &wd = c.dims(1);
  const std::optional<DType> dtype = c.dtype(0);
  if (!x) return {of_rank(dtype, rank_of(wd))};
  KILN_CHECK(x->size() >= 3, "expected an input [N, C, spatial...] of rank 3 or more, got {}", text(*x));
  const std::size_t n = x->size() - 2;
  const Dims w = wd ? *wd : Dims(x->size(), kUnknown);
  KILN_CHECK(w.size() == x->size(), "the weight {} must have the rank of the input {}", text(w), text(*x));
  const std::int64_t group = c.node.attr_int("group", 1);
  KILN_CHECK(!known((*x)[1]) || !known(w[0]) || (*x)[1] == w[0], "weight {} expects {} input channels, input {} has {}",
             text(w), w[0], text(*x), (*x)[1]);
  Dims kernel(w.begin() + 2, w.end());
  if (c.node.find("kernel_shape")) kernel = spatial_attr(c.node, "kernel_shape", n, 1);
  const Dims stride = spatial_attr(c.node, "strides", n, 1), dilation = spatial_attr(c.node, "dilations", n, 1);
  const Dims output_padding = spatial_attr(c.node, "output_padding", n, 0),
             pads = spatial_attr(c.node, "pads", 2 * n, 0);
  Dims output_shape = c.node.attr_ints("output_shape");
  if (output_shape.size() == n + 2) output_shape.erase(output_shape.begin(), output_shape.begin() + 2);
  KILN_CHECK(output_shape.empty() || output_shape.size() == n, "output_shape {} must have {} entries", output_shape, n);
  const std::string auto_pad = c.node.attr_string("auto_pad", "NOTSET");
  Dims out{(*x)[0], times(w[1], group)};
  for (std::size_t i = 0; i < n; ++i) {
    const std::int64_t in = (*x)[2 + i];
    std::int64_t size = kUnknown;
    if (!output_shape.empty())
      size = output_shape[i];
    else if (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER")
      size = times(in, stride[i]);
    else if (known(in) && known(kernel[i])) {
      const std::int64_t full = (in - 1) * stride[i] + dilation[i] * (kernel[i] - 1) + 1 + output_padding[i];
      size = auto_pad == "VALID" ? full : full - pads[i] - pads[n + i];
      KILN_CHECK(size >= 1, "input {}, weight {}, strides {}, pads {} and output_padding {} give an empty output",
                 text(*x), text(w), stride, pads, output_padding);
    }
    out.push_back(size);
  }
  return {tensor(dtype, out)};
}

Outs pool(const Context& c) {
  const std::optional<Dims>& x = c.dims(0);
  const std::optional<DType> dtype = c.dtype(0);
  if (!x) return {tensor(dtype, std::nullopt), tensor(DType::i64, std::nullopt)};
  KILN_CHECK(x->size() >= 3, "expected an input [N, C, spatial...] of rank 3 or more, got {}", text(*x));
  const std::size_t n = x->size() - 2;
  KILN_CHECK(c.node.find("kernel_shape") != nullptr, "the kernel_shape attribute is required");
  const Window win = window(c.node, n, spatial_attr(c.node, "kernel_shape", n, 1));
  Dims out{(*x)[0], (*x)[1]};
  for (std::size_t i = 0; i < n; ++i) out.push_back(window_output(win, i, (*x)[2 + i]));
  return {tensor(dtype, out), tensor(DType::i64, out)};
}

Outs global_pool(const Context& c) {
  const std::optional<Dims>& x = c.dims(0);
  if (!x) return {tensor(c.dtype(0), std::nullopt)};
  KILN_CHECK(x->size() >= 3, "expected an input [N, C, spatial...] of rank 3 or more, got {}", text(*x));
  Dims out(x->size(), 1);
  out[0] = (*x)[0];
  out[1] = (*x)[1];
  return {tensor(c.dtype(0), out)};
}

// BatchNormalization: Y like X; in training mode the running mean and variance, one per channel.
Outs batch_norm(const Context& c) {
  const std::optional<Dims>& x = c.dims(0);
  const InferredValue channels = tensor(c.dtype(0), x && x->size() >= 2 ? std::optional(Dims{(*x)[1]}) : std::nullopt);
  return {tensor(c.dtype(0), x), channels, channels};
}

// LayerNormalization: Y like X; Mean and InvStdDev keep the normalized dims with size 1.
Outs layer_norm(const Context& c) {
  const std::optional<Dims>& x = c.dims(0);
  if (!x) return {tensor(c.dtype(0), std::nullopt), tensor(c.dtype(0), std::nullopt), tensor(c.dtype(0), std::nullopt)};
  Dims stats = *x;
  for (std::size_t d = axis_of(c.node.attr_int("axis", -1), x->size()); d < x->size(); ++d) stats[d] = 1;
  return {tensor(c.dtype(0), x), tensor(c.dtype(0), stats), tensor(c.dtype(0), stats)};
}

Outs dropout(const Context& c) {
  return {tensor(c.dtype(0), c.dims(0)), tensor(c.opset >= 10 ? std::optional(DType::boolean) : c.dtype(0), c.dims(0))};
}

// RNN, GRU and LSTM: Y [steps, directions, batch, hidden] and the last states [directions,
// batch, hidden], batch first with layout 1.
Outs recurrent(const Context& c) {
  const std::optional<Dims>& x = c.dims(0);
  const std::optional<DType> dtype = c.dtype(0);
  const bool batch_first = c.node.attr_int("layout", 0) != 0;
  const std::int64_t directions = c.node.attr_string("direction", "forward") == "bidirectional" ? 2 : 1;
  std::int64_t hidden = c.node.attr_int("hidden_size", kUnknown);
  if (!known(hidden) && c.has(2) && c.dims(2) && c.dims(2)->size() == 3) hidden = (*c.dims(2))[2];
  if (!x) return Outs(3, of_rank(dtype, std::nullopt));
  KILN_CHECK(x->size() == 3, "X must be 3-d, got {}", text(*x));
  const std::int64_t steps = (*x)[batch_first ? 1 : 0], batch = (*x)[batch_first ? 0 : 1];
  const Dims y = batch_first ? Dims{batch, steps, directions, hidden} : Dims{steps, directions, batch, hidden};
  const Dims state = batch_first ? Dims{batch, directions, hidden} : Dims{directions, batch, hidden};
  return {tensor(dtype, y), tensor(dtype, state), tensor(dtype, state)};
}

// Resize (opset 10 on) and Upsample: each resized axis is sizes[i] or floor(scales[i] * in).
Outs resize(const Context& c) {
  const std::optional<Dims>& in = c.dims(0);
  if (!in) return {tensor(c.dtype(0), std::nullopt)};
  const bool upsample = c.node.op_type == "Upsample";
  std::vector<std::size_t> axes;
  for (std::size_t d = 0; d < in->size(); ++d) axes.push_back(d);
  if (c.node.find("axes")) axes = axes_of(c.node.attr_ints("axes"), in->size());
  const std::size_t scales_at = upsample || c.opset < 11 ? 1 : 2, sizes_at = 3;
  std::optional<std::vector<double>> scales;
  std::optional<Dims> sizes;
  if (upsample && c.opset < 9)
    scales = c.node.attr_floats("scales");
  else if (c.given(scales_at))
    scales = c.reals(scales_at);
  if (!upsample && c.opset >= 11 && c.given(sizes_at)) {
    sizes = c.ints(sizes_at);
    scales.reset();
  }
  const bool stretch = c.node.attr_string("keep_aspect_ratio_policy", "stretch") == "stretch";
  Dims out = *in;
  for (std::size_t i = 0; i < axes.size(); ++i) {
    std::int64_t& d = out[axes[i]];
    if (sizes && stretch) {
      KILN_CHECK(sizes->size() == axes.size(), "sizes must have {} entries for input {}, got {}", axes.size(),
                 text(*in), sizes->size());
      d = (*sizes)[i];
    } else if (scales && !sizes) {
      KILN_CHECK(scales->size() == axes.size(), "scales must have {} entries for input {}, got {}", axes.size(),
                 text(*in), scales->size());
      d = known(d) ? static_cast<std::int64_t>(std::floor((*scales)[i] * static_cast<double>(d))) : kUnknown;
    } else {
      d = kUnknown;
    }
  }
  return {tensor(c.dtype(0), out)};
}

}  // namespace kiln::onnx::shape_rules
