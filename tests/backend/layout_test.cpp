// Conformance: layout and indexing ops against PyTorch golden values (tests/golden/gen_layout.py),
// with non-contiguous inputs, empty tensors, negative dims, Int/Bool tensors and bad input.
// Layout ops only move elements, so results must match the fixtures exactly.
#include "backends.hpp"
#include "golden.hpp"

using namespace kiln;
using kiln::ops::Slice;
using kiln::test::golden;

namespace {

using namespace kiln::test::aliases;

template <class T> ::testing::AssertionResult exact(const T& actual, const TensorData& expected) {
  return kiln::test::all_close(actual, expected, 0.0, 0.0);
}
constexpr auto all = std::nullopt;

}  // namespace

#define EXPECT_EXACT(...) EXPECT_TRUE(exact(__VA_ARGS__))

KILN_BACKEND_TEST_SUITE(Layout);

// ---- dim order and broadcasting

TYPED_TEST(Layout, PermuteMatchesTorchWithPositiveAndNegativeDims) {
  using B = TypeParam;
  const auto& c = golden("layout", "permute");
  for (DType dtype : {DType::f32, DType::f64}) {
    const auto x = c.tensor<B, 3>("x", dtype);
    EXPECT_EXACT(x.permute({2, 0, 1}), c["out"]);
    EXPECT_EXACT(x.permute({-1, -3, 1}), c["out"]);
  }
}

TYPED_TEST(Layout, PermuteRejectsRepeatedAndOutOfRangeDims) {
  using B = TypeParam;
  const auto x = Float3<B>::zeros({2, 3, 4});
  EXPECT_KILN_ERROR(x.permute({0, 0, 1}), "permute: dim 0 appears twice");
  EXPECT_KILN_ERROR(x.permute({0, 1, -4}), "permute: dim -4 is out of range");
  // The backend checks too, for callers below the Tensor API.
  EXPECT_KILN_ERROR(B::permute(x.primitive(), std::vector<std::int64_t>{1, 1, 0}),
                    "permute: dims [1, 1, 0] are not a permutation of the dims of shape [2, 3, 4]");
}

TYPED_TEST(Layout, TransposeAndSwapDims) {
  using B = TypeParam;
  const auto& c = golden("layout", "transpose");
  const auto x = c.tensor<B, 3>("x");
  EXPECT_EXACT(x.transpose(), c["last"]);
  EXPECT_EXACT(x.swap_dims(0, 2), c["outer"]);
  EXPECT_EXACT(x.swap_dims(-1, -3), c["outer"]);
  EXPECT_EXACT(x.transpose().transpose(), c["x"]);
}

TYPED_TEST(Layout, ExpandAddsLeadingDimsAndGrowsSizeOneDims) {
  using B = TypeParam;
  const auto& c = golden("layout", "expand");
  const auto x = c.tensor<B, 2>("x");
  EXPECT_EXACT(x.expand({2, 3, 4}), c["out"]);
  EXPECT_EXACT(x.expand({-1, 5}), c["same_rank"]);
  EXPECT_EXACT(x.expand_as(Shape{3, 5}), c["same_rank"]);
  EXPECT_EXACT(x.expand_as(Float2<B>::zeros({3, 5})), c["same_rank"]);
  // An expanded view feeds other ops like any tensor.
  EXPECT_EXACT(x.expand({2, 3, 4}).add(0.0), c["out"]);
}

TYPED_TEST(Layout, ExpandRejectsNonUnitDims) {
  using B = TypeParam;
  const auto x = Float2<B>::zeros({3, 2});
  EXPECT_KILN_ERROR(x.expand({3, 4}), "expand: cannot expand shape [3, 2] to [3, 4]");
  EXPECT_KILN_ERROR(x.expand({-1, 3, 2}), "expand: -1 is not allowed in the new leading dim 0");
}

TYPED_TEST(Layout, RepeatTilesLikeTorch) {
  using B = TypeParam;
  const auto& c = golden("layout", "repeat");
  const auto x = c.tensor<B, 2>("x");
  EXPECT_EXACT(x.repeat({2, 3}), c["out"]);
  EXPECT_EXACT(x.repeat({3, 1}), c["rows"]);
  EXPECT_EQ(x.repeat({0, 2}).shape(), (Shape{0, 6}));
  EXPECT_KILN_ERROR(x.repeat({-1, 1}), "repeat: negative count -1 for dim 0");
}

// ---- slicing

