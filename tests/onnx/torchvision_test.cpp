// torchvision's resnet18 and mobilenet_v2, exported by PyTorch with formula weights
// (tests/golden/onnx_torchvision, gen_onnx.py; kiln_onnx_formula_weights writes their
// weights.bin at build time), match PyTorch's logits through onnx::Model<Cpu> (the weights as
// external data) and through the modules kiln-onnx2cpp generated from them.
#include "formula_weights.hpp"
#include "mobilenet_v2.hpp"
#include "resnet18.hpp"

#include <kiln/cpu/backend.hpp>
#include <kiln/kiln.hpp>
#include <kiln/nn/state.hpp>
#include <kiln/onnx/model.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <string>

using namespace kiln;
namespace fs = std::filesystem;

namespace {

TensorData image() {
  return TensorData::from(test::formula(3 * 224 * 224, 1.0, 0.0, 0), Shape{1, 3, 224, 224});
}

TensorData expected(const std::string& model) {
  const fs::path path = fs::path(KILN_ONNX_TORCHVISION) / model / "test_data_set_0" / "output_0.pb";
  return onnx::load_tensor(path).values(path.string());
}

// Within 1e-4 of PyTorch's logits, relative to the largest of them.
void expect_close(const TensorData& got, const TensorData& want, const std::string& what) {
  ASSERT_EQ(got.shape(), want.shape()) << what;
  const auto g = got.to_vec<double>(), w = want.to_vec<double>();
  double scale = 0;
  for (const double v : w) scale = std::max(scale, std::abs(v));
  ASSERT_GT(scale, 0.0) << what;
  for (std::size_t i = 0; i < g.size(); ++i)
    ASSERT_LE(std::abs(g[i] - w[i]), 1e-4 * scale) << what << ": logit " << i << " (largest " << scale << ")";
}

void check_runtime(const std::string& name) {
  const auto model = onnx::Model<Cpu>::load(fs::path(KILN_ONNX_TORCHVISION_BUILD) / name / "model.onnx");
  const std::vector<TensorData> inputs{image()};
  expect_close(Cpu::into_data(model.run(std::span<const TensorData>(inputs)).at(0)), expected(name), name);
}

TEST(OnnxTorchvision, Resnet18Runtime) { check_runtime("resnet18"); }
TEST(OnnxTorchvision, MobilenetV2Runtime) { check_runtime("mobilenet_v2"); }

TEST(OnnxTorchvision, Resnet18Generated) {
  onnx_gen::resnet18<Cpu> model(CpuDevice{});
  nn::load(model, KILN_ONNX_RESNET18_WEIGHTS);
  expect_close(model.forward(Tensor<Cpu, 4>::from_data(image())).into_data(), expected("resnet18"), "resnet18");
}
TEST(OnnxTorchvision, MobilenetV2Generated) {
  onnx_gen::mobilenet_v2<Cpu> model(CpuDevice{});
  nn::load(model, KILN_ONNX_MOBILENET_V2_WEIGHTS);
  EXPECT_GT(nn::num_params(model), 3'000'000);
  expect_close(model.forward(Tensor<Cpu, 4>::from_data(image())).into_data(), expected("mobilenet_v2"), "mobilenet_v2");
}

}  // namespace
