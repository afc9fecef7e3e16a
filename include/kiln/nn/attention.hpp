// Attention and the transformer, with torch.nn's meaning and parameter names (batch_first
// layout: [batch, sequence, features]), so PyTorch weights load as they are:
// MultiHeadAttention (torch.nn.MultiheadAttention: in_proj_weight / in_proj_bias packing
// q, k, v; out_proj), TransformerEncoderLayer and TransformerDecoderLayer (post- or
// pre-norm, relu or gelu), and their stacks TransformerEncoder and TransformerDecoder
// (optional final norm), with key-value caches for incremental decoding (KvCache,
// DecoderCache). Positional encodings are in nn/positional.hpp.
#pragma once

#include "kiln/nn/layers.hpp"
#include "kiln/nn/linear.hpp"
#include "kiln/nn/norm.hpp"
#include "kiln/tensor/attention.hpp"

#include <optional>

namespace kiln::nn {

// nn::functional::scaled_dot_product_attention is kiln::functional's (kiln/tensor/attention.hpp).
namespace functional = kiln::functional;

template <class B> struct AttentionMasks {
  // [L, S]: true where query l may not attend to key s (PyTorch's bool attn_mask).
  std::optional<Tensor<B, 2, Bool>> attn_mask;
  // [N, S]: true at padding keys (PyTorch's key_padding_mask).
  std::optional<Tensor<B, 2, Bool>> key_padding_mask;
  // Each query attends only to keys at or before its position (L == S).
  bool causal = false;
};

// The projected keys and values an attention has seen, for incremental decoding
// (MultiHeadAttention::forward_incremental, forward_memory): [N, H, S, E / H] each, empty
// until the first call. clear() starts a new sequence.
template <class B> struct KvCache {
  std::optional<Tensor<B, 4>> key, value;
  std::int64_t length() const { return key ? key->dim(2) : 0; }
  void clear() {
    key.reset();
    value.reset();
  }
};

template <class B> struct MultiHeadAttention {
  Param<Tensor<B, 2>> in_proj_weight;               // [3E, E]: q, k, v projections stacked
  std::optional<Param<Tensor<B, 1>>> in_proj_bias;  // [3E]
  Linear<B> out_proj;                               // [E, E]
  Dropout<B> dropout;                               // on the attention weights
  std::int64_t num_heads = 1;
  KILN_MODULE(in_proj_weight, in_proj_bias, out_proj, dropout, num_heads)

  MultiHeadAttention() = default;
  // PyTorch's initialization: Xavier-uniform in_proj_weight, zero biases.
  MultiHeadAttention(std::int64_t embed_dim, std::int64_t heads, double dropout_p = 0.0, bool bias = true,
                     const typename B::Device& device = {})
      : out_proj(embed_dim, embed_dim, {.bias = bias, .bias_init = Init::zeros()}, device),
        dropout(dropout_p),
        num_heads(heads) {
    KILN_CHECK(heads > 0 && embed_dim % heads == 0, "nn::MultiHeadAttention: embed_dim {} is not divisible by {} heads",
               embed_dim, heads);
    in_proj_weight = Param(Init::xavier_uniform().template make<B, 2>({3 * embed_dim, embed_dim}, device));
    if (bias) in_proj_bias.emplace(Tensor<B, 1>::zeros({3 * embed_dim}, device));
  }

  std::int64_t embed_dim() const { return in_proj_weight->dim(1); }

  // query [N, L, E], key and value [N, S, E] → [N, L, E].
  Tensor<B, 3> forward(const Tensor<B, 3>& query, const Tensor<B, 3>& key, const Tensor<B, 3>& value,
                       const AttentionMasks<B>& masks = {}) const {
    const std::int64_t e = embed_dim();
    KILN_CHECK(query.dim(2) == e && key.dim(2) == e && value.dim(2) == e && key.dim(0) == query.dim(0) &&
                   value.dim(0) == query.dim(0) && value.dim(1) == key.dim(1),
               "nn::MultiHeadAttention: query {}, key {} and value {} must be [N, L, {}], [N, S, {}], [N, S, {}]",
               query.shape(), key.shape(), value.shape(), e, e, e);
    return attend(project(query, 0), project(key, 1), project(value, 2), masks);
  }

  // Self-attention over a sequence that grows by x [N, L, E], its next L positions: their
  // keys and values join `cache`, and each attends to every cached position up to its own.
  // Fed a sequence in pieces (one position at a time, or a prompt then single positions),
  // it gives what forward(x, x, x, {.causal = true}) gives for the whole sequence.
  Tensor<B, 3> forward_incremental(const Tensor<B, 3>& x, KvCache<B>& cache) const {
    const std::int64_t e = embed_dim(), l = x.dim(1);
    KILN_CHECK(x.dim(2) == e, "nn::MultiHeadAttention: forward_incremental's x {} must be [N, L, {}]", x.shape(), e);
    KILN_CHECK(!cache.key || cache.key->dim(0) == x.dim(0),
               "nn::MultiHeadAttention: the cache holds {} sequences, x {} has {}", cache.length() ? cache.key->dim(0) : 0,
               x.shape(), x.dim(0));
    Tensor<B, 4> k = project(x, 1), v = project(x, 2);
    if (cache.key) {
      k = Tensor<B, 4>::cat({*cache.key, k}, 2);
      v = Tensor<B, 4>::cat({*cache.value, v}, 2);
    }
    cache.key = k;
    cache.value = v;
    // New query i sits at position past + i and may not see the keys after it.
    const std::int64_t s = k.dim(2), past = s - l;
    AttentionMasks<B> masks;
    if (l > 1) masks.attn_mask = Tensor<B, 2>::ones({l, s}, x.device()).triu(past + 1).gt(0.0);
    return attend(project(x, 0), k, v, masks);
  }

  // Attention from query [N, L, E] to a memory [N, S, E] that stays the same from call to
  // call (an encoder's output): its keys and values are projected on the first call and kept
  // in `cache`. Equal to forward(query, memory, memory, masks).
  Tensor<B, 3> forward_memory(const Tensor<B, 3>& query, const Tensor<B, 3>& memory, KvCache<B>& cache,
                              const AttentionMasks<B>& masks = {}) const {
    const std::int64_t e = embed_dim();
    KILN_CHECK(query.dim(2) == e && memory.dim(2) == e && memory.dim(0) == query.dim(0),
               "nn::MultiHeadAttention: query {} and memory {} must be [N, L, {}] and [N, S, {}]", query.shape(),
               memory.shape(), e, e);
    if (!cache.key) {
      cache.key = project(memory, 1);
      cache.value = project(memory, 2);
    }
    KILN_CHECK(cache.key->dim(0) == memory.dim(0) && cache.key->dim(2) == memory.dim(1),
               "nn::MultiHeadAttention: the cache holds a memory of {} sequences of {}, memory {} differs: clear the "
               "cache for a new memory",
               cache.key->dim(0), cache.key->dim(2), memory.shape());
    return attend(project(query, 0), *cache.key, *cache.value, masks);
  }

 private:
  // The projection of x [N, len, E] by rows [part E, (part + 1) E) of the packed weights
  // (0: query, 1: key, 2: value), as heads [N, H, len, E / H].
  Tensor<B, 4> project(const Tensor<B, 3>& x, std::int64_t part) const {
    const std::int64_t e = embed_dim();
    const ops::Slice rows(part * e, (part + 1) * e);
    std::optional<Tensor<B, 1>> bias;
    if (in_proj_bias) bias = (*in_proj_bias)->slice({rows});
    // One linear op: the bias joins the GEMM (and its gradient the linear's backward).
    const Tensor<B, 3> y = functional::linear(x, in_proj_weight->slice({rows}), bias);
    return y.template reshape<4>({x.dim(0), x.dim(1), num_heads, e / num_heads}).permute({0, 2, 1, 3});
  }

  // Projected heads q [N, H, L, dh], k and v [N, H, S, dh] → [N, L, E] through out_proj.
  Tensor<B, 3> attend(const Tensor<B, 4>& q, const Tensor<B, 4>& k, const Tensor<B, 4>& v,
                      const AttentionMasks<B>& masks) const {
    const std::int64_t n = q.dim(0), l = q.dim(2), s = k.dim(2);
    // The masks combine into the one bool mask scaled_dot_product_attention takes, broadcast
    // over the heads: attn_mask [1, 1, L, S], key_padding_mask [N, 1, 1, S], both [N, 1, L, S].
    std::optional<Tensor<B, 4, Bool>> mask;
    if (masks.causal)
      KILN_CHECK(l == s, "nn::MultiHeadAttention: a causal mask needs as many queries as keys, got {} and {}", l, s);
    if (masks.attn_mask) {
      KILN_CHECK(masks.attn_mask->shape() == Shape({l, s}), "nn::MultiHeadAttention: attn_mask {} must be [{}, {}]",
                 masks.attn_mask->shape(), l, s);
      mask = masks.attn_mask->template reshape<4>({1, 1, l, s});
    }
    if (masks.key_padding_mask) {
      KILN_CHECK(masks.key_padding_mask->shape() == Shape({n, s}),
                 "nn::MultiHeadAttention: key_padding_mask {} must be [{}, {}]", masks.key_padding_mask->shape(), n, s);
      const auto pad = masks.key_padding_mask->template reshape<4>({n, 1, 1, s});
      mask = mask ? mask->logical_or(pad) : pad;
    }
    // The fused primitive where the backend has it; dropout on the weights (training with
    // p > 0) takes the composition, which draws the same random weights Dropout would.
    const functional::AttentionOptions options{.causal = masks.causal,
                                               .dropout = dropout.mode.training ? dropout.p : 0.0};
    const Tensor<B, 4> attended = functional::scaled_dot_product_attention(q, k, v, mask, options);  // [N, H, L, dh]
    return out_proj.forward(attended.permute({0, 2, 1, 3}).template reshape<3>({n, l, embed_dim()}));
  }
};

// The arguments of torch.nn.TransformerEncoderLayer / TransformerDecoderLayer, with their defaults.
struct TransformerLayerOptions {
  std::int64_t dim_feedforward = 2048;
  double dropout = 0.1;
  bool gelu = false;  // the feed-forward activation: relu (PyTorch's default) or gelu
  double layer_norm_eps = 1e-5;
  bool norm_first = false;  // pre-norm
};
using TransformerEncoderLayerOptions = TransformerLayerOptions;
using TransformerDecoderLayerOptions = TransformerLayerOptions;

namespace detail {
// The position-wise feed-forward block of both layers: linear2(dropout(act(linear1(x)))).
template <class B>
Tensor<B, 3> feed_forward(const Linear<B>& linear1, const Dropout<B>& dropout, const Linear<B>& linear2, bool gelu,
                          const Tensor<B, 3>& x) {
  // relu joins linear1's kernel (its gradient reads only its output); gelu's reads its input.
  const Tensor<B, 3> hidden =
      gelu ? linear1.forward(x).gelu()
           : functional::linear(x, *linear1.weight, linear1.bias ? std::optional(**linear1.bias) : std::nullopt,
                                ops::LinearActivation::relu);
  return linear2.forward(dropout.forward(hidden));
}
}  // namespace detail

template <class B> struct TransformerEncoderLayer {
  MultiHeadAttention<B> self_attn;
  Linear<B> linear1, linear2;
  Dropout<B> dropout, dropout1, dropout2;
  LayerNorm<B> norm1, norm2;
  bool gelu = false, norm_first = false;
  KILN_MODULE(self_attn, linear1, dropout, linear2, norm1, norm2, dropout1, dropout2, gelu, norm_first)

  TransformerEncoderLayer() = default;
  TransformerEncoderLayer(std::int64_t d_model, std::int64_t nhead, const TransformerEncoderLayerOptions& o = {},
                          const typename B::Device& device = {})
      : self_attn(d_model, nhead, o.dropout, true, device),
        linear1(d_model, o.dim_feedforward, {}, device),
        linear2(o.dim_feedforward, d_model, {}, device),
        dropout(o.dropout),
        dropout1(o.dropout),
        dropout2(o.dropout),
        norm1({d_model}, o.layer_norm_eps, true, device),
        norm2({d_model}, o.layer_norm_eps, true, device),
        gelu(o.gelu),
        norm_first(o.norm_first) {}

  // src [N, S, E] → [N, S, E]; masks as MultiHeadAttention's.
  Tensor<B, 3> forward(const Tensor<B, 3>& src, const AttentionMasks<B>& masks = {}) const {
    auto attend = [&](const Tensor<B, 3>& x) { return dropout1.forward(self_attn.forward(x, x, x, masks)); };
    auto feed_forward = [&](const Tensor<B, 3>& x) {
      return dropout2.forward(detail::feed_forward(linear1, dropout, linear2, gelu, x));
    };
    if (norm_first) {
      const Tensor<B, 3> x = src + attend(norm1.forward(src));
      return x + feed_forward(norm2.forward(x));
    }
    const Tensor<B, 3> x = norm1.forward(src + attend(src));
    return norm2.forward(x + feed_forward(x));
  }
};

// A stack of encoder layers (layers.0, layers.1...), then an optional final LayerNorm.
template <class B> struct TransformerEncoder {
  std::vector<TransformerEncoderLayer<B>> layers;
  std::optional<LayerNorm<B>> norm;
  KILN_MODULE(layers, norm)

  TransformerEncoder() = default;
  TransformerEncoder(std::int64_t num_layers, std::int64_t d_model, std::int64_t nhead,
                     const TransformerEncoderLayerOptions& o = {}, bool final_norm = false,
                     const typename B::Device& device = {}) {
    for (std::int64_t i = 0; i < num_layers; ++i) layers.emplace_back(d_model, nhead, o, device);
    if (final_norm) norm.emplace(std::array<std::int64_t, 1>{d_model}, o.layer_norm_eps, true, device);
  }
  Tensor<B, 3> forward(Tensor<B, 3> x, const AttentionMasks<B>& masks = {}) const {
    for (const auto& layer : layers) x = layer.forward(x, masks);
    return norm ? norm->forward(x) : x;
  }
};

// What a decoder layer keeps for incremental decoding: its self-attention's keys and values
// of the positions so far, and its projected memory.
template <class B> struct DecoderLayerCache {
  KvCache<B> self_attn, memory;
};

// torch.nn.TransformerDecoderLayer: self-attention over the target, attention over the
// encoder's output (memory), then the feed-forward block, each with a residual connection
// and a LayerNorm (after it, or before it when norm_first).
template <class B> struct TransformerDecoderLayer {
  MultiHeadAttention<B> self_attn, multihead_attn;
  Linear<B> linear1, linear2;
  Dropout<B> dropout, dropout1, dropout2, dropout3;
  LayerNorm<B> norm1, norm2, norm3;
  bool gelu = false, norm_first = false;
  KILN_MODULE(self_attn, multihead_attn, linear1, dropout, linear2, norm1, norm2, norm3, dropout1, dropout2, dropout3,
              gelu, norm_first)

  TransformerDecoderLayer() = default;
  TransformerDecoderLayer(std::int64_t d_model, std::int64_t nhead, const TransformerDecoderLayerOptions& o = {},
                          const typename B::Device& device = {})
      : self_attn(d_model, nhead, o.dropout, true, device),
        multihead_attn(d_model, nhead, o.dropout, true, device),
        linear1(d_model, o.dim_feedforward, {}, device),
        linear2(o.dim_feedforward, d_model, {}, device),
        dropout(o.dropout),
        dropout1(o.dropout),
        dropout2(o.dropout),
        dropout3(o.dropout),
        norm1({d_model}, o.layer_norm_eps, true, device),
        norm2({d_model}, o.layer_norm_eps, true, device),
        norm3({d_model}, o.layer_norm_eps, true, device),
        gelu(o.gelu),
        norm_first(o.norm_first) {}

  // tgt [N, L, E] and memory [N, S, E] → [N, L, E]. tgt_masks go to the self-attention
  // (PyTorch's tgt_mask as attn_mask, tgt_key_padding_mask, or causal), memory_masks to the
  // attention over memory (memory_mask [L, S], memory_key_padding_mask [N, S]).
  Tensor<B, 3> forward(const Tensor<B, 3>& tgt, const Tensor<B, 3>& memory, const AttentionMasks<B>& tgt_masks = {},
                       const AttentionMasks<B>& memory_masks = {}) const {
    check(tgt, memory);
    return run(
        tgt, [&](const Tensor<B, 3>& x) { return self_attn.forward(x, x, x, tgt_masks); },
        [&](const Tensor<B, 3>& x) { return multihead_attn.forward(x, memory, memory, memory_masks); });
  }

  // Incremental decoding: tgt [N, L, E] holds the next L target positions, `cache` what the
  // layer keeps of the earlier ones and of memory. Over a sequence fed in pieces it gives
  // what forward(tgt, memory, {.causal = true}, memory_masks) gives for the whole of it, the
  // new positions' rows.
  Tensor<B, 3> forward_incremental(const Tensor<B, 3>& tgt, const Tensor<B, 3>& memory, DecoderLayerCache<B>& cache,
                                   const AttentionMasks<B>& memory_masks = {}) const {
    check(tgt, memory);
    return run(
        tgt, [&](const Tensor<B, 3>& x) { return self_attn.forward_incremental(x, cache.self_attn); },
        [&](const Tensor<B, 3>& x) { return multihead_attn.forward_memory(x, memory, cache.memory, memory_masks); });
  }

 private:
  void check(const Tensor<B, 3>& tgt, const Tensor<B, 3>& memory) const {
    const std::int64_t e = self_attn.embed_dim();
    KILN_CHECK(tgt.dim(2) == e && memory.dim(2) == e && memory.dim(0) == tgt.dim(0),
               "nn::TransformerDecoderLayer: tgt {} and memory {} must be [N, L, {}] and [N, S, {}]", tgt.shape(),
               memory.shape(), e, e);
  }
  // The layer around its two attentions: residual connections, norms, the feed-forward block.
  template <class SelfAttention, class MemoryAttention>
  Tensor<B, 3> run(const Tensor<B, 3>& tgt, SelfAttention&& attention, MemoryAttention&& memory_attention) const {
    auto attend_self = [&](const Tensor<B, 3>& x) { return dropout1.forward(attention(x)); };
    auto attend_memory = [&](const Tensor<B, 3>& x) { return dropout2.forward(memory_attention(x)); };
    auto feed_forward = [&](const Tensor<B, 3>& x) {
      return dropout3.forward(detail::feed_forward(linear1, dropout, linear2, gelu, x));
    };
    if (norm_first) {
      Tensor<B, 3> x = tgt + attend_self(norm1.forward(tgt));
      x = x + attend_memory(norm2.forward(x));
      return x + feed_forward(norm3.forward(x));
    }
    Tensor<B, 3> x = norm1.forward(tgt + attend_self(tgt));
    x = norm2.forward(x + attend_memory(x));
    return norm3.forward(x + feed_forward(x));
  }
};

// A TransformerDecoder's caches of incremental decoding, one per layer; clear() starts a new
// sequence, length() is the positions decoded so far.
template <class B> struct DecoderCache {
  std::vector<DecoderLayerCache<B>> layers;
  std::int64_t length() const { return layers.empty() ? 0 : layers.front().self_attn.length(); }
  void clear() { layers.clear(); }
};

// A stack of decoder layers (layers.0, layers.1...), each attending to the same memory,
// then an optional final LayerNorm (torch.nn.TransformerDecoder's norm).
template <class B> struct TransformerDecoder {
  std::vector<TransformerDecoderLayer<B>> layers;
  std::optional<LayerNorm<B>> norm;
  KILN_MODULE(layers, norm)

  TransformerDecoder() = default;
  TransformerDecoder(std::int64_t num_layers, std::int64_t d_model, std::int64_t nhead,
                     const TransformerDecoderLayerOptions& o = {}, bool final_norm = false,
                     const typename B::Device& device = {}) {
    for (std::int64_t i = 0; i < num_layers; ++i) layers.emplace_back(d_model, nhead, o, device);
    if (final_norm) norm.emplace(std::array<std::int64_t, 1>{d_model}, o.layer_norm_eps, true, device);
  }
  Tensor<B, 3> forward(Tensor<B, 3> x, const Tensor<B, 3>& memory, const AttentionMasks<B>& tgt_masks = {},
                       const AttentionMasks<B>& memory_masks = {}) const {
    for (const auto& layer : layers) x = layer.forward(x, memory, tgt_masks, memory_masks);
    return norm ? norm->forward(x) : x;
  }
  // Incremental decoding (TransformerDecoderLayer::forward_incremental) through every layer:
  // x [N, L, E] are the next L target positions; `cache` (empty for a new sequence) keeps one
  // DecoderLayerCache per layer.
  Tensor<B, 3> forward_incremental(Tensor<B, 3> x, const Tensor<B, 3>& memory, DecoderCache<B>& cache,
                                   const AttentionMasks<B>& memory_masks = {}) const {
    if (cache.layers.empty()) cache.layers.resize(layers.size());
    KILN_CHECK(cache.layers.size() == layers.size(),
               "nn::TransformerDecoder: the cache is of a decoder of {} layers, this one has {}", cache.layers.size(),
               layers.size());
    for (std::size_t i = 0; i < layers.size(); ++i) x = layers[i].forward_incremental(x, memory, cache.layers[i], memory_masks);
    return norm ? norm->forward(x) : x;
  }
};

// torch.nn.Transformer: an encoder stack and a decoder stack, each with its final LayerNorm,
// with torch's parameter names (encoder.layers.0..., encoder.norm, decoder.layers.0...,
// decoder.norm) and defaults (d_model 512, 8 heads, 6 + 6 layers; the layers' options as
// TransformerLayerOptions), batch-first.
template <class B> struct Transformer {
  TransformerEncoder<B> encoder;
  TransformerDecoder<B> decoder;
  KILN_MODULE(encoder, decoder)

  Transformer() = default;
  Transformer(std::int64_t d_model, std::int64_t nhead = 8, std::int64_t num_encoder_layers = 6,
              std::int64_t num_decoder_layers = 6, const TransformerLayerOptions& o = {},
              const typename B::Device& device = {})
      : encoder(num_encoder_layers, d_model, nhead, o, true, device),
        decoder(num_decoder_layers, d_model, nhead, o, true, device) {}

  // src [N, S, E], tgt [N, L, E] → [N, L, E]: the decoder over tgt, attending to the encoded
  // src. src_masks go to the encoder's self-attention (torch's src_mask,
  // src_key_padding_mask), tgt_masks to the decoder's (tgt_mask or causal,
  // tgt_key_padding_mask), memory_masks to its attention over the encoded src (memory_mask,
  // memory_key_padding_mask).
  Tensor<B, 3> forward(const Tensor<B, 3>& src, const Tensor<B, 3>& tgt, const AttentionMasks<B>& src_masks = {},
                       const AttentionMasks<B>& tgt_masks = {}, const AttentionMasks<B>& memory_masks = {}) const {
    return decoder.forward(tgt, encoder.forward(src, src_masks), tgt_masks, memory_masks);
  }
};

}  // namespace kiln::nn
