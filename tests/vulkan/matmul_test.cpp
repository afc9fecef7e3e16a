// The Vulkan backend's matmul against the CPU backend: 2-d products of sizes that do and do
// not fill the 16x16 tiles, broadcast batch dims, transposed and broadcast (stride-0)
// operand views, f32 and f64, empty products, and the CPU's errors.
#include "vulkan_test.hpp"

using namespace kiln;
using namespace kiln::test;

namespace {

class VulkanMatmul : public VulkanOps {};

double tolerance(DType dtype) { return dtype == DType::f32 ? 1e-4 : 1e-12; }

// a @ b on both backends, each operand optionally a transposed view (of a tensor stored with
// its last two dims swapped), compared.
void check(const Shape& a_shape, const Shape& b_shape, DType dtype, bool transpose_a, bool transpose_b,
           std::uint64_t seed) {
  SCOPED_TRACE(fmt::format("{} @ {} {}{}{}", a_shape, b_shape, dtype_name(dtype), transpose_a ? " a^T" : "",
                           transpose_b ? " b^T" : ""));
  auto make = [&](const Shape& shape, bool transposed, std::uint64_t s) {
    std::vector<std::int64_t> dims = shape.to_vector();
    const std::size_t r = dims.size();
    if (!transposed) return both(dense(shape, dtype, s));
    std::swap(dims[r - 2], dims[r - 1]);
    std::vector<std::int64_t> order(r);
    for (std::size_t i = 0; i < r; ++i) order[i] = static_cast<std::int64_t>(i);
    std::swap(order[r - 2], order[r - 1]);
    return both(dense(Shape(dims), dtype, s), order);
  };
  const auto [ca, ga] = make(a_shape, transpose_a, seed);
  const auto [cb, gb] = make(b_shape, transpose_b, seed + 1);
  const auto expected = Cpu::matmul(ca, cb);
  const auto actual = Vulkan::matmul(ga, gb);
  EXPECT_EQ(Vulkan::shape(actual), Cpu::shape(expected));
  EXPECT_EQ(Vulkan::dtype(actual), dtype);
  EXPECT_TRUE(same(expected, actual, tolerance(dtype)));
}

}  // namespace

TEST_F(VulkanMatmul, TwoDimensional) {
  for (DType dtype : float_dtypes()) {
    check(Shape{1, 1}, Shape{1, 1}, dtype, false, false, 1);
    check(Shape{4, 5}, Shape{5, 3}, dtype, false, false, 2);
    check(Shape{16, 16}, Shape{16, 16}, dtype, false, false, 3);
    check(Shape{17, 33}, Shape{33, 9}, dtype, false, false, 4);
    check(Shape{45, 70}, Shape{70, 38}, dtype, false, false, 5);
    check(Shape{1, 100}, Shape{100, 1}, dtype, false, false, 6);
    check(Shape{3, 1}, Shape{1, 20}, dtype, false, false, 7);
  }
}

TEST_F(VulkanMatmul, TransposedOperands) {
  for (DType dtype : float_dtypes()) {
    for (bool ta : {false, true}) {
      for (bool tb : {false, true}) {
        check(Shape{17, 33}, Shape{33, 9}, dtype, ta, tb, 10);
        check(Shape{2, 20, 7}, Shape{2, 7, 18}, dtype, ta, tb, 11);
      }
    }
  }
}

TEST_F(VulkanMatmul, BroadcastBatchDims) {
  for (DType dtype : float_dtypes()) {
    check(Shape{3, 5, 7}, Shape{3, 7, 4}, dtype, false, false, 20);
    check(Shape{2, 1, 5, 7}, Shape{3, 7, 4}, dtype, false, false, 21);
    check(Shape{5, 7}, Shape{4, 7, 19}, dtype, false, true, 22);
    check(Shape{4, 1, 17, 3}, Shape{1, 6, 3, 17}, dtype, true, false, 23);
    check(Shape{2, 3, 1, 1, 9}, Shape{9, 2}, dtype, false, false, 24);
  }
}

TEST_F(VulkanMatmul, ExpandedAndSlicedOperands) {
  // A batch expanded with stride 0, and a matrix sliced to every other column.
  const TensorData a = dense(Shape{1, 6, 5}, DType::f32, 30);
  const TensorData b = dense(Shape{3, 5, 10}, DType::f32, 31);
  const auto ca = Cpu::expand(Cpu::from_data(a, {}), Shape{3, 6, 5});
  const auto ga = Vulkan::expand(Vulkan::from_data(a, {}), Shape{3, 6, 5});
  const std::array<ops::SliceRange, 3> every_other{{{0, 3, 1}, {0, 5, 1}, {1, 5, 2}}};
  const auto cb = Cpu::slice(Cpu::from_data(b, {}), every_other);
  const auto gb = Vulkan::slice(Vulkan::from_data(b, {}), every_other);
  EXPECT_TRUE(same(Cpu::matmul(ca, cb), Vulkan::matmul(ga, gb), 1e-4));
}

TEST_F(VulkanMatmul, LongBatch) {
  // More workgroups in y than one dispatch holds (65535): 70000 tiny matrices, one
  // workgroup each, split over two dispatches. About 9 s on lavapipe.
  check(Shape{70000, 2, 3}, Shape{3, 2}, DType::f32, false, false, 40);
}

TEST_F(VulkanMatmul, EmptyProducts) {
  for (const auto& [as, bs] : {std::pair{Shape{0, 4}, Shape{4, 3}}, std::pair{Shape{3, 0}, Shape{0, 5}},
                               std::pair{Shape{0, 2, 3}, Shape{3, 4}}}) {
    const auto [ca, ga] = both(dense(as, DType::f32, 50));
    const auto [cb, gb] = both(dense(bs, DType::f32, 51));
    const auto expected = Cpu::matmul(ca, cb);
    const auto actual = Vulkan::matmul(ga, gb);
    EXPECT_EQ(Vulkan::shape(actual), Cpu::shape(expected));
    EXPECT_TRUE(same(expected, actual, 0.0));
  }
}

TEST_F(VulkanMatmul, BadInputIsTheCpusError) {
  auto check_error = [](const TensorData& a, const TensorData& b) {
    expect_same_error([&] { (void)Cpu::matmul(Cpu::from_data(a, {}), Cpu::from_data(b, {})); },
                      [&] { (void)Vulkan::matmul(Vulkan::from_data(a, {}), Vulkan::from_data(b, {})); });
  };
  check_error(dense(Shape{2, 3}, DType::f32, 60), dense(Shape{4, 2}, DType::f32, 61));
  check_error(dense(Shape{3}, DType::f32, 60), dense(Shape{3, 2}, DType::f32, 61));
  check_error(dense(Shape{2, 3}, DType::i32, 60), dense(Shape{3, 2}, DType::i32, 61));
  check_error(dense(Shape{2, 2, 3}, DType::f32, 60), dense(Shape{3, 3, 2}, DType::f32, 61));
  check_error(dense(Shape{2, 3}, DType::f32, 60), dense(Shape{3, 2}, DType::i32, 61));
}
