// Scaled-dot-product attention (kiln/tensor/attention.hpp): the fused primitive where a
// backend has it (FusedAttention: the CPU's flash-attention kernels, and the decorators over
// it) against the composition of primitives written out here, values and, through
// Autodiff, gradients of q, k and v; on every backend (one without the primitive compares
// the composition with itself). Sizes that are not multiples of the kernels' tiles, L != S,
// D != Dv, several heads and batches, causal and boolean masks; then the errors.
#include "backends.hpp"
#include "expect_error.hpp"
#include "golden.hpp"

#include <kiln/nn/attention.hpp>
#include <kiln/tensor/attention.hpp>

#include <array>
#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <utility>
#include <vector>

using namespace kiln;

KILN_BACKEND_TEST_SUITE(Attention);

namespace {

static_assert(FusedAttention<Cpu> && FusedAttention<Autodiff<Cpu>> && FusedAttention<Fusion<Cpu>> &&
                  FusedAttention<Autodiff<Fusion<Cpu>>>,
              "the CPU's fused attention reaches the tensor API through both decorators");

// Which of [N, H, L, S] the mask has (the others broadcast).
enum class MaskKind { none, full, per_query_key, per_batch_key };

struct Case {
  std::int64_t n, h, l, s, d, dv;
  MaskKind mask;
  bool causal;
};

// Cases on both sides of the tile sizes (the forward pass's 256 queries x 512 keys, the
// backward's 256 x 128), L != S both ways, D != Dv.
const Case kCases[] = {
    {1, 1, 1, 1, 8, 8, MaskKind::none, false},      {2, 3, 7, 7, 16, 16, MaskKind::none, true},
    {1, 2, 65, 130, 32, 24, MaskKind::full, false}, {2, 2, 130, 65, 16, 8, MaskKind::per_query_key, true},
    {2, 1, 65, 65, 8, 16, MaskKind::per_batch_key, true}, {1, 2, 130, 130, 64, 64, MaskKind::none, false},
    {1, 1, 7, 130, 16, 16, MaskKind::full, true},
    {1, 2, 300, 300, 16, 16, MaskKind::full, true},
    // Three heads of three 128-key tiles: two threads split the backward's nine (head, key
    // tile) items 4 + 5, so each keeps one head's dQ to itself and shares the middle one.
    {1, 3, 40, 300, 16, 16, MaskKind::none, false},
    // Past the forward pass's 512-key tiles: the online softmax carries rows across tiles.
    {2, 1, 33, 600, 8, 8, MaskKind::per_batch_key, false}, {1, 1, 260, 1030, 16, 8, MaskKind::per_query_key, true},
};

// A boolean mask of the case's kind, true at about a third of the positions but never at key
// 0, so that every query sees a key (a row that sees none is NaN on both paths).
template <class B> std::optional<Tensor<B, 4, Bool>> make_mask(const Case& c, std::uint32_t seed) {
  if (c.mask == MaskKind::none) return std::nullopt;
  const Shape shape = c.mask == MaskKind::full            ? Shape{c.n, c.h, c.l, c.s}
                      : c.mask == MaskKind::per_query_key ? Shape{1, 1, c.l, c.s}
                                                          : Shape{c.n, 1, 1, c.s};
  std::vector<std::uint8_t> values(static_cast<std::size_t>(shape.numel()));
  std::uint32_t state = seed;
  for (std::size_t i = 0; i < values.size(); ++i) {
    state = state * 1664525u + 1013904223u;
    const bool first_key = static_cast<std::int64_t>(i) % c.s == 0;
    values[i] = !first_key && (state >> 24) % 3 == 0;
  }
  return Tensor<B, 4, Bool>::from_data(TensorData::from(values, shape).convert(DType::boolean));
}

// The composition, written out: scores, -inf where masked or in the future, softmax, @ v.
template <class B>
Tensor<B, 4> reference(const Tensor<B, 4>& q, const Tensor<B, 4>& k, const Tensor<B, 4>& v,
                       const std::optional<Tensor<B, 4, Bool>>& mask, bool causal, double scale) {
  Tensor<B, 4> scores = q.matmul(k.transpose()) * scale;
  const double ninf = -std::numeric_limits<double>::infinity();
  if (causal) {
    const auto future = Tensor<B, 2>::ones({q.dim(2), k.dim(2)}).triu(1).gt(0.0);
    scores = scores.mask_fill(future.template unsqueeze<4>().expand_as(scores.shape()), ninf);
  }
  if (mask) scores = scores.mask_fill(mask->expand_as(scores.shape()), ninf);
  return scores.softmax(3).matmul(v);
}

std::string describe(const Case& c) {
  return fmt::format("N {} H {} L {} S {} D {} Dv {} mask {} causal {}", c.n, c.h, c.l, c.s, c.d, c.dv,
                     static_cast<int>(c.mask), c.causal);
}

}  // namespace

