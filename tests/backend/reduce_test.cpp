// Conformance: reductions, arg-reductions, composites (var, std, norm, logsumexp, any/all),
// scans and sorting against PyTorch golden values (tests/golden/gen_reduce.py), plus
// large-tensor checks against a host f64 reference, empty tensors and bad input.
#include "backends.hpp"
#include "golden.hpp"

#include <cmath>
#include <limits>
#include <vector>

using namespace kiln;
using kiln::test::golden;

KILN_BACKEND_TEST_SUITE(Reduce);

namespace {

constexpr DType kFloatDTypes[] = {DType::f32, DType::f64};
double rtol_of(DType dtype) { return dtype == DType::f32 ? 1e-5 : 1e-12; }
double atol_of(DType dtype) { return dtype == DType::f32 ? 1e-6 : 1e-12; }
std::string dim_label(std::int64_t dim, std::int64_t rank) { return std::to_string(dim < 0 ? dim + rank : dim); }

// Host reference of a reduction over dim of a [outer, n, inner] tensor, in f64.
enum class Ref { sum, max, min, argmax };
std::vector<double> host_reduce(const std::vector<double>& x, std::int64_t outer, std::int64_t n, std::int64_t inner,
                                Ref op) {
  std::vector<double> out(static_cast<std::size_t>(outer * inner));
  for (std::int64_t o = 0; o < outer; ++o) {
    for (std::int64_t i = 0; i < inner; ++i) {
      double acc = op == Ref::sum ? 0.0 : x[static_cast<std::size_t>(o * n * inner + i)];
      std::int64_t best = 0;
      for (std::int64_t j = 0; j < n; ++j) {
        const double v = x[static_cast<std::size_t>((o * n + j) * inner + i)];
        if (op == Ref::sum) acc += v;
        if ((op == Ref::max || op == Ref::argmax) && v > acc) acc = v, best = j;
        if (op == Ref::min && v < acc) acc = v;
      }
      out[static_cast<std::size_t>(o * inner + i)] = op == Ref::argmax ? static_cast<double>(best) : acc;
    }
  }
  return out;
}

TensorData host_data(const std::vector<double>& values, const Shape& shape, DType dtype) {
  return TensorData::from(values, shape).convert(dtype);
}

}  // namespace

// ---- sum, mean, prod, max, min over all elements and over each dim (negative dims too)

TYPED_TEST(Reduce, BasicReductionsMatchTorchOverAllAndEachDim) {
  using B = TypeParam;
  const auto& c = golden("reduce", "basic");
  for (DType dtype : kFloatDTypes) {
    SCOPED_TRACE(dtype_name(dtype));
    const auto x = c.tensor<B, 3>("x", dtype);
    const double rtol = rtol_of(dtype), atol = atol_of(dtype);
    EXPECT_CLOSE(x.sum(), c["sum_all"], rtol, atol);
    EXPECT_CLOSE(x.mean(), c["mean_all"], rtol, atol);
    EXPECT_CLOSE(x.prod(), c["prod_all"], rtol, atol);
    EXPECT_CLOSE(x.max(), c["max_all"], rtol, atol);
    EXPECT_CLOSE(x.min(), c["min_all"], rtol, atol);
    for (std::int64_t dim : {0, 1, 2, -1, -2, -3}) {
      SCOPED_TRACE(dim);
      const std::string d = dim_label(dim, 3);
      EXPECT_CLOSE(x.sum_dim(dim), c["sum_" + d], rtol, atol);
      EXPECT_CLOSE(x.mean_dim(dim), c["mean_" + d], rtol, atol);
      EXPECT_CLOSE(x.prod_dim(dim), c["prod_" + d], rtol, atol);
      EXPECT_CLOSE(x.max_dim(dim), c["max_" + d], rtol, atol);
      EXPECT_CLOSE(x.min_dim(dim), c["min_" + d], rtol, atol);
    }
  }
}

