// The 3-d convolution and pooling ops and layers, and the convolution layers' padding_mode
// and padding="same", against torch (tests/golden/gen_conv3d.py): the ops' gradients
// through Autodiff (their forward values on every backend are in
// tests/backend/conv3d_test.cpp), and each layer's output, input gradient and parameter
// gradients of sum(y * r), in f64 on every backend.
#include "backends.hpp"
#include "golden.hpp"
#include "param_grads.hpp"

#include <kiln/nn.hpp>

#include <algorithm>
#include <cmath>
#include <optional>
#include <string>
#include <vector>

namespace {

using namespace kiln;
using kiln::test::golden;
using kiln::test::GoldenCase;

template <class B> class NnConv3d : public kiln::test::BackendTest<B> {};
TYPED_TEST_SUITE(NnConv3d, kiln::test::HardwareBackends, kiln::test::BackendNames);

constexpr double kTol = 1e-10;

// The gradients of sum(out * dy) for x, w and b of a golden convolution case.
template <class B, class Conv> void check_conv_gradients(const std::string& name, Conv&& conv) {
  SCOPED_TRACE(name);
  using AD = Autodiff<B>;
  const GoldenCase& c = golden("conv3d", name);
  const auto x = c.tensor<AD, 5>("x", DType::f64).require_grad();
  const auto w = c.tensor<AD, 5>("w", DType::f64).require_grad();
  std::optional<Tensor<AD, 1>> b;
  if (c.tensors.contains("b")) b = c.tensor<AD, 1>("b", DType::f64).require_grad();
  const auto out = conv(x, w, b);
  EXPECT_CLOSE(out, c["out"], kTol, kTol);
  const auto grads = (out * c.tensor<AD, 5>("dy", DType::f64)).sum().backward();
  EXPECT_CLOSE(*x.grad(grads), c["dx"], kTol, kTol);
  EXPECT_CLOSE(*w.grad(grads), c["dw"], kTol, kTol);
  if (b) EXPECT_CLOSE(*b->grad(grads), c["db"], kTol, kTol);
}

// The input gradient of sum(out * dy) of a golden pooling or padding case.
template <class B, std::size_t D, class Op> void check_input_gradient(const std::string& name, Op&& op) {
  SCOPED_TRACE(name);
  using AD = Autodiff<B>;
  const GoldenCase& c = golden("conv3d", name);
  const auto x = c.tensor<AD, D>("x", DType::f64).require_grad();
  const auto out = op(x);
  EXPECT_CLOSE(out, c["out"], kTol, kTol);
  const auto grads = (out * c.tensor<AD, D>("dy", DType::f64)).sum().backward();
  EXPECT_CLOSE(*x.grad(grads), c["dx"], kTol, kTol);
}

// Loads the case's "w.<path>" parameters into the layer, runs it on x and checks y, dx and d.<path>.
template <class B, std::size_t D, class M> void check_layer(M& module, const std::string& name) {
  SCOPED_TRACE(name);
  using AD = Autodiff<B>;
  const GoldenCase& c = golden("conv3d", name);
  nn::for_each_param(module, [&](const std::string& path, auto& p) {
    using T = std::remove_cvref_t<decltype(p.val())>;
    ASSERT_EQ(c["w." + path].shape(), p->shape()) << path;
    p.replace(T::from_data(c["w." + path].convert(DType::f64)));
  });
  const auto x = c.tensor<AD, D>("x", DType::f64).require_grad();
  const auto y = module.forward(x);
  EXPECT_CLOSE(y, c["y"], kTol, kTol);
  const auto grads = (y * decltype(y)::from_data(c["r"])).sum().backward();
  EXPECT_CLOSE(*x.grad(grads), c["dx"], kTol, kTol);
  kiln::test::expect_param_grads(module, grads, c, kTol);
}

// Every value within +-bound and, for many values, the whole interval used (torch's uniform default init).
void expect_uniform_within(const std::vector<double>& values, double bound) {
  const auto [lo, hi] = std::minmax_element(values.begin(), values.end());
  EXPECT_GE(*lo, -bound);
  EXPECT_LE(*hi, bound);
  if (values.size() < 100) return;
  EXPECT_LT(*lo, -0.95 * bound);
  EXPECT_GT(*hi, 0.95 * bound);
}

}  // namespace

