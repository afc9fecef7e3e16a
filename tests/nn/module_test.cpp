// nn's module system: field paths, counting, freezing, train / eval, summary, nn::valid,
// parameter ids, initializers and Linear, on every backend.
#include "backends.hpp"
#include "golden.hpp"

#include <kiln/nn.hpp>

#include <cmath>
#include <set>

namespace {

using namespace kiln;
using kiln::test::Backends;

template <class B> struct Block {
  nn::Linear<B> proj;
  std::vector<nn::Linear<B>> layers;
  std::optional<nn::Linear<B>> head;
  nn::Buffer<Tensor<B, 1>> steps;
  nn::Mode mode;
  KILN_MODULE(proj, layers, head, steps, mode)

  Block() = default;
  Block(int depth, bool with_head) : proj(4, 8), steps(Tensor<B, 1>::zeros({1})) {
    for (int i = 0; i < depth; ++i) layers.emplace_back(8, 8, nn::LinearOptions{.bias = i % 2 == 0});
    if (with_head) head.emplace(8, 2);
  }
  Tensor<B, 2> forward(const Tensor<B, 2>& x) const {
    Tensor<B, 2> h = proj.forward(x).relu();
    for (const auto& layer : layers) h = layer.forward(h).tanh();
    return head ? head->forward(h) : h;
  }
};

KILN_BACKEND_TEST_SUITE(NnModule);

std::vector<std::string> param_paths(const auto& module) {
  std::vector<std::string> paths;
  nn::for_each_param(module, [&](const std::string& path, const auto&) { paths.push_back(path); });
  return paths;
}

TYPED_TEST(NnModule, ParametersHaveDottedPathsInDeclarationOrder) {
  using B = TypeParam;
  const Block<B> block(3, true);
  const std::vector<std::string> expected{"proj.weight",     "proj.bias",       "layers.0.weight", "layers.0.bias",
                                          "layers.1.weight", "layers.2.weight", "layers.2.bias",   "head.weight",
                                          "head.bias"};
  EXPECT_EQ(param_paths(block), expected);
  std::vector<std::string> buffers;
  nn::for_each_buffer(block, [&](const std::string& path, const auto&) { buffers.push_back(path); });
  EXPECT_EQ(buffers, std::vector<std::string>{"steps"});
  // 4*8+8 + (8*8+8) + 8*8 + (8*8+8) + 8*2+2
  EXPECT_EQ(nn::num_params(block), 40 + 72 + 64 + 72 + 18);
  EXPECT_EQ(nn::num_params(Block<B>(0, false)), 40);
}

TYPED_TEST(NnModule, SummaryListsEveryTensorAndTheTotal) {
  using B = TypeParam;
  Block<B> block(1, false);
  nn::freeze(block.proj);
  const std::string s = nn::summary(block);
  EXPECT_NE(s.find("proj.weight"), std::string::npos) << s;
  EXPECT_NE(s.find("[8, 4]"), std::string::npos) << s;
  EXPECT_NE(s.find("(frozen)"), std::string::npos) << s;
  EXPECT_NE(s.find("steps"), std::string::npos) << s;
  EXPECT_NE(s.find("112 parameters"), std::string::npos) << s;
}

TYPED_TEST(NnModule, ParamIdsAreUniqueAndSurviveReplace) {
  using B = TypeParam;
  Block<B> block(2, true);
  std::set<nn::ParamId> ids;
  nn::for_each_param(block, [&](const std::string&, const auto& p) { ids.insert(p.id()); });
  EXPECT_EQ(ids.size(), param_paths(block).size());
  const nn::ParamId id = block.proj.weight.id();
  block.proj.weight.replace(block.proj.weight->zeros_like());
  EXPECT_EQ(block.proj.weight.id(), id);
  EXPECT_EQ(block.proj.weight->sum().item(), 0.0);
}

TYPED_TEST(NnModule, TrainAndEvalReachEveryMode) {
  using B = TypeParam;
  Block<B> block(1, false);
  EXPECT_TRUE(block.mode.training);
  nn::eval(block);
  EXPECT_FALSE(block.mode.training);
  nn::train(block);
  EXPECT_TRUE(block.mode.training);
}

TYPED_TEST(NnModule, LinearComputesXWTransposedPlusB) {
  using B = TypeParam;
  manual_seed(3);
  const nn::Linear<B> linear(3, 2);
  ASSERT_EQ(linear.weight->shape(), Shape({2, 3}));
  ASSERT_EQ(linear.bias.value()->shape(), Shape({2}));
  const auto x = Tensor<B, 2>::from({{1.0, -2.0, 0.5}, {0.0, 3.0, -1.0}});
  const auto w = linear.weight->template to_vec<double>(), b = linear.bias.value()->template to_vec<double>();
  const auto xs = x.template to_vec<double>();
  std::vector<double> want;
  for (int r = 0; r < 2; ++r)
    for (int o = 0; o < 2; ++o) {
      double acc = b[o];
      for (int i = 0; i < 3; ++i) acc += xs[r * 3 + i] * w[o * 3 + i];
      want.push_back(acc);
    }
  EXPECT_CLOSE(linear.forward(x), TensorData::from(want, Shape{2, 2}), 1e-6, 1e-6);
  // Any leading dims: [2, 1, 3] → [2, 1, 2], the same rows.
  EXPECT_CLOSE(linear.forward(x.template unsqueeze_dim(1)), TensorData::from(want, Shape{2, 1, 2}), 1e-6, 1e-6);
  EXPECT_KILN_ERROR(linear.forward(Tensor<B, 2>::zeros({2, 4})), "linear: input of shape [2, 4]");
}

TYPED_TEST(NnModule, LinearDefaultInitIsUniformWithinOneOverSqrtIn) {
  using B = TypeParam;
  manual_seed(5);
  const nn::Linear<B> linear(400, 300);
  const double bound = 1.0 / std::sqrt(400.0);
  const auto w = linear.weight->template to_vec<double>();
  double lo = 1, hi = -1, sum = 0, sq = 0;
  for (double v : w) {
    lo = std::min(lo, v);
    hi = std::max(hi, v);
    sum += v;
    sq += v * v;
  }
  EXPECT_GE(lo, -bound);
  EXPECT_LE(hi, bound);
  EXPECT_LT(lo, -0.99 * bound);  // the whole interval is used
  EXPECT_GT(hi, 0.99 * bound);
  const double n = static_cast<double>(w.size());
  EXPECT_NEAR(sum / n, 0.0, 0.002);
  EXPECT_NEAR(std::sqrt(sq / n), bound / std::sqrt(3.0), 0.002);  // the std of U(-b, b)
}

}  // namespace

