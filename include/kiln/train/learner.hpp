// Learner: trains a module with an optimizer over batches, in the spirit of Burn's learner.
// A step function maps (model, batch) to a TrainOutput (the loss, and optionally the scores
// and targets that accuracy metrics read); by default the model's own
// `train_step(batch)` and `valid_step(batch)` (falling back to train_step). The learner
// runs the backward pass and the optimizer step, and everything else (metrics, dashboard,
// logs, checkpoints, early stopping, best model, Ctrl-C) is detail::Session's, compiled
// once in kiln::train. A loader is any range of batches (begin / end): a std::vector, a
// data loader; one with set_epoch(epoch) is told each epoch before it is iterated.
//
//   train::Learner learner(model, optimizer, {.lr = 1e-2, .output_dir = "runs/mnist"});
//   train::FitResult result = learner.fit(train_batches, valid_batches, /*epochs=*/10);
#pragma once

#include "kiln/autodiff/graph.hpp"
#include "kiln/nn/state.hpp"
#include "kiln/optim/gradients.hpp"
#include "kiln/train/interrupt.hpp"
#include "kiln/train/session.hpp"

#include <cmath>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <iterator>
#include <limits>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

namespace kiln::train {

// What a step returns: the loss (one element), and for the metrics that read them the
// outputs and the targets: by default scores [N, C] and class indices [N] (classification);
// other tasks name their ranks and the targets' kind, e.g. TrainOutput<B, 2, 2, Float> for
// regression [N, D] against [N, D], TrainOutput<B, 4, 4, Float> for images (see
// train/task_metric.hpp). `items` counts the batch's examples for the means and the
// throughput (0: the first dim of output, else of targets, else 1).
template <Backend B, std::size_t OutputRank = 2, std::size_t TargetRank = 1, class TargetKind = Int>
struct TrainOutput {
  Tensor<B, 1> loss;
  std::optional<Tensor<B, OutputRank>> output = std::nullopt;
  std::optional<Tensor<B, TargetRank, TargetKind>> targets = std::nullopt;
  std::int64_t items = 0;
};
template <Backend B, std::size_t OutputRank = 2, std::size_t TargetRank = 1, class TargetKind = Int>
using ValidOutput = TrainOutput<B, OutputRank, TargetRank, TargetKind>;

// The default step functions: the model's train_step / valid_step members.
struct CallTrainStep {
  template <class M, class Batch> auto operator()(M& model, const Batch& batch) const { return model.train_step(batch); }
};
struct CallValidStep {
  template <class M, class Batch> auto operator()(M& model, const Batch& batch) const {
    if constexpr (requires { model.valid_step(batch); }) return model.valid_step(batch);
    else return model.train_step(batch);
  }
};

namespace detail {

// The number of batches of a range, 0 when it does not say.
template <class R> std::int64_t batch_count(R& range) {
  if constexpr (requires { std::size(range); }) return static_cast<std::int64_t>(std::size(range));
  else return 0;
}
template <class R> void announce_epoch(R& range, std::int64_t epoch) {
  if constexpr (requires { range.set_epoch(epoch); }) range.set_epoch(epoch);
}

template <class Out> std::int64_t items_of(const Out& out) {
  if (out.items > 0) return out.items;
  if (out.output) return out.output->dim(0);
  if (out.targets) return out.targets->dim(0);
  return 1;
}

// Stands for "no validation data" in fit(train, epochs).
struct NoBatches {};

// The gradients an optimizer steps from, by parameter: GradientsParams of its backend, for
// accumulation and clipping; nothing for an optimizer of another kind.
// For a data-parallel run (Learner::distribute): a backward pass whose gradients come back
// averaged over the ranks, and the averaging of accumulated gradients.
template <class O> struct GradientsFor {
  using type = std::monostate;
  using ParallelBackward = std::monostate;
  using ParallelSync = std::monostate;
};
template <class O>
  requires requires { typename O::Backend; }
struct GradientsFor<O> {
  using type = optim::GradientsParams<typename O::Backend>;
  using ParallelBackward =
      std::function<type(const std::function<kiln::Gradients<typename O::Backend::Primitive>()>& run_backward)>;
  using ParallelSync = std::function<void(type&)>;
};

// Runs `body`; a kiln::Error it throws is thrown again with `file` in front, for errors in
// applying a checkpoint's tensors (a saved shape the model lacks, a damaged step count).
template <class F> void naming_file(const std::filesystem::path& file, F&& body) {
  try {
    body();
  } catch (const Error& error) {
    throw Error(file.string() + ": " + error.what());
  }
}

}  // namespace detail

template <nn::Module M, class Optimizer, class TrainFn = CallTrainStep, class ValidFn = CallValidStep>
class Learner {
 public:
  // The learner trains `model` with `optimizer` in place; both must outlive it.
  Learner(M& model, Optimizer& optimizer, LearnerOptions options = {}, TrainFn train_fn = {}, ValidFn valid_fn = {})
      : model_(model), optimizer_(optimizer), train_fn_(std::move(train_fn)), valid_fn_(std::move(valid_fn)),
        session_(std::move(options)) {
    const LearnerOptions& o = session_.options();
    KILN_CHECK(o.accumulate_steps >= 1, "Learner: accumulate_steps must be >= 1, got {}", o.accumulate_steps);
    KILN_CHECK(!o.clip_grad_norm || (std::isfinite(*o.clip_grad_norm) && *o.clip_grad_norm > 0),
               "Learner: clip_grad_norm must be finite and > 0, got {}", o.clip_grad_norm.value_or(0));
    KILN_CHECK(!o.clip_grad_value || (std::isfinite(*o.clip_grad_value) && *o.clip_grad_value > 0),
               "Learner: clip_grad_value must be finite and > 0, got {}", o.clip_grad_value.value_or(0));
    constexpr bool can_transform = !std::is_same_v<Gradients, std::monostate>;
    KILN_CHECK(!transforms_gradients() || can_transform,
               "Learner: accumulate_steps and gradient clipping need an optim::Optimizer (one that names its Backend)");
  }

