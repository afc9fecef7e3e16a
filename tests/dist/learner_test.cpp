// The Learner as one rank of a data-parallel run (Learner::distribute over a DataParallel):
// W ranks with batch B train and log exactly as one process with batch W * B (weights and
// every epoch metric, precision from the summed confusion matrices included); rank 0 alone
// draws and writes files; every rank resumes from rank 0's checkpoint, and ranks that found
// different checkpoints are told so. Run by ctest on 1, 2 and 3 ranks.
#include "expect_error.hpp"

#include <kiln/cpu/instances.hpp>
#include <kiln/dist.hpp>
#include <kiln/nn.hpp>
#include <kiln/optim.hpp>
#include <kiln/train.hpp>

#include <gtest/gtest.h>

#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <sstream>
#include <string>
#include <vector>

namespace {

using namespace kiln;
using B = Autodiff<Cpu>;
namespace fs = std::filesystem;

struct Batch {
  Tensor<B, 2> x;
  Tensor<B, 1, Int> y;
};

struct Net {
  nn::Linear<B> hidden, out;
  KILN_MODULE(hidden, out)
  Net() : hidden(4, 12), out(12, 3) {}
  train::TrainOutput<B> train_step(const Batch& b) const {
    const auto logits = out.forward(hidden.forward(b.x).tanh());
    return {nn::cross_entropy(logits, b.y), logits, b.y};
  }
};

constexpr std::int64_t kBatch = 4;  // per rank and step
constexpr std::int64_t kSteps = 3;  // per epoch

// Rows [begin, end) of a deterministic classification set: x [n, 4], classes 0..2.
Batch rows(std::int64_t begin, std::int64_t end) {
  std::vector<double> x;
  std::vector<std::int64_t> y;
  for (std::int64_t row = begin; row < end; ++row) {
    for (int j = 0; j < 4; ++j) x.push_back(std::sin(0.37 * static_cast<double>(row) + 1.1 * j));
    y.push_back((row * 7 + row / 3) % 3);
  }
  const std::int64_t n = end - begin;
  return {Tensor<B, 2>::from_data(TensorData::from(x, Shape{n, 4}).convert(DType::f32)),
          Tensor<B, 1, Int>::from_data(TensorData::from(y, Shape{n}))};
}

// Step s of this rank's loader: rows s * W * kBatch + rank * kBatch ... (its shard), or with
// `whole`, all W * kBatch rows of step s (the one-process reference). `offset` moves to
// another set (the validation rows).
std::vector<Batch> batches(bool whole, std::int64_t offset) {
  const std::int64_t world = dist::world_size(), me = dist::rank();
  std::vector<Batch> out;
  for (std::int64_t s = 0; s < kSteps; ++s) {
    const std::int64_t first = offset + s * world * kBatch;
    out.push_back(whole ? rows(first, first + world * kBatch) : rows(first + me * kBatch, first + (me + 1) * kBatch));
  }
  return out;
}

std::vector<std::vector<double>> weights_of(const Net& model) {
  std::vector<std::vector<double>> out;
  nn::for_each_param(model, [&](const std::string&, const auto& p) { out.push_back(p->template to_vec<double>()); });
  return out;
}

// Gives `to` the weights of `from`.
void copy_weights(const Net& from, Net& to) {
  const auto a = nn::detail::state_of(from), b = nn::detail::state_of(to);
  for (std::size_t i = 0; i < a.slots.size(); ++i) b.slots[i].assign(a.slots[i].into_data());
}

train::LearnerOptions quiet() {
  train::LearnerOptions options;
  options.lr = 0.05;
  options.dashboard = train::DashboardMode::none;
  return options;
}

// A directory every rank names alike: rank 0's process id, broadcast.
fs::path shared_dir(const std::string& name) {
  TensorData pid = TensorData::from(std::vector<std::int64_t>{static_cast<std::int64_t>(::getpid())}, Shape{1});
  dist::broadcast(pid, 0);
  return fs::temp_directory_path() / ("kiln_dist_learner_" + std::to_string(pid.to_vec<std::int64_t>()[0]) + "_" + name);
}

// Each step's gradients averaged during backward (accumulate_steps 1), or two steps
// accumulated locally and averaged once before the optimizer step (no_sync).
class DistributedLearnerSteps : public ::testing::TestWithParam<std::int64_t> {};
INSTANTIATE_TEST_SUITE_P(DistributedLearner, DistributedLearnerSteps, ::testing::Values(1, 2),
                         [](const auto& info) { return "accumulate_" + std::to_string(info.param); });

TEST_P(DistributedLearnerSteps, TrainsAndLogsAsOneProcessWithTheWholeBatch) {
  train::LearnerOptions options = quiet();
  options.accumulate_steps = GetParam();
  manual_seed(30 + static_cast<std::uint64_t>(dist::rank()));  // DataParallel starts every rank from rank 0's
  Net model;
  dist::DataParallel parallel(model);
  optim::Adam<Cpu> adam;
  train::Learner learner(model, adam, options);
  learner.add_metric(train::precision_metric(train::Average::macro));
  learner.distribute(parallel);
  learner.fit(batches(false, 0), batches(false, 1000), 2);

  // The reference: one process, the whole batches, from rank 0's initial weights.
  manual_seed(30);
  const Net start;
  Net reference;
  copy_weights(start, reference);
  optim::Adam<Cpu> reference_adam;
  train::Learner reference_learner(reference, reference_adam, options);
  reference_learner.add_metric(train::precision_metric(train::Average::macro));
  reference_learner.fit(batches(true, 0), batches(true, 1000), 2);

  const auto trained = weights_of(model), expected = weights_of(reference);
  double largest = 0;
  for (std::size_t i = 0; i < trained.size(); ++i)
    for (std::size_t j = 0; j < trained[i].size(); ++j) largest = std::max(largest, std::abs(trained[i][j] - expected[i][j]));
  EXPECT_LT(largest, 1e-6);
  EXPECT_NE(trained, weights_of(start));

  // Every rank logs the run's values: the loss and accuracy over all ranks' examples, the
  // precision of all their predictions, the throughput of all ranks together.
  ASSERT_EQ(learner.history().size(), 2u);
  for (std::size_t e = 0; e < 2; ++e) {
    const train::EpochRecord &got = learner.history()[e], &want = reference_learner.history()[e];
    for (const char* metric : {"loss", "accuracy"}) {
      EXPECT_NEAR(*got.train.get(metric), *want.train.get(metric), 1e-5) << "train " << metric << " epoch " << e + 1;
      EXPECT_NEAR(*got.valid.get(metric), *want.valid.get(metric), 1e-5) << "valid " << metric << " epoch " << e + 1;
    }
    EXPECT_NEAR(*got.valid.get("precision_macro"), *want.valid.get("precision_macro"), 1e-12) << "epoch " << e + 1;
    // The same values on every rank.
    std::vector<double> mine{*got.train.get("loss"), *got.valid.get("accuracy"), *got.train.get("items_per_s")};
    std::vector<double> rank0 = mine;
    TensorData shared = TensorData::from(rank0, Shape{3});
    dist::broadcast(shared, 0);
    EXPECT_EQ(shared.to_vec<double>(), mine) << "epoch " << e + 1;
  }
}

TEST(DistributedLearner, OnlyRankZeroDrawsAndWritesFiles) {
  // A directory per rank, to see which rank writes what.
  const fs::path dir = shared_dir("rank" + std::to_string(dist::rank()));
  fs::remove_all(dir);
  Net model;
  dist::DataParallel parallel(model);
  optim::Adam<Cpu> adam;
  std::ostringstream console;
  train::LearnerOptions options = quiet();
  options.output_dir = dir;
  options.dashboard = train::DashboardMode::plain;
  options.console = &console;
  options.best_model = train::BestModel{};
  train::Learner learner(model, adam, options);
  learner.distribute(parallel);
  const train::FitResult result = learner.fit(batches(false, 0), batches(false, 1000), 1);
  if (dist::rank() == 0) {
    EXPECT_TRUE(fs::exists(dir / "epochs.csv"));
    EXPECT_TRUE(fs::exists(dir / "best.safetensors"));
    EXPECT_FALSE(result.checkpoint.empty());
    EXPECT_NE(console.str().find("epoch 1"), std::string::npos) << console.str();
  } else {
    EXPECT_FALSE(fs::exists(dir)) << dir;
    EXPECT_TRUE(result.checkpoint.empty());
    EXPECT_EQ(console.str(), "");
  }
  dist::barrier();
  fs::remove_all(dir);
}

// One rank of a run that writes to `dir`: its model (from the current random stream), rank
// 0's weights everywhere, an optimizer and a distributed Learner.
struct Rank {
  Net model;
  dist::DataParallel<Net> parallel{model};
  optim::Adam<Cpu> adam;
  train::Learner<Net, optim::Adam<Cpu>> learner;
  explicit Rank(const fs::path& dir, bool resume = false) : learner(model, adam, options(dir, resume)) {
    learner.distribute(parallel);
  }
  static train::LearnerOptions options(const fs::path& dir, bool resume) {
    train::LearnerOptions o = quiet();
    o.output_dir = dir;
    o.resume = resume;
    return o;
  }
};

TEST(DistributedLearner, EveryRankResumesFromRankZerosCheckpoint) {
  const fs::path dir = shared_dir("resume");
  if (dist::rank() == 0) fs::remove_all(dir);
  dist::barrier();
  std::vector<std::vector<double>> after_one;
  {
    Rank first(dir);
    first.learner.fit(batches(false, 0), 1);
    after_one = weights_of(first.model);
  }
  dist::barrier();  // rank 0's checkpoint is written
  manual_seed(40 + static_cast<std::uint64_t>(dist::rank()));  // other weights on every rank
  Rank second(dir, true);
  ASSERT_TRUE(second.learner.resume());
  EXPECT_EQ(weights_of(second.model), after_one);  // the checkpoint replaced them
  EXPECT_EQ(second.learner.history().size(), 1u);
  dist::barrier();
  if (dist::rank() == 0) fs::remove_all(dir);
}

TEST(DistributedLearner, RanksThatFoundDifferentCheckpointsAreToldSo) {
  if (dist::world_size() == 1) GTEST_SKIP() << "needs two ranks or more";
  // Rank 0's directory has a checkpoint; the others' do not exist (no shared file system).
  const fs::path dir = shared_dir("alone" + std::to_string(dist::rank()));
  if (dist::rank() == 0) {
    Net model;
    optim::Adam<Cpu> adam;
    train::LearnerOptions options = quiet();
    options.output_dir = dir;
    train::Learner learner(model, adam, options);
    learner.fit(batches(false, 0), 1);
  }
  Rank rank(dir);
  EXPECT_KILN_ERROR((void)rank.learner.resume(), "Learner::resume", "did not resume from the same checkpoint",
                    "shared file system");
  dist::barrier();
  fs::remove_all(dir);
}

TEST(DistributedLearner, DistributeChecksItsArguments) {
  Net model, other;
  dist::DataParallel parallel(other);
  optim::Adam<Cpu> adam;
  train::Learner learner(model, adam, quiet());
  EXPECT_KILN_ERROR(learner.distribute(parallel), "Learner::distribute", "another module");
}

}  // namespace
