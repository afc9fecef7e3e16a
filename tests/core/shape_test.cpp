// Core: Shape (numel, strides, formatting), normalize_dim and broadcast_shapes,
// including the exact error messages users see.
#include "golden.hpp"

#include <kiln/core/shape.hpp>

#include <gtest/gtest.h>

using kiln::Shape;

TEST(Shape, NumelIsTheProductOfDims) {
  EXPECT_EQ((Shape{2, 3, 4}).numel(), 24);
  EXPECT_EQ((Shape{7}).numel(), 7);
  EXPECT_EQ(Shape().numel(), 1);  // a rank-0 shape holds one element
  EXPECT_EQ((Shape{2, 0, 3}).numel(), 0);
  EXPECT_EQ((Shape{2, 3}).rank(), 2u);
}

TEST(Shape, ContiguousStridesAreRowMajor) {
  EXPECT_EQ((Shape{2, 3, 4}).contiguous_strides().to_vector(), (std::vector<std::int64_t>{12, 4, 1}));
  EXPECT_EQ((Shape{5}).contiguous_strides().to_vector(), (std::vector<std::int64_t>{1}));
  EXPECT_EQ((Shape{3, 1, 2}).contiguous_strides().to_vector(), (std::vector<std::int64_t>{2, 2, 1}));
  EXPECT_EQ((Shape{2, 0, 3}).contiguous_strides().to_vector(), (std::vector<std::int64_t>{0, 3, 1}));
  EXPECT_TRUE(Shape().contiguous_strides().empty());
}

// A shape whose dims multiply past 2^63 - 1 is an error naming it, never a wrapped count
// (signed overflow); an empty one with huge dims still has strides (0 past the overflow).
TEST(Shape, OverflowingDimsAreAnErrorUnlessTheShapeIsEmpty) {
  constexpr std::int64_t big = (std::int64_t{1} << 32) - 1;
  try {
    (void)Shape({big, big, 3}).numel();
    FAIL() << "numel of an overflowing shape returned";
  } catch (const kiln::Error& e) {
    EXPECT_EQ(std::string(e.what()), "numel: shape [4294967295, 4294967295, 3] holds more than 2^63 - 1 elements");
  }
  EXPECT_THROW((void)Shape({3, big, big}).contiguous_strides(), kiln::Error);
  EXPECT_EQ(Shape({big, big, 0}).numel(), 0);
  EXPECT_EQ(Shape({0, big, big, big}).contiguous_strides().to_vector(), (std::vector<std::int64_t>{0, 0, big, 1}));
}

TEST(Shape, ConstructsFromVectorAndSpanAndCompares) {
  const std::vector<std::int64_t> dims{4, 5};
  EXPECT_EQ(Shape(dims), (Shape{4, 5}));
  EXPECT_EQ(Shape(std::span<const std::int64_t>(dims)), (Shape{4, 5}));
  EXPECT_NE((Shape{4, 5}), (Shape{5, 4}));
  EXPECT_NE((Shape{4, 5}), (Shape{4, 5, 1}));
}

