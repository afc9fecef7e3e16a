// Conformance: tensor creation, host transfer, casts between every dtype and kind, seeded
// random fills (determinism and statistics) and the rank-changing views of tensor.hpp.
#include "backends.hpp"
#include "golden.hpp"

#include <cmath>
#include <numeric>

using namespace kiln;

KILN_BACKEND_TEST_SUITE(Creation);

namespace {

using namespace kiln::test::aliases;

constexpr DType all_dtypes[] = {DType::f32, DType::f64, DType::f16, DType::bf16,
                                DType::i32, DType::i64, DType::u8,  DType::boolean};

double mean_of(const std::vector<double>& v) {
  return std::accumulate(v.begin(), v.end(), 0.0) / static_cast<double>(v.size());
}
double std_of(const std::vector<double>& v) {
  const double m = mean_of(v);
  double s = 0.0;
  for (double x : v) s += (x - m) * (x - m);
  return std::sqrt(s / static_cast<double>(v.size() - 1));
}

}  // namespace

// ---- constant fills

TYPED_TEST(Creation, FullZerosOnesInEveryDtype) {
  using B = TypeParam;
  for (DType dtype : all_dtypes) {
    const double value = is_bool(dtype) ? 1.0 : is_int(dtype) ? 7.0 : 1.5;
    const auto p = provided::full<B>(Shape{2, 3}, value, dtype, {});
    EXPECT_EQ(B::dtype(p), dtype);
    EXPECT_EQ(B::shape(p), (Shape{2, 3}));
    EXPECT_EQ(B::into_data(p).template to_vec<double>(), std::vector<double>(6, value)) << dtype_name(dtype);
    EXPECT_EQ(B::into_data(provided::full<B>(Shape{4}, 0.0, dtype, {})).template to_vec<double>(), std::vector<double>(4, 0.0));
  }
  EXPECT_EQ(Float2<B>::zeros({2, 2}).to_vec(), std::vector<double>(4, 0.0));
  EXPECT_EQ(Float2<B>::ones({2, 2}, {}, DType::f64).dtype(), DType::f64);
  EXPECT_EQ(Int1<B>::full({3}, -4.0).to_vec(), (std::vector<std::int64_t>{-4, -4, -4}));
  EXPECT_EQ(Bool1<B>::ones({2}).to_vec(), (std::vector<bool>{true, true}));
  EXPECT_EQ(Float3<B>::zeros({2, 0, 3}).numel(), 0);
  EXPECT_EQ(Float3<B>::zeros({2, 0, 3}).into_data().numel(), 0);
}

TYPED_TEST(Creation, FullRejectsADtypeOfAnotherKind) {
  using B = TypeParam;
  EXPECT_KILN_ERROR(Float2<B>::zeros({2, 2}, {}, DType::i32), "full: i32 is not a Float dtype");
  EXPECT_KILN_ERROR(Int2<B>::ones({2, 2}, {}, DType::f32), "full: f32 is not a Int dtype");
  EXPECT_KILN_ERROR(Float2<B>::zeros({2, -1}), "negative dimension");
}

TYPED_TEST(Creation, LikeKeepsShapeAndDtype) {
  using B = TypeParam;
  const auto x = Float2<B>::ones({2, 3}, {}, DType::f64);
  for (const auto& t : {x.zeros_like(), x.ones_like(), x.full_like(2.5)}) {
    EXPECT_EQ(t.shape(), (Shape{2, 3}));
    EXPECT_EQ(t.dtype(), DType::f64);
  }
  EXPECT_EQ(x.full_like(2.5).to_vec(), std::vector<double>(6, 2.5));
  EXPECT_EQ(x.zeros_like().to_vec(), std::vector<double>(6, 0.0));
  const auto i = Int1<B>::ones({2}, {}, DType::i32);
  EXPECT_EQ(i.full_like(3).dtype(), DType::i32);
  EXPECT_EQ(i.full_like(3).to_vec(), (std::vector<std::int64_t>{3, 3}));
}

