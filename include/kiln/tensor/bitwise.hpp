// Bitwise ops on Int tensors that are exact compositions of integer arithmetic, written once
// over every backend as free functions: bitwise_not, and shifts by 0..62 bits. In two's
// complement ~x = -x - 1, x << k = x * 2^k and x >> k = floor(x / 2^k) (Int div floors), so
// every backend and Fusion run them as they are.
#pragma once

#include "kiln/tensor/tensor.hpp"

#include <cmath>
#include <cstdint>

namespace kiln {

namespace detail {
// 2^bits for shift counts in 0..62.
template <class B, std::size_t D>
Tensor<B, D, Int> shift_factor(const char* op, const Tensor<B, D, Int>& x, const Tensor<B, D, Int>& bits) {
  if (bits.numel() > 0) {
    const auto lo = bits.min().item(), hi = bits.max().item();
    KILN_CHECK(lo >= 0 && hi <= 62, "{}: the shifts must lie in 0..62, got values from {} to {}", op, lo, hi);
  }
  return x.scalar_like(op, 2.0).pow(bits.cast(x.dtype()));
}
}  // namespace detail

// ~x (torch.bitwise_not): -x - 1 for Int, logical not for Bool.
template <class B, std::size_t D, class K> Tensor<B, D, K> bitwise_not(const Tensor<B, D, K>& x)
  requires(!std::same_as<K, Float>)
{
  if constexpr (std::same_as<K, Bool>) return x.logical_not();
  else return x.neg().sub(1.0);
}

// x << bits (torch.bitwise_left_shift): x * 2^bits, wrapping as the dtype does; bits in 0..62.
template <class B, std::size_t D>
Tensor<B, D, Int> bitwise_left_shift(const Tensor<B, D, Int>& x, std::int64_t bits) {
  KILN_CHECK(bits >= 0 && bits <= 62, "bitwise_left_shift: the shift must lie in 0..62, got {}", bits);
  return x.mul(std::ldexp(1.0, static_cast<int>(bits)));
}
// x >> bits (torch.bitwise_right_shift): arithmetic, rounding toward -inf; bits in 0..62.
template <class B, std::size_t D>
Tensor<B, D, Int> bitwise_right_shift(const Tensor<B, D, Int>& x, std::int64_t bits) {
  KILN_CHECK(bits >= 0 && bits <= 62, "bitwise_right_shift: the shift must lie in 0..62, got {}", bits);
  return x.div(std::ldexp(1.0, static_cast<int>(bits)));
}
// Shifts by a tensor of bit counts (broadcast), each in 0..62 (checked on the host).
template <class B, std::size_t D>
Tensor<B, D, Int> bitwise_left_shift(const Tensor<B, D, Int>& x, const Tensor<B, D, Int>& bits) {
  return x.mul(detail::shift_factor("bitwise_left_shift", x, bits));
}
template <class B, std::size_t D>
Tensor<B, D, Int> bitwise_right_shift(const Tensor<B, D, Int>& x, const Tensor<B, D, Int>& bits) {
  return x.div(detail::shift_factor("bitwise_right_shift", x, bits));
}

}  // namespace kiln
