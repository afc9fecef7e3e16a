// The options and results of a training run, and detail::Session: everything a Learner does
// that involves no tensor (step and epoch counting, metrics and their aggregation, the
// dashboard, CSV / JSONL logs, checkpoint files, early stopping, the best model, the
// learning-rate schedule, Ctrl-C). Compiled once into kiln::train; Learner
// (train/learner.hpp) is a thin template over it that runs the model and the optimizer.
#pragma once

#include "kiln/optim/scheduler.hpp"
#include "kiln/store/named_tensors.hpp"
#include "kiln/train/checkpoint.hpp"
#include "kiln/train/dashboard.hpp"
#include "kiln/train/metric.hpp"

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <iosfwd>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace kiln::train {

// Whether a smaller or a larger value of a metric is better (PyTorch's and Lightning's
// mode="min" / "max"; nn::Mode is something else: a module's train / eval switch).
enum class Goal { minimize, maximize };

// The metric that decides which model is the best (written to <output_dir>/best.safetensors
// each time an epoch improves on it).
struct BestModel {
  std::string metric = "loss";
  Split split = Split::valid;
  Goal goal = Goal::minimize;
};

// Stops training once `patience` epochs in a row have not improved the metric by more than
// min_delta over the best value so far (Keras' and Lightning's rule).
struct EarlyStopping {
  std::string metric = "loss";
  Split split = Split::valid;
  Goal goal = Goal::minimize;
  std::int64_t patience = 3;
  double min_delta = 0;
};

// Keeps the checkpoints of the `count` best finished epochs by a metric, besides the
// keep_checkpoints newest (a checkpoint either rule keeps stays), like Lightning's
// ModelCheckpoint(monitor, mode, save_top_k) beside a keep-last rule. Ties: the earlier epoch.
struct KeepBestCheckpoints {
  std::string metric = "loss";
  Split split = Split::valid;
  Goal goal = Goal::minimize;
  std::int64_t count = 1;
};

// The rate from optim::ReduceLROnPlateau (torch's ReduceLROnPlateau, from LearnerOptions::lr),
// stepped once per epoch with the epoch's value of a metric; options.mode says whether it
// should fall (min, a loss) or rise (max, an accuracy), options.patience counts epochs.
struct LrPlateau {
  std::string metric = "loss";
  Split split = Split::valid;
  optim::PlateauOptions options{};
};

struct LearnerOptions {
  // The learning rate of every step, or the schedule of rates by train step: step t (from 0,
  // counted over the whole run) uses scheduler->lr(t), and the scheduler steps once per
  // train step, as PyTorch's scheduler.step() after optimizer.step().
  double lr = 1e-3;
  std::optional<optim::Scheduler> scheduler;
  // Gradient accumulation: the gradients of accumulate_steps train steps are averaged into
  // one optimizer step (at the rate of the group's last step; the schedule still counts train
  // steps). An epoch's last steps make a shorter group, stepped before validation.
  std::int64_t accumulate_steps = 1;
  // Before each optimizer step, the gradients are scaled to this total 2-norm over every
  // parameter where they exceed it (torch.nn.utils.clip_grad_norm_), then clamped to
  // [-clip_grad_value, clip_grad_value] (clip_grad_value_).
  std::optional<double> clip_grad_norm, clip_grad_value;
  // Logs (steps.csv / .jsonl, epochs.csv / .jsonl), checkpoints/, best.safetensors and
  // learning_curves.svg go here; empty: no files at all.
  std::filesystem::path output_dir;
  // Continue from the latest checkpoint in output_dir (a fresh run when there is none).
  // Without resume, a run starts its logs afresh and removes checkpoints/latest of the run
  // before it (its checkpoint directories are left), so the two are never combined.
  bool resume = false;
  bool checkpoints = true;            // a checkpoint after every epoch (and on Ctrl-C)
  std::int64_t keep_checkpoints = 2;  // the newest ones kept; 0: all
  std::optional<KeepBestCheckpoints> keep_best_checkpoints;  // and those of the best epochs
  // The rate cut when a validation metric stops improving; not with `scheduler`. Its state
  // is in the checkpoints.
  std::optional<LrPlateau> plateau;
  std::optional<EarlyStopping> early_stopping;
  std::optional<BestModel> best_model;
  bool default_metrics = true;  // train::default_metrics(); add_metric adds more
  DashboardMode dashboard = DashboardMode::automatic;
  std::int64_t log_every = 50;     // plain dashboard: a line every log_every steps
  std::ostream* console = nullptr;  // where the dashboard goes; null: std::cout
  // At the end of the run, a table of every epoch (a row each) and its metrics (a column per
  // metric and phase) on `console`, unless the dashboard is DashboardMode::none.
  bool epoch_summary = true;
  bool handle_interrupt = true;     // fit catches Ctrl-C (SIGINT): see train/interrupt.hpp
  std::string title = "Kiln";
};

enum class StopReason { completed, early_stopping, interrupted };
std::string_view stop_reason_name(StopReason reason);

struct FitResult {
  StopReason reason = StopReason::completed;
  std::int64_t epochs = 0;       // epochs finished, those of resumed runs included
  std::int64_t global_step = 0;  // train steps of the whole run
  std::optional<double> best_value;  // of options.best_model's metric
  std::int64_t best_epoch = 0;
  std::filesystem::path checkpoint;  // the last checkpoint written; empty if none
};

// One step, after its metrics were computed.
struct StepRecord {
  Split split = Split::train;
  std::int64_t epoch = 0, step = 0, global_step = 0;
  double loss = 0;
  double lr = 0;          // NaN for valid steps
  MetricValues values;    // this step's metric values
};

// The processes of a data-parallel run, as a Learner sees them (Learner::distribute gives it
// kiln::dist's): this process's rank among world_size, and how values are combined across
// the ranks, in place, with the same result on every rank. Rank 0 alone draws the dashboard
// and writes logs, checkpoints and the best model; every rank logs the same epoch values
// (each metric's across_ranks()), so that early stopping and the rate plateau decide alike.
struct Ranks {
  int rank = 0;
  int world_size = 1;
  std::function<void(std::span<double>)> sum, max;
};

// One finished epoch.
struct EpochSummary {
  EpochRecord record;
  bool new_best = false;  // best.safetensors was written for it
  bool stop = false;      // early stopping asks to stop here
};

namespace detail {

// What the template side hands over for one step.
struct StepInput {
  double loss = 0;
  const TensorData* output = nullptr;
  const TensorData* targets = nullptr;
  std::int64_t items = 1;
  double lr = 0;
};

class Session {
 public:
  explicit Session(LearnerOptions options);
  ~Session();
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  const LearnerOptions& options() const { return options_; }
  void add_metric(std::unique_ptr<Metric> metric);
  // Makes this one rank of a data-parallel run; before the run starts.
  void set_ranks(Ranks ranks);
  const Ranks& ranks() const { return ranks_; }
  // Whether this process writes the run's files and draws its dashboard (rank 0).
  bool writes_files() const { return ranks_.rank == 0; }
  // A resumed data-parallel run: every rank must have found the same checkpoint.
  void check_ranks_resumed(bool resumed, std::int64_t global_step) const;
  bool needs_outputs(Split split) const;
  // The rate of the next train step.
  double lr() const;

  // A run of `epochs` epochs (0: unknown) of train_steps and valid_steps steps each (0:
  // unknown, learned from the first epoch). Custom loops may skip it.
  void begin_run(std::int64_t epochs, std::int64_t train_steps, std::int64_t valid_steps);
  // The epoch begin_epoch() would start; the epoch in progress (or the last one finished).
  std::int64_t next_epoch() const { return finished_epochs_ + 1; }
  std::int64_t epoch() const { return in_epoch_ ? finished_epochs_ + 1 : finished_epochs_; }
  std::int64_t begin_epoch();
  void begin_valid();
  bool in_phase(Split split) const { return (in_epoch_ || evaluating_) && phase_ == split; }
  // A validation phase outside the epochs (Learner::evaluate): the metrics' valid values of
  // its steps; no epoch, log, checkpoint, best model, early stopping or dashboard line.
  void begin_evaluation();
  MetricValues end_evaluation();
  bool in_epoch() const { return in_epoch_; }
  StepRecord record_step(Split split, const StepInput& input);
  EpochSummary end_epoch();

  // Stop requests: Ctrl-C (while an InterruptGuard lives), early stopping.
  bool interrupted() const;
  bool early_stopped() const;

  // Checkpoints: the state at the current position, written with the model's and the
  // optimizer's tensors; the latest one read back and applied to this session.
  LearnerState state() const;
  std::filesystem::path write_checkpoint(const store::NamedTensors& model, const store::NamedTensors& optimizer);
  std::optional<Checkpoint> read_latest_checkpoint() const;
  // Applies a checkpoint's state: counters, history, partial aggregates, early stopping and
  // best model, the scheduler's position, the random stream; log files cut back to their
  // size at the checkpoint. Must come before begin_run's first epoch.
  void restore(const LearnerState& state);
  // Where a restored run continues: a fresh epoch, the middle of `epoch`'s train phase
  // (after `train_steps` steps, with the random stream at epoch_rng when the epoch began),
  // or `epoch`'s validation.
  enum class Resume { next_epoch, train, valid };
  Resume resume_point() const { return resume_; }
  const LearnerState& restored() const { return restored_; }
  // Continues a restored epoch (resume_point() != next_epoch) instead of begin_epoch().
  void continue_epoch();

  // Whether checkpoints are written (options.checkpoints and an output_dir).
  bool checkpointing() const;
  bool wants_best_model() const;
  void write_best_model(const store::NamedTensors& model);

  const std::vector<EpochRecord>& history() const { return history_; }
  void message(const std::string& text);
  DashboardState snapshot() const;
  // Ends the run: the chart, the dashboard's last frame, the result.
  FitResult finish(StopReason reason);

 private:
  void write_learning_curves();
  void print_epoch_summary();
  // The checkpoint names of the epochs options.keep_best_checkpoints keeps.
  std::vector<std::string> best_checkpoints() const;

  struct Impl;
  LearnerOptions options_;
  std::unique_ptr<Impl> impl_;
  Ranks ranks_;

  std::int64_t finished_epochs_ = 0;
  bool in_epoch_ = false;
  bool evaluating_ = false;
  Split phase_ = Split::train;
  std::vector<EpochRecord> history_;
  Resume resume_ = Resume::next_epoch;
  LearnerState restored_;
};

}  // namespace detail
}  // namespace kiln::train