TYPED_TEST(Layout, SliceWithStepsNegativeIndicesAndClamping) {
  using B = TypeParam;
  const auto& c = golden("layout", "slice");
  const auto x = c.tensor<B, 3>("x");
  EXPECT_EXACT(x.slice({Slice(1, 3), Slice(all, all, 2), Slice(-3, all)}), c["steps"]);
  EXPECT_EXACT(x.slice({Slice(-1, all), Slice(1, 5, 3), Slice(-5, -1, 2)}), c["negative"]);
  EXPECT_EXACT(x.slice({2, Slice(), 4}), c["index"]);
  EXPECT_EXACT(x.slice({Slice(-10, 2), Slice(3, 100)}), c["clamped"]);
  // A slice of a slice composes.
  EXPECT_EXACT(x.slice({Slice(1, all)}).slice({Slice(0, 2), Slice(all, all, 2), Slice(-3, all)}), c["steps"]);
}

TYPED_TEST(Layout, SliceToZeroSize) {
  using B = TypeParam;
  const auto& c = golden("layout", "slice");
  const auto x = c.tensor<B, 3>("x");
  const auto empty = x.slice({Slice(), Slice(5, all)});
  EXPECT_EXACT(empty, c["empty"]);
  EXPECT_EQ(empty.shape(), (Shape{4, 0, 6}));
  EXPECT_EQ(x.slice({Slice(3, 1)}).shape(), (Shape{0, 5, 6}));
  EXPECT_EQ(empty.add(1.0).numel(), 0);
}

TYPED_TEST(Layout, SliceRejectsBadSteps) {
  using B = TypeParam;
  const auto x = Float2<B>::zeros({3, 4});
  EXPECT_KILN_ERROR(x.slice({Slice(all, all, 0)}), "slice: slice step must be positive, got 0 on dim 0");
  EXPECT_KILN_ERROR(x.slice({Slice(), Slice(), Slice()}), "slice: 3 slices given for a tensor of shape [3, 4]");
}

TYPED_TEST(Layout, SliceAssignWritesTheRegionOfACopy) {
  using B = TypeParam;
  const auto& c = golden("layout", "slice_assign");
  for (DType dtype : {DType::f32, DType::f64}) {
    const auto x = c.tensor<B, 2>("x", dtype);
    const auto value = c.tensor<B, 2>("value", dtype);
    EXPECT_EXACT(x.slice_assign({Slice(1, 3), Slice(all, all, 2)}, value), c["out"]);
    EXPECT_EXACT(x, c["x"]);  // the input is unchanged
    // A transposed value and a transposed target.
    const auto vt = value.transpose().add(0.0).transpose();
    EXPECT_EXACT(x.slice_assign({Slice(1, 3), Slice(all, all, 2)}, vt), c["out"]);
    const auto out_t = x.transpose().slice_assign({Slice(all, all, 2), Slice(1, 3)}, value.transpose());
    EXPECT_EXACT(out_t.transpose(), c["out"]);
  }
  // An empty region leaves the tensor as it was.
  const auto x = c.tensor<B, 2>("x");
  EXPECT_EXACT(x.slice_assign({Slice(2, 2)}, Float2<B>::zeros({0, 5})), c["x"]);
}

TYPED_TEST(Layout, SliceAssignRejectsAValueOfTheWrongShape) {
  using B = TypeParam;
  const auto x = Float2<B>::zeros({4, 5});
  EXPECT_KILN_ERROR(x.slice_assign({Slice(1, 3), Slice(all, all, 2)}, Float2<B>::zeros({3, 3})),
                    "slice_assign: the value has shape [3, 3], the region has shape [2, 3]");
  // The backend checks too, for callers below the Tensor API.
  EXPECT_KILN_ERROR(B::slice_assign(x.primitive(), std::vector<ops::SliceRange>{{0, 2, 1}, {0, 5, 1}},
                                    Float2<B>::zeros({2, 4}).primitive()),
                    "slice_assign: the value has shape [2, 4]");
  EXPECT_KILN_ERROR(B::slice_assign(x.primitive(), std::vector<ops::SliceRange>{{0, 2, 1}, {0, 5, 1}},
                                    Int2<B>::zeros({2, 5}).primitive()),
                    "slice_assign: the value is i64, the tensor is f32");
}

