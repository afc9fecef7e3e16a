// Hostile checkpoints: counts near INT64_MAX in learner.json and in the
// optimizer's state, `latest` holding 30 or 50,000 digits or a FIFO, stray directories
// with 25-digit names, a checkpoint whose files come from two runs, and the temporary
// files that killed writes leave. Each crafted file is a kiln::Error naming the file and
// the value at fault, never another exception, a crash or a hang; resume stays bitwise.
#include <kiln/kiln.hpp>
#include <kiln/nn.hpp>
#include <kiln/optim/rules.hpp>
#include <kiln/store/safetensors.hpp>
#include <kiln/train.hpp>
#include <kiln/train/checkpoint.hpp>

#include <gtest/gtest.h>

#include "budget.hpp"
#include "classifier.hpp"
#include "expect_error.hpp"

#include <sys/stat.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <limits>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

using namespace kiln;
namespace fs = std::filesystem;
using train::test::Batch;
using train::test::Net;
using AD = Autodiff<Cpu>;

fs::path fresh_dir(const std::string& name) {
  const fs::path dir = fs::temp_directory_path() / ("kiln_hostile_checkpoint_" + name);
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

std::string read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

void write_file(const fs::path& path, const std::string& text) { std::ofstream(path, std::ios::binary) << text; }

// `"key": <number>` (its first occurrence) with the number replaced by `value`.
std::string with_number(std::string text, const std::string& key, const std::string& value) {
  const std::string field = "\"" + key + "\": ";
  const std::size_t at = text.find(field);
  EXPECT_NE(at, std::string::npos) << key;
  const std::size_t begin = at + field.size();
  const std::size_t end = text.find_first_not_of("0123456789", begin);
  return text.replace(begin, end - begin, value);
}

// Three train batches of 8 (three classes from four features).
const std::vector<Batch>& batches() {
  static const std::vector<Batch> b = [] {
    manual_seed(77);
    const auto x = Tensor<AD, 2>::random({24, 4}, Distribution::normal(0, 1), {}, DType::f64);
    const std::vector<double> v = x.to_vec<double>();
    std::vector<std::int64_t> labels;
    for (std::size_t i = 0; i < 24; ++i) labels.push_back((v[i * 4] > 0 ? 1 : 0) + (v[i * 4 + 2] > 0.8 ? 1 : 0));
    const auto y = Tensor<AD, 1, Int>::from_data(TensorData::from(labels, Shape{24}));
    std::vector<Batch> out;
    for (std::int64_t i = 0; i < 3; ++i) out.push_back({x.narrow(0, i * 8, 8), y.narrow(0, i * 8, 8)});
    return out;
  }();
  return b;
}

struct RunOptions {
  std::int64_t epochs = 1;
  bool resume = false;
  std::uint64_t seed = 3;
  std::int64_t keep = 0;
  int throw_at_step = 0;  // a train step (1-based) that throws, 0: none
};

struct RunResult {
  std::vector<double> losses;
  train::FitResult result;
};

// A run of the classifier with Adam and a cosine schedule whose t_max (4) is shorter than a
// run: a resumed run seeks past t_max, where the schedule replays its recursion.
RunResult run(const fs::path& dir, const RunOptions& o = {}) {
  const auto& data = batches();
  Net model(o.seed, /*width=*/8);
  optim::Adam<Cpu> adam;
  train::LearnerOptions options;
  options.scheduler = optim::CosineAnnealingLR(0.05, 4, 0.001);
  options.output_dir = dir;
  options.resume = o.resume;
  options.keep_checkpoints = o.keep;
  options.dashboard = train::DashboardMode::none;
  int calls = 0;
  auto step = [&](Net& m, const Batch& b) {
    if (++calls == o.throw_at_step) throw std::runtime_error("killed");
    return m.train_step(b);
  };
  train::Learner learner(model, adam, options, step);
  RunResult r;
  learner.on_step_end([&](const train::StepRecord& s) { r.losses.push_back(s.loss); });
  r.result = learner.fit(data, o.epochs);
  return r;
}

fs::path checkpoint(const fs::path& dir, const std::string& name) { return dir / "checkpoints" / name; }

std::string run_id_of(const fs::path& learner_json) {
  return train::learner_state_from_json(read_file(learner_json), learner_json.string()).run_id;
}

// ---- counts in learner.json and in the optimizer's state

TEST(HostileCheckpoint, CountsBeyondTwoToThe53InLearnerJsonAreErrors) {
  const fs::path dir = fresh_dir("counts");
  run(dir);
  const fs::path json = checkpoint(dir, "epoch-0001") / "learner.json";
  const std::string good = read_file(json);
  for (const std::string key : {"global_step", "epoch", "train_steps", "bad_epochs", "bucket"})
    for (const std::string value : {"9223372036854775807", "9007199254740993", "123456789012345678901234567890"}) {
      SCOPED_TRACE(key + " = " + value);
      write_file(json, with_number(good, key, value));
      // Resuming used to overflow (and hang in CosineAnnealingLR::lr) or throw std::out_of_range.
      EXPECT_KILN_ERROR(run(dir, {.epochs = 2, .resume = true}), json.string(), key + " is " + value,
                        "more than the largest count a checkpoint may hold (9007199254740992, 2^53)");
    }
  write_file(json, with_number(good, "global_step", std::string(100000, '9')));
  EXPECT_KILN_ERROR(run(dir, {.epochs = 2, .resume = true}), json.string(),
                    "global_step is " + std::string(48, '9') + "... (100000 characters)");
  write_file(json, with_number(good, "bucket", "0"));
  EXPECT_KILN_ERROR(run(dir, {.epochs = 2, .resume = true}), json.string(), "loss_curve.bucket is 0");

  // 2^53 itself is a count the loop handles: the schedule seeks there and the run goes on.
  write_file(json, with_number(good, "global_step", "9007199254740992"));
  const RunResult resumed = run(dir, {.epochs = 2, .resume = true});
  EXPECT_EQ(resumed.losses.size(), 3u);
  EXPECT_EQ(resumed.result.global_step, (std::int64_t{1} << 53) + 3);
}

TEST(HostileCheckpoint, OptimizerStepCountNearInt64MaxIsAnError) {
  const fs::path dir = fresh_dir("optimizer_step");
  run(dir);
  const fs::path path = checkpoint(dir, "epoch-0001") / "optimizer.safetensors";
  const auto file = store::SafetensorsFile::open(path);
  store::NamedTensors state = file.load_all();
  ASSERT_EQ(state.at("out.bias.step").to_vec<std::int64_t>(), std::vector<std::int64_t>{3});
  const std::int64_t huge = std::numeric_limits<std::int64_t>::max();
  state.at("out.bias.step") = TensorData::from(std::vector<std::int64_t>{huge}, Shape{1});
  store::SafetensorsWriteOptions write;
  write.metadata = file.metadata();  // the run's stamp: the file passes as the checkpoint's own
  store::save_safetensors(path, state, write);
  EXPECT_KILN_ERROR(run(dir, {.epochs = 2, .resume = true}), path.string(),
                    "saved state out.bias.step is 9223372036854775807, outside [0, 9007199254740992]");
}

// ---- checkpoint names: `latest` and the directories

TEST(HostileCheckpoint, LatestThatIsNotACheckpointNameIsAnError) {
  const fs::path dir = fresh_dir("latest");
  fs::create_directories(dir / "checkpoints");
  const fs::path latest = dir / "checkpoints" / "latest";
  // 30 digits made stoll throw std::out_of_range; the others are beyond 2^53 or not names.
  for (const std::string& name : {"epoch-" + std::string(30, '7'), std::string("epoch-9223372036854775807"),
                                 std::string("epoch-0001-step-9007199254740993"), std::string("epoch-"),
                                 std::string("epoch-1x"), std::string("../epoch-0001"), std::string("epoch-+1")}) {
    SCOPED_TRACE(name);
    write_file(latest, name + "\n");
    EXPECT_KILN_ERROR(train::read_latest_checkpoint(dir), latest.string(), "names '" + name + "'",
                      "which is not a checkpoint name");
  }
  // 50,000 digits overflowed std::regex's recursion (SIGSEGV); the file is not read whole.
  write_file(latest, "epoch-" + std::string(50000, '0') + "\n");
  EXPECT_KILN_ERROR(train::read_latest_checkpoint(dir), latest.string(),
                    "names 'epoch-" + std::string(42, '0') + "... (50007 characters)'");
  EXPECT_KILN_ERROR(run(dir, {.resume = true}), latest.string(), "which is not a checkpoint name");
}

// The worst checkpoint files of at most 1 MiB: each is refused, or read within 1 s and
// 100 MiB.
TEST(HostileCheckpoint, SmallHostileFilesStayWithinTheBudget) {
  using Outcome = kiln::test::ReadUse::Outcome;
  using kiln::test::expect_within_budget;
  constexpr std::size_t mib = std::size_t{1} << 20;
  const fs::path dir = fresh_dir("budget");
  fs::create_directories(dir / "checkpoints" / "epoch-0005");
  const fs::path latest = dir / "checkpoints" / "latest";
  const fs::path json = dir / "checkpoints" / "epoch-0005" / "learner.json";
  const auto reads = [&] { (void)train::read_latest_checkpoint(dir); };
  write_file(latest, "epoch-" + std::string(mib - 16, '9') + "\n");
  expect_within_budget("latest: a name of 1 M digits", mib - 9, Outcome::refused, reads, "not a checkpoint name");
  write_file(latest, "epoch-0005\n");
  // The fuzzer's seed learner.json (epoch 5), its history padded with as many epochs as fit
  // in 1 MiB: read (the checkpoint's other files are missing, so only the state is read).
  const std::string valid = read_file(fs::path(KILN_FUZZ_SEEDS) / "learner.json");
  const std::size_t history = valid.find("\"history\": [") + 12;
  std::string epochs;
  for (int i = 0; valid.size() + epochs.size() + 64 < mib; ++i)
    epochs += R"({"epoch": 1, "global_step": 1, "train": {"loss": 0.5}, "valid": {"loss": 0.5}}, )";
  write_file(json, valid.substr(0, history) + epochs + valid.substr(history));
  expect_within_budget("learner.json: 12 K epochs of history", fs::file_size(json), Outcome::read, [&] {
    if (train::learner_state_from_json(read_file(json), json.string()).history.size() <= 12'000)
      throw std::runtime_error("the history was not read whole");
  });
  write_file(json, "{\"format\": " + std::string(mib / 2 - 16, '[') + std::string(mib / 2 - 16, ']') + "}");
  expect_within_budget("learner.json: arrays nested 0.5 M deep", fs::file_size(json), Outcome::refused, reads,
                       "invalid JSON");
  std::string numbers = "{\"format\": [0";
  while (numbers.size() + 4 < mib) numbers += ",0";
  write_file(json, numbers + "]}");
  expect_within_budget("learner.json: an array of 0.5 M numbers", fs::file_size(json), Outcome::refused, reads);
}

TEST(HostileCheckpoint, FifosAreRefusedNotWaitedOn) {
  const fs::path dir = fresh_dir("fifo");
  fs::create_directories(dir / "checkpoints" / "epoch-0001");
  const fs::path latest = dir / "checkpoints" / "latest";
  ASSERT_EQ(::mkfifo(latest.c_str(), 0600), 0);
  EXPECT_KILN_ERROR(train::read_latest_checkpoint(dir), latest.string(), "is not a regular file");
  fs::remove(latest);
  write_file(latest, "epoch-0001\n");
  const fs::path json = checkpoint(dir, "epoch-0001") / "learner.json";
  ASSERT_EQ(::mkfifo(json.c_str(), 0600), 0);
  EXPECT_KILN_ERROR(train::read_latest_checkpoint(dir), json.string(), "is not a regular file");
}

TEST(HostileCheckpoint, StrayDirectoriesWithHugeNumbersDoNotStopARun) {
  const fs::path dir = fresh_dir("stray");
  const std::string digits(25, '9');
  for (const std::string& name : {"epoch-" + digits, "epoch-0001-step-" + digits, "epoch-" + std::string(200, '1')})
    fs::create_directories(checkpoint(dir, name));
  // prune() parsed every directory's name after saving; 25 digits threw std::out_of_range.
  RunResult r;
  EXPECT_NO_THROW(r = run(dir, {.epochs = 3, .keep = 2}));
  EXPECT_EQ(r.result.epochs, 3);
  EXPECT_FALSE(fs::exists(checkpoint(dir, "epoch-0001")));  // pruned
  EXPECT_TRUE(fs::exists(checkpoint(dir, "epoch-0003") / "model.safetensors"));
  EXPECT_TRUE(fs::exists(checkpoint(dir, "epoch-" + digits)));  // not a checkpoint: left alone
}

// ---- consistency: never the files of two runs

TEST(HostileCheckpoint, ACheckpointMixingTwoRunsIsRefused) {
  const fs::path a = fresh_dir("mix_a"), b = fresh_dir("mix_b");
  run(a, {.epochs = 2});
  run(b, {.seed = 11});
  const std::string run_a = run_id_of(checkpoint(a, "epoch-0001") / "learner.json");
  const std::string run_b = run_id_of(checkpoint(b, "epoch-0001") / "learner.json");
  ASSERT_EQ(run_a.size(), 16u);
  ASSERT_NE(run_a, run_b);
  write_file(a / "checkpoints" / "latest", "epoch-0001\n");
  // The issue's case: a run killed while writing epoch-0001 over an earlier run's left its
  // model beside the earlier run's optimizer and learner.json, and resume took the mix.
  const fs::path model = checkpoint(a, "epoch-0001") / "model.safetensors";
  fs::copy_file(checkpoint(b, "epoch-0001") / "model.safetensors", model, fs::copy_options::overwrite_existing);
  EXPECT_KILN_ERROR(run(a, {.epochs = 2, .resume = true}), model.string(),
                    "by run '" + run_b + "' as checkpoint 'epoch-0001'", "by run '" + run_a + "' as epoch-0001",
                    "mixes the files of two writes");
  // A learner.json of another position (epoch 2's, copied into epoch 1).
  const fs::path json = checkpoint(a, "epoch-0001") / "learner.json";
  fs::copy_file(checkpoint(a, "epoch-0002") / "learner.json", json, fs::copy_options::overwrite_existing);
  EXPECT_KILN_ERROR(train::read_latest_checkpoint(a), json.string(),
                    "holds the position of checkpoint epoch-0002, not of epoch-0001");
}

TEST(HostileCheckpoint, AFreshRunReplacesCheckpointsWholeAndForgetsTheRunBefore) {
  const fs::path dir = fresh_dir("fresh_run");
  run(dir, {.epochs = 2});
  const std::string before = run_id_of(checkpoint(dir, "epoch-0001") / "learner.json");
  write_file(checkpoint(dir, "epoch-0001") / "stale.bin", "left by the run before");

  // A fresh run (no resume) that dies before its first checkpoint: the run before's
  // `latest` is gone, so resuming cannot combine its checkpoint with the fresh run's logs.
  EXPECT_THROW(run(dir, {.seed = 8, .throw_at_step = 2}), std::runtime_error);
  EXPECT_FALSE(fs::exists(dir / "checkpoints" / "latest"));
  EXPECT_TRUE(fs::exists(checkpoint(dir, "epoch-0002")));  // its checkpoints are left

  // The fresh run's epoch-0001 takes the old one's place whole: no file of it is left.
  run(dir, {.seed = 8});
  EXPECT_FALSE(fs::exists(checkpoint(dir, "epoch-0001") / "stale.bin"));
  const std::string after = run_id_of(checkpoint(dir, "epoch-0001") / "learner.json");
  EXPECT_NE(after, before);
  for (const char* file : {"model.safetensors", "optimizer.safetensors"}) {
    const auto tensors = store::SafetensorsFile::open(checkpoint(dir, "epoch-0001") / file);
    EXPECT_EQ(tensors.metadata().at("kiln.train.run_id"), after) << file;
  }
  EXPECT_EQ(read_file(dir / "checkpoints" / "latest"), "epoch-0001\n");
}

TEST(HostileCheckpoint, TemporaryFilesOfKilledWritesAreRemoved) {
  const fs::path dir = fresh_dir("temporaries");
  run(dir);
  const std::string megabyte(1 << 20, 'x');
  const std::vector<fs::path> stale = {
      dir / ".best.safetensors.tmp-4242-0-1f",
      dir / ".learning_curves.svg.tmp-4242-1-20",
      dir / "checkpoints" / ".latest.tmp-4242-2-21",
      checkpoint(dir, "epoch-0001") / ".model.safetensors.tmp-4242-3-22",
      checkpoint(dir, ".epoch-0002.tmp-4242-4-23") / "model.safetensors",  // an unfinished checkpoint
  };
  const std::vector<fs::path> kept = {dir / "notes.txt", dir / ".other.tmp-1", dir / "checkpoints" / "notes.txt",
                                      checkpoint(dir, "epoch-0001") / "notes.txt"};
  for (const fs::path& p : stale) {
    fs::create_directories(p.parent_path());
    write_file(p, megabyte);
  }
  for (const fs::path& p : kept) write_file(p, "mine");
  const RunResult resumed = run(dir, {.epochs = 2, .resume = true});
  EXPECT_EQ(resumed.losses.size(), 3u);
  for (const fs::path& p : stale) EXPECT_FALSE(fs::exists(p)) << p;
  EXPECT_FALSE(fs::exists(checkpoint(dir, ".epoch-0002.tmp-4242-4-23")));
  for (const fs::path& p : kept) EXPECT_TRUE(fs::exists(p)) << p;
}

TEST(HostileCheckpoint, AResumedRunKeepsItsIdAndItsLossesBitwise) {
  const fs::path whole = fresh_dir("bitwise_whole"), split = fresh_dir("bitwise_split");
  const RunResult uninterrupted = run(whole, {.epochs = 4});
  RunResult first = run(split, {.epochs = 2});
  const RunResult second = run(split, {.epochs = 4, .resume = true, .seed = 99});
  first.losses.insert(first.losses.end(), second.losses.begin(), second.losses.end());
  EXPECT_EQ(first.losses, uninterrupted.losses);  // the schedule resumed past t_max
  const std::string id = run_id_of(checkpoint(split, "epoch-0002") / "learner.json");
  EXPECT_EQ(run_id_of(checkpoint(split, "epoch-0004") / "learner.json"), id);
  EXPECT_EQ(store::SafetensorsFile::open(checkpoint(split, "epoch-0004") / "model.safetensors").metadata().at(
                "kiln.train.checkpoint"),
            "epoch-0004");
}

}  // namespace
