// The transformer decoder against torch.nn.TransformerDecoderLayer / TransformerDecoder, and
// the positional encodings against their formulas (tests/golden/gen_transformer.py): output,
// input gradients and every parameter gradient of sum(y * r) in f64. And an encoder layer
// that loads weights torch.save wrote (tests/golden/gen_import.py) and matches PyTorch.
// On every backend (Autodiff over Cpu and Vulkan).
#include "backends.hpp"
#include "golden.hpp"
#include "param_grads.hpp"

#include <kiln/nn.hpp>
#include <kiln/nn/state.hpp>

#include <cmath>
#include <cstdint>
#include <filesystem>
#include <limits>
#include <vector>

namespace {

using namespace kiln;
using kiln::test::golden;
using kiln::test::GoldenCase;

template <class B> class NnTransformer : public kiln::test::BackendTest<B> {};
TYPED_TEST_SUITE(NnTransformer, kiln::test::HardwareBackends, kiln::test::BackendNames);

constexpr double kTol = 1e-10;
// The sizes of gen_transformer.py.
constexpr std::int64_t kModel = 8, kHeads = 2, kFeedForward = 16;

// The case's "w.<path>" tensors into the module's parameters, as f64.
template <class M> void load_f64(M& module, const GoldenCase& c) {
  std::size_t loaded = 0;
  nn::for_each_param(module, [&](const std::string& path, auto& p) {
    using T = std::remove_cvref_t<decltype(p.val())>;
    const TensorData& data = c["w." + path];
    ASSERT_EQ(data.shape(), p->shape()) << path;
    p.replace(T::from_data(data.convert(DType::f64)));
    ++loaded;
  });
  std::size_t in_file = 0;
  for (const auto& [label, data] : c.tensors) in_file += label.starts_with("w.");
  EXPECT_EQ(loaded, in_file) << "the module and torch's state dict have different parameters";
}

template <class B> std::optional<Tensor<B, 2, Bool>> mask(const GoldenCase& c, const std::string& label) {
  if (!c.tensors.count(label)) return std::nullopt;
  return c.tensor<B, 2, Bool>(label);
}

// Runs forward(module, tgt, memory, case) and checks y, dtgt, dmemory and every d.<param>.
template <class B, class M, class Forward> void check_decoder(M& module, const std::string& name, Forward&& forward) {
  SCOPED_TRACE(name);
  using AD = Autodiff<B>;
  const GoldenCase& c = golden("transformer", name);
  load_f64(module, c);
  const auto tgt = c.tensor<AD, 3>("tgt").require_grad();
  const auto memory = c.tensor<AD, 3>("memory").require_grad();
  const Tensor<AD, 3> y = forward(module, tgt, memory, c);
  EXPECT_CLOSE(y, c["y"], kTol, kTol);
  const auto grads = (y * Tensor<AD, 3>::from_data(c["r"])).sum().backward();
  EXPECT_CLOSE(*tgt.grad(grads), c["dtgt"], kTol, kTol);
  EXPECT_CLOSE(*memory.grad(grads), c["dmemory"], kTol, kTol);
  kiln::test::expect_param_grads(module, grads, c, kTol);
}

TYPED_TEST(NnTransformer, DecoderLayersMatchTorchInPostAndPreNorm) {
  using B = TypeParam;
  using AD = Autodiff<B>;
  // Post-norm, relu: the causal flag for tgt_mask, and memory_key_padding_mask.
  nn::TransformerDecoderLayer<AD> post(kModel, kHeads, {.dim_feedforward = kFeedForward, .dropout = 0.0});
  check_decoder<B>(post, "decoder_layer", [](const auto& m, const auto& tgt, const auto& memory, const GoldenCase& c) {
    return m.forward(tgt, memory, {.causal = true}, {.key_padding_mask = mask<AD>(c, "memory_key_padding_mask")});
  });
  // Pre-norm, gelu: torch's bool tgt_mask and memory_mask as given, and both padding masks.
  nn::TransformerDecoderLayer<AD> pre(kModel, kHeads,
                                      {.dim_feedforward = kFeedForward, .dropout = 0.0, .gelu = true, .norm_first = true});
  check_decoder<B>(pre, "decoder_layer_pre_norm_gelu",
                   [](const auto& m, const auto& tgt, const auto& memory, const GoldenCase& c) {
                     return m.forward(tgt, memory,
                                      {.attn_mask = mask<AD>(c, "tgt_mask"),
                                       .key_padding_mask = mask<AD>(c, "tgt_key_padding_mask")},
                                      {.attn_mask = mask<AD>(c, "memory_mask"),
                                       .key_padding_mask = mask<AD>(c, "memory_key_padding_mask")});
                   });
}

TYPED_TEST(NnTransformer, DecoderStackMatchesTorchAndNamesItsParametersLikeTorch) {
  using B = TypeParam;
  using AD = Autodiff<B>;
  nn::TransformerDecoder<AD> decoder(2, kModel, kHeads, {.dim_feedforward = kFeedForward, .dropout = 0.0}, true);
  std::vector<std::string> paths;
  nn::for_each_param(decoder, [&](const std::string& path, const auto&) { paths.push_back(path); });
  // torch's state_dict order: self_attn, multihead_attn, linear1, linear2, norm1..3.
  ASSERT_EQ(paths.size(), 2 * 18 + 2u);
  EXPECT_EQ(std::vector<std::string>(paths.begin(), paths.begin() + 6),
            (std::vector<std::string>{"layers.0.self_attn.in_proj_weight", "layers.0.self_attn.in_proj_bias",
                                      "layers.0.self_attn.out_proj.weight", "layers.0.self_attn.out_proj.bias",
                                      "layers.0.multihead_attn.in_proj_weight", "layers.0.multihead_attn.in_proj_bias"}));
  EXPECT_EQ(paths[17], "layers.0.norm3.bias");
  EXPECT_EQ(paths.back(), "norm.bias");
  check_decoder<B>(decoder, "decoder_stack", [](const auto& m, const auto& tgt, const auto& memory, const GoldenCase& c) {
    return m.forward(tgt, memory, {.causal = true}, {.key_padding_mask = mask<AD>(c, "memory_key_padding_mask")});
  });
}

// Incremental decoding with the key-value caches: the target fed as a prompt and then one
// position at a time gives torch's full causal decoder output, row by row, also with a
// padded memory; a cleared cache starts over.
TYPED_TEST(NnTransformer, IncrementalDecodingGivesTheFullSequencesOutput) {
  using B = TypeParam;
  const GoldenCase& c = golden("transformer", "decoder_stack");
  nn::TransformerDecoder<B> decoder(2, kModel, kHeads, {.dim_feedforward = kFeedForward, .dropout = 0.0}, true);
  load_f64(decoder, c);
  const auto tgt = c.tensor<B, 3>("tgt");
  const auto memory = c.tensor<B, 3>("memory");
  const nn::AttentionMasks<B> memory_masks{.key_padding_mask = mask<B>(c, "memory_key_padding_mask")};
  const std::int64_t length = tgt.dim(1);
  ASSERT_GE(length, 3);
  nn::DecoderCache<B> cache;
  // A two-position prompt first, then (after clear) one position at a time from the start.
  for (const std::int64_t prompt : {2, 1}) {
    SCOPED_TRACE(prompt);
    std::vector<Tensor<B, 3>> rows{decoder.forward_incremental(tgt.narrow(1, 0, prompt), memory, cache, memory_masks)};
    for (std::int64_t t = prompt; t < length; ++t) {
      rows.push_back(decoder.forward_incremental(tgt.narrow(1, t, 1), memory, cache, memory_masks));
      EXPECT_EQ(cache.length(), t + 1);
    }
    EXPECT_CLOSE(Tensor<B, 3>::cat(rows, 1), c["y"], kTol, kTol);
    cache.clear();
  }
  // One attention alone: the cache grows by the positions fed; a batch of another size is refused.
  nn::KvCache<B> kv;
  const auto& attention = decoder.layers[0].self_attn;
  const auto whole = attention.forward(tgt, tgt, tgt, {.causal = true});
  const auto first = attention.forward_incremental(tgt.narrow(1, 0, length - 1), kv);
  const auto last = attention.forward_incremental(tgt.narrow(1, length - 1, 1), kv);
  EXPECT_EQ(kv.length(), length);
  EXPECT_CLOSE(Tensor<B, 3>::cat({first, last}, 1), whole.into_data(), kTol, kTol);
  EXPECT_KILN_ERROR(attention.forward_incremental(Tensor<B, 3>::zeros({tgt.dim(0) + 1, 1, kModel}), kv),
                    fmt::format("nn::MultiHeadAttention: the cache holds {} sequences", tgt.dim(0)));
  nn::KvCache<B> memory_kv;
  attention.forward_memory(tgt, memory, memory_kv);
  EXPECT_KILN_ERROR(attention.forward_memory(tgt, memory.narrow(1, 0, 1), memory_kv),
                    "nn::MultiHeadAttention: the cache holds a memory of");
}

// nn::Transformer against torch.nn.Transformer (pre-norm, gelu, 2 + 1 layers): torch's
// parameter names load as they are, and the output and every gradient match, with a causal
// target mask and a source padding mask on the encoder and on the memory.
TYPED_TEST(NnTransformer, TransformerMatchesTorch) {
  using B = TypeParam;
  using AD = Autodiff<B>;
  const GoldenCase& c = golden("transformer", "transformer");
  nn::Transformer<AD> model(kModel, kHeads, 2, 1,
                            {.dim_feedforward = kFeedForward, .dropout = 0.0, .gelu = true, .norm_first = true});
  load_f64(model, c);
  const auto src = c.tensor<AD, 3>("src").require_grad();
  const auto tgt = c.tensor<AD, 3>("tgt").require_grad();
  const auto pad = c.tensor<AD, 2, Bool>("pad");
  const auto y = model.forward(src, tgt, {.key_padding_mask = pad}, {.causal = true}, {.key_padding_mask = pad});
  EXPECT_CLOSE(y, c["y"], kTol, kTol);
  const auto grads = (y * Tensor<AD, 3>::from_data(c["r"])).sum().backward();
  EXPECT_CLOSE(*src.grad(grads), c["dsrc"], kTol, kTol);
  EXPECT_CLOSE(*tgt.grad(grads), c["dtgt"], kTol, kTol);
  kiln::test::expect_param_grads(model, grads, c, kTol);
}

TYPED_TEST(NnTransformer, DecoderRejectsBadShapesAndMasks) {
  using B = TypeParam;
  manual_seed(8);
  const nn::TransformerDecoderLayer<B> layer(kModel, kHeads, {.dim_feedforward = kFeedForward, .dropout = 0.0});
  const auto tgt = Tensor<B, 3>::zeros({2, 3, kModel});
  const auto memory = Tensor<B, 3>::zeros({2, 4, kModel});
  EXPECT_KILN_ERROR(layer.forward(tgt, Tensor<B, 3>::zeros({2, 4, 6})),
                    "nn::TransformerDecoderLayer: tgt [2, 3, 8] and memory [2, 4, 6] must be [N, L, 8] and [N, S, 8]");
  EXPECT_KILN_ERROR(layer.forward(tgt, Tensor<B, 3>::zeros({3, 4, kModel})),
                    "nn::TransformerDecoderLayer: tgt [2, 3, 8] and memory [3, 4, 8]");
  EXPECT_KILN_ERROR(layer.forward(tgt, memory, {}, {.causal = true}),
                    "nn::MultiHeadAttention: a causal mask needs as many queries as keys, got 3 and 4");
  EXPECT_KILN_ERROR(layer.forward(tgt, memory, {}, {.key_padding_mask = Tensor<B, 2>::zeros({2, 3}).gt(0.0)}),
                    "nn::MultiHeadAttention: key_padding_mask [2, 3] must be [2, 4]");
  EXPECT_EQ(layer.forward(tgt, memory, {.causal = true}).shape(), Shape({2, 3, kModel}));
}

// A bool [rows, cols] mask, true at about a third of the positions but never in column 0, so
// that every query keeps a key (key 0 is never in the future either).
template <class B> Tensor<B, 2, Bool> sparse_mask(std::int64_t rows, std::int64_t cols, std::uint32_t seed) {
  std::vector<std::uint8_t> values(static_cast<std::size_t>(rows * cols));
  for (std::size_t i = 0; i < values.size(); ++i) {
    seed = seed * 1664525u + 1013904223u;
    values[i] = static_cast<std::int64_t>(i) % cols != 0 && (seed >> 24) % 3 == 0;
  }
  return Tensor<B, 2, Bool>::from_data(TensorData::from(values, Shape{rows, cols}).convert(DType::boolean));
}

// MultiHeadAttention as it was written before scaled_dot_product_attention: projections,
// scores, each mask filled with -inf, softmax, weights @ v, out_proj.
template <class B>
Tensor<B, 3> attention_composition(const nn::MultiHeadAttention<B>& m, const Tensor<B, 3>& query,
                                   const Tensor<B, 3>& key, const nn::AttentionMasks<B>& masks) {
  const std::int64_t e = m.embed_dim(), h = m.num_heads, dh = e / h, n = query.dim(0), l = query.dim(1),
                     s = key.dim(1);
  auto project = [&](const Tensor<B, 3>& x, std::int64_t part) {
    const auto w = m.in_proj_weight->slice({ops::Slice(part * e, (part + 1) * e)});
    const auto b = (*m.in_proj_bias)->slice({ops::Slice(part * e, (part + 1) * e)});
    const Tensor<B, 3> y = x.matmul(w.transpose().template unsqueeze<3>()) + b.template unsqueeze<3>();
    return y.template reshape<4>({x.dim(0), x.dim(1), h, dh}).permute({0, 2, 1, 3});
  };
  const Tensor<B, 4> q = project(query, 0), k = project(key, 1), v = project(key, 2);
  Tensor<B, 4> scores = q.matmul(k.transpose()) * (1.0 / std::sqrt(static_cast<double>(dh)));
  const double ninf = -std::numeric_limits<double>::infinity();
  if (masks.causal) {
    const auto later = Tensor<B, 2>::ones({l, s}).triu(1).gt(0.0);
    scores = scores.mask_fill(later.template unsqueeze<4>().expand_as(scores.shape()), ninf);
  }
  if (masks.attn_mask) scores = scores.mask_fill(masks.attn_mask->template unsqueeze<4>().expand_as(scores.shape()), ninf);
  if (masks.key_padding_mask)
    scores = scores.mask_fill(masks.key_padding_mask->template reshape<4>({n, 1, 1, s}).expand_as(scores.shape()), ninf);
  const Tensor<B, 3> heads = scores.softmax(3).matmul(v).permute({0, 2, 1, 3}).template reshape<3>({n, l, e});
  return m.out_proj.forward(heads);
}

// MultiHeadAttention runs scaled_dot_product_attention (the fused kernel on the CPU): its
// output and gradients against the composition it replaced, with every mask at once, past
// the kernel's 128-row tiles, in self-attention and with L != S.
TYPED_TEST(NnTransformer, MultiHeadAttentionMatchesTheCompositionItReplaced) {
  using AD = Autodiff<TypeParam>;
  manual_seed(21);
  const std::int64_t e = 16, n = 2;
  const nn::MultiHeadAttention<AD> attn(e, 4);
  for (const std::int64_t s : {130, 200}) {
    const std::int64_t l = 130;
    SCOPED_TRACE(fmt::format("L {} S {}", l, s));
    const auto query = Tensor<AD, 3>::random({n, l, e}, Distribution::normal(0, 1)).require_grad();
    const auto key = s == l ? query : Tensor<AD, 3>::random({n, s, e}, Distribution::normal(0, 1)).require_grad();
    const nn::AttentionMasks<AD> masks{.attn_mask = sparse_mask<AD>(l, s, 3),
                                       .key_padding_mask = sparse_mask<AD>(n, s, 4),
                                       .causal = s == l};
    const auto y = attn.forward(query, key, key, masks);
    const auto expected = attention_composition(attn, query, key, masks);
    EXPECT_CLOSE(y, expected.into_data(), 1e-4, 1e-5);
    const auto r = Tensor<AD, 3>::random({n, l, e}, Distribution::normal(0, 1));
    const auto g = (y * r).sum().backward();
    const auto g_expected = (expected * r).sum().backward();
    EXPECT_CLOSE(*query.grad(g), query.grad(g_expected)->into_data(), 1e-4, 1e-5);
    EXPECT_CLOSE(*key.grad(g), key.grad(g_expected)->into_data(), 1e-4, 1e-5);
    EXPECT_CLOSE(*attn.in_proj_weight->grad(g), attn.in_proj_weight->grad(g_expected)->into_data(), 1e-4, 1e-5);
  }
}

TYPED_TEST(NnTransformer, SinusoidalEncodingAddsTheTableOfTheFormula) {
  using B = TypeParam;
  using AD = Autodiff<B>;
  const GoldenCase& c = golden("transformer", "sinusoidal");
  const nn::SinusoidalPositionalEncoding<AD> pe(6, 16);
  EXPECT_CLOSE(pe.table(5, 0, DType::f64), c["pe"], kTol, kTol);
  const auto x = c.tensor<AD, 3>("x").require_grad();
  const auto y = pe.forward(x);
  EXPECT_CLOSE(y, c["y"], kTol, kTol);
  EXPECT_CLOSE(*x.grad((y * Tensor<AD, 3>::from_data(c["r"])).sum().backward()), c["dx"], kTol, kTol);

  // An odd width, another base, an offset (incremental decoding), on the plain backend.
  const GoldenCase& odd = golden("transformer", "sinusoidal_offset_odd");
  const nn::SinusoidalPositionalEncoding<B> short_table(5, 7, 100.0);
  EXPECT_CLOSE(short_table.forward(odd.tensor<B, 3>("x"), 4), odd["y"], kTol, kTol);
  EXPECT_KILN_ERROR(short_table.forward(odd.tensor<B, 3>("x"), 5),
                    "nn::SinusoidalPositionalEncoding: positions [5, 8) are outside the table of max_len 7");
  EXPECT_KILN_ERROR(short_table.forward(Tensor<B, 3>::zeros({1, 2, 6})),
                    "nn::SinusoidalPositionalEncoding: input [1, 2, 6] must be [N, L, 5]");
  // f32 in, f32 out; the table is not state.
  EXPECT_EQ(short_table.forward(Tensor<B, 3>::zeros({1, 2, 5})).dtype(), DType::f32);
  EXPECT_EQ(nn::state_dict(pe).size(), 0u);
}

TYPED_TEST(NnTransformer, RotaryEncodingRotatesHalvesByPosition) {
  using B = TypeParam;
  using AD = Autodiff<B>;
  {
    const GoldenCase& c = golden("transformer", "rotary");
    const nn::RotaryEncoding<AD> rope(8);
    const auto x = c.tensor<AD, 4>("x").require_grad();
    const auto y = rope.forward(x);
    EXPECT_CLOSE(y, c["y"], kTol, kTol);
    EXPECT_CLOSE(*x.grad((y * Tensor<AD, 4>::from_data(c["r"])).sum().backward()), c["dx"], kTol, kTol);
  }
  {
    const GoldenCase& c = golden("transformer", "rotary_offset_base");
    const nn::RotaryEncoding<AD> rope(6, 500.0);
    const auto x = c.tensor<AD, 3>("x").require_grad();
    const auto y = rope.forward(x, 7);
    EXPECT_CLOSE(y, c["y"], kTol, kTol);
    EXPECT_CLOSE(*x.grad((y * Tensor<AD, 3>::from_data(c["r"])).sum().backward()), c["dx"], kTol, kTol);
  }
  manual_seed(9);
  const nn::RotaryEncoding<B> rope(8);
  const auto q = Tensor<B, 4>::random({1, 2, 5, 8}, Distribution::normal(0, 1), {}, DType::f64);
  const auto k = Tensor<B, 4>::random({1, 2, 5, 8}, Distribution::normal(0, 1), {}, DType::f64);
  // A rotation: lengths are kept. Scores depend on relative positions only.
  EXPECT_CLOSE(rope.forward(q).square().sum_dim(3), q.square().sum_dim(3).into_data(), 1e-12, 1e-12);
  const auto scores = rope.forward(q).matmul(rope.forward(k).transpose());
  EXPECT_CLOSE(rope.forward(q, 11).matmul(rope.forward(k, 11).transpose()), scores.into_data(), 1e-12, 1e-12);
  // Encoding positions 3 and 4 alone with offset 3 is encoding them within the sequence.
  EXPECT_CLOSE(rope.forward(q.narrow(2, 3, 2), 3), rope.forward(q).narrow(2, 3, 2).into_data(), 1e-12, 1e-12);
  EXPECT_KILN_ERROR(nn::RotaryEncoding<B>(7), "nn::RotaryEncoding: head_dim 7 must be positive and even");
  EXPECT_KILN_ERROR(rope.forward(Tensor<B, 3>::zeros({2, 5, 6})), "nn::RotaryEncoding: input [2, 5, 6] must be [..., L, 8]");
}

TYPED_TEST(NnTransformer, AnEncoderLayerLoadsTorchSavedWeightsAndMatchesTorch) {
  using B = TypeParam;
  const auto file = std::filesystem::path(KILN_GOLDEN_DIR) / "import" / "encoder_layer.pt";
  nn::TransformerEncoderLayer<B> layer(kModel, kHeads, {.dim_feedforward = kFeedForward, .dropout = 0.0});
  const nn::LoadReport report = nn::load(layer, file);  // strict
  EXPECT_TRUE(report.ok()) << report.text();
  nn::eval(layer);
  const GoldenCase& c = golden("import", "encoder_layer");
  const auto x = c.tensor<B, 3>("x");
  EXPECT_CLOSE(layer.forward(x), c["y"], 1e-5, 1e-5);
  EXPECT_CLOSE(layer.forward(x, {.key_padding_mask = c.tensor<B, 2, Bool>("padding")}), c["y_padded"], 1e-5, 1e-5);
  // A layer of another width is refused whole, with the keys at fault.
  nn::TransformerEncoderLayer<B> wider(kModel, kHeads, {.dim_feedforward = 32, .dropout = 0.0});
  EXPECT_KILN_ERROR(nn::load(wider, file), "mismatched shapes (3): linear1.weight: file [16, 8], module [32, 8]");
}

}  // namespace
