// Resampling layers against torch.nn (tests/golden/gen_resample.py): MaxUnpool2d (default and
// given output sizes, padding) and Upsample (nearest, bilinear with and without
// align_corners, bicubic by scale factor, 1-d linear), grid_sample (bilinear and nearest,
// zeros / border / reflection padding, with and without align_corners) and affine_grid:
// outputs and the gradients of sum(y * r) in f64, on every backend; bad sizes and indices
// are errors naming them.
#include "backends.hpp"
#include "golden.hpp"

#include <kiln/nn.hpp>

namespace {

using namespace kiln;
using kiln::test::golden;
using kiln::test::GoldenCase;

template <class B> class NnResample : public kiln::test::BackendTest<B> {};
TYPED_TEST_SUITE(NnResample, kiln::test::HardwareBackends, kiln::test::BackendNames);

constexpr double kTol = 1e-10;

// y = forward(x) and dx of sum(y * r) against the case.
template <class B, std::size_t D, class Forward> void check(const std::string& name, Forward&& forward) {
  SCOPED_TRACE(name);
  using AD = Autodiff<B>;
  const GoldenCase& c = golden("resample", name);
  const auto x = c.tensor<AD, D>("x", DType::f64).require_grad();
  const auto y = forward(x, c);
  EXPECT_CLOSE(y, c["y"], kTol, kTol);
  const auto grads = (y * decltype(y)::from_data(c["r"])).sum().backward();
  EXPECT_CLOSE(*x.grad(grads), c["dx"], kTol, kTol);
}

TYPED_TEST(NnResample, MaxUnpool2dMatchesTorch) {
  using B = TypeParam;
  using AD = Autodiff<B>;
  auto indices = [](const GoldenCase& c) { return c.tensor<AD, 4, Int>("indices"); };
  check<B, 4>("unpool", [&](const auto& x, const GoldenCase& c) {
    return nn::MaxUnpool2d<AD>({2, 2}).forward(x, indices(c));
  });
  check<B, 4>("unpool_sized", [&](const auto& x, const GoldenCase& c) {
    return nn::MaxUnpool2d<AD>({2, 2}).forward(x, indices(c), std::array<std::int64_t, 2>{6, 7});
  });
  check<B, 4>("unpool_padded", [&](const auto& x, const GoldenCase& c) {
    return nn::MaxUnpool2d<AD>({3, 3}, std::array<std::int64_t, 2>{2, 2}, {1, 1}).forward(x, indices(c),
                                                                                          std::array<std::int64_t, 2>{7, 7});
  });
}

TYPED_TEST(NnResample, MaxUnpool2dUndoesTheMaxPoolItFollows) {
  using B = TypeParam;
  manual_seed(4);
  const auto x = Tensor<B, 4>::random({2, 3, 6, 8}, Distribution::normal(0, 1));
  const auto [pooled, indices] = functional::max_pool2d_with_indices(x, {.kernel = {2, 2}, .stride = {2, 2}});
  const auto unpooled = nn::MaxUnpool2d<B>({2, 2}).forward(pooled, indices);
  ASSERT_EQ(unpooled.shape(), x.shape());
  // Each window's maximum is back in its place and everything else is zero: reading the
  // unpooled at the indices gives the pooled values, and the two sums of squares agree.
  const auto flat = unpooled.template reshape<3>({2, 3, -1});
  EXPECT_CLOSE(flat.gather(2, indices.template reshape<3>({2, 3, -1})), pooled.template reshape<3>({2, 3, -1}).into_data(), 0, 0);
  EXPECT_NEAR(unpooled.square().sum().item(), pooled.square().sum().item(), 1e-4);
  EXPECT_KILN_ERROR(nn::MaxUnpool2d<B>({2, 2}).forward(pooled, indices, std::array<std::int64_t, 2>{3, 3}),
                    "nn::MaxUnpool2d: output size [3, 3] for input [2, 3, 3, 4] must lie within a stride of [6, 8]");
  EXPECT_KILN_ERROR(functional::max_unpool2d(pooled, indices, {2, 2}),
                    "max_unpool2d: indices range over [");
  EXPECT_KILN_ERROR(functional::max_unpool2d(pooled, indices.narrow(3, 0, 2), {6, 8}),
                    "max_unpool2d: indices [2, 3, 3, 2] must have the shape of the input [2, 3, 3, 4]");
}

TYPED_TEST(NnResample, UpsampleMatchesTorch) {
  using B = TypeParam;
  using AD = Autodiff<B>;
  using ops::InterpolateMode;
  auto run = [](nn::UpsampleOptions o) {
    return [o](const auto& x, const GoldenCase&) { return nn::Upsample<AD>(o).forward(x); };
  };
  check<B, 4>("upsample_nearest_scale", run({.scale_factor = std::array{2.0, 2.0}}));
  check<B, 4>("upsample_bilinear_size",
              run({.size = std::array<std::int64_t, 2>{7, 9}, .mode = InterpolateMode::bilinear}));
  check<B, 4>("upsample_bilinear_corners", run({.size = std::array<std::int64_t, 2>{7, 9},
                                                .mode = InterpolateMode::bilinear, .align_corners = true}));
  check<B, 4>("upsample_bicubic_scale", run({.scale_factor = std::array{1.5, 1.7}, .mode = InterpolateMode::bicubic}));
  check<B, 3>("upsample_linear_1d", run({.scale_factor = std::array{3.0, 1.0}, .mode = InterpolateMode::bilinear}));
  EXPECT_KILN_ERROR(nn::Upsample<AD>(nn::UpsampleOptions{}), "nn::Upsample: give either size or scale_factor, not neither");
  EXPECT_KILN_ERROR(nn::Upsample<AD>({.scale_factor = std::array{0.0, 1.0}}),
                    "nn::Upsample: scale_factor [0, 1] must be finite and > 0");
}

TYPED_TEST(NnResample, GridSampleMatchesTorchInEveryModeWithGradients) {
  using B = TypeParam;
  using AD = Autodiff<B>;
  using functional::GridPadding;
  using functional::GridSampleMode;
  for (const auto mode : {GridSampleMode::bilinear, GridSampleMode::nearest}) {
    for (const auto padding : {GridPadding::zeros, GridPadding::border, GridPadding::reflection}) {
      for (const bool corners : {false, true}) {
        const std::string name = fmt::format("grid_sample_{}_{}_{}", mode == GridSampleMode::bilinear ? "bilinear" : "nearest",
                                             padding == GridPadding::zeros    ? "zeros"
                                             : padding == GridPadding::border ? "border"
                                                                              : "reflection",
                                             corners ? 1 : 0);
        SCOPED_TRACE(name);
        const GoldenCase& c = golden("resample", name);
        const auto x = c.tensor<AD, 4>("x", DType::f64).require_grad();
        const auto grid = c.tensor<AD, 4>("grid", DType::f64).require_grad();
        const auto y = functional::grid_sample(x, grid, {.mode = mode, .padding_mode = padding, .align_corners = corners});
        EXPECT_CLOSE(y, c["y"], kTol, kTol);
        const auto grads = (y * Tensor<AD, 4>::from_data(c["r"])).sum().backward();
        EXPECT_CLOSE(*x.grad(grads), c["dx"], kTol, kTol);
        // torch gives the nearest mode's grid a zero gradient; Kiln's has none (also zero).
        const auto dgrid = grid.grad(grads);
        const double torch_dgrid = Tensor<B, 4>::from_data(c["dgrid"]).abs().max().item();
        if (dgrid) EXPECT_CLOSE(*dgrid, c["dgrid"], 1e-9, 1e-9);
        else EXPECT_EQ(torch_dgrid, 0.0);
      }
    }
  }
  EXPECT_KILN_ERROR(functional::grid_sample(Tensor<B, 4>::zeros({2, 3, 4, 4}), Tensor<B, 4>::zeros({2, 5, 5, 3})),
                    "grid_sample: grid [2, 5, 5, 3] must be [N, H_out, W_out, 2] for input [2, 3, 4, 4]");
}

TYPED_TEST(NnResample, AffineGridMatchesTorchAndSamplesTheIdentity) {
  using B = TypeParam;
  using AD = Autodiff<B>;
  for (const bool corners : {false, true}) {
    SCOPED_TRACE(corners);
    const GoldenCase& c = golden("resample", fmt::format("affine_grid_{}", corners ? 1 : 0));
    const auto theta = c.tensor<AD, 3>("theta", DType::f64).require_grad();
    const auto y = functional::affine_grid(theta, {2, 3, 4, 5}, corners);
    EXPECT_CLOSE(y, c["y"], kTol, kTol);
    const auto grads = (y * Tensor<AD, 4>::from_data(c["r"])).sum().backward();
    EXPECT_CLOSE(*theta.grad(grads), c["dtheta"], kTol, kTol);
    // The identity map samples every pixel at its own centre: the input comes back.
    manual_seed(9);
    const auto image = Tensor<B, 4>::random({1, 2, 4, 5}, Distribution::normal(0, 1), {}, DType::f64);
    const auto identity = Tensor<B, 3>::from({{{1.0, 0.0, 0.0}, {0.0, 1.0, 0.0}}}, {}, DType::f64);
    const auto sampled = functional::grid_sample(image, functional::affine_grid(identity, {1, 2, 4, 5}, corners),
                                                 {.align_corners = corners});
    EXPECT_CLOSE(sampled, image.into_data(), 1e-12, 1e-12);
  }
  EXPECT_KILN_ERROR(functional::affine_grid(Tensor<B, 3>::zeros({2, 3, 3}), {2, 1, 4, 4}),
                    "affine_grid: theta [2, 3, 3] must be [N, 2, 3] for size [2, 1, 4, 4]");
}

TYPED_TEST(NnResample, PixelShuffleAndUnfoldModulesMatchTorch) {
  using B = TypeParam;
  using AD = Autodiff<B>;
  check<B, 4>("pixel_shuffle", [](const auto& x, const GoldenCase&) { return nn::PixelShuffle<AD>(2).forward(x); });
  check<B, 4>("pixel_unshuffle", [](const auto& x, const GoldenCase&) { return nn::PixelUnshuffle<AD>(3).forward(x); });
  const functional::UnfoldOptions windows{.dilation = {1, 2}, .padding = {1, 0}, .stride = {2, 1}};
  check<B, 4>("unfold", [&](const auto& x, const GoldenCase&) { return nn::Unfold<AD>({2, 3}, windows).forward(x); });
  check<B, 3>("fold", [&](const auto& x, const GoldenCase&) { return nn::Fold<AD>({5, 8}, {2, 3}, windows).forward(x); });
}

}  // namespace
