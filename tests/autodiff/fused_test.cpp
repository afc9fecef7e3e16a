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

// Layer norm with its weight and bias is one op (kiln::provided::layer_norm_affine: one pass
// each way on the CPU): its output and the gradients of x, the weight and the bias equal
// those of the normalization times the weight plus the bias, in f64, f32 and f16 (through
// f32), over one dim and over two.
TYPED_TEST(FusedComposites, LayerNormWithWeightAndBiasMatchesTheComposition) {
  using AD = Autodiff<TypeParam>;
  manual_seed(6);
  for (const DType dtype : {DType::f64, DType::f32, DType::f16}) {
    const double tol = dtype == DType::f64 ? 1e-10 : dtype == DType::f32 ? 1e-4 : 3e-2;
    SCOPED_TRACE(std::string(dtype_name(dtype)));
    // [131, 4, 6] over both last dims: 131 rows, more than two blocks of the CPU's partial sums.
    nn::LayerNorm<AD, 2> norm({4, 6}, 1e-3);
    norm.weight->replace(Tensor<AD, 2>::random({4, 6}, Distribution::normal(1, 0.5), {}, dtype));
    norm.bias->replace(Tensor<AD, 2>::random({4, 6}, Distribution::normal(0, 0.5), {}, dtype));
    const auto x = Tensor<AD, 3>::random({131, 4, 6}, Distribution::normal(2, 3), {}, dtype).require_grad();
    const auto weights = Tensor<AD, 3>::random({131, 4, 6}, Distribution::normal(0, 1), {}, dtype);
    const auto fused = norm.forward(x);
    const auto& w = **norm.weight;
    const auto& b = **norm.bias;
    const auto reference = layer_norm_reference(x, 1e-3) * w.template unsqueeze<3>() + b.template unsqueeze<3>();
    EXPECT_CLOSE(fused.inner(), reference.inner().into_data(), tol, tol);
    const auto g_fused = (fused * weights).sum().backward();
    const auto g_reference = (reference * weights).sum().backward();
    // The reference's gradients are summed in another order: in f16 they round apart by some ulps.
    const auto same_gradient = [&](const auto& t) {
      ASSERT_TRUE(t.grad(g_fused) && t.grad(g_reference));
      EXPECT_CLOSE(*t.grad(g_fused), t.grad(g_reference)->into_data(), 10 * tol, 10 * tol);
    };
    same_gradient(x);
    same_gradient(w);
    same_gradient(b);
  }
  EXPECT_KILN_ERROR(provided::layer_norm_affine<AD>(Tensor<AD, 2>::zeros({3, 5}).primitive(),
                                                    Tensor<AD, 1>::ones({4}).primitive(), std::nullopt, 1, 1e-5),
                    "layer_norm: weight [4] must be [5], the last 1 dims of x [3, 5]");
}

}  // namespace
