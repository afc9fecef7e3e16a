// GradientsParams<B>: the gradients of a module's trainable parameters after backward(),
// keyed by parameter id, on the inner backend B. They outlive the graph and the tensors
// that produced them, so they can be summed over several backward passes (gradient
// accumulation), clipped, and handed to an optimizer.
#pragma once

#include "kiln/autodiff/graph.hpp"
#include "kiln/nn/module.hpp"

#include <cmath>
#include <limits>
#include <optional>
#include <unordered_map>
#include <vector>

namespace kiln::optim {

template <Backend B> class GradientsParams {
 public:
  GradientsParams() = default;

  // Takes each trainable parameter's gradient out of `grads` (a backward pass of the
  // module's Autodiff<B> graph); parameters the pass did not reach get none.
  template <nn::Module M> static GradientsParams from(const M& module, Gradients<typename B::Primitive>& grads) {
    GradientsParams out;
    nn::for_each_param(module, [&](const std::string&, const auto& p) {
      if (!p.trainable()) return;
      if (auto g = p->grad_remove(grads)) out.grads_.insert_or_assign(p.id(), g->primitive());
    });
    return out;
  }

  // The sum of these gradients and `other`'s, parameter by parameter (accumulation).
  void accumulate(const GradientsParams& other) {
    for (const auto& [id, g] : other.grads_) {
      const auto it = grads_.find(id);
      if (it == grads_.end()) grads_.emplace(id, g);
      else it->second = provided::binary<B, ops::Add>(it->second, g);
    }
  }
  // Every gradient times `factor` (e.g. 1 / accumulation steps).
  void scale(double factor) {
    for (auto& [id, g] : grads_) g = provided::binary_scalar<B, ops::Mul>(g, factor);
  }

  std::optional<typename B::Primitive> get(nn::ParamId id) const {
    const auto it = grads_.find(id);
    if (it == grads_.end()) return std::nullopt;
    return it->second;
  }
  void set(nn::ParamId id, typename B::Primitive grad) { grads_.insert_or_assign(id, std::move(grad)); }
  std::size_t size() const { return grads_.size(); }
  bool empty() const { return grads_.empty(); }

  // f(id, primitive&) for every gradient.
  template <class F> void for_each(F&& f) {
    for (auto& [id, g] : grads_) f(id, g);
  }

 private:
  std::unordered_map<nn::ParamId, typename B::Primitive> grads_;  // any rank: the backend's handles
};

// Scales all gradients so that their joint norm (p-norm over every element of every
// gradient; p = inf: the largest |g|) is at most max_norm, as torch.nn.utils.clip_grad_norm_
// (factor max_norm / (norm + 1e-6), only when it is below 1). Returns the norm before.
template <Backend B> double clip_grad_norm(GradientsParams<B>& grads, double max_norm, double norm_type = 2.0) {
  KILN_CHECK(max_norm >= 0 && norm_type > 0, "clip_grad_norm: max_norm {} and norm_type {} must be positive",
             max_norm, norm_type);
  // The per-gradient sums (or maxima) stay on the device; one read back gives the norm.
  const bool inf_norm = std::isinf(norm_type);
  std::optional<typename B::Primitive> total;
  grads.for_each([&](nn::ParamId, typename B::Primitive& g) {
    const auto a = provided::unary<B, ops::Abs>(g);
    const auto part = inf_norm ? provided::reduce_all<B>(a, ops::ReduceOp::max)
                               : provided::reduce_all<B>(provided::binary_scalar<B, ops::Pow>(a, norm_type), ops::ReduceOp::sum);
    total = !total ? part : inf_norm ? provided::binary<B, ops::Maximum>(*total, part) : provided::binary<B, ops::Add>(*total, part);
  });
  const double reduced = total ? B::into_data(B::cast(*total, DType::f64)).template to_vec<double>()[0] : 0.0;
  const double norm = inf_norm ? reduced : std::pow(reduced, 1.0 / norm_type);
  const double factor = max_norm / (norm + 1e-6);
  if (factor < 1.0) grads.scale(factor);
  return norm;
}

// Clamps every gradient element to [-clip, clip], as torch.nn.utils.clip_grad_value_.
template <Backend B> void clip_grad_value(GradientsParams<B>& grads, double clip) {
  KILN_CHECK(clip >= 0, "clip_grad_value: clip must be non-negative, got {}", clip);
  grads.for_each([&](nn::ParamId, typename B::Primitive& g) {
    g = provided::binary_scalar<B, ops::Minimum>(provided::binary_scalar<B, ops::Maximum>(g, -clip), clip);
  });
}

}  // namespace kiln::optim