// ---- ranges and lists

TYPED_TEST(Creation, ArangeWithPositiveAndNegativeSteps) {
  using B = TypeParam;
  EXPECT_EQ(Int1<B>::arange(0, 5).to_vec(), (std::vector<std::int64_t>{0, 1, 2, 3, 4}));
  EXPECT_EQ(Int1<B>::arange(1, 8, 3).to_vec(), (std::vector<std::int64_t>{1, 4, 7}));
  EXPECT_EQ(Int1<B>::arange(5, 0, -2).to_vec(), (std::vector<std::int64_t>{5, 3, 1}));
  EXPECT_EQ(Int1<B>::arange(-3, 0).to_vec(), (std::vector<std::int64_t>{-3, -2, -1}));
  EXPECT_EQ(Int1<B>::arange(2, 2).numel(), 0);
  EXPECT_EQ(Int1<B>::arange(3, 0).numel(), 0);
  const auto f = Float1<B>::arange(0, 3, 1, {}, DType::f64);
  EXPECT_EQ(f.dtype(), DType::f64);
  EXPECT_EQ(f.to_vec(), (std::vector<double>{0, 1, 2}));
  EXPECT_EQ(Int1<B>::arange(0, 3, 1, {}, DType::i32).dtype(), DType::i32);
  EXPECT_KILN_ERROR(Int1<B>::arange(0, 3, 0), "arange: step must not be zero");
}

TYPED_TEST(Creation, Eye) {
  using B = TypeParam;
  EXPECT_EQ(Float2<B>::eye(3).to_vec(), (std::vector<double>{1, 0, 0, 0, 1, 0, 0, 0, 1}));
  EXPECT_EQ(Float2<B>::eye(2).shape(), (Shape{2, 2}));
  EXPECT_EQ(Int2<B>::eye(2, {}, DType::i32).to_vec(), (std::vector<std::int64_t>{1, 0, 0, 1}));
  EXPECT_EQ(Float2<B>::eye(0).numel(), 0);
}

TYPED_TEST(Creation, FromNestedLists) {
  using B = TypeParam;
  const auto x = Float2<B>::from({{1, 2, 3}, {4, 5.5, 6}});
  EXPECT_EQ(x.shape(), (Shape{2, 3}));
  EXPECT_EQ(x.dtype(), DType::f32);
  EXPECT_EQ(x.to_vec(), (std::vector<double>{1, 2, 3, 4, 5.5, 6}));
  const auto y = Float3<B>::from({{{1}, {2}}, {{3}, {4}}, {{5}, {6}}}, {}, DType::f64);
  EXPECT_EQ(y.shape(), (Shape{3, 2, 1}));
  EXPECT_EQ(y.dtype(), DType::f64);
  EXPECT_EQ(y.to_vec(), (std::vector<double>{1, 2, 3, 4, 5, 6}));
  const auto i = Int2<B>::from({{-1, 2}, {3, 4000000000}});
  EXPECT_EQ(i.to_vec(), (std::vector<std::int64_t>{-1, 2, 3, 4000000000}));
  const auto b = Bool1<B>::from({true, false, true});
  EXPECT_EQ(b.dtype(), DType::boolean);
  EXPECT_EQ(b.to_vec(), (std::vector<bool>{true, false, true}));
  EXPECT_EQ(Float1<B>::from({}).shape(), (Shape{0}));
}

TYPED_TEST(Creation, FromRejectsRaggedLists) {
  using B = TypeParam;
  EXPECT_KILN_ERROR(Float2<B>::from({{1, 2}, {3}}), "from: nested lists are ragged at depth 1 (lengths 2 and 1)");
  EXPECT_KILN_ERROR(Float3<B>::from({{{1, 2}}, {{3, 4}, {5, 6}}}), "from: nested lists are ragged at depth 1");
  EXPECT_KILN_ERROR(Float2<B>::from({{1}}, {}, DType::i64), "from: i64 is not a Float dtype");
}

