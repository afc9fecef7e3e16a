#include "kiln/train/metric.hpp"

#include "kiln/core/error.hpp"

#include <fmt/format.h>
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>

namespace kiln::train {
namespace {

double wall_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// Row `row` of targets [N] (class indices) or [N, C] (one-hot / probabilities: the largest).
std::int64_t target_class(const std::vector<double>& targets, std::int64_t row, std::int64_t width) {
  if (width == 0) return static_cast<std::int64_t>(targets[static_cast<std::size_t>(row)]);
  const auto first = targets.begin() + row * width;
  return std::max_element(first, first + width) - first;
}

}  // namespace

std::string_view split_name(Split split) { return split == Split::train ? "train" : "valid"; }

std::string Metric::format(double value) const { return fmt::format("{:.4g}", value); }

// ---- loss, accuracy

std::string LossMetric::format(double value) const { return fmt::format("{:.4f}", value); }

std::optional<MetricValue> LossMetric::update(const StepInfo& step) {
  if (std::isnan(step.loss)) return std::nullopt;
  return MetricValue{step.loss, static_cast<double>(std::max<std::int64_t>(step.items, 1))};
}

namespace {
// Scores [N, C] and targets that fit them (class indices [N] or rows [N, C]), or an error of
// `op` naming both shapes.
struct ScoresAndTargets {
  std::int64_t n, classes;
  bool indices;
};
ScoresAndTargets check_scores(std::string_view op, const TensorData& scores, const TensorData& targets) {
  KILN_CHECK(scores.shape().rank() == 2, "{}: the scores must be [N, C], got shape {}", op, scores.shape());
  const std::int64_t n = scores.shape()[0], classes = scores.shape()[1];
  const bool indices = targets.shape().rank() == 1;
  KILN_CHECK((indices && targets.shape()[0] == n) ||
                 (targets.shape().rank() == 2 && targets.shape()[0] == n && targets.shape()[1] == classes),
             "{}: the targets must be class indices [{}] or one-hot / probabilities [{}, {}] for scores {}, got "
             "shape {}",
             op, n, n, classes, scores.shape(), targets.shape());
  return {n, classes, indices};
}
}  // namespace

std::int64_t count_top_k_correct(const TensorData& scores, const TensorData& targets, std::int64_t k) {
  KILN_CHECK(k >= 1, "top-k accuracy: k must be >= 1, got {}", k);
  const auto [n, classes, indices] = check_scores("accuracy", scores, targets);
  const std::vector<double> s = scores.to_vec<double>();
  const std::vector<double> t = targets.to_vec<double>();
  std::int64_t correct = 0;
  for (std::int64_t row = 0; row < n; ++row) {
    const std::int64_t target = target_class(t, row, indices ? 0 : classes);
    KILN_CHECK(target >= 0 && target < classes, "accuracy: target {} of row {} is not a class of scores {}", target,
               row, scores.shape());
    const double* r = s.data() + row * classes;
    // The target's rank: classes scoring higher, and equal ones of a lower index, come first.
    std::int64_t ahead = 0;
    for (std::int64_t c = 0; c < classes && ahead < k; ++c)
      if (r[c] > r[target] || (r[c] == r[target] && c < target)) ++ahead;
    if (ahead < k) ++correct;
  }
  return correct;
}

std::string AccuracyMetric::format(double value) const { return fmt::format("{:.2f}%", value); }

// ---- precision, recall, F-beta

std::string_view average_name(Average average) {
  switch (average) {
    case Average::binary: return "binary";
    case Average::macro: return "macro";
    case Average::micro: return "micro";
    case Average::weighted: return "weighted";
  }
  return "?";
}

ConfusionMatrix ConfusionMatrix::from_counts(std::int64_t classes, std::vector<std::int64_t> counts) {
  KILN_CHECK(classes >= 0 && static_cast<std::int64_t>(counts.size()) == classes * classes,
             "ConfusionMatrix::from_counts: {} counts for {} classes (it takes classes² counts)", counts.size(), classes);
  ConfusionMatrix matrix;
  matrix.classes_ = classes;
  matrix.counts_ = std::move(counts);
  return matrix;
}

void ConfusionMatrix::add(const TensorData& scores, const TensorData& targets) {
  const auto [n, classes, indices] = check_scores("ConfusionMatrix", scores, targets);
  KILN_CHECK(classes >= 1, "ConfusionMatrix: the scores {} have no class", scores.shape());
  KILN_CHECK(classes_ == 0 || classes_ == classes, "ConfusionMatrix: scores {} have {} classes, earlier ones had {}",
             scores.shape(), classes, classes_);
  if (classes_ == 0) {
    classes_ = classes;
    counts_.assign(static_cast<std::size_t>(classes * classes), 0);
  }
  const std::vector<double> s = scores.to_vec<double>();
  const std::vector<double> t = targets.to_vec<double>();
  for (std::int64_t row = 0; row < n; ++row) {
    const std::int64_t target = target_class(t, row, indices ? 0 : classes);
    KILN_CHECK(target >= 0 && target < classes, "ConfusionMatrix: target {} of row {} is not a class of scores {}",
               target, row, scores.shape());
    const double* r = s.data() + row * classes;
    const std::int64_t predicted = std::max_element(r, r + classes) - r;  // the first of equal maxima
    ++counts_[static_cast<std::size_t>(target * classes + predicted)];
  }
}

std::int64_t ConfusionMatrix::count(std::int64_t true_class, std::int64_t predicted) const {
  KILN_CHECK(true_class >= 0 && true_class < classes_ && predicted >= 0 && predicted < classes_,
             "ConfusionMatrix::count: ({}, {}) is outside {} classes", true_class, predicted, classes_);
  return counts_[static_cast<std::size_t>(true_class * classes_ + predicted)];
}

std::int64_t ConfusionMatrix::total() const {
  std::int64_t sum = 0;
  for (const std::int64_t c : counts_) sum += c;
  return sum;
}

std::vector<ConfusionMatrix::PerClass> ConfusionMatrix::per_class() const {
  std::vector<PerClass> out(static_cast<std::size_t>(classes_));
  for (std::int64_t t = 0; t < classes_; ++t)
    for (std::int64_t p = 0; p < classes_; ++p) {
      const auto c = static_cast<double>(counts_[static_cast<std::size_t>(t * classes_ + p)]);
      out[static_cast<std::size_t>(t)].support += c;
      if (t == p) out[static_cast<std::size_t>(t)].tp += c;
      else out[static_cast<std::size_t>(p)].fp += c, out[static_cast<std::size_t>(t)].fn += c;
    }
  return out;
}

namespace {
double ratio(double a, double b) { return b > 0 ? a / b : 0.0; }
// which: 0 precision, 1 recall, 2 F-beta.
double score_of(double tp, double fp, double fn, double beta, int which) {
  const double p = ratio(tp, tp + fp), r = ratio(tp, tp + fn);
  if (which == 0) return p;
  if (which == 1) return r;
  const double b2 = beta * beta;
  return ratio((1 + b2) * p * r, b2 * p + r);
}
}  // namespace

double ConfusionMatrix::combine(Average average, double beta, int which) const {
  KILN_CHECK(classes_ > 0, "ConfusionMatrix: no examples were added");
  KILN_CHECK(std::isfinite(beta) && beta >= 0, "fbeta: beta must be finite and >= 0, got {}", beta);
  const std::vector<PerClass> classes = per_class();
  switch (average) {
    case Average::binary: {
      KILN_CHECK(classes_ == 2, "{} with Average::binary needs two classes (class 1 is the positive one), got {}",
                 which == 0 ? "precision" : which == 1 ? "recall" : "fbeta", classes_);
      return score_of(classes[1].tp, classes[1].fp, classes[1].fn, beta, which);
    }
    case Average::micro: {
      double tp = 0, fp = 0, fn = 0;
      for (const PerClass& c : classes) tp += c.tp, fp += c.fp, fn += c.fn;
      return score_of(tp, fp, fn, beta, which);
    }
    case Average::macro:
    case Average::weighted: {
      double sum = 0, weight = 0;
      for (const PerClass& c : classes) {
        // Macro: the classes in the targets or the predictions, as scikit-learn's labels.
        const double w = average == Average::weighted ? c.support : (c.support + c.fp > 0 ? 1.0 : 0.0);
        sum += w * score_of(c.tp, c.fp, c.fn, beta, which);
        weight += w;
      }
      return ratio(sum, weight);
    }
  }
  return 0;
}

double ConfusionMatrix::precision(Average average) const { return combine(average, 1.0, 0); }
double ConfusionMatrix::recall(Average average) const { return combine(average, 1.0, 1); }
double ConfusionMatrix::fbeta(double beta, Average average) const { return combine(average, beta, 2); }

ClassificationMetric::ClassificationMetric(Kind kind, Average average, double beta)
    : kind_(kind), average_(average), beta_(beta) {
  KILN_CHECK(std::isfinite(beta) && beta > 0, "fbeta_metric: beta must be finite and > 0, got {}", beta);
}

std::string ClassificationMetric::name() const {
  std::string kind = kind_ == Kind::precision ? "precision" : kind_ == Kind::recall ? "recall" : fmt::format("f{}", beta_);
  std::replace(kind.begin(), kind.end(), '.', '_');  // a name is letters, digits and '_': "f0_5"
  return kind + "_" + std::string(average_name(average_));
}

std::string ClassificationMetric::format(double value) const { return fmt::format("{:.4f}", value); }

std::optional<double> ClassificationMetric::value_of(const ConfusionMatrix& matrix) const {
  if (matrix.total() == 0) return std::nullopt;
  switch (kind_) {
    case Kind::precision: return matrix.precision(average_);
    case Kind::recall: return matrix.recall(average_);
    case Kind::fbeta: return matrix.fbeta(beta_, average_);
  }
  return std::nullopt;
}

std::optional<MetricValue> ClassificationMetric::update(const StepInfo& step) {
  if (step.output == nullptr || step.targets == nullptr) return std::nullopt;
  matrix_.add(*step.output, *step.targets);
  const auto value = value_of(matrix_);
  if (!value) return std::nullopt;
  return MetricValue{*value, 1};
}

std::vector<double> ClassificationMetric::phase_counts() const {
  return std::vector<double>(matrix_.counts().begin(), matrix_.counts().end());
}

std::optional<double> ClassificationMetric::value_of_counts(std::span<const double> counts) const {
  const auto classes = static_cast<std::int64_t>(std::llround(std::sqrt(static_cast<double>(counts.size()))));
  if (classes == 0 || classes * classes != static_cast<std::int64_t>(counts.size())) return std::nullopt;
  std::vector<std::int64_t> whole(counts.size());
  for (std::size_t i = 0; i < counts.size(); ++i) whole[i] = std::llround(counts[i]);
  return value_of(ConfusionMatrix::from_counts(classes, std::move(whole)));
}

std::unique_ptr<Metric> precision_metric(Average average) {
  return std::make_unique<ClassificationMetric>(ClassificationMetric::Kind::precision, average);
}
std::unique_ptr<Metric> recall_metric(Average average) {
  return std::make_unique<ClassificationMetric>(ClassificationMetric::Kind::recall, average);
}
std::unique_ptr<Metric> fbeta_metric(double beta, Average average) {
  return std::make_unique<ClassificationMetric>(ClassificationMetric::Kind::fbeta, average, beta);
}

std::optional<MetricValue> AccuracyMetric::update(const StepInfo& step) {
  if (step.output == nullptr || step.targets == nullptr) return std::nullopt;
  const std::int64_t n = step.output->shape().rank() >= 1 ? step.output->shape()[0] : 0;
  if (n == 0) return std::nullopt;
  const auto correct = count_top_k_correct(*step.output, *step.targets, 1);
  return MetricValue{100.0 * static_cast<double>(correct) / static_cast<double>(n), static_cast<double>(n)};
}

TopKAccuracyMetric::TopKAccuracyMetric(std::int64_t k) : k_(k) {
  KILN_CHECK(k >= 1, "TopKAccuracyMetric: k must be >= 1, got {}", k);
}
std::string TopKAccuracyMetric::name() const { return fmt::format("top{}_accuracy", k_); }
std::string TopKAccuracyMetric::format(double value) const { return fmt::format("{:.2f}%", value); }

std::optional<MetricValue> TopKAccuracyMetric::update(const StepInfo& step) {
  if (step.output == nullptr || step.targets == nullptr) return std::nullopt;
  const std::int64_t n = step.output->shape().rank() >= 1 ? step.output->shape()[0] : 0;
  if (n == 0) return std::nullopt;
  const auto correct = count_top_k_correct(*step.output, *step.targets, k_);
  return MetricValue{100.0 * static_cast<double>(correct) / static_cast<double>(n), static_cast<double>(n)};
}

// ---- rate, speed, time

std::string LearningRateMetric::format(double value) const { return fmt::format("{:.2e}", value); }

std::optional<MetricValue> LearningRateMetric::update(const StepInfo& step) {
  if (std::isnan(step.lr)) return std::nullopt;
  return MetricValue{step.lr, 1};
}

std::string ThroughputMetric::format(double value) const {
  return value >= 100 ? fmt::format("{:.0f}/s", value) : fmt::format("{:.3g}/s", value);
}

std::optional<MetricValue> ThroughputMetric::update(const StepInfo& step) {
  if (!(step.seconds > 0)) return std::nullopt;
  return MetricValue{static_cast<double>(step.items) / step.seconds, step.seconds};
}

std::string EpochTimeMetric::format(double value) const { return fmt::format("{:.1f}s", value); }

std::optional<MetricValue> EpochTimeMetric::update(const StepInfo& step) { return MetricValue{step.phase_seconds, 1}; }

// ---- the process

std::string CpuMetric::format(double value) const { return fmt::format("{:.0f}%", value); }

void CpuMetric::begin(Split) {
  cpu_seconds_ = process_cpu_seconds();
  wall_seconds_ = wall_seconds();
}

std::optional<MetricValue> CpuMetric::update(const StepInfo&) {
  const double cpu = process_cpu_seconds(), wall = wall_seconds();
  std::optional<MetricValue> out;
  if (wall_seconds_ >= 0 && wall > wall_seconds_)
    out = MetricValue{100.0 * (cpu - cpu_seconds_) / (wall - wall_seconds_), wall - wall_seconds_};
  cpu_seconds_ = cpu;
  wall_seconds_ = wall;
  return out;
}

std::string MemoryMetric::format(double value) const { return fmt::format("{:.0f} MiB", value); }

std::optional<MetricValue> MemoryMetric::update(const StepInfo&) {
  const std::uint64_t bytes = resident_memory_bytes();
  if (bytes == 0) return std::nullopt;
  return MetricValue{static_cast<double>(bytes) / (1024.0 * 1024.0), 1};
}

std::uint64_t resident_memory_bytes() {
  std::FILE* file = std::fopen("/proc/self/status", "r");
  if (file == nullptr) return 0;
  char line[256];
  std::uint64_t kib = 0;
  while (std::fgets(line, sizeof line, file) != nullptr) {
    if (std::strncmp(line, "VmRSS:", 6) == 0) {
      kib = std::strtoull(line + 6, nullptr, 10);  // "VmRSS:	  123456 kB"
      break;
    }
  }
  std::fclose(file);
  return kib * 1024;
}

double process_cpu_seconds() {
  rusage usage{};
  if (getrusage(RUSAGE_SELF, &usage) != 0) return 0;
  auto seconds = [](const timeval& t) { return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_usec) * 1e-6; };
  return seconds(usage.ru_utime) + seconds(usage.ru_stime);
}