TYPED_TEST(Layout, NarrowWithPositiveAndNegativeStart) {
  using B = TypeParam;
  const auto& c = golden("layout", "narrow");
  const auto x = c.tensor<B, 2>("x");
  EXPECT_EXACT(x.narrow(0, 2, 5), c["out"]);
  EXPECT_EXACT(x.narrow(0, -3, 2), c["negative"]);
  EXPECT_EXACT(x.narrow(-1, 1, 2), c["cols"]);
  EXPECT_KILN_ERROR(x.narrow(0, 8, 5), "narrow: start 8 length 5 does not fit dim 0 of shape [10, 3]");
}

TYPED_TEST(Layout, ChunkAndSplitLikeTorch) {
  using B = TypeParam;
  const auto& c = golden("layout", "chunk");
  const auto x = c.tensor<B, 2>("x");
  const auto chunks = x.chunk(4, 0);
  ASSERT_EQ(chunks.size(), 4u);
  for (std::size_t i = 0; i < chunks.size(); ++i) EXPECT_EXACT(chunks[i], c["c" + std::to_string(i)]);

  const auto& s = golden("layout", "split");
  const auto pieces = x.split(4, 0);
  ASSERT_EQ(pieces.size(), 3u);
  for (std::size_t i = 0; i < pieces.size(); ++i) EXPECT_EXACT(pieces[i], s["s" + std::to_string(i)]);
  const auto sized = x.split_sizes({2, 5, 3}, -2);
  ASSERT_EQ(sized.size(), 3u);
  for (std::size_t i = 0; i < sized.size(); ++i) EXPECT_EXACT(sized[i], s["z" + std::to_string(i)]);
}

TYPED_TEST(Layout, SplitOfAnEmptyDimAndBadSizes) {
  using B = TypeParam;
  const auto x = Float2<B>::zeros({0, 3});
  EXPECT_EQ(x.split(2, 0).size(), 1u);      // torch.split gives one empty piece
  EXPECT_EQ(x.chunk(3, 0).size(), 3u);      // torch.chunk gives `chunks` empty pieces
  const auto y = Float2<B>::zeros({10, 3});
  EXPECT_KILN_ERROR(y.split_sizes({2, 5}, 0), "split_sizes: sizes sum to 7, dim 0 of shape [10, 3] has 10");
  EXPECT_KILN_ERROR(y.split(0, 0), "split: size must be positive, got 0");
  EXPECT_KILN_ERROR(y.chunk(0, 0), "chunk: the number of chunks must be positive, got 0");
}

// ---- cat and stack

TYPED_TEST(Layout, CatAlongRowsWithAnEmptyPiece) {
  using B = TypeParam;
  const auto& c = golden("layout", "cat_rows");
  for (DType dtype : {DType::f32, DType::f64}) {
    const auto a = c.tensor<B, 2>("a", dtype), b = c.tensor<B, 2>("b", dtype), e = c.tensor<B, 2>("c", dtype);
    EXPECT_EXACT(Float2<B>::cat({a, e, b}, 0), c["out"]);
    EXPECT_EXACT(cat(std::vector{a, e, b}, -2), c["out"]);
  }
}

TYPED_TEST(Layout, CatAlongLastAndMiddleDims) {
  using B = TypeParam;
  const auto& c = golden("layout", "cat_last");
  const auto a = c.tensor<B, 2>("a"), b = c.tensor<B, 2>("b");
  EXPECT_EXACT(Float2<B>::cat({a, b, a}, -1), c["out"]);
  EXPECT_EXACT(Float2<B>::cat({a, b, a}, 1), c["out"]);

  const auto& m = golden("layout", "cat_middle");
  const auto k = m.tensor<B, 3>("a");
  // The middle piece is a strided view.
  EXPECT_EXACT(Float3<B>::cat({k, k.slice({Slice(), Slice(0, 1)}), k}, 1), m["out"]);
}

TYPED_TEST(Layout, CatOfATransposedView) {
  using B = TypeParam;
  const auto& c = golden("layout", "cat_transposed");
  const auto a = c.tensor<B, 2>("a"), b = c.tensor<B, 2>("b");
  EXPECT_EXACT(Float2<B>::cat({a.transpose(), b}, 1), c["out"]);
  // A broadcast view (stride 0) as a piece.
  const auto column = Float2<B>::from({{1}, {2}}).expand({2, 2});
  EXPECT_EQ(Float2<B>::cat({column, Float2<B>::from({{3}, {4}})}, 1).to_vec(), (std::vector<double>{1, 1, 3, 2, 2, 4}));
}