TYPED_TEST(Reduce, HalfPrecisionReducesThroughF32) {
  using B = TypeParam;
  const auto& c = golden("reduce", "basic");
  for (DType dtype : {DType::f16, DType::bf16}) {
    SCOPED_TRACE(dtype_name(dtype));
    const auto x = c.tensor<B, 3>("x", dtype);
    const auto sum = x.sum_dim(1);
    EXPECT_EQ(sum.dtype(), dtype);
    // The input itself is rounded to 8 (bf16) or 11 (f16) bits, so compare loosely.
    EXPECT_CLOSE(sum, c["sum_1"], 2e-2, 2e-2);
    EXPECT_CLOSE(x.max_dim(2), c["max_2"], 1e-2, 1e-3);
    EXPECT_CLOSE(x.mean(), c["mean_all"], 2e-2, 2e-2);
    EXPECT_CLOSE(x.argmax(2), x.cast(DType::f32).argmax(2).into_data());
    EXPECT_CLOSE(x.cumsum(2), x.cast(DType::f32).cumsum(2).cast(dtype).into_data(), 1e-2, 1e-2);
  }
}

// ---- arg-reductions

TYPED_TEST(Reduce, ArgmaxArgminPickTheFirstOfTies) {
  using B = TypeParam;
  const auto& c = golden("reduce", "arg_ties");
  for (DType dtype : kFloatDTypes) {
    const auto x = c.tensor<B, 2>("x", dtype);
    EXPECT_CLOSE(x.argmax(0), c["argmax_0"]);
    EXPECT_CLOSE(x.argmax(1), c["argmax_1"]);
    EXPECT_CLOSE(x.argmax(-1), c["argmax_1"]);
    EXPECT_CLOSE(x.argmin(0), c["argmin_0"]);
    EXPECT_CLOSE(x.argmin(1), c["argmin_1"]);
    EXPECT_EQ(x.argmax(1).dtype(), DType::i64);
  }
}

TYPED_TEST(Reduce, MaxMinDimWithIndicesReturnValuesAndFirstIndices) {
  using B = TypeParam;
  const auto& c = golden("reduce", "arg_ties");
  const auto x = c.tensor<B, 2>("x", DType::f32);
  const auto [max_values, max_indices] = x.max_dim_with_indices(1);
  EXPECT_CLOSE(max_values, c["max_1"]);
  EXPECT_CLOSE(max_indices, c["argmax_1"]);
  const auto [min_values, min_indices] = x.min_dim_with_indices(0);
  EXPECT_CLOSE(min_values, c["min_0"]);
  EXPECT_CLOSE(min_indices, c["argmin_0"]);
}

// ---- NaN

TYPED_TEST(Reduce, NanPropagatesThroughMaxMinSumAndWinsArgmaxArgmin) {
  using B = TypeParam;
  const auto& c = golden("reduce", "nan");
  for (DType dtype : kFloatDTypes) {
    SCOPED_TRACE(dtype_name(dtype));
    const auto x = c.tensor<B, 2>("x", dtype);
    EXPECT_CLOSE(x.max_dim(1), c["max_1"]);
    EXPECT_CLOSE(x.min_dim(1), c["min_1"]);
    EXPECT_CLOSE(x.sum_dim(1), c["sum_1"]);
    EXPECT_CLOSE(x.max_dim(0), c["max_0"]);
    EXPECT_CLOSE(x.max(), c["max_all"]);
    EXPECT_CLOSE(x.sum(), c["sum_all"]);
    EXPECT_CLOSE(x.argmax(1), c["argmax_1"]);
    EXPECT_CLOSE(x.argmin(1), c["argmin_1"]);
    EXPECT_CLOSE(x.argmax(0), c["argmax_0"]);
  }
}

// ---- composites

TYPED_TEST(Reduce, VarAndStdMatchTorchWithCorrectionZeroAndOne) {
  using B = TypeParam;
  const auto& c = golden("reduce", "var_std");
  for (DType dtype : kFloatDTypes) {
    SCOPED_TRACE(dtype_name(dtype));
    const auto x = c.tensor<B, 2>("x", dtype);
    for (std::int64_t correction : {0, 1}) {
      for (std::int64_t dim : {0, 1, -1}) {
        const std::string tag = "c" + std::to_string(correction) + "_" + dim_label(dim, 2);
        EXPECT_CLOSE(x.var(dim, correction), c["var_" + tag], rtol_of(dtype), atol_of(dtype));
        EXPECT_CLOSE(x.std(dim, correction), c["std_" + tag], rtol_of(dtype), atol_of(dtype));
      }
    }
    EXPECT_CLOSE(x.var(1), c["var_c1_1"], rtol_of(dtype), atol_of(dtype));  // Bessel's correction by default
  }
}

