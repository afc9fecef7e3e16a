// Checkpoints of a training run, in <output_dir>/checkpoints/<name>/: model.safetensors (the
// module's state dict), optimizer.safetensors (the optimizer's state dict) and learner.json
// (the loop's position, the scheduler's step count, the random stream, the metric history,
// early stopping and best-model bookkeeping, the log files' sizes). A checkpoint is written
// into a fresh directory that then takes <name>'s place in one rename, so its three files
// always come from one write; each carries the run's id and the checkpoint's name, and
// reading refuses files that disagree. <output_dir>/checkpoints/latest names the newest
// complete checkpoint and is written last, so a crash while saving leaves the previous
// checkpoint in charge.
#pragma once

#include "kiln/core/rng.hpp"
#include "kiln/optim/scheduler.hpp"
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

// The largest count (of epochs, steps, ...) a checkpoint may hold: 2^53, exact in a double
// and far beyond any run, so that the loop's arithmetic on counts read from a file cannot
// overflow. A larger one in learner.json, or in a checkpoint's name, is a kiln::Error.
inline constexpr std::int64_t kMaxCheckpointCount = std::int64_t{1} << 53;

// Where a run is and what it has learned, besides the model and the optimizer.
struct LearnerState {
  std::string run_id;              // the run's id, kept over resumes (see write_checkpoint)
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
  std::optional<optim::ReduceLROnPlateau::State> plateau;  // LearnerOptions::plateau's
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
// `keep` newest checkpoints (0: all) and those named in `also_keep` (the best epochs'),
// removing older ones once `latest` names the new one.
// The model's and the optimizer's files carry state.run_id and the checkpoint's name in
// their metadata ("kiln.train.run_id", "kiln.train.checkpoint"). Temporary files that
// killed writes left in checkpoints/ are removed first.
std::filesystem::path write_checkpoint(const std::filesystem::path& output_dir, const store::NamedTensors& model,
                                       const store::NamedTensors& optimizer, const LearnerState& state,
                                       std::int64_t keep = 0, const std::vector<std::string>& also_keep = {});
// The checkpoint `latest` names; nullopt when there is none. A broken checkpoint is a
// kiln::Error naming the file: a name that is not a checkpoint's, counts beyond
// kMaxCheckpointCount, files whose run id or checkpoint name disagree with learner.json.
std::optional<Checkpoint> read_latest_checkpoint(const std::filesystem::path& output_dir);

// Removes what killed writes left in `output_dir`: the atomic writer's temporary files
// (".<name>.tmp-*") of the files kiln::train writes there, and every temporary file and
// unfinished checkpoint directory in checkpoints/ and its checkpoint directories. One run
// writes an output directory at a time, so none of them belongs to a live write.
void remove_temporary_files(const std::filesystem::path& output_dir);

// Writes `text` to `path` atomically (temporary file, fsync, rename).
void write_file_atomically(const std::filesystem::path& path, std::string_view text);

}  // namespace kiln::train
