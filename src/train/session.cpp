#include "kiln/train/session.hpp"

#include "kiln/core/error.hpp"
#include "kiln/store/safetensors.hpp"
#include "kiln/train/chart.hpp"
#include "kiln/train/interrupt.hpp"
#include "metric_log.hpp"

#include <fmt/format.h>

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <limits>
#include <iostream>
#include <system_error>

namespace kiln::train {
namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

std::string_view stop_reason_name(StopReason reason) {
  switch (reason) {
    case StopReason::completed: return "completed";
    case StopReason::early_stopping: return "early stopping";
    case StopReason::interrupted: return "interrupted";
  }
  return "?";
}

namespace detail {
namespace {

double seconds_between(Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double>(b - a).count(); }

// "1 epoch", "3 epochs".
std::string counted(std::int64_t n, std::string_view noun) { return fmt::format("{} {}{}", n, noun, n == 1 ? "" : "s"); }

// Sums and products of step counts, for the dashboard: counts restored from a checkpoint may
// be as large as kMaxCheckpointCount, and a product of two of them would overflow.
std::int64_t saturating_add(std::int64_t a, std::int64_t b) {
  std::int64_t r = 0;
  if (__builtin_add_overflow(a, b, &r))
    return b > 0 ? std::numeric_limits<std::int64_t>::max() : std::numeric_limits<std::int64_t>::min();
  return r;
}
std::int64_t saturating_mul(std::int64_t a, std::int64_t b) {
  std::int64_t r = 0;
  if (__builtin_mul_overflow(a, b, &r))
    return (a < 0) != (b < 0) ? std::numeric_limits<std::int64_t>::min() : std::numeric_limits<std::int64_t>::max();
  return r;
}

// A fresh run's id: 16 hex digits from the clock, the process id and a counter. Not from
// Kiln's random stream, which must stay where a resumed run expects it.
std::string new_run_id() {
  static std::atomic<std::uint64_t> counter{0};
  std::uint64_t x = static_cast<std::uint64_t>(std::chrono::system_clock::now().time_since_epoch().count()) ^
                    (static_cast<std::uint64_t>(::getpid()) << 40) ^ (counter.fetch_add(1) * 0x9e3779b97f4a7c15ull);
  // splitmix64's finalizer, so that ids of runs started together differ in every digit.
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return fmt::format("{:016x}", x ^ (x >> 31));
}

// Whether `value` improves on `best` by more than `min_delta`.
bool improves(double value, const std::optional<double>& best, Goal goal, double min_delta) {
  if (!best) return true;
  return goal == Goal::minimize ? value < *best - min_delta : value > *best + min_delta;
}

}  // namespace

struct Session::Impl {
  std::vector<std::unique_ptr<Metric>> metrics;
  // Per metric, the aggregates of the epoch's phases and each phase's last step value.
  std::vector<Aggregator> train_totals, valid_totals;
  std::vector<double> train_last, valid_last;

  Dashboard dashboard;
  std::unique_ptr<MetricLog> log;
  std::optional<optim::Scheduler> scheduler;
  std::optional<optim::ReduceLROnPlateau> plateau;
  LossCurve loss_curve;

  bool started = false;
  std::int64_t epochs = 0;                       // of the run; 0: unknown
  std::int64_t train_steps = 0, valid_steps = 0;  // per epoch; 0: unknown
  std::int64_t step = 0;                          // in the phase
  std::int64_t epoch_train_steps = 0;             // train steps of the epoch in progress
  std::int64_t global_step = 0;
  bool train_done = false;
  RandomStream epoch_rng{}, rng_after_train{};
  std::vector<std::pair<std::string, std::uint64_t>> log_sizes_after_train;

  Clock::time_point run_start, epoch_start, phase_start, last_step_end;
  double train_step_seconds = 0, valid_step_seconds = 0;  // sums, for the ETA
  std::int64_t timed_train_steps = 0, timed_valid_steps = 0;

  std::optional<double> early_best;
  std::int64_t early_bad_epochs = 0;
  bool early_stopped = false;
  std::optional<double> best_value;
  std::int64_t best_epoch = 0;
  bool interrupted = false;
  fs::path last_checkpoint;
  std::string run_id = new_run_id();  // a restored run keeps its checkpoint's
  bool restored = false;

  Impl(const LearnerOptions& o) : dashboard(o.dashboard, o.console, o.log_every), scheduler(o.scheduler) {
    if (o.plateau) plateau.emplace(o.lr, o.plateau->options);
  }