TYPED_TEST(Layout, CatRejectsMismatchedShapesAndDtypes) {
  using B = TypeParam;
  const auto a = Float2<B>::zeros({2, 3});
  const auto b = Float2<B>::zeros({4, 2});
  EXPECT_KILN_ERROR(Float2<B>::cat({a, b}, 0), "cat: shapes [2, 3] and [4, 2] differ outside dim 0");
  EXPECT_KILN_ERROR(Float2<B>::cat({a, a.cast(DType::f64)}, 0), "cat: dtypes f32 and f64 differ");
  EXPECT_KILN_ERROR(Float2<B>::cat({}, 0), "cat: no tensors given");
  EXPECT_KILN_ERROR(Float2<B>::cat({a}, 2), "cat: dim 2 is out of range");
  // The backend checks too.
  const std::vector<typename B::Primitive> prims{a.primitive(), b.primitive()};
  EXPECT_KILN_ERROR(provided::cat<B>(prims, 0), "cat: shapes [2, 3] and [4, 2] differ outside dim 0");
}

TYPED_TEST(Layout, StackAlongNewFirstMiddleAndLastDims) {
  using B = TypeParam;
  const auto& c = golden("layout", "stack");
  const auto a = c.tensor<B, 2>("a"), b = c.tensor<B, 2>("b");
  EXPECT_EXACT(stack(std::vector{a, b, a}, 0), c["first"]);
  EXPECT_EXACT(stack(std::vector{a, b}, -1), c["last"]);
  EXPECT_EXACT(stack(std::vector{a, b}, 2), c["last"]);
  EXPECT_EXACT(stack(std::vector{a, b}, 1), c["middle"]);
  EXPECT_KILN_ERROR(stack(std::vector{a, Float2<B>::zeros({3, 2})}, 0), "stack: shapes [2, 3] and [3, 2] differ");
}

// ---- reordering

TYPED_TEST(Layout, FlipOuterLastAndTransposedDims) {
  using B = TypeParam;
  const auto& c = golden("layout", "flip");
  for (DType dtype : {DType::f32, DType::f64}) {
    const auto x = c.tensor<B, 3>("x", dtype);
    EXPECT_EXACT(x.flip({0, 2}), c["outer"]);
    EXPECT_EXACT(x.flip({-1}), c["last"]);
    EXPECT_EXACT(x.swap_dims(0, 2).flip({1}), c["transposed"]);
    EXPECT_EXACT(x.flip({}), c["x"]);
    EXPECT_EXACT(x.flip({0, 2}).flip({2, 0}), c["x"]);
  }
  EXPECT_EQ(Float2<B>::zeros({0, 3}).flip({0, 1}).shape(), (Shape{0, 3}));
}

TYPED_TEST(Layout, FlipRejectsRepeatedAndOutOfRangeDims) {
  using B = TypeParam;
  const auto x = Float2<B>::zeros({2, 3});
  EXPECT_KILN_ERROR(x.flip({0, -2}), "flip: dim 0 appears twice");
  EXPECT_KILN_ERROR(x.flip({2}), "flip: dim 2 is out of range for a tensor of rank 2");
}

TYPED_TEST(Layout, RollWithPositiveNegativeAndWrappingShifts) {
  using B = TypeParam;
  const auto& c = golden("layout", "roll");
  const auto x = c.tensor<B, 2>("x");
  EXPECT_EXACT(x.roll(1, 1), c["right"]);
  EXPECT_EXACT(x.roll(-1, 0), c["left"]);
  EXPECT_EXACT(x.roll(5, 1), c["wrap"]);
  EXPECT_EXACT(x.roll(2, -1), c["neg_dim"]);
  EXPECT_EXACT(x.roll(8, 1), c["x"]);
  EXPECT_EXACT(x.roll(-6, 1), c["neg_dim"]);
}

// ---- gather and scatter

TYPED_TEST(Layout, GatherAlongEachDim) {
  using B = TypeParam;
  const auto& c = golden("layout", "gather");
  for (DType dtype : {DType::f32, DType::f64}) {
    const auto x = c.tensor<B, 2>("x", dtype);
    EXPECT_EXACT(x.gather(0, c.tensor<B, 2, Int>("index0")), c["out0"]);
    EXPECT_EXACT(x.gather(1, c.tensor<B, 2, Int>("index1")), c["out1"]);
    EXPECT_EXACT(x.gather(-1, c.tensor<B, 2, Int>("index1", DType::i32)), c["out1"]);
    // The index may be smaller than the input on the other dims.
    EXPECT_EXACT(x.gather(1, c.tensor<B, 2, Int>("index_small")), c["out_small"]);
  }
  const auto& g = golden("layout", "gather3");
  EXPECT_EXACT(g.tensor<B, 3>("x").gather(1, g.tensor<B, 3, Int>("index")), g["out"]);
}

