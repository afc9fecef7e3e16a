// The Learner on Autodiff<Cpu>: a small classifier (Linear, ReLU, Dropout, Linear in f64,
// Adam, a StepLR schedule) trained on synthetic data. A run stopped after 2 of 4 epochs,
// or by Ctrl-C in the middle of a train or a valid phase, and resumed from its checkpoint
// (into a model and an optimizer built from another seed) gives bitwise the losses of the
// uninterrupted run; early stopping stops at the expected epoch; the best model is the
// best epoch's; logs, plain dashboard lines and the epoch table, the step-level API;
// evaluate(), the best checkpoints kept beside the newest, ReduceLROnPlateau on a valid
// metric (over a resume too), and regression metrics from a TrainOutput<AD, 2, 2, Float>.
#include <kiln/kiln.hpp>
#include <kiln/nn.hpp>
#include <kiln/optim/rules.hpp>
#include <kiln/store/safetensors.hpp>
#include <kiln/train.hpp>

#include <gtest/gtest.h>

#include "classifier.hpp"

#include <csignal>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <utility>

namespace {

using namespace kiln;
namespace fs = std::filesystem;
using AD = Autodiff<Cpu>;
using train::Split;

using train::test::Batch;
using train::test::Net;

// Three classes from four features; 8 train batches and 2 valid batches of 16.
struct Data {
  std::vector<Batch> train, valid;
};
const Data& data() {
  static const Data d = [] {
    manual_seed(2024);
    const auto x = Tensor<AD, 2>::random({160, 4}, Distribution::normal(0, 1), {}, DType::f64);
    const std::vector<double> v = x.to_vec<double>();
    std::vector<std::int64_t> labels;
    for (std::size_t i = 0; i < 160; ++i)
      labels.push_back((v[i * 4] + 0.5 * v[i * 4 + 1] > 0 ? 1 : 0) + (v[i * 4 + 2] > 0.8 ? 1 : 0));
    const auto y = Tensor<AD, 1, Int>::from_data(TensorData::from(labels, Shape{160}));
    Data out;
    for (std::int64_t b = 0; b < 10; ++b)
      (b < 8 ? out.train : out.valid).push_back({x.narrow(0, b * 16, 16), y.narrow(0, b * 16, 16)});
    return out;
  }();
  return d;
}

// Reports values chosen per epoch, in validation: drives early stopping and the best model.
class Scripted final : public train::Metric {
 public:
  explicit Scripted(std::vector<double> values) : values_(std::move(values)) {}
  std::string name() const override { return "scripted"; }
  bool applies_to(Split split) const override { return split == Split::valid; }
  std::optional<train::MetricValue> update(const train::StepInfo& step) override {
    return train::MetricValue{values_.at(static_cast<std::size_t>(step.epoch - 1)), 1};
  }

