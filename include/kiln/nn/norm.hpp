// Normalization layers with torch.nn's meaning, parameter names and defaults:
// BatchNorm1d / 2d / 3d (running statistics, train / eval), LayerNorm, GroupNorm,
// InstanceNorm1d / 2d (no running statistics), and RmsNorm (x / sqrt(mean(x^2) + eps) * w,
// over the last dims, as torch.nn.RMSNorm of later PyTorch versions), LocalResponseNorm.
#pragma once

#include "kiln/nn/init.hpp"
#include "kiln/nn/module.hpp"

#include <array>
#include <cmath>
#include <optional>
#include <vector>

namespace kiln::nn {

namespace detail {
// Mean and biased variance of x over `dims` (each kept with size 1).
template <class B, std::size_t D>
std::pair<Tensor<B, D>, Tensor<B, D>> moments(const Tensor<B, D>& x, std::initializer_list<std::int64_t> dims) {
  Tensor<B, D> mean = x;
  for (std::int64_t d : dims) mean = mean.mean_dim(d);
  const Tensor<B, D> centered = x - mean;
  Tensor<B, D> var = centered * centered;
  for (std::int64_t d : dims) var = var.mean_dim(d);
  return {mean, var};
}
// Mean of x over its last k dims (each kept with size 1).
template <class B, std::size_t D> Tensor<B, D> mean_over_last(Tensor<B, D> x, std::size_t k) {
  for (std::size_t i = 0; i < k; ++i) x = x.mean_dim(static_cast<std::int64_t>(D - 1 - i));
  return x;
}
// A per-channel tensor [C] shaped [1, C, 1, ...] (rank D) to broadcast over [N, C, ...].
template <class B, std::size_t D> Tensor<B, D> per_channel(const Tensor<B, 1>& t) {
  std::array<std::int64_t, D> dims;
  dims.fill(1);
  dims[1] = t.dim(0);
  return t.reshape(dims);
}
// A tensor of the normalized shape (rank K) as rank D, aligned to x's last dims.
template <class B, std::size_t D, std::size_t K> Tensor<B, D> trailing(const Tensor<B, K>& t) {
  return t.template unsqueeze<D>();
}
}  // namespace detail

struct BatchNormOptions {
  double eps = 1e-5;
  std::optional<double> momentum = 0.1;  // nullopt: a cumulative average, as PyTorch's momentum=None
  bool affine = true;
  bool track_running_stats = true;
};

// BatchNorm over [N, C] or [N, C, L] (BatchNorm1d), [N, C, H, W] (BatchNorm2d) and
// [N, C, D, H, W] (BatchNorm3d): in
// training mode each channel is normalized with its batch mean and biased variance, and
// the running mean / unbiased variance are updated; in eval mode the running ones are used.
// forward is not const: training updates the running statistics.
template <class B> struct BatchNorm {
  std::optional<Param<Tensor<B, 1>>> weight, bias;  // [C], when affine
  std::optional<Buffer<Tensor<B, 1>>> running_mean, running_var;
  std::optional<Buffer<Tensor<B, 1, Int>>> num_batches_tracked;  // [1]
  Mode mode;
  BatchNormOptions options;
  KILN_MODULE(weight, bias, running_mean, running_var, num_batches_tracked, mode, options)

  BatchNorm() = default;
  explicit BatchNorm(std::int64_t channels, const BatchNormOptions& o = {}, const typename B::Device& device = {})
      : options(o) {
    KILN_CHECK(channels > 0, "nn::BatchNorm: channels must be positive, got {}", channels);
    if (o.affine) {
      weight.emplace(Tensor<B, 1>::ones({channels}, device));
      bias.emplace(Tensor<B, 1>::zeros({channels}, device));
    }
    if (o.track_running_stats) {
      running_mean.emplace(Tensor<B, 1>::zeros({channels}, device));
      running_var.emplace(Tensor<B, 1>::ones({channels}, device));
      num_batches_tracked.emplace(Tensor<B, 1, Int>::zeros({1}, device));
    }
  }

  template <std::size_t D> Tensor<B, D> forward(const Tensor<B, D>& x) {
    static_assert(D >= 2, "nn::BatchNorm: the input is [N, C, ...]");
    const std::int64_t c = x.dim(1);
    KILN_CHECK(!weight || c == (*weight)->dim(0), "nn::BatchNorm: input {} has {} channels, the layer {}", x.shape(), c,
               (*weight)->dim(0));
    // Statistics over every dim but the channels: [N, C, rest] with rest = 1 for [N, C].
    const Tensor<B, 3> x3 = x.template reshape<3>({x.dim(0), c, -1});
    const bool use_batch = mode.training || !running_mean;
    const auto [mean, var] = use_batch ? detail::moments(x3, {0, 2})
                                       : std::pair(detail::per_channel<B, 3>(**running_mean),
                                                   detail::per_channel<B, 3>(**running_var));
    if (use_batch && mode.training && running_mean) update_running(mean, var, x3.numel() / c);
    Tensor<B, 3> y = (x3 - mean) * (var + options.eps).rsqrt();
    if (weight) y = y * detail::per_channel<B, 3>(**weight) + detail::per_channel<B, 3>(**bias);
    return y.template reshape<D>(x.dims());
  }

 private:
  void update_running(const Tensor<B, 3>& mean, const Tensor<B, 3>& var, std::int64_t n) {
    num_batches_tracked->replace(**num_batches_tracked + 1.0);
    // The count is read back only for the cumulative average (momentum unset).
    const double m = options.momentum ? *options.momentum : 1.0 / static_cast<double>(num_batches_tracked->val().item());
    const Tensor<B, 1> batch_mean = mean.template reshape<1>({-1});
    const Tensor<B, 1> unbiased = var.template reshape<1>({-1}) * (static_cast<double>(n) / static_cast<double>(std::max<std::int64_t>(n - 1, 1)));
    running_mean->replace(**running_mean * (1 - m) + batch_mean * m);
    running_var->replace(**running_var * (1 - m) + unbiased * m);
  }
};
template <class B> using BatchNorm1d = BatchNorm<B>;
template <class B> using BatchNorm2d = BatchNorm<B>;
template <class B> using BatchNorm3d = BatchNorm<B>;

// LayerNorm over the last K dims (normalized_shape of rank K): biased variance, eps 1e-5.
template <class B, std::size_t K = 1> struct LayerNorm {
  std::optional<Param<Tensor<B, K>>> weight, bias;  // normalized_shape, when elementwise_affine
  double eps = 1e-5;
  KILN_MODULE(weight, bias, eps)

  LayerNorm() = default;
  explicit LayerNorm(std::array<std::int64_t, K> shape, double eps_ = 1e-5, bool elementwise_affine = true,
                     const typename B::Device& device = {})
      : eps(eps_) {
    if (elementwise_affine) {
      weight.emplace(Tensor<B, K>::ones(shape, device));
      bias.emplace(Tensor<B, K>::zeros(shape, device));
    }
  }

  // (x - mean) / sqrt(var + eps) over the last K dims: one fused kernel where the backend
  // has it (FusedLayerNorm), else this composition of primitives.
  template <std::size_t D> Tensor<B, D> normalize(const Tensor<B, D>& x) const {
    if constexpr (FusedLayerNorm<B>) {
      return Tensor<B, D>(B::layer_norm(x.primitive(), static_cast<std::int64_t>(K), eps));
    } else {
      const Tensor<B, D> centered = x - detail::mean_over_last(x, K);
      const Tensor<B, D> var = detail::mean_over_last(centered * centered, K);
      return centered * (var + eps).rsqrt();
    }
  }

  template <std::size_t D> Tensor<B, D> forward(const Tensor<B, D>& x) const {
    static_assert(D >= K, "nn::LayerNorm: the input has fewer dims than the normalized shape");
    if (weight)
      for (std::size_t i = 0; i < K; ++i)
        KILN_CHECK(x.dim(static_cast<std::int64_t>(D - K + i)) == (*weight)->dim(static_cast<std::int64_t>(i)),
                   "nn::LayerNorm: input {} does not end with the normalized shape {}", x.shape(), (*weight)->shape());
    if (!weight && !bias) return normalize(x);
    // One op with the weight and the bias (kiln::provided::layer_norm_affine): one pass each
    // way on the CPU, one node under Autodiff.
    std::optional<typename B::Primitive> w, b;
    if (weight) w = (*weight)->primitive();
    if (bias) b = (*bias)->primitive();
    return Tensor<B, D>(provided::layer_norm_affine<B>(x.primitive(), w, b, static_cast<std::int64_t>(K), eps));
  }
};

// RmsNorm over the last K dims: x / sqrt(mean(x^2) + eps) * weight.
template <class B, std::size_t K = 1> struct RmsNorm {
  Param<Tensor<B, K>> weight;
  double eps = 1e-6;
  KILN_MODULE(weight, eps)

  RmsNorm() = default;
  explicit RmsNorm(std::array<std::int64_t, K> shape, double eps_ = 1e-6, const typename B::Device& device = {})
      : weight(Tensor<B, K>::ones(shape, device)), eps(eps_) {}

  template <std::size_t D> Tensor<B, D> forward(const Tensor<B, D>& x) const {
    static_assert(D >= K, "nn::RmsNorm: the input has fewer dims than the normalized shape");
    const Tensor<B, D> mean_square = detail::mean_over_last(x * x, K);
    return x * (mean_square + eps).rsqrt() * detail::trailing<B, D, K>(*weight);
  }
};

// GroupNorm: the channels of [N, C, ...] in G groups, each normalized over its channels and
// the spatial dims; per-channel affine.
template <class B> struct GroupNorm {
  std::optional<Param<Tensor<B, 1>>> weight, bias;  // [C], when affine
  std::int64_t groups = 1;
  double eps = 1e-5;
  KILN_MODULE(weight, bias, groups, eps)

  GroupNorm() = default;
  GroupNorm(std::int64_t groups_, std::int64_t channels, double eps_ = 1e-5, bool affine = true,
            const typename B::Device& device = {})
      : groups(groups_), eps(eps_) {
    KILN_CHECK(groups > 0 && channels > 0 && channels % groups == 0,
               "nn::GroupNorm: {} channels do not split into {} groups", channels, groups);
    if (affine) {
      weight.emplace(Tensor<B, 1>::ones({channels}, device));
      bias.emplace(Tensor<B, 1>::zeros({channels}, device));
    }
  }

  template <std::size_t D> Tensor<B, D> forward(const Tensor<B, D>& x) const {
    static_assert(D >= 2, "nn::GroupNorm: the input is [N, C, ...]");
    KILN_CHECK(x.dim(1) % groups == 0, "nn::GroupNorm: input {} has channels that do not split into {} groups",
               x.shape(), groups);
    const Tensor<B, 3> g = x.template reshape<3>({x.dim(0), groups, -1});
    const auto [mean, var] = detail::moments(g, {2});
    Tensor<B, D> y = ((g - mean) * (var + eps).rsqrt()).template reshape<D>(x.dims());
    if (weight) y = y * detail::per_channel<B, D>(**weight) + detail::per_channel<B, D>(**bias);
    return y;
  }
};

// InstanceNorm over [N, C, L] (1d) or [N, C, H, W] (2d): each (sample, channel) normalized
// over its spatial dims; affine off by default, no running statistics (PyTorch's default).
template <class B> struct InstanceNorm {
  std::optional<Param<Tensor<B, 1>>> weight, bias;  // [C], when affine
  double eps = 1e-5;
  KILN_MODULE(weight, bias, eps)

  InstanceNorm() = default;
  explicit InstanceNorm(std::int64_t channels, double eps_ = 1e-5, bool affine = false,
                        const typename B::Device& device = {})
      : eps(eps_) {
    if (affine) {
      weight.emplace(Tensor<B, 1>::ones({channels}, device));
      bias.emplace(Tensor<B, 1>::zeros({channels}, device));
    }
  }

  template <std::size_t D> Tensor<B, D> forward(const Tensor<B, D>& x) const {
    static_assert(D >= 3, "nn::InstanceNorm: the input is [N, C, spatial...]");
    const Tensor<B, 3> x3 = x.template reshape<3>({x.dim(0), x.dim(1), -1});
    const auto [mean, var] = detail::moments(x3, {2});
    Tensor<B, D> y = ((x3 - mean) * (var + eps).rsqrt()).template reshape<D>(x.dims());
    if (weight) y = y * detail::per_channel<B, D>(**weight) + detail::per_channel<B, D>(**bias);
    return y;
  }
};
template <class B> using InstanceNorm1d = InstanceNorm<B>;
template <class B> using InstanceNorm2d = InstanceNorm<B>;

// LocalResponseNorm over [N, C, ...] (torch.nn.LocalResponseNorm): each element divided by
// (k + alpha / size * the sum of x^2 over `size` neighbouring channels)^beta, the window
// [c - size / 2, c + (size - 1) / 2] clipped at the edges (its divisor stays size).
template <class B> struct LocalResponseNorm {
  std::int64_t size = 1;
  double alpha = 1e-4, beta = 0.75, k = 1.0;
  KILN_MODULE(size, alpha, beta, k)

  LocalResponseNorm() = default;
  explicit LocalResponseNorm(std::int64_t size_, double alpha_ = 1e-4, double beta_ = 0.75, double k_ = 1.0)
      : size(size_), alpha(alpha_), beta(beta_), k(k_) {
    KILN_CHECK(size > 0, "nn::LocalResponseNorm: size must be positive, got {}", size);
  }

  template <std::size_t D> Tensor<B, D> forward(const Tensor<B, D>& x) const {
    static_assert(D >= 3, "nn::LocalResponseNorm: the input is [N, C, spatial...]");
    const std::int64_t channels = x.dim(1);
    // x^2 with size / 2 zero channels before and (size - 1) / 2 after.
    auto zero_channels = [&](std::int64_t count) {
      auto dims = x.dims();
      dims[1] = count;
      return Tensor<B, D>::zeros(dims, x.device(), x.dtype());
    };
    std::vector<Tensor<B, D>> parts{x.square()};
    if (size / 2 > 0) parts.insert(parts.begin(), zero_channels(size / 2));
    if ((size - 1) / 2 > 0) parts.push_back(zero_channels((size - 1) / 2));
    const Tensor<B, D> squares = parts.size() == 1 ? parts[0] : Tensor<B, D>::cat(parts, 1);
    Tensor<B, D> window = squares.narrow(1, 0, channels);
    for (std::int64_t i = 1; i < size; ++i) window = window + squares.narrow(1, i, channels);
    return x / (window * (alpha / static_cast<double>(size)) + k).pow(beta);
  }
};

}  // namespace kiln::nn
