// Conformance: the ops written once over every backend as free functions
// (kiln/tensor/rearrange.hpp, linalg.hpp, order.hpp, select.hpp, einsum.hpp, unfold.hpp,
// bitwise.hpp) against PyTorch golden values
// (tests/golden/gen_tensor_ops.py), on Float and Int tensors, with bad input.
// Their gradients are checked in tests/autodiff (grad_cases.hpp).
#include "backends.hpp"
#include "golden.hpp"

#include <kiln/tensor/bitwise.hpp>
#include <kiln/tensor/einsum.hpp>
#include <kiln/tensor/linalg.hpp>
#include <kiln/tensor/order.hpp>
#include <kiln/tensor/rearrange.hpp>
#include <kiln/tensor/select.hpp>
#include <kiln/tensor/unfold.hpp>

using namespace kiln;
using kiln::test::golden;

namespace {

using namespace kiln::test::aliases;

template <class T> ::testing::AssertionResult exact(const T& actual, const TensorData& expected) {
  return kiln::test::all_close(actual, expected, 0.0, 0.0);
}

}  // namespace

#define EXPECT_EXACT(...) EXPECT_TRUE(exact(__VA_ARGS__))

KILN_BACKEND_TEST_SUITE(TensorOps);

// ---- rearranging

TYPED_TEST(TensorOps, MovedimMatchesTorch) {
  using B = TypeParam;
  const auto& c = golden("tensor_ops", "movedim");
  const auto x = c.tensor<B, 3>("x");
  EXPECT_EXACT(movedim(x, 0, 2), c["one"]);
  EXPECT_EXACT(movedim(x, -1, 0), c["back"]);
  EXPECT_EXACT(movedim(x, {0, 1}, {2, 0}), c["two"]);
  EXPECT_EXACT(movedim(x.transpose(), 0, 0).transpose(), c["x"]);
  EXPECT_KILN_ERROR(movedim(x, {0, 0}, {1, 2}), "movedim: source dim 0 appears twice");
  EXPECT_KILN_ERROR(movedim(x, {0, 1}, {2, -1}), "movedim: destination dim 2 appears twice");
  EXPECT_KILN_ERROR(movedim(x, {0}, {1, 2}), "movedim: 1 source dims and 2 destination dims");
  EXPECT_KILN_ERROR(movedim(x, 3, 0), "movedim: dim 3 is out of range");
}

TYPED_TEST(TensorOps, SqueezeRemovesEverySizeOneDim) {
  using B = TypeParam;
  const auto& c = golden("tensor_ops", "squeeze");
  const auto x = c.tensor<B, 4>("x");
  EXPECT_EXACT(squeeze<2>(x), c["out"]);
  EXPECT_EXACT(squeeze<1>(c.tensor<B, 3>("ones")), c["ones_out"]);
  EXPECT_KILN_ERROR(squeeze<3>(x), "squeeze: removing the size-1 dims of shape [1, 3, 1, 4] leaves rank 2, not 3");
}

TYPED_TEST(TensorOps, RepeatInterleaveRepeatsEachElementInPlace) {
  using B = TypeParam;
  const auto& c = golden("tensor_ops", "repeat_interleave");
  const auto x = c.tensor<B, 2>("x");
  EXPECT_EXACT(repeat_interleave(x, 2, 0), c["rows"]);
  EXPECT_EXACT(repeat_interleave(x, 3, -1), c["cols"]);
  EXPECT_EXACT(repeat_interleave(x, 2), c["flat"]);
  EXPECT_EXACT(repeat_interleave(x, 0, 1), c["none"]);
  EXPECT_EXACT(repeat_interleave(x.transpose(), 2, 1).transpose(), c["rows"]);
  const auto& i = golden("tensor_ops", "repeat_interleave_int");
  EXPECT_EXACT(repeat_interleave(i.tensor<B, 2, Int>("x"), 2, 1), i["out"]);
  EXPECT_KILN_ERROR(repeat_interleave(x, -1, 0), "repeat_interleave: repeats must be non-negative, got -1");
  EXPECT_KILN_ERROR(repeat_interleave(x, 2, 2), "repeat_interleave: dim 2 is out of range");
}