  std::vector<Aggregator>& totals(Split s) { return s == Split::train ? train_totals : valid_totals; }
  std::vector<double>& last(Split s) { return s == Split::train ? train_last : valid_last; }
  void reset(Split s) {
    totals(s).assign(metrics.size(), Aggregator{});
    last(s).assign(metrics.size(), std::numeric_limits<double>::quiet_NaN());
    for (auto& m : metrics)
      if (m->applies_to(s)) m->begin(s);
  }
  const Metric* find(std::string_view name) const {
    for (const auto& m : metrics)
      if (m->name() == name) return m.get();
    return nullptr;
  }
  std::string format(std::string_view name, double value) const {
    const Metric* m = find(name);
    return m != nullptr ? m->format(value) : format_number(value);
  }
  // Replaces this rank's aggregates of phase `split` by those of the whole data-parallel
  // run (each metric's across_ranks(), or its summed phase_counts()): three collectives of a
  // few numbers per metric, at the same point on every rank.
  void combine_across_ranks(const Ranks& ranks, Split split) {
    if (ranks.world_size <= 1) return;
    auto& t = totals(split);
    const std::size_t n = metrics.size();
    std::vector<std::vector<double>> counts(n);
    std::vector<double> lengths(n);
    for (std::size_t i = 0; i < n; ++i) {
      if (metrics[i]->applies_to(split)) counts[i] = metrics[i]->phase_counts();
      lengths[i] = static_cast<double>(counts[i].size());
    }
    ranks.max(lengths);  // a rank without steps has no counts yet
    std::vector<double> sums, largest;
    for (std::size_t i = 0; i < n; ++i) {
      const Aggregator& a = t[i];
      const double value = a.count > 0 ? a.value(metrics[i]->aggregate()) : 0.0;
      const bool has = a.count > 0 && std::isfinite(value);
      sums.insert(sums.end(), {a.weighted_sum, a.weight, static_cast<double>(a.count), has ? value : 0.0, has ? 1.0 : 0.0});
      counts[i].resize(static_cast<std::size_t>(lengths[i]), 0.0);
      sums.insert(sums.end(), counts[i].begin(), counts[i].end());
      largest.push_back(has ? value : -std::numeric_limits<double>::infinity());
    }
    ranks.sum(sums);
    ranks.max(largest);
    std::size_t at = 0;
    for (std::size_t i = 0; i < n; ++i) {
      const double weighted_sum = sums[at], weight = sums[at + 1], count = sums[at + 2], value_sum = sums[at + 3],
                   with_value = sums[at + 4];
      const std::span<const double> summed(sums.data() + at + 5, static_cast<std::size_t>(lengths[i]));
      at += 5 + summed.size();
      if (count == 0) continue;
      const Metric& m = *metrics[i];
      std::optional<double> value;
      if (!summed.empty()) value = m.value_of_counts(summed);
      // The exact weighted mean over every rank's steps, where the metric is such a mean.
      const bool weighted = !value && m.aggregate() == Aggregate::mean && m.across_ranks() == AcrossRanks::mean && weight > 0;
      if (!value && with_value > 0) {
        switch (m.across_ranks()) {
          case AcrossRanks::mean: value = weighted ? weighted_sum / weight : value_sum / with_value; break;
          case AcrossRanks::sum: value = value_sum; break;
          case AcrossRanks::max: value = largest[i]; break;
        }
      }
      const double v = value.value_or(std::numeric_limits<double>::quiet_NaN());
      Aggregator combined;
      combined.count = static_cast<std::int64_t>(count);
      combined.last = combined.max = v;
      combined.weighted_sum = weighted ? weighted_sum : v;  // Aggregate::mean reads v too
      combined.weight = weighted ? weight : 1.0;
      t[i] = combined;
    }
  }

