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

template <class B> struct Linear {
  Param<Tensor<B, 2>> weight;               // [out, in]
  std::optional<Param<Tensor<B, 1>>> bias;  // [out]
  KILN_MODULE(weight, bias)

  Linear() = default;
  Linear(std::int64_t in, std::int64_t out, const LinearOptions& options = {}, const typename B::Device& device = {}) {
    KILN_CHECK(in > 0 && out > 0, "nn::Linear: features must be positive, got in = {}, out = {}", in, out);
    const double bound = 1.0 / std::sqrt(static_cast<double>(in));
    const Init default_init = Init::uniform(-bound, bound);
    weight = Param(options.weight_init.value_or(default_init).template make<B, 2>({out, in}, device));
    if (options.bias) bias.emplace(options.bias_init.value_or(default_init).template make<B, 1>({out}, device));
  }

  std::int64_t in_features() const { return weight->dim(1); }
  std::int64_t out_features() const { return weight->dim(0); }

  // x [..., in] → [..., out].
  template <std::size_t D> Tensor<B, D> forward(const Tensor<B, D>& x) const {
    KILN_CHECK(x.dim(-1) == in_features(), "nn::Linear: input of shape {} has {} features in its last dim, expected {}",
               x.shape(), x.dim(-1), in_features());
    Tensor<B, D> y = x.matmul(weight->transpose().template unsqueeze<D>());
    if (bias) y = y + (*bias)->template unsqueeze<D>();
    return y;
  }
};

}  // namespace kiln::nn
