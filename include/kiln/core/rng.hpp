// A counter-based random number generator (Philox-4x32, 10 rounds). Element i of a
// random tensor drawn with (seed, offset) depends only on (seed, offset + i), so every
// backend produces the same numbers for the same seed, in any order, on any thread.
#pragma once

#include <array>
#include <atomic>
#include <cmath>
#include <cstdint>

namespace kiln {

inline std::array<std::uint32_t, 4> philox4x32(std::uint64_t key, std::uint64_t counter) {
  constexpr std::uint32_t m0 = 0xD2511F53u, m1 = 0xCD9E8D57u;
  constexpr std::uint32_t w0 = 0x9E3779B9u, w1 = 0xBB67AE85u;
  std::uint32_t c0 = static_cast<std::uint32_t>(counter), c1 = static_cast<std::uint32_t>(counter >> 32), c2 = 0,
                c3 = 0;
  std::uint32_t k0 = static_cast<std::uint32_t>(key), k1 = static_cast<std::uint32_t>(key >> 32);
  for (int round = 0; round < 10; ++round) {
    const std::uint64_t p0 = static_cast<std::uint64_t>(m0) * c0;
    const std::uint64_t p1 = static_cast<std::uint64_t>(m1) * c2;
    const std::uint32_t n0 = static_cast<std::uint32_t>(p1 >> 32) ^ c1 ^ k0;
    const std::uint32_t n2 = static_cast<std::uint32_t>(p0 >> 32) ^ c3 ^ k1;
    c1 = static_cast<std::uint32_t>(p1);
    c3 = static_cast<std::uint32_t>(p0);
    c0 = n0;
    c2 = n2;
    k0 += w0;
    k1 += w1;
  }
  return {c0, c1, c2, c3};
}

// Uniform in [0, 1) with 24 random bits (exactly representable in float).
inline double uniform01(std::uint32_t bits) { return static_cast<double>(bits >> 8) * (1.0 / 16777216.0); }

// The i-th draw of a stream: uniform [0,1) and standard normal (Box-Muller on two words).
inline double philox_uniform(std::uint64_t seed, std::uint64_t counter) {
  return uniform01(philox4x32(seed, counter)[0]);
}
inline double philox_normal(std::uint64_t seed, std::uint64_t counter) {
  const auto w = philox4x32(seed, counter);
  const double u1 = (static_cast<double>(w[0] >> 8) + 1.0) * (1.0 / 16777216.0);  // (0, 1]
  const double u2 = uniform01(w[1]);
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
}

// What a random fill draws.
struct Distribution {
  enum class Kind { uniform, normal, bernoulli } kind = Kind::uniform;
  double a = 0.0;  // uniform: low;  normal: mean; bernoulli: probability
  double b = 1.0;  // uniform: high; normal: std

  static Distribution uniform(double low, double high) { return {Kind::uniform, low, high}; }
  static Distribution normal(double mean, double std) { return {Kind::normal, mean, std}; }
  static Distribution bernoulli(double p) { return {Kind::bernoulli, p, 0.0}; }

  double sample(std::uint64_t seed, std::uint64_t counter) const {
    switch (kind) {
      case Kind::uniform: return a + (b - a) * philox_uniform(seed, counter);
      case Kind::normal: return a + b * philox_normal(seed, counter);
      case Kind::bernoulli: return philox_uniform(seed, counter) < a ? 1.0 : 0.0;
    }
    return 0.0;
  }
};

// The process-wide seed and stream position that Tensor::random draws from.
// manual_seed(s) restarts the stream, like torch.manual_seed.
struct RandomStream {
  std::uint64_t seed;
  std::uint64_t offset;
};

namespace detail {
inline std::atomic<std::uint64_t>& global_seed() {
  static std::atomic<std::uint64_t> seed{0x5eedULL};
  return seed;
}
inline std::atomic<std::uint64_t>& global_offset() {
  static std::atomic<std::uint64_t> offset{0};
  return offset;
}
}  // namespace detail

inline void manual_seed(std::uint64_t seed) {
  detail::global_seed() = seed;
  detail::global_offset() = 0;
}

// Reserves `count` draws of the global stream.
inline RandomStream take_random_stream(std::uint64_t count) {
  return {detail::global_seed().load(), detail::global_offset().fetch_add(count)};
}

// The global stream's position (torch.get_rng_state): a checkpoint saves it, and
// set_random_state puts it back so that a resumed run draws the numbers the uninterrupted
// run would have drawn. Not atomic as a pair: set it while no other thread draws.
inline RandomStream random_state() { return {detail::global_seed().load(), detail::global_offset().load()}; }
inline void set_random_state(const RandomStream& state) {
  detail::global_seed() = state.seed;
  detail::global_offset() = state.offset;
}

}  // namespace kiln
