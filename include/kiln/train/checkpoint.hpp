// Checkpoints of a training run, in <output_dir>/checkpoints/<name>/: model.safetensors (the
// module's state dict), optimizer.safetensors (the optimizer's state dict) and learner.json
// (the loop's position, the scheduler's step count, the random stream, the metric history,
// early stopping and best-model bookkeeping, the log files' sizes). Each file is written
// atomically (a temporary file renamed over it); <output_dir>/checkpoints/latest names the
// newest complete checkpoint and is written last, so a crash while saving leaves the
// previous checkpoint in charge.
#pragma once

#include "kiln/core/rng.hpp"
#include "kiln/store/named_tensors.hpp"
#include "kiln/train/metric.hpp"

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace kiln::train {

// The train loss as the dashboard plots it: points (x in epochs, mean loss) over buckets of
// steps; when it holds `capacity` points, neighbours merge and buckets double, so a long
// run keeps a bounded curve.
class LossCurve {
 public:
  explicit LossCurve(std::size_t capacity = 512) : capacity_(capacity) {}
  void add(double x, double loss);
  // The points, the bucket in progress included.
  std::vector<std::pair<double, double>> points() const;

  // Its state, for checkpoints.
  struct State {
    std::vector<std::pair<double, double>> points;
    std::int64_t bucket = 1;                   // steps per point
    double x_sum = 0, y_sum = 0;               // the bucket in progress
    std::int64_t in_bucket = 0;
  };
  const State& state() const { return state_; }
  void restore(State state) { state_ = std::move(state); }

 private:
  std::size_t capacity_;
  State state_;
};

// Where a run is and what it has learned, besides the model and the optimizer.
struct LearnerState {
  std::int64_t epoch = 0;          // the epoch of this position (1-based); 0: nothing done yet
  std::int64_t train_steps = 0;    // train steps of `epoch` done
  bool train_done = false;         // `epoch`'s train phase finished
  bool epoch_done = false;         // `epoch` finished, validation and bookkeeping included
  std::int64_t global_step = 0;    // train steps of the run (the scheduler's step count)
  RandomStream rng{};              // the global random stream at this position
  RandomStream epoch_rng{};        // ... when `epoch`'s train phase began
  std::vector<EpochRecord> history;
  // `epoch`'s train aggregates, when the epoch is not done.
  std::vector<std::pair<std::string, Aggregator>> train_partial;
  std::optional<double> early_stopping_best;
  std::int64_t early_stopping_bad_epochs = 0;
  std::optional<double> best_value;
  std::int64_t best_epoch = 0;
  LossCurve::State loss_curve;
  std::vector<std::pair<std::string, std::uint64_t>> log_sizes;  // file name, bytes
};

std::string learner_state_to_json(const LearnerState& state);
// `context` names the file in errors.
LearnerState learner_state_from_json(std::string_view text, std::string_view context);

// "epoch-0003" for a finished epoch, "epoch-0003-step-000017" for one stopped after 17 steps.
std::string checkpoint_name(const LearnerState& state);

struct Checkpoint {
  std::filesystem::path dir;
  store::NamedTensors model, optimizer;
  LearnerState state;
};

// Writes a checkpoint (see the top of this header) and returns its directory. Keeps the
// `keep` newest checkpoints (0: all), removing older ones once `latest` names the new one.
std::filesystem::path write_checkpoint(const std::filesystem::path& output_dir, const store::NamedTensors& model,
                                       const store::NamedTensors& optimizer, const LearnerState& state,
                                       std::int64_t keep = 0);
// The checkpoint `latest` names; nullopt when there is none. A broken checkpoint is a
// kiln::Error naming the file.
std::optional<Checkpoint> read_latest_checkpoint(const std::filesystem::path& output_dir);

// Writes `text` to `path` atomically (temporary file, fsync, rename).
void write_file_atomically(const std::filesystem::path& path, std::string_view text);

}  // namespace kiln::train