  void add_metric(std::unique_ptr<Metric> metric) { session_.add_metric(std::move(metric)); }

  // Runs this learner as one rank of a data-parallel run, over `parallel`, a
  // kiln::dist::DataParallel of the same model (or anything with its members):
  //
  //   dist::DataParallel parallel(model);
  //   train::Learner learner(model, optimizer, options);
  //   learner.distribute(parallel);
  //   learner.fit(loader_of_this_ranks_shard, valid, epochs);
  //
  // Each step's gradients are averaged across the ranks while backward runs (with
  // accumulate_steps > 1, once per optimizer step); the epoch's metrics are combined across
  // the ranks before they are logged; rank 0 alone draws the dashboard and writes the
  // logs, checkpoints and best model; resume reads the checkpoint on every rank. Every rank
  // must run as many steps per epoch (dist::DistributedSampler gives each rank as many
  // batches). Call before fit; `parallel` must outlive the learner.
  template <class Parallel> Learner& distribute(Parallel& parallel) {
    static_assert(!std::is_same_v<Gradients, std::monostate>,
                  "Learner::distribute needs an optim::Optimizer (one that names its Backend)");
    KILN_CHECK(static_cast<const void*>(&parallel.module()) == static_cast<const void*>(&model_),
               "Learner::distribute: the DataParallel is over another module than the learner's model");
    using Inner = typename Optimizer::Backend;
    session_.set_ranks(Ranks{parallel.rank(), parallel.world_size(),
                             [&parallel](std::span<double> values) { parallel.sum_across_ranks(values); },
                             [&parallel](std::span<double> values) { parallel.max_across_ranks(values); }});
    parallel_backward_ = [&parallel](const std::function<kiln::Gradients<typename Inner::Primitive>()>& run) {
      return parallel.template backward<Inner>(run);
    };
    parallel_sync_ = [&parallel](Gradients& grads) { parallel.sync(grads); };
    return *this;
  }
  void on_epoch_begin(std::function<void(std::int64_t epoch)> hook) { epoch_begin_hooks_.push_back(std::move(hook)); }
  void on_step_end(std::function<void(const StepRecord&)> hook) { step_hooks_.push_back(std::move(hook)); }
  void on_epoch_end(std::function<void(const EpochSummary&)> hook) { epoch_end_hooks_.push_back(std::move(hook)); }