// Initializers and fans against PyTorch's formulas (backend-independent).
TEST(NnInit, GainsAndFansAreTorchs) {
  using kiln::nn::gain;
  EXPECT_DOUBLE_EQ(gain("linear"), 1.0);
  EXPECT_DOUBLE_EQ(gain("conv2d"), 1.0);
  EXPECT_DOUBLE_EQ(gain("tanh"), 5.0 / 3.0);
  EXPECT_DOUBLE_EQ(gain("relu"), std::sqrt(2.0));
  EXPECT_DOUBLE_EQ(gain("leaky_relu", std::sqrt(5.0)), std::sqrt(1.0 / 3.0));
  EXPECT_KILN_ERROR((void)gain("swish"), "unknown nonlinearity \"swish\"");
  const auto [fan_in, fan_out] = kiln::nn::fans(kiln::Shape{16, 3, 5, 5});
  EXPECT_EQ(fan_in, 75);
  EXPECT_EQ(fan_out, 400);
}

TEST(NnInit, KaimingAndXavierHaveTheirStandardDeviations) {
  using B = kiln::Cpu;
  kiln::manual_seed(7);
  auto std_of = [](const kiln::Tensor<B, 2>& t) {
    const auto v = t.to_vec<double>();
    double sq = 0;
    for (double x : v) sq += x * x;
    return std::sqrt(sq / static_cast<double>(v.size()));
  };
  using kiln::nn::Init;
  // weight [out = 200, in = 500]
  EXPECT_NEAR(std_of(Init::kaiming_normal(0, kiln::nn::FanMode::fan_in, "relu").make<B, 2>({200, 500})),
              std::sqrt(2.0 / 500), 0.002);
  EXPECT_NEAR(std_of(Init::kaiming_uniform(0, kiln::nn::FanMode::fan_out, "relu").make<B, 2>({200, 500})),
              std::sqrt(2.0 / 200), 0.003);
  EXPECT_NEAR(std_of(Init::xavier_uniform().make<B, 2>({200, 500})), std::sqrt(2.0 / 700), 0.002);
  EXPECT_NEAR(std_of(Init::xavier_normal(2.0).make<B, 2>({200, 500})), 2 * std::sqrt(2.0 / 700), 0.003);
  EXPECT_EQ((Init::constant(0.25).make<B, 2>({2, 3}).sum().item()), 1.5);
}

