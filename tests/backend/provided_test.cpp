// The provided primitives (kiln/backend/provided.hpp): each default implementation, run on
// every backend, against that backend's override; and a backend with the required
// primitives only (MinimalCpu: the CPU backend with every provided primitive hidden), which
// satisfies the Backend concept and runs the defaults through the Tensor API.
#include "backends.hpp"
#include "golden.hpp"

#include <array>
#include <vector>

using namespace kiln;
using namespace kiln::test::aliases;

KILN_BACKEND_TEST_SUITE(Provided);

namespace {

template <class B> typename B::Primitive sample(const Shape& shape, std::uint64_t seed, DType dtype = DType::f32) {
  return provided::random<B>(shape, Distribution::normal(0, 1), RandomStream{seed, 0}, dtype, {});
}
template <class B> typename B::Primitive indices(std::vector<std::int64_t> values) {
  const auto n = static_cast<std::int64_t>(values.size());
  return B::from_data(TensorData::from(values, Shape{n}), {});
}
template <class B>
::testing::AssertionResult same(const typename B::Primitive& a, const typename B::Primitive& b, double tolerance = 0) {
  return test::all_close(B::into_data(a), B::into_data(b), tolerance, tolerance);
}

}  // namespace

TYPED_TEST(Provided, FullAndRandomMatchTheOverrides) {
  using B = TypeParam;
  for (DType dtype : {DType::f32, DType::f64, DType::f16, DType::i64, DType::u8, DType::boolean}) {
    SCOPED_TRACE(std::string(dtype_name(dtype)));
    EXPECT_TRUE(same<B>(defaults::full<B>(Shape{2, 3}, 1.0, dtype, {}), provided::full<B>(Shape{2, 3}, 1.0, dtype, {})));
    const RandomStream stream{7, 11};
    EXPECT_TRUE(same<B>(defaults::random<B>(Shape{5, 4}, Distribution::uniform(-3, 3), stream, dtype, {}),
                        provided::random<B>(Shape{5, 4}, Distribution::uniform(-3, 3), stream, dtype, {})));
  }
  EXPECT_TRUE(same<B>(defaults::full<B>(Shape{0, 3}, 2.5, DType::f32, {}), provided::full<B>(Shape{0, 3}, 2.5, DType::f32, {})));
}

TYPED_TEST(Provided, ReduceAllMatchesTheOverride) {
  using B = TypeParam;
  const auto x = sample<B>(Shape{3, 4, 5}, 1);
  for (auto op : {ops::ReduceOp::sum, ops::ReduceOp::mean, ops::ReduceOp::max, ops::ReduceOp::min, ops::ReduceOp::prod}) {
    const auto d = defaults::reduce_all<B>(x, op);
    EXPECT_EQ(B::shape(d), Shape{1});
    EXPECT_TRUE(same<B>(d, provided::reduce_all<B>(x, op), 1e-5)) << static_cast<int>(op);
  }
}

TYPED_TEST(Provided, IndexSelectAndIndexAddMatchTheOverrides) {
  using B = TypeParam;
  const auto x = sample<B>(Shape{4, 5}, 2);
  for (std::int64_t dim : {0, 1}) {
    const auto index = indices<B>({3, 0, 3});
    EXPECT_TRUE(same<B>(defaults::index_select<B>(x, dim, index), provided::index_select<B>(x, dim, index))) << dim;
    const auto values = sample<B>(dim == 0 ? Shape{3, 5} : Shape{4, 3}, 3);
    // Index 3 twice: both slices add up.
    EXPECT_TRUE(same<B>(defaults::index_add<B>(x, dim, index, values), provided::index_add<B>(x, dim, index, values),
                        1e-6))
        << dim;
  }
  const auto i = sample<B>(Shape{4, 5}, 4, DType::i64);
  EXPECT_TRUE(same<B>(defaults::index_select<B>(i, 1, indices<B>({4, 1})), provided::index_select<B>(i, 1, indices<B>({4, 1}))));
}