// ---- diagonals and products

TYPED_TEST(TensorOps, DiagonalMatchesTorchForEveryDimPairAndOffset) {
  using B = TypeParam;
  const auto& c = golden("tensor_ops", "diagonal");
  const auto x = c.tensor<B, 3>("x");
  EXPECT_EXACT(diagonal(x), c["main"]);
  EXPECT_EXACT(diagonal(x, 0, 1, 2), c["last"]);
  EXPECT_EXACT(diagonal(x, 1, -1, -2), c["above"]);
  EXPECT_EXACT(diagonal(x, -1, 1, 2), c["below"]);
  EXPECT_EXACT(diagonal(x, 5, 1, 2), c["outside"]);
  EXPECT_EXACT(diagonal(x, 2, 2, 0), c["swapped"]);
  EXPECT_EXACT(diagonal(movedim(movedim(x, 0, 2), 2, 0), -1, 1, 2), c["below"]);  // a permuted view
  EXPECT_KILN_ERROR(diagonal(x, 0, 1, -2), "diagonal: dim1 and dim2 are both dim 1 of shape [2, 3, 4]");
}

TYPED_TEST(TensorOps, DiagBuildsAndReadsDiagonalsAndTraceSumsThem) {
  using B = TypeParam;
  const auto& c = golden("tensor_ops", "diag");
  const auto m = c.tensor<B, 2>("m");
  const auto v = c.tensor<B, 1>("v");
  EXPECT_EXACT(diag(m), c["main"]);
  EXPECT_EXACT(diag(m, 2), c["above"]);
  EXPECT_EXACT(diag(m, -1), c["below"]);
  EXPECT_EXACT(diag(v), c["square"]);
  EXPECT_EXACT(diag(v, 1), c["square_above"]);
  EXPECT_EXACT(diag(v, -2), c["square_below"]);
  EXPECT_CLOSE(trace(m), c["trace"]);
  const auto& i = golden("tensor_ops", "diag_int");
  const auto mi = i.tensor<B, 2, Int>("m");
  EXPECT_EXACT(diag(mi), i["main"]);
  EXPECT_EXACT(trace(mi), i["trace"]);
  EXPECT_EXACT(diag(squeeze<1>(mi.narrow(0, 0, 1)), -1), i["square"]);
}

TYPED_TEST(TensorOps, OuterMatchesTorch) {
  using B = TypeParam;
  const auto& c = golden("tensor_ops", "outer");
  EXPECT_CLOSE(outer(c.tensor<B, 1>("a"), c.tensor<B, 1>("b")), c["out"]);
}

TYPED_TEST(TensorOps, CrossMatchesTorchAlongAnyDimWithBroadcasting) {
  using B = TypeParam;
  const auto& c = golden("tensor_ops", "cross");
  EXPECT_CLOSE(cross(c.tensor<B, 2>("a"), c.tensor<B, 2>("b")), c["last"]);
  EXPECT_CLOSE(cross(c.tensor<B, 3>("a3"), c.tensor<B, 3>("b3"), 0), c["first"]);
  EXPECT_KILN_ERROR(cross(c.tensor<B, 3>("a3"), c.tensor<B, 3>("b3")),
                    "cross: dim 2 must have size 3 in both [3, 2, 5] and [3, 1, 5]");
}

// ---- order statistics and sorted search

