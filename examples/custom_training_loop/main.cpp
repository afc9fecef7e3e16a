// The Fashion-MNIST CNN trained by a hand-written loop, without the Learner: load batches,
// forward, loss, backward, optimizer step; then test accuracy on the inner backend.
//
//   custom_training_loop [--epochs N]     (default 1; needs Debian's dataset-fashion-mnist)
//
// `custom_training_loop --help` lists the flags. Exits with 1 if the test accuracy is not above
// 80 % (or something fails), 2 on a bad command line, 77 when the dataset is not installed.
#include "../common/flags.hpp"
#include "../fashion_mnist/model.hpp"

#include <kiln/data/idx.hpp>
#include <kiln/data/loader.hpp>
#include <kiln/kiln.hpp>
#include <kiln/nn.hpp>
#include <kiln/optim/rules.hpp>

#include <fmt/format.h>

#include <cstdint>
#include <filesystem>

namespace data = kiln::data;
using B = kiln::Cpu;
using AD = kiln::Autodiff<B>;  // records the forward pass so backward() can give gradients

int main(int argc, char** argv) try {
  std::int64_t epochs = 1;
  examples::Flags flags("custom_training_loop", "Trains the Fashion-MNIST CNN by a hand-written loop, then tests it.");
  flags.add("--epochs", epochs, "N", "passes over the training set", examples::positive);
  if (auto exit_code = flags.parse(argc, argv)) return *exit_code;

  kiln::manual_seed(0);
  if (!std::filesystem::exists(data::fashion_mnist_directory)) {
    fmt::print(stderr, "custom_training_loop: Fashion-MNIST is not installed (apt-get install dataset-fashion-mnist)\n");
    return 77;
  }

  // Images normalized as model.hpp's prepare() says; batches: f32 [64, 1, 28, 28], i64 [64].
  const auto train = data::map(data::fashion_mnist(data::Split::train), fashion::prepare());
  const auto test = data::map(data::fashion_mnist(data::Split::test), fashion::prepare());
  auto train_loader = data::make_loader<AD>(train, data::ClassificationBatcher{},
                                            {.batch_size = 64, .shuffle = true, .seed = 1, .workers = 1});
  auto test_loader = data::make_loader<B>(test, data::ClassificationBatcher{}, {.batch_size = 500});

  fashion::Cnn<AD> model(kiln::CpuDevice{});
  auto optimizer = kiln::optim::adamw<B>();  // torch.optim.AdamW's defaults
  const double lr = 1e-3;

  for (std::int64_t epoch = 1; epoch <= epochs; ++epoch) {
    std::size_t step = 0;
    for (const auto& batch : train_loader) {
      const auto loss = kiln::nn::cross_entropy(model.forward(batch.images), batch.targets);
      auto grads = loss.backward();
      optimizer.step(lr, model, grads);
      if (++step % 100 == 0)
        fmt::print("epoch {} step {:4d}/{}  loss {:.4f}\n", epoch, step, train_loader.size(), loss.item());
    }
  }

  // Inference on the inner backend: the same weights, no graph recorded.
  const fashion::Cnn<B> trained = kiln::nn::valid(model);
  std::int64_t correct = 0;
  for (const auto& batch : test_loader) {
    const auto predicted = trained.forward(batch.images).argmax(1).template reshape<1>({-1});
    correct += static_cast<std::int64_t>(predicted.eq(batch.targets).to_int().sum().item());
  }
  const double accuracy = static_cast<double>(correct) / static_cast<double>(test.size());
  fmt::print("test accuracy after {} epoch(s): {:.4f}\n", epochs, accuracy);
  return accuracy > 0.8 ? 0 : 1;
} catch (const kiln::Error& e) {
  fmt::print(stderr, "custom_training_loop: {}\n", e.what());
  return 1;
}
