// Inference with a model trained elsewhere: load an ONNX file exported by PyTorch
// (torch.onnx.export) with kiln::onnx::Model and classify Fashion-MNIST test images on the
// backend --backend names. The model file Kiln's tests use, tests/golden/onnx/fashion_cnn/
// model.onnx, is a small CNN that PyTorch trained for one epoch (tests/golden/gen_onnx.py).
//
//   onnx_inference --model PATH [--count N] [--backend cpu|vulkan|...]
//
// The model takes images [N, 1, 28, 28] normalized as in training and returns logits
// [N, 10]. Prints each image's predicted and true class, then the accuracy over the N images;
// exits with 1 when it is below 80 % (or the model cannot be loaded), 2 on a bad command
// line, 77 when the backend asked for is missing here.
#include "../common/flags.hpp"
#include "../fashion_mnist/model.hpp"
#include "../fashion_mnist/predictions.hpp"

#include <kiln/data/batcher.hpp>
#include <kiln/data/idx.hpp>
#include <kiln/dispatch/backend.hpp>
#include <kiln/onnx/model.hpp>
#include <kiln/tensor.hpp>

#include <fmt/format.h>

#include <filesystem>
#include <string>

using B = kiln::Dispatch;

int main(int argc, char** argv) try {
  std::filesystem::path model_path;
  std::string backend = "cpu";
  std::size_t count = 10;
  examples::Flags flags("onnx_inference", "Classifies Fashion-MNIST test images with an ONNX model.");
  flags.add("--model", model_path, "PATH", "the .onnx file (images [N, 1, 28, 28] → logits [N, 10])");
  flags.add("--count", count, "N", "how many test images to classify, from the first", examples::positive);
  flags.add("--backend", backend, "cpu|vulkan|cuda|rocm|fusion_cpu|...", "the backend to run the model on");
  if (auto exit_code = flags.parse(argc, argv)) return *exit_code;
  kiln::DispatchDevice device;
  try {
    device = kiln::DispatchDevice::parse(backend);
  } catch (const kiln::Error& e) {
    fmt::print(stderr, "onnx_inference: --backend {}: {}\n", backend, e.what());
    return 2;
  }
  if (const std::string reason = kiln::dispatch::unavailable_reason(device); !reason.empty()) {
    fmt::print(stderr, "onnx_inference: {}\n", reason);
    return 77;
  }

  // Parses the file, checks that Kiln runs every node, and uploads the weights once.
  const auto model = kiln::onnx::Model<B>::load(model_path, device);
  fmt::print("{}: opset {}, {} nodes, produced by {} {}\n", model_path.filename().string(), model.opset(),
             model.file().graph.nodes.size(), model.file().producer_name, model.file().producer_version);

  const kiln::data::ImageSet test = kiln::data::fashion_mnist(kiln::data::Split::test);
  count = std::min(count, test.size());
  std::vector<kiln::data::LabeledImage> items;
  for (std::size_t i = 0; i < count; ++i) items.push_back(fashion::prepare()(test.get(i), {i, 0}));
  const auto batch = kiln::data::ClassificationBatcher{}.batch<B>(items, device);

  // One input (the images), one output (the logits); the batch size is the model's dynamic dim.
  const kiln::Tensor<B, 2> logits(model.run({batch.images.primitive()}).at(0));
  const double accuracy = fashion::print_predictions(logits, items);
  return accuracy >= 0.8 ? 0 : 1;  // the model gets about 85 in 100 right
} catch (const kiln::Error& e) {
  fmt::print(stderr, "onnx_inference: {}\n", e.what());
  return 1;
}
