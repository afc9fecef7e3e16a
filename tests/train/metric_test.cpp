// Metrics on known values (accuracy, top-k with ties, one-hot targets, the running weighted
// means, last and max), the learner state's JSON round trip (exact doubles, non-finite
// values, 64-bit seeds), damaged checkpoint files, the loss curve's bounded history, and
// Ctrl-C's guard.
#include <kiln/train/checkpoint.hpp>
#include <kiln/train/interrupt.hpp>
#include <kiln/train/metric.hpp>

#include <gtest/gtest.h>

#include <csignal>
#include <cmath>
#include <filesystem>
#include <fstream>

namespace {

using namespace kiln;
using namespace kiln::train;

TensorData scores() {
  // Row 0: class 2 highest, then 0, then 1, 3. Row 1: a tie between classes 1 and 3 at the top.
  // Row 2: class 0 highest. Row 3: class 3 highest, then 2.
  return TensorData::from(std::vector<float>{0.5f, 0.1f, 0.9f, 0.0f,   //
                                             0.2f, 0.7f, 0.1f, 0.7f,   //
                                             3.0f, 1.0f, 2.0f, -1.0f,  //
                                             0.0f, 0.1f, 0.2f, 0.3f},
                          Shape{4, 4});
}

TEST(Metrics, TopKCountsOnKnownValues) {
  const TensorData targets = TensorData::from(std::vector<std::int64_t>{2, 3, 1, 2}, Shape{4});
  // top-1: row 0 right (2); row 1's tie ranks class 1 before 3, so 3 is second; row 2 wrong; row 3 wrong.
  EXPECT_EQ(count_top_k_correct(scores(), targets, 1), 1);
  EXPECT_EQ(count_top_k_correct(scores(), targets, 2), 3);  // + row 1 (3 is second), row 3 (2 is second)
  EXPECT_EQ(count_top_k_correct(scores(), targets, 3), 4);  // row 2: 1 is third
  EXPECT_EQ(count_top_k_correct(scores(), targets, 4), 4);
  // One-hot targets mean the same classes.
  std::vector<float> one_hot(16, 0.0f);
  for (int row = 0; row < 4; ++row) one_hot[static_cast<std::size_t>(row * 4 + std::vector<int>{2, 3, 1, 2}[static_cast<std::size_t>(row)])] = 1;
  EXPECT_EQ(count_top_k_correct(scores(), TensorData::from(one_hot, Shape{4, 4}), 2), 3);
}

TEST(Metrics, AccuracyMetricsGiveTheShareInPercent) {
  const TensorData s = scores();
  const TensorData targets = TensorData::from(std::vector<std::int64_t>{2, 1, 0, 3}, Shape{4});
  StepInfo step;
  step.output = &s;
  step.targets = &targets;
  step.items = 4;
  AccuracyMetric accuracy;
  const auto a = accuracy.update(step);
  ASSERT_TRUE(a.has_value());
  EXPECT_DOUBLE_EQ(a->value, 100.0);  // every row's top class
  EXPECT_EQ(a->weight, 4);
  TopKAccuracyMetric top1(1);
  EXPECT_EQ(top1.name(), "top1_accuracy");
  EXPECT_DOUBLE_EQ(top1.update(step)->value, 100.0);
  const TensorData shifted = TensorData::from(std::vector<std::int64_t>{0, 3, 2, 0}, Shape{4});
  step.targets = &shifted;
  EXPECT_DOUBLE_EQ(accuracy.update(step)->value, 0.0);
  EXPECT_DOUBLE_EQ(TopKAccuracyMetric(2).update(step)->value, 75.0);  // rows 0, 1, 2 (class 2 second)
  EXPECT_EQ(accuracy.format(87.5), "87.50%");
  // Without outputs the metrics have nothing to say.
  step.output = nullptr;
  EXPECT_FALSE(accuracy.update(step).has_value());
  // Mismatched shapes are sentences.
  const TensorData three = TensorData::from(std::vector<std::int64_t>{0, 1, 2}, Shape{3});
  try {
    (void)count_top_k_correct(s, three, 1);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("the targets must be class indices [4]"), std::string::npos) << e.what();
  }
}

