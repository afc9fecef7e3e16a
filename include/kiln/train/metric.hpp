// Training metrics: what a metric sees of one step (StepInfo), the Metric interface, the
// built-in metrics (loss, accuracy, top-k accuracy, learning rate, throughput, epoch time,
// CPU use, memory) and the per-epoch aggregation of per-step values. Plain host code,
// compiled into kiln::train; a metric never sees a tensor of a backend, only host copies.
#pragma once

#include "kiln/core/tensor_data.hpp"

#include <cmath>
#include <cstdint>
#include <limits>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace kiln::train {

// The two phases of an epoch.
enum class Split { train, valid };
std::string_view split_name(Split split);

// What one step gives the metrics. `output` and `targets` are host copies of the step's
// scores [N, C] and class indices [N] (or one-hot / probabilities [N, C]); they are null
// when the step did not give them or when no metric asked for them (Metric::needs_outputs).
struct StepInfo {
  Split split = Split::train;
  std::int64_t epoch = 1;        // 1-based
  std::int64_t step = 1;         // 1-based, within this epoch's phase
  std::int64_t global_step = 0;  // train steps done in the run, this one included
  double loss = std::numeric_limits<double>::quiet_NaN();
  const TensorData* output = nullptr;
  const TensorData* targets = nullptr;
  std::int64_t items = 1;      // examples in the batch
  double lr = std::numeric_limits<double>::quiet_NaN();  // the rate this train step used
  double seconds = 0;          // wall time since the previous step ended (data loading included)
  double phase_seconds = 0;    // wall time since this epoch's phase began
};

// How an epoch combines the per-step values of a metric.
enum class Aggregate {
  mean,  // the weighted mean: sum(value * weight) / sum(weight)
  last,  // the value of the last step
  max,   // the largest value
};

// One step's value and its weight in the epoch's mean (a batch's example count, a step's
// duration).
struct MetricValue {
  double value = 0;
  double weight = 1;
};

// How the ranks of a data-parallel run (Learner::distribute) combine their values of an
// epoch's phase into the one the logs show: the mean (for a metric aggregated by its mean,
// the weighted mean over every rank's steps, which is exact; else the mean of the ranks'
// values), the sum (examples per second, CPU use) or the largest (memory, time).
enum class AcrossRanks { mean, sum, max };

// A metric: a name (a CSV column, a JSON key: letters, digits and '_'), how its value reads,
// how an epoch aggregates it, and its value for one step. Per-step values are aggregated by
// the learner, not by the metric, so that a checkpoint can save an epoch's partial sums.
class Metric {
 public:
  virtual ~Metric() = default;
  virtual std::string name() const = 0;
  // The value as the dashboard and the logs show it ("0.4321", "87.50%").
  virtual std::string format(double value) const;
  virtual Aggregate aggregate() const { return Aggregate::mean; }
  // Whether update needs StepInfo::output and targets (a host copy of the outputs per step).
  virtual bool needs_outputs() const { return false; }
  // Whether the metric has values in this phase (the learning rate has none in validation).
  virtual bool applies_to(Split) const { return true; }
  // Called when a phase of an epoch begins (a metric that measures time resets its clock).
  virtual void begin(Split) {}
  // This step's value, or nothing when the step lacks what the metric needs.
  virtual std::optional<MetricValue> update(const StepInfo& step) = 0;

  // ---- data-parallel runs
  virtual AcrossRanks across_ranks() const { return AcrossRanks::mean; }
  // A metric computed from counts over the phase (a confusion matrix, summed errors) gives
  // them here; the ranks' counts are summed and value_of_counts gives the whole run's value,
  // exact where a mean of the ranks' values would not be. Empty: not such a metric.
  virtual std::vector<double> phase_counts() const { return {}; }
  virtual std::optional<double> value_of_counts(std::span<const double>) const { return std::nullopt; }
};

// ---- the built-in metrics

// The step's loss, weighted by its example count.
class LossMetric final : public Metric {
 public:
  std::string name() const override { return "loss"; }
  std::string format(double value) const override;
  std::optional<MetricValue> update(const StepInfo& step) override;
};

