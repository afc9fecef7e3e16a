// Storage types for 16-bit floats: IEEE half (f16) and bfloat16 (bf16).
// They convert to and from float with round-to-nearest-even; arithmetic happens in float.
#pragma once

#include <bit>
#include <cstdint>

namespace kiln {

struct Half {
  std::uint16_t bits = 0;

  Half() = default;
  explicit Half(float value) : bits(from_float(value)) {}
  explicit operator float() const { return to_float(bits); }

  static std::uint16_t from_float(float value) {
    const std::uint32_t x = std::bit_cast<std::uint32_t>(value);
    const std::uint32_t sign = (x >> 16) & 0x8000u;
    const std::uint32_t abs = x & 0x7fffffffu;
    if (abs >= 0x7f800000u)  // inf or nan (nan keeps a quiet payload bit)
      return static_cast<std::uint16_t>(sign | 0x7c00u | (abs > 0x7f800000u ? 0x200u : 0u));
    if (abs >= 0x477ff000u) return static_cast<std::uint16_t>(sign | 0x7c00u);  // overflow → inf
    if (abs < 0x38800000u) {
      // Subnormal half (or zero): shift the mantissa with its implicit bit, rounding to even.
      if (abs < 0x33000000u) return static_cast<std::uint16_t>(sign);
      const std::uint32_t exponent = abs >> 23;
      const std::uint32_t mantissa = (abs & 0x7fffffu) | 0x800000u;
      const std::uint32_t shift = 126 - exponent;  // 14..24
      std::uint32_t half = mantissa >> shift;
      const std::uint32_t rest = mantissa & ((1u << shift) - 1);
      const std::uint32_t halfway = 1u << (shift - 1);
      if (rest > halfway || (rest == halfway && (half & 1u))) ++half;
      return static_cast<std::uint16_t>(sign | half);
    }
    // Normal: rebias the exponent (127 → 15) and round 13 mantissa bits away to even.
    std::uint32_t rebiased = abs - 0x38000000u;
    rebiased += 0xfffu + ((rebiased >> 13) & 1u);
    return static_cast<std::uint16_t>(sign | (rebiased >> 13));
  }

  static float to_float(std::uint16_t h) {
    const std::uint32_t sign = static_cast<std::uint32_t>(h & 0x8000u) << 16;
    const std::uint32_t exponent = (h >> 10) & 0x1fu;
    std::uint32_t mantissa = h & 0x3ffu;
    if (exponent == 0x1f) return std::bit_cast<float>(sign | 0x7f800000u | (mantissa << 13));
    if (exponent == 0) {
      if (mantissa == 0) return std::bit_cast<float>(sign);
      // Subnormal: value = mantissa * 2^-24.
      const float value = static_cast<float>(mantissa) * 5.9604644775390625e-8f;
      return sign ? -value : value;
    }
    return std::bit_cast<float>(sign | ((exponent + 112u) << 23) | (mantissa << 13));
  }
};

struct BFloat16 {
  std::uint16_t bits = 0;

  BFloat16() = default;
  explicit BFloat16(float value) : bits(from_float(value)) {}
  explicit operator float() const { return to_float(bits); }

  static std::uint16_t from_float(float value) {
    const std::uint32_t x = std::bit_cast<std::uint32_t>(value);
    if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<std::uint16_t>((x >> 16) | 0x40u);  // quiet nan
    const std::uint32_t rounding = 0x7fffu + ((x >> 16) & 1u);
    return static_cast<std::uint16_t>((x + rounding) >> 16);
  }
  static float to_float(std::uint16_t b) { return std::bit_cast<float>(static_cast<std::uint32_t>(b) << 16); }
};

}  // namespace kiln
