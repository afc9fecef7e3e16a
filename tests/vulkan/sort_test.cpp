// The Vulkan backend's stable sort against the CPU backend: both directions along every dim
// of contiguous and transposed inputs, with many ties, NaNs, infinities and signed zeros,
// long lines, empty tensors and the errors. Values and indices must equal the CPU's exactly.
// Skipped, with the reason, when no Vulkan device is available.
#include "vulkan_test.hpp"

#include <fmt/format.h>

#include <array>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

using namespace kiln;
using namespace kiln::test;

namespace {

class VulkanSort : public VulkanOps {};

std::vector<DType> sort_dtypes() {
  std::vector<DType> out{DType::f32, DType::i32, DType::i64};
  for (DType d : {DType::f64, DType::u8, DType::boolean})
    if (supported(d)) out.push_back(d);
  return out;
}

// Few distinct values (many ties); floats add NaNs, infinities and both zeros.
TensorData tied(const Shape& shape, DType dtype, std::uint64_t seed) {
  std::vector<double> v(static_cast<std::size_t>(shape.numel()));
  for (std::size_t i = 0; i < v.size(); ++i) {
    const double u = Distribution::uniform(-2.5, 2.5).sample(seed, i);
    v[i] = std::round(u);
    if (dtype == DType::u8) v[i] = std::abs(v[i]);
    if (dtype == DType::boolean) v[i] = u > 0 ? 1 : 0;
    if (is_float(dtype)) {
      if (i % 7 == 3) v[i] = std::numeric_limits<double>::quiet_NaN();
      if (i % 11 == 5) v[i] = i % 2 ? std::numeric_limits<double>::infinity() : -std::numeric_limits<double>::infinity();
      if (i % 13 == 1) v[i] = -0.0;
      if (i % 13 == 2) v[i] = 0.0;
    }
  }
  return TensorData::from(v, shape).convert(dtype);
}

void check_sort(const TensorData& data, bool transposed) {
  const std::array<std::int64_t, 3> order{2, 0, 1};
  const auto [c, g] = transposed ? both(data, order) : both(data);
  for (std::int64_t dim = -1; dim < static_cast<std::int64_t>(c.shape.rank()); ++dim)
    for (bool descending : {false, true}) {
      SCOPED_TRACE(fmt::format("{} {} dim {} descending {} transposed {}", data.shape(), data.dtype(), dim,
                               descending, transposed));
      const auto [cv, ci] = Cpu::sort(c, dim, descending);
      const auto [gv, gi] = Vulkan::sort(g, dim, descending);
      EXPECT_EQ(gv.dtype, c.dtype);
      EXPECT_EQ(gi.dtype, DType::i64);
      EXPECT_TRUE(same(cv, gv, 0.0));
      EXPECT_TRUE(same(ci, gi, 0.0));
    }
}

}  // namespace

TEST_F(VulkanSort, EveryDimBothDirectionsWithTies) {
  for (DType dtype : sort_dtypes())
    for (bool transposed : {false, true}) check_sort(tied(Shape{3, 5, 4}, dtype, 7), transposed);
}

TEST_F(VulkanSort, SampleData) {
  for (DType dtype : sort_dtypes()) check_sort(sample(Shape{4, 6, 3}, dtype, 11), false);
}

TEST_F(VulkanSort, LongLines) {
  for (DType dtype : {DType::f32, DType::i32}) {
    const auto [c, g] = both(tied(Shape{2, 700}, dtype, 3));
    for (bool descending : {false, true}) {
      const auto [cv, ci] = Cpu::sort(c, 1, descending);
      const auto [gv, gi] = Vulkan::sort(g, 1, descending);
      EXPECT_TRUE(same(cv, gv, 0.0));
      EXPECT_TRUE(same(ci, gi, 0.0));
    }
  }
}

TEST_F(VulkanSort, AllNaNAndSingleElementLines) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const TensorData data = TensorData::from(std::vector<double>{nan, nan, 1.0, nan, -1.0, nan}, Shape{6});
  check_sort(TensorData::from(std::vector<double>(6, nan), Shape{1, 6, 1}).convert(DType::f32), false);
  check_sort(TensorData::from(std::vector<double>{nan, 1.0, -2.0, nan, -1.0, 0.0}, Shape{6, 1, 1})
                 .convert(DType::f32),
             false);
  const auto [cv, ci] = Cpu::sort(Cpu::from_data(data.convert(DType::f32), {}), 0, false);
  const auto [gv, gi] = Vulkan::sort(Vulkan::from_data(data.convert(DType::f32), {}), 0, false);
  EXPECT_TRUE(same(cv, gv, 0.0));
  EXPECT_TRUE(same(ci, gi, 0.0));
}

TEST_F(VulkanSort, EmptyTensor) {
  const auto g = Vulkan::full(Shape{3, 0, 2}, 0.0, DType::f32, {});
  for (std::int64_t dim = 0; dim < 3; ++dim) {
    const auto [v, i] = Vulkan::sort(g, dim, false);
    EXPECT_EQ(v.shape, (Shape{3, 0, 2}));
    EXPECT_EQ(i.shape, (Shape{3, 0, 2}));
    EXPECT_EQ(i.dtype, DType::i64);
  }
}

TEST_F(VulkanSort, ErrorsMatchTheCpu) {
  const auto [c, g] = both(sample(Shape{2, 3}, DType::f32, 1));
  for (std::int64_t dim : {2, -3, 5})
    expect_same_error([&] { Cpu::sort(c, dim, false); }, [&] { Vulkan::sort(g, dim, true); });
}
