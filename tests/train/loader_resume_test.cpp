// The Learner over kiln::data's DataLoader (shuffled per epoch, two worker threads): a run
// stopped by Ctrl-C in the middle of an epoch and resumed from its checkpoint into a fresh
// model, optimizer and loader gives bitwise the losses of the uninterrupted run, so the
// resumed epoch sees the same batches in the same order.
#include <kiln/data/dataset.hpp>
#include <kiln/data/loader.hpp>
#include <kiln/data/stack.hpp>
#include <kiln/kiln.hpp>
#include <kiln/nn.hpp>
#include <kiln/optim/rules.hpp>
#include <kiln/train.hpp>

#include <gtest/gtest.h>

#include "classifier.hpp"

#include <csignal>
#include <filesystem>

namespace {

using namespace kiln;
using AD = Autodiff<Cpu>;

struct Item {
  TensorData x;  // f64 [4]
  std::int64_t y = 0;
};
using train::test::Batch;
using train::test::Net;

// 120 items, 3 classes from 4 features: 7 batches of 16 per epoch (the last 8 items dropped).
data::InMemory<Item> items() {
  manual_seed(31);
  const std::vector<double> v = Tensor<Cpu, 2>::random({120, 4}, Distribution::normal(0, 1), {}, DType::f64).to_vec<double>();
  std::vector<Item> out;
  for (std::size_t i = 0; i < 120; ++i) {
    const std::vector<double> x(v.begin() + static_cast<std::ptrdiff_t>(4 * i), v.begin() + static_cast<std::ptrdiff_t>(4 * i + 4));
    out.push_back({TensorData::from(x, Shape{4}), (x[0] > 0 ? 1 : 0) + (x[2] > 0.8 ? 1 : 0)});
  }
  return data::InMemory<Item>(std::move(out));
}

Batch make_batch(std::vector<Item> batch, const CpuDevice& device) {
  std::vector<TensorData> xs;
  std::vector<std::int64_t> ys;
  for (auto& item : batch) {
    xs.push_back(std::move(item.x));
    ys.push_back(item.y);
  }
  return {Tensor<AD, 2>::from_data(data::stack(xs), device),
          Tensor<AD, 1, Int>::from_data(TensorData::from(ys, Shape{static_cast<std::int64_t>(ys.size())}), device)};
}


// The train losses of a run of 3 epochs in `dir`; raise(SIGINT) in train step `raise_at` (1-based, 0: never).
std::vector<double> run(const std::filesystem::path& dir, bool resume, std::uint64_t seed, int raise_at) {
  const auto dataset = items();
  Net model(seed, /*width=*/8);
  optim::Adam<Cpu> adam;
  auto loader = data::make_loader<AD>(dataset, make_batch,
                                      {.batch_size = 16, .shuffle = true, .seed = 3, .workers = 2, .drop_last = true});
  int calls = 0;
  auto step = [&](Net& m, const Batch& b) {
    if (++calls == raise_at) std::raise(SIGINT);
    return m.train_step(b);
  };
  train::Learner learner(model, adam,
                         {.lr = 1e-2, .output_dir = dir, .resume = resume, .dashboard = train::DashboardMode::none},
                         step, step);
  std::vector<double> losses;
  learner.on_step_end([&](const train::StepRecord& s) {
    if (s.split == train::Split::train) losses.push_back(s.loss);
  });
  learner.fit(loader, 3);
  return losses;
}

TEST(LearnerWithDataLoader, CtrlCMidEpochThenResumeGivesTheUninterruptedLosses) {
  const auto root = std::filesystem::temp_directory_path() / "kiln_train_loader_resume";
  std::filesystem::remove_all(root);
  const std::vector<double> full = run(root / "full", false, 7, 0);
  ASSERT_EQ(full.size(), 21u);  // 3 epochs of 7 batches
  // Step 11 is epoch 2's fourth: its batches come from the loader's epoch-2 shuffle.
  const std::vector<double> first = run(root / "stopped", false, 7, 11);
  ASSERT_EQ(first.size(), 11u);
  std::vector<double> both = first;
  const std::vector<double> rest = run(root / "stopped", true, 999, 0);
  both.insert(both.end(), rest.begin(), rest.end());
  EXPECT_EQ(both, full);  // bitwise
  std::filesystem::remove_all(root);
}

}  // namespace