TYPED_TEST(Provided, FlipAndCatMatchTheOverrides) {
  using B = TypeParam;
  const auto x = sample<B>(Shape{2, 3, 4}, 5);
  for (const std::vector<std::int64_t>& dims : {std::vector<std::int64_t>{0}, {0, 2}, {1, 2, 0}, {}})
    EXPECT_TRUE(same<B>(defaults::flip<B>(x, dims), provided::flip<B>(x, dims))) << dims.size();
  const std::array<typename B::Primitive, 3> parts{sample<B>(Shape{2, 1, 4}, 6), sample<B>(Shape{2, 0, 4}, 7),
                                                   sample<B>(Shape{2, 3, 4}, 8)};
  EXPECT_TRUE(same<B>(defaults::cat<B>(parts, 1), provided::cat<B>(parts, 1)));
  const std::array<typename B::Primitive, 2> rows{x, sample<B>(Shape{1, 3, 4}, 9)};
  EXPECT_TRUE(same<B>(defaults::cat<B>(rows, 0), provided::cat<B>(rows, 0)));
  const std::array<typename B::Primitive, 2> mismatched{x, sample<B>(Shape{2, 2, 4}, 9)};
  EXPECT_KILN_ERROR(defaults::cat<B>(mismatched, 0), "cat: shapes [2, 3, 4] and [2, 2, 4] differ outside dim 0");
}

TYPED_TEST(Provided, MaxPool2dBackwardMatchesTheOverride) {
  using B = TypeParam;
  ops::Pool2dOptions pool;
  pool.kernel = {3, 3};
  pool.stride = {2, 2};  // overlapping windows: one element can be the max of two
  pool.padding = {1, 1};
  const auto x = sample<B>(Shape{2, 3, 7, 6}, 10);
  const auto [y, index] = B::max_pool2d(x, pool);
  const auto dy = sample<B>(B::shape(y), 11);
  EXPECT_TRUE(same<B>(defaults::max_pool2d_backward<B>(x, dy, index, pool),
                      provided::max_pool2d_backward<B>(x, dy, index, pool), 1e-6));
}

TYPED_TEST(Provided, InterpolateAndItsBackwardMatchTheOverrides) {
  using B = TypeParam;
  const auto x = sample<B>(Shape{2, 3, 5, 7}, 12);
  for (auto mode : {ops::InterpolateMode::nearest, ops::InterpolateMode::bilinear, ops::InterpolateMode::bicubic}) {
    for (bool align : {false, true}) {
      if (mode == ops::InterpolateMode::nearest && align) continue;
      for (const std::array<std::int64_t, 2>& size : {std::array<std::int64_t, 2>{10, 14}, {3, 4}, {5, 9}}) {
        SCOPED_TRACE(::testing::Message() << "mode " << static_cast<int>(mode) << " align " << align << " to "
                                          << size[0] << "x" << size[1]);
        const ops::InterpolateOptions o{mode, align};
        const auto y = defaults::interpolate<B>(x, size, o);
        EXPECT_TRUE(same<B>(y, provided::interpolate<B>(x, size, o), 1e-5));
        const auto dy = sample<B>(B::shape(y), 13);
        EXPECT_TRUE(same<B>(defaults::interpolate_backward<B>(x, dy, o), provided::interpolate_backward<B>(x, dy, o),
                            1e-5));
      }
    }
  }
}

