// nn::Linear: y = x W^T + b over the last dim, as torch.nn.Linear (weight [out, in], so
// PyTorch weights load as they are). Default initialization as PyTorch's: W and b uniform
// in +-1/sqrt(in) (Kaiming uniform with a = sqrt(5)).
#pragma once

#include "kiln/nn/init.hpp"
#include "kiln/nn/module.hpp"

#include <cmath>
#include <optional>

namespace kiln::nn {

struct LinearOptions {
  bool bias = true;
  std::optional<Init> weight_init;  // default: PyTorch's
  std::optional<Init> bias_init;    // default: PyTorch's
};

}  // namespace kiln::nn

namespace kiln::functional {

// x [..., in] @ weight[out, in]^T (+ bias [out]) → [..., out], as torch.nn.functional.linear,
// followed by `activation` (relu: the feed-forward block's first layer). One backend op
// (kiln::provided::linear): one GEMM with the bias and the activation inside it on the CPU,
// one node under Autodiff. A free function template, so that it can be compiled once per
// backend (kiln/nn/instances.hpp).
template <Backend B, std::size_t D>
Tensor<B, D> linear(const Tensor<B, D>& x, const Tensor<B, 2>& weight, const std::optional<Tensor<B, 1>>& bias,
                    ops::LinearActivation activation = ops::LinearActivation::none) {
  KILN_CHECK(x.dim(-1) == weight.dim(1), "linear: input of shape {} has {} features in its last dim, expected {}",
             x.shape(), x.dim(-1), weight.dim(1));
  std::optional<typename B::Primitive> b;
  if (bias) b = bias->primitive();
  return Tensor<B, D>(provided::linear<B>(x.primitive(), weight.primitive(), b, activation));
}

}  // namespace kiln::functional

namespace kiln::nn {

namespace detail {
// A linear layer's weight [out, in] and optional bias [out], PyTorch's default initialization
// unless `options` names others. A free function template, so that it can be compiled once
// per backend (kiln/nn/instances.hpp).
template <class B>
void init_linear(Param<Tensor<B, 2>>& weight, std::optional<Param<Tensor<B, 1>>>& bias, std::int64_t in,
                 std::int64_t out, const LinearOptions& options, const typename B::Device& device) {
  KILN_CHECK(in > 0 && out > 0, "nn::Linear: features must be positive, got in = {}, out = {}", in, out);
  const double bound = 1.0 / std::sqrt(static_cast<double>(in));
  const Init default_init = Init::uniform(-bound, bound);
  weight = Param(options.weight_init.value_or(default_init).template make<B, 2>({out, in}, device));
  if (options.bias) bias.emplace(options.bias_init.value_or(default_init).template make<B, 1>({out}, device));
  else bias.reset();
}
}  // namespace detail

template <class B> struct Linear {
  Param<Tensor<B, 2>> weight;               // [out, in]
  std::optional<Param<Tensor<B, 1>>> bias;  // [out]
  KILN_MODULE(weight, bias)

  Linear() = default;
  Linear(std::int64_t in, std::int64_t out, const LinearOptions& options = {}, const typename B::Device& device = {}) {
    detail::init_linear<B>(weight, bias, in, out, options, device);
  }

  std::int64_t in_features() const { return weight->dim(1); }
  std::int64_t out_features() const { return weight->dim(0); }

  // x [..., in] → [..., out].
  template <std::size_t D> Tensor<B, D> forward(const Tensor<B, D>& x) const {
    return functional::linear(x, *weight, bias ? std::optional(**bias) : std::nullopt);
  }
};

// nn::Bilinear: y[n, o] = x1[n] . W[o] . x2[n] + b[o], as torch.nn.Bilinear (weight
// [out, in1, in2], bias [out], both uniform in +-1/sqrt(in1)).
template <class B> struct Bilinear {
  Param<Tensor<B, 3>> weight;               // [out, in1, in2]
  std::optional<Param<Tensor<B, 1>>> bias;  // [out]
  KILN_MODULE(weight, bias)

  Bilinear() = default;
  Bilinear(std::int64_t in1, std::int64_t in2, std::int64_t out, bool with_bias = true,
           const typename B::Device& device = {}) {
    KILN_CHECK(in1 > 0 && in2 > 0 && out > 0, "nn::Bilinear: sizes must be positive, got {}, {} -> {}", in1, in2, out);
    const double bound = 1.0 / std::sqrt(static_cast<double>(in1));
    weight = Param(Init::uniform(-bound, bound).template make<B, 3>({out, in1, in2}, device));
    if (with_bias) bias.emplace(Init::uniform(-bound, bound).template make<B, 1>({out}, device));
  }

  // x1 [N, in1], x2 [N, in2] → [N, out].
  Tensor<B, 2> forward(const Tensor<B, 2>& x1, const Tensor<B, 2>& x2) const {
    const std::int64_t out = weight->dim(0), in1 = weight->dim(1), in2 = weight->dim(2), n = x1.dim(0);
    KILN_CHECK(x1.dim(1) == in1 && x2.dim(1) == in2 && x2.dim(0) == n,
               "nn::Bilinear: inputs {} and {} must be [N, {}] and [N, {}]", x1.shape(), x2.shape(), in1, in2);
    // x1 W: [N, in1] @ [in1, out * in2] → [N, out, in2], then the dot product with x2.
    const auto w = weight->permute({1, 0, 2}).template reshape<2>({in1, out * in2});
    const Tensor<B, 3> left = x1.matmul(w).template reshape<3>({n, out, in2});
    Tensor<B, 2> y = (left * x2.unsqueeze_dim(1)).sum_dim(2).template reshape<2>({n, out});
    if (bias) y = y + (*bias)->template unsqueeze<2>();
    return y;
  }
};

// The SwiGLU gate of LLaMA-style feed-forward layers (Burn's SwiGlu): silu(x W1ᵀ + b1) ⊙
// (x W2ᵀ + b2), two Linear(in, out) layers, `inner` under the SiLU and `outer` as the gate.
template <class B> struct SwiGlu {
  Linear<B> inner, outer;
  KILN_MODULE(inner, outer)

  SwiGlu() = default;
  SwiGlu(std::int64_t in, std::int64_t out, const LinearOptions& options = {}, const typename B::Device& device = {})
      : inner(in, out, options, device), outer(in, out, options, device) {}

  template <std::size_t D> Tensor<B, D> forward(const Tensor<B, D>& x) const {
    return inner.forward(x).silu() * outer.forward(x);
  }
};

}  // namespace kiln::nn
