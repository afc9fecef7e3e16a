// The formula that the weights of tests/golden/onnx_torchvision follow (gen_onnx.py): element
// i of a tensor is u(salt + i) * scale + add, u(i) = ((i * 2654435761 + 12345) mod 2^32) / 2^31
// - 1, computed in double and rounded to float, bit for bit as NumPy does it there.
#pragma once

#include <cstdint>
#include <vector>

namespace kiln::test {

inline std::vector<float> formula(std::int64_t count, double scale, double add, std::uint64_t salt) {
  std::vector<float> out(static_cast<std::size_t>(count));
  for (std::int64_t i = 0; i < count; ++i) {
    const std::uint64_t k = salt + static_cast<std::uint64_t>(i);
    const double u = static_cast<double>((k * 2654435761ull + 12345ull) & 0xFFFFFFFFull) / 2147483648.0 - 1.0;
    out[static_cast<std::size_t>(i)] = static_cast<float>(u * scale + add);
  }
  return out;
}

}  // namespace kiln::test