TYPED_TEST(Creation, FromDataConvertsToTheKindAndChecksRank) {
  using B = TypeParam;
  const auto data = TensorData::from(std::vector<std::int32_t>{1, 2, 3, 4}, Shape{2, 2});
  const auto f = Float2<B>::from_data(data);
  EXPECT_EQ(f.dtype(), DType::f32);  // an Int payload becomes the Float kind's default dtype
  EXPECT_EQ(f.to_vec(), (std::vector<double>{1, 2, 3, 4}));
  EXPECT_EQ(Int2<B>::from_data(data).dtype(), DType::i32);
  EXPECT_KILN_ERROR(Float3<B>::from_data(data), "from_data: data of shape [2, 2] has rank 2, the tensor has rank 3");
  EXPECT_KILN_ERROR(Int2<B>(provided::full<B>(Shape{1, 1}, 0.0, DType::f32, {})), "dtype f32 is not a Int dtype");
  EXPECT_KILN_ERROR(Float2<B>(provided::full<B>(Shape{1}, 0.0, DType::f32, {})), "a primitive of shape [1] has rank 1, not 2");
}

// ---- host transfer

TYPED_TEST(Creation, IntoDataOfViewsIsRowMajor) {
  using B = TypeParam;
  const auto x = Float2<B>::from({{1, 2, 3}, {4, 5, 6}});
  const auto t = x.transpose();
  const TensorData d = t.into_data();
  EXPECT_EQ(d.shape(), (Shape{3, 2}));
  EXPECT_EQ(d.dtype(), DType::f32);
  EXPECT_EQ(std::vector<float>(d.template as<float>().begin(), d.template as<float>().end()),
            (std::vector<float>{1, 4, 2, 5, 3, 6}));
  EXPECT_EQ(t.template to_vec<std::int64_t>(), (std::vector<std::int64_t>{1, 4, 2, 5, 3, 6}));
  EXPECT_EQ(x.template to_vec<float>(), (std::vector<float>{1, 2, 3, 4, 5, 6}));
}

TYPED_TEST(Creation, ItemReadsOneElement) {
  using B = TypeParam;
  EXPECT_EQ(Float1<B>::from({2.5}).item(), 2.5);
  EXPECT_EQ(Int2<B>::from({{-7}}).item(), -7);
  EXPECT_EQ(Bool1<B>::from({true}).item(), true);
  EXPECT_EQ(Float2<B>::from({{1, 2}, {3, 4}}).slice({ops::Slice(1), ops::Slice(0)}).item(), 3.0);
  EXPECT_KILN_ERROR(Float1<B>::from({1, 2}).item(), "item: the tensor has shape [2] (2 elements), not one element");
  EXPECT_KILN_ERROR(Float1<B>::zeros({0}).item(), "item: the tensor has shape [0]");
}

// ---- casts

TYPED_TEST(Creation, CastBetweenEveryPairOfDtypes) {
  using B = TypeParam;
  // Values every dtype holds exactly (bool holds their truth).
  const std::vector<double> values{0, 1, 2, 3, 42, 100};
  for (DType from : all_dtypes) {
    const auto src = B::from_data(TensorData::from(values, Shape{2, 3}).convert(from), {});
    const std::vector<double> expected_src = TensorData::from(values, Shape{2, 3}).convert(from).to_vec<double>();
    for (DType to : all_dtypes) {
      const auto out = B::cast(src, to);
      EXPECT_EQ(B::dtype(out), to);
      EXPECT_EQ(B::shape(out), (Shape{2, 3}));
      std::vector<double> expected = expected_src;
      if (is_bool(to))
        for (auto& v : expected) v = v != 0.0 ? 1.0 : 0.0;
      EXPECT_EQ(B::into_data(out).template to_vec<double>(), expected)
          << dtype_name(from) << " -> " << dtype_name(to);
    }
  }
}

