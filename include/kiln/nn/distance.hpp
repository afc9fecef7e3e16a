// Similarity and distance of two inputs as torch.nn's modules, with their defaults:
// CosineSimilarity (x1 / max(|x1|, eps) . x2 / max(|x2|, eps) along dim, as torch computes it)
// and PairwiseDistance (|x1 - x2 + eps|_p along the last dim). Stateless; both drop the dim
// they reduce.
#pragma once

#include "kiln/nn/module.hpp"

#include <cmath>

namespace kiln::nn {

template <class B> struct CosineSimilarity {
  std::int64_t dim = 1;
  double eps = 1e-8;
  KILN_MODULE(dim, eps)

  // x1 and x2 broadcast against each other; the result drops `dim`.
  template <std::size_t D> Tensor<B, D - 1> forward(const Tensor<B, D>& x1, const Tensor<B, D>& x2) const {
    return ((x1 / clamped_norm(x1)) * (x2 / clamped_norm(x2))).sum_dim(dim).squeeze_dim(dim);
  }

 private:
  // |x| along dim, at least eps; its gradient is x / that value even where it is clamped, as
  // torch's (which clamps the norm in place, outside the graph).
  template <std::size_t D> Tensor<B, D> clamped_norm(const Tensor<B, D>& x) const {
    const Tensor<B, D> squares = x.square().sum_dim(dim);
    Tensor<B, D> norm = squares.sqrt().clamp_min(eps);
    if constexpr (AutodiffBackend<B>) norm = norm.detach() + (squares - squares.detach()) / (norm.detach() * 2.0);
    return norm;
  }
};

template <class B> struct PairwiseDistance {
  double p = 2.0, eps = 1e-6;
  KILN_MODULE(p, eps)

  // x1 and x2 [..., D] broadcast against each other → [...].
  template <std::size_t D> Tensor<B, D - 1> forward(const Tensor<B, D>& x1, const Tensor<B, D>& x2) const {
    KILN_CHECK(p > 0, "nn::PairwiseDistance: p must be positive, got {}", p);
    return (x1 - x2 + eps).norm_dim(p, D - 1).squeeze_dim(D - 1);
  }
};

}  // namespace kiln::nn
