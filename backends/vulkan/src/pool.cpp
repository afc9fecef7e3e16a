// Pooling on the Vulkan backend (NCHW, f32 and f64 where the device has shaderFloat64): max
// pooling with PyTorch-format indices (the flat h * W + w position within each (n, c) plane),
// average pooling and adaptive average pooling, forward and backward, with the CPU backend's
// checks, error messages and semantics (NaN wins a max window, ties keep the first tap in
// (kh, kw) order, a window of only -inf keeps its first valid position; count_include_pad and
// PyTorch's divisors; adaptive windows [floor(i * H / OH), ceil((i + 1) * H / OH))).
//
// Forward kernels run one invocation per output element. Backward kernels run one invocation
// per input element and loop over the outputs whose windows contain it, adding their
// gradients in the CPU's order, so the results are deterministic (no atomics) and, apart from
// the GPU's division, bit-for-bit the CPU's direct loops:
// - max: the outputs whose window span (dilation included) covers the element and whose
//   stored index equals it. The indices are read back to the host and checked against the
//   plane (the CPU's error), then uploaded as i32.
// - avg: every output whose window covers the element, dy / divisor.
// - adaptive avg: outputs [floor(i * OH / H), floor(((i + 1) * OH - 1) / H)].
//
// The i64 indices are written as (low, high) 32-bit pairs, so the kernels need no shaderInt64.
#include "kernels.hpp"

#include "kiln/vulkan/backend.hpp"

#include <fmt/format.h>

#include <cstring>
#include <limits>
#include <vector>