TYPED_TEST(Provided, AvgPool2dAndItsBackwardMatchTheOverrides) {
  using B = TypeParam;
  const auto x = sample<B>(Shape{2, 3, 7, 6}, 16);
  // Windows that tile, overlap into the padding (counted in the divisor and not), overhang
  // the input under ceil_mode, and have a different kernel and stride per axis.
  const std::vector<ops::Pool2dOptions> cases{
      {.kernel = {2, 2}, .stride = {2, 2}},
      {.kernel = {3, 3}, .stride = {2, 2}, .padding = {1, 1}},
      {.kernel = {3, 3}, .stride = {2, 2}, .padding = {1, 1}, .count_include_pad = false},
      {.kernel = {3, 3}, .stride = {2, 2}, .padding = {1, 0}, .ceil_mode = true},
      {.kernel = {3, 3}, .stride = {2, 2}, .padding = {1, 1}, .ceil_mode = true, .count_include_pad = false},
      {.kernel = {3, 2}, .stride = {1, 2}, .padding = {0, 1}},
      {.kernel = {7, 1}, .stride = {1, 1}}};
  for (std::size_t i = 0; i < cases.size(); ++i) {
    SCOPED_TRACE(::testing::Message() << "case " << i);
    const auto y = defaults::avg_pool2d<B>(x, cases[i]);
    EXPECT_EQ(B::shape(y), ops::pool2d_output_shape("avg_pool2d", B::shape(x), cases[i]));
    EXPECT_TRUE(same<B>(y, provided::avg_pool2d<B>(x, cases[i]), 1e-5));
    const auto dy = sample<B>(B::shape(y), 17);
    EXPECT_TRUE(same<B>(defaults::avg_pool2d_backward<B>(x, dy, cases[i]),
                        provided::avg_pool2d_backward<B>(x, dy, cases[i]), 1e-5));
  }
  const ops::Pool2dOptions dilated{.kernel = {3, 3}, .dilation = {2, 2}}, tiles{.kernel = {2, 2}, .stride = {2, 2}};
  EXPECT_KILN_ERROR(defaults::avg_pool2d<B>(x, dilated), "avg_pool2d: average pooling has no dilation");
  EXPECT_KILN_ERROR(defaults::avg_pool2d_backward<B>(x, sample<B>(Shape{2, 3, 3, 2}, 18), tiles),
                    "avg_pool2d_backward: dy has shape [2, 3, 3, 2], expected [2, 3, 3, 3]");
}

TYPED_TEST(Provided, AdaptiveAvgPool2dAndItsBackwardMatchTheOverrides) {
  using B = TypeParam;
  const auto x = sample<B>(Shape{2, 3, 7, 5}, 14);
  // Windows that divide evenly, overlap (7 -> 3), are single elements (to 1x1: the mean of
  // each plane) and repeat inputs (5 -> 8: upsampling).
  for (const std::array<std::int64_t, 2>& size : {std::array<std::int64_t, 2>{7, 5}, {3, 2}, {1, 1}, {4, 8}}) {
    SCOPED_TRACE(::testing::Message() << size[0] << "x" << size[1]);
    const auto y = defaults::adaptive_avg_pool2d<B>(x, size);
    EXPECT_TRUE(same<B>(y, provided::adaptive_avg_pool2d<B>(x, size), 1e-5));
    const auto dy = sample<B>(B::shape(y), 15);
    EXPECT_TRUE(same<B>(defaults::adaptive_avg_pool2d_backward<B>(x, dy),
                        provided::adaptive_avg_pool2d_backward<B>(x, dy), 1e-5));
  }
}

// ---------------------------------------------------------------- a backend of required primitives only

namespace {

// The CPU backend with every provided primitive (and the fused ones) hidden: what a new
// backend's author has once the required primitives are written.
struct MinimalCpu : private Cpu {
  using Device = Cpu::Device;
  using Primitive = Cpu::Primitive;
  static constexpr std::string_view name = "minimal_cpu";
  using Cpu::from_data, Cpu::into_data, Cpu::shape, Cpu::dtype, Cpu::device, Cpu::to_device, Cpu::cast;
  using Cpu::elementwise;
  using Cpu::reduce, Cpu::arg_reduce, Cpu::cumulative, Cpu::sort, Cpu::matmul;
  using Cpu::reshape, Cpu::permute, Cpu::expand, Cpu::slice, Cpu::slice_assign, Cpu::gather, Cpu::scatter;
  using Cpu::conv2d, Cpu::conv2d_backward_input, Cpu::conv2d_backward_weight, Cpu::max_pool2d;
};

}  // namespace

