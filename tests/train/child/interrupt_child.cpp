// The program the Ctrl-C loop test (tests/train/interrupt_loop_test.cpp) interrupts: a
// Learner run of a Linear-ReLU-Dropout-Linear classifier on Autodiff<Cpu> with Adam, a
// cosine schedule, a shuffling DataLoader with one worker and a checkpoint every epoch, in
// the folder given as its argument. It writes "training" to stdout at its first train step,
// then trains until SIGINT stops it; exit code 0 when the Learner stopped for the interrupt
// and saved its checkpoint, 1 otherwise.
#include <kiln/kiln.hpp>

#include <cstdio>
#include <filesystem>
#include <vector>

using namespace kiln;
using AD = Autodiff<Cpu>;

struct Item {
  TensorData x;
  std::int64_t y = 0;
};

struct Batch {
  Tensor<AD, 2> x;
  Tensor<AD, 1, Int> y;
};

struct Net {
  nn::Linear<AD> hidden{128, 512}, out{512, 10};
  nn::Dropout<AD> dropout{0.2};
  KILN_MODULE(hidden, out, dropout)
  train::TrainOutput<AD> train_step(const Batch& b) const {
    const auto logits = out.forward(dropout.forward(hidden.forward(b.x).relu()));
    return {nn::cross_entropy(logits, b.y), logits, b.y};
  }
};

int main(int argc, char** argv) {
  if (argc != 2) return 2;
  manual_seed(1);
  const std::vector<float> features = Tensor<Cpu, 2>::random({2048, 128}, Distribution::normal(0, 1)).to_vec<float>();
  std::vector<Item> items;
  for (std::size_t i = 0; i < 2048; ++i) {
    const std::vector<float> x(features.begin() + static_cast<std::ptrdiff_t>(128 * i),
                               features.begin() + static_cast<std::ptrdiff_t>(128 * (i + 1)));
    items.push_back({TensorData::from(x, Shape{128}), static_cast<std::int64_t>(i % 10)});
  }
  const auto make_batch = [](std::vector<Item> batch, const CpuDevice& device) {
    std::vector<TensorData> xs;
    std::vector<std::int64_t> ys;
    for (Item& item : batch) {
      xs.push_back(std::move(item.x));
      ys.push_back(item.y);
    }
    return Batch{Tensor<AD, 2>::from_data(data::stack(xs), device),
                 Tensor<AD, 1, Int>::from_data(TensorData::from(ys, Shape{static_cast<std::int64_t>(ys.size())}), device)};
  };
  auto loader = data::make_loader<AD>(data::InMemory<Item>(std::move(items)), make_batch,
                                      {.batch_size = 64, .shuffle = true, .seed = 2, .workers = 1});
  Net model;
  optim::Adam<AD> adam;
  train::Learner learner(model, adam,
                         {.scheduler = optim::CosineAnnealingLR(1e-3, 10'000),
                          .output_dir = argv[1],
                          .dashboard = train::DashboardMode::none});
  bool announced = false;
  learner.on_step_end([&](const train::StepRecord&) {
    if (announced) return;
    announced = true;
    std::fputs("training\n", stdout);
    std::fflush(stdout);
  });
  const train::FitResult result = learner.fit(loader, 1000);
  return result.reason == train::StopReason::interrupted && std::filesystem::exists(result.checkpoint) ? 0 : 1;
}