// Autodiff: frozen parameters get no gradient, nn::valid gives the inner-backend module.
template <class B> class NnAutodiff : public kiln::test::BackendTest<B> {};
TYPED_TEST_SUITE(NnAutodiff, kiln::test::HardwareBackends, kiln::test::BackendNames);

TYPED_TEST(NnAutodiff, FrozenParametersGetNoGradient) {
  using AD = kiln::Autodiff<TypeParam>;
  kiln::manual_seed(11);
  Block<AD> block(1, true);
  kiln::nn::freeze(block.proj);
  const auto x = kiln::Tensor<AD, 2>::random({5, 4}, kiln::Distribution::normal(0, 1));
  const auto grads = block.forward(x).square().sum().backward();
  EXPECT_FALSE(block.proj.weight->grad(grads).has_value());
  EXPECT_FALSE(block.proj.bias.value()->grad(grads).has_value());
  ASSERT_TRUE(block.head->weight->grad(grads).has_value());
  EXPECT_EQ(block.head->weight->grad(grads)->shape(), kiln::Shape({2, 8}));
  kiln::nn::freeze(block.proj, false);
  const auto again = block.forward(x).square().sum().backward();
  EXPECT_TRUE(block.proj.weight->grad(again).has_value());
}

TYPED_TEST(NnAutodiff, ValidGivesTheSameModuleOnTheInnerBackend) {
  using B = TypeParam;
  using AD = kiln::Autodiff<B>;
  kiln::manual_seed(13);
  Block<AD> trained(3, true);
  kiln::nn::eval(trained);
  const Block<B> inference = kiln::nn::valid(trained);
  EXPECT_EQ(param_paths(inference), param_paths(trained));
  EXPECT_EQ(inference.layers.size(), 3u);
  EXPECT_FALSE(inference.layers[1].bias.has_value());
  ASSERT_TRUE(inference.head.has_value());
  EXPECT_FALSE(inference.mode.training);
  EXPECT_EQ(inference.proj.weight.id(), trained.proj.weight.id());
  const auto x = kiln::Tensor<AD, 2>::random({6, 4}, kiln::Distribution::normal(0, 1));
  EXPECT_CLOSE(inference.forward(x.inner()), trained.forward(x).into_data(), 0.0, 0.0);
  EXPECT_FALSE((kiln::nn::valid(Block<AD>(0, false)).head.has_value()));
}

// Layers whose settings differ from the defaults: nn::valid must carry each one over (a
// setting left out of KILN_MODULE would silently fall back to its default there).
template <class B> struct Configured {
  nn::Conv2d<B> conv;
  nn::MaxPool2d<B> pool;
  nn::AvgPool2d<B> avg;
  nn::AdaptiveAvgPool2d<B> adaptive;
  nn::GroupNorm<B> group;
  nn::TransformerEncoderLayer<B> encoder;
  nn::Embedding<B> embedding;
  KILN_MODULE(conv, pool, avg, adaptive, group, encoder, embedding)

  Configured() = default;
  explicit Configured(bool)
      : conv(2, 4, {3, 3}, {.stride = {2, 1}, .padding = {1, 2}, .dilation = {1, 2}}),
        pool({3, 2}, {.stride = std::array<std::int64_t, 2>{1, 2}, .padding = {1, 0}}),
        avg({2, 2}),
        adaptive({3, 2}),
        group(2, 4, 1e-2),
        encoder(8, 4, {.dim_feedforward = 16, .dropout = 0.0, .gelu = true, .layer_norm_eps = 1e-3, .norm_first = true}),
        embedding(5, 8, 2) {}
  Tensor<B, 3> forward(const Tensor<B, 4>& image, const Tensor<B, 2, Int>& tokens) const {
    const Tensor<B, 4> h = group.forward(adaptive.forward(avg.forward(pool.forward(conv.forward(image)))));
    const Tensor<B, 3> e = embedding.forward(tokens) + h.template reshape<3>({1, 1, 24}).slice({0, 0, ops::Slice(0, 8)});
    return encoder.forward(e);
  }
};