TYPED_TEST(TensorOps, CummaxAndCumminTakeTheLastIndexOfTiesAndKeepNaN) {
  using B = TypeParam;
  const auto& c = golden("tensor_ops", "cummax");
  const auto x = c.tensor<B, 2>("x");
  const auto [max_values, max_indices] = cummax(x, 1);
  EXPECT_EXACT(max_values, c["max_values"]);
  EXPECT_EXACT(max_indices, c["max_indices"]);
  const auto [min_values, min_indices] = cummin(x, -1);
  EXPECT_EXACT(min_values, c["min_values"]);
  EXPECT_EXACT(min_indices, c["min_indices"]);
  const auto r = c.tensor<B, 3>("r");
  EXPECT_EXACT(cummax(r, 1).first, c["r_values"]);
  EXPECT_EXACT(cummax(r, 1).second, c["r_indices"]);
  EXPECT_EXACT(cummin(r, 0).first, c["r_min_values"]);
  EXPECT_EXACT(cummin(r, 0).second, c["r_min_indices"]);
  const auto i = c.tensor<B, 2, Int>("i");
  EXPECT_EXACT(cummax(i, 1).first, c["i_max_values"]);
  EXPECT_EXACT(cummax(i, 1).second, c["i_max_indices"]);
  EXPECT_EXACT(cummin(i, 1).first, c["i_min_values"]);
  EXPECT_EXACT(cummin(i, 1).second, c["i_min_indices"]);
  EXPECT_KILN_ERROR(cummax(x, 2), "cummax: dim 2 is out of range");
}

TYPED_TEST(TensorOps, MedianIsTheLowerMiddleWithItsIndex) {
  using B = TypeParam;
  const auto& c = golden("tensor_ops", "median");
  const auto x = c.tensor<B, 2>("x");
  EXPECT_EXACT(median(x), c["all"]);
  const auto [values1, indices1] = median_with_indices(x, 1);
  EXPECT_EXACT(values1, c["values1"]);
  EXPECT_EXACT(indices1, c["indices1"]);
  EXPECT_EXACT(median(x, 0), c["values0"]);
  EXPECT_EXACT(median_with_indices(x.transpose(), 1).second.transpose(), c["indices0"]);
  const auto [nan_values, nan_indices] = median_with_indices(c.tensor<B, 2>("nan"), 1);
  EXPECT_EXACT(nan_values, c["nan_values"]);
  EXPECT_EXACT(nan_indices, c["nan_indices"]);
  const auto [int_values, int_indices] = median_with_indices(c.tensor<B, 2, Int>("i"), -1);
  EXPECT_EXACT(int_values, c["i_values"]);
  EXPECT_EXACT(int_indices, c["i_indices"]);
  EXPECT_KILN_ERROR(median(Float2<B>::zeros({2, 0}), 1), "median: dim 1 of shape [2, 0] is empty");
}

TYPED_TEST(TensorOps, QuantileInterpolatesLinearly) {
  using B = TypeParam;
  const auto& c = golden("tensor_ops", "quantile");
  for (DType dtype : {DType::f32, DType::f64}) {
    SCOPED_TRACE(dtype_name(dtype));
    const auto x = c.tensor<B, 2>("x", dtype);
    const double tol = dtype == DType::f32 ? 1e-6 : 1e-12;
    EXPECT_CLOSE(quantile(x, 0.3, 1), c["q30_1"].convert(dtype), tol, tol);
    EXPECT_CLOSE(quantile(x, 0.75, 0), c["q75_0"].convert(dtype), tol, tol);
    EXPECT_CLOSE(quantile(x, 0.0, -1), c["q0_1"].convert(dtype), tol, tol);
    EXPECT_CLOSE(quantile(x, 1.0, 1), c["q100_1"].convert(dtype), tol, tol);
    EXPECT_CLOSE(quantile(x, 0.4), c["q40_all"].convert(dtype), tol, tol);
  }
  EXPECT_CLOSE(quantile(c.tensor<B, 2>("nan"), 0.5, 1), c["nan_q"]);
  EXPECT_KILN_ERROR(quantile(c.tensor<B, 2>("x"), 1.5, 1), "quantile: q must lie in [0, 1], got 1.5");
}

