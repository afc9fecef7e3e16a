// nn losses against torch.nn.functional (tests/golden/gen_loss.py): every reduction's value
// and input gradient in f64, on every backend; bad inputs name the loss.
#include "backends.hpp"
#include "golden.hpp"

#include <kiln/nn.hpp>

#include <cmath>

namespace {

using namespace kiln;
using kiln::test::golden;
using kiln::test::GoldenCase;

template <class B> class NnLoss : public kiln::test::BackendTest<B> {};
TYPED_TEST_SUITE(NnLoss, kiln::test::HardwareBackends, kiln::test::BackendNames);

constexpr double kTol = 1e-10;

nn::Reduction reduction_of(const std::string& name) {
  if (name == "none") return nn::Reduction::none;
  if (name == "sum") return nn::Reduction::sum;
  if (name == "batchmean") return nn::Reduction::batchmean;
  return nn::Reduction::mean;
}

// For each reduction in the case: loss(x, reduction) and the gradient of x (of
// sum(loss * linspace(0.5, 1.5)) for none, as the fixture script).
template <class B, std::size_t D, class Loss>
void check_loss(const std::string& name, Loss&& loss, std::initializer_list<const char*> reductions = {"none", "mean", "sum"}) {
  SCOPED_TRACE(name);
  using AD = Autodiff<B>;
  const GoldenCase& c = golden("loss", name);
  for (const char* r : reductions) {
    SCOPED_TRACE(r);
    const auto x = c.tensor<AD, D>("x", DType::f64).require_grad();
    const auto out = loss(x, c, reduction_of(r));
    const TensorData& want = c[std::string("loss_") + r];
    EXPECT_CLOSE(out.into_data().reshaped(want.shape()), want, kTol, kTol);
    auto weighted = out;
    if (std::string(r) == "none") {
      const std::int64_t n = out.numel();
      std::vector<double> w(static_cast<std::size_t>(n));
      for (std::int64_t i = 0; i < n; ++i) w[i] = n == 1 ? 0.5 : 0.5 + static_cast<double>(i) / static_cast<double>(n - 1);
      weighted = out * decltype(out)::from_data(TensorData::from(w, out.shape()));
    }
    const auto grads = weighted.sum().backward();
    EXPECT_CLOSE(*x.grad(grads), c[std::string("dx_") + r], kTol, kTol);
  }
}

TYPED_TEST(NnLoss, RegressionLossesMatchTorch) {
  using B = TypeParam;
  using AD = Autodiff<B>;
  auto t0 = [](const GoldenCase& c) { return c.tensor<AD, 2>("t0", DType::f64); };
  check_loss<B, 2>("mse", [&](const auto& x, const GoldenCase& c, nn::Reduction r) { return nn::mse_loss(x, t0(c), r); });
  check_loss<B, 2>("l1", [&](const auto& x, const GoldenCase& c, nn::Reduction r) { return nn::l1_loss(x, t0(c), r); });
  check_loss<B, 2>("huber",
                   [&](const auto& x, const GoldenCase& c, nn::Reduction r) { return nn::huber_loss(x, t0(c), 0.7, r); });
  check_loss<B, 2>("smooth_l1", [&](const auto& x, const GoldenCase& c, nn::Reduction r) {
    return nn::smooth_l1_loss(x, t0(c), 0.5, r);
  });
}

TYPED_TEST(NnLoss, ClassificationLossesMatchTorch) {
  using B = TypeParam;
  using AD = Autodiff<B>;
  auto target = [](const GoldenCase& c) { return c.tensor<AD, 1, Int>("t0"); };
  auto weight = [](const GoldenCase& c) { return std::optional(c.tensor<AD, 1>("weight", DType::f64)); };
  check_loss<B, 2>("cross_entropy", [&](const auto& x, const GoldenCase& c, nn::Reduction r) {
    return nn::cross_entropy(x, target(c), std::nullopt, {.reduction = r});
  });
  check_loss<B, 2>("cross_entropy_weighted", [&](const auto& x, const GoldenCase& c, nn::Reduction r) {
    return nn::cross_entropy(x, target(c), weight(c), {.reduction = r});
  });
  check_loss<B, 2>("cross_entropy_smoothed", [&](const auto& x, const GoldenCase& c, nn::Reduction r) {
    return nn::cross_entropy(x, target(c), weight(c), {.label_smoothing = 0.2, .reduction = r});
  });
  check_loss<B, 2>("cross_entropy_smoothed_unweighted", [&](const auto& x, const GoldenCase& c, nn::Reduction r) {
    return nn::cross_entropy(x, target(c), std::nullopt, {.label_smoothing = 0.1, .reduction = r});
  });
  check_loss<B, 2>("cross_entropy_probs", [&](const auto& x, const GoldenCase& c, nn::Reduction r) {
    return nn::cross_entropy(x, c.tensor<AD, 2>("t0", DType::f64), std::nullopt, {.label_smoothing = 0.1, .reduction = r});
  });
  check_loss<B, 2>("nll", [&](const auto& x, const GoldenCase& c, nn::Reduction r) {
    return nn::nll_loss(x, target(c), weight(c), {.reduction = r});
  });
  check_loss<B, 2>("bce", [&](const auto& x, const GoldenCase& c, nn::Reduction r) {
    return nn::binary_cross_entropy(x, c.tensor<AD, 2>("t0", DType::f64), std::nullopt, r);
  });
  check_loss<B, 2>("bce_with_logits", [&](const auto& x, const GoldenCase& c, nn::Reduction r) {
    return nn::binary_cross_entropy_with_logits(x, c.tensor<AD, 2>("t0", DType::f64), std::nullopt,
                                                std::optional(c.tensor<AD, 1>("pos_weight", DType::f64)), r);
  });
}

TYPED_TEST(NnLoss, DivergenceAndEmbeddingLossesMatchTorch) {
  using B = TypeParam;
  using AD = Autodiff<B>;
  check_loss<B, 2>(
      "kl_div",
      [](const auto& x, const GoldenCase& c, nn::Reduction r) { return nn::kl_div(x, c.tensor<AD, 2>("t0", DType::f64), r); },
      {"none", "mean", "sum", "batchmean"});
  check_loss<B, 2>("kl_div_log_target", [](const auto& x, const GoldenCase& c, nn::Reduction r) {
    return nn::kl_div(x, c.tensor<AD, 2>("t0", DType::f64), r, true);
  });
  check_loss<B, 2>("cosine_embedding", [](const auto& x, const GoldenCase& c, nn::Reduction r) {
    return nn::cosine_embedding_loss(x, c.tensor<AD, 2>("t0", DType::f64), c.tensor<AD, 1>("t1", DType::f64), 0.1, r);
  });
}

TYPED_TEST(NnLoss, MarginPoissonGaussianAndFocalLossesMatchTorch) {
  using B = TypeParam;
  using AD = Autodiff<B>;
  auto t = [](const GoldenCase& c, const char* name) { return c.tensor<AD, 2>(name, DType::f64); };
  check_loss<B, 2>("soft_margin", [&](const auto& x, const GoldenCase& c, nn::Reduction r) {
    return nn::soft_margin_loss(x, t(c, "t0"), r);
  });
  check_loss<B, 2>("margin_ranking", [&](const auto& x, const GoldenCase& c, nn::Reduction r) {
    return nn::margin_ranking_loss(x, t(c, "t0"), t(c, "t1"), 0.3, r);
  });
  check_loss<B, 2>("hinge_embedding", [&](const auto& x, const GoldenCase& c, nn::Reduction r) {
    return nn::hinge_embedding_loss(x, t(c, "t0"), 1.5, r);
  });
  check_loss<B, 2>("poisson_nll", [&](const auto& x, const GoldenCase& c, nn::Reduction r) {
    return nn::poisson_nll_loss(x, t(c, "t0"), {.reduction = r});
  });
  check_loss<B, 2>("poisson_nll_rate_full", [&](const auto& x, const GoldenCase& c, nn::Reduction r) {
    return nn::poisson_nll_loss(x, t(c, "t0"), {.log_input = false, .full = true, .reduction = r});
  });
  check_loss<B, 2>("gaussian_nll", [&](const auto& x, const GoldenCase& c, nn::Reduction r) {
    return nn::gaussian_nll_loss(x, t(c, "t0"), t(c, "t1"), false, 1e-6, r);
  });
  check_loss<B, 2>("gaussian_nll_full", [&](const auto& x, const GoldenCase& c, nn::Reduction r) {
    return nn::gaussian_nll_loss(x, t(c, "t0"), t(c, "t1"), true, 1e-3, r);
  });
  check_loss<B, 2>("triplet_margin", [&](const auto& x, const GoldenCase& c, nn::Reduction r) {
    return nn::triplet_margin_loss(x, t(c, "t0"), t(c, "t1"), 2.0, 2.0, 1e-6, false, r);
  });
  check_loss<B, 2>("triplet_margin_p1_swap", [&](const auto& x, const GoldenCase& c, nn::Reduction r) {
    return nn::triplet_margin_loss(x, t(c, "t0"), t(c, "t1"), 1.0, 1.0, 1e-6, true, r);
  });
  check_loss<B, 2>("multilabel_soft_margin", [&](const auto& x, const GoldenCase& c, nn::Reduction r) {
    const auto weight = Tensor<AD, 1>::from_data(TensorData::from(std::vector<double>{0.5, 1.0, 2.0, 1.5}, Shape{4}));
    return nn::multilabel_soft_margin_loss(x, t(c, "t0"), weight, r);
  });
  check_loss<B, 2>("sigmoid_focal", [&](const auto& x, const GoldenCase& c, nn::Reduction r) {
    return nn::sigmoid_focal_loss(x, t(c, "t0"), 0.25, 2.0, r);
  });
  check_loss<B, 2>("sigmoid_focal_no_alpha", [&](const auto& x, const GoldenCase& c, nn::Reduction r) {
    return nn::sigmoid_focal_loss(x, t(c, "t0"), -1.0, 1.5, r);
  });
}

TYPED_TEST(NnLoss, MultiClassAndMultiLabelMarginLossesMatchTorch) {
  using B = TypeParam;
  using AD = Autodiff<B>;
  auto classes = [](const GoldenCase& c) { return c.tensor<AD, 1, Int>("t0"); };
  check_loss<B, 2>("multi_margin", [&](const auto& x, const GoldenCase& c, nn::Reduction r) {
    return nn::multi_margin_loss(x, classes(c), 1, 1.0, std::nullopt, r);
  });
  check_loss<B, 2>("multi_margin_p2_weighted", [&](const auto& x, const GoldenCase& c, nn::Reduction r) {
    return nn::multi_margin_loss(x, classes(c), 2, 0.7, std::optional(c.tensor<AD, 1>("weight", DType::f64)), r);
  });
  check_loss<B, 2>("multilabel_margin", [](const auto& x, const GoldenCase& c, nn::Reduction r) {
    return nn::multilabel_margin_loss(x, c.tensor<AD, 2, Int>("t0"), r);
  });
}

// The fixture's x are logits [T, N, C]; the loss takes their log_softmax (see gen_loss.py).
TYPED_TEST(NnLoss, CtcMatchesTorch) {
  using B = TypeParam;
  using AD = Autodiff<B>;
  auto lengths = [](const GoldenCase& c, const char* name) { return c.tensor<AD, 1, Int>(name).template to_vec<std::int64_t>(); };
  check_loss<B, 3>("ctc_padded", [&](const auto& x, const GoldenCase& c, nn::Reduction r) {
    return nn::ctc_loss(x.log_softmax(2), c.tensor<AD, 2, Int>("t0"), lengths(c, "input_lengths"),
                        lengths(c, "target_lengths"), {.reduction = r});
  });
  check_loss<B, 3>("ctc_concatenated_zero_infinity", [&](const auto& x, const GoldenCase& c, nn::Reduction r) {
    return nn::ctc_loss(x.log_softmax(2), c.tensor<AD, 1, Int>("t0"), lengths(c, "input_lengths"),
                        lengths(c, "target_lengths"), {.blank = 4, .reduction = r, .zero_infinity = true});
  });
  // Without zero_infinity the impossible alignment is inf, as torch's; an input of no frames
  // explains the empty target with probability 1.
  const GoldenCase& c = golden("loss", "ctc_concatenated_zero_infinity");
  const auto log_probs = c.tensor<B, 3>("x", DType::f64).log_softmax(2);
  const std::vector<double> losses =
      nn::ctc_loss(log_probs, c.tensor<B, 1, Int>("t0"), {3, 6, 0}, {3, 1, 0}, {.blank = 4, .reduction = nn::Reduction::none})
          .template to_vec<double>();
  EXPECT_TRUE(std::isinf(losses[0]) && losses[0] > 0);
  EXPECT_NEAR(losses[1], c["loss_none"].template to_vec<double>()[1], kTol);
  EXPECT_EQ(losses[2], 0.0);
  // Lengths in Int tensors, as torch takes them, and f32 log-probabilities.
  const GoldenCase& padded = golden("loss", "ctc_padded");
  const auto sum = nn::ctc_loss(padded.tensor<B, 3>("x", DType::f32).log_softmax(2), padded.tensor<B, 2, Int>("t0"),
                                padded.tensor<B, 1, Int>("input_lengths"), padded.tensor<B, 1, Int>("target_lengths"),
                                {.reduction = nn::Reduction::sum});
  EXPECT_EQ(sum.dtype(), DType::f32);
  EXPECT_NEAR(sum.item(), padded["loss_sum"].template to_vec<double>()[0], 1e-4);
}

TYPED_TEST(NnLoss, BadInputsNameTheLoss) {
  using B = TypeParam;
  const auto a = Tensor<B, 2>::zeros({2, 3}), b = Tensor<B, 2>::zeros({3, 2});
  EXPECT_KILN_ERROR(nn::mse_loss(a, b), "mse_loss: input [2, 3] and target [3, 2] must have one shape");
  // cross_entropy's errors name cross_entropy, not the nll_loss it computes with.
  EXPECT_KILN_ERROR(nn::cross_entropy(a, Tensor<B, 1, Int>::from({0, 3})), "cross_entropy: a target is outside [0, 3)");
  EXPECT_KILN_ERROR(nn::cross_entropy(a, Tensor<B, 1, Int>::from({0})), "cross_entropy: 1 targets for input [2, 3]");
  EXPECT_KILN_ERROR(nn::nll_loss(a.log_softmax(1), Tensor<B, 1, Int>::from({0, 3})), "nll_loss: a target is outside [0, 3)");
  EXPECT_KILN_ERROR(nn::huber_loss(a, a, 0.0), "huber_loss: delta must be positive");
  EXPECT_KILN_ERROR(nn::mse_loss(a, a, nn::Reduction::batchmean), "reduction batchmean is kl_div's only");
  EXPECT_KILN_ERROR(nn::margin_ranking_loss(a, a, b), "margin_ranking_loss: input [2, 3] and target [3, 2] must have one shape");
  EXPECT_KILN_ERROR(nn::triplet_margin_loss(a, a, a, 1.0, -1.0), "triplet_margin_loss: p must be positive, got -1");
  EXPECT_KILN_ERROR(nn::gaussian_nll_loss(a, a, a, false, 0.0), "gaussian_nll_loss: eps must be positive, got 0");
  const auto classes = Tensor<B, 1, Int>::from({0, 2});
  EXPECT_KILN_ERROR(nn::multi_margin_loss(a, classes, 3), "multi_margin_loss: p must be 1 or 2, got 3");
  EXPECT_KILN_ERROR(nn::multi_margin_loss(a, Tensor<B, 1, Int>::from({0, 3})), "multi_margin_loss: a target is outside [0, 3)");
  EXPECT_KILN_ERROR(nn::multi_margin_loss(a, classes, 1, 1.0, Tensor<B, 1>::ones({2})),
                    "multi_margin_loss: 2 class weights for 3 classes");
  EXPECT_KILN_ERROR(nn::multilabel_margin_loss(a, Tensor<B, 2, Int>::from({{0, 1, -1}, {2, 5, -1}})),
                    "multilabel_margin_loss: target[1, 1] = 5 is outside [0, 3) and is not -1");
  EXPECT_KILN_ERROR(nn::multilabel_margin_loss(a, Tensor<B, 2, Int>::zeros({3, 2})),
                    "multilabel_margin_loss: input [2, 3] and target [3, 2] must have one shape");
  const auto log_probs = Tensor<B, 3>::zeros({4, 2, 3}).log_softmax(2);
  const auto targets = Tensor<B, 2, Int>::from({{1, 2}, {2, 0}});
  EXPECT_KILN_ERROR(nn::ctc_loss(log_probs, targets, {4}, {2, 1}), "ctc_loss: 1 input_lengths for a batch of 2");
  EXPECT_KILN_ERROR(nn::ctc_loss(log_probs, targets, {4, 5}, {2, 1}), "ctc_loss: input_lengths[1] = 5 is outside [0, 4]");
  EXPECT_KILN_ERROR(nn::ctc_loss(log_probs, targets, {4, 4}, {2, 3}), "ctc_loss: target_lengths[1] = 3 is outside [0, 2]");
  EXPECT_KILN_ERROR(nn::ctc_loss(log_probs, targets, {4, 4}, {2}), "ctc_loss: 1 target_lengths for a batch of 2");
  EXPECT_KILN_ERROR(nn::ctc_loss(log_probs, Tensor<B, 1, Int>::from({1, 2, 1}), {4, 4}, {2, 2}),
                    "ctc_loss: target_lengths[1] = 2 goes past the 3 concatenated targets");
  EXPECT_KILN_ERROR(nn::ctc_loss(log_probs, Tensor<B, 1, Int>::from({1, 2, 1}), {4, 4}, {1, 1}),
                    "ctc_loss: target_lengths sum to 2, but there are 3 concatenated targets");
  EXPECT_KILN_ERROR(nn::ctc_loss(log_probs, Tensor<B, 2, Int>::from({{1, 3}, {2, 0}}), {4, 4}, {2, 1}),
                    "ctc_loss: target 1 of sample 0 is 3, outside [0, 3)");
  EXPECT_KILN_ERROR(nn::ctc_loss(log_probs, targets, {4, 4}, {2, 1}, {.blank = 3}), "ctc_loss: blank 3 is outside [0, 3)");
}

}  // namespace