namespace kiln::vulkan {
namespace {

// Parameter buffer (ints): [0] invocations, [1] H, [2] W, [3] OH, [4] OW, [5..7) kernel,
// [7..9) stride, [9..11) padding, [11..13) dilation, [13] count_include_pad, [14] the offset
// of the source tensor (x forward, dy backward).
constexpr int kParams = 15;

enum class Kind { max_forward, max_backward, avg_forward, avg_backward, adaptive_forward, adaptive_backward };

std::string shader(Kind kind, DType dtype) {
  const std::string t = storage_type(dtype);
  std::string s = "#version 450\n";
  s += fmt::format("layout(local_size_x = {}) in;\n", kWorkgroupSize);
  s += "layout(std430, binding = 0) readonly buffer Params { int params[]; };\n";
  s += fmt::format("layout(std430, binding = 1) writeonly buffer Out {{ {} out_data[]; }};\n", t);
  s += fmt::format("layout(std430, binding = 2) readonly buffer In {{ {} in_data[]; }};\n", t);
  if (kind == Kind::max_forward)
    s += "layout(std430, binding = 3) writeonly buffer Index { int index_data[]; };\n";
  if (kind == Kind::max_backward) s += "layout(std430, binding = 3) readonly buffer Index { int index_data[]; };\n";
  // PyTorch's average-pooling divisor factor along one axis (0: no input element in the window).
  s += "int extent(int o, int n, int k, int s, int p) {\n"
       "  const int start = o * s - p;\n"
       "  const int end = min(start + k, n + p);\n"
       "  const int lo = max(start, 0), hi = min(end, n);\n"
       "  return hi <= lo ? 0 : params[13] != 0 ? end - start : hi - lo;\n"
       "}\n";
  s += "void main() {\n";
  s += fmt::format("  const int i = int(gl_GlobalInvocationID.x + gl_GlobalInvocationID.y * gl_NumWorkGroups.x * {}u);\n",
                   kWorkgroupSize);
  s += "  if (i >= params[0]) return;\n"
       "  const int H = params[1], W = params[2], OH = params[3], OW = params[4];\n"
       "  const int KH = params[5], KW = params[6], SH = params[7], SW = params[8];\n"
       "  const int PH = params[9], PW = params[10], DH = params[11], DW = params[12], SRC = params[14];\n";
  const bool forward = kind == Kind::max_forward || kind == Kind::avg_forward || kind == Kind::adaptive_forward;
  if (forward)
    s += "  const int ow = i % OW, oh = (i / OW) % OH, p = i / (OW * OH);\n"
         "  const int base = SRC + p * H * W;\n";
  else
    s += "  const int iw = i % W, ih = (i / W) % H, p = i / (W * H);\n"
         "  const int base = SRC + p * OH * OW;\n";
  switch (kind) {
    case Kind::max_forward:
      s += fmt::format(
          "  {0} best = {1};\n"
          "  int index = -1;\n"
          "  const int ih0 = oh * SH - PH, iw0 = ow * SW - PW;\n"
          "  for (int kh = 0; kh < KH; ++kh) {{\n"
          "    const int ih = ih0 + kh * DH;\n"
          "    if (ih < 0 || ih >= H) continue;\n"
          "    for (int kw = 0; kw < KW; ++kw) {{\n"
          "      const int iw = iw0 + kw * DW;\n"
          "      if (iw < 0 || iw >= W) continue;\n"
          "      const {0} v = in_data[base + ih * W + iw];\n"
          "      if (v > best || isnan(v)) {{ best = v; index = ih * W + iw; }}\n"
          "    }}\n"
          "  }}\n"
          "  if (index < 0) {{\n"
          "    int a = ih0, b = iw0;\n"
          "    while (a < 0) a += DH;\n"
          "    while (b < 0) b += DW;\n"
          "    index = min(a, H - 1) * W + min(b, W - 1);\n"
          "  }}\n"
          "  out_data[i] = best;\n"
          "  index_data[2 * i] = index;\n"
          "  index_data[2 * i + 1] = 0;\n",
          t, literal(-std::numeric_limits<double>::infinity(), dtype));
      break;
    case Kind::max_backward:
      // Outputs whose span [o * s - p, o * s - p + dilation * (k - 1)] covers the element, in
      // the CPU's (oh, ow) order.
      s += fmt::format(
          "  const int span_h = DH * (KH - 1) + 1, span_w = DW * (KW - 1) + 1;\n"
          "  const int nh = ih + PH - span_h + 1, nw = iw + PW - span_w + 1;\n"
          "  const int oh0 = nh <= 0 ? 0 : (nh + SH - 1) / SH, oh1 = min(OH - 1, (ih + PH) / SH);\n"
          "  const int ow0 = nw <= 0 ? 0 : (nw + SW - 1) / SW, ow1 = min(OW - 1, (iw + PW) / SW);\n"
          "  const int target = ih * W + iw, plane = p * OH * OW;\n"
          "  {0} acc = {0}(0);\n"
          "  for (int oh = oh0; oh <= oh1; ++oh)\n"
          "    for (int ow = ow0; ow <= ow1; ++ow) {{\n"
          "      const int o = oh * OW + ow;\n"
          "      if (index_data[plane + o] == target) acc += in_data[base + o];\n"
          "    }}\n"
          "  out_data[i] = acc;\n",
          t);
      break;
    case Kind::avg_forward:
      s += fmt::format(
          "  {0} sum = {0}(0);\n"
          "  const int ih0 = oh * SH - PH, iw0 = ow * SW - PW;\n"
          "  for (int kh = 0; kh < KH; ++kh) {{\n"
          "    const int ih = ih0 + kh;\n"
          "    if (ih < 0 || ih >= H) continue;\n"
          "    for (int kw = 0; kw < KW; ++kw) {{\n"
          "      const int iw = iw0 + kw;\n"
          "      if (iw < 0 || iw >= W) continue;\n"
          "      sum += in_data[base + ih * W + iw];\n"
          "    }}\n"
          "  }}\n"
          "  const int divisor = extent(oh, H, KH, SH, PH) * extent(ow, W, KW, SW, PW);\n"
          "  out_data[i] = divisor == 0 ? {0}(0) : sum / {0}(divisor);\n",
          t);
      break;
    case Kind::avg_backward:
      // The CPU adds, per output row, the taps in kw order: for one element that is ow descending.
      s += fmt::format(
          "  const int nh = ih + PH - KH + 1, nw = iw + PW - KW + 1;\n"
          "  const int oh0 = nh <= 0 ? 0 : (nh + SH - 1) / SH, oh1 = min(OH - 1, (ih + PH) / SH);\n"
          "  const int ow0 = nw <= 0 ? 0 : (nw + SW - 1) / SW, ow1 = min(OW - 1, (iw + PW) / SW);\n"
          "  {0} acc = {0}(0);\n"
          "  for (int oh = oh0; oh <= oh1; ++oh) {{\n"
          "    const int rows = extent(oh, H, KH, SH, PH);\n"
          "    for (int ow = ow1; ow >= ow0; --ow) {{\n"
          "      const int divisor = rows * extent(ow, W, KW, SW, PW);\n"
          "      acc += divisor == 0 ? {0}(0) : in_data[base + oh * OW + ow] / {0}(divisor);\n"
          "    }}\n"
          "  }}\n"
          "  out_data[i] = acc;\n",
          t);
      break;
    case Kind::adaptive_forward:
      s += fmt::format(
          "  const int h0 = (oh * H) / OH, h1 = 1 + ((oh + 1) * H - 1) / OH;\n"
          "  const int w0 = (ow * W) / OW, w1 = 1 + ((ow + 1) * W - 1) / OW;\n"
          "  {0} sum = {0}(0);\n"
          "  for (int ih = h0; ih < h1; ++ih)\n"
          "    for (int iw = w0; iw < w1; ++iw) sum += in_data[base + ih * W + iw];\n"
          "  out_data[i] = sum / {0}((h1 - h0) * (w1 - w0));\n",
          t);
      break;
    case Kind::adaptive_backward:
      s += fmt::format(
          "  const int oh0 = (ih * OH) / H, oh1 = ((ih + 1) * OH - 1) / H;\n"
          "  const int ow0 = (iw * OW) / W, ow1 = ((iw + 1) * OW - 1) / W;\n"
          "  {0} acc = {0}(0);\n"
          "  for (int oh = oh0; oh <= oh1; ++oh) {{\n"
          "    const int rows = 1 + ((oh + 1) * H - 1) / OH - (oh * H) / OH;\n"
          "    for (int ow = ow0; ow <= ow1; ++ow) {{\n"
          "      const int cols = 1 + ((ow + 1) * W - 1) / OW - (ow * W) / OW;\n"
          "      acc += in_data[base + oh * OW + ow] / {0}(rows * cols);\n"
          "    }}\n"
          "  }}\n"
          "  out_data[i] = acc;\n",
          t);
      break;
  }
  s += "}\n";
  return s;
}






// The parameter buffer of a problem: input x_shape, output out_shape, `n` invocations.
std::vector<std::int32_t> params_of(std::string_view op, const Shape& x_shape, const Shape& out_shape,
                                    std::int64_t n, const ops::Pool2dOptions& o, std::int64_t source_offset) {
  // The kernels form products such as (oh + 1) * H and p * H * W in 32 bits.
  checked_int((x_shape[2] + 1) * (out_shape[2] + 1), "a size of", op);
  checked_int((x_shape[3] + 1) * (out_shape[3] + 1), "a size of", op);
  checked_int(x_shape.numel() + source_offset, "a size of", op);
  checked_int(out_shape.numel() + source_offset, "a size of", op);
  return {checked_int(n, "a size of", op),
          checked_int(x_shape[2], "a size of", op),
          checked_int(x_shape[3], "a size of", op),
          checked_int(out_shape[2], "a size of", op),
          checked_int(out_shape[3], "a size of", op),
          checked_int(o.kernel[0], "a size of", op),
          checked_int(o.kernel[1], "a size of", op),
          checked_int(o.stride[0], "a size of", op),
          checked_int(o.stride[1], "a size of", op),
          checked_int(o.padding[0], "a size of", op),
          checked_int(o.padding[1], "a size of", op),
          checked_int(o.dilation[0], "a size of", op),
          checked_int(o.dilation[1], "a size of", op),
          o.count_include_pad ? 1 : 0,
          checked_int(source_offset, "a size of", op)};
}


// Runs `kind` with `n` invocations over [params, out, source, extra...].
void run(std::string_view op, Kind kind, DType dtype, const std::vector<std::int32_t>& params,
         std::vector<std::shared_ptr<Buffer>> buffers, std::int64_t n) {
  static_assert(kParams == 15);
  if (n == 0) return;
  Context& context = Context::get();
  buffers.insert(buffers.begin(), upload_ints(params));
  const Pipeline& pipeline = context.pipeline(shader(kind, dtype), static_cast<std::uint32_t>(buffers.size()));
  dispatch_invocations(op, pipeline, buffers, n);
}

}  // namespace
}  // namespace kiln::vulkan