TYPED_TEST(NnAutodiff, ValidKeepsEveryLayersSettings) {
  using B = TypeParam;
  using AD = kiln::Autodiff<B>;
  kiln::manual_seed(19);
  Configured<AD> trained(true);
  kiln::nn::eval(trained);
  const Configured<B> inference = kiln::nn::valid(trained);
  EXPECT_EQ(inference.conv.conv.stride, trained.conv.conv.stride);
  EXPECT_EQ(inference.encoder.self_attn.num_heads, 4);
  EXPECT_TRUE(inference.encoder.norm_first);
  EXPECT_EQ(inference.embedding.padding_idx, std::optional<std::int64_t>(2));
  const auto image = kiln::Tensor<AD, 4>::random({1, 2, 9, 8}, kiln::Distribution::normal(0, 1));
  const auto tokens = kiln::Tensor<AD, 2, kiln::Int>::from_data(kiln::TensorData::from(std::vector<std::int64_t>{0, 2, 4}, {1, 3}));
  EXPECT_CLOSE(inference.forward(image.inner(), tokens.inner()), trained.forward(image, tokens).into_data(), 0.0, 0.0);

  // Lstm names its cells itself (weight_ih_l1_reverse...): valid sizes the stack from its settings.
  const kiln::nn::Gru<AD> gru(3, 4, {.num_layers = 2, .batch_first = false, .bidirectional = true});
  const kiln::nn::Gru<B> gru_inference = kiln::nn::valid(gru);
  EXPECT_EQ(param_paths(gru_inference), param_paths(gru));
  const auto sequence = kiln::Tensor<AD, 3>::random({5, 2, 3}, kiln::Distribution::normal(0, 1));
  EXPECT_CLOSE(gru_inference.forward(sequence.inner()).output, gru.forward(sequence).output.into_data(), 0.0, 0.0);
}

TYPED_TEST(NnAutodiff, SgdOnALinearModelFitsALine) {
  using AD = kiln::Autodiff<TypeParam>;
  kiln::manual_seed(17);
  kiln::nn::Linear<AD> model(2, 1);
  const auto x = kiln::Tensor<AD, 2>::random({128, 2}, kiln::Distribution::uniform(-1, 1));
  const auto y = x.matmul(kiln::Tensor<AD, 2>::from({{2.0}, {-3.0}})) + 0.5;
  double loss = 0;
  for (int step = 0; step < 300; ++step) {
    const auto l = (model.forward(x) - y).square().mean();
    loss = l.item();
    const auto grads = l.backward();
    kiln::nn::for_each_param(model, [&](const std::string&, auto& p) {
      p.replace(std::remove_cvref_t<decltype(p.val())>::from_inner(p->inner() - *p->grad(grads) * 0.3));
    });
  }
  EXPECT_LT(loss, 1e-6);
  const auto w = model.weight->template to_vec<double>();
  EXPECT_NEAR(w[0], 2.0, 1e-3);
  EXPECT_NEAR(w[1], -3.0, 1e-3);
  EXPECT_NEAR(model.bias.value()->item(), 0.5, 1e-3);
}

// Orthogonal: W W^T = gain^2 I for a wide weight, W^T W = gain^2 I for a tall one.
TEST(NnInit, OrthogonalGivesOrthonormalRowsOrColumns) {
  using B = kiln::Cpu;
  kiln::manual_seed(9);
  for (const auto& [rows, cols] : {std::pair<std::int64_t, std::int64_t>{4, 10}, {12, 5}}) {
    const auto w = kiln::nn::Init::orthogonal(2.0).make<B, 2>({rows, cols}).cast(kiln::DType::f64);
    const auto gram = rows <= cols ? w.matmul(w.transpose()) : w.transpose().matmul(w);
    const std::int64_t k = std::min(rows, cols);
    EXPECT_CLOSE(gram, (kiln::Tensor<B, 2>::eye(k, {}, kiln::DType::f64) * 4.0).into_data(), 1e-5, 1e-5);
  }
  // Conv-shaped weights flatten their trailing dims: [3, 2, 2, 2] → [3, 8].
  const auto conv = kiln::nn::Init::orthogonal().make<B, 4>({3, 2, 2, 2}).cast(kiln::DType::f64).reshape<2>({3, 8});
  EXPECT_CLOSE(conv.matmul(conv.transpose()), kiln::Tensor<B, 2>::eye(3, {}, kiln::DType::f64).into_data(), 1e-5, 1e-5);
}
