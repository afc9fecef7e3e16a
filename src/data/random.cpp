#include "kiln/data/random.hpp"

#include <numeric>

namespace kiln::data {

std::vector<std::size_t> permutation(std::size_t n, std::uint64_t key) {
  std::vector<std::size_t> order(n);
  std::iota(order.begin(), order.end(), std::size_t{0});
  // Fisher-Yates from the back: position i swaps with a uniform j in [0, i], drawn with
  // 64 random bits and Lemire's multiply-shift (no modulo bias worth the name).
  for (std::size_t i = n; i-- > 1;) {
    const auto bits = philox4x32(key, i);
    const std::uint64_t r = (std::uint64_t{bits[0]} << 32) | bits[1];
    const auto j = static_cast<std::size_t>((static_cast<unsigned __int128>(r) * (i + 1)) >> 64);
    std::swap(order[i], order[j]);
  }
  return order;
}

}  // namespace kiln::data
