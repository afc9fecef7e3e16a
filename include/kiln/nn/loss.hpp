// Loss functions with torch.nn.functional's meaning: mse, l1, huber, smooth_l1, cross
// entropy (class indices or probabilities; class weights, ignore_index, label smoothing),
// nll, binary cross entropy (on probabilities or logits, with pos_weight), KL divergence, the
// cosine embedding loss, the margin losses (soft margin, margin ranking, hinge embedding,
// triplet, multi-label soft margin, multi-class and multi-label margin), Poisson and Gaussian
// NLL, and the focal loss; the CTC loss is in kiln/nn/ctc.hpp. Reduction::mean and ::sum give a
// one-element tensor of the input's rank (every dim 1); Reduction::none the per-element
// (per-sample) losses.
#pragma once

#include "kiln/tensor/tensor.hpp"

#include <cmath>
#include <numbers>
#include <optional>
#include <string_view>
#include <type_traits>
#include <vector>

namespace kiln::nn {

enum class Reduction { none, mean, sum, batchmean /* kl_div only: sum / batch size */ };

// Optional weights take the backend of the input (so std::nullopt works).
template <class T> using NoDeduce = std::type_identity_t<T>;

namespace detail {
template <class B, std::size_t D> Tensor<B, D> reduced(const Tensor<B, D>& loss, Reduction r, std::string_view name) {
  std::array<std::int64_t, D> ones;
  ones.fill(1);
  switch (r) {
    case Reduction::none: return loss;
    case Reduction::sum: return loss.sum().reshape(ones);
    case Reduction::mean: return loss.mean().reshape(ones);
    case Reduction::batchmean: break;
  }
  KILN_FAIL("{}: reduction batchmean is kl_div's only", name);
}
template <class B, std::size_t D>
void check_same_shape(std::string_view name, const Tensor<B, D>& input, const Tensor<B, D>& target) {
  KILN_CHECK(input.shape() == target.shape(), "{}: input {} and target {} must have one shape", name, input.shape(),
             target.shape());
}
}  // namespace detail

template <class B, std::size_t D>
Tensor<B, D> mse_loss(const Tensor<B, D>& input, const Tensor<B, D>& target, Reduction r = Reduction::mean) {
  detail::check_same_shape("mse_loss", input, target);
  return detail::reduced((input - target).square(), r, "mse_loss");
}

template <class B, std::size_t D>
Tensor<B, D> l1_loss(const Tensor<B, D>& input, const Tensor<B, D>& target, Reduction r = Reduction::mean) {
  detail::check_same_shape("l1_loss", input, target);
  return detail::reduced((input - target).abs(), r, "l1_loss");
}

// 0.5 d^2 where |d| < delta, else delta (|d| - delta / 2).
template <class B, std::size_t D>
Tensor<B, D> huber_loss(const Tensor<B, D>& input, const Tensor<B, D>& target, double delta = 1.0,
                        Reduction r = Reduction::mean) {
  detail::check_same_shape("huber_loss", input, target);
  KILN_CHECK(delta > 0, "huber_loss: delta must be positive, got {}", delta);
  const Tensor<B, D> a = (input - target).abs();
  return detail::reduced(where(a.lt(delta), a.square() * 0.5, (a - 0.5 * delta) * delta), r, "huber_loss");
}

// 0.5 d^2 / beta where |d| < beta, else |d| - beta / 2 (beta = 0: the L1 loss).
template <class B, std::size_t D>
Tensor<B, D> smooth_l1_loss(const Tensor<B, D>& input, const Tensor<B, D>& target, double beta = 1.0,
                            Reduction r = Reduction::mean) {
  detail::check_same_shape("smooth_l1_loss", input, target);
  KILN_CHECK(beta >= 0, "smooth_l1_loss: beta must be non-negative, got {}", beta);
  const Tensor<B, D> a = (input - target).abs();
  if (beta == 0) return detail::reduced(a, r, "smooth_l1_loss");
  return detail::reduced(where(a.lt(beta), a.square() * (0.5 / beta), a - 0.5 * beta), r, "smooth_l1_loss");
}

struct CrossEntropyOptions {
  std::int64_t ignore_index = -100;
  double label_smoothing = 0.0;
  Reduction reduction = Reduction::mean;
};

namespace detail {
// nll_loss, its errors named after `op`, the loss the user called (nll_loss, or
// cross_entropy, which computes it from log_softmax).
template <class B>
Tensor<B, 1> nll_loss(std::string_view op, const Tensor<B, 2>& log_probs, const Tensor<B, 1, Int>& target,
                      const std::optional<Tensor<B, 1>>& weight, const CrossEntropyOptions& o) {
  const std::int64_t n = log_probs.dim(0), c = log_probs.dim(1);
  KILN_CHECK(target.dim(0) == n, "{}: {} targets for input {}", op, target.dim(0), log_probs.shape());
  KILN_CHECK(!weight || weight->dim(0) == c, "{}: {} class weights for {} classes", op, weight ? weight->dim(0) : 0, c);
  const Tensor<B, 1> kept = target.ne(static_cast<double>(o.ignore_index)).to_float(log_probs.dtype());
  // Ignored targets read class 0 (any valid one) and are masked out.
  const Tensor<B, 1, Int> safe = where(kept.gt(0.0), target, target.zeros_like());
  // One read back checks the range (gather would refuse it too, naming itself).
  KILN_CHECK(n == 0 || !safe.lt(0.0).logical_or(safe.ge(static_cast<double>(c))).any().item(),
             "{}: a target is outside [0, {}) and is not ignore_index {}", op, c, o.ignore_index);
  Tensor<B, 1> w = kept;
  if (weight) w = w * weight->index_select(0, safe);
  const Tensor<B, 1> picked = log_probs.gather(1, safe.unsqueeze_dim(1)).template reshape<1>({n});
  const Tensor<B, 1> loss = -(picked * w);
  if (o.reduction == Reduction::mean) return loss.sum() / w.sum();
  return reduced(loss, o.reduction, op);
}
}  // namespace detail

// -weight[y] log_probs[i, y] for class-index targets y [N] over log-probabilities [N, C];
// targets equal to ignore_index count for nothing (mean: divided by the weights of the rest).
template <class B>
Tensor<B, 1> nll_loss(const Tensor<B, 2>& log_probs, const Tensor<B, 1, Int>& target,
                      const NoDeduce<std::optional<Tensor<B, 1>>>& weight = std::nullopt, const CrossEntropyOptions& o = {}) {
  return detail::nll_loss("nll_loss", log_probs, target, weight, o);
}

// Cross entropy of logits [N, C] and class indices [N]: nll_loss of log_softmax, with label
// smoothing as PyTorch (1 - e) nll + e / C * the weighted sum of -log_probs.
template <class B>
Tensor<B, 1> cross_entropy(const Tensor<B, 2>& logits, const Tensor<B, 1, Int>& target,
                           const NoDeduce<std::optional<Tensor<B, 1>>>& weight = std::nullopt, const CrossEntropyOptions& o = {}) {
  KILN_CHECK(o.label_smoothing >= 0 && o.label_smoothing <= 1, "cross_entropy: label_smoothing must be in [0, 1], got {}",
             o.label_smoothing);
  const Tensor<B, 2> log_probs = logits.log_softmax(1);
  const Tensor<B, 1> nll = detail::nll_loss("cross_entropy", log_probs, target, weight, o);
  if (o.label_smoothing == 0) return nll;
  const std::int64_t n = logits.dim(0), c = logits.dim(1);
  const Tensor<B, 1> kept = target.ne(static_cast<double>(o.ignore_index)).to_float(logits.dtype());
  Tensor<B, 2> weighted = log_probs;
  if (weight) weighted = weighted * weight->template unsqueeze<2>();
  const Tensor<B, 1> smooth = -(weighted.sum_dim(1).template reshape<1>({n}) * kept);
  Tensor<B, 1> smooth_reduced = smooth;
  if (o.reduction == Reduction::mean) {
    if (weight) {
      const Tensor<B, 1, Int> safe = where(kept.gt(0.0), target, target.zeros_like());
      smooth_reduced = smooth.sum() / (weight->index_select(0, safe) * kept).sum();
    } else {
      smooth_reduced = smooth.sum() / kept.sum();
    }
  } else {
    smooth_reduced = detail::reduced(smooth, o.reduction, "cross_entropy");
  }
  return nll * (1 - o.label_smoothing) + smooth_reduced * (o.label_smoothing / static_cast<double>(c));
}

// Cross entropy of logits [N, C] and class probabilities [N, C] (soft targets).
template <class B>
Tensor<B, 1> cross_entropy(const Tensor<B, 2>& logits, const Tensor<B, 2>& target_probs,
                           const NoDeduce<std::optional<Tensor<B, 1>>>& weight = std::nullopt, const CrossEntropyOptions& o = {}) {
  detail::check_same_shape("cross_entropy", logits, target_probs);
  const std::int64_t n = logits.dim(0), c = logits.dim(1);
  Tensor<B, 2> t = target_probs;
  if (o.label_smoothing > 0) t = t * (1 - o.label_smoothing) + o.label_smoothing / static_cast<double>(c);
  Tensor<B, 2> terms = logits.log_softmax(1) * t;
  if (weight) terms = terms * weight->template unsqueeze<2>();
  const Tensor<B, 1> loss = -terms.sum_dim(1).template reshape<1>({n});
  return detail::reduced(loss, o.reduction, "cross_entropy");
}

// -(t log p + (1 - t) log(1 - p)) with the logs clamped at -100, as PyTorch.
template <class B, std::size_t D>
Tensor<B, D> binary_cross_entropy(const Tensor<B, D>& p, const Tensor<B, D>& t,
                                  const NoDeduce<std::optional<Tensor<B, D>>>& weight = std::nullopt,
                                  Reduction r = Reduction::mean) {
  detail::check_same_shape("binary_cross_entropy", p, t);
  Tensor<B, D> loss = -(t * p.log().clamp_min(-100.0) + (1.0 - t) * (1.0 - p).log().clamp_min(-100.0));
  if (weight) loss = loss * *weight;
  return detail::reduced(loss, r, "binary_cross_entropy");
}

// The same on logits x, computed stably: (1 - t) x + (1 + (pw - 1) t) (log(1 + e^-|x|) + max(-x, 0)),
// pos_weight pw broadcast over the last dim.
template <class B, std::size_t D>
Tensor<B, D> binary_cross_entropy_with_logits(const Tensor<B, D>& x, const Tensor<B, D>& t,
                                              const NoDeduce<std::optional<Tensor<B, D>>>& weight = std::nullopt,
                                              const NoDeduce<std::optional<Tensor<B, 1>>>& pos_weight = std::nullopt,
                                              Reduction r = Reduction::mean) {
  detail::check_same_shape("binary_cross_entropy_with_logits", x, t);
  const Tensor<B, D> softplus_neg = (-x.abs()).exp().log1p() + (-x).clamp_min(0.0);
  Tensor<B, D> loss = (1.0 - t) * x;
  if (pos_weight) loss = loss + (1.0 + (pos_weight->template unsqueeze<D>() - 1.0) * t) * softplus_neg;
  else loss = loss + softplus_neg;
  if (weight) loss = loss * *weight;
  return detail::reduced(loss, r, "binary_cross_entropy_with_logits");
}

// KL(target || input) with input log-probabilities: target (log target - input), 0 where
// target is 0; log_target: the target given as log-probabilities. batchmean divides the sum
// by the batch size (dim 0), the mathematically correct mean.
template <class B, std::size_t D>
Tensor<B, D> kl_div(const Tensor<B, D>& input, const Tensor<B, D>& target, Reduction r = Reduction::mean,
                    bool log_target = false) {
  detail::check_same_shape("kl_div", input, target);
  const Tensor<B, D> loss = log_target ? target.exp() * (target - input)
                                       : where(target.gt(0.0), target * (target.log() - input), target.zeros_like());
  if (r == Reduction::batchmean) {
    std::array<std::int64_t, D> ones;
    ones.fill(1);
    return (loss.sum() / static_cast<double>(input.dim(0))).reshape(ones);
  }
  return detail::reduced(loss, r, "kl_div");
}

// 1 - cos(x1, x2) where y = 1, max(0, cos - margin) where y = -1; rows of [N, D].
template <class B>
Tensor<B, 1> cosine_embedding_loss(const Tensor<B, 2>& x1, const Tensor<B, 2>& x2, const Tensor<B, 1>& y,
                                   double margin = 0.0, Reduction r = Reduction::mean) {
  detail::check_same_shape("cosine_embedding_loss", x1, x2);
  const std::int64_t n = x1.dim(0);
  KILN_CHECK(y.dim(0) == n, "cosine_embedding_loss: {} labels for inputs {}", y.dim(0), x1.shape());
  constexpr double eps = 1e-12;
  auto rows = [n](const Tensor<B, 2>& t) { return t.sum_dim(1).template reshape<1>({n}); };
  const Tensor<B, 1> cos = rows(x1 * x2) / ((rows(x1 * x1) + eps) * (rows(x2 * x2) + eps)).sqrt();
  const Tensor<B, 1> loss = where(y.gt(0.0), 1.0 - cos, where(y.lt(0.0), (cos - margin).clamp_min(0.0), cos.zeros_like()));
  return detail::reduced(loss, r, "cosine_embedding_loss");
}

namespace detail {
// max(z, 0) whose gradient passes at z = 0, as torch's clamp_min.
template <class B, std::size_t D> Tensor<B, D> clamp_at_zero(const Tensor<B, D>& z) {
  return z.mask_fill(z.lt(0.0), 0.0);
}
}  // namespace detail

// log(1 + exp(-y x)) per element, y in {-1, 1} (torch's soft_margin_loss), through softplus.
template <class B, std::size_t D>
Tensor<B, D> soft_margin_loss(const Tensor<B, D>& input, const Tensor<B, D>& target, Reduction r = Reduction::mean) {
  detail::check_same_shape("soft_margin_loss", input, target);
  return detail::reduced((-(target * input)).softplus(), r, "soft_margin_loss");
}

// max(0, -y (x1 - x2) + margin): x1 should rank above x2 where y = 1, below where y = -1.
template <class B, std::size_t D>
Tensor<B, D> margin_ranking_loss(const Tensor<B, D>& x1, const Tensor<B, D>& x2, const Tensor<B, D>& y,
                                 double margin = 0.0, Reduction r = Reduction::mean) {
  detail::check_same_shape("margin_ranking_loss", x1, x2);
  detail::check_same_shape("margin_ranking_loss", x1, y);
  return detail::reduced(detail::clamp_at_zero(-(y * (x1 - x2)) + margin), r, "margin_ranking_loss");
}

// x where y = 1, max(0, margin - x) where y = -1 (both terms for any other y), as torch.
template <class B, std::size_t D>
Tensor<B, D> hinge_embedding_loss(const Tensor<B, D>& input, const Tensor<B, D>& target, double margin = 1.0,
                                  Reduction r = Reduction::mean) {
  detail::check_same_shape("hinge_embedding_loss", input, target);
  const Tensor<B, D> below = detail::clamp_at_zero(margin - input).mask_fill(target.eq(1.0), 0.0);
  const Tensor<B, D> self = input.mask_fill(target.eq(-1.0), 0.0);
  return detail::reduced(below + self, r, "hinge_embedding_loss");
}

struct PoissonNllOptions {
  bool log_input = true;  // the input is log(rate): exp(x) - t x; else x - t log(x + eps)
  bool full = false;      // add Stirling's t log t - t + log(2 pi t) / 2 where t > 1
  double eps = 1e-8;
  Reduction reduction = Reduction::mean;
};
template <class B, std::size_t D>
Tensor<B, D> poisson_nll_loss(const Tensor<B, D>& input, const Tensor<B, D>& target, const PoissonNllOptions& o = {}) {
  detail::check_same_shape("poisson_nll_loss", input, target);
  Tensor<B, D> loss = o.log_input ? input.exp() - target * input : input - target * (input + o.eps).log();
  if (o.full) {
    const Tensor<B, D> t = target.mask_fill(target.le(1.0), 1.0);  // log of t > 1 only
    const Tensor<B, D> stirling = t * t.log() - t + (t * (2 * std::numbers::pi)).log() * 0.5;
    loss = loss + stirling.mask_fill(target.le(1.0), 0.0);
  }
  return detail::reduced(loss, o.reduction, "poisson_nll_loss");
}

// (log var + (x - t)^2 / var) / 2 per element, the variance clamped at eps in the value only
// (its gradient passes, as torch's clamp under no_grad); `full` adds log(2 pi) / 2.
template <class B, std::size_t D>
Tensor<B, D> gaussian_nll_loss(const Tensor<B, D>& input, const Tensor<B, D>& target, const Tensor<B, D>& var,
                               bool full = false, double eps = 1e-6, Reduction r = Reduction::mean) {
  detail::check_same_shape("gaussian_nll_loss", input, target);
  detail::check_same_shape("gaussian_nll_loss", input, var);
  KILN_CHECK(eps > 0, "gaussian_nll_loss: eps must be positive, got {}", eps);
  Tensor<B, D> v = var.clamp_min(eps);
  if constexpr (requires { var.detach(); }) v = var + (v - var).detach();  // on Autodiff: var's gradient as is
  Tensor<B, D> loss = (v.log() + (input - target).square() / v) * 0.5;
  if (full) loss = loss + 0.5 * std::log(2 * std::numbers::pi);
  return detail::reduced(loss, r, "gaussian_nll_loss");
}

// max(d(a, p) - d(a, n) + margin, 0) per row of [N, D], d the p-norm of x1 - x2 + eps along
// dim 1 (torch's pairwise_distance); `swap` uses d(p, n) where it is smaller than d(a, n).
template <class B>
Tensor<B, 1> triplet_margin_loss(const Tensor<B, 2>& anchor, const Tensor<B, 2>& positive, const Tensor<B, 2>& negative,
                                 double margin = 1.0, double p = 2.0, double eps = 1e-6, bool swap = false,
                                 Reduction r = Reduction::mean) {
  detail::check_same_shape("triplet_margin_loss", anchor, positive);
  detail::check_same_shape("triplet_margin_loss", anchor, negative);
  KILN_CHECK(p > 0, "triplet_margin_loss: p must be positive, got {}", p);
  const std::int64_t n = anchor.dim(0);
  auto distance = [&](const Tensor<B, 2>& a, const Tensor<B, 2>& b) {
    return (a - b + eps).norm_dim(p, 1).template reshape<1>({n});
  };
  Tensor<B, 1> to_negative = distance(anchor, negative);
  if (swap) to_negative = to_negative.minimum(distance(positive, negative));
  return detail::reduced(detail::clamp_at_zero(distance(anchor, positive) - to_negative + margin), r,
                         "triplet_margin_loss");
}

// -(y log sigmoid(x) + (1 - y) log sigmoid(-x)) averaged over the C labels of each row of
// [N, C] (optionally weighted per label), then reduced over N.
template <class B>
Tensor<B, 1> multilabel_soft_margin_loss(const Tensor<B, 2>& input, const Tensor<B, 2>& target,
                                         const NoDeduce<std::optional<Tensor<B, 1>>>& weight = std::nullopt,
                                         Reduction r = Reduction::mean) {
  detail::check_same_shape("multilabel_soft_margin_loss", input, target);
  Tensor<B, 2> terms = -(target * input.log_sigmoid() + (1.0 - target) * (-input).log_sigmoid());
  if (weight) terms = terms * weight->template unsqueeze<2>();
  const Tensor<B, 1> loss = terms.mean_dim(1).template reshape<1>({input.dim(0)});
  return detail::reduced(loss, r, "multilabel_soft_margin_loss");
}

// The focal loss of dense detection (torchvision's sigmoid_focal_loss): binary cross entropy
// on logits scaled by (1 - p_t)^gamma, and by alpha_t where alpha >= 0. Its default
// reduction is none, as torchvision's.
template <class B, std::size_t D>
Tensor<B, D> sigmoid_focal_loss(const Tensor<B, D>& inputs, const Tensor<B, D>& targets, double alpha = 0.25,
                                double gamma = 2.0, Reduction r = Reduction::none) {
  detail::check_same_shape("sigmoid_focal_loss", inputs, targets);
  const Tensor<B, D> p = inputs.sigmoid();
  const Tensor<B, D> ce = binary_cross_entropy_with_logits(inputs, targets, std::nullopt, std::nullopt, Reduction::none);
  const Tensor<B, D> p_t = p * targets + (1.0 - p) * (1.0 - targets);
  Tensor<B, D> loss = ce * (1.0 - p_t).pow(gamma);
  if (alpha >= 0) loss = loss * (targets * alpha + (1.0 - targets) * (1.0 - alpha));
  return detail::reduced(loss, r, "sigmoid_focal_loss");
}

// The multi-class hinge loss (torch's multi_margin_loss) of scores [N, C] and class indices
// [N]: sum over j != y of w[y] max(0, margin - x[y] + x[j])^p, divided by C; p is 1 or 2,
// the class weights w optional.
template <class B>
Tensor<B, 1> multi_margin_loss(const Tensor<B, 2>& input, const Tensor<B, 1, Int>& target, int p = 1, double margin = 1.0,
                               const NoDeduce<std::optional<Tensor<B, 1>>>& weight = std::nullopt,
                               Reduction r = Reduction::mean) {
  const std::int64_t n = input.dim(0), c = input.dim(1);
  KILN_CHECK(p == 1 || p == 2, "multi_margin_loss: p must be 1 or 2, got {}", p);
  KILN_CHECK(target.dim(0) == n, "multi_margin_loss: {} targets for input {}", target.dim(0), input.shape());
  KILN_CHECK(!weight || weight->dim(0) == c, "multi_margin_loss: {} class weights for {} classes",
             weight ? weight->dim(0) : 0, c);
  KILN_CHECK(n == 0 || !target.lt(0.0).logical_or(target.ge(static_cast<double>(c))).any().item(),
             "multi_margin_loss: a target is outside [0, {})", c);
  const Tensor<B, 2, Int> index = target.unsqueeze_dim(1);
  Tensor<B, 2> terms = detail::clamp_at_zero(input - input.gather(1, index) + margin);
  if (p == 2) terms = terms.square();
  terms = terms.mask_fill(target.one_hot(c).gt(0.0), 0.0);  // j = y counts for nothing
  if (weight) terms = terms * weight->index_select(0, target).unsqueeze_dim(1);
  return detail::reduced(terms.sum_dim(1).template reshape<1>({n}) / static_cast<double>(c), r, "multi_margin_loss");
}

// The multi-label hinge loss (torch's multilabel_margin_loss) of scores [N, C]: each row of
// target [N, C] lists the row's classes, ended by the first -1 (the rest is ignored); the
// loss is the sum over its classes j and the other classes k of max(0, 1 - (x[j] - x[k])),
// divided by C.
template <class B>
Tensor<B, 1> multilabel_margin_loss(const Tensor<B, 2>& input, const Tensor<B, 2, Int>& target,
                                    Reduction r = Reduction::mean) {
  KILN_CHECK(input.shape() == target.shape(), "multilabel_margin_loss: input {} and target {} must have one shape",
             input.shape(), target.shape());
  const std::int64_t n = input.dim(0), c = input.dim(1);
  // Which target slots count (those before the row's first -1) and which classes are targets,
  // read on the host: the target is small, and its range is checked there.
  const std::vector<std::int64_t> labels = target.template to_vec<std::int64_t>();
  std::vector<double> counted(labels.size(), 0.0), is_target(labels.size(), 0.0);
  std::vector<std::int64_t> safe(labels.size(), 0);
  for (std::int64_t i = 0; i < n; ++i) {
    for (std::int64_t s = 0; s < c; ++s) {
      const std::int64_t label = labels[static_cast<std::size_t>(i * c + s)];
      if (label == -1) break;
      KILN_CHECK(label >= 0 && label < c, "multilabel_margin_loss: target[{}, {}] = {} is outside [0, {}) and is not -1", i,
                 s, label, c);
      counted[static_cast<std::size_t>(i * c + s)] = 1.0;
      safe[static_cast<std::size_t>(i * c + s)] = label;
      is_target[static_cast<std::size_t>(i * c + label)] = 1.0;
    }
  }
  const auto host = [&](const auto& values) {
    return TensorData::from(values, input.shape());
  };
  const auto device = input.device();
  const Tensor<B, 2> slot_counts = Tensor<B, 2>::from_data(host(counted).convert(input.dtype()), device);
  const Tensor<B, 2> others = 1.0 - Tensor<B, 2>::from_data(host(is_target).convert(input.dtype()), device);
  const Tensor<B, 2> picked = input.gather(1, Tensor<B, 2, Int>::from_data(host(safe), device));  // x[j], [N, C]
  // [N, slot, class]: max(0, 1 - x[j] + x[k]) for counted slots j and non-target classes k.
  const Tensor<B, 3> terms = detail::clamp_at_zero(input.unsqueeze_dim(1) - picked.unsqueeze_dim(2) + 1.0) *
                             slot_counts.unsqueeze_dim(2) * others.unsqueeze_dim(1);
  const Tensor<B, 1> loss = terms.sum_dim(2).sum_dim(1).template reshape<1>({n}) / static_cast<double>(c);
  return detail::reduced(loss, r, "multilabel_margin_loss");
}

}  // namespace kiln::nn
