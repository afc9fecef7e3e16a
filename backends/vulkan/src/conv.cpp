// 2-d convolution on the Vulkan backend (NCHW, weight [out, in/groups, kh, kw]), f32 and f64
// (where the device has shaderFloat64): forward with optional bias, input gradient and
// weight gradient, with the CPU backend's checks and error messages.
//
// Direct kernels with the index math of the CPU's reference loops (backends/cpu/src/conv.cpp),
// each invocation accumulating in the same order, so the results are deterministic (no
// atomics):
// - forward: one invocation per output element (n, oc, oy, ox), summing over the group's
//   input channels and the kernel taps (ic, ky, kx), starting from the bias;
// - backward input: one invocation per input element (n, ci, iy, ix), summing over the taps
//   (ky, kx) and, for each tap that meets an output position, the group's output channels;
// - backward weight: one invocation per weight element (oc, ic, ky, kx), summing over the
//   batch and the output positions (n, oy, ox).
// Operands are made contiguous first and read at their offsets; indices are 32-bit.
#include "kernels.hpp"

#include "kiln/vulkan/backend.hpp"

#include <fmt/format.h>

#include <limits>
#include <vector>

namespace kiln::vulkan {
namespace {

// Parameter buffer (ints): [0] invocations, [1] N, [2] C, [3] H, [4] W, [5] O, [6] KH, [7] KW,
// [8] OH, [9] OW, [10] groups, [11..13) stride, [13..15) padding, [15..17) dilation,
// [17] offset of the first input, [18] of the second, [19] of the bias.
constexpr int kParams = 20;

enum class Kind { forward, forward_bias, backward_input, backward_weight };

std::string shader(Kind kind, DType dtype) {
  const std::string t = storage_type(dtype);
  std::string s = "#version 450\n";
  s += fmt::format("layout(local_size_x = {}) in;\n", kWorkgroupSize);
  s += "layout(std430, binding = 0) readonly buffer Params { int params[]; };\n";
  s += fmt::format("layout(std430, binding = 1) writeonly buffer Out {{ {} out_data[]; }};\n", t);
  s += fmt::format("layout(std430, binding = 2) readonly buffer A {{ {} a_data[]; }};\n", t);
  s += fmt::format("layout(std430, binding = 3) readonly buffer B {{ {} b_data[]; }};\n", t);
  if (kind == Kind::forward_bias)
    s += fmt::format("layout(std430, binding = 4) readonly buffer Bias {{ {} bias_data[]; }};\n", t);
  // The CPU's source_index: the output row/column that input position i meets through tap k, or -1.
  s += "int source_index(int i, int k, int s, int p, int d, int n) {\n"
       "  const int t = i + p - k * d;\n"
       "  if (t < 0 || t % s != 0) return -1;\n"
       "  const int o = t / s;\n"
       "  return o < n ? o : -1;\n"
       "}\n";
  s += "void main() {\n";
  s += fmt::format(
      "  const int i = int(gl_GlobalInvocationID.x + gl_GlobalInvocationID.y * gl_NumWorkGroups.x * {}u);\n",
      kWorkgroupSize);
  s += "  if (i >= params[0]) return;\n"
       "  const int N = params[1], C = params[2], H = params[3], W = params[4], O = params[5];\n"
       "  const int KH = params[6], KW = params[7], OH = params[8], OW = params[9], G = params[10];\n"
       "  const int SH = params[11], SW = params[12], PH = params[13], PW = params[14];\n"
       "  const int DH = params[15], DW = params[16], A0 = params[17], B0 = params[18];\n"
       "  const int CG = C / G, OG = O / G;\n";
  switch (kind) {
    case Kind::forward:
    case Kind::forward_bias:
      // a = x, b = weight.
      s += fmt::format(
          "  const int ox = i % OW, oy = (i / OW) % OH, oc = (i / (OW * OH)) % O, ni = i / (OW * OH * O);\n"
          "  const int c0 = oc / OG * CG;\n"
          "  {0} acc = {1};\n"
          "  for (int ic = 0; ic < CG; ++ic) {{\n"
          "    const int xp = A0 + (ni * C + c0 + ic) * H * W;\n"
          "    const int wp = B0 + (oc * CG + ic) * KH * KW;\n"
          "    for (int ky = 0; ky < KH; ++ky) {{\n"
          "      const int iy = oy * SH - PH + ky * DH;\n"
          "      if (iy < 0 || iy >= H) continue;\n"
          "      for (int kx = 0; kx < KW; ++kx) {{\n"
          "        const int ix = ox * SW - PW + kx * DW;\n"
          "        if (ix < 0 || ix >= W) continue;\n"
          "        acc += a_data[xp + iy * W + ix] * b_data[wp + ky * KW + kx];\n"
          "      }}\n"
          "    }}\n"
          "  }}\n"
          "  out_data[i] = acc;\n",
          t, kind == Kind::forward_bias ? "bias_data[params[19] + oc]" : t + "(0)");
      break;
    case Kind::backward_input:
      // a = dy, b = weight.
      s += fmt::format(
          "  const int ix = i % W, iy = (i / W) % H, ci = (i / (W * H)) % C, ni = i / (W * H * C);\n"
          "  const int grp = ci / CG, ic = ci % CG;\n"
          "  {0} acc = {0}(0);\n"
          "  for (int ky = 0; ky < KH; ++ky) {{\n"
          "    const int oy = source_index(iy, ky, SH, PH, DH, OH);\n"
          "    if (oy < 0) continue;\n"
          "    for (int kx = 0; kx < KW; ++kx) {{\n"
          "      const int ox = source_index(ix, kx, SW, PW, DW, OW);\n"
          "      if (ox < 0) continue;\n"
          "      for (int oc = grp * OG; oc < (grp + 1) * OG; ++oc)\n"
          "        acc += a_data[A0 + ((ni * O + oc) * OH + oy) * OW + ox] *\n"
          "               b_data[B0 + ((oc * CG + ic) * KH + ky) * KW + kx];\n"
          "    }}\n"
          "  }}\n"
          "  out_data[i] = acc;\n",
          t);
      break;
    case Kind::backward_weight:
      // a = x, b = dy.
      s += fmt::format(
          "  const int kx = i % KW, ky = (i / KW) % KH, ic = (i / (KW * KH)) % CG, oc = i / (KW * KH * CG);\n"
          "  const int ci = oc / OG * CG + ic;\n"
          "  {0} acc = {0}(0);\n"
          "  for (int ni = 0; ni < N; ++ni) {{\n"
          "    const int xp = A0 + (ni * C + ci) * H * W;\n"
          "    const int dyp = B0 + (ni * O + oc) * OH * OW;\n"
          "    for (int oy = 0; oy < OH; ++oy) {{\n"
          "      const int iy = oy * SH - PH + ky * DH;\n"
          "      if (iy < 0 || iy >= H) continue;\n"
          "      for (int ox = 0; ox < OW; ++ox) {{\n"
          "        const int ix = ox * SW - PW + kx * DW;\n"
          "        if (ix < 0 || ix >= W) continue;\n"
          "        acc += a_data[xp + iy * W + ix] * b_data[dyp + oy * OW + ox];\n"
          "      }}\n"
          "    }}\n"
          "  }}\n"
          "  out_data[i] = acc;\n",
          t);
      break;
  }
  s += "}\n";
  return s;
}


// The CPU's check (both operands float, of one dtype), then the device's support for it.
void check_float(std::string_view op, DType a, DType b, const Shape& sa, const Shape& sb) {
  KILN_CHECK(a == b, "{}: dtypes differ: {} {} and {} {}", op, sa, a, sb, b);
  KILN_CHECK(is_float(a), "{}: expected float tensors, got {} {}", op, sa, a);
  check_dtype_supported(op, a);
}

// The validated output shape and the parameter buffer (offsets left 0).
std::vector<std::int32_t> params_of(std::string_view op, const Shape& x, const Shape& w, const Shape& y,
                                    const ops::Conv2dOptions& o) {
  // Every flat index the kernels form stays below the largest operand (plus its offset,
  // checked by the callers); the spatial products stay below the padded extents.
  for (const Shape* s : {&x, &w, &y}) checked_int(s->numel(), "a size of", op);
  for (int d = 0; d < 2; ++d) {
    checked_int(x[2 + d] + 2 * o.padding[d] + o.stride[d], "a size of", op);
    checked_int(o.dilation[d] * (w[2 + d] - 1) + o.stride[d], "a size of", op);
  }
  return {0,
          checked_int(x[0], "a size of", op),
          checked_int(x[1], "a size of", op),
          checked_int(x[2], "a size of", op),
          checked_int(x[3], "a size of", op),
          checked_int(w[0], "a size of", op),
          checked_int(w[2], "a size of", op),
          checked_int(w[3], "a size of", op),
          checked_int(y[2], "a size of", op),
          checked_int(y[3], "a size of", op),
          checked_int(o.groups, "a size of", op),
          checked_int(o.stride[0], "a size of", op),
          checked_int(o.stride[1], "a size of", op),
          checked_int(o.padding[0], "a size of", op),
          checked_int(o.padding[1], "a size of", op),
          checked_int(o.dilation[0], "a size of", op),
          checked_int(o.dilation[1], "a size of", op),
          0,
          0,
          0};
}

std::int32_t offset_of(std::string_view op, const VulkanTensor& t) {
  checked_int(t.offset + t.numel(), "a size of", op);
  return checked_int(t.offset, "a size of", op);
}

// Runs `kind` with one invocation per element of `out` over [params, out, a, b, extra...].
void run(std::string_view op, Kind kind, std::vector<std::int32_t> params, const VulkanTensor& out,
         std::vector<std::shared_ptr<Buffer>> inputs) {
  static_assert(kParams == 20);
  const std::int64_t n = out.numel();
  if (n == 0) return;
  params[0] = checked_int(n, "a size of", op);
  Context& context = Context::get();
  auto param_buffer = vulkan::upload_ints(params);
  std::vector<std::shared_ptr<Buffer>> buffers{param_buffer, out.buffer};
  buffers.insert(buffers.end(), inputs.begin(), inputs.end());
  const Pipeline& pipeline = context.pipeline(shader(kind, out.dtype), static_cast<std::uint32_t>(buffers.size()));
  dispatch_invocations(op, pipeline, buffers, n);
}

}  // namespace
}  // namespace kiln::vulkan