TYPED_TEST(TensorOps, SearchsortedAndBucketizeMatchTorch) {
  using B = TypeParam;
  const auto& c = golden("tensor_ops", "searchsorted");
  const auto seq = c.tensor<B, 1>("seq");
  const auto values = c.tensor<B, 2>("values");
  EXPECT_EXACT(searchsorted(seq, values), c["left"]);
  EXPECT_EXACT(searchsorted(seq, values, true), c["right"]);
  EXPECT_EXACT(searchsorted(c.tensor<B, 2>("rows"), c.tensor<B, 2>("row_values")), c["rows_left"]);
  EXPECT_EXACT(searchsorted(c.tensor<B, 2>("rows"), c.tensor<B, 2>("row_values"), true), c["rows_right"]);
  EXPECT_EXACT(bucketize(values, seq), c["bucket"]);
  EXPECT_EXACT(bucketize(values, seq, true), c["bucket_right"]);
  EXPECT_EXACT(searchsorted(c.tensor<B, 1, Int>("int_seq"), c.tensor<B, 2, Int>("int_values")), c["int_left"]);
  EXPECT_KILN_ERROR(searchsorted(c.tensor<B, 2>("rows"), Float2<B>::zeros({3, 1})),
                    "searchsorted: the leading dims of the sequence [2, 4] and the values [3, 1] differ");
}

TYPED_TEST(TensorOps, SearchsortedFindsEdgesOfRunsInALongSequence) {
  using B = TypeParam;
  const auto& c = golden("tensor_ops", "searchsorted_long");
  const auto seq = c.tensor<B, 1>("seq");
  const auto values = c.tensor<B, 2>("values");
  EXPECT_EXACT(searchsorted(seq, values), c["left"]);
  EXPECT_EXACT(searchsorted(seq, values, true), c["right"]);
}

// ---- selection and counting

TYPED_TEST(TensorOps, NonzeroListsCoordinatesInRowMajorOrder) {
  using B = TypeParam;
  const auto& c = golden("tensor_ops", "nonzero");
  EXPECT_EXACT(nonzero(c.tensor<B, 2>("x")), c["out"]);
  EXPECT_EXACT(argwhere(c.tensor<B, 2, Bool>("bools")), c["out"]);
  EXPECT_EXACT(nonzero(c.tensor<B, 2>("zeros")), c["zeros_out"]);
}

TYPED_TEST(TensorOps, MaskedSelectPicksInRowMajorOrderWithABroadcastMask) {
  using B = TypeParam;
  const auto& c = golden("tensor_ops", "masked_select");
  const auto x = c.tensor<B, 2>("x");
  EXPECT_EXACT(masked_select(x, c.tensor<B, 2, Bool>("mask")), c["out"]);
  EXPECT_EXACT(masked_select(x, c.tensor<B, 2, Bool>("row")), c["row_out"]);
  EXPECT_KILN_ERROR(masked_select(x, Bool2<B>::from_data(c["mask"]).narrow(1, 0, 2)),
                    "masked_select: the mask of shape [3, 2] does not broadcast to shape [3, 4]");
}

TYPED_TEST(TensorOps, UniqueSortsAndCounts) {
  using B = TypeParam;
  const auto& c = golden("tensor_ops", "unique");
  const auto u = unique(c.tensor<B, 2>("x"), true, true);
  EXPECT_EXACT(u.values, c["values"]);
  ASSERT_TRUE(u.inverse && u.counts);
  EXPECT_EXACT(*u.inverse, c["inverse"]);
  EXPECT_EXACT(*u.counts, c["counts"]);
  const auto i = unique(c.tensor<B, 1, Int>("i"));
  EXPECT_EXACT(i.values, c["i_values"]);
  EXPECT_FALSE(i.inverse || i.counts);
}

TYPED_TEST(TensorOps, BincountCountsAndSumsWeights) {
  using B = TypeParam;
  const auto& c = golden("tensor_ops", "bincount");
  const auto x = c.tensor<B, 1, Int>("x");
  EXPECT_EXACT(bincount(x), c["out"]);
  EXPECT_EXACT(bincount(x, 8), c["long"]);
  EXPECT_CLOSE(bincount(x, c.tensor<B, 1>("weights")), c["weighted"]);
  EXPECT_EXACT(bincount(c.tensor<B, 1, Int>("empty"), 3), c["empty_out"]);
  EXPECT_KILN_ERROR(bincount(Int1<B>::from({1, -2})), "bincount: the values must be non-negative, the smallest is -2");
}