TYPED_TEST(Attention, FusedMatchesTheCompositionForwardAndBackward) {
  using B = TypeParam;
  manual_seed(11);
  std::uint32_t seed = 1;
  for (const Case& c : kCases) {
    SCOPED_TRACE(describe(c));
    auto q = Tensor<B, 4>::random({c.n, c.h, c.l, c.d}, Distribution::normal(0, 1));
    auto k = Tensor<B, 4>::random({c.n, c.h, c.s, c.d}, Distribution::normal(0, 1));
    auto v = Tensor<B, 4>::random({c.n, c.h, c.s, c.dv}, Distribution::normal(0, 1));
    const auto mask = make_mask<B>(c, seed++);
    if constexpr (AutodiffBackend<B>) {
      q = q.require_grad();
      k = k.require_grad();
      v = v.require_grad();
    }
    const double scale = 1.0 / std::sqrt(static_cast<double>(c.d));
    const auto fused = functional::scaled_dot_product_attention(q, k, v, mask, {.causal = c.causal});
    const auto expected = reference(q, k, v, mask, c.causal, scale);
    ASSERT_EQ(fused.shape(), Shape({c.n, c.h, c.l, c.dv}));
    EXPECT_CLOSE(fused.into_data(), expected.into_data(), 1e-4, 1e-5);
    if constexpr (AutodiffBackend<B>) {
      const auto weights = Tensor<B, 4>::random({c.n, c.h, c.l, c.dv}, Distribution::normal(0, 1));
      const auto g_fused = (fused * weights).sum().backward();
      const auto g_expected = (expected * weights).sum().backward();
      for (const auto* x : {&q, &k, &v}) {
        const auto a = x->grad(g_fused), b = x->grad(g_expected);
        ASSERT_TRUE(a && b);
        EXPECT_CLOSE(*a, b->into_data(), 1e-4, 1e-5);
      }
    }
  }
}

// Heads cut out of [N, L, H * D] rows and permuted, as nn::MultiHeadAttention's projections
// are (the CPU's kernels read them where they lie), keys and values shared by every head
// (expanded: stride 0 over H), and a q whose rows are not contiguous (a transposed view,
// which the kernels copy): values and gradients as the composition's, and the output over
// such heads goes back to [N, L, H * Dv].
TYPED_TEST(Attention, HeadsCutOutOfRowsSharedHeadsAndTransposedViews) {
  using B = TypeParam;
  manual_seed(15);
  const std::int64_t n = 2, h = 3, l = 70, s = 140, d = 16, dv = 8;
  auto q_rows = Tensor<B, 3>::random({n, l, h * d}, Distribution::normal(0, 1));
  auto k_rows = Tensor<B, 3>::random({n, s, h * d}, Distribution::normal(0, 1));
  auto v_shared = Tensor<B, 4>::random({n, 1, s, dv}, Distribution::normal(0, 1));
  auto q_transposed = Tensor<B, 4>::random({n, h, d, l}, Distribution::normal(0, 1));
  if constexpr (AutodiffBackend<B>) {
    q_rows = q_rows.require_grad();
    k_rows = k_rows.require_grad();
    v_shared = v_shared.require_grad();
    q_transposed = q_transposed.require_grad();
  }
  const auto heads = [&](const Tensor<B, 3>& rows, std::int64_t len) {
    return rows.template reshape<4>({n, len, h, d}).permute({0, 2, 1, 3});
  };
  const double scale = 1.0 / std::sqrt(static_cast<double>(d));
  for (const bool transposed_q : {false, true}) {
    SCOPED_TRACE(transposed_q ? "q a transposed view" : "q heads cut out of rows");
    // The views, built for each of the two backward passes (each frees the graph it runs through).
    const auto query = [&] { return transposed_q ? q_transposed.transpose() : heads(q_rows, l); };
    const auto key = [&] { return heads(k_rows, s); };
    const auto value = [&] { return v_shared.expand({n, h, s, dv}); };
    const auto fused = functional::scaled_dot_product_attention(query(), key(), value(), std::nullopt, {.causal = true});
    const auto expected = reference<B>(query(), key(), value(), std::nullopt, true, scale);
    EXPECT_CLOSE(fused.into_data(), expected.into_data(), 1e-4, 1e-5);
    const auto merged = fused.permute({0, 2, 1, 3}).template reshape<3>({n, l, h * dv});
    EXPECT_CLOSE(merged.into_data(), expected.permute({0, 2, 1, 3}).template reshape<3>({n, l, h * dv}).into_data(),
                 1e-4, 1e-5);
    if constexpr (AutodiffBackend<B>) {
      // dout reaches the kernels through the same permute, from [N, L, H * Dv] weights.
      const auto weights = Tensor<B, 3>::random({n, l, h * dv}, Distribution::normal(0, 1));
      const auto g_fused = (merged * weights).sum().backward();
      const auto g_expected =
          (expected.permute({0, 2, 1, 3}).template reshape<3>({n, l, h * dv}) * weights).sum().backward();
      EXPECT_CLOSE(*k_rows.grad(g_fused), k_rows.grad(g_expected)->into_data(), 1e-4, 1e-5);
      EXPECT_CLOSE(*v_shared.grad(g_fused), v_shared.grad(g_expected)->into_data(), 1e-4, 1e-5);
      if (transposed_q) EXPECT_CLOSE(*q_transposed.grad(g_fused), q_transposed.grad(g_expected)->into_data(), 1e-4, 1e-5);
      else EXPECT_CLOSE(*q_rows.grad(g_fused), q_rows.grad(g_expected)->into_data(), 1e-4, 1e-5);
    }
  }
}

