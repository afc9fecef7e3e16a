// Shared pieces of the Vulkan backend's tests: a fixture that skips (with the reason) when
// no Vulkan device works, sample data, the dtypes the device holds, the same tensor on both
// backends, and comparison with the CPU backend (values and error messages).
#pragma once

#include "golden.hpp"

#include <kiln/vulkan/backend.hpp>

#include <array>
#include <cmath>
#include <functional>
#include <limits>
#include <span>
#include <string>
#include <utility>
#include <vector>

namespace kiln::test {

// The fixture of every Vulkan test suite: skips, with the reason, when no Vulkan device works.
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

// Values in [-1, 1), no specials: for ops that sum many products (convolution, matmul).
inline TensorData dense(const Shape& shape, DType dtype, std::uint64_t seed) {
  std::vector<double> v(static_cast<std::size_t>(shape.numel()));
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = Distribution::uniform(-1.0, 1.0).sample(seed, i);
  return TensorData::from(v, shape).convert(dtype);
}

// Every dtype the Vulkan backend stores, whether or not this device holds it.
inline constexpr std::array<DType, 8> kAllDtypes{DType::f32, DType::f64, DType::f16, DType::bf16,
                                                 DType::i32, DType::i64, DType::u8,  DType::boolean};

// Whether this device holds `dtype` (f64 needs shaderFloat64, i64 shaderInt64, u8 and bool
// 8-bit storage).
inline bool supported(DType dtype) {
  try {
    (void)Vulkan::full(Shape{1}, 0.0, dtype, {});
    return true;
  } catch (const Error&) {
    return false;
  }
}

// f32, and f64 where the device holds it.
inline std::vector<DType> float_dtypes() {
  std::vector<DType> out{DType::f32};
  if (supported(DType::f64)) out.push_back(DType::f64);
  return out;
}

// The dtypes of kAllDtypes this device holds, in that order.
inline std::vector<DType> device_dtypes() {
  std::vector<DType> out;
  for (DType d : kAllDtypes)
    if (supported(d)) out.push_back(d);
  return out;
}

// The same data on both backends.
inline std::pair<Cpu::Primitive, Vulkan::Primitive> both(const TensorData& data) {
  return {Cpu::from_data(data, {}), Vulkan::from_data(data, {})};
}

// The same data on both backends, seen through the non-contiguous view permute(order) (the
// data holds the shape before the permutation).
inline std::pair<Cpu::Primitive, Vulkan::Primitive> both(const TensorData& data, std::span<const std::int64_t> order) {
  return {Cpu::permute(Cpu::from_data(data, {}), order), Vulkan::permute(Vulkan::from_data(data, {}), order)};
}

// A CPU result uploaded to the Vulkan backend (for gradient formulas that take the forward
// output, so both backends see the same one).
inline Vulkan::Primitive to_vulkan(const Cpu::Primitive& p) { return Vulkan::from_data(Cpu::into_data(p), {}); }

// Whether the Vulkan result matches the CPU's: shape, dtype, and values within tol (relative
// and absolute); NaNs must match NaNs.
inline ::testing::AssertionResult same(const Cpu::Primitive& cpu, const Vulkan::Primitive& gpu, double tol) {
  return all_close(Vulkan::into_data(gpu), Cpu::into_data(cpu), tol, tol);
}

// The message of the kiln::Error that f throws, or "no error".
inline std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "no error";
}

// Expects the CPU call to fail and the Vulkan call to fail with the same message.
inline void expect_same_error(const std::function<void()>& on_cpu, const std::function<void()>& on_gpu) {
  const std::string expected = error_of(on_cpu), actual = error_of(on_gpu);
  EXPECT_NE(expected, "no error");
  EXPECT_EQ(actual, expected);
}

}  // namespace kiln::test