// Extents (a Shape's dims, a view's strides) keep their values across the move between
// inline storage (up to 8) and the heap, both ways.
TEST(Extents, KeepsValuesAcrossInlineAndHeapStorage) {
  kiln::Extents e{1, 2, 3};
  for (std::int64_t v = 4; v <= 11; ++v) e.push_back(v);  // 11 values: on the heap
  ASSERT_EQ(e.size(), 11u);
  for (std::size_t i = 0; i < e.size(); ++i) EXPECT_EQ(e[i], static_cast<std::int64_t>(i + 1));
  const kiln::Extents copy = e;
  EXPECT_EQ(copy, e);
  e.erase(0);  // 10 values, still on the heap
  EXPECT_EQ(e.to_vector(), (std::vector<std::int64_t>{2, 3, 4, 5, 6, 7, 8, 9, 10, 11}));
  e.resize(5);  // back inline
  EXPECT_EQ(e.to_vector(), (std::vector<std::int64_t>{2, 3, 4, 5, 6}));
  e.resize(7, -1);
  EXPECT_EQ(e.to_vector(), (std::vector<std::int64_t>{2, 3, 4, 5, 6, -1, -1}));
  e.erase(6);
  EXPECT_EQ(e.back(), -1);
  EXPECT_EQ(e.size(), 6u);
  EXPECT_NE(e, copy);
  e.assign(9, 4);  // on the heap again, every value replaced
  EXPECT_EQ(e.to_vector(), std::vector<std::int64_t>(9, 4));
  // A shape of rank 10 copies and compares like a short one.
  const Shape big(std::vector<std::int64_t>{1, 2, 3, 4, 5, 6, 7, 8, 9, 10});
  const Shape same = big;
  EXPECT_EQ(same, big);
  EXPECT_EQ(same.contiguous_strides()[0], 3628800);
  EXPECT_EQ(same.contiguous_strides().back(), 1);
}

TEST(Shape, FormatsAsBracketedList) {
  EXPECT_EQ((Shape{2, 3}).str(), "[2, 3]");
  EXPECT_EQ(fmt::format("{}", Shape{7}), "[7]");
  EXPECT_EQ(fmt::format("{}", Shape()), "[]");
}

TEST(NormalizeDim, CountsNegativeDimsFromTheEnd) {
  EXPECT_EQ(kiln::normalize_dim("op", 0, 3), 0u);
  EXPECT_EQ(kiln::normalize_dim("op", 2, 3), 2u);
  EXPECT_EQ(kiln::normalize_dim("op", -1, 3), 2u);
  EXPECT_EQ(kiln::normalize_dim("op", -3, 3), 0u);
}

TEST(NormalizeDim, RejectsOutOfRangeDimsNamingTheOp) {
  EXPECT_KILN_ERROR(kiln::normalize_dim("sum_dim", 3, 3),
                    "sum_dim: dim 3 is out of range for a tensor of rank 3 (expected -3..2)");
  EXPECT_KILN_ERROR(kiln::normalize_dim("softmax", -4, 3),
                    "softmax: dim -4 is out of range for a tensor of rank 3 (expected -3..2)");
  EXPECT_KILN_ERROR(kiln::normalize_dim("op", 0, 0), "dim 0 is out of range for a tensor of rank 0");
}

TEST(BroadcastShapes, FollowsNumPyRules) {
  using kiln::broadcast_shapes;
  EXPECT_EQ(broadcast_shapes("add", {2, 1, 4}, {3, 1}), (Shape{2, 3, 4}));
  EXPECT_EQ(broadcast_shapes("add", {3, 1}, {2, 1, 4}), (Shape{2, 3, 4}));
  EXPECT_EQ(broadcast_shapes("add", {5, 4}, {4}), (Shape{5, 4}));
  EXPECT_EQ(broadcast_shapes("add", {5, 4}, {5, 4}), (Shape{5, 4}));
  EXPECT_EQ(broadcast_shapes("add", {1}, {}), (Shape{1}));
  EXPECT_EQ(broadcast_shapes("add", {}, {}), Shape());
  // A size-0 dim broadcasts against 1 and stays 0.
  EXPECT_EQ(broadcast_shapes("add", {0, 3}, {1, 3}), (Shape{0, 3}));
}

TEST(BroadcastShapes, ErrorNamesOpShapesAndDim) {
  EXPECT_KILN_ERROR(kiln::broadcast_shapes("add", {2, 3}, {4, 3}),
                    "add: shapes [2, 3] and [4, 3] do not broadcast (dim 0: 2 vs 4)");
  EXPECT_KILN_ERROR(kiln::broadcast_shapes("mul", {2, 3}, {2}), "mul: shapes [2, 3] and [2] do not broadcast (dim 1: 3 vs 2)");
  EXPECT_KILN_ERROR(kiln::broadcast_shapes("where", {0}, {2}), "where: shapes [0] and [2] do not broadcast");
}
