// Conformance: matmul against PyTorch golden values (tests/golden/gen_matmul.py): 2-d,
// batched, broadcast batch dims, transposed and strided views, empty and non-finite
// operands, every float dtype, and the error messages.
#include "backends.hpp"
#include "golden.hpp"

#include <algorithm>
#include <cmath>

using namespace kiln;
using kiln::test::golden;

KILN_BACKEND_TEST_SUITE(Matmul);

namespace {

constexpr DType kFloatDTypes[] = {DType::f32, DType::f64};
// f32 sums of a few products of N(0, 1) numbers: relative error ~1e-7 with absolute slack for cancellation.
double rtol_for(DType dtype) { return dtype == DType::f32 ? 1e-5 : 1e-12; }
double atol_for(DType dtype) { return dtype == DType::f32 ? 1e-5 : 1e-12; }

}  // namespace

TYPED_TEST(Matmul, TwoDimensionalMatchesTorch) {
  using B = TypeParam;
  const auto& c = golden("matmul", "mm");
  for (DType dtype : kFloatDTypes) {
    const auto out = c.tensor<B, 2>("a", dtype).matmul(c.tensor<B, 2>("b", dtype));
    EXPECT_EQ(out.dtype(), dtype);
    EXPECT_CLOSE(out, c["out"], rtol_for(dtype), atol_for(dtype));
  }
}

TYPED_TEST(Matmul, BatchedMatchesTorch) {
  using B = TypeParam;
  const auto& c = golden("matmul", "batched");
  for (DType dtype : kFloatDTypes)
    EXPECT_CLOSE(c.tensor<B, 3>("a", dtype).matmul(c.tensor<B, 3>("b", dtype)), c["out"], rtol_for(dtype),
                 atol_for(dtype));
}

TYPED_TEST(Matmul, BroadcastsSizeOneBatchDims) {
  using B = TypeParam;
  const auto& c = golden("matmul", "broadcast");  // [2, 1, 3, 4] @ [1, 5, 4, 6] -> [2, 5, 3, 6]
  for (DType dtype : kFloatDTypes) {
    const auto out = c.tensor<B, 4>("a", dtype).matmul(c.tensor<B, 4>("b", dtype));
    EXPECT_EQ(out.shape(), (Shape{2, 5, 3, 6}));
    EXPECT_CLOSE(out, c["out"], rtol_for(dtype), atol_for(dtype));
  }
}

TYPED_TEST(Matmul, SharedRightOperandAcrossTheBatch) {
  using B = TypeParam;
  const auto& c = golden("matmul", "shared_rhs");  // [2, 3, 4] @ [1, 4, 5]
  for (DType dtype : kFloatDTypes) {
    EXPECT_CLOSE(c.tensor<B, 3>("a", dtype).matmul(c.tensor<B, 3>("b", dtype)), c["out"], rtol_for(dtype),
                 atol_for(dtype));
    // The same with the shared operand expanded to the full batch (stride-0 batch dim).
    const auto b = c.tensor<B, 3>("b", dtype).template expand<3>({2, 4, 5});
    EXPECT_CLOSE(c.tensor<B, 3>("a", dtype).matmul(b), c["out"], rtol_for(dtype), atol_for(dtype));
  }
}

TYPED_TEST(Matmul, TransposedViewsAsOperands) {
  using B = TypeParam;
  const auto& c = golden("matmul", "transposed");
  for (DType dtype : kFloatDTypes) {
    const auto a = c.tensor<B, 3>("a_t", dtype).transpose();
    const auto b = c.tensor<B, 3>("b_t", dtype).transpose();
    EXPECT_CLOSE(a.matmul(b), c["out"], rtol_for(dtype), atol_for(dtype));
    // Mixed: a transposed view times a plain (contiguous) operand.
    EXPECT_CLOSE(a.matmul(b * 1.0), c["out"], rtol_for(dtype), atol_for(dtype));
  }
}

TYPED_TEST(Matmul, StridedAndBroadcastMatrices) {
  using B = TypeParam;
  const auto& c = golden("matmul", "strided");
  for (DType dtype : kFloatDTypes) {
    const auto a = c.tensor<B, 2>("a_wide", dtype).slice({ops::Slice(), ops::Slice(std::nullopt, std::nullopt, 2)});
    EXPECT_CLOSE(a.matmul(c.tensor<B, 2>("b", dtype)), c["out"], rtol_for(dtype), atol_for(dtype));
  }
  // A row broadcast to every row (stride 0 inside the matrix) gives identical output rows.
  const auto row = Tensor<B, 2>::from({{1.0f, 2.0f, 3.0f}}).template expand<2>({4, 3});
  const auto m = Tensor<B, 2>::from({{1.0f, 0.0f}, {0.0f, 1.0f}, {1.0f, 1.0f}});
  EXPECT_CLOSE(row.matmul(m), Tensor<B, 2>::from({{4.0f, 5.0f}, {4.0f, 5.0f}, {4.0f, 5.0f}, {4.0f, 5.0f}}).into_data());
}

