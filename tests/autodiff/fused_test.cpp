// Fused composites (FusedSoftmax, FusedLayerNorm) against the compositions of primitives
// they replace: values and gradients, along every dim, in f64 and in f16 (computed through
// f32), on every backend; a backend without them compares the composition with itself.
#include "backends.hpp"
#include "golden.hpp"

#include <kiln/nn/norm.hpp>
#include <kiln/tensor.hpp>

namespace {

using namespace kiln;

template <class B> class FusedComposites : public ::kiln::test::BackendTest<B> {};
TYPED_TEST_SUITE(FusedComposites, ::kiln::test::HardwareBackends, ::kiln::test::BackendNames);

// The composition the tensor API falls back to, written out with primitives.
template <class B, std::size_t D> Tensor<B, D> softmax_reference(const Tensor<B, D>& x, std::int64_t dim, bool log) {
  const Tensor<B, D> shifted = x - x.max_dim(dim).detach();
  if (log) return shifted - shifted.exp().sum_dim(dim).log();
  const Tensor<B, D> e = shifted.exp();
  return e / e.sum_dim(dim);
}

template <class B, std::size_t D> Tensor<B, D> layer_norm_reference(const Tensor<B, D>& x, double eps) {
  const Tensor<B, D> centered = x - x.mean_dim(D - 1).mean_dim(D - 2);
  const Tensor<B, D> var = (centered * centered).mean_dim(D - 1).mean_dim(D - 2);
  return centered * (var + eps).rsqrt();
}

TYPED_TEST(FusedComposites, SoftmaxAndLogSoftmaxMatchTheCompositionAlongEveryDim) {
  using AD = Autodiff<TypeParam>;
  manual_seed(3);
  for (const DType dtype : {DType::f64, DType::f16}) {
    const double tol = dtype == DType::f64 ? 1e-12 : 2e-3;
    for (std::int64_t dim = 0; dim < 3; ++dim) {
      for (const bool log : {false, true}) {
        SCOPED_TRACE(fmt::format("{} dim {} log {}", dtype_name(dtype), dim, log));
        const auto x = Tensor<AD, 3>::random({3, 5, 4}, Distribution::normal(0, 3), {}, dtype).require_grad();
        const auto weights = Tensor<AD, 3>::random({3, 5, 4}, Distribution::normal(0, 1), {}, dtype);
        const auto fused = log ? x.log_softmax(dim) : x.softmax(dim);
        const auto reference = softmax_reference(x, dim, log);
        EXPECT_CLOSE(fused.inner(), reference.inner().into_data(), tol, tol);
        const auto g_fused = x.grad((fused * weights).sum().backward());
        const auto g_reference = x.grad((reference * weights).sum().backward());
        ASSERT_TRUE(g_fused && g_reference);
        EXPECT_CLOSE(*g_fused, g_reference->into_data(), tol, tol);
      }
    }
  }
}

TYPED_TEST(FusedComposites, LayerNormMatchesTheCompositionOverTwoDims) {
  using AD = Autodiff<TypeParam>;
  manual_seed(5);
  nn::LayerNorm<AD, 2> norm({4, 6}, 1e-3, false);
  const auto x = (Tensor<AD, 3>::random({5, 4, 6}, Distribution::normal(2, 3), {}, DType::f64)).require_grad();
  const auto weights = Tensor<AD, 3>::random({5, 4, 6}, Distribution::normal(0, 1), {}, DType::f64);
  const auto fused = norm.forward(x);
  const auto reference = layer_norm_reference(x, 1e-3);
  EXPECT_CLOSE(fused.inner(), reference.inner().into_data(), 1e-12, 1e-12);
  const auto g_fused = x.grad((fused * weights).sum().backward());
  const auto g_reference = x.grad((reference * weights).sum().backward());
  ASSERT_TRUE(g_fused && g_reference);
  EXPECT_CLOSE(*g_fused, g_reference->into_data(), 1e-10, 1e-10);
}

}  // namespace