// Scores that grow from one key tile to the next by far more than the forward pass lets a
// row's weights grow before it moves the row's shift (kShiftSlack, 8): keys past 512 and
// past 1024 are scaled up, so every row's shift moves twice, recomputing its scores; a mask
// hides the first tile from some rows, whose shift starts in the second, and some of the
// last keys from others (masked again when their scores are recomputed). Values and
// gradients as the composition's.
TYPED_TEST(Attention, ScoresGrowingAcrossKeyTilesMoveTheRowsShift) {
  using B = TypeParam;
  manual_seed(16);
  const std::int64_t l = 6, s = 1100, d = 8;
  std::vector<float> key_scale(static_cast<std::size_t>(s), 1.0f);
  std::vector<std::uint8_t> hidden(static_cast<std::size_t>(l * s), 0);
  for (std::int64_t j = 0; j < s; ++j) {
    key_scale[static_cast<std::size_t>(j)] = j >= 1024 ? 9.0f : j >= 512 && j < 700 ? 5.0f : 1.0f;
    for (std::int64_t i = 0; i < l; ++i)  // queries 0 and 3 see no key of the first tile, odd ones not the last keys
      hidden[static_cast<std::size_t>(i * s + j)] = (i % 3 == 0 && j < 512) || (i % 2 == 1 && j >= 1090);
  }
  const auto scale_keys = Tensor<B, 4>::from_data(TensorData::from(key_scale, Shape{1, 1, s, 1}));
  const auto mask =
      Tensor<B, 4, Bool>::from_data(TensorData::from(hidden, Shape{1, 1, l, s}).convert(DType::boolean));
  // Queries along the first key's direction, so that the scaled keys score far above the rest.
  auto q = Tensor<B, 4>::random({1, 2, l, d}, Distribution::normal(1, 0.3));
  auto k = Tensor<B, 4>::random({1, 2, s, d}, Distribution::normal(1, 0.3)) * scale_keys;
  auto v = Tensor<B, 4>::random({1, 2, s, d}, Distribution::normal(0, 1));
  if constexpr (AutodiffBackend<B>) {
    q = q.require_grad();
    k = k.require_grad();
    v = v.require_grad();
  }
  for (const bool masked : {false, true}) {
    SCOPED_TRACE(masked);
    const auto m = masked ? std::optional(mask) : std::nullopt;
    const auto fused = functional::scaled_dot_product_attention(q, k, v, m);
    const auto expected = reference<B>(q, k, v, m, false, 1.0 / std::sqrt(static_cast<double>(d)));
    EXPECT_CLOSE(fused.into_data(), expected.into_data(), 1e-4, 1e-5);
    if constexpr (AutodiffBackend<B>) {
      const auto weights = Tensor<B, 4>::random({1, 2, l, d}, Distribution::normal(0, 1));
      const auto g_fused = (fused * weights).sum().backward();
      const auto g_expected = (expected * weights).sum().backward();
      for (const auto* x : {&q, &k, &v}) EXPECT_CLOSE(*x->grad(g_fused), x->grad(g_expected)->into_data(), 1e-4, 1e-5);
    }
  }
}