TYPED_TEST(NnConv3d, ConvolutionGradientsMatchTorch) {
  using B = TypeParam;
  using AD = Autodiff<B>;
  using T5 = Tensor<AD, 5>;
  using Bias = std::optional<Tensor<AD, 1>>;
  check_conv_gradients<B>("conv3d_basic",
                          [](const T5& x, const T5& w, const Bias& b) { return functional::conv3d(x, w, b); });
  check_conv_gradients<B>("conv3d_strided_grouped", [](const T5& x, const T5& w, const Bias& b) {
    return functional::conv3d(x, w, b, {{2, 1, 2}, {1, 2, 0}, {2, 1, 1}, 2});
  });
  check_conv_gradients<B>("conv3d_depthwise", [](const T5& x, const T5& w, const Bias& b) {
    return functional::conv3d(x, w, b, {{1, 1, 1}, {1, 1, 1}, {1, 1, 1}, 3});
  });
  check_conv_gradients<B>("conv_transpose3d", [](const T5& x, const T5& w, const Bias& b) {
    return functional::conv_transpose3d(x, w, b, {{2, 2, 2}, {1, 1, 1}, {1, 1, 1}, {1, 1, 1}, 1});
  });
  check_conv_gradients<B>("conv_transpose3d_grouped_dilated", [](const T5& x, const T5& w, const Bias& b) {
    return functional::conv_transpose3d(x, w, b, {{1, 2, 1}, {0, 1, 0}, {1, 1, 0}, {2, 1, 1}, 2});
  });
}

TYPED_TEST(NnConv3d, PoolingAndCircularPadGradientsMatchTorch) {
  using B = TypeParam;
  using AD = Autodiff<B>;
  check_input_gradient<B, 5>("max_pool3d", [](const Tensor<AD, 5>& x) {
    return functional::max_pool3d(x, {{3, 2, 2}, {2, 2, 1}, {1, 1, 0}, {1, 1, 2}, true});
  });
  check_input_gradient<B, 4>("max_pool3d_unbatched", [](const Tensor<AD, 4>& x) {
    return functional::max_pool3d(x, {.kernel = {2, 2, 2}, .stride = {2, 2, 2}});
  });
  check_input_gradient<B, 5>("avg_pool3d", [](const Tensor<AD, 5>& x) {
    return functional::avg_pool3d(x, {{3, 3, 2}, {2, 2, 1}, {1, 1, 0}, {1, 1, 1}, true, false});
  });
  check_input_gradient<B, 5>("avg_pool3d_include_pad", [](const Tensor<AD, 5>& x) {
    return functional::avg_pool3d(x, {.kernel = {3, 3, 3}, .stride = {2, 2, 2}, .padding = {1, 1, 1}});
  });
  check_input_gradient<B, 3>("pad_circular_1d",
                             [](const Tensor<AD, 3>& x) { return x.pad({2, 3}, PadMode::circular); });
  check_input_gradient<B, 4>("pad_circular_2d",
                             [](const Tensor<AD, 4>& x) { return x.pad({1, 0, 3, 2}, PadMode::circular); });
}

TYPED_TEST(NnConv3d, LayersMatchTorch) {
  using AD = Autodiff<TypeParam>;
  nn::Conv3d<AD> conv(4, 6, {3, 2, 3}, {.stride = {2, 1, 1}, .padding = {1, 0, 1}, .dilation = {1, 2, 1}, .groups = 2});
  check_layer<TypeParam, 5>(conv, "Conv3d");
  nn::ConvTranspose3d<AD> transposed(
      2, 4, {3, 2, 2}, {.stride = {2, 2, 2}, .padding = {1, 0, 1}, .output_padding = {1, 0, 1}, .groups = 2});
  check_layer<TypeParam, 5>(transposed, "ConvTranspose3d");
  nn::MaxPool3d<AD> max_pool({3, 3, 3}, {.stride = std::array<std::int64_t, 3>{2, 2, 2}, .padding = {1, 1, 1}});
  check_layer<TypeParam, 5>(max_pool, "MaxPool3d");
  nn::AvgPool3d<AD> avg_pool({3, 2, 2}, {.stride = std::array<std::int64_t, 3>{2, 1, 2},
                                         .padding = {1, 0, 1},
                                         .ceil_mode = true,
                                         .count_include_pad = false});
  check_layer<TypeParam, 5>(avg_pool, "AvgPool3d");
}

TYPED_TEST(NnConv3d, PaddingModesMatchTorch) {
  using AD = Autodiff<TypeParam>;
  const std::pair<const char*, nn::PaddingMode> modes[] = {{"zeros", nn::PaddingMode::zeros},
                                                           {"reflect", nn::PaddingMode::reflect},
                                                           {"replicate", nn::PaddingMode::replicate},
                                                           {"circular", nn::PaddingMode::circular}};
  for (const auto& [name, mode] : modes) {
    const std::string suffix = std::string("_") + name;
    nn::Conv1d<AD> conv1d(3, 4, 3, {.padding = 2, .padding_mode = mode});
    check_layer<TypeParam, 3>(conv1d, "Conv1d" + suffix);
    nn::Conv2d<AD> conv2d(3, 4, {3, 2}, {.stride = {1, 2}, .padding = {1, 2}, .padding_mode = mode});
    check_layer<TypeParam, 4>(conv2d, "Conv2d" + suffix);
    nn::Conv3d<AD> conv3d(2, 3, {3, 3, 3}, {.padding = {1, 2, 1}, .padding_mode = mode});
    check_layer<TypeParam, 5>(conv3d, "Conv3d" + suffix);
  }
}

