// Core: f16 (Half) and bf16 (BFloat16) conversions against PyTorch (tests/golden/gen_core.py):
// round to nearest even, subnormals, overflow to inf, inf and nan; plus exhaustive
// self-consistency over all 65536 bit patterns.
#include "golden.hpp"

#include <kiln/core/half.hpp>

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>

using kiln::BFloat16;
using kiln::Half;
using kiln::test::golden;

namespace {

bool is_half_nan(std::uint16_t bits) { return (bits & 0x7c00u) == 0x7c00u && (bits & 0x3ffu) != 0; }
bool is_bfloat16_nan(std::uint16_t bits) { return (bits & 0x7f80u) == 0x7f80u && (bits & 0x7fu) != 0; }

// Compares a float by bits, so that -0 and +0 differ.
void expect_same_float(float actual, float expected, float input) {
  EXPECT_EQ(std::bit_cast<std::uint32_t>(actual), std::bit_cast<std::uint32_t>(expected))
      << "input " << input << " (bits 0x" << std::hex << std::bit_cast<std::uint32_t>(input) << "): got " << actual
      << ", torch gives " << expected;
}

template <class H> void check_float_to(const char* case_name) {
  const auto& c = golden("core", case_name);
  const auto x = c["x"].as<float>();
  const auto out = c["out"].as<float>();
  const auto bits = c["bits"].as<std::int32_t>();
  ASSERT_EQ(x.size(), out.size());
  ASSERT_GE(x.size(), 30u);
  for (std::size_t i = 0; i < x.size(); ++i) {
    const H h(x[i]);
    EXPECT_EQ(h.bits, static_cast<std::uint16_t>(bits[i])) << "input " << x[i] << " (#" << i << ")";
    expect_same_float(static_cast<float>(h), out[i], x[i]);
  }
}

template <class H> void check_bits_to_float(const char* case_name) {
  const auto& c = golden("core", case_name);
  const auto bits = c["bits"].as<std::int32_t>();
  const auto out = c["out"].as<float>();
  for (std::size_t i = 0; i < bits.size(); ++i) {
    H h;
    h.bits = static_cast<std::uint16_t>(bits[i]);
    expect_same_float(static_cast<float>(h), out[i], static_cast<float>(bits[i]));
  }
}

}  // namespace

TEST(Half, FloatToHalfMatchesTorch) { check_float_to<Half>("float_to_half"); }
TEST(BFloat16, FloatToBFloat16MatchesTorch) { check_float_to<BFloat16>("float_to_bfloat16"); }
TEST(Half, BitsToFloatMatchTorch) { check_bits_to_float<Half>("half_bits_to_float"); }
TEST(BFloat16, BitsToFloatMatchTorch) { check_bits_to_float<BFloat16>("bfloat16_bits_to_float"); }

TEST(Half, RoundsTiesToEven) {
  // 1 + 2^-11 lies halfway between 1 and the next half (1 + 2^-10): the even one is 1.
  EXPECT_EQ(Half(1.0f + 0x1p-11f).bits, 0x3c00);
  EXPECT_EQ(Half(1.0f + 3 * 0x1p-11f).bits, 0x3c02);
  // Subnormal ties: 2^-25 is halfway between 0 and the smallest subnormal.
  EXPECT_EQ(Half(0x1p-25f).bits, 0x0000);
  EXPECT_EQ(Half(3 * 0x1p-25f).bits, 0x0002);
}

TEST(Half, NanStaysNanAndKeepsItsSign) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  EXPECT_EQ(Half(nan).bits, 0x7e00);  // torch gives the same quiet NaN
  EXPECT_EQ(Half(-nan).bits, 0xfe00);
  EXPECT_TRUE(std::isnan(static_cast<float>(Half(nan))));
  // A signalling NaN whose payload sits in the low bits must not become inf.
  EXPECT_TRUE(is_half_nan(Half(std::bit_cast<float>(0x7f800001u)).bits));
  const auto& c = golden("core", "nan_bits");
  for (auto b : c["half"].as<std::int32_t>()) EXPECT_TRUE(is_half_nan(static_cast<std::uint16_t>(b)));
}

TEST(BFloat16, NanStaysNan) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  EXPECT_TRUE(is_bfloat16_nan(BFloat16(nan).bits));
  EXPECT_TRUE(is_bfloat16_nan(BFloat16(-nan).bits));
  // A payload only in the low 16 bits would round to inf without the NaN check.
  EXPECT_TRUE(is_bfloat16_nan(BFloat16(std::bit_cast<float>(0x7f800001u)).bits));
  EXPECT_TRUE(std::isnan(static_cast<float>(BFloat16(nan))));
  // torch's vectorized path writes 0xffff for NaN; any NaN pattern is acceptable.
  const auto& c = golden("core", "nan_bits");
  for (auto b : c["bfloat16"].as<std::int32_t>()) EXPECT_TRUE(is_bfloat16_nan(static_cast<std::uint16_t>(b)));
}

TEST(Half, EveryBitPatternRoundTripsThroughFloat) {
  for (std::uint32_t b = 0; b <= 0xffff; ++b) {
    const auto bits = static_cast<std::uint16_t>(b);
    const float f = Half::to_float(bits);
    if (is_half_nan(bits)) {
      EXPECT_TRUE(std::isnan(f)) << std::hex << b;
      EXPECT_TRUE(is_half_nan(Half::from_float(f))) << std::hex << b;
    } else {
      ASSERT_EQ(Half::from_float(f), bits) << std::hex << b;
    }
  }
}

TEST(BFloat16, EveryBitPatternRoundTripsThroughFloat) {
  for (std::uint32_t b = 0; b <= 0xffff; ++b) {
    const auto bits = static_cast<std::uint16_t>(b);
    const float f = BFloat16::to_float(bits);
    if (is_bfloat16_nan(bits)) {
      EXPECT_TRUE(std::isnan(f)) << std::hex << b;
      EXPECT_TRUE(is_bfloat16_nan(BFloat16::from_float(f))) << std::hex << b;
    } else {
      ASSERT_EQ(BFloat16::from_float(f), bits) << std::hex << b;
    }
  }
}

TEST(Half, ConversionIsMonotonic) {
  // Between consecutive halves, every float rounds to one of the two neighbours.
  for (std::uint16_t b = 0; b < 0x7bff; ++b) {
    const float lo = Half::to_float(b), hi = Half::to_float(static_cast<std::uint16_t>(b + 1));
    const float mid = lo + (hi - lo) * 0.25f;
    ASSERT_EQ(Half::from_float(mid), b) << std::hex << b;
    const float upper = lo + (hi - lo) * 0.75f;
    ASSERT_EQ(Half::from_float(upper), b + 1) << std::hex << b;
  }
}