// The share of examples whose highest score is the target class, in percent; TopKAccuracy:
// whose target is among the k highest scores (ties count for the lower class index, as
// torch.topk's stable order).
class AccuracyMetric final : public Metric {
 public:
  std::string name() const override { return "accuracy"; }
  std::string format(double value) const override;
  bool needs_outputs() const override { return true; }
  std::optional<MetricValue> update(const StepInfo& step) override;
};

class TopKAccuracyMetric final : public Metric {
 public:
  explicit TopKAccuracyMetric(std::int64_t k);
  std::string name() const override;  // "top5_accuracy"
  std::string format(double value) const override;
  bool needs_outputs() const override { return true; }
  std::optional<MetricValue> update(const StepInfo& step) override;

 private:
  std::int64_t k_;
};

// The learning rate of the train step (the epoch shows the last one).
class LearningRateMetric final : public Metric {
 public:
  std::string name() const override { return "lr"; }
  std::string format(double value) const override;
  Aggregate aggregate() const override { return Aggregate::last; }
  bool applies_to(Split split) const override { return split == Split::train; }
  std::optional<MetricValue> update(const StepInfo& step) override;
};

// Examples per second; weighted by each step's time, so the epoch's value is all its
// examples over all its time.
class ThroughputMetric final : public Metric {
 public:
  std::string name() const override { return "items_per_s"; }
  std::string format(double value) const override;
  AcrossRanks across_ranks() const override { return AcrossRanks::sum; }
  std::optional<MetricValue> update(const StepInfo& step) override;
};

// Seconds since the phase began (the epoch shows its duration).
class EpochTimeMetric final : public Metric {
 public:
  std::string name() const override { return "epoch_time_s"; }
  std::string format(double value) const override;
  Aggregate aggregate() const override { return Aggregate::last; }
  AcrossRanks across_ranks() const override { return AcrossRanks::max; }
  std::optional<MetricValue> update(const StepInfo& step) override;
};

// The process's CPU time (user + system, getrusage) over wall time since the previous step,
// in percent of one core: 200% is two cores kept busy.
class CpuMetric final : public Metric {
 public:
  std::string name() const override { return "cpu_percent"; }
  std::string format(double value) const override;
  AcrossRanks across_ranks() const override { return AcrossRanks::sum; }
  void begin(Split) override;
  std::optional<MetricValue> update(const StepInfo& step) override;

 private:
  double cpu_seconds_ = -1;
  double wall_seconds_ = -1;
};

// The process's resident memory (VmRSS of /proc/self/status) in MiB; the epoch shows its peak.
class MemoryMetric final : public Metric {
 public:
  std::string name() const override { return "memory_mib"; }
  std::string format(double value) const override;
  Aggregate aggregate() const override { return Aggregate::max; }
  AcrossRanks across_ranks() const override { return AcrossRanks::max; }
  std::optional<MetricValue> update(const StepInfo& step) override;
};

// loss, accuracy, lr, items_per_s, epoch_time_s, cpu_percent, memory_mib.
std::vector<std::unique_ptr<Metric>> default_metrics();

// ---- classification over a whole phase: precision, recall, F-beta (scikit-learn's)

// How per-class scores combine, as scikit-learn's `average`: binary (class 1 of two classes),
// macro (the plain mean over the classes present in the targets or the predictions), micro
// (from the counts summed over classes), weighted (the mean weighted by each class's count
// in the targets).
enum class Average { binary, macro, micro, weighted };
std::string_view average_name(Average average);