TYPED_TEST(TensorOps, HistcCountsBinsOfTheGivenOrOwnRange) {
  using B = TypeParam;
  const auto& c = golden("tensor_ops", "histc");
  const auto x = c.tensor<B, 2>("x");
  EXPECT_EXACT(histc(x, 4, 0.0, 3.0), c["ranged"]);
  EXPECT_EXACT(histc(x, 5), c["own"]);
  EXPECT_EXACT(histc(c.tensor<B, 1>("wide")), c["default"]);
  EXPECT_KILN_ERROR(histc(x, 0), "histc: bins must be positive, got 0");
}

// ---- einsum

TYPED_TEST(TensorOps, EinsumMatchesTorchForProductsDiagonalsSumsAndPermutes) {
  using B = TypeParam;
  const auto& c = golden("tensor_ops", "einsum");
  const auto a = c.tensor<B, 2>("a"), b = c.tensor<B, 2>("b"), sq = c.tensor<B, 2>("sq");
  const auto b1 = c.tensor<B, 3>("b1"), b2 = c.tensor<B, 3>("b2"), x3 = c.tensor<B, 3>("x3");
  const auto v1 = c.tensor<B, 1>("v1"), v2 = c.tensor<B, 1>("v2");
  EXPECT_CLOSE(einsum<2>("ij,jk->ik", a, b), c["matmul"]);
  EXPECT_CLOSE(einsum<2>("ij,jk", a, b), c["implicit"]);
  EXPECT_CLOSE(einsum<2>("ij, jk -> ki", a, b), c["transposed_out"]);
  EXPECT_CLOSE(einsum<3>("bij,bjk->bik", b1, b2), c["batched"]);
  EXPECT_CLOSE(einsum<3>("bij,bjk->ikb", b1, b2), c["batch_last"]);
  EXPECT_CLOSE(einsum<1>("ii->i", sq), c["diag"]);
  EXPECT_CLOSE(einsum<1>("ii", sq), c["trace"]);
  EXPECT_CLOSE(einsum<2>("ij->ji", a), c["transpose"]);
  EXPECT_CLOSE(einsum<1>("ij->i", a), c["row_sums"]);
  EXPECT_CLOSE(einsum<1>("i,i->", v1, v2), c["dot"]);
  EXPECT_CLOSE(einsum<2>("i,j->ij", v1, v2), c["outer"]);
  EXPECT_CLOSE(einsum<2>("ijk->ik", x3), c["reduce_mid"]);
  EXPECT_CLOSE(einsum<3>("ijk->kij", x3), c["permute"]);
  EXPECT_CLOSE(einsum<2>("ijk,jk->ji", x3, a), c["bilinear"]);
  EXPECT_CLOSE(einsum<2>("ij,kl->ik", a, b), c["private"]);
  EXPECT_CLOSE(einsum<2>("ii,ij->ij", sq, b), c["diag_times"]);
  EXPECT_CLOSE(einsum<2>("ij,jk->ik", a.transpose().transpose(), b.transpose().transpose()), c["matmul"]);
  EXPECT_KILN_ERROR(einsum<2>("ij,jk->ik", a, a), "einsum: label 'j' has sizes 4 and 3 in two operands");
  EXPECT_KILN_ERROR(einsum<1>("ij,jk->ik", a, b),
                    "einsum: \"ij,jk->ik\" gives a result of rank 2, the call asks for rank 1");
  EXPECT_KILN_ERROR(einsum<2>("ijk,jk->ik", a, b),
                    "einsum: operand 0 of shape [3, 4] has rank 2, \"ijk\" gives it 3 labels");
  EXPECT_KILN_ERROR(einsum<2>("ij->iz", a), "einsum: output label 'z' of \"ij->iz\" names no input dim");
  EXPECT_KILN_ERROR(einsum<3>("...ijk->...j", a), "einsum: operand 0 has rank 2, \"...ijk->...j\" names 3 dims");
  EXPECT_KILN_ERROR(einsum<2>("i.j->ij", a), "einsum: operand 0 of \"i.j->ij\" has a '.' that is not one \"...\"");
  EXPECT_KILN_ERROR(einsum<1>("ij->ii", sq), "einsum: output label 'i' of \"ij->ii\" repeats");
}

