// The Vulkan backend's reductions, arg-reductions and scans against the CPU backend: every
// op over each dim of contiguous and transposed inputs, whole-tensor reductions (long ones
// take the two-pass tree), ties and NaNs, empty dims and the errors. Skipped, with the
// reason, when no Vulkan device is available.
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

class VulkanReduce : public VulkanOps {};

// Summation order differs from the CPU's (trees here, lanes there); f32 sums accumulate in
// double on both when the device has float64.
double tolerance(DType dtype) { return dtype == DType::f32 ? 1e-5 : dtype == DType::f64 ? 1e-12 : 0.0; }

std::vector<DType> numeric_dtypes() {
  std::vector<DType> out{DType::f32, DType::i32, DType::i64, DType::u8};
  if (supported(DType::f64)) out.push_back(DType::f64);
  return out;
}

std::vector<ops::ReduceOp> ops_of(DType dtype) {
  if (dtype == DType::boolean) return {ops::ReduceOp::max, ops::ReduceOp::min};
  std::vector<ops::ReduceOp> out{ops::ReduceOp::sum, ops::ReduceOp::prod, ops::ReduceOp::max, ops::ReduceOp::min};
  if (is_float(dtype)) out.push_back(ops::ReduceOp::mean);
  return out;
}

// The same data on both backends, optionally seen through a transposed view.
std::pair<Cpu::Primitive, Vulkan::Primitive> both(const TensorData& data, bool transposed) {
  const std::array<std::int64_t, 3> order{2, 0, 1};
  return transposed ? kiln::test::both(data, order) : kiln::test::both(data);
}

// Small magnitudes so products of a few dozen elements stay finite and exact enough.
TensorData small_sample(const Shape& shape, DType dtype, std::uint64_t seed) {
  if (!is_float(dtype)) return sample(shape, dtype, seed);
  std::vector<double> v(static_cast<std::size_t>(shape.numel()));
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = Distribution::uniform(0.5, 1.5).sample(seed, i);
  return TensorData::from(v, shape).convert(dtype);
}

void check_reductions(const Shape& shape, DType dtype, std::uint64_t seed, bool transposed) {
  for (ops::ReduceOp op : ops_of(dtype)) {
    // Products of the signed samples overflow floats quickly: use positive, modest values.
    const TensorData data = op == ops::ReduceOp::prod ? small_sample(shape, dtype, seed) : sample(shape, dtype, seed);
    const auto [c, g] = both(data, transposed);
    for (std::int64_t dim = 0; dim < static_cast<std::int64_t>(shape.rank()); ++dim) {
      SCOPED_TRACE(fmt::format("{} {} dim {}", ops::reduce_name(op), dtype, dim));
      EXPECT_TRUE(same(Cpu::reduce(c, op, dim), Vulkan::reduce(g, op, dim), tolerance(dtype)));
    }
    SCOPED_TRACE(fmt::format("{} {} all", ops::reduce_name(op), dtype));
    EXPECT_TRUE(same(Cpu::reduce_all(c, op), Vulkan::reduce_all(g, op), tolerance(dtype)));
  }
}

}  // namespace

TEST_F(VulkanReduce, EveryOpOverEveryDimMatchesTheCpu) {
  std::vector<DType> dtypes = numeric_dtypes();
  dtypes.push_back(DType::boolean);
  for (DType dtype : dtypes)
    for (bool transposed : {false, true}) {
      SCOPED_TRACE(transposed ? "transposed" : "contiguous");
      check_reductions(Shape{3, 5, 7}, dtype, 31, transposed);
    }
}

TEST_F(VulkanReduce, LongDimsUseTheTreeAndMatchTheCpu) {
  // Rows of 600 and 1500 (tree per output; with few outputs, split in parts and reduced twice).
  for (DType dtype : numeric_dtypes()) {
    check_reductions(Shape{2, 1500, 3}, dtype, 32, false);
    check_reductions(Shape{4, 3, 600}, dtype, 33, true);
  }
  for (bool transposed : {false, true}) check_reductions(Shape{2, 700, 3}, DType::boolean, 34, transposed);
}

