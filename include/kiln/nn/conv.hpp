// Convolution layers with torch.nn's meaning and weight layout, so PyTorch weights load as
// they are: Conv1d / Conv2d (weight [out, in / groups, k...]) and ConvTranspose1d / 2d
// (weight [in, out / groups, k...]). Default initialization as PyTorch's: weight and bias
// uniform in +-1/sqrt(fan_in), fan_in = weight.size(1) * prod(kernel).
#pragma once

#include "kiln/nn/init.hpp"
#include "kiln/nn/module.hpp"
#include "kiln/tensor/conv.hpp"

#include <array>
#include <cmath>
#include <optional>

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

struct Conv2dOptions {
  std::array<std::int64_t, 2> stride{1, 1}, padding{0, 0}, dilation{1, 1};
  std::int64_t groups = 1;
  bool bias = true;
};

template <class B> struct Conv2d {
  Param<Tensor<B, 4>> weight;               // [out, in / groups, kh, kw]
  std::optional<Param<Tensor<B, 1>>> bias;  // [out]
  ops::Conv2dOptions conv;
  KILN_MODULE(weight, bias, conv)

  Conv2d() = default;
  Conv2d(std::int64_t in, std::int64_t out, std::array<std::int64_t, 2> kernel, const Conv2dOptions& o = {},
         const typename B::Device& device = {})
      : conv{o.stride, o.padding, o.dilation, o.groups} {
    detail::check_channels("Conv2d", in, out, o.groups);
    detail::init_conv<B, 4>(weight, bias, {out, in / o.groups, kernel[0], kernel[1]}, out, o.bias, device);
  }
  // x [N, in, H, W] → [N, out, H', W'].
  Tensor<B, 4> forward(const Tensor<B, 4>& x) const {
    return functional::conv2d(x, *weight, bias ? std::optional(**bias) : std::nullopt, conv);
  }
};

struct Conv1dOptions {
  std::int64_t stride = 1, padding = 0, dilation = 1, groups = 1;
  bool bias = true;
};

template <class B> struct Conv1d {
  Param<Tensor<B, 3>> weight;               // [out, in / groups, k]
  std::optional<Param<Tensor<B, 1>>> bias;  // [out]
  ops::Conv1dOptions conv;
  KILN_MODULE(weight, bias, conv)

  Conv1d() = default;
  Conv1d(std::int64_t in, std::int64_t out, std::int64_t kernel, const Conv1dOptions& o = {},
         const typename B::Device& device = {})
      : conv{o.stride, o.padding, o.dilation, o.groups} {
    detail::check_channels("Conv1d", in, out, o.groups);
    detail::init_conv<B, 3>(weight, bias, {out, in / o.groups, kernel}, out, o.bias, device);
  }
  // x [N, in, L] → [N, out, L'].
  Tensor<B, 3> forward(const Tensor<B, 3>& x) const {
    return functional::conv1d(x, *weight, bias ? std::optional(**bias) : std::nullopt, conv);
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

}  // namespace kiln::nn
