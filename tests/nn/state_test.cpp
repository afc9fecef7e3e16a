// Saving and loading modules: state_dict round trips through safetensors with bit-identical
// outputs, strict and non-strict loading with its report, key remapping, and a ResNet basic
// block loading weights that torch.save wrote and matching PyTorch's output.
#include "backends.hpp"
#include "golden.hpp"

#include <kiln/nn.hpp>
#include <kiln/nn/state.hpp>

#include <filesystem>

namespace {

using namespace kiln;
using kiln::test::golden;

template <class B> class NnState : public kiln::test::BackendTest<B> {};
TYPED_TEST_SUITE(NnState, kiln::test::HardwareBackends, kiln::test::BackendNames);

template <class B> struct Net {
  nn::Conv2d<B> conv;
  nn::BatchNorm2d<B> norm;
  std::vector<nn::Linear<B>> heads;
  KILN_MODULE(conv, norm, heads)

  Net() = default;
  explicit Net(int n_heads) : conv(2, 4, {3, 3}, {.padding = {1, 1}}), norm(4) {
    for (int i = 0; i < n_heads; ++i) heads.emplace_back(4 * 5 * 5, 3);
  }
  Tensor<B, 2> forward(const Tensor<B, 4>& x) {
    const auto h = norm.forward(conv.forward(x)).relu().template reshape<2>({x.dim(0), -1});
    Tensor<B, 2> y = heads[0].forward(h);
    for (std::size_t i = 1; i < heads.size(); ++i) y = y + heads[i].forward(h);
    return y;
  }
};

std::filesystem::path scratch(const std::string& name) {
  return std::filesystem::path(::testing::TempDir()) / ("kiln_nn_state_" + name);
}

TYPED_TEST(NnState, SavedAndLoadedModulesGiveBitIdenticalOutputs) {
  using B = TypeParam;
  manual_seed(1);
  Net<B> trained(2);
  const auto x = Tensor<B, 4>::random({3, 2, 5, 5}, Distribution::normal(0, 1));
  (void)trained.forward(x);  // moves the running statistics
  nn::eval(trained);
  const auto path = scratch("net.safetensors");
  nn::save(trained, path);
  manual_seed(2);
  Net<B> fresh(2);
  nn::eval(fresh);
  const nn::LoadReport report = nn::load(fresh, path);
  EXPECT_TRUE(report.ok()) << report.text();
  EXPECT_CLOSE(fresh.forward(x), trained.forward(x).into_data(), 0, 0);
  EXPECT_CLOSE(*fresh.norm.running_var.value(), trained.norm.running_var.value()->into_data(), 0, 0);
  // f16 storage halves the file and keeps the outputs close.
  nn::save(trained, scratch("net16.safetensors"), DType::f16);
  Net<B> half(2);
  nn::eval(half);
  nn::load(half, scratch("net16.safetensors"));
  EXPECT_EQ(half.conv.weight->dtype(), DType::f32);  // converted to the module's dtype
  EXPECT_CLOSE(half.forward(x), trained.forward(x).into_data(), 1e-2, 1e-2);
  EXPECT_LT(std::filesystem::file_size(scratch("net16.safetensors")), std::filesystem::file_size(path) * 2 / 3);
}

TYPED_TEST(NnState, StrictLoadingReportsEveryProblemAndLoadsNothing) {
  using B = TypeParam;
  manual_seed(3);
  const Net<B> one(1);
  auto saved = nn::state_dict(one);
  saved.at("conv.weight") = TensorData::from(std::vector<float>(4, 1.0f), Shape{2, 2});
  saved.insert("extra.weight", TensorData::from(std::vector<float>{1}, Shape{1}));
  Net<B> two(2);
  const TensorData before = two.conv.bias.value()->into_data();
  EXPECT_KILN_ERROR(nn::load_state_dict(two, saved),
                    "load_state_dict: missing keys (2): heads.1.weight, heads.1.bias; unexpected keys (1): "
                    "extra.weight; mismatched shapes (1): conv.weight: file [2, 2], module [4, 2, 3, 3]");
  EXPECT_CLOSE(*two.conv.bias.value(), before, 0, 0);  // nothing was loaded
  const nn::LoadReport report = nn::load_state_dict(two, saved, {.strict = false});
  EXPECT_EQ(report.missing.size(), 2u);
  EXPECT_EQ(report.unexpected, std::vector<std::string>{"extra.weight"});
  EXPECT_EQ(report.mismatched.size(), 1u);
  EXPECT_CLOSE(*two.conv.bias.value(), one.conv.bias.value()->into_data(), 0, 0);  // the rest was loaded
}

TYPED_TEST(NnState, KeysAreRemappedByRegexRules) {
  using B = TypeParam;
  manual_seed(4);
  const Net<B> source(1);
  store::NamedTensors prefixed;
  for (const auto& entry : nn::state_dict(source)) prefixed.insert("module.backbone_" + entry.name, entry.data);
  Net<B> target(1);
  const nn::LoadReport report = nn::load_state_dict(
      target, prefixed, {.remap = {{"^module\\.", ""}, {"^backbone_", ""}}});
  EXPECT_TRUE(report.ok()) << report.text();
  EXPECT_CLOSE(*target.heads[0].weight, source.heads[0].weight->into_data(), 0, 0);
  // Two keys that a rule makes one are refused rather than one silently winning.
  EXPECT_KILN_ERROR(nn::load_state_dict(target, prefixed, {.remap = {{"^module\\.backbone_.*", "x"}}}),
                    "load_state_dict: two keys of the file are both named x after remapping");
  // A pattern that is not a regular expression is a kiln::Error naming it.
  EXPECT_KILN_ERROR(nn::load_state_dict(target, prefixed, {.remap = {{"^module(", ""}}}),
                    "load_state_dict: the remap pattern '^module(' is not a regular expression");
}

// torchvision's BasicBlock layout: conv1, bn1, conv2, bn2, shortcut (Sequential: 0 conv, 1 bn).
template <class B> struct BasicBlock {
  nn::Conv2d<B> conv1, conv2;
  nn::BatchNorm2d<B> bn1, bn2;
  nn::Sequential<nn::Conv2d<B>, nn::BatchNorm2d<B>> shortcut;
  KILN_MODULE(conv1, bn1, conv2, bn2, shortcut)

  BasicBlock(std::int64_t in, std::int64_t out, std::int64_t stride)
      : conv1(in, out, {3, 3}, {.stride = {stride, stride}, .padding = {1, 1}, .bias = false}),
        conv2(out, out, {3, 3}, {.padding = {1, 1}, .bias = false}),
        bn1(out),
        bn2(out),
        shortcut(nn::Conv2d<B>(in, out, {1, 1}, {.stride = {stride, stride}, .bias = false}), nn::BatchNorm2d<B>(out)) {}
  Tensor<B, 4> forward(const Tensor<B, 4>& x) {
    const auto y = bn2.forward(conv2.forward(bn1.forward(conv1.forward(x)).relu()));
    return (y + shortcut.forward(x)).relu();
  }
};

TYPED_TEST(NnState, AResNetBlockLoadsTorchSavedWeightsAndMatchesTorch) {
  using B = TypeParam;
  BasicBlock<B> block(3, 8, 2);
  const nn::LoadReport report = nn::load(block, std::filesystem::path(KILN_GOLDEN_DIR) / "import" / "resnet_block.pt");
  EXPECT_TRUE(report.ok()) << report.text();
  nn::eval(block);
  const auto& c = golden("import", "resnet_block");
  EXPECT_CLOSE(block.forward(c.tensor<B, 4>("x")), c["y"], 1e-4, 1e-5);
}

}  // namespace