TYPED_TEST(Reduce, NormMatchesTorchForP1P2P3InfZeroAndMinusInf) {
  using B = TypeParam;
  const auto& c = golden("reduce", "norm");
  const std::pair<const char*, double> ps[] = {{"1", 1.0},
                                               {"2", 2.0},
                                               {"3", 3.0},
                                               {"inf", std::numeric_limits<double>::infinity()},
                                               {"0", 0.0},
                                               {"ninf", -std::numeric_limits<double>::infinity()}};
  for (DType dtype : kFloatDTypes) {
    SCOPED_TRACE(dtype_name(dtype));
    const auto x = c.tensor<B, 2>("x", dtype);
    for (const auto& [label, p] : ps) {
      SCOPED_TRACE(label);
      const std::string tag = std::string("norm_") + label;
      EXPECT_CLOSE(x.norm_dim(p, 1), c[tag + "_1"], rtol_of(dtype), atol_of(dtype));
      EXPECT_CLOSE(x.norm_dim(p, 0), c[tag + "_0"], rtol_of(dtype), atol_of(dtype));
      EXPECT_CLOSE(x.norm(p), c[tag + "_all"], rtol_of(dtype), atol_of(dtype));
    }
  }
}

TYPED_TEST(Reduce, LogsumexpIsStableAndHandlesInfiniteRows) {
  using B = TypeParam;
  const auto& c = golden("reduce", "logsumexp");
  for (DType dtype : kFloatDTypes) {
    SCOPED_TRACE(dtype_name(dtype));
    const auto x = c.tensor<B, 2>("x", dtype);
    EXPECT_CLOSE(x.logsumexp(1), c["lse_1"], rtol_of(dtype), atol_of(dtype));
    EXPECT_CLOSE(x.logsumexp(0), c["lse_0"], rtol_of(dtype), atol_of(dtype));
  }
}

TYPED_TEST(Reduce, AnyAllOnBoolIntAndFloatTensors) {
  using B = TypeParam;
  auto check = [](const auto& x, const kiln::test::GoldenCase& c) {
    EXPECT_CLOSE(x.any(), c["any_all"]);
    EXPECT_CLOSE(x.all(), c["all_all"]);
    EXPECT_CLOSE(x.any_dim(0), c["any_0"]);
    EXPECT_CLOSE(x.any_dim(-1), c["any_1"]);
    EXPECT_CLOSE(x.all_dim(0), c["all_0"]);
    EXPECT_CLOSE(x.all_dim(1), c["all_1"]);
    EXPECT_EQ(x.any_dim(0).dtype(), DType::boolean);
  };
  const auto& cb = golden("reduce", "any_all_bool");
  check(cb.tensor<B, 2, Bool>("x"), cb);
  const auto& ci = golden("reduce", "any_all_int");
  check(ci.tensor<B, 2, Int>("x"), ci);
  check(ci.tensor<B, 2, Int>("x", DType::i32), ci);
  const auto& cf = golden("reduce", "any_all_float");
  check(cf.tensor<B, 2>("x", DType::f32), cf);
  check(cf.tensor<B, 2>("x", DType::f64), cf);
}

// ---- scans

TYPED_TEST(Reduce, CumsumAndCumprodMatchTorch) {
  using B = TypeParam;
  const auto& c = golden("reduce", "cumulative");
  for (DType dtype : kFloatDTypes) {
    SCOPED_TRACE(dtype_name(dtype));
    const auto x = c.tensor<B, 2>("x", dtype);
    EXPECT_CLOSE(x.cumsum(0), c["cumsum_0"], rtol_of(dtype), atol_of(dtype));
    EXPECT_CLOSE(x.cumsum(1), c["cumsum_1"], rtol_of(dtype), atol_of(dtype));
    EXPECT_CLOSE(x.cumsum(-1), c["cumsum_1"], rtol_of(dtype), atol_of(dtype));
    EXPECT_CLOSE(x.cumprod(0), c["cumprod_0"], rtol_of(dtype), atol_of(dtype));
    EXPECT_CLOSE(x.cumprod(1), c["cumprod_1"], rtol_of(dtype), atol_of(dtype));
  }
}