// An explicit scale, also zero and negative ones, with a mask and causal: the masked and
// future keys stay hidden (weight 0) whatever the scale's sign, forward and backward.
TYPED_TEST(Attention, AnExplicitScaleReplacesTheDefault) {
  using B = TypeParam;
  manual_seed(12);
  const Case c{1, 2, 9, 140, 8, 5, MaskKind::full, true};
  const auto mask = make_mask<B>(c, 7);
  for (const double scale : {0.7, -0.6, 0.0}) {
    SCOPED_TRACE(scale);
    for (const bool masked : {false, true}) {
      auto q = Tensor<B, 4>::random({c.n, c.h, c.l, c.d}, Distribution::normal(0, 1));
      auto k = Tensor<B, 4>::random({c.n, c.h, c.s, c.d}, Distribution::normal(0, 1));
      auto v = Tensor<B, 4>::random({c.n, c.h, c.s, c.dv}, Distribution::normal(0, 1));
      if constexpr (AutodiffBackend<B>) {
        q = q.require_grad();
        k = k.require_grad();
        v = v.require_grad();
      }
      const auto m = masked ? mask : std::nullopt;
      const auto fused = functional::scaled_dot_product_attention(q, k, v, m, {.causal = masked, .scale = scale});
      const auto expected = reference<B>(q, k, v, m, masked, scale);
      EXPECT_CLOSE(fused.into_data(), expected.into_data(), 1e-4, 1e-5);
      if constexpr (AutodiffBackend<B>) {
        const auto weights = Tensor<B, 4>::random({c.n, c.h, c.l, c.dv}, Distribution::normal(0, 1));
        const auto g_fused = (fused * weights).sum().backward();
        const auto g_expected = (expected * weights).sum().backward();
        for (const auto* x : {&q, &k, &v}) EXPECT_CLOSE(*x->grad(g_fused), x->grad(g_expected)->into_data(), 1e-4, 1e-5);
      }
    }
  }
}

TYPED_TEST(Attention, BadShapesNameTheOpAndTheShapes) {
  using B = TypeParam;
  const auto q = Tensor<B, 4>::zeros({2, 3, 5, 8});
  const auto k = Tensor<B, 4>::zeros({2, 3, 6, 8});
  const auto v = Tensor<B, 4>::zeros({2, 3, 6, 4});
  EXPECT_KILN_ERROR(functional::scaled_dot_product_attention(q, Tensor<B, 4>::zeros({2, 3, 6, 7}), v),
                    "scaled_dot_product_attention: q [2, 3, 5, 8], k [2, 3, 6, 7] and v [2, 3, 6, 4] must be");
  EXPECT_KILN_ERROR(functional::scaled_dot_product_attention(q, k, Tensor<B, 4>::zeros({2, 3, 5, 4})),
                    "scaled_dot_product_attention:", "v [2, 3, 5, 4]");
  EXPECT_KILN_ERROR(functional::scaled_dot_product_attention(Tensor<B, 4>::zeros({1, 3, 5, 8}), k, v),
                    "scaled_dot_product_attention:", "q [1, 3, 5, 8]");
  const auto wrong_mask = Tensor<B, 4>::zeros({2, 1, 5, 5}).gt(0.0);
  EXPECT_KILN_ERROR(functional::scaled_dot_product_attention(q, k, v, wrong_mask),
                    "scaled_dot_product_attention: mask [2, 1, 5, 5] must broadcast to the scores' shape [N, H, L, S] "
                    "= [2, 3, 5, 6]");
  EXPECT_KILN_ERROR(functional::scaled_dot_product_attention(q, k, v, std::nullopt, {.dropout = 1.5}),
                    "scaled_dot_product_attention: dropout must be in [0, 1], got 1.5");
}

