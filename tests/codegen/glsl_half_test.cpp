// Codegen: the GLSL 16-bit float conversions of src/codegen/glsl_half.hpp, compiled as
// C++ from the very text the shaders get, against kiln::Half and kiln::BFloat16: every
// 16-bit pattern to float, and floats to 16 bits over every exponent, the rounding ties,
// the overflow and subnormal edges, infinities and NaNs.
#include "glslc.hpp"

#include "codegen/glsl_half.hpp"
#include <kiln/core/half.hpp>

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

namespace {

namespace glsl {
using uint = unsigned;
inline float uintBitsToFloat(uint bits) { return std::bit_cast<float>(bits); }
inline uint floatBitsToUint(float x) { return std::bit_cast<uint>(x); }
inline KILN_GLSL_F16_TO_F32
inline KILN_GLSL_F32_TO_F16
inline KILN_GLSL_BF16_TO_F32
inline KILN_GLSL_F32_TO_BF16
}  // namespace glsl

// Same value, or both NaN with the same bits (the conversions are bit-exact).
void expect_same_bits(float got, float want, std::uint32_t input) {
  EXPECT_EQ(std::bit_cast<std::uint32_t>(got), std::bit_cast<std::uint32_t>(want)) << "input bits " << std::hex << input;
}

// Floats with every exponent and sign, their neighbours, and the f16 / bf16 rounding ties.
std::vector<float> probe_floats() {
  std::vector<float> xs;
  for (std::uint64_t bits = 0; bits <= 0xffffffffu; bits += 4099) xs.push_back(std::bit_cast<float>(static_cast<std::uint32_t>(bits)));
  for (std::uint32_t h = 0; h < 0x10000u; ++h) {
    // Each f16's float, the ties halfway to the next f16, and one ulp either side of them.
    const float v = kiln::Half::to_float(static_cast<std::uint16_t>(h));
    const float next = kiln::Half::to_float(static_cast<std::uint16_t>(h + 1));
    if (!std::isfinite(v) || !std::isfinite(next)) continue;
    const float tie = v + (next - v) / 2;
    for (float x : {v, tie, std::nextafter(tie, 0.0f), std::nextafter(tie, 1e30f), std::nextafter(tie, -1e30f)})
      xs.push_back(x);
    // The bf16 ties: low 16 bits exactly 0x8000, and one either side.
    const std::uint32_t b = h << 16;
    for (std::uint32_t low : {0x7fffu, 0x8000u, 0x8001u}) xs.push_back(std::bit_cast<float>(b | low));
  }
  for (float x : {65504.0f, 65519.99f, 65520.0f, 1e30f, 6.1035156e-05f, 5.9604645e-08f, 2.9802322e-08f,
                  2.9802326e-08f, 1e-45f, 0.0f, -0.0f, INFINITY, -INFINITY, NAN, -NAN})
    xs.push_back(x);
  return xs;
}

TEST(CodegenGlslHalf, EverySixteenBitPatternConvertsToTheSameFloat) {
  for (std::uint32_t h = 0; h < 0x10000u; ++h) {
    expect_same_bits(glsl::kiln_f16_to_f32(h), kiln::Half::to_float(static_cast<std::uint16_t>(h)), h);
    expect_same_bits(glsl::kiln_bf16_to_f32(h), kiln::BFloat16::to_float(static_cast<std::uint16_t>(h)), h);
  }
}

TEST(CodegenGlslHalf, FloatsRoundToTheSameSixteenBits) {
  int checked = 0;
  for (const float x : probe_floats()) {
    const auto bits = std::bit_cast<std::uint32_t>(x);
    ASSERT_EQ(glsl::kiln_f32_to_f16(x), kiln::Half::from_float(x)) << "f16 of float bits " << std::hex << bits;
    ASSERT_EQ(glsl::kiln_f32_to_bf16(x), kiln::BFloat16::from_float(x)) << "bf16 of float bits " << std::hex << bits;
    ++checked;
  }
  EXPECT_GT(checked, 1'000'000);
  // A few by value, so a shared mistake in both implementations would still show.
  EXPECT_EQ(glsl::kiln_f32_to_f16(1.0f), 0x3c00u);
  EXPECT_EQ(glsl::kiln_f32_to_f16(-2.0f), 0xc000u);
  EXPECT_EQ(glsl::kiln_f32_to_f16(65520.0f), 0x7c00u);         // rounds up to inf
  EXPECT_EQ(glsl::kiln_f32_to_f16(5.9604645e-08f), 0x0001u);  // the smallest subnormal
  EXPECT_EQ(glsl::kiln_f32_to_f16(1.0f + 1.0f / 2048), 0x3c00u);  // tie to even (down)
  EXPECT_EQ(glsl::kiln_f32_to_bf16(1.0f), 0x3f80u);
  EXPECT_EQ(glsl::kiln_f32_to_bf16(std::bit_cast<float>(0x3f818000u)), 0x3f82u);  // tie to even (up)
  EXPECT_EQ(glsl::kiln_f32_to_bf16(NAN) & 0x7fc0u, 0x7fc0u);
}

#ifndef KILN_GLSLC
TEST(CodegenGlslHalf, ConversionsCompileWithGlslc) {
  GTEST_SKIP() << "glslc was not found when Kiln was configured (apt-get install glslc)";
}
#else
// The conversions in a shader that round-trips uint16_t buffers (16-bit storage only, as
// the Vulkan backend declares them), compiled with glslc for Vulkan 1.1.
TEST(CodegenGlslHalf, ConversionsCompileWithGlslc) {
  const std::string source = std::string(
      "#version 450\n"
      "#extension GL_EXT_shader_16bit_storage : require\n"
      "layout(local_size_x = 64) in;\n"
      "layout(std430, binding = 0) buffer Data { uint16_t data[]; };\n") +
      std::string(kiln::codegen::glsl_half_conversions) +
      "void main() {\n"
      "  const uint i = gl_GlobalInvocationID.x;\n"
      "  data[2 * i] = uint16_t(kiln_f32_to_f16(kiln_f16_to_f32(uint(data[2 * i])) * 2.0));\n"
      "  data[2 * i + 1] = uint16_t(kiln_f32_to_bf16(kiln_bf16_to_f32(uint(data[2 * i + 1])) * 2.0));\n"
      "}\n";
  EXPECT_TRUE(kiln::codegen::test::compiles_with_glslc(source, "glsl_half"));
}
#endif

}  // namespace
