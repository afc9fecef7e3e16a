// GLSL conversions between the 16-bit float storage formats (f16, bf16) and float, for
// kernels that keep f16 / bf16 tensors in uint16_t buffers (GL_EXT_shader_16bit_storage)
// and compute in float, as the CPU backend does. They are the bit-level algorithms of
// kiln::Half and kiln::BFloat16 (core/half.hpp), round-to-nearest-even, written in integer
// arithmetic so no driver rounding mode or denormal flushing changes a bit; tests/codegen
// compiles the same text as C++ and checks every f16 / bf16 value and a sweep of floats
// against core/half.hpp. Written with the rules of the helpers in codegen/glsl_helpers.hpp. The
// Vulkan build also writes the four macros' bodies to kiln_half.glsl for the kernels of
// kernels/glsl (cmake/glsl_include_from_header.cmake): keep each a "#define NAME \" line
// followed by its body.
#pragma once

#include "codegen/glsl_helpers.hpp"

#include <string_view>

namespace kiln::codegen {

// f16 bits (in the low 16 bits of h) to float: exact.
#define KILN_GLSL_F16_TO_F32                                                                 \
  float kiln_f16_to_f32(uint h) {                                                            \
    uint s = (h & 0x8000u) << 16;                                                            \
    uint e = (h >> 10) & 0x1fu;                                                              \
    uint m = h & 0x3ffu;                                                                     \
    if (e == 0x1fu) return uintBitsToFloat(s | 0x7f800000u | (m << 13));                     \
    if (e == 0u) {                                                                           \
      float v = float(m) * float(5.9604644775390625e-8);                                     \
      return s != 0u ? -v : v;                                                               \
    }                                                                                        \
    return uintBitsToFloat(s | ((e + 112u) << 23) | (m << 13));                              \
  }

// float to f16 bits, round to nearest even; overflow gives inf, NaN a quiet NaN.
#define KILN_GLSL_F32_TO_F16                                                                 \
  uint kiln_f32_to_f16(float f) {                                                            \
    uint x = floatBitsToUint(f);                                                             \
    uint s = (x >> 16) & 0x8000u;                                                            \
    uint a = x & 0x7fffffffu;                                                                \
    if (a >= 0x7f800000u) return s | 0x7c00u | (a > 0x7f800000u ? 0x200u : 0u);              \
    if (a >= 0x477ff000u) return s | 0x7c00u;                                                \
    if (a < 0x38800000u) {                                                                   \
      if (a < 0x33000000u) return s;                                                         \
      uint shift = 126u - (a >> 23);                                                         \
      uint m = (a & 0x7fffffu) | 0x800000u;                                                  \
      uint h = m >> shift;                                                                   \
      uint rest = m & ((1u << shift) - 1u);                                                  \
      uint halfway = 1u << (shift - 1u);                                                     \
      if (rest > halfway || (rest == halfway && (h & 1u) != 0u)) h = h + 1u;                 \
      return s | h;                                                                          \
    }                                                                                        \
    uint r = a - 0x38000000u;                                                                \
    r = r + 0xfffu + ((r >> 13) & 1u);                                                       \
    return s | (r >> 13);                                                                    \
  }

// bf16 bits to float: exact.
#define KILN_GLSL_BF16_TO_F32 \
  float kiln_bf16_to_f32(uint b) { return uintBitsToFloat(b << 16); }

// float to bf16 bits, round to nearest even; NaN stays a (quiet) NaN.
#define KILN_GLSL_F32_TO_BF16                                                                \
  uint kiln_f32_to_bf16(float f) {                                                           \
    uint x = floatBitsToUint(f);                                                             \
    if ((x & 0x7fffffffu) > 0x7f800000u) return (x >> 16) | 0x40u;                           \
    return (x + 0x7fffu + ((x >> 16) & 1u)) >> 16;                                           \
  }

// The GLSL text of all four, for a shader that loads or stores 16-bit floats.
inline constexpr std::string_view glsl_half_conversions =
    KILN_GLSL_SOURCE(KILN_GLSL_F16_TO_F32) "\n" KILN_GLSL_SOURCE(KILN_GLSL_F32_TO_F16) "\n" KILN_GLSL_SOURCE(
        KILN_GLSL_BF16_TO_F32) "\n" KILN_GLSL_SOURCE(KILN_GLSL_F32_TO_BF16) "\n";

}  // namespace kiln::codegen