TEST(Metrics, AggregatesAreRunningMeansLastAndMax) {
  LossMetric loss;
  Aggregator total;
  // Batches of 2, 6 and 4 examples: the epoch's loss is the mean over examples.
  const std::pair<double, std::int64_t> steps[] = {{1.0, 2}, {0.5, 6}, {0.25, 4}};
  std::vector<double> running;
  for (const auto& [value, items] : steps) {
    StepInfo step;
    step.loss = value;
    step.items = items;
    total.add(*loss.update(step));
    running.push_back(total.value(Aggregate::mean));
  }
  EXPECT_DOUBLE_EQ(running[0], 1.0);
  EXPECT_DOUBLE_EQ(running[1], (2 * 1.0 + 6 * 0.5) / 8);
  EXPECT_DOUBLE_EQ(running[2], (2 * 1.0 + 6 * 0.5 + 4 * 0.25) / 12);
  EXPECT_DOUBLE_EQ(total.value(Aggregate::last), 0.25);
  EXPECT_DOUBLE_EQ(total.value(Aggregate::max), 1.0);
  EXPECT_TRUE(std::isnan(Aggregator{}.value(Aggregate::mean)));

  // Throughput weighs by time: the epoch's value is all items over all time.
  ThroughputMetric throughput;
  Aggregator speed;
  for (const auto& [items, seconds] : {std::pair{100, 1.0}, std::pair{100, 3.0}}) {
    StepInfo step;
    step.items = items;
    step.seconds = seconds;
    speed.add(*throughput.update(step));
  }
  EXPECT_DOUBLE_EQ(speed.value(Aggregate::mean), 50.0);
  LearningRateMetric lr;
  EXPECT_FALSE(lr.applies_to(Split::valid));
  EXPECT_EQ(lr.aggregate(), Aggregate::last);
}

TEST(Metrics, ProcessMetricsReadTheProcess) {
  EXPECT_GT(resident_memory_bytes(), 1u << 20);  // more than a MiB is resident in any test binary
  volatile double sink = 0;
  const double before = process_cpu_seconds();
  for (int i = 0; i < 20000000; ++i) sink = sink + std::sqrt(static_cast<double>(i));
  EXPECT_GT(process_cpu_seconds(), before);
  MemoryMetric memory;
  EXPECT_EQ(memory.aggregate(), Aggregate::max);
  EXPECT_GT(memory.update(StepInfo{})->value, 1.0);
  const auto names = [] {
    std::vector<std::string> n;
    for (const auto& m : default_metrics()) n.push_back(m->name());
    return n;
  }();
  EXPECT_EQ(names, (std::vector<std::string>{"loss", "accuracy", "lr", "items_per_s", "epoch_time_s", "cpu_percent",
                                             "memory_mib"}));
}

TEST(Checkpoint, LearnerStateRoundTripsExactly) {
  LearnerState s;
  s.epoch = 3;
  s.train_steps = 17;
  s.train_done = true;
  s.epoch_done = false;
  s.global_step = 123456789012;
  s.rng = {(1ull << 63) + 5, 987654321987ull};
  s.epoch_rng = {42, 7};
  EpochRecord r;
  r.epoch = 1;
  r.global_step = 30;
  r.train.set("loss", 0.1);
  r.train.set("accuracy", 1e-300);
  r.valid.set("loss", 2.0 / 3.0);
  s.history = {r, r};
  s.history[1].epoch = 2;
  Aggregator a;
  a.add({0.3, 2});
  s.train_partial = {{"loss", a}, {"empty", Aggregator{}}};  // NaN last, -inf max
  s.early_stopping_best = -0.0;
  s.early_stopping_bad_epochs = 2;
  s.best_epoch = 0;
  s.loss_curve.points = {{1, 0.5}, {2.5, std::numeric_limits<double>::infinity()}};
  s.loss_curve.bucket = 4;
  s.loss_curve.x_sum = 3;
  s.loss_curve.y_sum = 0.7;
  s.loss_curve.in_bucket = 1;
  s.log_sizes = {{"steps.csv", 1234}, {"steps.jsonl", 0}};

  const LearnerState t = learner_state_from_json(learner_state_to_json(s), "test");
  EXPECT_EQ(t.epoch, 3);
  EXPECT_EQ(t.train_steps, 17);
  EXPECT_TRUE(t.train_done);
  EXPECT_FALSE(t.epoch_done);
  EXPECT_EQ(t.global_step, 123456789012);
  EXPECT_EQ(t.rng.seed, (1ull << 63) + 5);
  EXPECT_EQ(t.rng.offset, 987654321987ull);
  EXPECT_EQ(t.epoch_rng.seed, 42u);
  ASSERT_EQ(t.history.size(), 2u);
  EXPECT_EQ(t.history[1].epoch, 2);
  EXPECT_EQ(t.history[0].global_step, 30);
  EXPECT_EQ(t.history[0].train.get("loss"), 0.1);
  EXPECT_EQ(t.history[0].train.get("accuracy"), 1e-300);
  EXPECT_EQ(t.history[0].valid.get("loss"), 2.0 / 3.0);
  ASSERT_EQ(t.train_partial.size(), 2u);
  EXPECT_EQ(t.train_partial[0].second.weighted_sum, a.weighted_sum);
  EXPECT_EQ(t.train_partial[0].second.count, 1);
  EXPECT_TRUE(std::isnan(t.train_partial[1].second.last));
  EXPECT_EQ(t.train_partial[1].second.max, -std::numeric_limits<double>::infinity());
  ASSERT_TRUE(t.early_stopping_best.has_value());
  EXPECT_TRUE(std::signbit(*t.early_stopping_best));
  EXPECT_EQ(t.early_stopping_bad_epochs, 2);
  EXPECT_FALSE(t.best_value.has_value());
  EXPECT_EQ(t.loss_curve.points, s.loss_curve.points);
  EXPECT_EQ(t.loss_curve.bucket, 4);
  EXPECT_EQ(t.loss_curve.y_sum, 0.7);
  EXPECT_EQ(t.log_sizes, s.log_sizes);
  EXPECT_FALSE(t.plateau.has_value());  // a run without LearnerOptions::plateau writes none
  // ReduceLROnPlateau's state, its best still infinite.
  s.plateau = optim::ReduceLROnPlateau::State{.lr = 0.025, .best = std::numeric_limits<double>::infinity(),
                                              .bad_steps = 1, .cooldown_left = 2, .steps = 7};
  const LearnerState p = learner_state_from_json(learner_state_to_json(s), "test");
  ASSERT_TRUE(p.plateau.has_value());
  EXPECT_EQ(p.plateau->lr, 0.025);
  EXPECT_EQ(p.plateau->best, std::numeric_limits<double>::infinity());
  EXPECT_EQ(p.plateau->bad_steps, 1);
  EXPECT_EQ(p.plateau->cooldown_left, 2);
  EXPECT_EQ(p.plateau->steps, 7);
  EXPECT_EQ(checkpoint_name(s), "epoch-0003-step-000017");
  s.epoch_done = true;
  EXPECT_EQ(checkpoint_name(s), "epoch-0003");
}

