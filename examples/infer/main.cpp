// Inference with the model examples/fashion_mnist saved: load its weights into the CNN on
// the plain CPU backend (no autodiff, nothing recorded) and classify test-set images.
//
//   infer [--model PATH] [--count N]     (defaults: runs/fashion_mnist/model.safetensors, 10)
//
// `infer --help` lists the flags. Prints each image's predicted and true class, then the
// accuracy over the N images; exits with 1 when it is below 80 % (or the model cannot be
// loaded), 2 on a bad command line.
#include "../common/flags.hpp"
#include "../fashion_mnist/model.hpp"
#include "../fashion_mnist/predictions.hpp"

#include <kiln/data/batcher.hpp>
#include <kiln/data/idx.hpp>
#include <kiln/kiln.hpp>
#include <kiln/nn.hpp>
#include <kiln/nn/state.hpp>

#include <fmt/format.h>

#include <string>

using B = kiln::Cpu;

int main(int argc, char** argv) try {
  std::string model_path = "runs/fashion_mnist/model.safetensors";
  std::size_t count = 10;
  examples::Flags flags("infer", "Classifies Fashion-MNIST test images with the model fashion_mnist saved.");
  flags.add("--model", model_path, "PATH", "the saved model's weights");
  flags.add("--count", count, "N", "how many test images to classify, from the first", examples::positive);
  if (auto exit_code = flags.parse(argc, argv)) return *exit_code;

  fashion::Cnn<B> model(kiln::CpuDevice{});
  kiln::nn::load(model, model_path);  // strict: every weight present, with its shape
  kiln::nn::eval(model);

  const kiln::data::ImageSet test = kiln::data::fashion_mnist(kiln::data::Split::test);
  count = std::min(count, test.size());
  std::vector<kiln::data::LabeledImage> items;
  for (std::size_t i = 0; i < count; ++i) items.push_back(fashion::prepare()(test.get(i), {i, 0}));  // as in training
  const auto batch = kiln::data::ClassificationBatcher{}.batch<B>(items, kiln::CpuDevice{});

  const double accuracy = fashion::print_predictions(model.forward(batch.images), items);
  return accuracy >= 0.8 ? 0 : 1;  // a trained model gets about 9 in 10 right
} catch (const kiln::Error& e) {
  fmt::print(stderr, "infer: {}\n", e.what());
  return 1;
}