std::vector<std::unique_ptr<Metric>> default_metrics() {
  std::vector<std::unique_ptr<Metric>> metrics;
  metrics.push_back(std::make_unique<LossMetric>());
  metrics.push_back(std::make_unique<AccuracyMetric>());
  metrics.push_back(std::make_unique<LearningRateMetric>());
  metrics.push_back(std::make_unique<ThroughputMetric>());
  metrics.push_back(std::make_unique<EpochTimeMetric>());
  metrics.push_back(std::make_unique<CpuMetric>());
  metrics.push_back(std::make_unique<MemoryMetric>());
  return metrics;
}

// ---- aggregation

void Aggregator::add(const MetricValue& v) {
  weighted_sum += v.value * v.weight;
  weight += v.weight;
  last = v.value;
  max = std::max(max, v.value);
  ++count;
}

double Aggregator::value(Aggregate how) const {
  if (count == 0) return std::numeric_limits<double>::quiet_NaN();
  switch (how) {
    case Aggregate::mean: return weight > 0 ? weighted_sum / weight : last;
    case Aggregate::last: return last;
    case Aggregate::max: return max;
  }
  return last;
}

void MetricValues::set(std::string_view name, double value) {
  for (auto& [n, v] : values_)
    if (n == name) {
      v = value;
      return;
    }
  values_.emplace_back(std::string(name), value);
}

std::optional<double> MetricValues::get(std::string_view name) const {
  for (const auto& [n, v] : values_)
    if (n == name) return v;
  return std::nullopt;
}

}  // namespace kiln::train