TYPED_TEST(Layout, GatherFromATransposedViewWithATransposedIndex) {
  using B = TypeParam;
  const auto& c = golden("layout", "gather");
  const auto x = c.tensor<B, 2>("x");
  const auto index = c.tensor<B, 2, Int>("index0").transpose();
  EXPECT_EXACT(x.transpose().gather(1, index), c["transposed"]);
}

TYPED_TEST(Layout, GatherWrapsNegativeIndicesAndHandlesEmptyIndex) {
  using B = TypeParam;
  const auto x = Float2<B>::from({{1, 2, 3}, {4, 5, 6}});
  const auto index = Int2<B>::from({{-1, 0}, {-3, -2}});
  EXPECT_EQ(x.gather(1, index).to_vec(), (std::vector<double>{3, 1, 4, 5}));
  EXPECT_EQ(x.gather(1, Int2<B>::zeros({2, 0})).shape(), (Shape{2, 0}));
}

TYPED_TEST(Layout, GatherRejectsOutOfRangeIndicesAndOversizedIndex) {
  using B = TypeParam;
  const auto x = Float2<B>::zeros({3, 4});
  EXPECT_KILN_ERROR(x.gather(1, Int2<B>::from({{0, 4}})), "gather: index 4 is out of range for a dim of size 4");
  EXPECT_KILN_ERROR(x.gather(0, Int2<B>::from({{-4}})), "gather: index -4 is out of range for a dim of size 3");
  EXPECT_KILN_ERROR(x.gather(0, Int2<B>::zeros({2, 5})),
                    "gather: index of shape [2, 5] does not fit input of shape [3, 4]");
  EXPECT_KILN_ERROR(B::gather(x.primitive(), 1, Int1<B>::zeros({2}).primitive()),
                    "gather: index of shape [2] does not fit input of shape [3, 4]");
  EXPECT_KILN_ERROR(B::gather(x.primitive(), 0, x.primitive()), "gather: indices must be i64 or i32, got f32");
}

TYPED_TEST(Layout, ScatterAlongEachDim) {
  using B = TypeParam;
  const auto& c = golden("layout", "scatter");
  for (DType dtype : {DType::f32, DType::f64}) {
    const auto x = c.tensor<B, 2>("x", dtype);
    EXPECT_EXACT(x.scatter(0, c.tensor<B, 2, Int>("index0"), c.tensor<B, 2>("src0", dtype)), c["out0"]);
    // The index [3, 2] covers part of src [3, 3].
    EXPECT_EXACT(x.scatter(-1, c.tensor<B, 2, Int>("index1"), c.tensor<B, 2>("src1", dtype)), c["out1"]);
    EXPECT_EXACT(x, c["x"]);
  }
}

TYPED_TEST(Layout, ScatterAddAccumulatesDuplicates) {
  using B = TypeParam;
  const auto& c = golden("layout", "scatter_add");
  for (DType dtype : {DType::f32, DType::f64}) {
    const auto x = c.tensor<B, 2>("x", dtype);
    const auto src = c.tensor<B, 2>("src", dtype);
    EXPECT_CLOSE(x.scatter_add(0, c.tensor<B, 2, Int>("index0"), src), c["out0"]);
    // src is a strided view here.
    EXPECT_CLOSE(x.scatter_add(1, c.tensor<B, 2, Int>("index1"), src.slice({Slice(), Slice(0, 3)})), c["out1"]);
    EXPECT_CLOSE(x.transpose().scatter_add(0, c.tensor<B, 2, Int>("index1").transpose(),
                                           src.slice({Slice(), Slice(0, 3)}).transpose()).transpose(),
                 c["out1"]);
  }
}

TYPED_TEST(Layout, ScatterAssignAppliesDuplicatesInOrder) {
  using B = TypeParam;
  const auto x = Float1<B>::zeros({3});
  const auto out = x.scatter(0, Int1<B>::from({1, 1, 2}), Float1<B>::from({5, 7, 9}));
  EXPECT_EQ(out.to_vec(), (std::vector<double>{0, 7, 9}));
}