 private:
  std::vector<double> values_;
};

struct RunOptions {
  fs::path dir;
  std::int64_t epochs = 4;
  bool resume = false;
  std::uint64_t seed = 7;
  int raise_at_train_step = 0;  // raise(SIGINT) in the n-th train step (1-based), 0: never
  int raise_at_valid_step = 0;
  std::vector<double> scripted;
  std::optional<train::EarlyStopping> early_stopping;
  std::optional<train::BestModel> best_model;
  bool validate = true;
  std::ostream* console = nullptr;
  std::int64_t keep_checkpoints = 0;
  std::optional<train::KeepBestCheckpoints> keep_best;
  bool epoch_summary = true;
};

struct RunResult {
  std::vector<double> losses;  // of the train steps this run took
  train::FitResult result;
  std::vector<train::EpochRecord> history;
};

RunResult run(const RunOptions& o) {
  const Data& d = data();  // first: building it reseeds the random stream
  Net model(o.seed);
  optim::Adam<Cpu> adam({.weight_decay = 0.01});
  train::LearnerOptions options;
  options.scheduler = optim::StepLR(0.05, 5, 0.5);
  options.output_dir = o.dir;
  options.resume = o.resume;
  options.keep_checkpoints = o.keep_checkpoints;
  options.keep_best_checkpoints = o.keep_best;
  options.epoch_summary = o.epoch_summary;
  options.early_stopping = o.early_stopping;
  options.best_model = o.best_model;
  options.dashboard = o.console != nullptr ? train::DashboardMode::plain : train::DashboardMode::none;
  options.console = o.console;
  options.log_every = 3;
  int train_calls = 0, valid_calls = 0;
  auto train_step = [&](Net& m, const Batch& b) {
    if (++train_calls == o.raise_at_train_step) std::raise(SIGINT);
    return m.train_step(b);
  };
  auto valid_step = [&](Net& m, const Batch& b) {
    if (++valid_calls == o.raise_at_valid_step) std::raise(SIGINT);
    return m.train_step(b);
  };
  train::Learner learner(model, adam, options, train_step, valid_step);
  if (!o.scripted.empty()) learner.add_metric(std::make_unique<Scripted>(o.scripted));
  RunResult r;
  learner.on_step_end([&](const train::StepRecord& s) {
    if (s.split == Split::train) r.losses.push_back(s.loss);
  });
  r.result = o.validate ? learner.fit(d.train, d.valid, o.epochs) : learner.fit(d.train, o.epochs);
  r.history = learner.history();
  return r;
}

fs::path fresh_dir(const std::string& name) {
  const fs::path dir = fs::temp_directory_path() / ("kiln_train_test_" + name);
  fs::remove_all(dir);
  return dir;
}

std::string read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

// A column of a CSV file, by header name, with each row's split.
std::vector<std::string> csv_column(const fs::path& path, const std::string& name) {
  std::istringstream in(read_file(path));
  std::string line;
  std::getline(in, line);
  auto cells = [](const std::string& l) {
    std::vector<std::string> out;
    std::stringstream s(l);
    for (std::string c; std::getline(s, c, ',');) out.push_back(c);
    if (!l.empty() && l.back() == ',') out.emplace_back();
    return out;
  };
  const auto header = cells(line);
  const auto at = std::find(header.begin(), header.end(), name) - header.begin();
  std::vector<std::string> column;
  while (std::getline(in, line)) column.push_back(cells(line)[0] + " " + cells(line).at(static_cast<std::size_t>(at)));
  return column;
}

void expect_same_history(const std::vector<train::EpochRecord>& a, const std::vector<train::EpochRecord>& b) {
  ASSERT_EQ(a.size(), b.size());
  for (std::size_t e = 0; e < a.size(); ++e) {
    EXPECT_EQ(a[e].epoch, b[e].epoch);
    EXPECT_EQ(a[e].global_step, b[e].global_step);
    for (const char* metric : {"loss", "accuracy", "lr"}) {
      EXPECT_EQ(a[e].train.get(metric), b[e].train.get(metric)) << "train " << metric << " of epoch " << e + 1;
      EXPECT_EQ(a[e].valid.get(metric), b[e].valid.get(metric)) << "valid " << metric << " of epoch " << e + 1;
    }
  }
}

std::vector<double> concat(std::vector<double> a, const std::vector<double>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

// The uninterrupted 4-epoch run, which the resumed runs must reproduce.
const RunResult& uninterrupted() {
  static const RunResult r = run({.dir = fresh_dir("full")});
  return r;
}

TEST(Learner, UninterruptedRunTrainsAndWritesItsFiles) {
  const RunResult& r = uninterrupted();
  const fs::path dir = fs::temp_directory_path() / "kiln_train_test_full";
  ASSERT_EQ(r.losses.size(), 32u);
  EXPECT_EQ(r.result.reason, train::StopReason::completed);
  EXPECT_EQ(r.result.epochs, 4);
  EXPECT_EQ(r.result.global_step, 32);
  EXPECT_LT(r.history.back().train.get("loss").value(), r.history.front().train.get("loss").value());
  // The schedule: StepLR(0.05, 5, 0.5) by train step; the epoch shows its last step's rate.
  EXPECT_DOUBLE_EQ(r.history[0].train.get("lr").value(), 0.05 * 0.5);   // step 7
  EXPECT_DOUBLE_EQ(r.history[3].train.get("lr").value(), 0.05 * std::pow(0.5, 6));  // step 31
  EXPECT_FALSE(r.history[0].valid.get("lr").has_value());
  EXPECT_EQ(read_file(dir / "checkpoints" / "latest"), "epoch-0004\n");
  for (const char* file : {"model.safetensors", "optimizer.safetensors", "learner.json"})
    EXPECT_TRUE(fs::exists(dir / "checkpoints" / "epoch-0001" / file)) << file;
  const std::string steps = read_file(dir / "steps.csv");
  EXPECT_EQ(steps.substr(0, steps.find('\n')),
            "split,epoch,step,global_step,loss,accuracy,lr,items_per_s,epoch_time_s,cpu_percent,memory_mib");
  EXPECT_EQ(csv_column(dir / "steps.csv", "loss").size(), 4u * (8 + 2));
  EXPECT_EQ(csv_column(dir / "epochs.csv", "loss").size(), 4u * 2);
  const std::string jsonl = read_file(dir / "epochs.jsonl");
  EXPECT_EQ(std::count(jsonl.begin(), jsonl.end(), '\n'), 8);
  EXPECT_NE(jsonl.find(fmt::format("{{\"epoch\": 4, \"split\": \"valid\", \"global_step\": 32, \"loss\": {}",
                                   r.history[3].valid.get("loss").value())),
            std::string::npos)
      << jsonl;
  EXPECT_NE(read_file(dir / "learning_curves.svg").find("data-metric=\"accuracy\""), std::string::npos);
  // The optimizer state holds Adam's moments by parameter path.
  const auto optimizer = store::load_safetensors(dir / "checkpoints" / "epoch-0004" / "optimizer.safetensors");
  EXPECT_TRUE(optimizer.contains("hidden.weight.exp_avg"));
  EXPECT_EQ(optimizer.at("out.bias.step").to_vec<std::int64_t>(), std::vector<std::int64_t>{32});
}

TEST(Learner, ResumedAfterTwoEpochsGivesTheSameLosses) {
  const fs::path dir = fresh_dir("resume");
  const RunResult first = run({.dir = dir, .epochs = 2});
  ASSERT_EQ(first.losses.size(), 16u);
  EXPECT_EQ(first.result.epochs, 2);
  // Another seed: the weights, the optimizer state, the schedule and the random stream
  // (dropout) must all come from the checkpoint.
  const RunResult second = run({.dir = dir, .epochs = 4, .resume = true, .seed = 999});
  EXPECT_EQ(second.losses.size(), 16u);
  EXPECT_EQ(concat(first.losses, second.losses), uninterrupted().losses);  // bitwise
  EXPECT_EQ(second.result.epochs, 4);
  EXPECT_EQ(second.result.global_step, 32);
  expect_same_history(second.history, uninterrupted().history);
  EXPECT_EQ(csv_column(dir / "steps.csv", "loss"),
            csv_column(fs::temp_directory_path() / "kiln_train_test_full" / "steps.csv", "loss"));
  // Resuming a finished run trains no more.
  const RunResult third = run({.dir = dir, .epochs = 4, .resume = true, .seed = 5});
  EXPECT_TRUE(third.losses.empty());
  EXPECT_EQ(third.result.epochs, 4);
}

int g_test_handler_calls = 0;
void test_handler(int) { ++g_test_handler_calls; }

TEST(Learner, CtrlCInATrainStepSavesACheckpointAndResumesExactly) {
  const fs::path dir = fresh_dir("sigint_train");
  auto* const previous = std::signal(SIGINT, test_handler);
  // Step 19 is epoch 3's third train step.
  const RunResult stopped = run({.dir = dir, .raise_at_train_step = 19});
  EXPECT_EQ(g_test_handler_calls, 0);  // fit's handler caught it
  EXPECT_EQ(stopped.result.reason, train::StopReason::interrupted);
  EXPECT_EQ(stopped.losses.size(), 19u);  // the step that saw Ctrl-C finished
  EXPECT_EQ(stopped.result.epochs, 2);
  EXPECT_EQ(stopped.result.checkpoint, dir / "checkpoints" / "epoch-0003-step-000003");
  EXPECT_EQ(read_file(dir / "checkpoints" / "latest"), "epoch-0003-step-000003\n");
  std::raise(SIGINT);  // fit put the previous handler back
  EXPECT_EQ(g_test_handler_calls, 1);
  std::signal(SIGINT, previous);

  const RunResult resumed = run({.dir = dir, .resume = true, .seed = 999});
  EXPECT_EQ(resumed.losses.size(), 13u);
  EXPECT_EQ(concat(stopped.losses, resumed.losses), uninterrupted().losses);
  expect_same_history(resumed.history, uninterrupted().history);  // epoch 3's partial sums were saved
  EXPECT_EQ(csv_column(dir / "steps.csv", "loss"),
            csv_column(fs::temp_directory_path() / "kiln_train_test_full" / "steps.csv", "loss"));
}

TEST(Learner, CtrlCInValidationSavesTheTrainedEpochAndValidatesAgain) {
  const fs::path dir = fresh_dir("sigint_valid");
  // Valid step 3 is epoch 2's first.
  const RunResult stopped = run({.dir = dir, .raise_at_valid_step = 3});
  EXPECT_EQ(stopped.result.reason, train::StopReason::interrupted);
  EXPECT_EQ(stopped.losses.size(), 16u);
  EXPECT_EQ(stopped.result.epochs, 1);
  EXPECT_EQ(stopped.result.checkpoint, dir / "checkpoints" / "epoch-0002-step-000008");
  const RunResult resumed = run({.dir = dir, .resume = true, .seed = 999});
  EXPECT_EQ(resumed.losses.size(), 16u);
  EXPECT_EQ(concat(stopped.losses, resumed.losses), uninterrupted().losses);
  expect_same_history(resumed.history, uninterrupted().history);
  // The valid row logged before Ctrl-C was cut from the log; epoch 2's validation is there once.
  EXPECT_EQ(csv_column(dir / "steps.csv", "loss"),
            csv_column(fs::temp_directory_path() / "kiln_train_test_full" / "steps.csv", "loss"));
}

TEST(Learner, EarlyStoppingStopsAtTheExpectedEpoch) {
  const std::vector<double> script = {5, 4, 4.5, 3.95, 4, 4.1, 1, 1};
  // min_delta 0.1: 3.95 is no real improvement on 4, so epochs 3 and 4 are the patience.
  const RunResult a = run({.epochs = 8, .scripted = script,
                           .early_stopping = train::EarlyStopping{.metric = "scripted", .patience = 2, .min_delta = 0.1}});
  EXPECT_EQ(a.result.reason, train::StopReason::early_stopping);
  EXPECT_EQ(a.result.epochs, 4);
  EXPECT_EQ(a.losses.size(), 32u);
  // Without min_delta 3.95 improves, and epochs 5 and 6 use up the patience.
  const RunResult b = run({.epochs = 8, .scripted = script,
                           .early_stopping = train::EarlyStopping{.metric = "scripted", .patience = 2}});
  EXPECT_EQ(b.result.epochs, 6);
  // Mode max: 2, 2, 2 after 1 never improves on the first 2.
  const RunResult c = run({.epochs = 8, .scripted = {1, 2, 2, 2, 5, 6, 7, 8},
                           .early_stopping = train::EarlyStopping{.metric = "scripted", .goal = train::Goal::maximize,
                                                                  .patience = 2}});
  EXPECT_EQ(c.result.epochs, 4);
  // Patience not used up: the run completes.
  const RunResult d = run({.epochs = 3, .scripted = script,
                           .early_stopping = train::EarlyStopping{.metric = "scripted", .patience = 2}});
  EXPECT_EQ(d.result.reason, train::StopReason::completed);
  // Watching a metric the epochs lack is an error that says so.
  try {
    run({.epochs = 2, .early_stopping = train::EarlyStopping{}, .validate = false});
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("EarlyStopping watches the valid loss, which epoch 1 does not have"),
              std::string::npos)
        << e.what();
  }
}

TEST(Learner, KeepsTheBestModel) {
  const fs::path dir = fresh_dir("best");
  const RunResult r = run({.dir = dir, .epochs = 5, .scripted = {1, 3, 5, 2, 4},
                           .best_model = train::BestModel{.metric = "scripted", .goal = train::Goal::maximize}});
  EXPECT_EQ(r.result.best_epoch, 3);
  EXPECT_EQ(r.result.best_value, 5.0);
  const auto best = store::SafetensorsFile::open(dir / "best.safetensors");
  EXPECT_EQ(best.metadata().at("epoch"), "3");
  const auto third = store::load_safetensors(dir / "checkpoints" / "epoch-0003" / "model.safetensors");
  const auto fifth = store::load_safetensors(dir / "checkpoints" / "epoch-0005" / "model.safetensors");
  ASSERT_EQ(best.names(), third.names());
  for (const auto& name : best.names()) {
    const auto b = best.load(name);
    EXPECT_EQ(b.to_vec<double>(), third.at(name).to_vec<double>()) << name;
    if (name.find("weight") != std::string::npos) EXPECT_NE(b.to_vec<double>(), fifth.at(name).to_vec<double>()) << name;
  }
}

TEST(Learner, PlainDashboardPrintsLinesEveryNStepsAndPerEpoch) {
  std::ostringstream out;
  const RunResult r = run({.epochs = 2, .console = &out});
  std::vector<std::string> prefixes;
  std::vector<std::string> lines;
  std::istringstream in(out.str());
  for (std::string line; std::getline(in, line);) {
    lines.push_back(line);
    prefixes.push_back(line.substr(0, line.find(" | ")));
  }
  const std::vector<std::string> expected = {
      "[train] epoch 1/2 step 3/8", "[train] epoch 1/2 step 6/8", "[train] epoch 1/2 step 8/8",
      "[valid] epoch 1/2 step 2/2", prefixes.at(4),
      "[train] epoch 2/2 step 3/8", "[train] epoch 2/2 step 6/8", "[train] epoch 2/2 step 8/8",
      "[valid] epoch 2/2 step 2/2", prefixes.at(9),
      "[done] completed after 2 epochs (16 train steps)"};  // "1 epoch" for one
  ASSERT_EQ(prefixes.size(), expected.size() + 4) << out.str();  // and the epoch table
  EXPECT_EQ(std::vector<std::string>(prefixes.begin(), prefixes.begin() + 11), expected) << out.str();
  // The epoch table: a header, a rule, a row per epoch; a column per metric and phase.
  EXPECT_EQ(lines[11].rfind("| epoch | train loss | train accuracy | train lr |", 0), 0u) << lines[11];
  EXPECT_NE(lines[11].find("| valid loss | valid accuracy |"), std::string::npos) << lines[11];
  EXPECT_EQ(lines[11].find("valid lr"), std::string::npos) << lines[11];
  EXPECT_EQ(lines[12].rfind("|------:|-----------:|", 0), 0u) << lines[12];
  for (std::size_t e = 0; e < 2; ++e) {
    EXPECT_EQ(lines[13 + e].rfind(fmt::format("| {:>5} | {:>10} | {:>14} |", e + 1,
                                              fmt::format("{:.4f}", r.history[e].train.get("loss").value()),
                                              fmt::format("{:.2f}%", r.history[e].train.get("accuracy").value())),
                                  0),
              0u)
        << lines[13 + e];
    EXPECT_NE(lines[13 + e].find(fmt::format(" {:.4f} |", r.history[e].valid.get("loss").value())), std::string::npos);
    EXPECT_EQ(lines[13 + e].size(), lines[11].size());
  }
  // Turned off, the run's lines end with [done].
  std::ostringstream off;
  run({.epochs = 2, .console = &off, .epoch_summary = false});
  EXPECT_EQ(off.str().find("| epoch |"), std::string::npos);
  EXPECT_NE(off.str().find("[done] completed after 2 epochs"), std::string::npos);
  EXPECT_EQ(lines[4].rfind("[epoch 1/2] done in ", 0), 0u);
  EXPECT_NE(lines[4].find(fmt::format("| train: loss {:.4f} accuracy {:.2f}%", r.history[0].train.get("loss").value(),
                                      r.history[0].train.get("accuracy").value())),
            std::string::npos)
      << lines[4];
  EXPECT_NE(lines[9].find(fmt::format("| valid: loss {:.4f}", r.history[1].valid.get("loss").value())),
            std::string::npos)
      << lines[9];
}

TEST(Learner, StepLevelApiForOwnLoops) {
  Net model(3);
  optim::Sgd<Cpu> sgd;
  train::LearnerOptions options;
  options.scheduler = optim::StepLR(0.1, 1, 0.5);
  options.dashboard = train::DashboardMode::none;
  options.default_metrics = false;
  train::Learner learner(model, sgd, options);
  learner.add_metric(std::make_unique<train::LossMetric>());
  learner.add_metric(std::make_unique<train::TopKAccuracyMetric>(2));
  std::vector<std::int64_t> begun;
  int ended = 0;
  learner.on_epoch_begin([&](std::int64_t e) { begun.push_back(e); });
  learner.on_epoch_end([&](const train::EpochSummary&) { ++ended; });
  const auto& d = data();
  EXPECT_EQ(learner.begin_epoch(), 1);
  const auto a = learner.step(d.train[0]);
  const auto b = learner.step(d.train[1]);
  EXPECT_EQ(a.lr, 0.1);
  EXPECT_EQ(b.lr, 0.05);
  EXPECT_EQ(b.global_step, 2);
  EXPECT_EQ(learner.lr(), 0.025);
  const auto v = learner.validate(d.valid[0]);
  EXPECT_EQ(v.split, Split::valid);
  EXPECT_TRUE(v.values.get("top2_accuracy").has_value());
  const auto summary = learner.end_epoch();
  EXPECT_EQ(summary.record.train.get("loss"), (a.loss * 16 + b.loss * 16) / 32);  // the mean over examples
  EXPECT_EQ(summary.record.valid.get("loss"), v.loss);
  EXPECT_FALSE(summary.stop);
  learner.step(d.train[2]);  // begins epoch 2 by itself
  learner.end_epoch();
  EXPECT_EQ(begun, (std::vector<std::int64_t>{1, 2}));
  EXPECT_EQ(ended, 2);
  const auto result = learner.finish();
  EXPECT_EQ(result.epochs, 2);
  EXPECT_EQ(result.global_step, 3);
  EXPECT_FALSE(learner.should_stop());
  EXPECT_THROW(learner.add_metric(std::make_unique<train::AccuracyMetric>()), Error);  // after training started
}

// A Net without dropout (rate 0), so that a step depends on the weights and the batch only.
Net steady_net(std::uint64_t seed) {
  Net net(seed);
  net.dropout.p = 0;
  return net;
}

train::LearnerOptions quiet(train::LearnerOptions options) {
  options.dashboard = train::DashboardMode::none;
  options.checkpoints = false;
  return options;
}

std::vector<double> weights_of(const Net& net) {
  std::vector<double> out;
  nn::for_each_param(net, [&](const std::string&, const auto& p) {
    for (const double v : p->template to_vec<double>()) out.push_back(v);
  });
  return out;
}

// Two half batches accumulated step as one whole batch: the mean of their gradients is the
// whole batch's (equal halves, a mean loss), and the optimizer steps once per pair.
TEST(Learner, AccumulatedHalfBatchesStepAsTheWholeBatch) {
  const auto& d = data();
  std::vector<Batch> halves;
  for (const Batch& b : d.train)
    for (std::int64_t h : {0, 1}) halves.push_back({b.x.narrow(0, h * 8, 8), b.y.narrow(0, h * 8, 8)});
  Net whole_net = steady_net(5), half_net = steady_net(5);
  optim::Sgd<Cpu> whole_sgd({.momentum = 0.9}), half_sgd({.momentum = 0.9});
  train::Learner whole(whole_net, whole_sgd, quiet({.lr = 0.1}));
  train::Learner accumulated(half_net, half_sgd, quiet({.lr = 0.1, .accumulate_steps = 2}));
  whole.fit(d.train, 2);
  accumulated.fit(halves, 2);
  const std::vector<double> a = weights_of(whole_net), b = weights_of(half_net);
  ASSERT_EQ(a.size(), b.size());
  for (std::size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(a[i], b[i], 1e-12) << "weight " << i;
  // The state of the optimizer counts optimizer steps: 8 per epoch, not 16.
  std::map<std::string, TensorData> state;
  for (auto& [name, data] : half_sgd.state_dict(half_net)) state.emplace(name, data);
  EXPECT_EQ(state.at("hidden.weight.step").to_vec<std::int64_t>(), std::vector<std::int64_t>{16});
}

// An epoch whose batches do not fill the last group steps with the shorter group before it
// validates: 8 batches in groups of 3 are 3 optimizer steps per epoch.
TEST(Learner, AShortLastGroupIsSteppedAtTheEndOfTheEpoch) {
  Net net = steady_net(6);
  optim::Adam<Cpu> adam;
  train::Learner learner(net, adam, quiet({.lr = 0.01, .accumulate_steps = 3}));
  learner.fit(data().train, data().valid, 1);
  std::map<std::string, TensorData> state;
  for (auto& [name, data] : adam.state_dict(net)) state.emplace(name, data);
  EXPECT_EQ(state.at("out.bias.step").to_vec<std::int64_t>(), std::vector<std::int64_t>{3});
}

// Clipping in the Learner is clip_grad_norm / clip_grad_value before the optimizer's step.
TEST(Learner, ClipsGradientsBeforeEachStep) {
  const auto& d = data();
  for (const bool by_norm : {true, false}) {
    SCOPED_TRACE(by_norm ? "norm" : "value");
    Net clipped_net = steady_net(9), manual_net = steady_net(9);
    optim::Sgd<Cpu> clipped_sgd, manual_sgd;
    train::LearnerOptions options = quiet({.lr = 0.5});
    if (by_norm) options.clip_grad_norm = 0.05;
    else options.clip_grad_value = 0.01;
    train::Learner learner(clipped_net, clipped_sgd, options);
    for (int i = 0; i < 3; ++i) learner.step(d.train[static_cast<std::size_t>(i)]);
    for (int i = 0; i < 3; ++i) {
      auto grads = manual_net.train_step(d.train[static_cast<std::size_t>(i)]).loss.backward();
      auto params = optim::GradientsParams<Cpu>::from(manual_net, grads);
      if (by_norm) EXPECT_GT(optim::clip_grad_norm(params, 0.05), 0.05);  // the clip bites
      else optim::clip_grad_value(params, 0.01);
      manual_sgd.step(0.5, manual_net, params);
    }
    const std::vector<double> a = weights_of(clipped_net), b = weights_of(manual_net);
    for (std::size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(a[i], b[i], 1e-14) << "weight " << i;
  }
  Net net(1);
  optim::Sgd<Cpu> sgd;
  EXPECT_THROW(train::Learner(net, sgd, quiet({.accumulate_steps = 0})), Error);
  train::LearnerOptions bad = quiet({});
  bad.clip_grad_norm = -1.0;
  try {
    train::Learner learner(net, sgd, bad);
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("Learner: clip_grad_norm must be finite and > 0, got -1"), std::string::npos);
  }
}

// keep_checkpoints 1 with the 2 best epochs by a valid metric: the newest and the best stay.
TEST(Learner, KeepsTheBestCheckpointsBesideTheNewest) {
  const fs::path dir = fresh_dir("keep_best");
  run({.dir = dir, .epochs = 5, .scripted = {1, 4, 5, 2, 3}, .keep_checkpoints = 1,
       .keep_best = train::KeepBestCheckpoints{.metric = "scripted", .goal = train::Goal::maximize, .count = 2}});
  std::vector<std::string> kept;
  for (const auto& entry : fs::directory_iterator(dir / "checkpoints"))
    if (entry.is_directory()) kept.push_back(entry.path().filename().string());
  std::sort(kept.begin(), kept.end());
  EXPECT_EQ(kept, (std::vector<std::string>{"epoch-0002", "epoch-0003", "epoch-0005"}));
  // Minimizing instead: epochs 1 and 4 are the best.
  const fs::path low = fresh_dir("keep_best_min");
  run({.dir = low, .epochs = 5, .scripted = {1, 4, 5, 2, 3}, .keep_checkpoints = 1,
       .keep_best = train::KeepBestCheckpoints{.metric = "scripted", .count = 2}});
  for (const char* name : {"epoch-0001", "epoch-0004", "epoch-0005"}) EXPECT_TRUE(fs::exists(low / "checkpoints" / name)) << name;
  for (const char* name : {"epoch-0002", "epoch-0003"}) EXPECT_FALSE(fs::exists(low / "checkpoints" / name)) << name;
  EXPECT_KILN_ERROR(run({.epochs = 1, .keep_best = train::KeepBestCheckpoints{.count = 0}}),
                    "KeepBestCheckpoints: count must be >= 1, got 0");
  EXPECT_KILN_ERROR(run({.dir = fresh_dir("keep_best_missing"), .epochs = 1,
                         .keep_best = train::KeepBestCheckpoints{.metric = "nothing"}}),
                    "KeepBestCheckpoints watches the valid nothing, which epoch 1 does not have");
}

// ReduceLROnPlateau on a valid metric: the rate of each epoch is the plateau's after the
// epochs before it, and a resumed run continues the plateau's state from the checkpoint.
std::vector<train::EpochRecord> plateau_run(const fs::path& dir, std::int64_t epochs, bool resume) {
  const Data& d = data();
  Net model = steady_net(5);
  optim::Sgd<Cpu> sgd;
  train::LearnerOptions options;
  options.lr = 0.1;
  options.plateau = train::LrPlateau{.metric = "scripted", .options = {.factor = 0.5, .patience = 1}};
  options.output_dir = dir;
  options.resume = resume;
  options.dashboard = train::DashboardMode::none;
  train::Learner learner(model, sgd, options);
  learner.add_metric(std::make_unique<Scripted>(std::vector<double>{5, 4, 4, 4, 4, 4, 3, 3}));
  learner.fit(d.train, d.valid, epochs);
  return learner.history();
}

TEST(Learner, PlateauCutsTheRateWhenTheValidMetricStalls) {
  const std::vector<double> script = {5, 4, 4, 4, 4, 4, 3, 3};
  optim::ReduceLROnPlateau plateau(0.1, {.factor = 0.5, .patience = 1});
  std::vector<double> expected;  // each epoch's rate
  for (const double v : script) {
    expected.push_back(plateau.current());
    plateau.step(v);
  }
  EXPECT_EQ(expected, (std::vector<double>{0.1, 0.1, 0.1, 0.1, 0.05, 0.05, 0.025, 0.025}));
  const auto full = plateau_run(fresh_dir("plateau_full"), 8, false);
  ASSERT_EQ(full.size(), 8u);
  for (std::size_t e = 0; e < 8; ++e) EXPECT_EQ(full[e].train.get("lr"), expected[e]) << "epoch " << e + 1;
  const fs::path dir = fresh_dir("plateau_resume");
  plateau_run(dir, 5, false);
  const auto resumed = plateau_run(dir, 8, true);
  ASSERT_EQ(resumed.size(), 8u);
  for (std::size_t e = 0; e < 8; ++e) {
    EXPECT_EQ(resumed[e].train.get("lr"), expected[e]) << "epoch " << e + 1;
    EXPECT_EQ(resumed[e].train.get("loss"), full[e].train.get("loss")) << "epoch " << e + 1;
  }
  Net model(1);
  optim::Sgd<Cpu> sgd;
  train::LearnerOptions both;
  both.scheduler = optim::StepLR(0.1, 1, 0.5);
  both.plateau = train::LrPlateau{};
  EXPECT_KILN_ERROR(train::Learner(model, sgd, both), "scheduler and plateau both set the rate");
}

// evaluate: the validation phase alone; the values an epoch's validation records, nothing
// trained, counted or written.
TEST(Learner, EvaluateRunsTheValidationPhaseOnly) {
  const Data& d = data();
  Net model = steady_net(4);
  optim::Sgd<Cpu> sgd;
  train::LearnerOptions options;
  options.lr = 0.05;
  options.output_dir = fresh_dir("evaluate");
  options.dashboard = train::DashboardMode::none;
  train::Learner learner(model, sgd, options);
  const std::vector<double> before = weights_of(model);
  const train::MetricValues values = learner.evaluate(d.valid);
  EXPECT_EQ(weights_of(model), before);
  EXPECT_TRUE(learner.history().empty());
  EXPECT_FALSE(fs::exists(options.output_dir / "checkpoints"));
  EXPECT_FALSE(fs::exists(options.output_dir / "steps.csv"));
  double loss = 0, correct = 0;
  for (const Batch& b : d.valid) {
    const auto out = model.train_step(b);
    loss += out.loss.item() * 16;
    correct += static_cast<double>(train::count_top_k_correct(out.output->into_data(), b.y.into_data(), 1));
  }
  EXPECT_NEAR(values.get("loss").value(), loss / 32, 1e-14);
  EXPECT_EQ(values.get("accuracy").value(), 100 * correct / 32);
  EXPECT_FALSE(values.get("lr").has_value());
  // After an epoch of training: what that epoch's validation recorded.
  learner.fit(d.train, d.valid, 1);
  const train::MetricValues after = learner.evaluate(d.valid);
  EXPECT_EQ(after.get("loss"), learner.history().at(0).valid.get("loss"));
  EXPECT_EQ(after.get("accuracy"), learner.history().at(0).valid.get("accuracy"));
  EXPECT_EQ(learner.history().size(), 1u);
  const std::string epochs_csv = read_file(options.output_dir / "epochs.csv");
  EXPECT_EQ(std::count(epochs_csv.begin(), epochs_csv.end(), '\n'), 3);  // header, train, valid
  learner.begin_epoch();
  EXPECT_KILN_ERROR(learner.evaluate(d.valid), "Learner::evaluate: epoch 2 is in progress");
}

// The task metrics in the Learner: a regression step returns [N, D] outputs and targets.
struct Regressor {
  nn::Linear<AD> linear;
  KILN_MODULE(linear)
  Regressor() {
    manual_seed(8);
    linear = nn::Linear<AD>(3, 2);
    nn::for_each_param(*this, [](const std::string&, auto& p) { p.replace(p.val().cast(DType::f64)); });
  }
  train::TrainOutput<AD, 2, 2, Float> train_step(const std::pair<Tensor<AD, 2>, Tensor<AD, 2>>& b) const {
    const auto y = linear.forward(b.first);
    return {nn::mse_loss(y, b.second).reshape({1}), y, b.second};
  }
};

TEST(Learner, RegressionMetricsOverAnEvaluation) {
  manual_seed(31);
  std::vector<std::pair<Tensor<AD, 2>, Tensor<AD, 2>>> batches;
  for (int i = 0; i < 3; ++i)
    batches.emplace_back(Tensor<AD, 2>::random({10, 3}, Distribution::normal(0, 1), {}, DType::f64),
                         Tensor<AD, 2>::random({10, 2}, Distribution::normal(0, 1), {}, DType::f64));
  Regressor model;
  optim::Sgd<Cpu> sgd;
  train::LearnerOptions options;
  options.default_metrics = false;
  options.dashboard = train::DashboardMode::none;
  train::Learner learner(model, sgd, options);
  learner.add_metric(train::r2_metric());
  learner.add_metric(train::rmse_metric());
  const train::MetricValues values = learner.evaluate(batches);
  train::RegressionSums sums;
  for (const auto& b : batches) sums.add(model.linear.forward(b.first).into_data(), b.second.into_data());
  EXPECT_NEAR(values.get("r2").value(), sums.r2(), 1e-12);
  EXPECT_NEAR(values.get("rmse").value(), sums.rmse(), 1e-12);
}

// ---- docs/train.md's example, extracted from the page by tests/docs (its #include lines
// are no-ops here: this file includes those headers first).
namespace docs_example {
#include "train_1.cpp"
}  // namespace docs_example

TEST(Learner, DocsExample) {
  std::vector<docs_example::Batch> train_batches, valid_batches;
  for (const Batch& b : data().train) train_batches.push_back({b.x.cast(DType::f32), b.y});
  for (const Batch& b : data().valid) valid_batches.push_back({b.x.cast(DType::f32), b.y});
  const fs::path dir = fresh_dir("docs");
  std::ostringstream quiet;
  std::streambuf* const cout = std::cout.rdbuf(quiet.rdbuf());  // the plain dashboard goes to std::cout
  const train::FitResult first = docs_example::train_classifier(train_batches, valid_batches, dir, 3);
  const train::FitResult again = docs_example::train_classifier(train_batches, valid_batches, dir, 3);
  std::cout.rdbuf(cout);
  EXPECT_EQ(first.reason, train::StopReason::completed);
  EXPECT_EQ(first.epochs, 3);
  EXPECT_GE(first.best_epoch, 1);
  EXPECT_TRUE(fs::exists(dir / "best.safetensors"));
  EXPECT_NE(read_file(dir / "steps.csv").find(",top2_accuracy\n"), std::string::npos);
  EXPECT_NE(quiet.str().find("epoch 3/3"), std::string::npos);  // a plain line, or a terminal frame
  EXPECT_EQ(again.global_step, first.global_step);  // resumed after the last epoch: nothing left to do
  EXPECT_EQ(again.best_epoch, first.best_epoch);
}

}  // namespace