TEST(Checkpoint, DamagedFilesAreErrorsThatNameThem) {
  auto message = [](const std::string& text) {
    try {
      (void)learner_state_from_json(text, "run/checkpoints/epoch-0001/learner.json");
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(message("{").find("run/checkpoints/epoch-0001/learner.json"), std::string::npos);
  EXPECT_NE(message("{\"format\": \"other\"}").find("format is not \"kiln.train.learner/2\""), std::string::npos);
  std::string text = learner_state_to_json(LearnerState{});
  text.replace(text.find("\"global_step\": 0"), 16, "\"global_step\": -1");
  EXPECT_NE(message(text).find("global_step is not a non-negative integer"), std::string::npos) << message(text);

  // `latest` naming a checkpoint that is not there.
  const auto dir = std::filesystem::temp_directory_path() / "kiln_train_damaged";
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir / "checkpoints");
  EXPECT_FALSE(read_latest_checkpoint(dir).has_value());
  std::ofstream(dir / "checkpoints" / "latest") << "epoch-0004\n";
  try {
    (void)read_latest_checkpoint(dir);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("names " + (dir / "checkpoints" / "epoch-0004").string() + ", which does not exist"),
              std::string::npos)
        << e.what();
  }
  std::filesystem::remove_all(dir);
}

TEST(Checkpoint, LossCurveStaysBounded) {
  LossCurve curve(8);
  for (int step = 1; step <= 100; ++step) curve.add(step, 1000.0 / step);
  const auto points = curve.points();
  EXPECT_LE(points.size(), 9u);  // 8, and the bucket in progress
  EXPECT_EQ(curve.state().bucket, 16);
  // Points are means over their steps: the first stands for steps 1..16.
  double mean_x = 0;
  for (int step = 1; step <= 16; ++step) mean_x += step / 16.0;
  EXPECT_DOUBLE_EQ(points.front().first, mean_x);
  for (std::size_t i = 1; i < points.size(); ++i) EXPECT_LT(points[i - 1].first, points[i].first);
  LossCurve copy(8);
  copy.restore(curve.state());
  EXPECT_EQ(copy.points(), points);
}

int g_previous_calls = 0;
void count_sigint(int) { ++g_previous_calls; }

TEST(Interrupt, GuardCatchesSigintAndRestoresThePreviousHandler) {
  auto* const old = std::signal(SIGINT, count_sigint);
  {
    InterruptGuard guard;
    EXPECT_TRUE(InterruptGuard::active());
    EXPECT_FALSE(InterruptGuard::requested());
    std::raise(SIGINT);
    EXPECT_TRUE(InterruptGuard::requested());
    EXPECT_EQ(g_previous_calls, 0);
  }
  EXPECT_FALSE(InterruptGuard::active());
  EXPECT_FALSE(InterruptGuard::requested());  // the request ended with its guard
  std::raise(SIGINT);
  EXPECT_EQ(g_previous_calls, 1);
  std::signal(SIGINT, old);
}

}  // namespace