TYPED_TEST(Creation, CastRoundsAndTruncatesLikeTorch) {
  using B = TypeParam;
  const auto x = Float1<B>::from({2.7, -3.7, 0.5, -0.0, 1e-8}, {}, DType::f64);
  EXPECT_EQ(x.to_int().to_vec(), (std::vector<std::int64_t>{2, -3, 0, 0, 0}));
  EXPECT_EQ(x.to_int(DType::i32).dtype(), DType::i32);
  EXPECT_EQ(x.to_bool().to_vec(), (std::vector<bool>{true, true, true, false, true}));
  // f64 -> f32 -> f16 round to nearest.
  EXPECT_EQ(Float1<B>::from({0.1}, {}, DType::f64).cast(DType::f32).to_vec(),
            (std::vector<double>{static_cast<double>(0.1f)}));
  EXPECT_NEAR(Float1<B>::from({0.1}).cast(DType::f16).to_vec()[0], 0.0999755859375, 0.0);
  EXPECT_NEAR(Float1<B>::from({0.1}).cast(DType::bf16).to_vec()[0], 0.10009765625, 0.0);
  const auto b = Bool1<B>::from({true, false});
  EXPECT_EQ(b.to_float().to_vec(), (std::vector<double>{1, 0}));
  EXPECT_EQ(b.to_int(DType::u8).to_vec(), (std::vector<std::int64_t>{1, 0}));
  const auto i = Int1<B>::from({-2, 0, 5});
  EXPECT_EQ(i.to_float(DType::f64).to_vec(), (std::vector<double>{-2, 0, 5}));
  EXPECT_EQ(i.to_bool().to_vec(), (std::vector<bool>{true, false, true}));
  // NaN and infinities survive float casts; NaN is true.
  const auto special = Float1<B>::from({NAN, INFINITY, -INFINITY});
  const auto wide = special.cast(DType::f64).to_vec();
  EXPECT_TRUE(std::isnan(wide[0]));
  EXPECT_EQ(wide[1], INFINITY);
  EXPECT_EQ(special.cast(DType::f16).to_vec()[2], -INFINITY);
  EXPECT_EQ(special.to_bool().to_vec(), (std::vector<bool>{true, true, true}));
}

TYPED_TEST(Creation, CastOfAViewAndSameDtype) {
  using B = TypeParam;
  const auto x = Float2<B>::from({{1, 2, 3}, {4, 5, 6}});
  EXPECT_EQ(x.transpose().to_int(DType::i32).to_vec(), (std::vector<std::int64_t>{1, 4, 2, 5, 3, 6}));
  EXPECT_EQ(x.transpose().cast(DType::bf16).to_vec(), (std::vector<double>{1, 4, 2, 5, 3, 6}));
  EXPECT_EQ(x.cast(DType::f32).to_vec(), x.to_vec());
  EXPECT_KILN_ERROR(x.cast(DType::i32), "cast: i32 is not a Float dtype");
  EXPECT_KILN_ERROR(x.to_int(DType::f64), "cast: f64 is not a Int dtype");
}

// ---- random fills

TYPED_TEST(Creation, RandomIsDeterminedBySeedAndStreamPosition) {
  using B = TypeParam;
  const auto dist = Distribution::uniform(-1.0, 2.0);
  manual_seed(1234);
  const auto a = Float2<B>::random({3, 4}, dist, {}, DType::f64);
  const auto b = Float2<B>::random({5, 2}, dist, {}, DType::f64);
  const auto av = a.to_vec(), bv = b.to_vec();
  for (std::size_t i = 0; i < av.size(); ++i) EXPECT_EQ(av[i], dist.sample(1234, i)) << i;
  for (std::size_t i = 0; i < bv.size(); ++i) EXPECT_EQ(bv[i], dist.sample(1234, 12 + i)) << i;  // continues the stream
  EXPECT_NE(av[0], bv[0]);
  manual_seed(1234);
  EXPECT_EQ(Float2<B>::random({3, 4}, dist, {}, DType::f64).to_vec(), av);
  manual_seed(99);
  EXPECT_NE(Float2<B>::random({3, 4}, dist, {}, DType::f64).to_vec(), av);
  // f32 stores the same draws rounded; random_like continues the stream too.
  manual_seed(7);
  const auto f = Float1<B>::random({6}, Distribution::normal(0.0, 1.0));
  const auto fv = f.to_vec();
  for (std::size_t i = 0; i < fv.size(); ++i)
    EXPECT_EQ(fv[i], static_cast<double>(static_cast<float>(Distribution::normal(0.0, 1.0).sample(7, i))));
  const auto g = f.random_like(Distribution::normal(0.0, 1.0)).to_vec();
  for (std::size_t i = 0; i < g.size(); ++i)
    EXPECT_EQ(g[i], static_cast<double>(static_cast<float>(Distribution::normal(0.0, 1.0).sample(7, 6 + i))));
}

