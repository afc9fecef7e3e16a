// Bitwise ops on Int tensors as exact compositions of integer arithmetic, written once over
// every backend as free functions. In two's complement ~x = -x - 1, x << k = x * 2^k and
// x >> k = floor(x / 2^k) (Int div floors). and / or / xor split each operand into its bits
// along a new last dim (bit i = floor(x / 2^i) mod 2, the sign bit = x < 0), combine them and
// sum them back: exact for i64, i32 and u8, at the cost of one element per bit in between.
#pragma once

#include "kiln/tensor/tensor.hpp"

#include <cmath>
#include <cstdint>
#include <vector>

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

// The bits of a dtype below its sign bit (u8 has no sign bit).
struct IntLayout {
  std::int64_t value_bits;
  bool is_signed;
};
inline IntLayout int_layout(const char* op, DType dtype) {
  if (dtype == DType::i64) return {63, true};
  if (dtype == DType::i32) return {31, true};
  KILN_CHECK(dtype == DType::u8, "{}: no bit layout for dtype {}", op, dtype);
  return {8, false};
}

template <class B, std::size_t D, class Combine>
Tensor<B, D, Int> combine_bits(const char* op, const Tensor<B, D, Int>& a, const Tensor<B, D, Int>& b,
                               Combine combine) {
  KILN_CHECK(a.dtype() == b.dtype(), "{}: the dtypes {} and {} differ", op, a.dtype(), b.dtype());
  const IntLayout layout = int_layout(op, a.dtype());
  std::vector<double> weights;
  for (std::int64_t i = 0; i < layout.value_bits; ++i) weights.push_back(std::ldexp(1.0, static_cast<int>(i)));
  std::vector<std::int64_t> dims(D + 1, 1);
  dims[D] = layout.value_bits;
  const Tensor<B, D + 1, Int> powers = Tensor<B, D + 1, Int>::from_data(
      TensorData::from(weights, Shape(dims)).convert(a.dtype()), a.device());
  const auto bits = [&](const Tensor<B, D, Int>& x) { return x.unsqueeze_dim(D).div(powers).rem(2.0); };
  Tensor<B, D, Int> out = combine(bits(a), bits(b)).mul(powers).sum_dim(D).squeeze_dim(D);
  if (layout.is_signed) {
    const auto sign = [&](const Tensor<B, D, Int>& x) { return x.lt(0.0).to_int(a.dtype()); };
    out = out.add(combine(sign(a), sign(b)).mul(-std::ldexp(1.0, static_cast<int>(layout.value_bits))));
  }
  return out;
}

// `value` as a one-element tensor like x, which broadcasts against it.
template <class B, std::size_t D>
Tensor<B, D, Int> int_scalar_like(const char* op, const Tensor<B, D, Int>& x, std::int64_t value) {
  constexpr std::int64_t exact = std::int64_t{1} << 53;
  KILN_CHECK(value >= -exact && value <= exact, "{}: the integer {} is beyond 2^53; pass it as a tensor", op, value);
  return x.scalar_like(op, static_cast<double>(value));
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


// a & b, a | b, a ^ b (torch.bitwise_and / or / xor), broadcasting; logical for Bool.
template <class B, std::size_t D, class K>
Tensor<B, D, K> bitwise_and(const Tensor<B, D, K>& a, const Tensor<B, D, K>& b) requires(!std::same_as<K, Float>) {
  if constexpr (std::same_as<K, Bool>) return a.logical_and(b);
  else return detail::combine_bits("bitwise_and", a, b, [](const auto& x, const auto& y) { return x.mul(y); });
}
template <class B, std::size_t D, class K>
Tensor<B, D, K> bitwise_or(const Tensor<B, D, K>& a, const Tensor<B, D, K>& b) requires(!std::same_as<K, Float>) {
  if constexpr (std::same_as<K, Bool>) return a.logical_or(b);
  else return detail::combine_bits("bitwise_or", a, b, [](const auto& x, const auto& y) { return x.maximum(y); });
}
template <class B, std::size_t D, class K>
Tensor<B, D, K> bitwise_xor(const Tensor<B, D, K>& a, const Tensor<B, D, K>& b) requires(!std::same_as<K, Float>) {
  if constexpr (std::same_as<K, Bool>) return a.logical_xor(b);
  else
    return detail::combine_bits("bitwise_xor", a, b,
                                [](const auto& x, const auto& y) { return x.ne(y).to_int(x.dtype()); });
}
// With an integer on the right (torch.bitwise_and(x, 3)...), |value| up to 2^53.
template <class B, std::size_t D>
Tensor<B, D, Int> bitwise_and(const Tensor<B, D, Int>& a, std::int64_t value) {
  return bitwise_and(a, detail::int_scalar_like("bitwise_and", a, value));
}
template <class B, std::size_t D>
Tensor<B, D, Int> bitwise_or(const Tensor<B, D, Int>& a, std::int64_t value) {
  return bitwise_or(a, detail::int_scalar_like("bitwise_or", a, value));
}
template <class B, std::size_t D>
Tensor<B, D, Int> bitwise_xor(const Tensor<B, D, Int>& a, std::int64_t value) {
  return bitwise_xor(a, detail::int_scalar_like("bitwise_xor", a, value));
}

}  // namespace kiln