TYPED_TEST(Layout, ScatterRejectsBadShapesAndIndices) {
  using B = TypeParam;
  const auto x = Float2<B>::zeros({3, 4});
  EXPECT_KILN_ERROR(x.scatter_add(0, Int2<B>::zeros({2, 3}), Float2<B>::zeros({2, 2})),
                    "scatter_add: index of shape [2, 3] does not fit src of shape [2, 2] and input of shape [3, 4]");
  EXPECT_KILN_ERROR(x.scatter(1, Int2<B>::zeros({4, 1}), Float2<B>::zeros({4, 1})),
                    "scatter: index of shape [4, 1] does not fit");
  EXPECT_KILN_ERROR(x.scatter(0, Int2<B>::from({{3}}), Float2<B>::zeros({1, 1})),
                    "scatter: index 3 is out of range for a dim of size 3");
  EXPECT_KILN_ERROR(B::scatter(x.primitive(), 0, Int2<B>::zeros({1, 1}).primitive(),
                               Float2<B>::zeros({1, 1}, {}, DType::f64).primitive(), ops::ScatterMode::add),
                    "scatter_add: src is f64, the tensor is f32");
}

// ---- index_select and index_add

TYPED_TEST(Layout, IndexSelectAlongEachDim) {
  using B = TypeParam;
  const auto& c = golden("layout", "index_select");
  for (DType dtype : {DType::f32, DType::f64}) {
    const auto x = c.tensor<B, 2>("x", dtype);
    EXPECT_EXACT(x.index_select(0, c.tensor<B, 1, Int>("index0")), c["out0"]);
    EXPECT_EXACT(x.index_select(-1, c.tensor<B, 1, Int>("index1", DType::i32)), c["out1"]);
    EXPECT_EXACT(x.transpose().index_select(1, c.tensor<B, 1, Int>("index0")), c["transposed"]);
  }
  const auto x = c.tensor<B, 2>("x");
  EXPECT_EQ(x.index_select(0, Int1<B>::zeros({0})).shape(), (Shape{0, 3}));
  EXPECT_EQ(x.index_select(1, Int1<B>::from({-1})).to_vec(), x.narrow(1, 2, 1).to_vec());
}

TYPED_TEST(Layout, IndexSelectRejectsOutOfRangeIndices) {
  using B = TypeParam;
  const auto x = Float2<B>::zeros({4, 3});
  EXPECT_KILN_ERROR(x.index_select(0, Int1<B>::from({0, 4})),
                    "index_select: index 4 is out of range for a dim of size 4");
  EXPECT_KILN_ERROR(provided::index_select<B>(x.primitive(), 0, Int2<B>::zeros({1, 1}).primitive()),
                    "index_select: the index must be 1-d, got shape [1, 1]");
}

TYPED_TEST(Layout, IndexAddAccumulatesSlices) {
  using B = TypeParam;
  const auto& c = golden("layout", "index_add");
  for (DType dtype : {DType::f32, DType::f64}) {
    const auto x = c.tensor<B, 2>("x", dtype);
    EXPECT_CLOSE(x.index_add(0, c.tensor<B, 1, Int>("index0"), c.tensor<B, 2>("values0", dtype)), c["out0"]);
    EXPECT_CLOSE(x.index_add(-1, c.tensor<B, 1, Int>("index1"), c.tensor<B, 2>("values1", dtype)), c["out1"]);
    // Transposed input and values give the transposed result.
    const auto values_t = c.tensor<B, 2>("values1", dtype).transpose();
    const auto t = x.transpose().index_add(0, c.tensor<B, 1, Int>("index1"), values_t);
    EXPECT_CLOSE(t.transpose(), c["out1"]);
    EXPECT_EXACT(x, c["x"]);
  }
}

TYPED_TEST(Layout, IndexAddRejectsValuesOfTheWrongShape) {
  using B = TypeParam;
  const auto x = Float2<B>::zeros({5, 3});
  EXPECT_KILN_ERROR(x.index_add(0, Int1<B>::from({0, 1}), Float2<B>::zeros({3, 3})),
                    "index_add: values of shape [3, 3] do not match: 2 indices into dim 0 of shape [5, 3] need values "
                    "of shape [2, 3]");
  EXPECT_KILN_ERROR(x.index_add(0, Int1<B>::from({5}), Float2<B>::zeros({1, 3})),
                    "index_add: index 5 is out of range for a dim of size 5");
}

// ---- masks, one_hot, pad