// "..." stands for the dims no letter names, aligned on the right across operands ([2, 3]
// batch dims against [3]), in the output or at the start of an implicit one.
TYPED_TEST(TensorOps, EinsumSpellsOutEllipsisDims) {
  using B = TypeParam;
  const auto& c = golden("tensor_ops", "einsum_ellipsis");
  const auto a = c.tensor<B, 4>("a");
  const auto b = c.tensor<B, 3>("b");
  EXPECT_CLOSE(einsum<4>("...ij,...jk->...ik", a, b), c["batched"]);
  EXPECT_CLOSE(einsum<4>("...ij,...jk", a, b.template unsqueeze<4>().expand_as(Shape{2, 3, 5, 6})), c["implicit"]);
  EXPECT_CLOSE(einsum<4>("i...->...i", a), c["front"]);
  EXPECT_CLOSE(einsum<2>("a...d->ad", a), c["middle"]);
}

TYPED_TEST(TensorOps, EinsumContractsThreeOperandsLeftToRight) {
  using B = TypeParam;
  const auto& c = golden("tensor_ops", "einsum3");
  const auto a = c.tensor<B, 2>("a"), b = c.tensor<B, 2>("b"), m = c.tensor<B, 2>("c");
  const auto v = c.tensor<B, 1>("v");
  EXPECT_CLOSE(einsum<2>("ij,jk,kl->il", a, b, m), c["chain"]);
  EXPECT_CLOSE(einsum<2>("ij,jk,kl", a, b, m), c["implicit"]);
  EXPECT_CLOSE(einsum<2>("ij,j,jk->ik", a, v, b), c["scaled"]);
  EXPECT_CLOSE(einsum<2>("bjk,j,bj->bk", c.tensor<B, 3>("batch"), v, a), c["shared"]);
  EXPECT_CLOSE(einsum<1>("ij,jk,kl->", a, b, m), c["total"], 1e-5, 1e-5);
  EXPECT_KILN_ERROR(einsum<2>("ij,jk->ik", a, b, m), "einsum: \"ij,jk->ik\" names 2 operands, 3 given");
}

// ---- sliding windows and sub-pixel rearrangement

TYPED_TEST(TensorOps, UnfoldAndFoldMatchTorch) {
  using B = TypeParam;
  namespace F = kiln::functional;
  const auto& u = golden("tensor_ops", "unfold");
  const auto x = u.tensor<B, 4>("x");
  const F::UnfoldOptions strided{{2, 1}, {1, 2}, {2, 3}};
  EXPECT_EXACT(F::unfold(x, {2, 3}), u["basic"]);
  EXPECT_EXACT(F::unfold(x, {3, 2}, strided), u["strided"]);
  const auto& f = golden("tensor_ops", "fold");
  EXPECT_CLOSE(F::fold(f.tensor<B, 3>("cols"), {5, 6}, {2, 3}), f["basic"]);
  EXPECT_CLOSE(F::fold(f.tensor<B, 3>("cols2"), {5, 6}, {3, 2}, strided), f["strided"]);
  EXPECT_KILN_ERROR(F::unfold(x, {6, 2}), "unfold: a window of 6 does not fit a padded size of 5");
  EXPECT_KILN_ERROR(F::fold(f.tensor<B, 3>("cols"), {5, 7}, {2, 3}),
                    "fold: 16 columns given, an output of 5 x 7 with these windows has 20");
  EXPECT_KILN_ERROR(F::fold(f.tensor<B, 3>("cols"), {5, 6}, {2, 4}),
                    "fold: dim 1 of shape [2, 18, 16] must be a multiple of the kernel's 2 x 4 elements");
}

