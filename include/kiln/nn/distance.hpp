// Similarity and distance of two inputs as torch.nn's modules, with their defaults:
// CosineSimilarity (x1 . x2 / max(|x1| |x2|, eps) along dim) and PairwiseDistance
// (|x1 - x2 + eps|_p along the last dim). Stateless; both drop the dim they reduce.
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
    const Tensor<B, D> norms = (x1.square().sum_dim(dim) * x2.square().sum_dim(dim)).clamp_min(eps * eps).sqrt();
    return ((x1 * x2).sum_dim(dim) / norms).squeeze_dim(dim);
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