TYPED_TEST(Matmul, PropagatesNanAndInf) {
  using B = TypeParam;
  const auto& c = golden("matmul", "nonfinite");
  for (DType dtype : kFloatDTypes)
    EXPECT_CLOSE(c.tensor<B, 2>("a", dtype).matmul(c.tensor<B, 2>("b", dtype)), c["out"], rtol_for(dtype),
                 atol_for(dtype));
}

TYPED_TEST(Matmul, EmptyInnerDimGivesZeros) {
  using B = TypeParam;
  for (DType dtype : kFloatDTypes) {
    const auto out = Tensor<B, 3>::zeros({2, 3, 0}, {}, dtype).matmul(Tensor<B, 3>::zeros({2, 0, 4}, {}, dtype));
    EXPECT_EQ(out.shape(), (Shape{2, 3, 4}));
    EXPECT_CLOSE(out, Tensor<B, 3>::zeros({2, 3, 4}, {}, dtype).into_data());
  }
}

TYPED_TEST(Matmul, EmptyOuterDimsGiveEmptyResults) {
  using B = TypeParam;
  using M2 = Tensor<B, 2>;
  using M3 = Tensor<B, 3>;
  EXPECT_EQ(M2::zeros({0, 4}).matmul(M2::zeros({4, 5})).shape(), (Shape{0, 5}));
  EXPECT_EQ(M2::zeros({3, 4}).matmul(M2::zeros({4, 0})).shape(), (Shape{3, 0}));
  EXPECT_EQ(M3::zeros({0, 3, 4}).matmul(M3::zeros({1, 4, 5})).shape(), (Shape{0, 3, 5}));
}

// Sizes past the GEMM's blocking and batches that take the one-GEMM-per-thread path:
// the f32 path (oneDNN) must agree with the f64 path (Eigen) on the same numbers.
TYPED_TEST(Matmul, F32AgreesWithF64OnLargerShapes) {
  using B = TypeParam;
  struct Case {
    std::array<std::int64_t, 3> a, b;
    bool transpose_b, transpose_a = false;
  };
  for (const Case& k : {Case{{1, 130, 70}, {1, 70, 90}, false}, Case{{6, 17, 33}, {6, 33, 9}, true},
                        Case{{5, 40, 64}, {1, 64, 48}, false}, Case{{3, 64, 300}, {3, 300, 64}, true},
                        // Large enough that the CPU copies a transposed B to row-major first, with
                        // sizes that are no multiple of a register width; alone, and one per thread.
                        Case{{1, 256, 515}, {1, 515, 260}, true}, Case{{2, 256, 520}, {2, 520, 270}, true},
                        // Tall, narrow and long with A transposed, which the CPU computes as the
                        // transpose of Bᵀ A and transposes into the result, with sizes that are no
                        // multiple of a register width: alone with B as it lies, and one per
                        // thread with B transposed.
                        Case{{1, 2050, 1030}, {1, 1030, 70}, false, true},
                        Case{{2, 2050, 1030}, {2, 1030, 70}, true, true}}) {
    const auto a = Tensor<B, 3>::random(k.a, Distribution::normal(0, 1), {}, DType::f64);
    const auto b = Tensor<B, 3>::random(k.b, Distribution::normal(0, 1), {}, DType::f64);
    // The same values, read through a transposed view (a cast would lay them out afresh).
    const auto transposed = [](const Tensor<B, 3>& x) { return (x.transpose() * 1.0).transpose(); };
    const auto read_a = [&](const Tensor<B, 3>& x) { return k.transpose_a ? transposed(x) : x; };
    const auto read_b = [&](const Tensor<B, 3>& x) { return k.transpose_b ? transposed(x) : x; };
    const auto expected = read_a(a).matmul(read_b(b)).into_data();
    const auto got = read_a(a.cast(DType::f32)).matmul(read_b(b.cast(DType::f32)));
    // An f32 sum of k products of unit normals errs by about sqrt(k) roundings of its size
    // (sqrt(k)): 1e-4 up to k = 64, 4e-4 at k = 1030 (where a backend summing in order came
    // within 1.2e-4). A wrong operand or a dropped row is off by about 1.
    const double tolerance = 1e-4 * std::max(1.0, std::sqrt(static_cast<double>(k.a[2]) / 64));
    EXPECT_CLOSE(got, expected.convert(DType::f32), tolerance, tolerance);
  }
}