TYPED_TEST(TensorOps, PixelShuffleAndUnshuffleMatchTorch) {
  using B = TypeParam;
  namespace F = kiln::functional;
  const auto& c = golden("tensor_ops", "pixel_shuffle");
  const auto x = c.tensor<B, 4>("x");
  EXPECT_EXACT(F::pixel_shuffle(x, 2), c["shuffled"]);
  EXPECT_EXACT(F::pixel_unshuffle(c.tensor<B, 4>("y"), 2), c["unshuffled"]);
  EXPECT_EXACT(F::pixel_shuffle(c.tensor<B, 3>("x3"), 2), c["shuffled3"]);
  EXPECT_EXACT(F::pixel_unshuffle(F::pixel_shuffle(x, 2), 2), c["x"]);
  EXPECT_KILN_ERROR(F::pixel_shuffle(x, 3),
                    "pixel_shuffle: 8 channels of shape [2, 8, 3, 4] do not divide by the factor 3");
  EXPECT_KILN_ERROR(F::pixel_unshuffle(x, 2),
                    "pixel_unshuffle: the height and width of shape [2, 8, 3, 4] do not divide");
}

// ---- bitwise

TYPED_TEST(TensorOps, BitwiseNotAndShiftsMatchTorchOnNegativeValues) {
  using B = TypeParam;
  const auto& c = golden("tensor_ops", "bitwise");
  const auto x = c.tensor<B, 2, Int>("x");
  const auto shifts = c.tensor<B, 2, Int>("shifts");
  EXPECT_EXACT(bitwise_not(x), c["not_"]);
  EXPECT_EXACT(bitwise_left_shift(x, 3), c["left3"]);
  EXPECT_EXACT(bitwise_right_shift(x, 2), c["right2"]);
  EXPECT_EXACT(bitwise_left_shift(x, shifts.clamp_max(20.0)), c["left_by"]);
  EXPECT_EXACT(bitwise_right_shift(x, shifts), c["right_by"]);
  EXPECT_EXACT(bitwise_left_shift(c.tensor<B, 1, Int>("big"), 62), c["big_left"]);
  EXPECT_EXACT(bitwise_not(c.tensor<B, 2, Bool>("bools")), c["bools_not"]);
  EXPECT_KILN_ERROR(bitwise_left_shift(x, 63), "bitwise_left_shift: the shift must lie in 0..62, got 63");
  EXPECT_KILN_ERROR(bitwise_right_shift(x, shifts.sub(1.0)),
                    "bitwise_right_shift: the shifts must lie in 0..62, got values from -1 to 61");
}

TYPED_TEST(TensorOps, BitwiseAndOrXorAreExactForEveryIntDtype) {
  using B = TypeParam;
  const auto& c = golden("tensor_ops", "bitwise_binary");
  const auto a = c.tensor<B, 2, Int>("a"), b = c.tensor<B, 2, Int>("b"), row = c.tensor<B, 2, Int>("row");
  EXPECT_EXACT(bitwise_and(a, b), c["and_"]);
  EXPECT_EXACT(bitwise_or(a, b), c["or_"]);
  EXPECT_EXACT(bitwise_xor(a, b), c["xor_"]);
  EXPECT_EXACT(bitwise_and(a, row), c["and_row"]);
  EXPECT_EXACT(bitwise_or(row, a), c["or_row"]);
  EXPECT_EXACT(bitwise_xor(a, row), c["xor_row"]);
  for (const char* width : {"32", "8"}) {
    SCOPED_TRACE(width);
    const std::string w(width);
    const auto x = c.tensor<B, 2, Int>("a" + w), y = c.tensor<B, 2, Int>("b" + w);
    EXPECT_EXACT(bitwise_and(x, y), c["and" + w]);
    EXPECT_EXACT(bitwise_or(x, y), c["or" + w]);
    EXPECT_EXACT(bitwise_xor(x, y), c["xor" + w]);
  }
  const auto la = c.tensor<B, 2, Bool>("la"), lb = c.tensor<B, 2, Bool>("lb");
  EXPECT_EXACT(bitwise_and(la, lb), c["land"]);
  EXPECT_EXACT(bitwise_or(la, lb), c["lor"]);
  EXPECT_EXACT(bitwise_xor(la, lb), c["lxor"]);
  EXPECT_KILN_ERROR(bitwise_and(a, c.tensor<B, 2, Int>("b", DType::i32)), "bitwise_and: the dtypes i64 and i32 differ");
}