// ---- sorting

TYPED_TEST(Reduce, SortIsStableWithNanLastAscendingAndFirstDescending) {
  using B = TypeParam;
  const auto& c = golden("reduce", "sort");
  for (DType dtype : kFloatDTypes) {
    SCOPED_TRACE(dtype_name(dtype));
    const auto x = c.tensor<B, 2>("x", dtype);
    for (std::int64_t dim : {0, 1}) {
      for (bool descending : {false, true}) {
        const std::string tag = std::string(descending ? "desc_" : "asc_") + std::to_string(dim);
        SCOPED_TRACE(tag);
        const auto [values, indices] = x.sort_with_indices(dim, descending);
        EXPECT_CLOSE(values, c[tag + "_values"]);
        EXPECT_CLOSE(indices, c[tag + "_indices"]);  // exact: stability fixes the order of equal values
        EXPECT_CLOSE(x.sort(dim, descending), c[tag + "_values"]);
        EXPECT_CLOSE(x.argsort(dim, descending), c[tag + "_indices"]);
      }
    }
    EXPECT_CLOSE(x.sort(), c["asc_1_values"]);  // defaults: last dim, ascending
  }
}

TYPED_TEST(Reduce, TopkReturnsTheLargestFirst) {
  using B = TypeParam;
  const auto& c = golden("reduce", "topk");
  for (DType dtype : kFloatDTypes) {
    const auto x = c.tensor<B, 2>("x", dtype);
    const auto [v1, i1] = x.topk_with_indices(3, 1);
    EXPECT_CLOSE(v1, c["top3_1_values"]);
    EXPECT_CLOSE(i1, c["top3_1_indices"]);
    EXPECT_CLOSE(x.topk(3), c["top3_1_values"]);
    const auto [v0, i0] = x.topk_with_indices(2, 0);
    EXPECT_CLOSE(v0, c["top2_0_values"]);
    EXPECT_CLOSE(i0, c["top2_0_indices"]);
    EXPECT_EQ(x.topk(0).numel(), 0);
  }
}

// ---- Int tensors

TYPED_TEST(Reduce, IntTensorsReduceScanAndSortInTheirOwnDtype) {
  using B = TypeParam;
  const auto& c = golden("reduce", "int");
  for (DType dtype : {DType::i64, DType::i32}) {
    SCOPED_TRACE(dtype_name(dtype));
    const auto x = c.tensor<B, 2, Int>("x", dtype);
    EXPECT_EQ(x.sum().dtype(), dtype);
    EXPECT_CLOSE(x.sum(), c["sum_all"]);
    EXPECT_CLOSE(x.sum_dim(1), c["sum_1"]);
    EXPECT_CLOSE(x.sum_dim(0), c["sum_0"]);
    EXPECT_CLOSE(x.prod_dim(0), c["prod_0"]);
    EXPECT_CLOSE(x.prod(), c["prod_all"]);
    EXPECT_CLOSE(x.max_dim(1), c["max_1"]);
    EXPECT_CLOSE(x.min(), c["min_all"]);
    EXPECT_CLOSE(x.argmax(1), c["argmax_1"]);
    EXPECT_CLOSE(x.argmin(0), c["argmin_0"]);
    EXPECT_CLOSE(x.cumsum(1), c["cumsum_1"]);
    EXPECT_CLOSE(x.cumprod(0), c["cumprod_0"]);
    const auto [values, indices] = x.sort_with_indices(1);
    EXPECT_CLOSE(values, c["sort_1_values"]);
    EXPECT_CLOSE(indices, c["sort_1_indices"]);
  }
}

