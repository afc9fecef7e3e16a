// The seeded randomness of the data layer: shuffles and random transforms draw from
// Philox (kiln/core/rng.hpp) keyed by (seed, purpose, epoch) and counted by item index, so
// a result depends on those numbers only — never on thread count or load order.
#pragma once

#include "kiln/core/rng.hpp"

#include <array>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace kiln::data {

// Where an item is read: its index in the dataset that reads it and the loader's epoch.
// Random transforms draw from these, so that workers and order change nothing.
struct Sample {
  std::size_t index = 0;
  std::uint64_t epoch = 0;
};

// SplitMix64's finalizer: nearby inputs (seed 0, 1, 2...) give unrelated keys.
constexpr std::uint64_t mix64(std::uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

// The Philox key of one random stream: `purpose` keeps the streams of a shuffle, a crop
// and a flip with the same seed independent of each other.
constexpr std::uint64_t stream_key(std::uint64_t seed, std::uint64_t purpose, std::uint64_t epoch) {
  return mix64(mix64(seed ^ mix64(purpose)) ^ epoch);
}

// 128 random bits for `sample` in the stream (seed, purpose).
inline std::array<std::uint32_t, 4> sample_bits(std::uint64_t seed, std::uint64_t purpose, Sample sample) {
  return philox4x32(stream_key(seed, purpose, sample.epoch), sample.index);
}

// A uniformly random permutation of 0..n-1 (Fisher-Yates on the Philox stream `key`).
std::vector<std::size_t> permutation(std::size_t n, std::uint64_t key);

}  // namespace kiln::data
