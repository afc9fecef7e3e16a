// Shared pieces of the Vulkan backend's tests: a fixture that skips (with the reason) when
// no Vulkan device works, sample data of every dtype, and comparison with the CPU backend.
#pragma once

#include "golden.hpp"

#include <kiln/vulkan/backend.hpp>

#include <cmath>
#include <limits>

namespace kiln::test {

class VulkanOps : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string reason = vulkan::unavailable_reason();
    if (!reason.empty()) GTEST_SKIP() << "no Vulkan device: " << reason;
  }
};

// Values of every sign and size, with the specials for float dtypes.
inline TensorData sample(const Shape& shape, DType dtype, std::uint64_t seed, bool positive = false) {
  std::vector<double> v(static_cast<std::size_t>(shape.numel()));
  for (std::size_t i = 0; i < v.size(); ++i) {
    const double u = Distribution::uniform(positive ? 0.1 : -3.0, 3.0).sample(seed, i);
    v[i] = is_float(dtype) ? u : std::round(u * (dtype == DType::u8 ? 20 : 7));
    if (dtype == DType::u8) v[i] = std::abs(v[i]);
    if (dtype == DType::boolean) v[i] = u > 0 ? 1 : 0;
  }
  if (is_float(dtype) && v.size() > 6 && !positive) {
    v[1] = 0.0;
    v[3] = std::numeric_limits<double>::quiet_NaN();
    v[5] = std::numeric_limits<double>::infinity();
  }
  return TensorData::from(v, shape).convert(dtype);
}

inline ::testing::AssertionResult same(const Cpu::Primitive& cpu, const Vulkan::Primitive& gpu, double tol) {
  return all_close(Vulkan::into_data(gpu), Cpu::into_data(cpu), tol, tol);
}

}  // namespace kiln::test