TYPED_TEST(Layout, TrilAndTriuWithDiagonals) {
  using B = TypeParam;
  const auto& c = golden("layout", "triangle");
  const auto m = c.tensor<B, 2>("x");
  const auto batch = c.tensor<B, 3>("batch");
  const std::vector<std::pair<std::int64_t, std::string>> diagonals{{-1, "m1"}, {0, "0"}, {1, "p1"}};
  for (const auto& [d, name] : diagonals) {
    EXPECT_EXACT(m.tril(d), c["tril_" + name]) << "diagonal " << d;
    EXPECT_EXACT(m.triu(d), c["triu_" + name]) << "diagonal " << d;
    EXPECT_EXACT(batch.tril(d), c["btril_" + name]) << "diagonal " << d;
    EXPECT_EXACT(batch.triu(d), c["btriu_" + name]) << "diagonal " << d;
  }
  const auto ints = Int2<B>::ones({2, 2});
  EXPECT_EQ(ints.tril().to_vec(), (std::vector<std::int64_t>{1, 0, 1, 1}));
}

TYPED_TEST(Layout, PadConstant) {
  using B = TypeParam;
  const auto& c = golden("layout", "pad_constant");
  const auto x = c.tensor<B, 2>("x");
  EXPECT_EXACT(x.pad({1, 2}, ops::PadMode::constant, 0.5), c["last"]);
  EXPECT_EXACT(x.pad({1, 1, 2, 0}), c["both"]);
  EXPECT_EXACT(x.pad({0, 0}), c["x"]);
}

TYPED_TEST(Layout, PadReflectAndReplicate) {
  using B = TypeParam;
  const auto& r = golden("layout", "pad_reflect");
  EXPECT_EXACT(r.tensor<B, 3>("x").pad({2, 1}, ops::PadMode::reflect), r["out"]);
  EXPECT_EXACT(r.tensor<B, 4>("x4").pad({1, 2, 2, 1}, ops::PadMode::reflect), r["out4"]);
  const auto& p = golden("layout", "pad_replicate");
  EXPECT_EXACT(p.tensor<B, 3>("x").pad({2, 3}, ops::PadMode::replicate), p["out"]);
  EXPECT_EXACT(p.tensor<B, 4>("x4").pad({1, 2, 3, 1}, ops::PadMode::replicate), p["out4"]);
  // A transposed input pads the same as its contiguous copy.
  const auto x4 = p.tensor<B, 4>("x4");
  EXPECT_EXACT(x4.swap_dims(2, 3).pad({3, 1, 1, 2}, ops::PadMode::replicate).swap_dims(2, 3), p["out4"]);
}

TYPED_TEST(Layout, PadRejectsBadPadding) {
  using B = TypeParam;
  const auto x = Float2<B>::zeros({2, 3});
  EXPECT_KILN_ERROR(x.pad({3, 0}, ops::PadMode::reflect), "pad: reflect padding 3 / 0 must be smaller than dim 1");
  EXPECT_KILN_ERROR(x.pad({1, 2, 3}), "pad: 3 pad values for a tensor of rank 2");
  EXPECT_KILN_ERROR(x.pad({-1, 0}), "pad: negative padding -1 / 0 on dim 1");
}

// ---- Int and Bool tensors

TYPED_TEST(Layout, IntAndBoolThroughCatFlipIndexSelectGatherScatter) {
  using B = TypeParam;
  const auto& c = golden("layout", "int_bool");
  const auto sel = Int1<B>::from({2, 0, 2});
  for (DType dtype : {DType::i64, DType::i32}) {
    const auto ints = c.tensor<B, 2, Int>("ints", dtype);
    EXPECT_EXACT(Int2<B>::cat({ints, ints.slice({Slice(0, 1)})}, 0), c["int_cat"]);
    EXPECT_EXACT(ints.flip({0, 1}), c["int_flip"]);
    EXPECT_EXACT(ints.index_select(0, sel), c["int_select"]);
    EXPECT_EXACT(ints.gather(1, Int2<B>::from({{3, 0}, {1, 1}, {0, 2}})), c["int_gather"]);
    EXPECT_EXACT(ints.scatter_add(0, Int2<B>::from({{0, 0, 1, 2}}), ints.slice({Slice(0, 1)}).mul(2.0)),
                 c["int_scatter_add"]);
    EXPECT_EQ(ints.flip({1}).dtype(), dtype);
  }
  const auto bools = c.tensor<B, 2, Bool>("bools");
  EXPECT_EXACT(Bool2<B>::cat({bools, bools.slice({Slice(), Slice(0, 2)})}, 1), c["bool_cat"]);
  EXPECT_EXACT(bools.flip({1}), c["bool_flip"]);
  EXPECT_EXACT(bools.index_select(1, sel), c["bool_select"]);
  EXPECT_EXACT(bools.transpose().transpose(), c["bools"]);
}