TYPED_TEST(Creation, RandomNormalStatistics) {
  using B = TypeParam;
  manual_seed(2024);
  const auto v = Float1<B>::random({100000}, Distribution::normal(1.5, 2.0)).to_vec();
  // Standard error of the mean is 2 / sqrt(1e5) ~ 0.0063; of the std ~ 0.0045.
  EXPECT_NEAR(mean_of(v), 1.5, 0.03);
  EXPECT_NEAR(std_of(v), 2.0, 0.03);
  std::size_t within_one_sigma = 0;
  for (double x : v) within_one_sigma += std::abs(x - 1.5) < 2.0;
  EXPECT_NEAR(static_cast<double>(within_one_sigma) / 1e5, 0.6827, 0.01);
}

TYPED_TEST(Creation, RandomUniformRangeAndMean) {
  using B = TypeParam;
  manual_seed(5);
  const auto v = Float2<B>::random({200, 500}, Distribution::uniform(-2.0, 3.0), {}, DType::f64).to_vec();
  EXPECT_GE(*std::min_element(v.begin(), v.end()), -2.0);
  EXPECT_LT(*std::max_element(v.begin(), v.end()), 3.0);
  EXPECT_LT(*std::min_element(v.begin(), v.end()), -1.99);
  EXPECT_GT(*std::max_element(v.begin(), v.end()), 2.99);
  EXPECT_NEAR(mean_of(v), 0.5, 0.03);
  EXPECT_NEAR(std_of(v), 5.0 / std::sqrt(12.0), 0.02);
}

TYPED_TEST(Creation, RandomBernoulliRateInEveryKind) {
  using B = TypeParam;
  manual_seed(11);
  const auto f = Float1<B>::random({100000}, Distribution::bernoulli(0.3)).to_vec();
  for (double x : f) ASSERT_TRUE(x == 0.0 || x == 1.0);
  EXPECT_NEAR(mean_of(f), 0.3, 0.01);
  const auto b = Bool1<B>::random({100000}, Distribution::bernoulli(0.8));
  EXPECT_EQ(b.dtype(), DType::boolean);
  const auto bv = b.template to_vec<double>();
  EXPECT_NEAR(mean_of(bv), 0.8, 0.01);
  const auto i = Int1<B>::random({1000}, Distribution::uniform(0.0, 10.0)).to_vec();
  EXPECT_EQ(*std::min_element(i.begin(), i.end()), 0);
  EXPECT_EQ(*std::max_element(i.begin(), i.end()), 9);
}

// ---- rank-changing views

TYPED_TEST(Creation, ReshapeInfersOneDim) {
  using B = TypeParam;
  const auto x = Float1<B>::arange(0, 12).template reshape<2>({4, 3});
  const auto y = x.template reshape<3>({2, -1, 3});
  EXPECT_EQ(y.shape(), (Shape{2, 2, 3}));
  EXPECT_EQ(y.to_vec(), x.to_vec());
  EXPECT_EQ(x.template reshape<1>({-1}).shape(), (Shape{12}));
  EXPECT_EQ(Float2<B>::zeros({0, 3}).template reshape<2>({-1, 3}).shape(), (Shape{0, 3}));
  EXPECT_EQ(Float2<B>::zeros({0, 3}).template reshape<3>({3, 0, 5}).shape(), (Shape{3, 0, 5}));
}

