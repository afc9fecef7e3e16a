// Fashion-MNIST: the CNN of model.hpp trained with AdamW (learning rate --lr, annealed to 0
// over the run on a cosine) by kiln::train's Learner, with the live dashboard in a terminal
// (plain log lines otherwise) and a validation pass over the test set after each epoch, then
// saved for examples/infer. The README's main job.
//
//   fashion_mnist [--backend cpu|vulkan] [--epochs 3] [--batch-size 64] [--lr 1e-3]
//                 [--output runs/fashion_mnist] [--resume]
//
// Reads Debian's dataset-fashion-mnist (/usr/share/datasets/fashion-mnist). Writes logs,
// checkpoints and learning_curves.svg under --output and the trained weights to
// <output>/model.safetensors. Exits with 1 if the test accuracy is below 85 % (or something
// fails), 2 on a bad command line, 77 when Vulkan was asked for but no device exists.
#include "model.hpp"

#include <kiln/data/idx.hpp>
#include <kiln/data/loader.hpp>
#include <kiln/kiln.hpp>
#include <kiln/nn.hpp>
#include <kiln/nn/state.hpp>
#include <kiln/optim/rules.hpp>
#include <kiln/train.hpp>
#ifdef KILN_EXAMPLE_VULKAN  // defined by examples/CMakeLists.txt when the Vulkan backend is built
#include <kiln/vulkan/backend.hpp>
#endif

#include <fmt/format.h>

#include <filesystem>
#include <stdexcept>
#include <string>
#include <string_view>

namespace data = kiln::data;

struct Flags {
  std::string backend = "cpu";
  std::int64_t epochs = 3;
  std::size_t batch_size = 64;
  double lr = 1e-3;
  std::filesystem::path output = "runs/fashion_mnist";
  bool resume = false;
};

template <kiln::Backend B> int train(const Flags& flags, const typename B::Device& device) {
  using AD = kiln::Autodiff<B>;
  kiln::manual_seed(0);

  // u8 images [N, 28, 28] and labels 0..9, scaled to [0, 1] and normalized with the training
  // set's mean and standard deviation; batches: f32 [N, 1, 28, 28] and i64 labels [N].
  const auto train_set = data::map(data::fashion_mnist(data::Split::train), fashion::prepare());
  const auto test_set = data::map(data::fashion_mnist(data::Split::test), fashion::prepare());
  auto train_loader = data::make_loader<AD>(
      train_set, data::ClassificationBatcher{},
      {.batch_size = flags.batch_size, .shuffle = true, .seed = 1, .workers = 1}, device);
  auto test_loader = data::make_loader<AD>(test_set, data::ClassificationBatcher{}, {.batch_size = 500}, device);

  fashion::Cnn<AD> model(device);
  auto optimizer = kiln::optim::adamw<B>();  // torch.optim.AdamW's defaults: betas (0.9, 0.999), weight decay 0.01
  const auto step = [](const fashion::Cnn<AD>& m, const data::ClassificationBatch<AD>& batch) {
    const auto logits = m.forward(batch.images);
    return kiln::train::TrainOutput<AD>{kiln::nn::cross_entropy(logits, batch.targets), logits, batch.targets};
  };
  kiln::train::Learner learner(model, optimizer,
                               {.scheduler = kiln::optim::CosineAnnealingLR(
                                    flags.lr, flags.epochs * static_cast<std::int64_t>(train_loader.size())),
                                .output_dir = flags.output,
                                .resume = flags.resume,
                                .best_model = kiln::train::BestModel{.metric = "accuracy", .mode = kiln::train::Mode::max},
                                .title = fmt::format("Fashion-MNIST on {}", B::name)},
                               step, step);
  const kiln::train::FitResult fit = learner.fit(train_loader, test_loader, flags.epochs);
  if (fit.reason == kiln::train::StopReason::interrupted) {
    fmt::print("interrupted: a checkpoint is in {}; --resume continues from it\n", flags.output.string());
    return 130;
  }

  // The test accuracy is that of the last epoch's validation pass over the test set. The
  // trained weights are saved from the inner backend B's copy of the model (no graph), which
  // examples/infer loads.
  const auto& history = learner.history();
  const double accuracy = history.empty() ? 0.0 : history.back().valid.get("accuracy").value_or(0.0) / 100.0;
  const fashion::Cnn<B> trained = kiln::nn::valid(model);
  const std::filesystem::path saved = flags.output / "model.safetensors";
  kiln::nn::save(trained, saved);
  fmt::print("test accuracy after {} epoch(s) on {}: {:.4f}; model saved to {}\n", fit.epochs, B::name, accuracy,
             saved.string());
  if (accuracy < 0.85) {
    fmt::print(stderr, "fashion_mnist: test accuracy {:.4f} is below 0.85\n", accuracy);
    return 1;
  }
  return 0;
}

int main(int argc, char** argv) try {
  Flags flags;
  for (int i = 1; i < argc; ++i) {
    const std::string_view flag = argv[i];
    const bool has_value = i + 1 < argc;
    if (flag == "--resume") flags.resume = true;
    else if (flag == "--backend" && has_value) flags.backend = argv[++i];
    else if (flag == "--epochs" && has_value) flags.epochs = std::stoll(argv[++i]);
    else if (flag == "--batch-size" && has_value) flags.batch_size = std::stoul(argv[++i]);
    else if (flag == "--lr" && has_value) flags.lr = std::stod(argv[++i]);
    else if (flag == "--output" && has_value) flags.output = argv[++i];
    else {
      fmt::print(stderr,
                 "usage: fashion_mnist [--backend cpu|vulkan] [--epochs N] [--batch-size N] [--lr X] [--output DIR] "
                 "[--resume]\n");
      return 2;
    }
  }
  if (flags.backend == "cpu") return train<kiln::Cpu>(flags, {});
#ifdef KILN_EXAMPLE_VULKAN
  if (flags.backend == "vulkan") {
    if (const std::string reason = kiln::vulkan::unavailable_reason(); !reason.empty()) {
      fmt::print(stderr, "fashion_mnist: no Vulkan device: {}\n", reason);
      return 77;
    }
    return train<kiln::Vulkan>(flags, {});
  }
#endif
  fmt::print(stderr, "fashion_mnist: unknown or unbuilt backend '{}'\n", flags.backend);
  return 2;
} catch (const kiln::Error& e) {
  fmt::print(stderr, "fashion_mnist: {}\n", e.what());
  return 1;
} catch (const std::logic_error& e) {  // std::stoi and friends on a flag's value
  fmt::print(stderr, "fashion_mnist: bad flag value ({})\n", e.what());
  return 2;
}
