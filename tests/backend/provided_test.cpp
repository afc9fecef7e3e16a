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

namespace {

// activation(x @ weightᵀ + bias) on the host, in double: x [rows, in], weight [out, in].
std::vector<double> host_linear(const std::vector<double>& x, const std::vector<double>& w,
                                const std::vector<double>* bias, std::int64_t rows, std::int64_t in, std::int64_t out,
                                bool relu) {
  std::vector<double> y(static_cast<std::size_t>(rows * out));
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t o = 0; o < out; ++o) {
      double sum = bias ? (*bias)[static_cast<std::size_t>(o)] : 0.0;
      for (std::int64_t i = 0; i < in; ++i)
        sum += x[static_cast<std::size_t>(r * in + i)] * w[static_cast<std::size_t>(o * in + i)];
      y[static_cast<std::size_t>(r * out + o)] = relu && sum < 0 ? 0.0 : sum;
    }
  return y;
}

}  // namespace

// The override (the CPU's one GEMM with its epilogue, Autodiff's one node) against the
// default and a host reference: rank 1 to 3, a transposed x, with and without the bias and
// relu, f32 and f64, and no input features (the bias alone).
TYPED_TEST(Provided, LinearMatchesTheOverrideAndTheHostReference) {
  using B = TypeParam;
  const std::array<std::int64_t, 2> swap{1, 0};
  struct Case {
    Shape x;
    std::int64_t out;
    bool transposed;
  };
  for (const Case& c : {Case{Shape{7}, 5, false}, Case{Shape{6, 7}, 5, false}, Case{Shape{2, 3, 7}, 9, false},
                        Case{Shape{6, 7}, 3, true}, Case{Shape{4, 0}, 3, false}}) {
    for (DType dtype : {DType::f32, DType::f64}) {
      const std::int64_t in = c.x[c.x.rank() - 1];
      std::int64_t rows = 1;
      for (std::size_t d = 0; d + 1 < c.x.rank(); ++d) rows *= c.x[d];
      std::vector<std::int64_t> out_dims = c.x.to_vector();
      out_dims.back() = c.out;
      const Shape expected(out_dims);
      const auto x = c.transposed ? B::permute(sample<B>(Shape{in, rows}, 11, dtype), swap) : sample<B>(c.x, 11, dtype);
      const auto w = sample<B>(Shape{c.out, in}, 12, dtype);
      const auto bias = sample<B>(Shape{c.out}, 13, dtype);
      const auto host = [](const typename B::Primitive& p) { return B::into_data(p).template to_vec<double>(); };
      const std::vector<double> hx = host(x), hw = host(w), hb = host(bias);
      const double tolerance = dtype == DType::f32 ? 1e-5 : 1e-12;
      for (const bool with_bias : {false, true})
        for (const auto activation : {ops::LinearActivation::none, ops::LinearActivation::relu}) {
          const bool relu = activation == ops::LinearActivation::relu;
          SCOPED_TRACE(fmt::format("x {} out {} {} bias {} relu {}", c.x, c.out, dtype, with_bias, relu));
          const std::optional<typename B::Primitive> b = with_bias ? std::optional(bias) : std::nullopt;
          const auto fused = provided::linear<B>(x, w, b, activation);
          ASSERT_EQ(B::shape(fused), expected);
          EXPECT_TRUE(same<B>(fused, defaults::linear<B>(x, w, b, activation), tolerance));
          const auto reference = host_linear(hx, hw, with_bias ? &hb : nullptr, rows, in, c.out, relu);
          EXPECT_TRUE(test::all_close(B::into_data(fused), TensorData::from(reference, expected).convert(dtype),
                                      10 * tolerance, 10 * tolerance));
        }
    }
  }
  const auto x = sample<B>(Shape{4, 6}, 14);
  EXPECT_KILN_ERROR(provided::linear<B>(x, sample<B>(Shape{3, 5}, 15), std::nullopt, ops::LinearActivation::none),
                    "linear: x [4, 6] must be [..., in] and weight [3, 5] [out, in] with the same in");
  EXPECT_KILN_ERROR(provided::linear<B>(x, sample<B>(Shape{3, 6}, 15), sample<B>(Shape{4}, 16),
                                        ops::LinearActivation::none),
                    "linear: bias [4] f32 must be [3] f32 for weight [3, 6]");
}