static_assert(Backend<MinimalCpu>, "the required primitives alone make a backend");
static_assert(!provided::detail::HasUnary<MinimalCpu> && !provided::detail::HasBinary<MinimalCpu> &&
                  !provided::detail::HasBinaryScalar<MinimalCpu> && !provided::detail::HasWhere<MinimalCpu> &&
                  !provided::detail::HasUnaryBackward<MinimalCpu> && !provided::detail::HasBinaryBackward<MinimalCpu> &&
                  !provided::detail::HasFull<MinimalCpu> && !provided::detail::HasReduceAll<MinimalCpu> &&
                  !provided::detail::HasIndexSelect<MinimalCpu> && !provided::detail::HasCat<MinimalCpu> &&
                  !provided::detail::HasMaxPool2dBackward<MinimalCpu> && !provided::detail::HasInterpolate<MinimalCpu> &&
                  !provided::detail::HasAvgPool2d<MinimalCpu> && !provided::detail::HasAvgPool2dBackward<MinimalCpu> &&
                  !provided::detail::HasAdaptiveAvgPool2d<MinimalCpu>,
              "MinimalCpu must hide the provided primitives, so that the defaults run");

TEST(ProvidedOnAMinimalBackend, TheTensorApiRunsOnTheDefaults) {
  using M = MinimalCpu;
  const auto x = Tensor<M, 2>::from_data(TensorData::from(std::vector<double>{1, 2, 3, 4, 5, 6}, Shape{2, 3}));
  EXPECT_TRUE(test::all_close(Tensor<M, 2>::full({2, 2}, 0.5).into_data(),
                              TensorData::from(std::vector<double>{0.5, 0.5, 0.5, 0.5}, Shape{2, 2}).convert(DType::f32)));
  EXPECT_DOUBLE_EQ(x.sum().into_data().template to_vec<double>()[0], 21.0);
  EXPECT_DOUBLE_EQ(x.max().into_data().template to_vec<double>()[0], 6.0);
  EXPECT_EQ(x.flip({1}).into_data().template to_vec<double>(), (std::vector<double>{3, 2, 1, 6, 5, 4}));
  const auto picked = x.index_select(1, Tensor<M, 1, Int>::from({2, 0}));
  EXPECT_EQ(picked.into_data().template to_vec<double>(), (std::vector<double>{3, 1, 6, 4}));
  const auto stacked = Tensor<M, 2>::cat({x, x}, 0);
  EXPECT_EQ(stacked.dims(), (std::array<std::int64_t, 2>{4, 3}));
  // Autodiff over it: the defaults differentiate through the primitives they are made of.
  using AD = Autodiff<M>;
  const auto w = Tensor<AD, 2>::from_data(x.into_data()).require_grad();
  const auto loss = (w.flip({0}).index_select(1, Tensor<AD, 1, Int>::from({2, 2})) * 2.0).sum();
  const auto grads = loss.backward();
  EXPECT_EQ(w.grad(grads)->into_data().template to_vec<double>(), (std::vector<double>{0, 0, 4, 0, 0, 4}));
  // Average pooling and its gradient on the defaults: a 3x3 plane, 2x2 windows with stride 1:
  // [[1 2 3] [4 5 6] [7 8 9]] -> [[3 4] [6 7]]; the centre is in all four windows.
  const auto plane = Tensor<AD, 4>::from_data(TensorData::from(std::vector<double>{1, 2, 3, 4, 5, 6, 7, 8, 9},
                                                               Shape{1, 1, 3, 3})).require_grad();
  const auto pooled = functional::avg_pool2d(plane, {.kernel = {2, 2}});
  EXPECT_EQ(pooled.into_data().template to_vec<double>(), (std::vector<double>{3, 4, 6, 7}));
  const auto pool_grads = pooled.sum().backward();
  EXPECT_EQ(plane.grad(pool_grads)->into_data().template to_vec<double>(),
            (std::vector<double>{0.25, 0.5, 0.25, 0.5, 1, 0.5, 0.25, 0.5, 0.25}));
}
