// Fashion-MNIST: the CNN of model.hpp trained with AdamW (learning rate --lr, annealed to 0
// over the run on a cosine) by kiln::train's Learner, with the live dashboard in a terminal
// (plain log lines otherwise) and a validation pass over the test set after each epoch, then
// saved for examples/infer. The README's main job.
//
//   fashion_mnist [--backend cpu|vulkan|cuda|rocm|fusion_cpu|fusion_vulkan|fusion_cuda|fusion_rocm] [--fusion] [--epochs 3]
//                 [--batch-size 64] [--lr 1e-3] [--output runs/fashion_mnist] [--resume] [--distributed]
//
// --distributed trains data-parallel across the processes of an MPI job
// (mpirun -np 2 build/examples/fashion_mnist --distributed; docs/distributed.md): each rank
// reads its shard of the training and test sets, --batch-size is the batch of all ranks
// together (split evenly), the gradients are averaged across the ranks during backward, and
// rank 0 alone draws the dashboard and writes the logs, checkpoints and the model. Each rank
// runs on the cores of its host divided among the ranks there (KILN_NUM_THREADS overrides).
//
// The model and the training loop are compiled once, for Autodiff<kiln::Dispatch>: --backend
// names the backend they run on (docs/backends.md, "Dispatch"). --fusion is the same as a
// fusion_ backend: Fusion over it, where the elementwise work of the forward pass, of the
// gradient formulas and of the optimizer runs as fused programs (docs/fusion.md).
//
// Reads Debian's dataset-fashion-mnist (/usr/share/datasets/fashion-mnist). Writes logs,
// checkpoints and learning_curves.svg under --output and the trained weights to
// <output>/model.safetensors. Exits with 1 if the test accuracy is below 85 % (or something
// fails), 2 on a bad command line, 77 when a GPU backend (Vulkan, CUDA, ROCm) was asked for but
// no device exists.
// `fashion_mnist --help` lists the flags with their defaults.
#include "../common/flags.hpp"
#include "model.hpp"

#include <kiln/data/idx.hpp>
#include <kiln/dispatch/backend.hpp>
#include <kiln/data/loader.hpp>
#include <kiln/kiln.hpp>
#include <kiln/nn.hpp>
#include <kiln/nn/state.hpp>
#include <kiln/optim/rules.hpp>
#include <kiln/train.hpp>

#if KILN_EXAMPLE_DIST
#include <kiln/dist.hpp>
#endif

#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <optional>
#include <string>
#include <thread>

namespace data = kiln::data;

// The command line, with its defaults.
struct Options {
  std::string backend = "cpu";
  bool fusion = false;
  std::int64_t epochs = 3;
  std::size_t batch_size = 64;
  double lr = 1e-3;
  std::filesystem::path output = "runs/fashion_mnist";
  bool resume = false;
  bool distributed = false;
};

// Trains on `train_loader`, validating on `test_loader` after each epoch, then saves the
// model (rank 0 of a distributed run).
template <class TrainLoader, class TestLoader>
int train_with(const Options& options, const kiln::DispatchDevice& device, TrainLoader& train_loader,
               TestLoader& test_loader) {
  using B = kiln::Dispatch;
  using AD = kiln::Autodiff<B>;
  const std::string_view on = kiln::dispatch::target_name(*device.target);
  int rank = 0, ranks = 1;
#if KILN_EXAMPLE_DIST
  if (options.distributed) rank = kiln::dist::rank(), ranks = kiln::dist::world_size();
#endif
  fashion::Cnn<AD> model(device);
  auto optimizer = kiln::optim::adamw<B>();  // torch.optim.AdamW's defaults: betas (0.9, 0.999), weight decay 0.01
  const auto step = [](const fashion::Cnn<AD>& m, const data::ClassificationBatch<AD>& batch) {
    const auto logits = m.forward(batch.images);
    return kiln::train::TrainOutput<AD>{kiln::nn::cross_entropy(logits, batch.targets), logits, batch.targets};
  };
  kiln::train::Learner learner(model, optimizer,
                               {.scheduler = kiln::optim::CosineAnnealingLR(
                                    options.lr, options.epochs * static_cast<std::int64_t>(train_loader.size())),
                                .output_dir = options.output,
                                .resume = options.resume,
                                .best_model = kiln::train::BestModel{.metric = "accuracy", .goal = kiln::train::Goal::maximize},
                                .title = ranks > 1 ? fmt::format("Fashion-MNIST on {}, {} ranks", on, ranks)
                                                   : fmt::format("Fashion-MNIST on {}", on)},
                               step, step);
#if KILN_EXAMPLE_DIST
  std::optional<kiln::dist::DataParallel<fashion::Cnn<AD>>> parallel;  // rank 0's initial weights everywhere
  if (options.distributed) learner.distribute(parallel.emplace(model));
#endif
  const kiln::train::FitResult fit = learner.fit(train_loader, test_loader, options.epochs);
  if (fit.reason == kiln::train::StopReason::interrupted) {
    if (rank == 0) fmt::print("interrupted: a checkpoint is in {}; --resume continues from it\n", options.output.string());
    return 130;
  }

  // The test accuracy is that of the last epoch's validation pass over the test set. The
  // trained weights are saved from the inner backend B's copy of the model (no graph), which
  // examples/infer loads.
  const auto& history = learner.history();
  const double accuracy = history.empty() ? 0.0 : history.back().valid.get("accuracy").value_or(0.0) / 100.0;
  const fashion::Cnn<B> trained = kiln::nn::valid(model);
  const std::filesystem::path saved = options.output / "model.safetensors";
  if (rank == 0) {
    kiln::nn::save(trained, saved);
    fmt::print("test accuracy after {} epoch(s) on {}: {:.4f}; model saved to {}\n", fit.epochs, on, accuracy,
               saved.string());
  }
  if (accuracy < 0.85) {
    fmt::print(stderr, "fashion_mnist: test accuracy {:.4f} is below 0.85\n", accuracy);
    return 1;
  }
  return 0;
}