// Layer norm with its weight and bias (either absent), forward and backward: the override
// (the CPU's one pass per row, Autodiff's one node) against the default; 70 rows over two
// dims, so that the CPU's partial sums of the weight's and the bias's gradients span blocks.
TYPED_TEST(Provided, LayerNormAffineAndItsBackwardMatchTheOverrides) {
  using B = TypeParam;
  using P = typename B::Primitive;
  const auto x = sample<B>(Shape{70, 3, 8}, 21), dy = sample<B>(Shape{70, 3, 8}, 22);
  const auto w = sample<B>(Shape{3, 8}, 23), b = sample<B>(Shape{3, 8}, 24);
  const auto close = [](const std::optional<P>& got, const std::optional<P>& want) {
    if (got.has_value() != want.has_value()) return ::testing::AssertionFailure() << "one gradient is missing";
    return got ? same<B>(*got, *want, 1e-4) : ::testing::AssertionSuccess();
  };
  for (const bool with_weight : {false, true})
    for (const bool with_bias : {false, true}) {
      SCOPED_TRACE(fmt::format("weight {} bias {}", with_weight, with_bias));
      const std::optional<P> weight = with_weight ? std::optional(w) : std::nullopt;
      const std::optional<P> bias = with_bias ? std::optional(b) : std::nullopt;
      EXPECT_TRUE(same<B>(provided::layer_norm_affine<B>(x, weight, bias, 2, 1e-5),
                          defaults::layer_norm_affine<B>(x, weight, bias, 2, 1e-5), 1e-5));
      const auto got = provided::layer_norm_affine_backward<B>(x, weight, dy, 2, 1e-5, with_bias);
      const auto want = defaults::layer_norm_affine_backward<B>(x, weight, dy, 2, 1e-5, with_bias);
      EXPECT_TRUE(same<B>(got.dx, want.dx, 1e-4));
      EXPECT_TRUE(close(got.dweight, want.dweight));
      EXPECT_TRUE(close(got.dbias, want.dbias));
      EXPECT_EQ(got.dweight.has_value(), with_weight);
      EXPECT_EQ(got.dbias.has_value(), with_bias);
    }
  EXPECT_KILN_ERROR(provided::layer_norm_affine<B>(x, std::nullopt, sample<B>(Shape{8}, 25), 2, 1e-5),
                    "layer_norm: bias [8] must be [3, 8], the last 2 dims of x [70, 3, 8]");
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

// The defaults written from the required primitives alone (no fused layer norm to lean on)
// against the CPU's overrides: the linear layer, and layer norm with its weight and bias
// forward and backward, f32 and f64.
TEST(ProvidedOnAMinimalBackend, LinearAndLayerNormDefaultsMatchTheCpuOverrides) {
  static_assert(!provided::detail::HasLinear<MinimalCpu> && !provided::detail::HasLayerNormAffine<MinimalCpu> &&
                !provided::detail::HasLayerNorm<MinimalCpu>);
  for (const DType dtype : {DType::f32, DType::f64}) {
    SCOPED_TRACE(std::string(dtype_name(dtype)));
    const double tolerance = dtype == DType::f32 ? 1e-4 : 1e-10;
    const auto x = sample<Cpu>(Shape{5, 3, 8}, 31, dtype), dy = sample<Cpu>(Shape{5, 3, 8}, 32, dtype);
    const auto w = sample<Cpu>(Shape{3, 8}, 33, dtype), b = sample<Cpu>(Shape{3, 8}, 34, dtype);
    EXPECT_TRUE(same<Cpu>(defaults::layer_norm_affine<MinimalCpu>(x, w, b, 2, 1e-5),
                          Cpu::layer_norm_affine(x, w, b, 2, 1e-5), tolerance));
    const auto got = defaults::layer_norm_affine_backward<MinimalCpu>(x, w, dy, 2, 1e-5, true);
    const auto want = Cpu::layer_norm_affine_backward(x, w, dy, 2, 1e-5, true);
    EXPECT_TRUE(same<Cpu>(got.dx, want.dx, tolerance));
    ASSERT_TRUE(got.dweight && got.dbias && want.dweight && want.dbias);
    EXPECT_TRUE(same<Cpu>(*got.dweight, *want.dweight, tolerance));
    EXPECT_TRUE(same<Cpu>(*got.dbias, *want.dbias, tolerance));
    const auto lw = sample<Cpu>(Shape{6, 8}, 35, dtype), lb = sample<Cpu>(Shape{6}, 36, dtype);
    EXPECT_TRUE(same<Cpu>(defaults::linear<MinimalCpu>(x, lw, lb, ops::LinearActivation::relu),
                          Cpu::linear(x, lw, lb, ops::LinearActivation::relu), tolerance));
  }
}