TYPED_TEST(Reduce, IntSumsAccumulateWiderThanTheInput) {
  using B = TypeParam;
  // 300 * 200 = 60000 overflows u8 partial sums but the result is taken modulo 256, as a u8 sum is.
  const auto x = Tensor<B, 1, Int>::full({300}, 200.0, {}, DType::u8);
  EXPECT_EQ(x.sum().item(), (300 * 200) % 256);
  // An i64 sum beyond 2^53 stays exact (no detour through double).
  const std::int64_t big = (std::int64_t{1} << 60) + 1;
  const auto y = Tensor<B, 1, Int>::from_data(TensorData::from(std::vector<std::int64_t>{big, 3, -big}, Shape{3}));
  EXPECT_EQ(y.sum().into_data().template as<std::int64_t>()[0], 3);
  EXPECT_EQ(y.cumsum(0).into_data().template as<std::int64_t>()[1], big + 3);
}

// ---- non-contiguous input

TYPED_TEST(Reduce, TransposedViewsReduceScanAndSortLikeContiguousOnes) {
  using B = TypeParam;
  const auto& c = golden("reduce", "transposed");
  for (DType dtype : kFloatDTypes) {
    SCOPED_TRACE(dtype_name(dtype));
    const auto t = c.tensor<B, 2>("x", dtype).transpose();  // a [3, 4] view with strides [1, 3]
    EXPECT_CLOSE(t.sum_dim(1), c["sum_1"], rtol_of(dtype), atol_of(dtype));
    EXPECT_CLOSE(t.sum_dim(0), c["sum_0"], rtol_of(dtype), atol_of(dtype));
    EXPECT_CLOSE(t.max_dim(0), c["max_0"], rtol_of(dtype), atol_of(dtype));
    EXPECT_CLOSE(t.mean(), c["mean_all"], rtol_of(dtype), atol_of(dtype));
    EXPECT_CLOSE(t.argmax(1), c["argmax_1"]);
    EXPECT_CLOSE(t.cumsum(1), c["cumsum_1"], rtol_of(dtype), atol_of(dtype));
    EXPECT_CLOSE(t.var(1), c["var_1"], rtol_of(dtype), atol_of(dtype));
    const auto [values, indices] = t.sort_with_indices(1);
    EXPECT_CLOSE(values, c["sort_1_values"]);
    EXPECT_CLOSE(indices, c["sort_1_indices"]);
  }
}

TYPED_TEST(Reduce, StridedSliceViewsReduceCorrectly) {
  using B = TypeParam;
  // Every other column of a [4, 10] iota: a view with a step, so neither contiguous nor dense.
  std::vector<double> values(40);
  for (std::size_t i = 0; i < values.size(); ++i) values[i] = static_cast<double>(i);
  const auto x = Tensor<B, 2>::from_data(host_data(values, Shape{4, 10}, DType::f32));
  const auto v = x.slice({ops::Slice(), ops::Slice(1, std::nullopt, 2)});  // columns 1, 3, 5, 7, 9
  EXPECT_CLOSE(v.sum(), host_data({4.0 * 25 + 10.0 * 5 * 6}, Shape{1}, DType::f64));
  EXPECT_CLOSE(v.sum_dim(1), host_data({25, 75, 125, 175}, Shape{4, 1}, DType::f64));
  EXPECT_CLOSE(v.max_dim(0), host_data({31, 33, 35, 37, 39}, Shape{1, 5}, DType::f64));
  EXPECT_CLOSE(v.argmin(1), host_data({0, 0, 0, 0}, Shape{4, 1}, DType::i64));
}

// ---- large tensors: the tiled, partitioned and multi-threaded paths against a host reference