int train(const Options& options, const kiln::DispatchDevice& device) {
  using AD = kiln::Autodiff<kiln::Dispatch>;
  kiln::manual_seed(0);
  // u8 images [N, 28, 28] and labels 0..9, scaled to [0, 1] and normalized with the training
  // set's mean and standard deviation; batches: f32 [N, 1, 28, 28] and i64 labels [N].
  const auto train_set = data::map(data::fashion_mnist(data::Split::train), fashion::prepare());
  const auto test_set = data::map(data::fashion_mnist(data::Split::test), fashion::prepare());
#if KILN_EXAMPLE_DIST
  if (options.distributed) {
    // This rank's shards; the training shard reshuffled each epoch (the same seed on every rank).
    const auto ranks = static_cast<std::size_t>(kiln::dist::world_size());
    KILN_CHECK(options.batch_size % ranks == 0, "--batch-size {} does not split evenly across {} ranks",
               options.batch_size, ranks);
    auto train_loader = data::make_loader<AD>(kiln::dist::shard(train_set, {.shuffle = true, .seed = 1}),
                                              data::ClassificationBatcher{},
                                              {.batch_size = options.batch_size / ranks, .workers = 1}, device);
    auto test_loader = data::make_loader<AD>(kiln::dist::shard(test_set, {.shuffle = false}),
                                             data::ClassificationBatcher{}, {.batch_size = 500}, device);
    return train_with(options, device, train_loader, test_loader);
  }
#endif
  auto train_loader = data::make_loader<AD>(
      train_set, data::ClassificationBatcher{},
      {.batch_size = options.batch_size, .shuffle = true, .seed = 1, .workers = 1}, device);
  auto test_loader = data::make_loader<AD>(test_set, data::ClassificationBatcher{}, {.batch_size = 500}, device);
  return train_with(options, device, train_loader, test_loader);
}

int main(int argc, char** argv) try {
  Options options;
  examples::Flags flags("fashion_mnist", "Trains the Fashion-MNIST CNN with kiln::train's Learner and saves it.");
  flags.add("--backend", options.backend, "cpu|vulkan|cuda|rocm|fusion_cpu|fusion_vulkan|fusion_cuda|fusion_rocm", "the backend to train on");
  flags.add("--fusion", options.fusion, "run elementwise chains as fused kernels (Fusion over --backend)");
  flags.add("--epochs", options.epochs, "N", "passes over the training set", examples::positive);
  flags.add("--batch-size", options.batch_size, "N", "training images per optimizer step", examples::positive);
  flags.add("--lr", options.lr, "X", "AdamW's initial learning rate, annealed to 0 on a cosine", examples::positive);
  flags.add("--output", options.output, "DIR", "where logs, checkpoints, the chart and the model go");
  flags.add("--resume", options.resume, "continue from the checkpoint in --output");
  flags.add("--distributed", options.distributed, "train data-parallel across the ranks of an MPI job (mpirun -np N)");
  if (auto exit_code = flags.parse(argc, argv)) return *exit_code;
  if (options.distributed) {
#if KILN_EXAMPLE_DIST
    kiln::dist::init();
    // The host's cores divided among its ranks, unless KILN_NUM_THREADS says otherwise.
    const char* threads = std::getenv("KILN_NUM_THREADS");
    if ((threads == nullptr || *threads == '\0') && kiln::dist::local_size() > 1)
      kiln::cpu::set_num_threads(std::max(1, static_cast<int>(std::thread::hardware_concurrency()) / kiln::dist::local_size()));
#else
    fmt::print(stderr, "fashion_mnist: --distributed needs kiln::dist, which this build lacks (MPI was not found)\n");
    return 2;
#endif
  }

  // The backend, chosen here at run time: every tensor the model, the loaders and the
  // Learner create lands on it (Dispatch's default device).
  kiln::DispatchDevice device;
  try {
    device = kiln::DispatchDevice::parse(options.fusion && !options.backend.starts_with("fusion_")
                                             ? "fusion_" + options.backend
                                             : options.backend);
    if (!device.target) throw kiln::Error("--backend names no backend");
  } catch (const kiln::Error& e) {
    fmt::print(stderr, "fashion_mnist: --backend {}: {}\n", options.backend, e.what());
    return 2;
  }
  if (const std::string reason = kiln::dispatch::unavailable_reason(device); !reason.empty()) {
    fmt::print(stderr, "fashion_mnist: {}\n", reason);
    return 77;
  }
  kiln::Dispatch::set_default_device(device);
  return train(options, device);
} catch (const kiln::Error& e) {
  fmt::print(stderr, "fashion_mnist: {}\n", e.what());
  return 1;
}
