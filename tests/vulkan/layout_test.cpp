// The Vulkan backend's layout ops against the CPU backend: views (reshape, permute,
// expand, slice) and copies (flip, slice_assign, cat), on contiguous and strided inputs of
// several dtypes. Skipped, with the reason, when no Vulkan device is available.
#include "vulkan_test.hpp"

using namespace kiln;
using namespace kiln::test;

namespace {

class VulkanLayout : public VulkanOps {};

constexpr DType kDtypes[] = {DType::f32, DType::i64, DType::boolean};

// The same data on both backends, optionally seen through a transposed view.
std::pair<Cpu::Primitive, Vulkan::Primitive> both(const TensorData& data, bool transposed) {
  const std::array<std::int64_t, 3> order{0, 2, 1};
  return transposed ? kiln::test::both(data, order) : kiln::test::both(data);
}

}  // namespace

TEST_F(VulkanLayout, ViewsMatchTheCpu) {
  for (DType dtype : kDtypes) {
    for (bool transposed : {false, true}) {
      SCOPED_TRACE(std::string(dtype_name(dtype)) + (transposed ? " transposed" : ""));
      const auto [c, g] = both(sample(Shape{2, 3, 4}, dtype, 21), transposed);
      // A reshape of a transposed view needs a copy; of a contiguous one it is a view.
      EXPECT_TRUE(same(Cpu::reshape(c, Shape{6, 4}), Vulkan::reshape(g, Shape{6, 4}), 0.0));
      EXPECT_TRUE(same(Cpu::reshape(c, Shape{24}), Vulkan::reshape(g, Shape{24}), 0.0));
      const std::array<std::int64_t, 3> order{2, 0, 1};
      EXPECT_TRUE(same(Cpu::permute(c, order), Vulkan::permute(g, order), 0.0));
      const Shape big{5, Cpu::shape(c)[0], Cpu::shape(c)[1], Cpu::shape(c)[2]};
      EXPECT_TRUE(same(Cpu::expand(c, big), Vulkan::expand(g, big), 0.0));
      const std::array<ops::SliceRange, 3> ranges{{{1, 1, 1}, {0, 2, 2}, {1, 2, 1}}};
      EXPECT_TRUE(same(Cpu::slice(c, ranges), Vulkan::slice(g, ranges), 0.0));
    }
  }
}

TEST_F(VulkanLayout, CopiesMatchTheCpu) {
  for (DType dtype : kDtypes) {
    for (bool transposed : {false, true}) {
      SCOPED_TRACE(std::string(dtype_name(dtype)) + (transposed ? " transposed" : ""));
      const auto [c, g] = both(sample(Shape{2, 3, 4}, dtype, 22), transposed);
      const std::array<std::int64_t, 2> dims{0, 2};
      EXPECT_TRUE(same(Cpu::flip(c, dims), Vulkan::flip(g, dims), 0.0));

      const Shape s = Cpu::shape(c);
      const std::array<ops::SliceRange, 3> ranges{{{0, 2, 1}, {1, 1, 1}, {0, (s[2] + 1) / 2, 2}}};
      const TensorData value = sample(ops::sliced_shape(ranges), dtype, 23);
      EXPECT_TRUE(same(Cpu::slice_assign(c, ranges, Cpu::from_data(value, {})),
                       Vulkan::slice_assign(g, ranges, Vulkan::from_data(value, {})), 0.0));

      const auto [c2, g2] = both(sample(Shape{2, 5, s[2]}, dtype, 24));
      const auto [c3, g3] = both(sample(Shape{2, 1, s[2]}, dtype, 25));
      const std::array<Cpu::Primitive, 3> cs{c, c2, c3};
      const std::array<Vulkan::Primitive, 3> gs{g, g2, g3};
      EXPECT_TRUE(same(Cpu::cat(cs, 1), Vulkan::cat(gs, 1), 0.0));
    }
  }
}

// Writes into contiguous regions that start inside the output buffer: cat along the first
// dim and slice_assign of whole rows write at an offset through the flat path.
TEST_F(VulkanLayout, WritesAtAnOffsetLandInPlace) {
  for (DType dtype : kDtypes) {
    SCOPED_TRACE(dtype_name(dtype));
    const auto [c1, g1] = kiln::test::both(sample(Shape{2, 3}, dtype, 28));
    const auto [c2, g2] = kiln::test::both(sample(Shape{0, 3}, dtype, 29));
    const auto [c3, g3] = kiln::test::both(sample(Shape{4, 3}, dtype, 30));
    const std::array<Cpu::Primitive, 3> cs{c1, c2, c3};
    const std::array<Vulkan::Primitive, 3> gs{g1, g2, g3};
    EXPECT_TRUE(same(Cpu::cat(cs, 0), Vulkan::cat(gs, 0), 0.0));
    const std::array<ops::SliceRange, 2> rows{{{2, 2, 1}, {0, 3, 1}}};
    const auto [v, gv] = kiln::test::both(sample(Shape{2, 3}, dtype, 31));
    EXPECT_TRUE(same(Cpu::slice_assign(c3, rows, v), Vulkan::slice_assign(g3, rows, gv), 0.0));
  }
}

TEST_F(VulkanLayout, BadInputIsAnError) {
  const auto g = Vulkan::from_data(sample(Shape{2, 3}, DType::f32, 26), {});
  const std::array<ops::SliceRange, 2> outside{{{0, 2, 1}, {2, 2, 1}}};
  EXPECT_KILN_ERROR(Vulkan::slice(g, outside), "slice: range start 2 size 2 step 1 does not fit dim 1 of shape [2, 3]");
  const std::array<Vulkan::Primitive, 2> mismatched{g, Vulkan::from_data(sample(Shape{3, 3}, DType::f32, 27), {})};
  EXPECT_KILN_ERROR(Vulkan::cat(mismatched, 1), "cat: shapes [2, 3] and [3, 3] differ outside dim 1");
  EXPECT_KILN_ERROR(Vulkan::reshape(g, Shape{4}), "reshape: cannot reshape [2, 3] (6 elements) to [4]");
  const std::array<std::int64_t, 2> twice{1, 1};
  EXPECT_KILN_ERROR(Vulkan::permute(g, twice), "permute: dims [1, 1] are not a permutation");
}