  // Trains for `epochs` epochs (counted over resumed runs too: a run resumed after epoch 2 of
  // 4 does epochs 3 and 4), validating after each; stops early on options.early_stopping and,
  // on Ctrl-C, after the current step with a checkpoint saved.
  template <class TrainData, class ValidData>
  FitResult fit(TrainData&& train, ValidData&& valid, std::int64_t epochs) {
    return run(train, &valid, epochs);
  }
  template <class TrainData> FitResult fit(TrainData&& train, std::int64_t epochs) {
    return run(train, static_cast<detail::NoBatches*>(nullptr), epochs);
  }

  // Runs the validation phase over `data` with the learner's metrics and returns their
  // values (what an epoch would record as its valid values), outside the epochs: no
  // training, no epoch counted, no log line, checkpoint, best model or early stopping. The
  // model is left in evaluation mode. Before fit, between epochs or after fit; a loader with
  // set_epoch is not told an epoch.
  template <class Data> MetricValues evaluate(Data&& data) {
    session_.begin_evaluation();
    nn::eval(model_);
    try {
      for (auto it = std::begin(data); it != std::end(data); ++it) validate(*it);
    } catch (...) {
      (void)session_.end_evaluation();
      throw;
    }
    return session_.end_evaluation();
  }

  // ---- the step-level API, for loops of one's own:
  //   learner.resume();                    // optional
  //   while (!learner.should_stop()) {
  //     learner.begin_epoch();
  //     for (auto& b : train) learner.step(b);
  //     for (auto& b : valid) learner.validate(b);
  //     learner.end_epoch();
  //   }
  //   learner.finish();

  // Loads the latest checkpoint of options.output_dir into the model, the optimizer, the
  // scheduler, the random stream and the learner's history; false when there is none.
  bool resume() {
    std::optional<Checkpoint> checkpoint = session_.read_latest_checkpoint();
    session_.check_ranks_resumed(checkpoint.has_value(), checkpoint ? checkpoint->state.global_step : 0);
    if (!checkpoint) return false;
    const std::filesystem::path& dir = checkpoint->dir;
    detail::naming_file(dir / "model.safetensors", [&] { nn::load_state_dict(model_, checkpoint->model); });
    if constexpr (requires { optimizer_.load_state_dict(model_, std::map<std::string, TensorData>{}); }) {
      std::map<std::string, TensorData> state;
      for (const auto& entry : checkpoint->optimizer) state.emplace(entry.name, entry.data);
      detail::naming_file(dir / "optimizer.safetensors", [&] { optimizer_.load_state_dict(model_, state); });
    }
    session_.restore(checkpoint->state);
    session_.message(fmt::format("resumed from {}", checkpoint->dir.string()));
    return true;
  }

