// Convolution layers with torch.nn's meaning and weight layout, so PyTorch weights load as
// they are: Conv1d / Conv2d / Conv3d (weight [out, in / groups, k...]) and ConvTranspose1d /
// 2d / 3d (weight [in, out / groups, k...]). Default initialization as PyTorch's: weight and
// bias uniform in +-1/sqrt(fan_in), fan_in = weight.size(1) * prod(kernel). Conv1d / 2d / 3d
// take torch's padding_mode (zeros, reflect, replicate, circular) and padding="same".
#pragma once

#include "kiln/nn/init.hpp"
#include "kiln/nn/module.hpp"
#include "kiln/tensor/conv.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <optional>
#include <string_view>

namespace kiln::nn {

namespace detail {
// A convolution's weight and optional bias, PyTorch's default initialization.
template <class B, std::size_t D>
void init_conv(Param<Tensor<B, D>>& weight, std::optional<Param<Tensor<B, 1>>>& bias,
               const std::array<std::int64_t, D>& weight_dims, std::int64_t bias_size, bool with_bias,
               const typename B::Device& device) {
  const auto [fan_in, fan_out] = fans(Shape(std::vector<std::int64_t>(weight_dims.begin(), weight_dims.end())));
  const double bound = 1.0 / std::sqrt(fan_in);
  weight = Param(Init::uniform(-bound, bound).template make<B, D>(weight_dims, device));
  if (with_bias) bias.emplace(Init::uniform(-bound, bound).template make<B, 1>({bias_size}, device));
  else bias.reset();
}

inline void check_channels(std::string_view layer, std::int64_t in, std::int64_t out, std::int64_t groups) {
  KILN_CHECK(in > 0 && out > 0 && groups > 0 && in % groups == 0 && out % groups == 0,
             "nn::{}: {} in and {} out channels must be positive multiples of groups = {}", layer, in, out, groups);
}
}  // namespace detail

// torch.nn.Conv*d's padding_mode: what fills the border the padding adds to the input. zeros
// pads inside the convolution; the others pad the input first (torch.nn.functional.pad:
// reflect mirrors without repeating the edge, replicate repeats it, circular wraps around).
enum class PaddingMode : std::uint8_t { zeros, reflect, replicate, circular };

namespace detail {
// A convolution layer's padding as torch resolves it: `conv` stays in the convolution, `input`
// (torch.nn.functional.pad's order, the last dim first) pads the input before it in `mode`.
// padding="same" pads dilation * (kernel - 1) per dim, the extra cell of an odd total at the end.
template <std::size_t S> struct LayerPadding {
  std::array<std::int64_t, S> conv{};
  std::array<std::int64_t, 2 * S> input{};
  ops::PadMode mode = ops::PadMode::constant;
};

template <std::size_t S>
LayerPadding<S> layer_padding(std::string_view layer, const std::array<std::int64_t, S>& padding, bool same,
                              PaddingMode padding_mode, const std::array<std::int64_t, S>& kernel,
                              const std::array<std::int64_t, S>& stride, const std::array<std::int64_t, S>& dilation) {
  LayerPadding<S> out;
  for (std::size_t i = 0; i < S; ++i) {
    std::int64_t before = padding[i], after = padding[i];
    if (same) {
      KILN_CHECK(stride[i] == 1, "nn::{}: padding=\"same\" needs a stride of 1, got stride {}", layer, stride);
      const std::int64_t total = dilation[i] * (kernel[i] - 1);
      before = total / 2;
      after = total - before;
    }
    KILN_CHECK(before >= 0, "nn::{}: padding {} must not be negative", layer, padding);
    const std::size_t at = 2 * (S - 1 - i);
    if (padding_mode == PaddingMode::zeros) {
      out.conv[i] = before;
      out.input[at + 1] = after - before;
    } else {
      out.input[at] = before;
      out.input[at + 1] = after;
    }
  }
  constexpr ops::PadMode modes[] = {ops::PadMode::constant, ops::PadMode::reflect, ops::PadMode::replicate,
                                    ops::PadMode::circular};
  out.mode = modes[static_cast<std::size_t>(padding_mode)];
  return out;
}

// x [N, C, spatial...] padded by a layer's `pads` (LayerPadding::input) in `mode`.
template <class B, std::size_t D>
Tensor<B, D> pad_input(const Tensor<B, D>& x, const std::array<std::int64_t, 2 * (D - 2)>& p, ops::PadMode mode) {
  if (std::all_of(p.begin(), p.end(), [](std::int64_t v) { return v == 0; })) return x;
  if constexpr (D == 3) return x.pad({p[0], p[1]}, mode);
  else if constexpr (D == 4) return x.pad({p[0], p[1], p[2], p[3]}, mode);
  else return x.pad({p[0], p[1], p[2], p[3], p[4], p[5]}, mode);
}
}  // namespace detail

struct Conv2dOptions {
  std::array<std::int64_t, 2> stride{1, 1}, padding{0, 0}, dilation{1, 1};
  std::int64_t groups = 1;
  bool bias = true;
  PaddingMode padding_mode = PaddingMode::zeros;
  bool padding_same = false;  // torch's padding="same" (stride 1 only): the output as large as the input
};

template <class B> struct Conv2d {
  Param<Tensor<B, 4>> weight;               // [out, in / groups, kh, kw]
  std::optional<Param<Tensor<B, 1>>> bias;  // [out]
  ops::Conv2dOptions conv;
  std::array<std::int64_t, 4> input_padding{};  // padding_mode's or "same"'s padding of the input, F.pad's order
  ops::PadMode padding_mode = ops::PadMode::constant;
  KILN_MODULE(weight, bias, conv, input_padding, padding_mode)

  Conv2d() = default;
  Conv2d(std::int64_t in, std::int64_t out, std::array<std::int64_t, 2> kernel, const Conv2dOptions& o = {},
         const typename B::Device& device = {})
      : conv{o.stride, o.padding, o.dilation, o.groups} {
    detail::check_channels("Conv2d", in, out, o.groups);
    const auto p = detail::layer_padding<2>("Conv2d", o.padding, o.padding_same, o.padding_mode, kernel, o.stride,
                                            o.dilation);
    conv.padding = p.conv;
    input_padding = p.input;
    padding_mode = p.mode;
    detail::init_conv<B, 4>(weight, bias, {out, in / o.groups, kernel[0], kernel[1]}, out, o.bias, device);
  }
  // x [N, in, H, W] → [N, out, H', W'].
  Tensor<B, 4> forward(const Tensor<B, 4>& x) const {
    return functional::conv2d(detail::pad_input(x, input_padding, padding_mode), *weight,
                              bias ? std::optional(**bias) : std::nullopt, conv);
  }
};

struct Conv1dOptions {
  std::int64_t stride = 1, padding = 0, dilation = 1, groups = 1;
  bool bias = true;
  PaddingMode padding_mode = PaddingMode::zeros;
  bool padding_same = false;  // torch's padding="same" (stride 1 only): the output as long as the input
};

template <class B> struct Conv1d {
  Param<Tensor<B, 3>> weight;               // [out, in / groups, k]
  std::optional<Param<Tensor<B, 1>>> bias;  // [out]
  ops::Conv1dOptions conv;
  std::array<std::int64_t, 2> input_padding{};  // padding_mode's or "same"'s padding of the input
  ops::PadMode padding_mode = ops::PadMode::constant;
  KILN_MODULE(weight, bias, conv, input_padding, padding_mode)

  Conv1d() = default;
  Conv1d(std::int64_t in, std::int64_t out, std::int64_t kernel, const Conv1dOptions& o = {},
         const typename B::Device& device = {})
      : conv{o.stride, o.padding, o.dilation, o.groups} {
    detail::check_channels("Conv1d", in, out, o.groups);
    const auto p = detail::layer_padding<1>("Conv1d", {o.padding}, o.padding_same, o.padding_mode, {kernel},
                                            {o.stride}, {o.dilation});
    conv.padding = p.conv[0];
    input_padding = p.input;
    padding_mode = p.mode;
    detail::init_conv<B, 3>(weight, bias, {out, in / o.groups, kernel}, out, o.bias, device);
  }
  // x [N, in, L] → [N, out, L'].
  Tensor<B, 3> forward(const Tensor<B, 3>& x) const {
    return functional::conv1d(detail::pad_input(x, input_padding, padding_mode), *weight,
                              bias ? std::optional(**bias) : std::nullopt, conv);
  }
};

struct ConvTranspose2dOptions {
  std::array<std::int64_t, 2> stride{1, 1}, padding{0, 0}, output_padding{0, 0}, dilation{1, 1};
  std::int64_t groups = 1;
  bool bias = true;
};

template <class B> struct ConvTranspose2d {
  Param<Tensor<B, 4>> weight;               // [in, out / groups, kh, kw]
  std::optional<Param<Tensor<B, 1>>> bias;  // [out]
  ops::ConvTranspose2dOptions conv;
  KILN_MODULE(weight, bias, conv)

  ConvTranspose2d() = default;
  ConvTranspose2d(std::int64_t in, std::int64_t out, std::array<std::int64_t, 2> kernel,
                  const ConvTranspose2dOptions& o = {}, const typename B::Device& device = {})
      : conv{o.stride, o.padding, o.output_padding, o.dilation, o.groups} {
    detail::check_channels("ConvTranspose2d", in, out, o.groups);
    detail::init_conv<B, 4>(weight, bias, {in, out / o.groups, kernel[0], kernel[1]}, out, o.bias, device);
  }
  Tensor<B, 4> forward(const Tensor<B, 4>& x) const {
    return functional::conv_transpose2d(x, *weight, bias ? std::optional(**bias) : std::nullopt, conv);
  }
};

struct ConvTranspose1dOptions {
  std::int64_t stride = 1, padding = 0, output_padding = 0, dilation = 1, groups = 1;
  bool bias = true;
};

template <class B> struct ConvTranspose1d {
  Param<Tensor<B, 3>> weight;               // [in, out / groups, k]
  std::optional<Param<Tensor<B, 1>>> bias;  // [out]
  ops::ConvTranspose1dOptions conv;
  KILN_MODULE(weight, bias, conv)

  ConvTranspose1d() = default;
  ConvTranspose1d(std::int64_t in, std::int64_t out, std::int64_t kernel, const ConvTranspose1dOptions& o = {},
                  const typename B::Device& device = {})
      : conv{o.stride, o.padding, o.output_padding, o.dilation, o.groups} {
    detail::check_channels("ConvTranspose1d", in, out, o.groups);
    detail::init_conv<B, 3>(weight, bias, {in, out / o.groups, kernel}, out, o.bias, device);
  }
  Tensor<B, 3> forward(const Tensor<B, 3>& x) const {
    return functional::conv_transpose1d(x, *weight, bias ? std::optional(**bias) : std::nullopt, conv);
  }
};

struct Conv3dOptions {
  std::array<std::int64_t, 3> stride{1, 1, 1}, padding{0, 0, 0}, dilation{1, 1, 1};
  std::int64_t groups = 1;
  bool bias = true;
  PaddingMode padding_mode = PaddingMode::zeros;
  bool padding_same = false;  // torch's padding="same" (stride 1 only): the output as large as the input
};

template <class B> struct Conv3d {
  Param<Tensor<B, 5>> weight;               // [out, in / groups, kd, kh, kw]
  std::optional<Param<Tensor<B, 1>>> bias;  // [out]
  ops::Conv3dOptions conv;
  std::array<std::int64_t, 6> input_padding{};  // padding_mode's or "same"'s padding of the input, F.pad's order
  ops::PadMode padding_mode = ops::PadMode::constant;
  KILN_MODULE(weight, bias, conv, input_padding, padding_mode)

  Conv3d() = default;
  Conv3d(std::int64_t in, std::int64_t out, std::array<std::int64_t, 3> kernel, const Conv3dOptions& o = {},
         const typename B::Device& device = {})
      : conv{o.stride, o.padding, o.dilation, o.groups} {
    detail::check_channels("Conv3d", in, out, o.groups);
    const auto p = detail::layer_padding<3>("Conv3d", o.padding, o.padding_same, o.padding_mode, kernel, o.stride,
                                            o.dilation);
    conv.padding = p.conv;
    input_padding = p.input;
    padding_mode = p.mode;
    detail::init_conv<B, 5>(weight, bias, {out, in / o.groups, kernel[0], kernel[1], kernel[2]}, out, o.bias, device);
  }
  // x [N, in, D, H, W] → [N, out, D', H', W'].
  Tensor<B, 5> forward(const Tensor<B, 5>& x) const {
    return functional::conv3d(detail::pad_input(x, input_padding, padding_mode), *weight,
                              bias ? std::optional(**bias) : std::nullopt, conv);
  }
};

struct ConvTranspose3dOptions {
  std::array<std::int64_t, 3> stride{1, 1, 1}, padding{0, 0, 0}, output_padding{0, 0, 0}, dilation{1, 1, 1};
  std::int64_t groups = 1;
  bool bias = true;
};

template <class B> struct ConvTranspose3d {
  Param<Tensor<B, 5>> weight;               // [in, out / groups, kd, kh, kw]
  std::optional<Param<Tensor<B, 1>>> bias;  // [out]
  ops::ConvTranspose3dOptions conv;
  KILN_MODULE(weight, bias, conv)

  ConvTranspose3d() = default;
  ConvTranspose3d(std::int64_t in, std::int64_t out, std::array<std::int64_t, 3> kernel,
                  const ConvTranspose3dOptions& o = {}, const typename B::Device& device = {})
      : conv{o.stride, o.padding, o.output_padding, o.dilation, o.groups} {
    detail::check_channels("ConvTranspose3d", in, out, o.groups);
    detail::init_conv<B, 5>(weight, bias, {in, out / o.groups, kernel[0], kernel[1], kernel[2]}, out, o.bias, device);
  }
  Tensor<B, 5> forward(const Tensor<B, 5>& x) const {
    return functional::conv_transpose3d(x, *weight, bias ? std::optional(**bias) : std::nullopt, conv);
  }
};

}  // namespace kiln::nn