TYPED_TEST(Reduce, LargeReductionsOverEveryLayoutMatchAHostReference) {
  using B = TypeParam;
  manual_seed(7);
  // [outer, n, inner] shapes chosen to hit: long rows split into parts, narrow columns (inner <= 8)
  // with and without parts, wide tiled columns, columns split into parts, many short rows, and
  // deep pairwise column sums without a split.
  const std::vector<std::array<std::int64_t, 3>> shapes = {
      {3, 100003, 1}, {1, 70001, 4}, {2, 50000, 3}, {5, 40, 1500}, {1, 9001, 37}, {700, 3, 9}, {4096, 33, 1},
      {33, 700, 20}, {64, 1000, 3}};
  for (const auto& dims : shapes) {
    SCOPED_TRACE(Shape({dims[0], dims[1], dims[2]}).str());
    const auto x = Tensor<B, 3>::random(dims, Distribution::uniform(-1.0, 1.0), {}, DType::f32);
    const auto host = x.template to_vec<double>();
    const Shape out_shape{dims[0], 1, dims[2]};
    const auto ref = [&](Ref op) {
      return host_data(host_reduce(host, dims[0], dims[1], dims[2], op), out_shape,
                       op == Ref::argmax ? DType::i64 : DType::f64);
    };
    // f32 sums of up to 1e5 values in [-1, 1]: compare against the f64 sum with an absolute margin.
    EXPECT_CLOSE(x.sum_dim(1), ref(Ref::sum), 1e-6, 1e-4);
    EXPECT_CLOSE(x.max_dim(1), ref(Ref::max), 0.0, 0.0);
    EXPECT_CLOSE(x.min_dim(1), ref(Ref::min), 0.0, 0.0);
    EXPECT_CLOSE(x.argmax(1), ref(Ref::argmax));
    EXPECT_CLOSE(x.cast(DType::f64).sum_dim(1), ref(Ref::sum), 1e-12, 1e-10);
  }
}

TYPED_TEST(Reduce, NanInALaterPartStillPropagates) {
  using B = TypeParam;
  std::vector<double> values(200000, 1.0);
  values[150001] = std::nan("");
  for (DType dtype : kFloatDTypes) {
    const auto x = Tensor<B, 1>::from_data(host_data(values, Shape{200000}, dtype));
    EXPECT_TRUE(std::isnan(x.max().item()));
    EXPECT_TRUE(std::isnan(x.min().item()));
    EXPECT_TRUE(std::isnan(x.sum().item()));
    EXPECT_EQ(x.template reshape<2>({1, -1}).argmax(1).item(), 150001);
    EXPECT_EQ(x.template reshape<2>({-1, 4}).max_dim(0).isnan().to_int().sum().item(), 1);
  }
}

TYPED_TEST(Reduce, LargeScanAndSortMatchAHostReference) {
  using B = TypeParam;
  manual_seed(11);
  constexpr std::size_t rows = 301, cols = 257;  // rows: four-row groups of the row scan, then a tail
  const auto x = Tensor<B, 2>::random({rows, cols}, Distribution::uniform(-1.0, 1.0), {}, DType::f32);
  const auto host = x.template to_vec<double>();
  std::vector<double> down(host.size()), across(host.size());
  for (std::size_t i = 0; i < cols; ++i) {
    double acc = 0;
    for (std::size_t j = 0; j < rows; ++j) down[j * cols + i] = acc += host[j * cols + i];
  }
  for (std::size_t j = 0; j < rows; ++j) {
    double acc = 0;
    for (std::size_t i = 0; i < cols; ++i) across[j * cols + i] = acc += host[j * cols + i];
  }
  EXPECT_CLOSE(x.cumsum(0), host_data(down, Shape{rows, cols}, DType::f64), 1e-5, 1e-5);
  EXPECT_CLOSE(x.cumsum(1), host_data(across, Shape{rows, cols}, DType::f64), 1e-5, 1e-5);
  // Sorting along dim 0 (strided slices) of rounded values: many ties, so stability matters.
  const auto r = x.mul(4.0).round();
  const auto [values, indices] = r.sort_with_indices(0, true);
  const auto v = values.template to_vec<double>();
  const auto idx = indices.template to_vec<std::int64_t>();
  const auto rh = r.template to_vec<double>();
  for (std::size_t i = 0; i < cols; ++i) {
    for (std::size_t j = 0; j + 1 < rows; ++j) {
      const double a = v[j * cols + i], b = v[(j + 1) * cols + i];
      ASSERT_GE(a, b);
      if (a == b) ASSERT_LT(idx[j * cols + i], idx[(j + 1) * cols + i]);
      ASSERT_EQ(rh[static_cast<std::size_t>(idx[j * cols + i]) * cols + i], a);
    }
  }
}