  // Starts the next epoch (training mode, the epoch-begin hooks).
  std::int64_t begin_epoch() {
    const std::int64_t epoch = session_.begin_epoch();
    nn::train(model_);
    for (auto& hook : epoch_begin_hooks_) hook(epoch);
    return epoch;
  }
  // One train step: the step function, backward, the optimizer's update at the current rate.
  template <class Batch> StepRecord step(const Batch& batch) {
    if (!session_.in_phase(Split::train)) begin_epoch();
    const double lr = session_.lr();
    auto out = train_fn_(model_, batch);
    check_loss(out.loss, "train");
    if constexpr (std::is_same_v<Gradients, std::monostate>) {
      auto grads = out.loss.backward();
      optimizer_.step(lr, model_, grads);
    } else if (parallel_backward_ && session_.options().accumulate_steps == 1) {
      // Averaged across the ranks while backward runs.
      Gradients averaged = parallel_backward_([&out] { return out.loss.backward(); });
      clip(averaged);
      optimizer_.step(lr, model_, averaged);
    } else {
      auto grads = out.loss.backward();
      if (!transforms_gradients()) {
        optimizer_.step(lr, model_, grads);
      } else {
        Gradients taken = Gradients::from(model_, grads);
        if (pending_steps_ == 0) pending_ = std::move(taken);
        else pending_.accumulate(taken);
        ++pending_steps_;
        pending_lr_ = lr;
        if (pending_steps_ == session_.options().accumulate_steps) step_pending();
      }
    }
    return record(Split::train, out, lr);
  }
  // One validation step: evaluation mode, no graph recorded.
  template <class Batch> StepRecord validate(const Batch& batch) {
    if (!session_.in_phase(Split::valid)) begin_validation();
    NoGradGuard no_grad;
    auto out = valid_fn_(model_, batch);
    check_loss(out.loss, "valid");
    return record(Split::valid, out, std::numeric_limits<double>::quiet_NaN());
  }
  // Ends the epoch: epoch metrics and logs, best model, checkpoint, early stopping.
  EpochSummary end_epoch() {
    step_pending();
    EpochSummary summary = session_.end_epoch();
    if (summary.new_best) session_.write_best_model(nn::state_dict(model_));
    if (session_.checkpointing()) save_checkpoint();
    for (auto& hook : epoch_end_hooks_) hook(summary);
    return summary;
  }
  // A checkpoint of the current position (fit saves one after each epoch and on Ctrl-C).
  std::filesystem::path save_checkpoint() {
    store::NamedTensors optimizer_state;
    if constexpr (requires { optimizer_.state_dict(model_); })
      for (auto& [name, data] : optimizer_.state_dict(model_)) optimizer_state.insert(name, std::move(data));
    return session_.write_checkpoint(nn::state_dict(model_), optimizer_state);
  }
  // Ctrl-C or early stopping asked to stop.
  bool should_stop() const { return session_.interrupted() || session_.early_stopped(); }
  // Ends the run: the learning-curve chart, the dashboard's last frame.
  FitResult finish() {
    return session_.finish(session_.interrupted()     ? StopReason::interrupted
                           : session_.early_stopped() ? StopReason::early_stopping
                                                      : StopReason::completed);
  }

  double lr() const { return session_.lr(); }
  const std::vector<EpochRecord>& history() const { return session_.history(); }
  M& model() { return model_; }

 private:
  template <class TrainData, class ValidData> FitResult run(TrainData& train, ValidData* valid, std::int64_t epochs) {
    KILN_CHECK(epochs >= 1, "Learner::fit: epochs must be >= 1, got {}", epochs);
    KILN_CHECK(!session_.in_epoch(),
               "Learner::fit: epoch {} is still in progress (a fit stopped by Ctrl-C, or begin_epoch without "
               "end_epoch); continue an interrupted run with a new Learner and LearnerOptions::resume",
               session_.epoch());
    std::optional<InterruptGuard> guard;
    if (session_.options().handle_interrupt) guard.emplace();
    if (session_.options().resume) resume();
    std::int64_t valid_steps = 0;
    if constexpr (!std::is_same_v<ValidData, detail::NoBatches>) valid_steps = detail::batch_count(*valid);
    session_.begin_run(epochs, detail::batch_count(train), valid_steps);
    if (session_.early_stopped()) return finish();  // the resumed run had stopped early
    while (!should_stop()) {
      const auto where = session_.resume_point();
      if (where == detail::Session::Resume::next_epoch) {
        if (session_.next_epoch() > epochs) break;
        begin_epoch();
      } else {
        session_.continue_epoch();
        nn::train(model_);
      }
      if (where != detail::Session::Resume::valid) {
        const std::int64_t skip = where == detail::Session::Resume::train ? session_.restored().train_steps : 0;
        // A resumed epoch replays its loader from the random stream of the epoch's start
        // (a loader that shuffles from it gives the same order), skips the batches done,
        // and continues with the stream where the checkpoint left it.
        if (skip > 0) set_random_state(session_.restored().epoch_rng);
        detail::announce_epoch(train, session_.epoch());
        auto it = std::begin(train);
        const auto end = std::end(train);
        for (std::int64_t i = 0; i < skip && it != end; ++i) ++it;
        if (skip > 0) set_random_state(session_.restored().rng);
        for (; it != end; ++it) {
          step(*it);
          if (session_.interrupted()) return stop_now();
        }
      }
      if constexpr (!std::is_same_v<ValidData, detail::NoBatches>) {
        begin_validation();
        for (auto it = std::begin(*valid); it != std::end(*valid); ++it) {
          validate(*it);
          if (session_.interrupted()) return stop_now();
        }
      }
      if (end_epoch().stop) break;
    }
    return finish();
  }