TYPED_TEST(NnConv3d, SamePaddingMatchesTorch) {
  using AD = Autodiff<TypeParam>;
  nn::Conv1d<AD> even(3, 4, 4, {.padding_same = true});
  check_layer<TypeParam, 3>(even, "Conv1d_same_even_kernel");
  nn::Conv1d<AD> dilated(3, 4, 3, {.dilation = 2, .padding_same = true});
  check_layer<TypeParam, 3>(dilated, "Conv1d_same_dilated");
  nn::Conv2d<AD> conv2d(3, 4, {3, 4}, {.padding_same = true});
  check_layer<TypeParam, 4>(conv2d, "Conv2d_same");
  nn::Conv2d<AD> reflect(3, 4, {2, 3}, {.padding_mode = nn::PaddingMode::reflect, .padding_same = true});
  check_layer<TypeParam, 4>(reflect, "Conv2d_same_reflect");
  nn::Conv3d<AD> conv3d(2, 3, {2, 3, 2}, {.padding_same = true});
  check_layer<TypeParam, 5>(conv3d, "Conv3d_same");
  nn::Conv3d<AD> circular(2, 3, {3, 2, 3}, {.padding_mode = nn::PaddingMode::circular, .padding_same = true});
  check_layer<TypeParam, 5>(circular, "Conv3d_same_circular");
}

TYPED_TEST(NnConv3d, BadOptionsNameTheLayer) {
  using B = TypeParam;
  EXPECT_KILN_ERROR(nn::Conv3d<B>(3, 4, {3, 3, 3}, {.groups = 2}), "nn::Conv3d: 3 in and 4 out channels");
  EXPECT_KILN_ERROR(nn::ConvTranspose3d<B>(4, 3, {3, 3, 3}, {.groups = 2}),
                    "nn::ConvTranspose3d: 4 in and 3 out channels");
  EXPECT_KILN_ERROR(nn::Conv2d<B>(3, 4, {3, 3}, {.stride = {2, 1}, .padding_same = true}),
                    "nn::Conv2d: padding=\"same\" needs a stride of 1, got stride [2, 1]");
  EXPECT_KILN_ERROR(nn::Conv1d<B>(3, 4, 3, {.stride = 2, .padding_same = true}),
                    "nn::Conv1d: padding=\"same\" needs a stride of 1, got stride [2]");
  // reflect padding must be smaller than the dim it pads, as in torch.
  const nn::Conv1d<B> reflect(3, 4, 3, {.padding = 3, .padding_mode = nn::PaddingMode::reflect});
  EXPECT_KILN_ERROR(reflect.forward(Tensor<B, 3>::zeros({1, 3, 3})), "pad: reflect padding 3 / 3 must be smaller");
  const nn::Conv3d<B> conv(2, 3, {3, 3, 3});
  EXPECT_KILN_ERROR(conv.forward(Tensor<B, 5>::zeros({1, 3, 4, 4, 4})), "conv3d: weight [3, 2, 3, 3, 3] expects 2");
}

// torch's default init: weight and bias uniform in +-1/sqrt(fan_in), fan_in = weight.size(1) * prod(kernel).
TYPED_TEST(NnConv3d, DefaultInitFollowsTorch) {
  using B = TypeParam;
  manual_seed(3);
  const nn::Conv3d<B> conv(8, 16, {3, 3, 3}, {.groups = 2});
  EXPECT_EQ(conv.weight->shape(), (Shape{16, 4, 3, 3, 3}));
  EXPECT_EQ((*conv.bias)->shape(), (Shape{16}));
  expect_uniform_within(conv.weight->template to_vec<double>(), 1.0 / std::sqrt(4.0 * 27.0));
  expect_uniform_within((*conv.bias)->template to_vec<double>(), 1.0 / std::sqrt(4.0 * 27.0));
  const nn::ConvTranspose3d<B> transposed(8, 6, {2, 3, 3}, {.groups = 2, .bias = false});
  EXPECT_EQ(transposed.weight->shape(), (Shape{8, 3, 2, 3, 3}));
  EXPECT_FALSE(transposed.bias.has_value());
  expect_uniform_within(transposed.weight->template to_vec<double>(), 1.0 / std::sqrt(3.0 * 18.0));
}

// nn::valid keeps a layer's padding mode and "same" padding.
TYPED_TEST(NnConv3d, ValidKeepsThePadding) {
  using B = TypeParam;
  using AD = Autodiff<B>;
  const nn::Conv2d<AD> trained(2, 3, {2, 3}, {.padding_mode = nn::PaddingMode::circular, .padding_same = true});
  const nn::Conv2d<B> inference = nn::valid(trained);
  const auto x = Tensor<B, 4>::random({1, 2, 4, 5}, Distribution::normal(0, 1));
  const auto y = inference.forward(x);
  EXPECT_EQ(y.shape(), (Shape{1, 3, 4, 5}));
  EXPECT_CLOSE(y, trained.forward(Tensor<AD, 4>::from_data(x.into_data())).into_data(), 0, 0);
}