TEST_F(VulkanReduce, LongReduceAllMatchesTheCpu) {
  const std::int64_t n = 100000;
  for (DType dtype : numeric_dtypes()) {
    SCOPED_TRACE(std::string(dtype_name(dtype)));
    const auto [c, g] = both(sample(Shape{n}, dtype, 35));
    for (ops::ReduceOp op : {ops::ReduceOp::sum, ops::ReduceOp::max, ops::ReduceOp::min})
      EXPECT_TRUE(same(Cpu::reduce_all(c, op), Vulkan::reduce_all(g, op), tolerance(dtype)));
    if (is_float(dtype)) {
      // Without the NaN and inf of sample(): a sum and mean that are real numbers.
      const auto [cp, gp] = both(sample(Shape{n}, dtype, 36, true));
      EXPECT_TRUE(same(Cpu::reduce_all(cp, ops::ReduceOp::sum), Vulkan::reduce_all(gp, ops::ReduceOp::sum), 1e-6));
      EXPECT_TRUE(same(Cpu::reduce_all(cp, ops::ReduceOp::mean), Vulkan::reduce_all(gp, ops::ReduceOp::mean), 1e-6));
      EXPECT_TRUE(same(Cpu::reduce_all(cp, ops::ReduceOp::max), Vulkan::reduce_all(gp, ops::ReduceOp::max), 0.0));
    }
  }
  // any/all of a long bool tensor: one true (false) element among many.
  std::vector<double> v(static_cast<std::size_t>(n), 0.0);
  v[77777] = 1.0;
  const auto [c, g] = both(TensorData::from(v, Shape{n}).convert(DType::boolean));
  EXPECT_TRUE(same(Cpu::reduce_all(c, ops::ReduceOp::max), Vulkan::reduce_all(g, ops::ReduceOp::max), 0.0));
  EXPECT_TRUE(same(Cpu::reduce_all(c, ops::ReduceOp::min), Vulkan::reduce_all(g, ops::ReduceOp::min), 0.0));
  // 2^24 + ... exceeds float's integers: an f32 sum accumulated in double stays exact.
  const auto [c1, g1] = both(TensorData::from(std::vector<double>(static_cast<std::size_t>(n), 1.0), Shape{n})
                                 .convert(DType::f32));
  EXPECT_TRUE(same(Cpu::reduce_all(c1, ops::ReduceOp::sum), Vulkan::reduce_all(g1, ops::ReduceOp::sum), 0.0));
}

TEST_F(VulkanReduce, IntegerSumsWrapLikeTheCpu) {
  const std::vector<double> big{2147483647.0, 1.0, 2147483647.0, 5.0};
  for (DType dtype : {DType::i32, DType::i64}) {
    const auto [c, g] = both(TensorData::from(big, Shape{4}).convert(dtype));
    EXPECT_TRUE(same(Cpu::reduce_all(c, ops::ReduceOp::sum), Vulkan::reduce_all(g, ops::ReduceOp::sum), 0.0));
    EXPECT_TRUE(same(Cpu::reduce_all(c, ops::ReduceOp::prod), Vulkan::reduce_all(g, ops::ReduceOp::prod), 0.0));
    EXPECT_TRUE(same(Cpu::cumulative(c, ops::CumulativeOp::sum, 0), Vulkan::cumulative(g, ops::CumulativeOp::sum, 0),
                     0.0));
  }
  const auto [c, g] = both(TensorData::from(std::vector<double>{200, 100, 3}, Shape{3}).convert(DType::u8));
  EXPECT_TRUE(same(Cpu::reduce_all(c, ops::ReduceOp::sum), Vulkan::reduce_all(g, ops::ReduceOp::sum), 0.0));
  EXPECT_TRUE(same(Cpu::cumulative(c, ops::CumulativeOp::prod, 0), Vulkan::cumulative(g, ops::CumulativeOp::prod, 0),
                   0.0));
}

TEST_F(VulkanReduce, ArgReduceMatchesTheCpu) {
  std::vector<DType> dtypes = numeric_dtypes();
  dtypes.push_back(DType::boolean);
  for (DType dtype : dtypes)
    for (const Shape& shape : {Shape{3, 5, 7}, Shape{2, 900, 3}, Shape{3, 2, 1200}})
      for (bool transposed : {false, true}) {
        const auto [c, g] = both(sample(shape, dtype, 37), transposed);
        for (ops::ArgReduceOp op : {ops::ArgReduceOp::argmax, ops::ArgReduceOp::argmin})
          for (std::int64_t dim = 0; dim < 3; ++dim) {
            SCOPED_TRACE(fmt::format("{} {} {} dim {}{}", ops::arg_reduce_name(op), dtype, shape, dim,
                                     transposed ? " transposed" : ""));
            const auto expected = Cpu::arg_reduce(c, op, dim);
            const auto got = Vulkan::arg_reduce(g, op, dim);
            EXPECT_EQ(Vulkan::dtype(got), DType::i64);
            EXPECT_TRUE(same(expected, got, 0.0));
          }
      }
}