  FitResult stop_now() {
    if (session_.checkpointing()) save_checkpoint();
    return finish();
  }
  bool transforms_gradients() const {
    const LearnerOptions& o = session_.options();
    return o.accumulate_steps > 1 || o.clip_grad_norm || o.clip_grad_value;
  }
  // The optimizer step of the accumulated gradients (their mean), clipped; nothing when no
  // step is pending.
  void step_pending() {
    if constexpr (!std::is_same_v<Gradients, std::monostate>) {
      if (pending_steps_ == 0) return;
      if (pending_steps_ > 1) pending_.scale(1.0 / static_cast<double>(pending_steps_));
      if (parallel_sync_) parallel_sync_(pending_);  // once per optimizer step (no_sync before)
      clip(pending_);
      optimizer_.step(pending_lr_, model_, pending_);
      pending_ = Gradients();
      pending_steps_ = 0;
    }
  }
  template <class G> void clip(G& grads) const {
    const LearnerOptions& o = session_.options();
    if (o.clip_grad_norm) optim::clip_grad_norm(grads, *o.clip_grad_norm);
    if (o.clip_grad_value) optim::clip_grad_value(grads, *o.clip_grad_value);
  }
  void begin_validation() {
    step_pending();
    if (!session_.in_epoch()) begin_epoch();
    session_.begin_valid();
    nn::eval(model_);
  }
  template <class L> static void check_loss(const L& loss, const char* phase) {
    KILN_CHECK(loss.numel() == 1, "Learner: the {} step's loss has shape {}; it must be one element (reduce it with "
               "mean() or sum())", phase, loss.shape());
  }
  template <class Out> StepRecord record(Split split, const Out& out, double lr) {
    std::optional<TensorData> output, targets;
    if (session_.needs_outputs(split)) {
      if (out.output) output = out.output->into_data();
      if (out.targets) targets = out.targets->into_data();
    }
    detail::StepInput input;
    input.loss = static_cast<double>(out.loss.item());
    input.output = output ? &*output : nullptr;
    input.targets = targets ? &*targets : nullptr;
    input.items = detail::items_of(out);
    input.lr = lr;
    StepRecord record = session_.record_step(split, input);
    for (auto& hook : step_hooks_) hook(record);
    return record;
  }

  using Gradients = typename detail::GradientsFor<Optimizer>::type;

  M& model_;
  Optimizer& optimizer_;
  Gradients pending_;             // accumulated gradients not stepped yet
  typename detail::GradientsFor<Optimizer>::ParallelBackward parallel_backward_;  // set by distribute
  typename detail::GradientsFor<Optimizer>::ParallelSync parallel_sync_;
  std::int64_t pending_steps_ = 0;
  double pending_lr_ = 0;
  TrainFn train_fn_;
  ValidFn valid_fn_;
  detail::Session session_;
  std::vector<std::function<void(std::int64_t)>> epoch_begin_hooks_;
  std::vector<std::function<void(const StepRecord&)>> step_hooks_;
  std::vector<std::function<void(const EpochSummary&)>> epoch_end_hooks_;
};

}  // namespace kiln::train