TYPED_TEST(Reduce, ResultsDoNotDependOnTheThreadCount) {
  using B = TypeParam;
  if constexpr (std::is_same_v<B, Cpu>) {
    manual_seed(5);
    const auto x = Tensor<B, 2>::random({3, 300001}, Distribution::uniform(-1.0, 1.0));
    const auto y = Tensor<B, 2>::random({70001, 5}, Distribution::uniform(-1.0, 1.0));
    const int threads = cpu::num_threads();
    cpu::set_num_threads(1);
    const auto rows1 = x.sum_dim(1).template to_vec<double>(), cols1 = y.sum_dim(0).template to_vec<double>();
    const double all1 = x.sum().item();
    cpu::set_num_threads(std::max(2, threads));
    const auto rows2 = x.sum_dim(1).template to_vec<double>(), cols2 = y.sum_dim(0).template to_vec<double>();
    const double all2 = x.sum().item();
    cpu::set_num_threads(threads);
    EXPECT_EQ(rows1, rows2);
    EXPECT_EQ(cols1, cols2);
    EXPECT_EQ(all1, all2);
  }
}

// ---- accuracy

TYPED_TEST(Reduce, SumOfAMillionF32ValuesStaysAccurate) {
  using B = TypeParam;
  constexpr std::int64_t n = 1 << 20;
  const auto tenths = Tensor<B, 1>::full({n}, 0.1, {}, DType::f32);
  const double tenth = static_cast<double>(0.1f);
  EXPECT_NEAR(tenths.sum().item(), tenth * n, tenth * n * 1e-6);
  EXPECT_NEAR(tenths.mean().item(), tenth, tenth * 1e-6);
  manual_seed(3);
  const auto x = Tensor<B, 1>::random({n}, Distribution::uniform(0.0, 1.0), {}, DType::f32);
  double reference = 0.0;
  for (double v : x.template to_vec<double>()) reference += v;
  EXPECT_NEAR(x.sum().item(), reference, std::abs(reference) * 1e-6);
  // The same values as one column: the middle-dim path is accurate too.
  EXPECT_NEAR(x.template reshape<2>({n / 2, 2}).sum_dim(0).sum().item(), reference, std::abs(reference) * 1e-6);
  EXPECT_NEAR(x.template reshape<2>({n / 64, 64}).sum_dim(0).sum().item(), reference, std::abs(reference) * 1e-6);
}

// The CPU's f32 sums add a few elements in f32 (a pair, or with AVX-512 a tree of eight) and
// those sums in f64: a million copies of one value sum to that value times a million rounded
// once, as summing every element in f64 does (f32 lanes of 16 elements each gave 2850324.5 for
// a million e's, not 2850325).
TEST(CpuReduce, F32SumsOfEqualValuesRoundOnce) {
  constexpr std::int64_t n = 1 << 20;
  for (const float value : {0.1f, std::exp(1.0f), -3.3f}) {
    SCOPED_TRACE(value);
    const auto x = Tensor<Cpu, 1>::full({n}, value, {}, DType::f32);
    const auto want = static_cast<float>(static_cast<double>(value) * n);
    EXPECT_EQ(x.sum().template to_vec<float>()[0], want);
    EXPECT_EQ(x.template reshape<2>({4, n / 4}).sum_dim(1).template to_vec<float>(), std::vector<float>(4, want / 4));
  }
}

// ---- empty tensors