// ---- empty inputs

TYPED_TEST(TensorOps, EmptyInputsGiveEmptyOrZeroResults) {
  using B = TypeParam;
  const auto none = Float2<B>::zeros({0, 3});
  EXPECT_EQ(cummax(none, 0).first.shape(), (Shape{0, 3}));
  EXPECT_EQ(cummin(none, 1).second.shape(), (Shape{0, 3}));
  EXPECT_EQ(diag(Float1<B>::zeros({0})).shape(), (Shape{0, 0}));
  EXPECT_EXACT(diag(Float1<B>::zeros({0}), 2), TensorData::from(std::vector<double>(4, 0.0), Shape{2, 2}));
  EXPECT_EQ(diagonal(none).shape(), (Shape{0}));
  EXPECT_EQ(nonzero(none).shape(), (Shape{0, 2}));
  EXPECT_EQ(masked_select(Float2<B>::ones({2, 3}), Float2<B>::zeros({2, 3}).gt(0.0)).shape(), (Shape{0}));
  EXPECT_EQ(unique(none).values.shape(), (Shape{0}));
  EXPECT_EXACT(histc(none, 4), TensorData::from(std::vector<double>(4, 0.0), Shape{4}));
  EXPECT_EQ(repeat_interleave(none, 3, 0).shape(), (Shape{0, 3}));
  EXPECT_EQ(squeeze<1>(Float3<B>::zeros({1, 0, 1})).shape(), (Shape{0}));
}

TYPED_TEST(TensorOps, BitwiseWithAnIntegerMatchesTorch) {
  using B = TypeParam;
  const auto& c = golden("tensor_ops", "bitwise_scalar");
  const auto x = c.tensor<B, 2, Int>("x");
  EXPECT_EXACT(bitwise_and(x, 6), c["and_"]);
  EXPECT_EXACT(bitwise_or(x, -8), c["or_"]);
  EXPECT_EXACT(bitwise_xor(x, (std::int64_t{1} << 40) + 3), c["xor_"]);
  EXPECT_KILN_ERROR(bitwise_and(x, (std::int64_t{1} << 53) + 1),
                    "bitwise_and: the integer 9007199254740993 is beyond 2^53");
}

// ---- Bool tensors: the rearranging ops move elements of any kind

TYPED_TEST(TensorOps, RearrangingOpsMoveBoolElementsAsFloatOnes) {
  using B = TypeParam;
  namespace F = kiln::functional;
  const auto& c = golden("tensor_ops", "diagonal");
  const auto x = c.tensor<B, 3>("x");
  const auto m = x.gt(0.0);
  EXPECT_EXACT(movedim(m, 0, 2), movedim(x, 0, 2).gt(0.0).into_data());
  EXPECT_EXACT(diagonal(m, 1, -1, -2), diagonal(x, 1, -1, -2).gt(0.0).into_data());
  const auto row = squeeze<1>(m.narrow(0, 0, 1).narrow(1, 0, 1));
  EXPECT_EXACT(diag(row, -1), diag(squeeze<1>(x.narrow(0, 0, 1).narrow(1, 0, 1)), -1).gt(0.0).into_data());
  EXPECT_EXACT(repeat_interleave(m, 2, 1), repeat_interleave(x, 2, 1).gt(0.0).into_data());
  const auto& p = golden("tensor_ops", "pixel_shuffle");
  const auto px = p.tensor<B, 4>("x");
  EXPECT_EXACT(F::pixel_shuffle(px.gt(0.0), 2), F::pixel_shuffle(px, 2).gt(0.0).into_data());
}
