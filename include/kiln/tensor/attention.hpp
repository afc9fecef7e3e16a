// Scaled-dot-product attention on tensors (kiln::functional, also spelled
// nn::functional): softmax(q kᵀ · scale) v with an optional mask, causal masking and dropout
// on the weights, as PyTorch's F.scaled_dot_product_attention except for the mask's
// meaning: true is where a query may NOT attend, as in nn::AttentionMasks (torch.nn's
// MultiheadAttention convention; F.scaled_dot_product_attention's bool mask is the opposite).
// A backend with the fused primitive (FusedAttention) runs it without the [L, S] weights;
// the composition below is the fallback and the reference.
#pragma once

#include "kiln/ops/attention.hpp"
#include "kiln/tensor/tensor.hpp"

#include <cstdint>
#include <limits>
#include <optional>
#include <type_traits>

namespace kiln::functional {

struct AttentionOptions {
  bool causal = false;  // query i sees keys j <= i (top-left aligned when L != S, as PyTorch)
  double dropout = 0.0;  // probability of zeroing each weight; the caller passes 0 outside training
  std::optional<double> scale;  // 1 / sqrt(D) when not given
};

namespace detail {

// The composition of primitives: scores [N, H, L, S], masked to -inf, softmax, dropout,
// weights @ v. What a backend without FusedAttention runs, and what Autodiff then
// differentiates.
template <class B>
Tensor<B, 4> attention_composition(const Tensor<B, 4>& q, const Tensor<B, 4>& k, const Tensor<B, 4>& v,
                                   const std::optional<Tensor<std::type_identity_t<B>, 4, Bool>>& mask, bool causal,
                                   double dropout, double scale) {
  // The scale is applied to q ([L, D] per head), not to the scores ([L, S]): a pass over
  // L x D elements instead of L x S, as the fused kernels do.
  Tensor<B, 4> scores = (q * scale).matmul(k.transpose());
  const double ninf = -std::numeric_limits<double>::infinity();
  if (causal) {
    const std::int64_t l = q.dim(2), s = k.dim(2);
    const auto later = Tensor<B, 2>::ones({l, s}, q.device()).triu(1).gt(0.0);
    scores = scores.mask_fill(later.template unsqueeze<4>().expand_as(scores.shape()), ninf);
  }
  if (mask) scores = scores.mask_fill(mask->expand_as(scores.shape()), ninf);
  Tensor<B, 4> weights = scores.softmax(3);
  if (dropout > 0) {
    if (dropout >= 1) return weights.matmul(v).zeros_like();
    const auto keep = Tensor<B, 4>::random(weights.dims(), Distribution::bernoulli(1 - dropout), q.device(), q.dtype());
    weights = weights * keep * (1.0 / (1.0 - dropout));
  }
  return weights.matmul(v);
}

}  // namespace detail

// q [N, H, L, D], k [N, H, S, D], v [N, H, S, Dv] → [N, H, L, Dv]. mask: bool, broadcasting
// to [N, H, L, S] (each dim that size or 1), true where query l may not attend to key s.
// A query row that may attend to no key comes out NaN, as softmax over -inf does. (B is
// deduced from q alone, so that the mask may be std::nullopt or a tensor.)
template <class B>
Tensor<B, 4> scaled_dot_product_attention(const Tensor<B, 4>& q, const Tensor<B, 4>& k, const Tensor<B, 4>& v,
                                          const std::optional<Tensor<std::type_identity_t<B>, 4, Bool>>& mask = std::nullopt,
                                          const AttentionOptions& options = {}) {
  ops::check_attention("scaled_dot_product_attention", q.shape(), q.dtype(), k.shape(), k.dtype(), v.shape(),
                       v.dtype(), mask ? std::optional(mask->shape()) : std::nullopt,
                       mask ? std::optional(mask->dtype()) : std::nullopt);
  KILN_CHECK(options.dropout >= 0 && options.dropout <= 1,
             "scaled_dot_product_attention: dropout must be in [0, 1], got {}", options.dropout);
  const double scale = ops::attention_scale(q.shape(), options.scale);
  // Dropout on the weights needs the weights: with it, the composition runs (training only).
  if constexpr (FusedAttention<B>) {
    if (options.dropout == 0) {
      std::optional<typename B::Primitive> m;
      if (mask) m = mask->primitive();
      return Tensor<B, 4>(B::attention(q.primitive(), k.primitive(), v.primitive(), m, options.causal, scale).first);
    }
  }
  return detail::attention_composition(q, k, v, mask, options.causal, options.dropout, scale);
}

}  // namespace kiln::functional