TYPED_TEST(Reduce, EmptyReductionsUseTheIdentityOrNan) {
  using B = TypeParam;
  const auto x = Tensor<B, 2>::zeros({0, 3});
  EXPECT_CLOSE(x.sum_dim(0), host_data({0, 0, 0}, Shape{1, 3}, DType::f32));
  EXPECT_CLOSE(x.prod_dim(0), host_data({1, 1, 1}, Shape{1, 3}, DType::f32));
  const auto mean = x.mean_dim(0).template to_vec<double>();
  EXPECT_TRUE(std::isnan(mean[0]) && std::isnan(mean[2]));
  EXPECT_EQ(x.sum_dim(1).shape(), Shape({0, 1}));
  EXPECT_EQ(x.max_dim(1).shape(), Shape({0, 1}));  // no row is empty: nothing to reduce
  EXPECT_EQ(x.sum().item(), 0.0);
  EXPECT_EQ(x.prod().item(), 1.0);
  EXPECT_TRUE(std::isnan(x.mean().item()));
  EXPECT_EQ(x.cumsum(0).shape(), Shape({0, 3}));
  const auto [values, indices] = x.sort_with_indices(0);
  EXPECT_EQ(values.shape(), Shape({0, 3}));
  EXPECT_EQ(indices.dtype(), DType::i64);
  // any of nothing is false, all of nothing is true (as in PyTorch).
  EXPECT_FALSE(x.any().item());
  EXPECT_TRUE(x.all().item());
  EXPECT_CLOSE(x.any_dim(0), host_data({0, 0, 0}, Shape{1, 3}, DType::boolean));
  EXPECT_CLOSE(x.all_dim(0), host_data({1, 1, 1}, Shape{1, 3}, DType::boolean));
  const auto empty_rows = Tensor<B, 2, Int>::zeros({2, 0}).sum_dim(1);
  EXPECT_EQ(empty_rows.template to_vec<std::int64_t>(), (std::vector<std::int64_t>{0, 0}));
}

// ---- bad input

TYPED_TEST(Reduce, BadInputGivesErrorsNamingTheOp) {
  using B = TypeParam;
  const auto x = Tensor<B, 2>::zeros({2, 3});
  EXPECT_KILN_ERROR(x.sum_dim(5), "sum_dim: dim 5 is out of range");
  EXPECT_KILN_ERROR(x.mean_dim(-3), "mean_dim: dim -3 is out of range");
  EXPECT_KILN_ERROR(x.argmax(2), "argmax: dim 2 is out of range");
  EXPECT_KILN_ERROR(x.cumsum(2), "cumsum: dim 2 is out of range");
  EXPECT_KILN_ERROR(x.sort(7), "sort: dim 7 is out of range");
  EXPECT_KILN_ERROR(x.topk(4, 1), "topk: k = 4 is out of range for dim 1 of shape [2, 3]");
  EXPECT_KILN_ERROR(x.topk(-1), "topk: k = -1");

  const auto empty = Tensor<B, 2>::zeros({2, 0});
  EXPECT_KILN_ERROR(empty.argmax(1), "argmax: cannot reduce over dim 1 of size 0 in shape [2, 0]");
  EXPECT_KILN_ERROR(empty.argmin(1), "argmin: cannot reduce over dim 1 of size 0");
  EXPECT_KILN_ERROR(empty.max_dim(1), "max: cannot reduce over dim 1 of size 0 in shape [2, 0]");
  EXPECT_KILN_ERROR(empty.min(), "min: cannot reduce an empty tensor of shape [2, 0]");
  EXPECT_KILN_ERROR(empty.max_dim_with_indices(1), "cannot reduce over dim 1 of size 0");

  // Primitive-level dtype checks (the tensor layer already rejects these at compile time).
  const auto ints = Tensor<B, 2, Int>::zeros({2, 3});
  EXPECT_KILN_ERROR(B::reduce(ints.primitive(), ops::ReduceOp::mean, 0), "mean: expected a float tensor, got i64");
  const auto bools = Tensor<B, 2, Bool>::from_data(host_data({1, 0, 1, 1, 0, 0}, Shape{2, 3}, DType::boolean));
  EXPECT_KILN_ERROR(provided::reduce_all<B>(bools.primitive(), ops::ReduceOp::sum),
                    "sum: expected a float or int tensor, got bool");
  EXPECT_KILN_ERROR(B::cumulative(bools.primitive(), ops::CumulativeOp::sum, 0),
                    "cumsum: expected a float or int tensor");
  EXPECT_KILN_ERROR(B::reduce(x.primitive(), ops::ReduceOp::sum, 2), "sum: dim 2 is out of range");
}
