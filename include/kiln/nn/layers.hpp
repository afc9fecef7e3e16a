// Small layers with torch.nn's meaning: Dropout, Embedding, EmbeddingBag, PRelu, the
// activations as modules (for nn::Sequential), and nn::Sequential itself.
#pragma once

#include "kiln/nn/init.hpp"
#include "kiln/nn/module.hpp"

#include <algorithm>
#include <cmath>
#include <optional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

namespace kiln::nn {

// Zeroes each element with probability p in training mode and scales the rest by
// 1 / (1 - p); the identity in eval mode. Masks come from Kiln's seeded stream.
template <class B> struct Dropout {
  double p = 0.5;
  Mode mode;
  KILN_MODULE(mode, p)

  Dropout() = default;
  explicit Dropout(double p_) : p(p_) {
    KILN_CHECK(p >= 0 && p <= 1, "nn::Dropout: p must be in [0, 1], got {}", p);
  }
  template <std::size_t D> Tensor<B, D> forward(const Tensor<B, D>& x) const {
    if (!mode.training || p == 0) return x;
    if (p == 1) return x.zeros_like();
    const auto keep = Tensor<B, D>::random(x.dims(), Distribution::bernoulli(1 - p), x.device(), x.dtype());
    return x * keep * (1.0 / (1.0 - p));
  }
};

// A lookup table: indices [...] → rows of weight [num, dim], [..., dim]. Initialized N(0, 1)
// as PyTorch; the row padding_idx starts at zero and gets no gradient.
template <class B> struct Embedding {
  Param<Tensor<B, 2>> weight;  // [num_embeddings, embedding_dim]
  std::optional<std::int64_t> padding_idx;
  KILN_MODULE(weight, padding_idx)

  Embedding() = default;
  Embedding(std::int64_t num, std::int64_t dim, std::optional<std::int64_t> padding = std::nullopt,
            const typename B::Device& device = {})
      : padding_idx(padding) {
    KILN_CHECK(num > 0 && dim > 0, "nn::Embedding: sizes must be positive, got {} x {}", num, dim);
    if (padding_idx && *padding_idx < 0) *padding_idx += num;
    KILN_CHECK(!padding_idx || (*padding_idx >= 0 && *padding_idx < num),
               "nn::Embedding: padding_idx {} is outside the {} embeddings", padding.value_or(0), num);
    Tensor<B, 2> w = Init::normal(0, 1).template make<B, 2>({num, dim}, device);
    if (padding_idx) w = w.slice_assign({ops::Slice(*padding_idx, *padding_idx + 1)}, Tensor<B, 2>::zeros({1, dim}, device));
    weight = Param(w);
  }

  template <std::size_t D> Tensor<B, D + 1> forward(const Tensor<B, D, Int>& indices) const {
    const Tensor<B, 1, Int> flat = indices.template reshape<1>({-1});
    Tensor<B, 2> rows = weight->index_select(0, flat);
    if constexpr (AutodiffBackend<B>) {
      if (padding_idx) {
        // The padding rows' values, cut from the graph: no gradient reaches that row.
        const Tensor<B, 2> keep = flat.ne(static_cast<double>(*padding_idx)).to_float(rows.dtype()).unsqueeze_dim(1);
        rows = rows * keep + weight->detach().index_select(0, flat) * (1.0 - keep);
      }
    }
    std::array<std::int64_t, D + 1> dims;
    for (std::size_t i = 0; i < D; ++i) dims[i] = indices.dim(static_cast<std::int64_t>(i));
    dims[D] = weight->dim(1);
    return rows.template reshape<D + 1>(dims);
  }
};

// How EmbeddingBag reduces the rows of a bag (torch's mode "sum", "mean", "max").
enum class BagMode { sum, mean, max };

// Sums, averages or takes the max of the embeddings of each bag of indices, without making the
// [..., dim] tensor of all of them (torch.nn.EmbeddingBag; its default mode is mean). Weight
// N(0, 1) as Embedding's; indices equal to padding_idx are left out of their bag, and an empty
// bag gives zeros.
template <class B> struct EmbeddingBag {
  Param<Tensor<B, 2>> weight;  // [num_embeddings, embedding_dim]
  BagMode mode = BagMode::mean;
  std::optional<std::int64_t> padding_idx;
  KILN_MODULE(weight, mode, padding_idx)

  EmbeddingBag() = default;
  EmbeddingBag(std::int64_t num, std::int64_t dim, BagMode mode_ = BagMode::mean,
               std::optional<std::int64_t> padding = std::nullopt, const typename B::Device& device = {})
      : mode(mode_), padding_idx(padding) {
    KILN_CHECK(num > 0 && dim > 0, "nn::EmbeddingBag: sizes must be positive, got {} x {}", num, dim);
    if (padding_idx && *padding_idx < 0) *padding_idx += num;
    KILN_CHECK(!padding_idx || (*padding_idx >= 0 && *padding_idx < num),
               "nn::EmbeddingBag: padding_idx {} is outside the {} embeddings", padding.value_or(0), num);
    Tensor<B, 2> w = Init::normal(0, 1).template make<B, 2>({num, dim}, device);
    if (padding_idx) w = w.slice_assign({ops::Slice(*padding_idx, *padding_idx + 1)}, Tensor<B, 2>::zeros({1, dim}, device));
    weight = Param(w);
  }

  // indices [M] in bags starting at offsets [bags] (offsets[0] = 0, non-decreasing; bag b is
  // indices[offsets[b], offsets[b + 1])); per_sample_weights [M] scale each row (mode sum
  // only) → [bags, dim].
  Tensor<B, 2> forward(const Tensor<B, 1, Int>& indices, const std::vector<std::int64_t>& offsets,
                       const std::optional<Tensor<B, 1>>& per_sample_weights = std::nullopt) const {
    const std::int64_t m = indices.dim(0);
    KILN_CHECK(!per_sample_weights || mode == BagMode::sum,
               "nn::EmbeddingBag: per_sample_weights need mode sum, as torch's");
    KILN_CHECK(!per_sample_weights || per_sample_weights->dim(0) == m,
               "nn::EmbeddingBag: {} per_sample_weights for {} indices", per_sample_weights ? per_sample_weights->dim(0) : 0,
               m);
    for (std::size_t b = 0; b < offsets.size(); ++b)
      KILN_CHECK((b == 0 ? offsets[b] == 0 : offsets[b] >= offsets[b - 1]) && offsets[b] <= m,
                 "nn::EmbeddingBag: offsets[{}] = {} must be {} and at most the {} indices", b, offsets[b],
                 b == 0 ? "0" : "at least the offset before it", m);
    return bags(indices.template to_vec<std::int64_t>(), offsets, indices.device(), per_sample_weights);
  }
  // The same with the offsets in an Int tensor [bags], as torch takes them (read on the host).
  Tensor<B, 2> forward(const Tensor<B, 1, Int>& indices, const Tensor<B, 1, Int>& offsets,
                       const std::optional<Tensor<B, 1>>& per_sample_weights = std::nullopt) const {
    return forward(indices, offsets.template to_vec<std::int64_t>(), per_sample_weights);
  }
  // Bags of one size: indices [bags, size] → [bags, dim].
  Tensor<B, 2> forward(const Tensor<B, 2, Int>& indices,
                       const std::optional<Tensor<B, 2>>& per_sample_weights = std::nullopt) const {
    std::vector<std::int64_t> offsets;
    for (std::int64_t b = 0; b < indices.dim(0); ++b) offsets.push_back(b * indices.dim(1));
    std::optional<Tensor<B, 1>> flat_weights;
    if (per_sample_weights) {
      KILN_CHECK(per_sample_weights->shape() == indices.shape(), "nn::EmbeddingBag: per_sample_weights {} for indices {}",
                 per_sample_weights->shape(), indices.shape());
      flat_weights = per_sample_weights->template reshape<1>({-1});
    }
    return forward(indices.template reshape<1>({-1}), offsets, flat_weights);
  }

 private:
  Tensor<B, 2> bags(const std::vector<std::int64_t>& indices, const std::vector<std::int64_t>& offsets,
                    const typename B::Device& device, const std::optional<Tensor<B, 1>>& per_sample_weights) const {
    const std::int64_t num = weight->dim(0), dim = weight->dim(1), count = static_cast<std::int64_t>(offsets.size());
    // The positions kept (not padding), the bag of each and the bags' sizes, on the host.
    std::vector<std::int64_t> kept, rows_kept, bag_of;
    std::vector<double> sizes(static_cast<std::size_t>(count), 0.0);
    for (std::int64_t b = 0; b < count; ++b) {
      const std::int64_t end = b + 1 < count ? offsets[static_cast<std::size_t>(b + 1)] : static_cast<std::int64_t>(indices.size());
      for (std::int64_t i = offsets[static_cast<std::size_t>(b)]; i < end; ++i) {
        const std::int64_t row = indices[static_cast<std::size_t>(i)];
        KILN_CHECK(row >= 0 && row < num, "nn::EmbeddingBag: index {} at position {} is outside the {} embeddings", row, i,
                   num);
        if (padding_idx && row == *padding_idx) continue;
        kept.push_back(i);
        rows_kept.push_back(row);
        bag_of.push_back(b);
        sizes[static_cast<std::size_t>(b)] += 1.0;
      }
    }
    const DType dtype = weight->dtype();
    Tensor<B, 2> out = Tensor<B, 2>::zeros({count, dim}, device, dtype);
    if (kept.empty()) return out;
    const auto as_index = [&](const std::vector<std::int64_t>& v) {
      return Tensor<B, 1, Int>::from_data(TensorData::from(v, Shape{static_cast<std::int64_t>(v.size())}), device);
    };
    Tensor<B, 2> rows = weight->index_select(0, as_index(rows_kept));
    if (per_sample_weights) rows = rows * per_sample_weights->index_select(0, as_index(kept)).unsqueeze_dim(1);
    if (mode != BagMode::max) {
      out = out.index_add(0, as_index(bag_of), rows);
      if (mode == BagMode::sum) return out;
      for (double& size : sizes) size = std::max(size, 1.0);
      return out / Tensor<B, 2>::from_data(TensorData::from(sizes, Shape{count, 1}).convert(dtype), device);
    }
    // max: one reduction per bag over its rows, which lie together in `rows`.
    std::vector<Tensor<B, 2>> maxima;
    std::int64_t start = 0;
    for (std::int64_t b = 0; b < count; ++b) {
      const auto size = static_cast<std::int64_t>(sizes[static_cast<std::size_t>(b)]);
      maxima.push_back(size == 0 ? Tensor<B, 2>::zeros({1, dim}, device, dtype) : rows.narrow(0, start, size).max_dim(0));
      start += size;
    }
    return Tensor<B, 2>::cat(maxima, 0);
  }
};

// max(0, x) + a min(0, x), with one slope a for all channels or one per channel (dim 1).
template <class B> struct PRelu {
  Param<Tensor<B, 1>> weight;  // [num_parameters]
  KILN_MODULE(weight)

  explicit PRelu(std::int64_t num_parameters = 1, double init = 0.25, const typename B::Device& device = {})
      : weight(Tensor<B, 1>::full({num_parameters}, init, device)) {}

  template <std::size_t D> Tensor<B, D> forward(const Tensor<B, D>& x) const {
    const std::int64_t n = weight->dim(0);
    std::array<std::int64_t, D> dims;
    dims.fill(1);
    if (n != 1) {
      KILN_CHECK(D >= 2 && x.dim(1) == n, "nn::PRelu: {} slopes for an input of shape {} (channels are dim 1)", n,
                 x.shape());
      dims[1] = n;
    }
    return x.relu() + weight->reshape(dims) * x.minimum(0.0);
  }
};

// The activations as stateless modules, for nn::Sequential.
#define KILN_NN_ACTIVATION(Name, expr)                                                         \
  template <class B> struct Name {                                                             \
    KILN_MODULE()                                                                              \
    template <std::size_t D> Tensor<B, D> forward(const Tensor<B, D>& x) const { return expr; } \
  };
KILN_NN_ACTIVATION(Relu, x.relu())
KILN_NN_ACTIVATION(Silu, x.silu())
KILN_NN_ACTIVATION(Sigmoid, x.sigmoid())
KILN_NN_ACTIVATION(Tanh, x.tanh())
KILN_NN_ACTIVATION(Selu, x.selu())
KILN_NN_ACTIVATION(Relu6, x.relu6())
KILN_NN_ACTIVATION(HardSwish, x.hardswish())
KILN_NN_ACTIVATION(HardSigmoid, x.hard_sigmoid())
KILN_NN_ACTIVATION(Mish, x.mish())
KILN_NN_ACTIVATION(LogSigmoid, x.log_sigmoid())
KILN_NN_ACTIVATION(Softsign, x.softsign())
KILN_NN_ACTIVATION(Tanhshrink, x.tanhshrink())
#undef KILN_NN_ACTIVATION

// The activations with arguments, as torch.nn's modules with the same defaults.
template <class B> struct Gelu {
  bool tanh_approximation = false;  // torch's approximate="tanh"
  KILN_MODULE(tanh_approximation)
  template <std::size_t D> Tensor<B, D> forward(const Tensor<B, D>& x) const { return x.gelu(tanh_approximation); }
};
// One argument, a double with torch's default.
#define KILN_NN_ACTIVATION_WITH(Name, field, default_value, method)                                    \
  template <class B> struct Name {                                                                     \
    double field = default_value;                                                                      \
    KILN_MODULE(field)                                                                                 \
    template <std::size_t D> Tensor<B, D> forward(const Tensor<B, D>& x) const { return x.method(field); } \
  };
KILN_NN_ACTIVATION_WITH(LeakyRelu, negative_slope, 0.01, leaky_relu)
KILN_NN_ACTIVATION_WITH(Elu, alpha, 1.0, elu)
KILN_NN_ACTIVATION_WITH(Celu, alpha, 1.0, celu)
KILN_NN_ACTIVATION_WITH(Hardshrink, lambd, 0.5, hardshrink)
KILN_NN_ACTIVATION_WITH(Softshrink, lambd, 0.5, softshrink)
#undef KILN_NN_ACTIVATION_WITH
template <class B> struct Hardtanh {
  double min_val = -1.0, max_val = 1.0;
  KILN_MODULE(min_val, max_val)
  template <std::size_t D> Tensor<B, D> forward(const Tensor<B, D>& x) const { return x.hardtanh(min_val, max_val); }
};
template <class B> struct Threshold {
  double threshold = 0.0, value = 0.0;
  KILN_MODULE(threshold, value)
  template <std::size_t D> Tensor<B, D> forward(const Tensor<B, D>& x) const { return x.threshold(threshold, value); }
};
template <class B> struct Softmin {
  std::int64_t dim = -1;
  KILN_MODULE(dim)
  template <std::size_t D> Tensor<B, D> forward(const Tensor<B, D>& x) const { return x.softmin(dim); }
};
// The first half of `dim` times the sigmoid of the second (torch.nn.GLU).
template <class B> struct Glu {
  std::int64_t dim = -1;
  KILN_MODULE(dim)
  template <std::size_t D> Tensor<B, D> forward(const Tensor<B, D>& x) const { return x.glu(dim); }
};
// Randomized leaky ReLU: slopes drawn from U(lower, upper) per element in training mode, their
// mean in eval mode (torch.nn.RReLU).
template <class B> struct RRelu {
  double lower = 1.0 / 8, upper = 1.0 / 3;
  Mode mode;
  KILN_MODULE(lower, upper, mode)
  template <std::size_t D> Tensor<B, D> forward(const Tensor<B, D>& x) const {
    return x.rrelu(lower, upper, mode.training);
  }
};
// The identity (torch.nn.Identity), a placeholder in nn::Sequential.
template <class B> struct Identity {
  KILN_MODULE()
  template <std::size_t D> Tensor<B, D> forward(const Tensor<B, D>& x) const { return x; }
};

// softplus(x) = log(1 + e^(beta x)) / beta, x itself above threshold / beta (torch.nn.Softplus).
template <class B> struct Softplus {
  double beta = 1.0, threshold = 20.0;
  KILN_MODULE(beta, threshold)
  template <std::size_t D> Tensor<B, D> forward(const Tensor<B, D>& x) const { return x.softplus(beta, threshold); }
};
// torch.nn.Softmax / LogSoftmax along `dim` (the last one unless given; torch's implicit
// choice of a dim is deprecated there).
template <class B> struct Softmax {
  std::int64_t dim = -1;
  KILN_MODULE(dim)
  template <std::size_t D> Tensor<B, D> forward(const Tensor<B, D>& x) const { return x.softmax(dim); }
};
template <class B> struct LogSoftmax {
  std::int64_t dim = -1;
  KILN_MODULE(dim)
  template <std::size_t D> Tensor<B, D> forward(const Tensor<B, D>& x) const { return x.log_softmax(dim); }
};

// Dims start_dim..end_dim merged into one (torch.nn.Flatten, by default all but the batch
// dim). The result's rank R is a template argument: 2 for the defaults.
template <class B> struct Flatten {
  std::int64_t start_dim = 1, end_dim = -1;
  KILN_MODULE(start_dim, end_dim)
  template <std::size_t R = 2, std::size_t D> Tensor<B, R> forward(const Tensor<B, D>& x) const {
    return x.template flatten<R>(start_dim, end_dim);
  }
};
// Dim `dim` split into `sizes` (one of them may be -1) (torch.nn.Unflatten): rank D + N - 1.
template <class B, std::size_t N = 2> struct Unflatten {
  std::int64_t dim = 1;
  std::array<std::int64_t, N> sizes{};
  KILN_MODULE(dim, sizes)
  Unflatten() = default;
  Unflatten(std::int64_t d, const std::array<std::int64_t, N>& s) : dim(d), sizes(s) {}
  template <std::size_t D> Tensor<B, D + N - 1> forward(const Tensor<B, D>& x) const {
    const Shape shape = x.shape();
    const std::int64_t d = dim < 0 ? dim + static_cast<std::int64_t>(D) : dim;
    KILN_CHECK(d >= 0 && d < static_cast<std::int64_t>(D), "nn::Unflatten: dim {} is out of range for shape {}", dim,
               shape);
    std::array<std::int64_t, D + N - 1> dims{};
    std::size_t out = 0;
    for (std::size_t i = 0; i < D; ++i) {
      if (static_cast<std::int64_t>(i) != d) {
        dims[out++] = shape[i];
        continue;
      }
      for (const std::int64_t size : sizes) dims[out++] = size;
    }
    return x.template reshape<D + N - 1>(dims);
  }
};

// Padding of the last dims by a fixed amount (torch.nn.ZeroPad / ConstantPad /
// ReflectionPad / ReplicationPad 1d and 2d): pads {left, right} or {left, right, top,
// bottom}, as Tensor::pad.
template <class B, std::size_t Pads> struct Pad {
  std::array<std::int64_t, Pads> padding{};
  PadMode mode = PadMode::constant;
  double value = 0.0;
  KILN_MODULE(padding, mode, value)
  Pad() = default;
  Pad(const std::array<std::int64_t, Pads>& p, PadMode m = PadMode::constant, double v = 0.0)
      : padding(p), mode(m), value(v) {}
  template <std::size_t D> Tensor<B, D> forward(const Tensor<B, D>& x) const {
    if constexpr (Pads == 2) return x.pad({padding[0], padding[1]}, mode, value);
    else return x.pad({padding[0], padding[1], padding[2], padding[3]}, mode, value);
  }
};
template <class B> Pad<B, 2> zero_pad1d(std::array<std::int64_t, 2> p) { return {p}; }
template <class B> Pad<B, 4> zero_pad2d(std::array<std::int64_t, 4> p) { return {p}; }
template <class B> Pad<B, 2> constant_pad1d(std::array<std::int64_t, 2> p, double value) {
  return {p, PadMode::constant, value};
}
template <class B> Pad<B, 4> constant_pad2d(std::array<std::int64_t, 4> p, double value) {
  return {p, PadMode::constant, value};
}
template <class B> Pad<B, 2> reflection_pad1d(std::array<std::int64_t, 2> p) { return {p, PadMode::reflect}; }
template <class B> Pad<B, 4> reflection_pad2d(std::array<std::int64_t, 4> p) { return {p, PadMode::reflect}; }
template <class B> Pad<B, 2> replication_pad1d(std::array<std::int64_t, 2> p) { return {p, PadMode::replicate}; }
template <class B> Pad<B, 4> replication_pad2d(std::array<std::int64_t, 4> p) { return {p, PadMode::replicate}; }

// Channel dropout (torch.nn.Dropout2d / Dropout1d / Dropout3d): in training, each channel of
// each example (dim 1 of [N, C, ...]) is zeroed with probability p as a whole and the others
// scaled by 1 / (1 - p); the identity in eval mode.
template <class B> struct ChannelDropout {
  double p = 0.5;
  Mode mode;
  KILN_MODULE(mode, p)
  ChannelDropout() = default;
  explicit ChannelDropout(double p_) : p(p_) {
    KILN_CHECK(p >= 0 && p <= 1, "nn::ChannelDropout: p must be in [0, 1], got {}", p);
  }
  template <std::size_t D> Tensor<B, D> forward(const Tensor<B, D>& x) const requires(D >= 3) {
    if (!mode.training || p == 0) return x;
    if (p == 1) return x.zeros_like();
    std::array<std::int64_t, D> dims{};
    dims.fill(1);
    dims[0] = x.dim(0);
    dims[1] = x.dim(1);
    const auto keep = Tensor<B, D>::random(dims, Distribution::bernoulli(1 - p), x.device(), x.dtype());
    return x * keep.expand_as(x.shape()) * (1.0 / (1.0 - p));
  }
};
template <class B> using Dropout1d = ChannelDropout<B>;
template <class B> using Dropout2d = ChannelDropout<B>;
template <class B> using Dropout3d = ChannelDropout<B>;

// The channels of [N, C, ...] split into `groups` and interleaved (torch.nn.ChannelShuffle,
// ShuffleNet's): channel g * (C / groups) + i goes to i * groups + g.
template <class B> struct ChannelShuffle {
  std::int64_t groups = 1;
  KILN_MODULE(groups)
  ChannelShuffle() = default;
  explicit ChannelShuffle(std::int64_t g) : groups(g) {}
  template <std::size_t D> Tensor<B, D> forward(const Tensor<B, D>& x) const requires(D >= 3) {
    const std::int64_t c = x.dim(1);
    KILN_CHECK(groups > 0 && c % groups == 0, "nn::ChannelShuffle: {} channels of {} do not split into {} groups", c,
               x.shape(), groups);
    const std::int64_t n = x.dim(0), rest = x.numel() / std::max<std::int64_t>(1, n * c);
    return x.template reshape<4>({n, groups, c / groups, rest})
        .swap_dims(1, 2)
        .template reshape<D>(x.dims());
  }
};

// Modules applied in order, each to the previous one's output; their parameters are named
// by position ("0.weight", "2.bias"), as torch.nn.Sequential's.
template <class... Modules> struct Sequential {
  std::tuple<Modules...> modules;

  Sequential() = default;
  explicit Sequential(Modules... m) : modules(std::move(m)...) {}

  template <class W> void visit(W& walker) { visit_each(walker, modules); }
  template <class W> void visit(W& walker) const { visit_each(walker, modules); }

  template <std::size_t I> auto& get() { return std::get<I>(modules); }
  template <std::size_t I> const auto& get() const { return std::get<I>(modules); }

  template <class X> auto forward(const X& x) const { return chain<0>(modules, x); }
  // For modules whose forward updates state (BatchNorm in training mode).
  template <class X> auto forward(const X& x) { return chain<0>(modules, x); }

 private:
  template <class W, class Tuple> static void visit_each(W& walker, Tuple& t) {
    [&]<std::size_t... I>(std::index_sequence<I...>) {
      (walker.field(std::to_string(I), std::get<I>(t)), ...);
    }(std::index_sequence_for<Modules...>{});
  }
  template <std::size_t I, class Tuple, class X> static auto chain(Tuple& t, const X& x) {
    if constexpr (I == sizeof...(Modules)) return x;
    else return chain<I + 1>(t, std::get<I>(t).forward(x));
  }
};

}  // namespace kiln::nn