TYPED_TEST(Layout, LayoutOpsKeepHalfFloats) {
  using B = TypeParam;
  const auto& c = golden("layout", "flip");
  for (DType dtype : {DType::f16, DType::bf16}) {
    const auto x = c.tensor<B, 3>("x", dtype);
    const auto expected = c["outer"].convert(dtype);
    EXPECT_EXACT(x.flip({0, 2}), expected);
    EXPECT_EQ(Float3<B>::cat({x, x}, 1).dtype(), dtype);
    const auto ones = Float1<B>::ones({3}, {}, dtype);
    const auto summed = ones.index_add(0, Int1<B>::from({0, 0}), Float1<B>::full({2}, 0.5, {}, dtype));
    EXPECT_EQ(summed.to_vec(), (std::vector<double>{2, 1, 1}));
  }
}

// ---- one_hot (uses reduce_all for its range check)

TYPED_TEST(Layout, OneHotMatchesTorch) {
  using B = TypeParam;
  const auto& c = golden("layout", "one_hot");
  const auto x = c.tensor<B, 2, Int>("x");
  EXPECT_EXACT(x.one_hot(5), c["out"]);
  EXPECT_EQ(x.cast(DType::i32).one_hot(5).dtype(), DType::i32);
  EXPECT_KILN_ERROR(x.one_hot(4), "one_hot: class indices must lie in [0, 4), got values from 0 to 4");
  EXPECT_KILN_ERROR(Int1<B>::from({-1, 2}).one_hot(3), "one_hot: class indices must lie in [0, 3)");
}

// ---- reshape views

TYPED_TEST(Layout, ReshapeOfStridedTensorsKeepsRowMajorOrder) {
  using B = TypeParam;
  const auto x = Float1<B>::arange(0, 24).template reshape<3>({2, 3, 4});
  const auto p = x.permute({1, 0, 2});  // [3, 2, 4]: only the last dim is contiguous
  const auto order = p.to_vec();
  EXPECT_EQ(p.template reshape<4>({3, 2, 2, 2}).to_vec(), order);  // splits a dim: a view
  EXPECT_EQ(p.template reshape<2>({3, 8}).to_vec(), order);       // merges non-mergeable dims: a copy
  EXPECT_EQ(p.template reshape<1>({-1}).to_vec(), order);
  const auto e = Float2<B>::from({{1}, {2}, {3}}).expand({2, 3, 4});
  EXPECT_EQ(e.template reshape<4>({2, 3, 2, 2}).to_vec(), e.to_vec());
  EXPECT_EQ(e.template reshape<2>({6, 4}).to_vec(), e.to_vec());
  const auto s = x.slice({Slice(), Slice(all, all, 2)});  // [2, 2, 4] with a stride-2 middle dim
  EXPECT_EQ(s.template reshape<2>({4, 4}).to_vec(), s.to_vec());
  EXPECT_EQ(s.template reshape<3>({2, 2, 4}).transpose().template reshape<2>({2, 8}).to_vec(),
            s.transpose().to_vec());
}

// The CPU backend's reshape shares the buffer whenever the strides allow it.
TEST(CpuLayout, ReshapeIsAViewWhenStridesAllow) {
  using B = kiln::Cpu;
  const auto x = Float1<B>::arange(0, 24).template reshape<3>({2, 3, 4});
  const auto p = x.permute({1, 0, 2});
  const auto split = p.template reshape<4>({3, 2, 2, 2});
  EXPECT_EQ(split.primitive().storage, x.primitive().storage);
  const auto merged = p.template reshape<2>({3, 8});
  EXPECT_NE(merged.primitive().storage, x.primitive().storage);
  const auto t = x.transpose();  // [2, 4, 3]
  EXPECT_EQ(t.template reshape<4>({2, 2, 2, 3}).primitive().storage, x.primitive().storage);
  EXPECT_EQ(t.template reshape<4>({2, 4, 1, 3}).primitive().storage, x.primitive().storage);
  EXPECT_EQ(x.slice({Slice(1, 2)}).template reshape<2>({3, 4}).primitive().storage, x.primitive().storage);
}