TEST_F(VulkanReduce, ArgReduceTiesAndNaNs) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  // Rows: ties (first index wins), a NaN in the middle (it is both the max and the min),
  // two NaNs (the first), all equal.
  const std::vector<double> small{1, 3, 3, 0, 3, 0,  //
                                  1, 2, nan, 5, -1, nan,  //
                                  nan, 1, 2, nan, 0, 0,  //
                                  4, 4, 4, 4, 4, 4};
  for (DType dtype : {DType::f32, DType::i32}) {
    std::vector<double> v = small;
    if (!is_float(dtype))
      for (double& x : v) x = std::isnan(x) ? 7 : x;
    const auto [c, g] = both(TensorData::from(v, Shape{4, 6}).convert(dtype));
    for (ops::ArgReduceOp op : {ops::ArgReduceOp::argmax, ops::ArgReduceOp::argmin})
      for (std::int64_t dim : {0, 1}) {
        SCOPED_TRACE(fmt::format("{} {} dim {}", ops::arg_reduce_name(op), dtype, dim));
        EXPECT_TRUE(same(Cpu::arg_reduce(c, op, dim), Vulkan::arg_reduce(g, op, dim), 0.0));
      }
  }
  // A long row (the workgroup tree): ties far apart and NaNs after the maximum.
  std::vector<double> row(5000, 0.0);
  row[4000] = row[1234] = row[3000] = 9.0;
  row[2000] = row[4500] = -9.0;
  std::vector<double> with_nan = row;
  with_nan[4321] = nan;
  with_nan[4999] = nan;
  for (const auto& values : {row, with_nan}) {
    const auto [c, g] = both(TensorData::from(values, Shape{1, 5000}).convert(DType::f32));
    for (ops::ArgReduceOp op : {ops::ArgReduceOp::argmax, ops::ArgReduceOp::argmin})
      EXPECT_TRUE(same(Cpu::arg_reduce(c, op, 1), Vulkan::arg_reduce(g, op, 1), 0.0));
    EXPECT_TRUE(same(Cpu::reduce_all(c, ops::ReduceOp::max), Vulkan::reduce_all(g, ops::ReduceOp::max), 0.0));
    EXPECT_TRUE(same(Cpu::reduce(c, ops::ReduceOp::min, 1), Vulkan::reduce(g, ops::ReduceOp::min, 1), 0.0));
  }
}

TEST_F(VulkanReduce, CumulativeMatchesTheCpu) {
  for (DType dtype : numeric_dtypes())
    for (bool transposed : {false, true})
      for (ops::CumulativeOp op : {ops::CumulativeOp::sum, ops::CumulativeOp::prod}) {
        const TensorData data =
            op == ops::CumulativeOp::prod ? small_sample(Shape{3, 5, 7}, dtype, 38) : sample(Shape{3, 5, 7}, dtype, 38);
        const auto [c, g] = both(data, transposed);
        for (std::int64_t dim = -3; dim < 3; ++dim) {
          SCOPED_TRACE(fmt::format("{} {} dim {}{}", ops::cumulative_name(op), dtype, dim,
                                   transposed ? " transposed" : ""));
          EXPECT_TRUE(same(Cpu::cumulative(c, op, dim), Vulkan::cumulative(g, op, dim), tolerance(dtype)));
        }
      }
  // A long scan of a sliced (offset) view.
  const auto [c, g] = both(sample(Shape{2, 3000, 2}, DType::f32, 39, true));
  const std::array<ops::SliceRange, 3> ranges{{{1, 1, 1}, {0, 3000, 1}, {0, 2, 1}}};
  EXPECT_TRUE(same(Cpu::cumulative(Cpu::slice(c, ranges), ops::CumulativeOp::sum, 1),
                   Vulkan::cumulative(Vulkan::slice(g, ranges), ops::CumulativeOp::sum, 1), 1e-6));
  EXPECT_TRUE(same(Cpu::reduce(Cpu::slice(c, ranges), ops::ReduceOp::sum, 1),
                   Vulkan::reduce(Vulkan::slice(g, ranges), ops::ReduceOp::sum, 1), 1e-6));
}