namespace kiln {

using vulkan::VulkanTensor;

Vulkan::Primitive Vulkan::conv2d(const Primitive& x, const Primitive& weight, const std::optional<Primitive>& bias,
                                 const ops::Conv2dOptions& options) {
  constexpr std::string_view op = "conv2d";
  vulkan::check_float(op, x.dtype, weight.dtype, x.shape, weight.shape);
  const Shape y_shape = ops::conv_output_shape(op, x.shape, weight.shape, options.stride, options.padding,
                                               options.dilation, options.groups);
  if (bias) {
    KILN_CHECK(bias->shape == Shape{weight.shape[0]}, "conv2d: bias must have shape [{}] for weight {}, got {}",
               weight.shape[0], weight.shape, bias->shape);
    KILN_CHECK(bias->dtype == x.dtype, "conv2d: bias dtype {} differs from input dtype {}", bias->dtype, x.dtype);
  }
  if (vulkan::is_half(x.dtype)) {
    const std::optional<Primitive> bias32 = bias ? std::optional(cast(*bias, DType::f32)) : std::nullopt;
    return cast(conv2d(cast(x, DType::f32), cast(weight, DType::f32), bias32, options), x.dtype);
  }
  auto params = vulkan::params_of(op, x.shape, weight.shape, y_shape, options);
  VulkanTensor out = vulkan::empty(y_shape, x.dtype);
  if (out.numel() == 0) return out;
  const VulkanTensor xc = vulkan::contiguous(x), wc = vulkan::contiguous(weight);
  params[17] = vulkan::offset_of(op, xc);
  params[18] = vulkan::offset_of(op, wc);
  std::vector<std::shared_ptr<vulkan::Buffer>> inputs{xc.buffer, wc.buffer};
  if (bias) {
    const VulkanTensor bc = vulkan::contiguous(*bias);
    params[19] = vulkan::offset_of(op, bc);
    inputs.push_back(bc.buffer);
  }
  vulkan::run(op, bias ? vulkan::Kind::forward_bias : vulkan::Kind::forward, params, out, inputs);
  return out;
}

Vulkan::Primitive Vulkan::conv2d_backward_input(const Primitive& dy, const Primitive& weight, const Shape& x_shape,
                                                const ops::Conv2dOptions& options) {
  constexpr std::string_view op = "conv2d_backward_input";
  vulkan::check_float(op, dy.dtype, weight.dtype, dy.shape, weight.shape);
  const Shape y_shape = ops::conv_output_shape(op, x_shape, weight.shape, options.stride, options.padding,
                                               options.dilation, options.groups);
  KILN_CHECK(dy.shape == y_shape,
             "conv2d_backward_input: the output gradient has shape {}, but input {} and weight {} give output {}",
             dy.shape, x_shape, weight.shape, y_shape);
  if (vulkan::is_half(dy.dtype))
    return cast(conv2d_backward_input(cast(dy, DType::f32), cast(weight, DType::f32), x_shape, options), dy.dtype);
  auto params = vulkan::params_of(op, x_shape, weight.shape, y_shape, options);
  VulkanTensor out = vulkan::empty(x_shape, dy.dtype);
  if (out.numel() == 0) return out;
  const VulkanTensor dyc = vulkan::contiguous(dy), wc = vulkan::contiguous(weight);
  params[17] = vulkan::offset_of(op, dyc);
  params[18] = vulkan::offset_of(op, wc);
  vulkan::run(op, vulkan::Kind::backward_input, params, out, {dyc.buffer, wc.buffer});
  return out;
}

Vulkan::Primitive Vulkan::conv2d_backward_weight(const Primitive& x, const Primitive& dy, const Shape& weight_shape,
                                                 const ops::Conv2dOptions& options) {
  constexpr std::string_view op = "conv2d_backward_weight";
  vulkan::check_float(op, x.dtype, dy.dtype, x.shape, dy.shape);
  const Shape y_shape = ops::conv_output_shape(op, x.shape, weight_shape, options.stride, options.padding,
                                               options.dilation, options.groups);
  KILN_CHECK(dy.shape == y_shape,
             "conv2d_backward_weight: the output gradient has shape {}, but input {} and weight {} give output {}",
             dy.shape, x.shape, weight_shape, y_shape);
  if (vulkan::is_half(x.dtype))
    return cast(conv2d_backward_weight(cast(x, DType::f32), cast(dy, DType::f32), weight_shape, options), x.dtype);
  auto params = vulkan::params_of(op, x.shape, weight_shape, y_shape, options);
  VulkanTensor out = vulkan::empty(weight_shape, x.dtype);
  if (out.numel() == 0) return out;
  const VulkanTensor xc = vulkan::contiguous(x), dyc = vulkan::contiguous(dy);
  params[17] = vulkan::offset_of(op, xc);
  params[18] = vulkan::offset_of(op, dyc);
  vulkan::run(op, vulkan::Kind::backward_weight, params, out, {xc.buffer, dyc.buffer});
  return out;
}

}  // namespace kiln
