// Core: the Philox-4x32-10 counter-based generator (known-answer vector, determinism,
// independent streams), Distribution sampling, the global stream, and Tensor::random
// drawing exactly the documented numbers.
#include "golden.hpp"

#include <kiln/tensor.hpp>

#include <gtest/gtest.h>

#include <cmath>
#include <set>

TEST(Philox, MatchesTheReferenceKnownAnswer) {
  // Known-answer vector of Philox-4x32-10 for counter 0, key 0 (Salmon et al., SC'11,
  // Random123's kat_vectors).
  const auto r = kiln::philox4x32(0, 0);
  EXPECT_EQ(r[0], 0x6627e8d5u);
  EXPECT_EQ(r[1], 0xe169c58du);
  EXPECT_EQ(r[2], 0xbc57ac4cu);
  EXPECT_EQ(r[3], 0x9b00dbd8u);
}

TEST(Philox, PinnedValuesDoNotDrift) {
  // Saved outputs: a change here changes every random tensor users have seeded.
  const auto r = kiln::philox4x32(42, 7);
  EXPECT_EQ(r[0], 0x5bbd83b1u);
  EXPECT_EQ(r[1], 0x68784c85u);
  EXPECT_EQ(r[2], 0x172067aau);
  EXPECT_EQ(r[3], 0x2e6b75b7u);
  EXPECT_DOUBLE_EQ(kiln::philox_uniform(42, 0), 0.61295986175537109);
  EXPECT_NEAR(kiln::philox_normal(42, 0), -0.97018970819193195, 1e-15);
}

TEST(Philox, IsAPureFunctionOfSeedAndCounter) {
  for (std::uint64_t i = 0; i < 100; ++i) EXPECT_EQ(kiln::philox4x32(7, i), kiln::philox4x32(7, i));
  // Different seeds, counters and high counter words all give different blocks.
  std::set<std::array<std::uint32_t, 4>> blocks;
  for (std::uint64_t seed : {0ull, 1ull, 1ull << 32}) {
    for (std::uint64_t counter : {0ull, 1ull, 2ull, 1ull << 32, (1ull << 32) + 1}) {
      blocks.insert(kiln::philox4x32(seed, counter));
    }
  }
  EXPECT_EQ(blocks.size(), 15u);
}

TEST(Philox, DifferentOffsetsGiveDifferentStreams) {
  // Two streams of 1000 draws at offsets 0 and 1000 share no value (24-bit uniforms:
  // a collision or two would be possible by chance, a shifted copy would show many).
  std::set<double> first;
  for (std::uint64_t i = 0; i < 1000; ++i) first.insert(kiln::philox_uniform(3, i));
  int shared = 0;
  for (std::uint64_t i = 1000; i < 2000; ++i) shared += first.count(kiln::philox_uniform(3, i)) ? 1 : 0;
  EXPECT_LE(shared, 3);
  EXPECT_GE(first.size(), 990u);
}

TEST(Distribution, UniformStaysInItsRangeWithTheRightMean) {
  const auto d = kiln::Distribution::uniform(-2.0, 3.0);
  double sum = 0.0, lo = INFINITY, hi = -INFINITY;
  const int n = 20000;
  for (int i = 0; i < n; ++i) {
    const double v = d.sample(11, static_cast<std::uint64_t>(i));
    lo = std::min(lo, v);
    hi = std::max(hi, v);
    sum += v;
  }
  EXPECT_GE(lo, -2.0);
  EXPECT_LT(hi, 3.0);
  EXPECT_LT(lo, -1.99);
  EXPECT_GT(hi, 2.99);
  EXPECT_NEAR(sum / n, 0.5, 0.05);  // std of the mean: 5 / sqrt(12 n) ≈ 0.01
}

TEST(Distribution, NormalHasItsMeanAndStd) {
  const auto d = kiln::Distribution::normal(1.0, 2.0);
  double sum = 0.0, sum_sq = 0.0;
  const int n = 20000;
  for (int i = 0; i < n; ++i) {
    const double v = d.sample(5, static_cast<std::uint64_t>(i));
    ASSERT_TRUE(std::isfinite(v));
    sum += v;
    sum_sq += v * v;
  }
  const double mean = sum / n;
  EXPECT_NEAR(mean, 1.0, 0.06);                                 // std of the mean ≈ 0.014
  EXPECT_NEAR(std::sqrt(sum_sq / n - mean * mean), 2.0, 0.06);  // std of the std ≈ 0.01
}

TEST(Distribution, BernoulliDrawsZerosAndOnes) {
  const auto d = kiln::Distribution::bernoulli(0.3);
  int ones = 0;
  const int n = 20000;
  for (int i = 0; i < n; ++i) {
    const double v = d.sample(9, static_cast<std::uint64_t>(i));
    ASSERT_TRUE(v == 0.0 || v == 1.0) << v;
    ones += v == 1.0;
  }
  EXPECT_NEAR(static_cast<double>(ones) / n, 0.3, 0.02);
  EXPECT_EQ(kiln::Distribution::bernoulli(0.0).sample(1, 2), 0.0);
  EXPECT_EQ(kiln::Distribution::bernoulli(1.0).sample(1, 2), 1.0);
}

TEST(RandomStream, ManualSeedRestartsTheGlobalStream) {
  kiln::manual_seed(123);
  const auto a = kiln::take_random_stream(10);
  const auto b = kiln::take_random_stream(5);
  EXPECT_EQ(a.seed, 123u);
  EXPECT_EQ(a.offset, 0u);
  EXPECT_EQ(b.offset, 10u);  // consecutive draws never overlap
  kiln::manual_seed(123);
  EXPECT_EQ(kiln::take_random_stream(1).offset, 0u);
}

TEST(RandomStream, SavedStateRestoresThePosition) {
  kiln::manual_seed(77);
  (void)kiln::take_random_stream(40);
  const kiln::RandomStream saved = kiln::random_state();
  EXPECT_EQ(saved.seed, 77u);
  EXPECT_EQ(saved.offset, 40u);
  const auto next = kiln::take_random_stream(3);
  kiln::manual_seed(5);  // anything in between
  (void)kiln::take_random_stream(9);
  kiln::set_random_state(saved);
  const auto again = kiln::take_random_stream(3);
  EXPECT_EQ(again.seed, next.seed);
  EXPECT_EQ(again.offset, next.offset);
  EXPECT_EQ(kiln::random_state().offset, 43u);
}

TEST(RandomStream, TensorRandomDrawsTheDocumentedNumbers) {
  using T = kiln::Tensor<kiln::Cpu, 2>;
  const auto d = kiln::Distribution::uniform(-1.0, 1.0);
  kiln::manual_seed(2024);
  const auto first = T::random({3, 4}, d).to_vec<double>();
  const auto second = T::random({2, 2}, d).to_vec<double>();
  for (std::size_t i = 0; i < first.size(); ++i)
    EXPECT_EQ(first[i], static_cast<double>(static_cast<float>(d.sample(2024, i)))) << i;
  for (std::size_t i = 0; i < second.size(); ++i)
    EXPECT_EQ(second[i], static_cast<double>(static_cast<float>(d.sample(2024, 12 + i)))) << i;
  kiln::manual_seed(2024);
  EXPECT_EQ(T::random({3, 4}, d).to_vec<double>(), first);  // reseeding repeats the draws
}