namespace kiln {

using vulkan::VulkanTensor;

std::pair<Vulkan::Primitive, Vulkan::Primitive> Vulkan::max_pool2d(const Primitive& x,
                                                                   const ops::Pool2dOptions& options) {
  constexpr std::string_view op = "max_pool2d";
  ops::check_pool_input_float(op, x.shape, x.dtype);
  vulkan::check_dtype_supported(op, x.dtype);
  const Shape out_shape = ops::pool2d_output_shape(op, x.shape, options);
  if (vulkan::is_half(x.dtype)) {
    auto [out, indices] = max_pool2d(cast(x, DType::f32), options);
    return {cast(out, x.dtype), indices};
  }
  const VulkanTensor in = vulkan::contiguous(x);
  VulkanTensor out = vulkan::empty(out_shape, x.dtype);
  // i64 indices as (low, high) pairs of 32-bit words: no shaderInt64 needed to write them.
  VulkanTensor indices;
  indices.buffer = vulkan::Context::get().allocate(
      std::max<std::size_t>(1, static_cast<std::size_t>(out_shape.numel())) * sizeof(std::int64_t));
  indices.shape = out_shape;
  indices.strides = out_shape.contiguous_strides();
  indices.dtype = DType::i64;
  const auto params = vulkan::params_of(op, x.shape, out_shape, out_shape.numel(), options, in.offset);
  vulkan::run(op, vulkan::Kind::max_forward, x.dtype, params, {out.buffer, in.buffer, indices.buffer},
              out_shape.numel());
  return {out, indices};
}

Vulkan::Primitive Vulkan::max_pool2d_backward(const Primitive& x, const Primitive& dy, const Primitive& indices,
                                              const ops::Pool2dOptions& options) {
  constexpr std::string_view op = "max_pool2d_backward";
  ops::check_pool_input_float(op, x.shape, x.dtype);
  vulkan::check_dtype_supported(op, x.dtype);
  const Shape out_shape = ops::pool2d_output_shape(op, x.shape, options);
  ops::check_pool_gradient(op, x.shape, x.dtype, dy.shape, dy.dtype, out_shape);
  KILN_CHECK(indices.dtype == DType::i64 && indices.shape == out_shape,
             "max_pool2d_backward: indices must be i64 of shape {}, got {} {}", out_shape, indices.shape,
             indices.dtype);
  if (vulkan::is_half(x.dtype))
    return cast(max_pool2d_backward(cast(x, DType::f32), cast(dy, DType::f32), indices, options), x.dtype);
  VulkanTensor dx = vulkan::empty(x.shape, x.dtype);
  if (dx.numel() == 0) return dx;
  // The CPU's check: every index inside the plane. Read back, checked, uploaded as i32.
  const TensorData data = Vulkan::into_data(indices);
  const std::int64_t plane = x.shape[2] * x.shape[3];
  std::vector<std::int32_t> wrapped(static_cast<std::size_t>(data.numel()));
  bool ok = true;
  for (std::size_t i = 0; i < wrapped.size(); ++i) {
    std::int64_t k;
    std::memcpy(&k, data.bytes().data() + i * sizeof(std::int64_t), sizeof(k));
    ok = ok && k >= 0 && k < plane;
    wrapped[i] = ok ? static_cast<std::int32_t>(k) : -1;
  }
  KILN_CHECK(ok, "max_pool2d_backward: an index is outside the {}x{} input plane", x.shape[2], x.shape[3]);
  const VulkanTensor grad = vulkan::contiguous(dy);
  const auto params = vulkan::params_of(op, x.shape, out_shape, dx.numel(), options, grad.offset);
  vulkan::run(op, vulkan::Kind::max_backward, x.dtype, params, {dx.buffer, grad.buffer, vulkan::upload_ints(wrapped)},
              dx.numel());
  return dx;
}

Vulkan::Primitive Vulkan::avg_pool2d(const Primitive& x, const ops::Pool2dOptions& options) {
  constexpr std::string_view op = "avg_pool2d";
  ops::check_pool_input_float(op, x.shape, x.dtype);
  vulkan::check_dtype_supported(op, x.dtype);
  ops::check_no_dilation(op, options);
  const Shape out_shape = ops::pool2d_output_shape(op, x.shape, options);
  if (vulkan::is_half(x.dtype)) return cast(avg_pool2d(cast(x, DType::f32), options), x.dtype);
  const VulkanTensor in = vulkan::contiguous(x);
  VulkanTensor out = vulkan::empty(out_shape, x.dtype);
  const auto params = vulkan::params_of(op, x.shape, out_shape, out_shape.numel(), options, in.offset);
  vulkan::run(op, vulkan::Kind::avg_forward, x.dtype, params, {out.buffer, in.buffer}, out_shape.numel());
  return out;
}

Vulkan::Primitive Vulkan::avg_pool2d_backward(const Primitive& x, const Primitive& dy,
                                              const ops::Pool2dOptions& options) {
  constexpr std::string_view op = "avg_pool2d_backward";
  ops::check_pool_input_float(op, x.shape, x.dtype);
  vulkan::check_dtype_supported(op, x.dtype);
  ops::check_no_dilation(op, options);
  const Shape out_shape = ops::pool2d_output_shape(op, x.shape, options);
  ops::check_pool_gradient(op, x.shape, x.dtype, dy.shape, dy.dtype, out_shape);
  if (vulkan::is_half(x.dtype))
    return cast(avg_pool2d_backward(cast(x, DType::f32), cast(dy, DType::f32), options), x.dtype);
  const VulkanTensor grad = vulkan::contiguous(dy);
  VulkanTensor dx = vulkan::empty(x.shape, x.dtype);
  const auto params = vulkan::params_of(op, x.shape, out_shape, dx.numel(), options, grad.offset);
  vulkan::run(op, vulkan::Kind::avg_backward, x.dtype, params, {dx.buffer, grad.buffer}, dx.numel());
  return dx;
}

Vulkan::Primitive Vulkan::adaptive_avg_pool2d(const Primitive& x, std::span<const std::int64_t> output_size) {
  constexpr std::string_view op = "adaptive_avg_pool2d";
  ops::check_pool_input_float(op, x.shape, x.dtype);
  vulkan::check_dtype_supported(op, x.dtype);
  const Shape out_shape = ops::adaptive_output_shape(op, x.shape, output_size);
  if (vulkan::is_half(x.dtype)) return cast(adaptive_avg_pool2d(cast(x, DType::f32), output_size), x.dtype);
  const VulkanTensor in = vulkan::contiguous(x);
  VulkanTensor out = vulkan::empty(out_shape, x.dtype);
  const auto params = vulkan::params_of(op, x.shape, out_shape, out_shape.numel(), {}, in.offset);
  vulkan::run(op, vulkan::Kind::adaptive_forward, x.dtype, params, {out.buffer, in.buffer}, out_shape.numel());
  return out;
}

Vulkan::Primitive Vulkan::adaptive_avg_pool2d_backward(const Primitive& x, const Primitive& dy) {
  constexpr std::string_view op = "adaptive_avg_pool2d_backward";
  ops::check_pool_input_float(op, x.shape, x.dtype);
  vulkan::check_dtype_supported(op, x.dtype);
  KILN_CHECK(dy.shape.rank() == 4, "adaptive_avg_pool2d_backward: dy must be NCHW, got shape {}", dy.shape);
  const std::array<std::int64_t, 2> size{dy.shape[2], dy.shape[3]};
  const Shape out_shape = ops::adaptive_output_shape(op, x.shape, size);
  ops::check_pool_gradient(op, x.shape, x.dtype, dy.shape, dy.dtype, out_shape);
  if (vulkan::is_half(x.dtype))
    return cast(adaptive_avg_pool2d_backward(cast(x, DType::f32), cast(dy, DType::f32)), x.dtype);
  const VulkanTensor grad = vulkan::contiguous(dy);
  VulkanTensor dx = vulkan::empty(x.shape, x.dtype);
  const auto params = vulkan::params_of(op, x.shape, out_shape, dx.numel(), {}, grad.offset);
  vulkan::run(op, vulkan::Kind::adaptive_backward, x.dtype, params, {dx.buffer, grad.buffer}, dx.numel());
  return dx;
}

}  // namespace kiln
