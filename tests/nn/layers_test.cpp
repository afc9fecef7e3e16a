// nn layers against torch.nn (tests/golden/gen_nn.py): each layer gets PyTorch's weights,
// and its output, the input gradient and every parameter gradient of sum(y * r) must match
// in f64; layers with running statistics also match PyTorch's buffers after the step. On
// every backend (Autodiff over Cpu and Vulkan).
#include "backends.hpp"
#include "golden.hpp"
#include "param_grads.hpp"

#include <kiln/nn.hpp>

#include <algorithm>
#include <cmath>

namespace {

using namespace kiln;
using kiln::test::golden;
using kiln::test::GoldenCase;

template <class B> class NnLayers : public kiln::test::BackendTest<B> {};
TYPED_TEST_SUITE(NnLayers, kiln::test::HardwareBackends, kiln::test::BackendNames);

constexpr double kTol = 1e-10;

// The case's "w.<path>" tensors into the module's parameters and buffers, as f64.
template <class M> void load_weights(M& module, const GoldenCase& c) {
  auto take = [&c](const std::string& path, auto& slot, bool param) {
    using T = std::remove_cvref_t<decltype(slot.val())>;
    const TensorData& data = c["w." + path];
    const Shape shape = data.shape().rank() == 0 ? Shape{1} : data.shape();
    const DType dtype = is_float(data.dtype()) ? DType::f64 : data.dtype();
    ASSERT_EQ(shape, slot->shape()) << path;
    slot.replace(T::from_data(data.reshaped(shape).convert(dtype)));
    (void)param;
  };
  nn::for_each_param(module, [&](const std::string& path, auto& p) { take(path, p, true); });
  nn::for_each_buffer(module, [&](const std::string& path, auto& b) { take(path, b, false); });
}

// Runs the module on the case's x and checks y, dx, every d.<param> and after.<buffer>.
template <class B, std::size_t D, class M, class Forward>
void check_layer(M& module, const std::string& name, Forward&& forward, bool float_input = true) {
  SCOPED_TRACE(name);
  const GoldenCase& c = golden("nn", name);
  load_weights(module, c);
  using AD = Autodiff<B>;
  auto y = [&] {
    if constexpr (D == 0) return forward(module, c);
    else {
      (void)float_input;
      return forward(module, c.tensor<AD, D>("x", DType::f64).require_grad());
    }
  }();
  EXPECT_CLOSE(y, c["y"], kTol, kTol);
  using Y = decltype(y);
  const Y r = Y::from_data(c["r"]);
  auto grads = (y * r).sum().backward();
  kiln::test::expect_param_grads(module, grads, c, kTol);
  nn::for_each_buffer(module, [&](const std::string& path, const auto& b) {
    const auto it = c.tensors.find("after." + path);
    if (it == c.tensors.end()) return;
    const TensorData& want = it->second.shape().rank() == 0 ? it->second.reshaped(Shape{1}) : it->second;
    EXPECT_CLOSE(*b, want, kTol, kTol) << path;
  });
}

// Forward plus the input gradient, for inputs that require grad.
template <std::size_t D> auto with_dx(const GoldenCase& c, auto&& module_forward) {
  return module_forward;
}

TYPED_TEST(NnLayers, ConvolutionsMatchTorch) {
  using B = TypeParam;
  using AD = Autodiff<B>;
  auto fwd = [](const auto& m, const auto& x) { return m.forward(x); };
  nn::Linear<AD> linear(5, 3);
  check_layer<B, 2>(linear, "linear", fwd);
  nn::Conv1d<AD> conv1d(4, 6, 3, {.stride = 2, .padding = 1, .groups = 2});
  check_layer<B, 3>(conv1d, "conv1d", fwd);
  nn::Conv2d<AD> conv2d(3, 4, {3, 2}, {.stride = {2, 1}, .padding = {1, 0}, .dilation = {1, 2}});
  check_layer<B, 4>(conv2d, "conv2d", fwd);
  nn::Conv2d<AD> grouped(4, 6, {3, 3}, {.padding = {1, 1}, .groups = 2, .bias = false});
  check_layer<B, 4>(grouped, "conv2d_groups", fwd);
  nn::ConvTranspose1d<AD> t1(4, 3, 3, {.stride = 2, .padding = 1, .output_padding = 1});
  check_layer<B, 3>(t1, "conv_transpose1d", fwd);
  nn::ConvTranspose2d<AD> t2(2, 4, {3, 2}, {.stride = {2, 2}, .padding = {1, 0}, .groups = 2});
  check_layer<B, 4>(t2, "conv_transpose2d", fwd);
}

// The input gradient of the stateless layers (they have no parameters to check), whose
// output is forward(module, x).
template <class B, std::size_t D, class M, class Forward>
void check_input_gradient(const M& module, const std::string& name, Forward&& forward) {
  SCOPED_TRACE(name);
  using AD = Autodiff<B>;
  const GoldenCase& c = golden("nn", name);
  const auto x = c.tensor<AD, D>("x", DType::f64).require_grad();
  const auto y = forward(module, x);
  EXPECT_CLOSE(y, c["y"], kTol, kTol);
  const auto grads = (y * decltype(y)::from_data(c["r"])).sum().backward();
  EXPECT_CLOSE(*x.grad(grads), c["dx"], kTol, kTol);
}
template <class B, std::size_t D, class M> void check_input_gradient(const M& module, const std::string& name) {
  check_input_gradient<B, D>(module, name, [](const M& m, const auto& x) { return m.forward(x); });
}

TYPED_TEST(NnLayers, PoolingMatchesTorch) {
  using B = TypeParam;
  using AD = Autodiff<B>;
  check_input_gradient<B, 3>(nn::MaxPool1d<AD>(3, {.stride = 2, .padding = 1}), "max_pool1d");
  check_input_gradient<B, 4>(nn::MaxPool2d<AD>({2, 2}), "max_pool2d");
  check_input_gradient<B, 3>(nn::AvgPool1d<AD>(3, {.stride = 2, .padding = 1}), "avg_pool1d");
  check_input_gradient<B, 4>(
      nn::AvgPool2d<AD>({3, 2}, {.stride = std::array<std::int64_t, 2>{2, 1}, .padding = {1, 0}, .count_include_pad = false}),
      "avg_pool2d");
  check_input_gradient<B, 3>(nn::AdaptiveAvgPool1d<AD>(4), "adaptive_avg_pool1d");
  check_input_gradient<B, 4>(nn::AdaptiveAvgPool2d<AD>({3, 2}), "adaptive_avg_pool2d");
}

TYPED_TEST(NnLayers, NormalizationsMatchTorchInTrainAndEvalMode) {
  using B = TypeParam;
  using AD = Autodiff<B>;
  auto fwd = [](auto& m, const auto& x) { return m.forward(x); };
  for (const bool train : {true, false}) {
    const std::string suffix = train ? "" : "_eval";
    nn::BatchNorm1d<AD> bn1(4, {.momentum = 0.2});
    nn::BatchNorm1d<AD> bn1_3d(4);
    nn::BatchNorm2d<AD> bn2(3);
    for (auto* bn : {&bn1, &bn1_3d, &bn2}) nn::train(*bn, train);
    check_layer<B, 2>(bn1, "batch_norm1d" + suffix, fwd);
    check_layer<B, 3>(bn1_3d, "batch_norm1d_3d" + suffix, fwd);
    check_layer<B, 4>(bn2, "batch_norm2d" + suffix, fwd);
  }
  nn::LayerNorm<AD, 2> ln({4, 5}, 1e-4);
  check_layer<B, 4>(ln, "layer_norm", fwd);
  nn::LayerNorm<AD> plain({6}, 1e-5, false);
  check_layer<B, 2>(plain, "layer_norm_no_affine", fwd);
  nn::GroupNorm<AD> gn(2, 6);
  check_layer<B, 4>(gn, "group_norm", fwd);
  nn::InstanceNorm1d<AD> in1(3, 1e-5, true);
  check_layer<B, 3>(in1, "instance_norm1d", fwd);
  nn::InstanceNorm2d<AD> in2(3);
  check_layer<B, 4>(in2, "instance_norm2d", fwd);
  nn::RmsNorm<AD> rms({4});
  check_layer<B, 3>(rms, "rms_norm", fwd);
}

TYPED_TEST(NnLayers, EmbeddingAndPReluMatchTorch) {
  using B = TypeParam;
  using AD = Autodiff<B>;
  nn::Embedding<AD> emb(10, 4, 2);
  check_layer<B, 0>(emb, "embedding", [](const auto& m, const GoldenCase& c) {
    return m.forward(c.tensor<AD, 2, Int>("x"));
  });
  auto fwd = [](const auto& m, const auto& x) { return m.forward(x); };
  nn::PRelu<AD> prelu(3, 0.1);
  check_layer<B, 3>(prelu, "prelu", fwd);
  nn::PRelu<AD> shared;
  check_layer<B, 2>(shared, "prelu_shared", fwd);
}

// x → MultiHeadAttention(x, x, x), key 4 of sample 1 padded, as the fixture's wrapper.
template <class B> struct SelfAttention {
  nn::MultiHeadAttention<B> attn;
  bool causal = false;
  KILN_MODULE(attn, causal)
  SelfAttention(bool causal_) : attn(8, 2), causal(causal_) {}
  Tensor<B, 3> forward(const Tensor<B, 3>& x) const {
    const std::int64_t n = x.dim(0), s = x.dim(1);
    auto pad = Tensor<B, 2>::zeros({n, s}, x.device()).slice_assign({ops::Slice(1, 2), ops::Slice(s - 1, s)},
                                                                   Tensor<B, 2>::ones({1, 1}, x.device()));
    return attn.forward(x, x, x, {.key_padding_mask = pad.gt(0.0), .causal = causal});
  }
};

TYPED_TEST(NnLayers, AttentionAndTransformerEncoderLayersMatchTorch) {
  using B = TypeParam;
  using AD = Autodiff<B>;
  auto fwd = [](const auto& m, const auto& x) { return m.forward(x); };
  SelfAttention<AD> attention(false), causal(true);
  check_layer<B, 3>(attention, "self_attention", fwd);
  check_layer<B, 3>(causal, "self_attention_causal", fwd);
  nn::TransformerEncoderLayer<AD> post(8, 2, {.dim_feedforward = 16, .dropout = 0.0});
  check_layer<B, 3>(post, "encoder_layer", fwd);
  nn::TransformerEncoderLayer<AD> pre(8, 2, {.dim_feedforward = 16, .dropout = 0.0, .gelu = true, .norm_first = true});
  check_layer<B, 3>(pre, "encoder_layer_pre_norm_gelu", fwd);
}

TYPED_TEST(NnLayers, TransformerEncoderStacksLayersAndNamesThemLikeTorch) {
  using B = TypeParam;
  manual_seed(6);
  const nn::TransformerEncoder<B> encoder(2, 8, 2, {.dim_feedforward = 16, .dropout = 0.0}, true);
  std::vector<std::string> paths;
  nn::for_each_param(encoder, [&](const std::string& path, const auto&) { paths.push_back(path); });
  EXPECT_EQ(paths.front(), "layers.0.self_attn.in_proj_weight");
  EXPECT_NE(std::find(paths.begin(), paths.end(), "layers.1.linear2.bias"), paths.end());
  EXPECT_EQ(paths.back(), "norm.bias");
  const auto x = Tensor<B, 3>::random({2, 4, 8}, Distribution::normal(0, 1));
  const auto y = encoder.forward(x);
  EXPECT_EQ(y.shape(), Shape({2, 4, 8}));
  const auto manual = encoder.norm->forward(encoder.layers[1].forward(encoder.layers[0].forward(x)));
  EXPECT_CLOSE(y, manual.into_data(), 0, 0);
  EXPECT_KILN_ERROR(nn::MultiHeadAttention<B>(10, 3), "nn::MultiHeadAttention: embed_dim 10 is not divisible by 3 heads");
}

template <class B> struct BilinearOfHalves {
  nn::Bilinear<B> bilinear{3, 4, 5};
  KILN_MODULE(bilinear)
  Tensor<B, 2> forward(const Tensor<B, 2>& x) const {
    return bilinear.forward(x.slice({ops::Slice(0, x.dim(0)), ops::Slice(0, 3)}),
                            x.slice({ops::Slice(0, x.dim(0)), ops::Slice(3, 7)}));
  }
};

TYPED_TEST(NnLayers, BilinearMatchesTorch) {
  using B = TypeParam;
  BilinearOfHalves<Autodiff<B>> layer;
  check_layer<B, 2>(layer, "bilinear", [](const auto& m, const auto& x) { return m.forward(x); });
  EXPECT_KILN_ERROR(layer.bilinear.forward(Tensor<Autodiff<B>, 2>::zeros({2, 4}), Tensor<Autodiff<B>, 2>::zeros({2, 4})),
                    "nn::Bilinear: inputs [2, 4] and [2, 4] must be [N, 3] and [N, 4]");
}

TYPED_TEST(NnLayers, EmbeddingStartsWithAZeroPaddingRowAndChecksIndices) {
  using B = TypeParam;
  manual_seed(3);
  const nn::Embedding<B> emb(5, 3, -1);
  EXPECT_EQ(emb.padding_idx, 4);
  EXPECT_EQ(emb.weight->slice({ops::Slice(4, 5)}).abs().sum().item(), 0.0);
  EXPECT_GT(emb.weight->slice({ops::Slice(0, 4)}).abs().sum().item(), 0.0);
  EXPECT_THROW((void)emb.forward(Tensor<B, 1, Int>::from({0, 5})), Error);
}

TYPED_TEST(NnLayers, DropoutZeroesAboutPAndScalesTheRestInTrainingOnly) {
  using B = TypeParam;
  manual_seed(21);
  nn::Dropout<B> dropout(0.25);
  const auto x = Tensor<B, 1>::ones({20000});
  const auto y = dropout.forward(x).template to_vec<double>();
  std::size_t zeros = 0;
  for (double v : y) {
    if (v == 0) ++zeros;
    else EXPECT_NEAR(v, 1.0 / 0.75, 1e-6);
  }
  EXPECT_NEAR(static_cast<double>(zeros) / 20000.0, 0.25, 0.015);
  nn::eval(dropout);
  EXPECT_CLOSE(dropout.forward(x), x.into_data(), 0, 0);
  EXPECT_KILN_ERROR(nn::Dropout<B>(1.5), "nn::Dropout: p must be in [0, 1], got 1.5");
}

// The activation modules compute their tensor function with torch.nn's defaults (the
// functions themselves follow torch in tests/autodiff, grad.golden).
TYPED_TEST(NnLayers, ActivationModulesApplyTheirFunctionWithTorchsDefaults) {
  using B = TypeParam;
  manual_seed(8);
  const auto x = Tensor<B, 2>::random({4, 6}, Distribution::uniform(-8.0, 8.0));
  const auto same = [&](const auto& module, const Tensor<B, 2>& want, const char* name) {
    SCOPED_TRACE(name);
    EXPECT_CLOSE(module.forward(x), want.into_data(), 0, 0);
  };
  same(nn::Selu<B>{}, x.selu(), "Selu");
  same(nn::Relu6<B>{}, x.hardtanh(0, 6), "Relu6");
  same(nn::HardSwish<B>{}, x.hardswish(), "HardSwish");
  same(nn::HardSigmoid<B>{}, x.hard_sigmoid(), "HardSigmoid");
  same(nn::Mish<B>{}, x.mish(), "Mish");
  same(nn::LogSigmoid<B>{}, x.log_sigmoid(), "LogSigmoid");
  same(nn::Softsign<B>{}, x.softsign(), "Softsign");
  same(nn::Tanhshrink<B>{}, x.tanhshrink(), "Tanhshrink");
  same(nn::Gelu<B>{}, x.gelu(false), "Gelu");
  same(nn::Gelu<B>{.tanh_approximation = true}, x.gelu(true), "Gelu tanh");
  same(nn::LeakyRelu<B>{}, x.leaky_relu(0.01), "LeakyRelu");
  same(nn::Elu<B>{}, x.elu(1.0), "Elu");
  same(nn::Celu<B>{.alpha = 2.0}, x.celu(2.0), "Celu");
  same(nn::Hardtanh<B>{}, x.hardtanh(-1.0, 1.0), "Hardtanh");
  same(nn::Hardshrink<B>{}, x.hardshrink(0.5), "Hardshrink");
  same(nn::Softshrink<B>{}, x.softshrink(0.5), "Softshrink");
  same(nn::Threshold<B>{.threshold = 0.5, .value = -1.0}, x.threshold(0.5, -1.0), "Threshold");
  same(nn::Softmin<B>{}, x.softmin(1), "Softmin");
  same(nn::Identity<B>{}, x, "Identity");
  EXPECT_EQ(nn::Glu<B>{}.forward(x).dims(), (std::array<std::int64_t, 2>{4, 3}));
  EXPECT_CLOSE(nn::Glu<B>{.dim = 0}.forward(x), x.glu(0).into_data(), 0, 0);
  // An odd dim does not split in halves.
  EXPECT_KILN_ERROR((void)nn::Glu<B>{}.forward(x.narrow(1, 0, 5)), "glu: dim -1 of shape [4, 5] has odd size 5");
  EXPECT_KILN_ERROR((void)x.celu(0.0), "celu: alpha must be finite and not 0, got 0");
  EXPECT_KILN_ERROR((void)x.hardtanh(1.0, -1.0), "hardtanh: min_val 1 is above max_val -1");
}

// RReLU: in training each negative element gets its own slope from U(lower, upper); in eval
// the slope is their mean; positive elements pass through either way.
TYPED_TEST(NnLayers, RReluDrawsASlopePerElementInTrainingOnly) {
  using B = TypeParam;
  manual_seed(12);
  nn::RRelu<B> rrelu{.lower = 0.1, .upper = 0.3};
  const auto x = Tensor<B, 1>::random({4000}, Distribution::uniform(-2.0, 2.0));
  const auto xs = x.template to_vec<double>(), ys = rrelu.forward(x).template to_vec<double>();
  double lowest = 1, highest = 0;
  for (std::size_t i = 0; i < xs.size(); ++i) {
    if (xs[i] >= 0) {
      EXPECT_EQ(ys[i], xs[i]);
      continue;
    }
    const double slope = ys[i] / xs[i];
    lowest = std::min(lowest, slope);
    highest = std::max(highest, slope);
  }
  EXPECT_GE(lowest, 0.1 - 1e-6);
  EXPECT_LE(highest, 0.3 + 1e-6);
  EXPECT_LT(lowest, 0.11);  // the slopes spread over the range
  EXPECT_GT(highest, 0.29);
  nn::eval(rrelu);
  EXPECT_CLOSE(rrelu.forward(x), x.leaky_relu(0.2).into_data(), 0, 0);
}

// SwiGlu: silu of one linear layer times another, with their own parameters.
TYPED_TEST(NnLayers, SwiGluIsTheSiluOfOneLinearTimesAnother) {
  using B = TypeParam;
  manual_seed(5);
  nn::SwiGlu<B> swiglu(6, 4);
  std::vector<std::string> paths;
  nn::for_each_param(swiglu, [&](const std::string& path, const auto&) { paths.push_back(path); });
  EXPECT_EQ(paths, (std::vector<std::string>{"inner.weight", "inner.bias", "outer.weight", "outer.bias"}));
  const auto x = Tensor<B, 3>::random({2, 3, 6}, Distribution::normal(0, 1));
  const auto want = swiglu.inner.forward(x).silu() * swiglu.outer.forward(x);
  EXPECT_CLOSE(swiglu.forward(x), want.into_data(), 0, 0);
  // The same as the tensor function on the two halves of one product.
  const auto both = Tensor<B, 3>::cat({swiglu.inner.forward(x), swiglu.outer.forward(x)}, 2);
  EXPECT_CLOSE(both.swiglu(), want.into_data(), 1e-6, 1e-6);
}

TYPED_TEST(NnLayers, SequentialChainsModulesAndNamesThemByPosition) {
  using B = TypeParam;
  manual_seed(4);
  nn::Sequential<nn::Linear<B>, nn::Relu<B>, nn::Linear<B>> mlp(nn::Linear<B>(3, 8), nn::Relu<B>{}, nn::Linear<B>(8, 2));
  std::vector<std::string> paths;
  nn::for_each_param(mlp, [&](const std::string& path, const auto&) { paths.push_back(path); });
  EXPECT_EQ(paths, (std::vector<std::string>{"0.weight", "0.bias", "2.weight", "2.bias"}));
  const auto x = Tensor<B, 2>::random({4, 3}, Distribution::normal(0, 1));
  const auto want = mlp.template get<2>().forward(mlp.template get<0>().forward(x).relu());
  EXPECT_CLOSE(mlp.forward(x), want.into_data(), 0, 0);
}

TYPED_TEST(NnLayers, DistancesLocalResponseNormAndAdaptiveMaxPoolMatchTorch) {
  using B = TypeParam;
  using AD = Autodiff<B>;
  // The fixtures' x is [2, ...]: the layer's two inputs.
  auto of_halves = [](const auto& m, const auto& x) {
    return m.forward(x.narrow(0, 0, 1).squeeze_dim(0), x.narrow(0, 1, 1).squeeze_dim(0));
  };
  check_input_gradient<B, 3>(nn::CosineSimilarity<AD>{}, "cosine_similarity", of_halves);
  check_input_gradient<B, 4>(nn::CosineSimilarity<AD>{.dim = -1, .eps = 1e-6}, "cosine_similarity_last_dim", of_halves);
  check_input_gradient<B, 3>(nn::CosineSimilarity<AD>{.dim = -1, .eps = 1e-3}, "cosine_similarity_small_norms", of_halves);
  check_input_gradient<B, 3>(nn::PairwiseDistance<AD>{}, "pairwise_distance", of_halves);
  check_input_gradient<B, 3>(nn::PairwiseDistance<AD>{.p = 1.0, .eps = 1e-3}, "pairwise_distance_p1", of_halves);
  check_input_gradient<B, 4>(nn::LocalResponseNorm<AD>(3, 0.1, 0.75, 2.0), "local_response_norm");
  check_input_gradient<B, 3>(nn::LocalResponseNorm<AD>(2), "local_response_norm_even");
  check_input_gradient<B, 3>(nn::AdaptiveMaxPool1d<AD>(4), "adaptive_max_pool1d");
  check_input_gradient<B, 4>(nn::AdaptiveMaxPool2d<AD>({3, 2}), "adaptive_max_pool2d");
  check_input_gradient<B, 3>(nn::AdaptiveMaxPool2d<AD>({2, 4}), "adaptive_max_pool2d_unbatched");
}

TYPED_TEST(NnLayers, EmbeddingBagMatchesTorch) {
  using B = TypeParam;
  using AD = Autodiff<B>;
  auto bags_at = [](std::vector<std::int64_t> offsets, std::optional<Tensor<AD, 1>> weights = std::nullopt) {
    return [=](const auto& m, const GoldenCase& c) { return m.forward(c.tensor<AD, 1, Int>("x"), offsets, weights); };
  };
  nn::EmbeddingBag<AD> sum(10, 4, nn::BagMode::sum);
  const auto weights = Tensor<AD, 1>::from_data(
      TensorData::from(std::vector<double>{0.5, 1.25, 0.75, 1.5, 2.0, 0.25, 1.0}, Shape{7}));
  check_layer<B, 0>(sum, "embedding_bag_sum", bags_at({0, 3, 3, 5}, weights));
  nn::EmbeddingBag<AD> mean(10, 4, nn::BagMode::mean, 2);
  check_layer<B, 0>(mean, "embedding_bag_mean_padding", bags_at({0, 2, 3, 6}));
  nn::EmbeddingBag<AD> max(10, 4, nn::BagMode::max);
  check_layer<B, 0>(max, "embedding_bag_max", bags_at({0, 2, 2, 6}));
  nn::EmbeddingBag<AD> fixed(10, 4);
  check_layer<B, 0>(fixed, "embedding_bag_2d", [](const auto& m, const GoldenCase& c) {
    return m.forward(c.tensor<AD, 2, Int>("x"));
  });
  // Offsets in an Int tensor, as torch takes them.
  const GoldenCase& c = golden("nn", "embedding_bag_max");
  EXPECT_CLOSE(max.forward(c.tensor<AD, 1, Int>("x"), Tensor<AD, 1, Int>::from({0, 2, 2, 6})), c["y"], kTol, kTol);
  // The padding row starts at zero, as Embedding's.
  EXPECT_EQ(nn::EmbeddingBag<B>(5, 3, nn::BagMode::mean, -1).weight->narrow(0, 4, 1).abs().sum().item(), 0.0);
}

// Softplus, Softmax, LogSoftmax, Flatten / Unflatten, padding layers and ChannelShuffle.
TYPED_TEST(NnLayers, UtilityLayersMatchTorch) {
  using B = TypeParam;
  using AD = Autodiff<B>;
  auto fwd = [](const auto& m, const auto& x) { return m.forward(x); };
  nn::Softplus<AD> softplus{.beta = 2.0, .threshold = 3.0};
  check_layer<B, 2>(softplus, "softplus", fwd);
  nn::Softmax<AD> softmax{.dim = 1};
  check_layer<B, 3>(softmax, "softmax", fwd);
  nn::LogSoftmax<AD> log_softmax;
  check_layer<B, 3>(log_softmax, "log_softmax", fwd);
  nn::Flatten<AD> flatten;
  check_layer<B, 4>(flatten, "flatten", fwd);
  // Unflatten dim 1 into (3, -1), swap, then flatten from dim 2.
  nn::Unflatten<AD> unflatten(1, {3, -1});
  check_layer<B, 3>(unflatten, "unflatten", [](const auto& m, const auto& x) {
    return nn::Flatten<AD>{.start_dim = 2}.template forward<3>(m.forward(x).swap_dims(1, 2));
  });
  auto zero_pad = nn::zero_pad2d<AD>({1, 2, 0, 3});
  check_layer<B, 4>(zero_pad, "zero_pad2d", fwd);
  auto constant_pad = nn::constant_pad1d<AD>({2, 1}, 0.5);
  check_layer<B, 3>(constant_pad, "constant_pad1d", fwd);
  auto reflection_pad = nn::reflection_pad2d<AD>({2, 1, 3, 0});
  check_layer<B, 4>(reflection_pad, "reflection_pad2d", fwd);
  auto replication_pad = nn::replication_pad1d<AD>({3, 2});
  check_layer<B, 3>(replication_pad, "replication_pad1d", fwd);
  nn::ChannelShuffle<AD> shuffle(3);
  check_layer<B, 4>(shuffle, "channel_shuffle", fwd);
  // BatchNorm3d is BatchNorm over [N, C, D, H, W]: the output, gradients and running statistics.
  nn::BatchNorm3d<AD> bn3(3, {.momentum = 0.2});
  check_layer<B, 5>(bn3, "batch_norm3d", [](auto& m, const auto& x) { return m.forward(x); });
  EXPECT_KILN_ERROR(nn::ChannelShuffle<B>(4).forward(Tensor<B, 4>::zeros({1, 6, 2, 2})),
                    "nn::ChannelShuffle: 6 channels of [1, 6, 2, 2] do not split into 4 groups");
  EXPECT_KILN_ERROR((nn::Unflatten<B>(3, {2, 2}).forward(Tensor<B, 2>::zeros({2, 4}))),
                    "nn::Unflatten: dim 3 is out of range for shape [2, 4]");
}

// Channel dropout zeroes whole channels (about p of them) and scales the rest, in training only.
TYPED_TEST(NnLayers, ChannelDropoutZeroesWholeChannels) {
  using B = TypeParam;
  manual_seed(22);
  nn::Dropout2d<B> dropout(0.3);
  const auto x = Tensor<B, 4>::ones({40, 50, 3, 2});
  const auto y = dropout.forward(x).template to_vec<double>();
  std::size_t dropped = 0;
  for (std::size_t channel = 0; channel < 40 * 50; ++channel) {
    const double first = y[channel * 6];
    if (first == 0) ++dropped;
    else EXPECT_NEAR(first, 1.0 / 0.7, 1e-6);
    for (std::size_t i = 1; i < 6; ++i) ASSERT_EQ(y[channel * 6 + i], first) << "channel " << channel;
  }
  EXPECT_NEAR(static_cast<double>(dropped) / 2000.0, 0.3, 0.04);
  nn::eval(dropout);
  EXPECT_CLOSE(dropout.forward(x), x.into_data(), 0, 0);
  EXPECT_KILN_ERROR(nn::Dropout2d<B>(-0.5), "nn::ChannelDropout: p must be in [0, 1], got -0.5");
}

TYPED_TEST(NnLayers, BadShapesNameTheLayer) {
  using B = TypeParam;
  EXPECT_KILN_ERROR(nn::Conv2d<B>(3, 4, {3, 3}, {.groups = 2}), "nn::Conv2d: 3 in and 4 out channels");
  EXPECT_KILN_ERROR(nn::GroupNorm<B>(4, 6), "nn::GroupNorm: 6 channels do not split into 4 groups");
  const nn::LayerNorm<B> ln({4});
  EXPECT_KILN_ERROR(ln.forward(Tensor<B, 2>::zeros({2, 5})), "nn::LayerNorm: input [2, 5] does not end with");
  nn::BatchNorm2d<B> bn(3);
  EXPECT_KILN_ERROR(bn.forward(Tensor<B, 4>::zeros({2, 4, 2, 2})), "nn::BatchNorm: input [2, 4, 2, 2] has 4 channels");
  const nn::EmbeddingBag<B> bag(5, 3);
  const auto indices = Tensor<B, 1, Int>::from({1, 2, 3});
  EXPECT_KILN_ERROR(bag.forward(indices, {1, 2}), "nn::EmbeddingBag: offsets[0] = 1 must be 0");
  EXPECT_KILN_ERROR(bag.forward(indices, {0, 2, 1}), "nn::EmbeddingBag: offsets[2] = 1 must be at least the offset before it");
  EXPECT_KILN_ERROR(bag.forward(indices, {0, 4}), "at most the 3 indices");
  EXPECT_KILN_ERROR(bag.forward(Tensor<B, 1, Int>::from({1, 7}), {0}), "nn::EmbeddingBag: index 7 at position 1 is outside the 5 embeddings");
  EXPECT_KILN_ERROR(bag.forward(indices, {0}, Tensor<B, 1>::ones({3})), "nn::EmbeddingBag: per_sample_weights need mode sum");
  EXPECT_KILN_ERROR(nn::EmbeddingBag<B>(5, 3, nn::BagMode::sum, 5), "nn::EmbeddingBag: padding_idx 5 is outside the 5 embeddings");
  EXPECT_KILN_ERROR(nn::LocalResponseNorm<B>(0), "nn::LocalResponseNorm: size must be positive, got 0");
  EXPECT_KILN_ERROR(nn::AdaptiveMaxPool1d<B>(0).forward(Tensor<B, 3>::zeros({1, 2, 3})),
                    "nn::AdaptiveMaxPool1d: output size 0 for an input of shape [1, 2, 3]");
}

}  // namespace