TEST_F(VulkanReduce, EmptyDimsMatchTheCpu) {
  const TensorData empty_f = sample(Shape{3, 0, 2}, DType::f32, 40);
  const auto [c, g] = both(empty_f);
  for (ops::ReduceOp op : {ops::ReduceOp::sum, ops::ReduceOp::prod, ops::ReduceOp::mean}) {
    SCOPED_TRACE(std::string(ops::reduce_name(op)));
    EXPECT_TRUE(same(Cpu::reduce(c, op, 1), Vulkan::reduce(g, op, 1), 0.0));
    EXPECT_TRUE(same(Cpu::reduce(c, op, 0), Vulkan::reduce(g, op, 0), 0.0));
    EXPECT_TRUE(same(Cpu::reduce_all(c, op), Vulkan::reduce_all(g, op), 0.0));
  }
  EXPECT_TRUE(same(Cpu::cumulative(c, ops::CumulativeOp::sum, 1), Vulkan::cumulative(g, ops::CumulativeOp::sum, 1),
                   0.0));
  const auto [cb, gb] = both(sample(Shape{3, 0, 2}, DType::boolean, 41));
  for (ops::ReduceOp op : {ops::ReduceOp::max, ops::ReduceOp::min}) {
    EXPECT_TRUE(same(Cpu::reduce(cb, op, 1), Vulkan::reduce(gb, op, 1), 0.0));
    EXPECT_TRUE(same(Cpu::reduce_all(cb, op), Vulkan::reduce_all(gb, op), 0.0));
  }
}

TEST_F(VulkanReduce, BadInputIsAnError) {
  const auto g = Vulkan::from_data(sample(Shape{2, 3}, DType::f32, 42), {});
  const auto gi = Vulkan::from_data(sample(Shape{2, 3}, DType::i32, 43), {});
  const auto gb = Vulkan::from_data(sample(Shape{2, 3}, DType::boolean, 44), {});
  const auto ge = Vulkan::from_data(sample(Shape{2, 0}, DType::f32, 45), {});
  EXPECT_KILN_ERROR(Vulkan::reduce(g, ops::ReduceOp::sum, 2),
                    "sum: dim 2 is out of range for a tensor of rank 2 (expected -2..1)");
  EXPECT_KILN_ERROR(Vulkan::reduce(gi, ops::ReduceOp::mean, 0), "mean: expected a float tensor, got i32");
  EXPECT_KILN_ERROR(Vulkan::reduce_all(gb, ops::ReduceOp::sum),
                    "sum: expected a float or int tensor, got bool (bool tensors reduce with max/min: any/all)");
  EXPECT_KILN_ERROR(Vulkan::reduce(ge, ops::ReduceOp::max, 1),
                    "max: cannot reduce over dim 1 of size 0 in shape [2, 0] (max of no elements is undefined)");
  EXPECT_KILN_ERROR(Vulkan::reduce_all(ge, ops::ReduceOp::min),
                    "min: cannot reduce an empty tensor of shape [2, 0] (min of no elements is undefined)");
  EXPECT_KILN_ERROR(Vulkan::arg_reduce(ge, ops::ArgReduceOp::argmax, 1),
                    "argmax: cannot reduce over dim 1 of size 0 in shape [2, 0]");
  EXPECT_KILN_ERROR(Vulkan::arg_reduce(g, ops::ArgReduceOp::argmin, -3), "argmin: dim -3 is out of range");
  EXPECT_KILN_ERROR(Vulkan::cumulative(gb, ops::CumulativeOp::sum, 0),
                    "cumsum: expected a float or int tensor, got bool");
  // The same messages as the CPU's.
  const auto cb = Cpu::from_data(sample(Shape{2, 3}, DType::boolean, 44), {});
  EXPECT_KILN_ERROR(Cpu::cumulative(cb, ops::CumulativeOp::sum, 0), "cumsum: expected a float or int tensor, got bool");
  EXPECT_KILN_ERROR(Cpu::reduce_all(cb, ops::ReduceOp::sum),
                    "sum: expected a float or int tensor, got bool (bool tensors reduce with max/min: any/all)");
}