TYPED_TEST(Creation, ReshapeRejectsSizeMismatches) {
  using B = TypeParam;
  const auto x = Float2<B>::zeros({4, 3});
  EXPECT_KILN_ERROR(x.template reshape<2>({5, 2}),
                    "reshape: cannot reshape [4, 3] (12 elements) into [5, 2] (10 elements)");
  EXPECT_KILN_ERROR(x.template reshape<2>({5, -1}), "reshape: cannot reshape [4, 3] into [5, -1]");
  EXPECT_KILN_ERROR(x.template reshape<3>({-1, -1, 3}), "reshape: only one dim may be -1");
  EXPECT_KILN_ERROR(x.template reshape<2>({-2, 6}), "reshape: invalid dim -2");
  EXPECT_KILN_ERROR(B::reshape(x.primitive(), Shape{7}), "reshape: cannot reshape [4, 3] (12 elements) to [7]");
}

TYPED_TEST(Creation, FlattenMergesARangeOfDims) {
  using B = TypeParam;
  const auto x = Float1<B>::arange(0, 24).template reshape<3>({2, 3, 4});
  EXPECT_EQ(x.template flatten<2>(1, 2).shape(), (Shape{2, 12}));
  EXPECT_EQ(x.template flatten<2>(0, 1).shape(), (Shape{6, 4}));
  EXPECT_EQ(x.template flatten<1>().shape(), (Shape{24}));
  EXPECT_EQ(x.template flatten<1>().to_vec(), x.to_vec());
  EXPECT_EQ(x.template flatten<3>(1, 1).shape(), (Shape{2, 3, 4}));
  EXPECT_EQ(x.transpose().template flatten<2>(-2, -1).to_vec(), x.transpose().to_vec());
  EXPECT_KILN_ERROR(x.template flatten<2>(0, -1), "flatten: merging dims 0..2 of a rank-3 tensor gives rank 1, not 2");
  EXPECT_KILN_ERROR(x.template flatten<2>(2, 1), "flatten: start dim 2 is after end dim 1");
}

TYPED_TEST(Creation, UnsqueezeAndSqueeze) {
  using B = TypeParam;
  const auto x = Float2<B>::from({{1, 2, 3}, {4, 5, 6}});
  EXPECT_EQ(x.template unsqueeze<4>().shape(), (Shape{1, 1, 2, 3}));
  EXPECT_EQ(x.unsqueeze_dim(0).shape(), (Shape{1, 2, 3}));
  EXPECT_EQ(x.unsqueeze_dim(1).shape(), (Shape{2, 1, 3}));
  EXPECT_EQ(x.unsqueeze_dim(2).shape(), (Shape{2, 3, 1}));
  EXPECT_EQ(x.unsqueeze_dim(-1).shape(), (Shape{2, 3, 1}));  // as torch.unsqueeze: -1 is the new last dim
  EXPECT_EQ(x.unsqueeze_dim(-3).shape(), (Shape{1, 2, 3}));
  EXPECT_EQ(x.unsqueeze_dim(1).to_vec(), x.to_vec());
  EXPECT_EQ(x.unsqueeze_dim(0).squeeze_dim(0).shape(), (Shape{2, 3}));
  EXPECT_EQ(x.unsqueeze_dim(2).squeeze_dim(-1).shape(), (Shape{2, 3}));
  EXPECT_EQ(x.transpose().unsqueeze_dim(1).to_vec(), x.transpose().to_vec());
  EXPECT_KILN_ERROR(x.squeeze_dim(1), "squeeze_dim: dim 1 of shape [2, 3] has size 3, not 1");
  EXPECT_KILN_ERROR(x.unsqueeze_dim(3), "unsqueeze_dim: dim 3 is out of range for a tensor of rank 3");
  EXPECT_KILN_ERROR(x.squeeze_dim(-3), "squeeze_dim: dim -3 is out of range");
}