  MetricValues values(Split s) const {
    MetricValues out;
    const auto& t = s == Split::train ? train_totals : valid_totals;
    for (std::size_t i = 0; i < metrics.size() && i < t.size(); ++i)
      if (t[i].count > 0) out.set(metrics[i]->name(), t[i].value(metrics[i]->aggregate()));
    return out;
  }
};

Session::Session(LearnerOptions options) : options_(std::move(options)), impl_(std::make_unique<Impl>(options_)) {
  KILN_CHECK(!options_.resume || !options_.output_dir.empty(),
             "LearnerOptions: resume continues from the checkpoints of output_dir, which is empty; set output_dir");
  KILN_CHECK(options_.keep_checkpoints >= 0, "LearnerOptions: keep_checkpoints must be >= 0 (0 keeps all), got {}",
             options_.keep_checkpoints);
  if (options_.early_stopping)
    KILN_CHECK(options_.early_stopping->patience >= 1 && options_.early_stopping->min_delta >= 0,
               "EarlyStopping: patience must be >= 1 and min_delta >= 0, got {} and {}",
               options_.early_stopping->patience, options_.early_stopping->min_delta);
  KILN_CHECK(!options_.plateau || !options_.scheduler,
             "LearnerOptions: scheduler and plateau both set the rate; use one of them");
  if (options_.keep_best_checkpoints)
    KILN_CHECK(options_.keep_best_checkpoints->count >= 1, "KeepBestCheckpoints: count must be >= 1, got {}",
               options_.keep_best_checkpoints->count);
  if (options_.default_metrics) impl_->metrics = default_metrics();
}

Session::~Session() = default;

void Session::set_ranks(Ranks ranks) {
  KILN_CHECK(!impl_->started, "Learner::distribute: the run has started; distribute the learner before fit");
  KILN_CHECK(ranks.world_size >= 1 && ranks.rank >= 0 && ranks.rank < ranks.world_size,
             "Learner::distribute: rank {} of world size {} is not a rank", ranks.rank, ranks.world_size);
  KILN_CHECK(ranks.world_size == 1 || (ranks.sum && ranks.max),
             "Learner::distribute: a world of {} ranks needs the sum and max functions", ranks.world_size);
  ranks_ = std::move(ranks);
  if (!writes_files()) impl_->dashboard.silence();
}

void Session::check_ranks_resumed(bool resumed, std::int64_t global_step) const {
  if (ranks_.world_size <= 1) return;
  const double mine[] = {resumed ? 1.0 : 0.0, static_cast<double>(global_step)};
  double low[] = {-mine[0], -mine[1]}, high[] = {mine[0], mine[1]};
  ranks_.max(low);
  ranks_.max(high);
  KILN_CHECK(-low[0] == high[0] && -low[1] == high[1],
             "Learner::resume: the ranks did not resume from the same checkpoint (rank {} {}); the output_dir {} must "
             "be one directory that every rank sees (a shared file system), written by rank 0",
             ranks_.rank, resumed ? fmt::format("resumed at train step {}", global_step) : std::string("found none"),
             options_.output_dir.string());
}

void Session::add_metric(std::unique_ptr<Metric> metric) {
  KILN_CHECK(metric != nullptr, "Learner::add_metric: the metric is null");
  KILN_CHECK(!impl_->started, "Learner::add_metric: add metrics before training starts ({} was added after)",
             metric->name());
  KILN_CHECK(impl_->find(metric->name()) == nullptr, "Learner::add_metric: a metric named {} is already there",
             metric->name());
  impl_->metrics.push_back(std::move(metric));
}

bool Session::needs_outputs(Split split) const {
  return std::any_of(impl_->metrics.begin(), impl_->metrics.end(),
                     [split](const auto& m) { return m->needs_outputs() && m->applies_to(split); });
}

double Session::lr() const {
  if (impl_->plateau) return impl_->plateau->current();
  return impl_->scheduler ? impl_->scheduler->current() : options_.lr;
}

// ---- the run

void Session::begin_run(std::int64_t epochs, std::int64_t train_steps, std::int64_t valid_steps) {
  Impl& s = *impl_;
  s.epochs = epochs;
  if (train_steps > 0) s.train_steps = train_steps;
  if (valid_steps > 0) s.valid_steps = valid_steps;
  s.interrupted = false;
  s.run_start = Clock::now();
  if (!s.started) {
    s.started = true;
    if (!options_.output_dir.empty() && writes_files()) {
      std::error_code error;
      fs::create_directories(options_.output_dir, error);
      KILN_CHECK(!error, "kiln::train: cannot create the output directory {}: {}", options_.output_dir.string(),
                 error.message());
      remove_temporary_files(options_.output_dir);
      // A fresh run starts its logs afresh, so the checkpoints of a run before it in this
      // directory no longer match them: resuming one would combine two runs.
      const fs::path latest = options_.output_dir / "checkpoints" / "latest";
      if (!s.restored && fs::remove(latest, error))
        s.dashboard.message(fmt::format("a fresh run: {} of the run before was removed (its checkpoints are left)",
                                        latest.string()));
      std::vector<std::string> columns;
      for (const auto& m : s.metrics) columns.push_back(m->name());
      s.log = std::make_unique<MetricLog>(options_.output_dir, columns, restored_.epoch > 0, restored_.log_sizes);
    }
  }
}

std::int64_t Session::begin_epoch() {
  Impl& s = *impl_;
  KILN_CHECK(!in_epoch_, "Learner::begin_epoch: epoch {} has not ended; call end_epoch() first", epoch());
  if (!s.started) begin_run(s.epochs, 0, 0);
  in_epoch_ = true;
  phase_ = Split::train;
  resume_ = Resume::next_epoch;
  s.step = 0;
  s.epoch_train_steps = 0;
  s.train_done = false;
  s.epoch_rng = random_state();
  s.reset(Split::train);
  s.reset(Split::valid);
  s.epoch_start = s.phase_start = s.last_step_end = Clock::now();
  return epoch();
}

void Session::continue_epoch() {
  Impl& s = *impl_;
  KILN_CHECK(resume_ != Resume::next_epoch, "Learner: there is no restored epoch to continue");
  if (!s.started) begin_run(s.epochs, 0, 0);
  in_epoch_ = true;
  phase_ = Split::train;
  s.reset(Split::train);
  s.reset(Split::valid);
  // The checkpoint holds rank 0's partial sums: the other ranks' count from the resumed step.
  for (std::size_t i = 0; i < s.metrics.size() && writes_files(); ++i)
    for (const auto& [name, totals] : restored_.train_partial)
      if (name == s.metrics[i]->name()) s.train_totals[i] = totals;
  s.step = s.epoch_train_steps = restored_.train_steps;
  s.epoch_rng = restored_.epoch_rng;
  s.train_done = resume_ == Resume::valid;
  s.rng_after_train = restored_.rng;
  if (s.train_done) s.log_sizes_after_train = restored_.log_sizes;
  s.epoch_start = s.phase_start = s.last_step_end = Clock::now();
  resume_ = Resume::next_epoch;
}

void Session::begin_valid() {
  Impl& s = *impl_;
  KILN_CHECK(in_epoch_, "Learner::validate: no epoch in progress; call begin_epoch() first");
  if (phase_ == Split::valid) return;
  if (!s.train_done) {
    s.train_done = true;
    s.rng_after_train = random_state();
    if (s.train_steps == 0) s.train_steps = s.epoch_train_steps;
    if (s.log) s.log_sizes_after_train = s.log->sizes();
  }
  phase_ = Split::valid;
  s.step = 0;
  s.reset(Split::valid);
  s.phase_start = s.last_step_end = Clock::now();
}

void Session::begin_evaluation() {
  Impl& s = *impl_;
  KILN_CHECK(!in_epoch_ && !evaluating_,
             "Learner::evaluate: epoch {} is in progress; evaluate between epochs (after end_epoch) or after fit",
             epoch());
  evaluating_ = true;
  phase_ = Split::valid;
  s.step = 0;
  s.reset(Split::valid);
  s.phase_start = s.last_step_end = Clock::now();
}

MetricValues Session::end_evaluation() {
  Impl& s = *impl_;
  KILN_CHECK(evaluating_, "Learner::evaluate: no evaluation in progress");
  evaluating_ = false;
  s.combine_across_ranks(ranks_, Split::valid);
  return s.values(Split::valid);
}

StepRecord Session::record_step(Split split, const StepInput& input) {
  Impl& s = *impl_;
  KILN_CHECK(in_phase(split), "Learner: a {} step outside the {} phase of an epoch", split_name(split),
             split_name(split));
  const auto now = Clock::now();
  StepInfo info;
  info.split = split;
  info.epoch = evaluating_ ? std::max<std::int64_t>(epoch(), 1) : epoch();
  info.step = ++s.step;
  if (split == Split::train) {
    ++s.epoch_train_steps;
    ++s.global_step;
  }
  info.global_step = s.global_step;
  info.loss = input.loss;
  info.output = input.output;
  info.targets = input.targets;
  info.items = input.items;
  info.lr = input.lr;
  info.seconds = seconds_between(s.last_step_end, now);
  info.phase_seconds = seconds_between(s.phase_start, now);
  s.last_step_end = now;

  StepRecord record{split, info.epoch, info.step, info.global_step, input.loss, input.lr, {}};
  auto& totals = s.totals(split);
  auto& last = s.last(split);
  for (std::size_t i = 0; i < s.metrics.size(); ++i) {
    if (!s.metrics[i]->applies_to(split)) continue;
    if (const auto v = s.metrics[i]->update(info)) {
      totals[i].add(*v);
      last[i] = v->value;
      record.values.set(s.metrics[i]->name(), v->value);
    }
  }
  if (split == Split::train) {
    s.train_step_seconds += info.seconds;
    ++s.timed_train_steps;
    if (std::isfinite(input.loss)) s.loss_curve.add(static_cast<double>(s.global_step), input.loss);
    if (s.scheduler) s.scheduler->step();
  } else {
    s.valid_step_seconds += info.seconds;
    ++s.timed_valid_steps;
  }
  if (evaluating_) return record;  // no logs, no dashboard
  if (s.log) s.log->step(split, info.epoch, info.step, info.global_step, record.values);
  bool stop = InterruptGuard::requested();
  if (ranks_.world_size > 1) {  // every rank stops after the same step
    double flag = stop ? 1.0 : 0.0;
    ranks_.max(std::span<double>(&flag, 1));
    stop = flag > 0;
  }
  if (stop && !s.interrupted) {
    s.interrupted = true;
    s.dashboard.message(checkpointing() ? "Ctrl-C: stopping after this step and saving a checkpoint"
                                        : "Ctrl-C: stopping after this step");
  }
  const std::int64_t steps = split == Split::train ? s.train_steps : s.valid_steps;
  if (s.dashboard.wants_update(info.step, steps)) s.dashboard.update(snapshot());
  return record;
}

EpochSummary Session::end_epoch() {
  Impl& s = *impl_;
  KILN_CHECK(in_epoch_, "Learner::end_epoch: no epoch in progress; call begin_epoch() first");
  if (!s.train_done) {
    s.train_done = true;
    s.rng_after_train = random_state();
    if (s.train_steps == 0) s.train_steps = s.epoch_train_steps;
  }
  if (phase_ == Split::valid && s.valid_steps == 0) s.valid_steps = s.step;
  s.combine_across_ranks(ranks_, Split::train);
  if (phase_ == Split::valid) s.combine_across_ranks(ranks_, Split::valid);
  EpochSummary summary;
  EpochRecord& record = summary.record;
  record.epoch = epoch();
  record.global_step = s.global_step;
  record.train = s.values(Split::train);
  record.valid = phase_ == Split::valid ? s.values(Split::valid) : MetricValues{};
  history_.push_back(record);
  finished_epochs_ = record.epoch;
  in_epoch_ = false;

  if (s.log) {
    s.log->epoch(record.epoch, Split::train, record.global_step, record.train);
    if (!record.valid.empty()) s.log->epoch(record.epoch, Split::valid, record.global_step, record.valid);
  }
  // The metric a decision watches, with a sentence when the epoch lacks it.
  auto watched = [&](const std::string& metric, Split split, const char* who) {
    const auto v = (split == Split::train ? record.train : record.valid).get(metric);
    KILN_CHECK(v.has_value(), "{} watches the {} {}, which epoch {} does not have{}", who, split_name(split), metric,
               record.epoch,
               split == Split::valid ? " (fit without validation data has no valid metrics; watch Split::train)" : "");
    return *v;
  };
  if (options_.best_model) {
    const BestModel& b = *options_.best_model;
    const double v = watched(b.metric, b.split, "BestModel");
    if (std::isfinite(v) && improves(v, s.best_value, b.goal, 0)) {
      s.best_value = v;
      s.best_epoch = record.epoch;
      summary.new_best = wants_best_model();
    }
  }
  if (options_.keep_best_checkpoints) {
    const KeepBestCheckpoints& k = *options_.keep_best_checkpoints;
    (void)watched(k.metric, k.split, "KeepBestCheckpoints");
  }
  if (s.plateau) {
    const LrPlateau& p = *options_.plateau;
    const double before = s.plateau->current();
    const double after = s.plateau->step(watched(p.metric, p.split, "LrPlateau"));
    if (after != before)
      s.dashboard.message(fmt::format("plateau: the {} {} has not improved for {}; the rate is now {:.3g} (was {:.3g})",
                                      split_name(p.split), p.metric, counted(p.options.patience + 1, "epoch"), after,
                                      before));
  }
  if (options_.early_stopping) {
    const EarlyStopping& e = *options_.early_stopping;
    const double v = watched(e.metric, e.split, "EarlyStopping");
    if (std::isfinite(v) && improves(v, s.early_best, e.goal, e.min_delta)) {
      s.early_best = v;
      s.early_bad_epochs = 0;
    } else {
      ++s.early_bad_epochs;
    }
    if (s.early_bad_epochs >= e.patience) {
      s.early_stopped = true;
      summary.stop = true;
      s.dashboard.message(fmt::format("early stopping: the {} {} has not improved for {} (best {})",
                                      split_name(e.split), e.metric, counted(s.early_bad_epochs, "epoch"),
                                      s.early_best ? s.format(e.metric, *s.early_best) : "none"));
    }
  }
  write_learning_curves();
  s.dashboard.epoch_done(snapshot());
  return summary;
}

bool Session::interrupted() const { return impl_->interrupted; }
bool Session::early_stopped() const { return impl_->early_stopped; }

// ---- checkpoints

LearnerState Session::state() const {
  const Impl& s = *impl_;
  LearnerState st;
  st.run_id = s.run_id;
  st.global_step = s.global_step;
  st.history = history_;
  st.early_stopping_best = s.early_best;
  st.early_stopping_bad_epochs = s.early_bad_epochs;
  st.best_value = s.best_value;
  st.best_epoch = s.best_epoch;
  st.loss_curve = s.loss_curve.state();
  st.epoch_rng = s.epoch_rng;
  if (s.plateau) st.plateau = s.plateau->state();
  if (!in_epoch_) {
    st.epoch = finished_epochs_;
    st.train_steps = s.epoch_train_steps;
    st.train_done = st.epoch_done = finished_epochs_ > 0;
    st.rng = random_state();
    if (s.log) st.log_sizes = s.log->sizes();
  } else {
    st.epoch = epoch();
    st.train_steps = s.epoch_train_steps;
    st.train_done = s.train_done;
    // Interrupted in validation: the resumed run validates this epoch again, from where the
    // train phase ended.
    st.rng = s.train_done ? s.rng_after_train : random_state();
    if (s.log) st.log_sizes = s.train_done ? s.log_sizes_after_train : s.log->sizes();
    for (std::size_t i = 0; i < s.metrics.size(); ++i)
      if (s.train_totals[i].count > 0) st.train_partial.emplace_back(s.metrics[i]->name(), s.train_totals[i]);
  }
  return st;
}

fs::path Session::write_checkpoint(const store::NamedTensors& model, const store::NamedTensors& optimizer) {
  KILN_CHECK(!options_.output_dir.empty(), "Learner::save_checkpoint: LearnerOptions::output_dir is empty");
  if (!impl_->started) begin_run(impl_->epochs, 0, 0);
  if (!writes_files()) return {};
  impl_->last_checkpoint = train::write_checkpoint(options_.output_dir, model, optimizer, state(),
                                                   options_.keep_checkpoints, best_checkpoints());
  return impl_->last_checkpoint;
}

std::vector<std::string> Session::best_checkpoints() const {
  if (!options_.keep_best_checkpoints) return {};
  const KeepBestCheckpoints& k = *options_.keep_best_checkpoints;
  std::vector<std::pair<double, std::int64_t>> ranked;  // value, epoch
  for (const EpochRecord& r : history_)
    if (const auto v = (k.split == Split::train ? r.train : r.valid).get(k.metric); v && !std::isnan(*v))
      ranked.emplace_back(*v, r.epoch);
  std::stable_sort(ranked.begin(), ranked.end(), [&](const auto& a, const auto& b) {
    return k.goal == Goal::minimize ? a.first < b.first : a.first > b.first;
  });
  std::vector<std::string> names;
  for (std::size_t i = 0; i < ranked.size() && i < static_cast<std::size_t>(k.count); ++i) {
    LearnerState finished;
    finished.epoch = ranked[i].second;
    finished.epoch_done = true;
    names.push_back(checkpoint_name(finished));
  }
  return names;
}

std::optional<Checkpoint> Session::read_latest_checkpoint() const {
  KILN_CHECK(!options_.output_dir.empty(), "Learner::resume: LearnerOptions::output_dir is empty");
  return train::read_latest_checkpoint(options_.output_dir);
}

void Session::restore(const LearnerState& state) {
  Impl& s = *impl_;
  KILN_CHECK(!s.started && !in_epoch_ && history_.empty(),
             "Learner::resume: resume before training starts (the learner has already run)");
  restored_ = state;
  s.restored = true;
  if (!state.run_id.empty()) s.run_id = state.run_id;
  history_ = state.history;
  finished_epochs_ = state.epoch_done ? state.epoch : std::max<std::int64_t>(state.epoch - 1, 0);
  s.global_step = state.global_step;
  s.epoch_train_steps = state.train_steps;
  s.early_best = state.early_stopping_best;
  s.early_bad_epochs = state.early_stopping_bad_epochs;
  s.early_stopped = options_.early_stopping && s.early_bad_epochs >= options_.early_stopping->patience;
  s.best_value = state.best_value;
  s.best_epoch = state.best_epoch;
  s.loss_curve.restore(state.loss_curve);
  if (s.scheduler) s.scheduler->seek(state.global_step);
  if (s.plateau && state.plateau) s.plateau->restore(*state.plateau);
  set_random_state(state.rng);
  s.epoch_rng = state.epoch_rng;
  if (state.epoch == 0 || state.epoch_done) resume_ = Resume::next_epoch;
  else resume_ = state.train_done ? Resume::valid : Resume::train;
}

bool Session::checkpointing() const { return options_.checkpoints && !options_.output_dir.empty() && writes_files(); }

bool Session::wants_best_model() const {
  return options_.best_model.has_value() && !options_.output_dir.empty() && writes_files();
}

void Session::write_best_model(const store::NamedTensors& model) {
  KILN_CHECK(wants_best_model(), "Learner: no best model is kept (set LearnerOptions::best_model and output_dir)");
  const BestModel& b = *options_.best_model;
  store::SafetensorsWriteOptions write;
  write.metadata = {{"epoch", fmt::format("{}", impl_->best_epoch)},
                    {"metric", fmt::format("{} {}", split_name(b.split), b.metric)},
                    {"value", fmt::format("{}", impl_->best_value.value_or(NAN))}};
  store::save_safetensors(options_.output_dir / "best.safetensors", model, write);
}

void Session::message(const std::string& text) { impl_->dashboard.message(text); }

// ---- the dashboard's view

DashboardState Session::snapshot() const {
  const Impl& s = *impl_;
  const auto now = Clock::now();
  DashboardState d;
  d.title = options_.title;
  d.split = phase_;
  d.epoch = std::max<std::int64_t>(epoch(), 1);
  d.epochs = s.epochs;
  d.step = s.step;
  d.steps = phase_ == Split::train ? s.train_steps : s.valid_steps;
  d.phase_seconds = seconds_between(in_epoch_ ? s.phase_start : s.epoch_start, now);
  if (!in_epoch_) d.step = d.steps > 0 ? d.steps : d.step;
  if (d.steps > 0 && d.step > 0) d.phase_eta_seconds = d.phase_seconds / static_cast<double>(d.step) * static_cast<double>(d.steps - d.step);
  if (!in_epoch_) d.phase_eta_seconds = 0;

  // The run: train and valid steps of every epoch.
  const std::int64_t per_epoch = saturating_add(s.train_steps, s.valid_steps);
  const std::int64_t e = d.epoch;
  std::int64_t in_this = 0;
  if (in_epoch_) in_this = phase_ == Split::train ? s.step : saturating_add(s.train_steps, s.step);
  else in_this = per_epoch;
  d.run_step = saturating_add(saturating_mul(e - 1, per_epoch), in_this);
  if (s.train_steps > 0 && s.epochs > 0) d.run_steps = saturating_mul(s.epochs, per_epoch);
  d.run_seconds = seconds_between(s.run_start, now);
  if (d.run_steps > 0 && s.timed_train_steps > 0) {
    const double t_train = s.train_step_seconds / static_cast<double>(s.timed_train_steps);
    const double t_valid = s.timed_valid_steps > 0 ? s.valid_step_seconds / static_cast<double>(s.timed_valid_steps) : t_train;
    const std::int64_t later = std::max<std::int64_t>(s.epochs - e, 0);
    std::int64_t train_left = saturating_mul(later, s.train_steps), valid_left = saturating_mul(later, s.valid_steps);
    if (in_epoch_ && phase_ == Split::train) {
      train_left = saturating_add(train_left, std::max<std::int64_t>(s.train_steps - s.step, 0));
      valid_left = saturating_add(valid_left, s.valid_steps);
    } else if (in_epoch_) {
      valid_left = saturating_add(valid_left, std::max<std::int64_t>(s.valid_steps - s.step, 0));
    }
    d.run_eta_seconds = static_cast<double>(train_left) * t_train + static_cast<double>(valid_left) * t_valid;
  }

  const EpochRecord* previous = history_.empty() ? nullptr : &history_.back();
  for (std::size_t i = 0; i < s.metrics.size(); ++i) {
    const Metric& m = *s.metrics[i];
    DashboardState::MetricRow row;
    row.name = m.name();
    const auto& last = phase_ == Split::train ? s.train_last : s.valid_last;
    if (i < last.size() && !std::isnan(last[i])) row.last = m.format(last[i]);
    if (i < s.train_totals.size() && s.train_totals[i].count > 0)
      row.train = m.format(s.train_totals[i].value(m.aggregate()));
    if (i < s.valid_totals.size() && s.valid_totals[i].count > 0) {
      row.valid = m.format(s.valid_totals[i].value(m.aggregate()));
    } else if (previous != nullptr && m.applies_to(Split::valid)) {
      if (const auto v = previous->valid.get(row.name)) row.valid = m.format(*v);
    }
    if (row.last.empty() && row.train.empty() && row.valid.empty()) continue;
    d.metrics.push_back(std::move(row));
  }

  d.train_loss = s.loss_curve.points();
  for (const EpochRecord& r : history_)
    if (const auto v = r.valid.get("loss")) d.valid_loss.emplace_back(static_cast<double>(r.global_step), *v);

  // The epoch table: loss and accuracy of each phase that has them, and the epoch's time.
  struct Column {
    std::string title, metric;
    Split split;
  };
  std::vector<Column> columns;
  for (const auto& [metric_name, label] : {std::pair{"loss", "loss"}, std::pair{"accuracy", "acc"}})
    for (const Split split : {Split::train, Split::valid})
      if (const std::string metric = metric_name;  // a lambda may not capture a binding before Clang 16
          std::any_of(history_.begin(), history_.end(), [&](const EpochRecord& r) {
            return (split == Split::train ? r.train : r.valid).get(metric).has_value();
          }))
        columns.push_back({fmt::format("{} {}", split_name(split), label), metric, split});
  d.epoch_columns.push_back("epoch");
  for (const Column& c : columns) d.epoch_columns.push_back(c.title);
  const bool timed = s.find("epoch_time_s") != nullptr;
  if (timed) d.epoch_columns.push_back("time");
  for (const EpochRecord& r : history_) {
    std::vector<std::string> cells{fmt::format("{}", r.epoch)};
    for (const Column& c : columns) {
      const auto v = (c.split == Split::train ? r.train : r.valid).get(c.metric);
      cells.push_back(v ? s.format(c.metric, *v) : "-");
    }
    if (timed) {
      const double t = r.train.get("epoch_time_s").value_or(0) + r.valid.get("epoch_time_s").value_or(0);
      cells.push_back(format_duration(t));
    }
    d.epoch_rows.push_back(std::move(cells));
  }

  // (Ctrl-C, early stopping and the end of the run are the dashboard's messages, which
  // take the status line's place.)
  if (InterruptGuard::active())
    d.status = checkpointing() ? "Ctrl-C stops after the current step and saves a checkpoint"
                               : "Ctrl-C stops after the current step";
  return d;
}

// The learning-curve chart of the run so far, with the training loss within epochs: the
// loss curve's points (x: global train step) in epochs, from the steps an epoch takes.
void Session::write_learning_curves() {
  if (options_.output_dir.empty() || !writes_files()) return;
  const Impl& s = *impl_;
  std::int64_t steps_per_epoch = s.train_steps;
  if (!history_.empty() && history_.back().epoch > 0) steps_per_epoch = history_.back().global_step / history_.back().epoch;
  std::vector<std::pair<double, double>> train_loss;
  if (steps_per_epoch > 0)
    for (const auto& [step, loss] : s.loss_curve.points())
      train_loss.emplace_back(step / static_cast<double>(steps_per_epoch), loss);
  write_file_atomically(options_.output_dir / "learning_curves.svg",
                        learning_curves_svg(history_, {"loss", "accuracy"}, options_.title, train_loss));
}

FitResult Session::finish(StopReason reason) {
  Impl& s = *impl_;
  if (!s.started) begin_run(s.epochs, 0, 0);
  write_learning_curves();
  if (s.log) (void)s.log->sizes();  // flushed
  FitResult result;
  result.reason = reason;
  result.epochs = finished_epochs_;
  result.global_step = s.global_step;
  result.best_value = s.best_value;
  result.best_epoch = s.best_epoch;
  result.checkpoint = s.last_checkpoint;
  std::string text = fmt::format("[done] {} after {} ({})", stop_reason_name(reason),
                                 counted(finished_epochs_, "epoch"), counted(s.global_step, "train step"));
  if (options_.best_model && s.best_value)
    text += fmt::format("; best {} {} {} at epoch {}", split_name(options_.best_model->split),
                        options_.best_model->metric, s.format(options_.best_model->metric, *s.best_value),
                        s.best_epoch);
  if (!s.last_checkpoint.empty()) text += fmt::format("; checkpoint {}", s.last_checkpoint.string());
  s.dashboard.message(text);
  s.dashboard.finish(snapshot());
  print_epoch_summary();
  return result;
}

// The table of the run's epochs: a row per epoch, a column per metric and phase that some
// epoch has, right-aligned, each value as its metric formats it.
void Session::print_epoch_summary() {
  const Impl& s = *impl_;
  if (!options_.epoch_summary || s.dashboard.mode() == DashboardMode::none || history_.empty()) return;
  std::vector<std::pair<std::string, Split>> columns;
  for (const Split split : {Split::train, Split::valid})
    for (const auto& m : s.metrics)
      if (std::any_of(history_.begin(), history_.end(), [&](const EpochRecord& r) {
            return (split == Split::train ? r.train : r.valid).get(m->name()).has_value();
          }))
        columns.emplace_back(m->name(), split);
  std::vector<std::vector<std::string>> rows;
  rows.emplace_back(std::vector<std::string>{"epoch"});
  for (const auto& [name, split] : columns) rows[0].push_back(fmt::format("{} {}", split_name(split), name));
  for (const EpochRecord& r : history_) {
    std::vector<std::string> cells{fmt::format("{}", r.epoch)};
    for (const auto& [name, split] : columns) {
      const auto v = (split == Split::train ? r.train : r.valid).get(name);
      cells.push_back(v ? s.format(name, *v) : "-");
    }
    rows.push_back(std::move(cells));
  }
  std::vector<std::size_t> widths(rows[0].size(), 0);
  for (const auto& row : rows)
    for (std::size_t i = 0; i < row.size(); ++i) widths[i] = std::max(widths[i], row[i].size());
  auto line = [&](const std::vector<std::string>& row) {
    std::string out = "|";
    for (std::size_t i = 0; i < row.size(); ++i) out += fmt::format(" {:>{}} |", row[i], widths[i]);
    return out + "\n";
  };
  std::string text = line(rows[0]) + "|";
  for (const std::size_t w : widths) text += std::string(w + 1, '-') + ":|";
  text += "\n";
  for (std::size_t i = 1; i < rows.size(); ++i) text += line(rows[i]);
  std::ostream& out = options_.console != nullptr ? *options_.console : std::cout;
  out << text << std::flush;
}

}  // namespace detail
}  // namespace kiln::train