// Counts of (true class, predicted class) pairs; a prediction is the highest score (equal
// scores: the lower class index). The class count comes from the first scores added.
class ConfusionMatrix {
 public:
  // Adds a batch: scores [N, C] and targets as class indices [N] or one-hot / probabilities
  // [N, C]. Shapes that do not fit (or another C than before) are a kiln::Error naming them.
  void add(const TensorData& scores, const TensorData& targets);
  void clear() { counts_.clear(), classes_ = 0; }
  // The counts by [true * classes + predicted], and a matrix made of such counts.
  const std::vector<std::int64_t>& counts() const { return counts_; }
  static ConfusionMatrix from_counts(std::int64_t classes, std::vector<std::int64_t> counts);
  std::int64_t classes() const { return classes_; }
  std::int64_t count(std::int64_t true_class, std::int64_t predicted) const;
  std::int64_t total() const;
  // 0 where a ratio has nothing to divide by (scikit-learn's zero_division default).
  double precision(Average average) const;
  double recall(Average average) const;
  double fbeta(double beta, Average average) const;

 private:
  struct PerClass {
    double tp = 0, fp = 0, fn = 0, support = 0;
  };
  std::vector<PerClass> per_class() const;
  double combine(Average average, double beta, int which) const;

  std::int64_t classes_ = 0;
  std::vector<std::int64_t> counts_;  // [true * classes + predicted]
};

// Precision, recall or F-beta of a phase: the confusion matrix of every step so far, so the
// epoch's value (Aggregate::last) is that of all its examples, not a mean of batch values.
// Named "precision_macro", "recall_weighted", "f1_micro", "f0_5_binary" (beta 0.5)... The counts start
// over at each phase; a run resumed in the middle of a phase counts from its resumed steps.
class ClassificationMetric final : public Metric {
 public:
  enum class Kind { precision, recall, fbeta };
  ClassificationMetric(Kind kind, Average average, double beta = 1.0);
  std::string name() const override;
  std::string format(double value) const override;
  Aggregate aggregate() const override { return Aggregate::last; }
  bool needs_outputs() const override { return true; }
  void begin(Split) override { matrix_.clear(); }
  std::optional<MetricValue> update(const StepInfo& step) override;
  std::vector<double> phase_counts() const override;
  std::optional<double> value_of_counts(std::span<const double> counts) const override;
  const ConfusionMatrix& matrix() const { return matrix_; }

 private:
  std::optional<double> value_of(const ConfusionMatrix& matrix) const;
  Kind kind_;
  Average average_;
  double beta_;
  ConfusionMatrix matrix_;
};
std::unique_ptr<Metric> precision_metric(Average average = Average::macro);
std::unique_ptr<Metric> recall_metric(Average average = Average::macro);
std::unique_ptr<Metric> fbeta_metric(double beta = 1.0, Average average = Average::macro);

// ---- the computations behind the metrics, for direct use

// The number of rows of `scores` [N, C] whose target (`targets`: [N] class indices, or
// [N, C] one-hot / probabilities, whose largest entry is the class) is among the k highest
// scores. Equal scores rank by class index (the lower first). Errors name the shapes.
std::int64_t count_top_k_correct(const TensorData& scores, const TensorData& targets, std::int64_t k);

// Resident set size of this process in bytes (VmRSS in /proc/self/status); 0 where unknown.
std::uint64_t resident_memory_bytes();
// User + system CPU time of this process in seconds (getrusage).
double process_cpu_seconds();

// ---- aggregation

// The running aggregate of one metric over an epoch's phase.
struct Aggregator {
  double weighted_sum = 0;
  double weight = 0;
  double last = std::numeric_limits<double>::quiet_NaN();
  double max = -std::numeric_limits<double>::infinity();
  std::int64_t count = 0;

  void add(const MetricValue& v);
  // The epoch's value so far, by `how`; NaN before any step.
  double value(Aggregate how) const;
};

// Metric values by name, in the order the metrics were added.
class MetricValues {
 public:
  void set(std::string_view name, double value);
  std::optional<double> get(std::string_view name) const;
  bool empty() const { return values_.empty(); }
  const std::vector<std::pair<std::string, double>>& entries() const { return values_; }

 private:
  std::vector<std::pair<std::string, double>> values_;
};

// One finished epoch: each phase's aggregated metrics.
struct EpochRecord {
  std::int64_t epoch = 0;        // 1-based
  std::int64_t global_step = 0;  // train steps of the run at the epoch's end
  MetricValues train, valid;
};

}  // namespace kiln::train