// The CPU's kernels in particular (not in the CUDA binary, which runs the suite on Cuda alone).
#if !defined(KILN_TEST_CUDA)

// The primitive checks its own input too, naming itself, for callers below the tensor API.
TEST(CpuAttention, ThePrimitiveRejectsBadRanksAndMasks) {
  const auto q = Tensor<Cpu, 4>::zeros({1, 2, 3, 4}).primitive();
  const auto flat = Tensor<Cpu, 3>::zeros({2, 3, 4}).primitive();
  EXPECT_KILN_ERROR(Cpu::attention(flat, q, q, std::nullopt, false, 1.0),
                    "attention: q, k and v must be [N, H, L, D], [N, H, S, D] and [N, H, S, Dv], got ranks 3, 4 and 4");
  const auto float_mask = Tensor<Cpu, 4>::zeros({1, 1, 3, 3}).primitive();
  EXPECT_KILN_ERROR(Cpu::attention(q, q, q, float_mask, false, 1.0), "attention: mask must be a bool tensor");
  const auto [out, lse] = Cpu::attention(q, q, q, std::nullopt, true, 1.0);
  EXPECT_KILN_ERROR(Cpu::attention_backward(q, q, q, std::nullopt, out, lse, flat, true, 1.0),
                    "attention_backward: out [1, 2, 3, 4] (f32) and dout [2, 3, 4] (f32) must be [1, 2, 3, 4] (f32)");
}

// Over heads cut out of rows, the kernels write the output and the gradients as rows too:
// [N, L, H, D] permuted, which goes back to [N, L, H * D] as a view.
TEST(CpuAttention, OutputsOverHeadsInRowsAreLaidOutAsRows) {
  manual_seed(16);
  const auto heads = [](const Tensor<Cpu, 3>& rows) {
    return rows.reshape<4>({2, rows.dim(1), 4, 8}).permute({0, 2, 1, 3}).primitive();
  };
  const auto q = heads(Tensor<Cpu, 3>::random({2, 5, 32}, Distribution::normal(0, 1)));
  const auto kv = heads(Tensor<Cpu, 3>::random({2, 6, 32}, Distribution::normal(0, 1)));
  const auto [out, lse] = Cpu::attention(q, kv, kv, std::nullopt, false, 0.5);
  EXPECT_EQ(out.shape, Shape({2, 4, 5, 8}));
  EXPECT_EQ(out.strides, Strides({160, 8, 32, 1}));
  const auto [dq, dk, dv] = Cpu::attention_backward(q, kv, kv, std::nullopt, out, lse, out, false, 0.5);
  EXPECT_EQ(dq.strides, Strides({160, 8, 32, 1}));
  EXPECT_EQ(dk.strides, Strides({192, 8, 32, 1}));
  EXPECT_EQ(dv.strides, Strides({192, 8, 32, 1}));
  // Contiguous heads keep the contiguous layout.
  const auto flat = Tensor<Cpu, 4>::random({2, 4, 5, 8}, Distribution::normal(0, 1)).primitive();
  EXPECT_TRUE(Cpu::attention(flat, flat, flat, std::nullopt, false, 0.5).first.is_contiguous());
}

// In f64 the flash-attention kernels agree with the composition to rounding: the online
// softmax is exact algebra, not an approximation.
TEST(CpuAttention, DoublePrecisionAgreesToRounding) {
  using AD = Autodiff<Cpu>;
  manual_seed(13);
  const auto q = Tensor<AD, 4>::random({2, 2, 130, 16}, Distribution::normal(0, 1), {}, DType::f64).require_grad();
  const auto k = Tensor<AD, 4>::random({2, 2, 600, 16}, Distribution::normal(0, 1), {}, DType::f64).require_grad();
  const auto v = Tensor<AD, 4>::random({2, 2, 600, 12}, Distribution::normal(0, 1), {}, DType::f64).require_grad();
  const auto fused = functional::scaled_dot_product_attention(q, k, v);
  const auto expected = reference<AD>(q, k, v, std::nullopt, false, 0.25);
  EXPECT_CLOSE(fused.into_data(), expected.into_data(), 1e-12, 1e-12);
  const auto g_fused = (fused * fused).sum().backward();
  const auto g_expected = (expected * expected).sum().backward();
  for (const auto* x : {&q, &k, &v}) EXPECT_CLOSE(*x->grad(g_fused), x->grad(g_expected)->into_data(), 1e-10, 1e-12);
}