// Batches of small products whose matrices lie unevenly (a broadcast or sliced batch dim) or
// evenly with gaps between them (a batch dim taken with a step): the CPU runs evenly spaced
// batches as one batched product and the rest one product at a time; the f32 path must agree
// with the f64 path on the same numbers either way.
TYPED_TEST(Matmul, F32AgreesWithF64OnSpacedAndBroadcastBatches) {
  using B = TypeParam;
  const auto a64 = Tensor<B, 4>::random({2, 4, 17, 33}, Distribution::normal(0, 1), {}, DType::f64);
  const auto b64 = Tensor<B, 4>::random({1, 4, 33, 9}, Distribution::normal(0, 1), {}, DType::f64);
  const auto a32 = a64.cast(DType::f32), b32 = b64.cast(DType::f32);
  using ops::Slice;
  const auto check = [](const auto& a, const auto& b, const auto& a_wide, const auto& b_wide) {
    SCOPED_TRACE(a.shape().str() + " @ " + b.shape().str());
    EXPECT_CLOSE(a.matmul(b), a_wide.matmul(b_wide).into_data().convert(DType::f32), 1e-4, 1e-4);
  };
  const std::vector<Slice> all{Slice(), Slice(), Slice(), Slice()};
  const std::vector<Slice> first_three{Slice(), Slice(0, 3), Slice(), Slice()};
  const std::vector<Slice> every_other{Slice(), Slice(std::nullopt, std::nullopt, 2), Slice(), Slice()};
  for (const auto& cut : {all, first_three, every_other})
    check(a32.slice(cut), b32.slice(cut), a64.slice(cut), b64.slice(cut));
  // Every other matrix of one batch dim: evenly spaced, two matrices apart.
  const std::vector<Slice> step{Slice(std::nullopt, std::nullopt, 2), Slice(), Slice()};
  const auto a3 = a64.template reshape<3>({8, 17, 33}), b3 = a3.transpose();
  check(a3.cast(DType::f32).slice(step), b3.cast(DType::f32).slice(step), a3.slice(step), b3.slice(step));
}

TYPED_TEST(Matmul, HalfPrecisionComputesThroughF32) {
  using B = TypeParam;
  const auto& c = golden("matmul", "mm");
  for (DType dtype : {DType::f16, DType::bf16}) {
    const auto out = c.tensor<B, 2>("a", dtype).matmul(c.tensor<B, 2>("b", dtype));
    EXPECT_EQ(out.dtype(), dtype);
    // Inputs and output are rounded to 8 (bf16) or 11 (f16) significant bits.
    EXPECT_CLOSE(out.cast(DType::f32), c["out"].convert(DType::f32), 5e-2, 5e-2);
  }
}

TYPED_TEST(Matmul, RejectsMismatchedShapesAndDtypes) {
  using B = TypeParam;
  const auto a = Tensor<B, 2>::zeros({2, 3});
  EXPECT_KILN_ERROR(a.matmul(Tensor<B, 2>::zeros({4, 5})), "matmul: inner dims do not match: [2, 3] @ [4, 5]");
  EXPECT_KILN_ERROR(a.matmul(Tensor<B, 2>::zeros({3, 5}, {}, DType::f64)), "matmul: dtypes differ: [2, 3] f32");
  const auto batch_a = Tensor<B, 3>::zeros({2, 3, 4});
  const auto batch_b = Tensor<B, 3>::zeros({3, 4, 5});
  EXPECT_KILN_ERROR(batch_a.matmul(batch_b),
                    "matmul: batch dims of [2, 3, 4] and [3, 4, 5] do not broadcast");
  // The primitive checks too (callers above the tensor layer, such as autodiff, reach it directly).
  EXPECT_KILN_ERROR(B::matmul(a.primitive(), Tensor<B, 2>::zeros({4, 5}).primitive()),
                    "matmul: inner dims do not match: [2, 3] @ [4, 5]");
  EXPECT_KILN_ERROR(B::matmul(Tensor<B, 1>::zeros({3}).primitive(), a.primitive()),
                    "matmul: both operands need at least 2 dims");
}