// The backward pass shares (head, key tile) items out between threads in blocks: a head whose
// items all fall in one block gets its dQ written in place, a head split between blocks gets
// it summed from each block's buffer. Fixed teams of 1 to 4 threads over 3 heads of 3 key
// tiles and 1 head of 9 cover both kinds (and a head split three ways); f64 against the
// composition, which checks each gradient to rounding.
TEST(CpuAttention, BackwardAgreesWhateverTheTeamSharesOut) {
  using AD = Autodiff<Cpu>;
  struct Team {  // restores the default team however the test ends
    ~Team() {
      cpu::set_num_threads(0);
      cpu::set_adaptive_threads(true);
    }
  } restore;
  cpu::set_adaptive_threads(false);
  using Sizes = std::pair<std::int64_t, std::int64_t>;  // heads, keys
  for (const auto& [heads, keys] : {Sizes{3, 300}, Sizes{1, 1100}}) {
    manual_seed(15);
    const auto input = [](const std::array<std::int64_t, 4>& shape) {
      return Tensor<AD, 4>::random(shape, Distribution::normal(0, 1), {}, DType::f64).require_grad();
    };
    const auto q = input({1, heads, 70, 8}), k = input({1, heads, keys, 8}), v = input({1, heads, keys, 4});
    const auto expected = reference<AD>(q, k, v, std::nullopt, false, 1 / std::sqrt(8.0));
    const auto g_expected = (expected * expected).sum().backward();
    for (const int threads : {1, 2, 3, 4}) {
      SCOPED_TRACE(testing::Message() << heads << " heads, " << keys << " keys, " << threads << " threads");
      cpu::set_num_threads(threads);
      ASSERT_EQ(cpu::active_threads(), threads);
      const auto fused = functional::scaled_dot_product_attention(q, k, v);
      const auto g_fused = (fused * fused).sum().backward();
      for (const auto* x : {&q, &k, &v})
        EXPECT_CLOSE(*x->grad(g_fused), x->grad(g_expected)->into_data(), 1e-10, 1e-12);
    }
  }
}

// With no keys the backward has no work items: q's gradient is zeros (an empty sum), written
// over whatever the pooled buffer held before (freed tensors of the same size full of 7s, more
// than the pass allocates, so that dq's buffer is one of them).
TEST(CpuAttention, BackwardWithNoKeysGivesZeroGradientForQ) {
  using AD = Autodiff<Cpu>;
  {
    std::vector<Tensor<Cpu, 4>> sevens;
    for (int i = 0; i < 64; ++i) sevens.push_back(Tensor<Cpu, 4>::full({1, 2, 3, 4}, 7.0));
  }
  const auto q = Tensor<AD, 4>::ones({1, 2, 3, 4}).require_grad();
  const auto k = Tensor<AD, 4>::ones({1, 2, 0, 4}).require_grad();
  const auto v = Tensor<AD, 4>::ones({1, 2, 0, 4}).require_grad();
  const auto grads = functional::scaled_dot_product_attention(q, k, v).sum().backward();
  EXPECT_CLOSE(*q.grad(grads), TensorData::from(std::vector<float>(24, 0.0f), Shape{1, 2, 3, 4}), 0.0, 0.0);
}

// f16 runs through f32 and rounds once.
TEST(CpuAttention, HalfPrecisionRunsThroughF32) {
  manual_seed(14);
  const auto q = Tensor<Cpu, 4>::random({1, 2, 33, 8}, Distribution::normal(0, 1));
  const auto k = Tensor<Cpu, 4>::random({1, 2, 40, 8}, Distribution::normal(0, 1));
  const auto v = Tensor<Cpu, 4>::random({1, 2, 40, 8}, Distribution::normal(0, 1));
  const auto half = functional::scaled_dot_product_attention(q.cast(DType::f16), k.cast(DType::f16), v.cast(DType::f16));
  EXPECT_EQ(half.dtype(), DType::f16);
  EXPECT_CLOSE(half.cast(DType::f32).into_data(), reference<Cpu>(q, k, v, std::nullopt, false, 1 / std::sqrt(8.0)).into_data(),
               1e-2, 1e-2);
}

#endif  // !KILN_TEST_CUDA
