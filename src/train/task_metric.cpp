#include "kiln/train/task_metric.hpp"

#include "kiln/core/error.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <numeric>

namespace kiln::train {
namespace {

double ratio(double a, double b) { return b > 0 ? a / b : 0.0; }
double sigmoid(double x) { return 1.0 / (1.0 + std::exp(-x)); }

// Whether the values are logits: kind, or by torchmetrics' rule a value outside [0, 1].
bool are_logits(const std::vector<double>& values, Scores kind) {
  if (kind != Scores::auto_detect) return kind == Scores::logits;
  return std::any_of(values.begin(), values.end(), [](double v) { return v < 0.0 || v > 1.0; });
}

// Softmax of each row of `values` [rows, width], in place.
void softmax_rows(std::vector<double>& values, std::int64_t width) {
  for (std::size_t start = 0; start < values.size(); start += static_cast<std::size_t>(width)) {
    double* r = values.data() + start;
    const double top = *std::max_element(r, r + width);
    double sum = 0;
    for (std::int64_t c = 0; c < width; ++c) sum += (r[c] = std::exp(r[c] - top));
    for (std::int64_t c = 0; c < width; ++c) r[c] /= sum;
  }
}

}  // namespace

// ---- regression

void RegressionSums::add(const TensorData& output, const TensorData& targets) {
  const Shape& o = output.shape();
  const Shape& t = targets.shape();
  const bool same = o == t && (o.rank() == 1 || o.rank() == 2);
  const bool column = (o.rank() == 2 && t.rank() == 1 && o[1] == 1 && o[0] == t[0]) ||
                      (t.rank() == 2 && o.rank() == 1 && t[1] == 1 && o[0] == t[0]);
  KILN_CHECK(same || column, "regression metric: the output and targets must both be [N] or [N, D] of one shape, "
             "got output {} and targets {}", o, t);
  const std::int64_t n = o[0];
  const std::int64_t width = same && o.rank() == 2 ? o[1] : 1;
  KILN_CHECK(columns_.empty() || static_cast<std::int64_t>(columns_.size()) == width,
             "regression metric: output {} has {} columns, earlier ones had {}", o, width, columns_.size());
  if (n == 0) return;
  if (columns_.empty()) columns_.resize(static_cast<std::size_t>(width));
  const std::vector<double> p = output.to_vec<double>();
  const std::vector<double> y = targets.to_vec<double>();
  for (std::int64_t c = 0; c < width; ++c) {
    // This batch's column, merged into the running one (Chan et al.'s parallel variance).
    double abs_error = 0, squared_error = 0, mean = 0, m2 = 0;
    for (std::int64_t i = 0; i < n; ++i) {
      const auto k = static_cast<std::size_t>(i * width + c);
      const double e = p[k] - y[k];
      abs_error += std::abs(e);
      squared_error += e * e;
      const double d = y[k] - mean;
      mean += d / static_cast<double>(i + 1);
      m2 += d * (y[k] - mean);
    }
    Column& col = columns_[static_cast<std::size_t>(c)];
    const double na = static_cast<double>(n_), nb = static_cast<double>(n), delta = mean - col.mean;
    col.abs_error += abs_error;
    col.squared_error += squared_error;
    col.m2 += m2 + delta * delta * na * nb / (na + nb);
    col.mean += delta * nb / (na + nb);
  }
  n_ += n;
}

double RegressionSums::mae() const {
  KILN_CHECK(n_ > 0, "mae: no examples were added");
  double sum = 0;
  for (const Column& c : columns_) sum += c.abs_error / static_cast<double>(n_);
  return sum / static_cast<double>(columns_.size());
}

double RegressionSums::mse() const {
  KILN_CHECK(n_ > 0, "mse: no examples were added");
  double sum = 0;
  for (const Column& c : columns_) sum += c.squared_error / static_cast<double>(n_);
  return sum / static_cast<double>(columns_.size());
}

double RegressionSums::rmse() const {
  KILN_CHECK(n_ > 0, "rmse: no examples were added");
  double sum = 0;
  for (const Column& c : columns_) sum += std::sqrt(c.squared_error / static_cast<double>(n_));
  return sum / static_cast<double>(columns_.size());
}

double RegressionSums::r2() const {
  KILN_CHECK(n_ >= 2, "r2: R² needs at least two examples, got {}", n_);
  double sum = 0;
  for (const Column& c : columns_) {
    if (c.m2 > 0) sum += 1.0 - c.squared_error / c.m2;
    else sum += c.squared_error == 0 ? 1.0 : 0.0;
  }
  return sum / static_cast<double>(columns_.size());
}

std::vector<double> RegressionSums::counts() const {
  std::vector<double> out{static_cast<double>(n_)};
  for (const Column& c : columns_) {
    const double n = static_cast<double>(n_);
    out.insert(out.end(), {c.abs_error, c.squared_error, c.mean * n, c.m2 + c.mean * c.mean * n});
  }
  return out;
}

RegressionSums RegressionSums::from_counts(std::span<const double> counts) {
  KILN_CHECK(!counts.empty() && (counts.size() - 1) % 4 == 0, "regression metric: {} counts are not 1 + 4 per column",
             counts.size());
  RegressionSums sums;
  sums.n_ = static_cast<std::int64_t>(counts[0]);
  const double n = counts[0];
  for (std::size_t at = 1; at < counts.size() && n > 0; at += 4) {
    Column c;
    c.abs_error = counts[at];
    c.squared_error = counts[at + 1];
    c.mean = counts[at + 2] / n;
    c.m2 = std::max(0.0, counts[at + 3] - c.mean * c.mean * n);
    sums.columns_.push_back(c);
  }
  return sums;
}

namespace {
std::optional<double> regression_value(RegressionMetric::Kind kind, const RegressionSums& sums) {
  if (sums.count() < (kind == RegressionMetric::Kind::r2 ? 2 : 1)) return std::nullopt;
  switch (kind) {
    case RegressionMetric::Kind::mae: return sums.mae();
    case RegressionMetric::Kind::mse: return sums.mse();
    case RegressionMetric::Kind::rmse: return sums.rmse();
    case RegressionMetric::Kind::r2: return sums.r2();
  }
  return std::nullopt;
}
}  // namespace

std::vector<double> RegressionMetric::phase_counts() const { return sums_.counts(); }
std::optional<double> RegressionMetric::value_of_counts(std::span<const double> counts) const {
  return regression_value(kind_, RegressionSums::from_counts(counts));
}

std::string RegressionMetric::name() const {
  switch (kind_) {
    case Kind::mae: return "mae";
    case Kind::mse: return "mse";
    case Kind::rmse: return "rmse";
    case Kind::r2: return "r2";
  }
  return "?";
}

std::string RegressionMetric::format(double value) const { return fmt::format("{:.4g}", value); }

std::optional<MetricValue> RegressionMetric::update(const StepInfo& step) {
  if (step.output == nullptr || step.targets == nullptr) return std::nullopt;
  sums_.add(*step.output, *step.targets);
  const auto value = regression_value(kind_, sums_);
  if (!value) return std::nullopt;
  return MetricValue{*value, 1};
}

std::unique_ptr<Metric> mae_metric() { return std::make_unique<RegressionMetric>(RegressionMetric::Kind::mae); }
std::unique_ptr<Metric> mse_metric() { return std::make_unique<RegressionMetric>(RegressionMetric::Kind::mse); }
std::unique_ptr<Metric> rmse_metric() { return std::make_unique<RegressionMetric>(RegressionMetric::Kind::rmse); }
std::unique_ptr<Metric> r2_metric() { return std::make_unique<RegressionMetric>(RegressionMetric::Kind::r2); }

// ---- Hamming loss

namespace {
// The wrong label entries and all entries of scores against targets of one shape.
std::pair<std::int64_t, std::int64_t> hamming_counts(const TensorData& scores, const TensorData& targets,
                                                     double threshold, Scores kind) {
  KILN_CHECK(scores.shape() == targets.shape() && (scores.shape().rank() == 1 || scores.shape().rank() == 2),
             "hamming_loss: the scores and the 0/1 targets must both be [N, L] (or [N]) of one shape, got scores {} "
             "and targets {}",
             scores.shape(), targets.shape());
  std::vector<double> s = scores.to_vec<double>();
  const std::vector<double> t = targets.to_vec<double>();
  if (are_logits(s, kind))
    for (double& v : s) v = sigmoid(v);
  std::int64_t wrong = 0;
  for (std::size_t i = 0; i < s.size(); ++i) {
    KILN_CHECK(t[i] == 0 || t[i] == 1, "hamming_loss: target {} at {} of targets {} is not 0 or 1", t[i], i,
               targets.shape());
    if ((s[i] > threshold) != (t[i] == 1)) ++wrong;
  }
  return {wrong, static_cast<std::int64_t>(s.size())};
}
}  // namespace

double hamming_loss(const TensorData& scores, const TensorData& targets, double threshold, Scores kind) {
  const auto [wrong, total] = hamming_counts(scores, targets, threshold, kind);
  KILN_CHECK(total > 0, "hamming_loss: the scores {} are empty", scores.shape());
  return static_cast<double>(wrong) / static_cast<double>(total);
}

HammingLossMetric::HammingLossMetric(double threshold, Scores kind) : threshold_(threshold), kind_(kind) {
  KILN_CHECK(threshold >= 0 && threshold <= 1, "HammingLossMetric: the threshold is a probability in [0, 1], got {}",
             threshold);
}

std::string HammingLossMetric::format(double value) const { return fmt::format("{:.4f}", value); }

std::optional<MetricValue> HammingLossMetric::update(const StepInfo& step) {
  if (step.output == nullptr || step.targets == nullptr) return std::nullopt;
  const auto [wrong, total] = hamming_counts(*step.output, *step.targets, threshold_, kind_);
  if (total == 0) return std::nullopt;
  return MetricValue{static_cast<double>(wrong) / static_cast<double>(total), static_cast<double>(total)};
}

// ---- perplexity

std::string PerplexityMetric::format(double value) const { return fmt::format("{:.4g}", value); }

std::optional<MetricValue> PerplexityMetric::update(const StepInfo& step) {
  if (step.output == nullptr || step.targets == nullptr) return std::nullopt;
  const Shape& s = step.output->shape();
  const Shape& t = step.targets->shape();
  bool fits = s.rank() >= 1 && t.rank() == s.rank() - 1;
  for (std::size_t d = 0; fits && d < t.rank(); ++d) fits = s[d] == t[d];
  KILN_CHECK(fits && s[s.rank() - 1] > 0,
             "perplexity: the scores must be logits [..., V] and the targets class indices [...] of the scores' "
             "leading shape, got scores {} and targets {}",
             s, t);
  const std::int64_t vocab = s[s.rank() - 1];
  const std::vector<double> scores = step.output->to_vec<double>();
  const std::vector<std::int64_t> targets = step.targets->to_vec<std::int64_t>();
  for (std::size_t row = 0; row < targets.size(); ++row) {
    const std::int64_t target = targets[row];
    if (target == ignore_index_) continue;
    KILN_CHECK(target >= 0 && target < vocab, "perplexity: target {} at {} is not a class of scores {}", target, row,
               s);
    const double* r = scores.data() + static_cast<std::int64_t>(row) * vocab;
    const double top = *std::max_element(r, r + vocab);
    double sum = 0;
    for (std::int64_t c = 0; c < vocab; ++c) sum += std::exp(r[c] - top);
    nll_ += top + std::log(sum) - r[target];
    ++tokens_;
  }
  if (tokens_ == 0) return std::nullopt;
  return MetricValue{std::exp(nll_ / static_cast<double>(tokens_)), 1};
}

std::vector<double> PerplexityMetric::phase_counts() const { return {nll_, static_cast<double>(tokens_)}; }
std::optional<double> PerplexityMetric::value_of_counts(std::span<const double> counts) const {
  if (counts.size() != 2 || counts[1] <= 0) return std::nullopt;
  return std::exp(counts[0] / counts[1]);
}

// ---- AUROC, average precision

void RankingScores::add(const TensorData& scores, const TensorData& targets) {
  const Shape& s = scores.shape();
  const Shape& t = targets.shape();
  KILN_CHECK((s.rank() == 1 || (s.rank() == 2 && s[1] >= 2)) && t.rank() == 1 && t[0] == s[0],
             "auroc / average_precision: the scores must be [N] (binary), [N, 2] or [N, C] and the targets [N], got "
             "scores {} and targets {}",
             s, t);
  const std::int64_t width = s.rank() == 1 ? 1 : s[1];
  const std::int64_t classes = width <= 2 ? 1 : width;  // the columns kept
  KILN_CHECK(classes_ == 0 || classes_ == classes,
             "auroc / average_precision: scores {} do not match the earlier ones' {} class columns", s, classes_);
  if (classes_ == 0) {
    classes_ = classes;
    columns_.assign(static_cast<std::size_t>(classes), {});
  }
  std::vector<double> v = scores.to_vec<double>();
  const std::vector<double> y = targets.to_vec<double>();
  const bool logits = are_logits(v, kind_);
  if (logits && width >= 2) softmax_rows(v, width);
  const std::int64_t n = s[0];
  const std::int64_t top_class = width == 1 ? 2 : width;
  for (std::int64_t i = 0; i < n; ++i) {
    const double target = y[static_cast<std::size_t>(i)];
    KILN_CHECK(target >= 0 && target < static_cast<double>(top_class) && target == std::floor(target),
               "auroc / average_precision: target {} of row {} is not a class of scores {}", target, i, s);
  }
  for (std::int64_t c = 0; c < classes; ++c) {
    std::vector<Entry>& column = columns_[static_cast<std::size_t>(c)];
    const std::int64_t positive_class = classes == 1 ? 1 : c;
    const std::int64_t col = width == 2 ? 1 : c;  // binary [N, 2]: class 1's column
    const auto old = static_cast<std::ptrdiff_t>(column.size());
    for (std::int64_t i = 0; i < n; ++i)
      column.push_back({v[static_cast<std::size_t>(i * width + col)],
                        static_cast<std::int64_t>(y[static_cast<std::size_t>(i)]) == positive_class});
    const auto descending = [](const Entry& a, const Entry& b) { return a.score > b.score; };
    std::sort(column.begin() + old, column.end(), descending);
    std::inplace_merge(column.begin(), column.begin() + old, column.end(), descending);
  }
}

// Each run of equal scores in a column (sorted by descending score) is one threshold of the
// ROC and precision-recall curves.
std::optional<double> RankingScores::auroc() const {
  if (classes_ == 0) return std::nullopt;
  double sum = 0;
  for (const auto& column : columns_) {
    double positives = 0, negatives = 0, area = 0;
    for (std::size_t i = 0; i < column.size();) {
      // One threshold: the run of equal scores; the curve's segment is a trapezoid.
      double p = 0, n = 0;
      std::size_t j = i;
      for (; j < column.size() && column[j].score == column[i].score; ++j) (column[j].positive ? p : n) += 1;
      area += n * (positives + p / 2);
      positives += p, negatives += n;
      i = j;
    }
    if (positives == 0 || negatives == 0) return std::nullopt;
    sum += area / (positives * negatives);
  }
  return sum / static_cast<double>(columns_.size());
}

std::optional<double> RankingScores::average_precision() const {
  if (classes_ == 0) return std::nullopt;
  double sum = 0;
  for (const auto& column : columns_) {
    const double total = static_cast<double>(
        std::count_if(column.begin(), column.end(), [](const Entry& e) { return e.positive; }));
    if (total == 0) return std::nullopt;
    // The sum over thresholds of (recall gained) x (precision at the threshold).
    double tp = 0, seen = 0, ap = 0;
    for (std::size_t i = 0; i < column.size();) {
      double p = 0;
      std::size_t j = i;
      for (; j < column.size() && column[j].score == column[i].score; ++j) p += column[j].positive ? 1 : 0;
      tp += p;
      seen += static_cast<double>(j - i);
      ap += (p / total) * (tp / seen);
      i = j;
    }
    sum += ap;
  }
  return sum / static_cast<double>(columns_.size());
}

namespace {
double defined(std::optional<double> value, const char* op, const TensorData& scores) {
  KILN_CHECK(value.has_value(),
             "{}: undefined for scores {}: a class (class 1 when binary) has no positive{} example in the targets", op,
             scores.shape(), std::string_view(op) == "auroc" ? " or no negative" : "");
  return *value;
}
}  // namespace

double auroc(const TensorData& scores, const TensorData& targets, Scores kind) {
  RankingScores r(kind);
  r.add(scores, targets);
  return defined(r.auroc(), "auroc", scores);
}

double average_precision(const TensorData& scores, const TensorData& targets, Scores kind) {
  RankingScores r(kind);
  r.add(scores, targets);
  return defined(r.average_precision(), "average_precision", scores);
}

std::string RankingMetric::format(double value) const { return fmt::format("{:.4f}", value); }

std::optional<MetricValue> RankingMetric::update(const StepInfo& step) {
  if (step.output == nullptr || step.targets == nullptr) return std::nullopt;
  scores_.add(*step.output, *step.targets);
  const auto value = kind_ == Kind::auroc ? scores_.auroc() : scores_.average_precision();
  if (!value) return std::nullopt;
  return MetricValue{*value, 1};
}

std::unique_ptr<Metric> auroc_metric(Scores scores) {
  return std::make_unique<RankingMetric>(RankingMetric::Kind::auroc, scores);
}
std::unique_ptr<Metric> average_precision_metric(Scores scores) {
  return std::make_unique<RankingMetric>(RankingMetric::Kind::average_precision, scores);
}

// ---- edit distance, CER, WER

std::int64_t edit_distance(std::span<const std::int64_t> hypothesis, std::span<const std::int64_t> reference) {
  // One row of the dynamic programme: row[j] = the distance of the prefixes (i, j).
  std::vector<std::int64_t> row(reference.size() + 1);
  std::iota(row.begin(), row.end(), std::int64_t{0});
  for (std::size_t i = 1; i <= hypothesis.size(); ++i) {
    std::int64_t diagonal = row[0];
    row[0] = static_cast<std::int64_t>(i);
    for (std::size_t j = 1; j <= reference.size(); ++j) {
      const std::int64_t here =
          std::min({row[j] + 1, row[j - 1] + 1, diagonal + (hypothesis[i - 1] != reference[j - 1] ? 1 : 0)});
      diagonal = row[j];
      row[j] = here;
    }
  }
  return row.back();
}

namespace {
// The code points of UTF-8 text (a malformed byte stands for itself).
std::vector<std::int64_t> code_points(std::string_view text) {
  std::vector<std::int64_t> out;
  for (std::size_t i = 0; i < text.size();) {
    const auto b = static_cast<unsigned char>(text[i]);
    const int extra = b >= 0xF0 ? 3 : b >= 0xE0 ? 2 : b >= 0xC0 ? 1 : 0;
    std::int64_t cp = extra == 0 ? b : b & (0x3F >> extra);
    std::size_t k = 1;
    for (; k <= static_cast<std::size_t>(extra) && i + k < text.size(); ++k) {
      const auto c = static_cast<unsigned char>(text[i + k]);
      if ((c & 0xC0) != 0x80) break;
      cp = (cp << 6) | (c & 0x3F);
    }
    if (k != static_cast<std::size_t>(extra) + 1) cp = b, k = 1;  // malformed: the byte alone
    out.push_back(cp);
    i += k;
  }
  return out;
}

// Words split on whitespace, each an id (equal words, equal ids).
std::vector<std::int64_t> word_ids(std::string_view text, std::vector<std::string>& vocabulary) {
  std::vector<std::int64_t> out;
  std::size_t i = 0;
  const auto space = [](char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; };
  while (i < text.size()) {
    while (i < text.size() && space(text[i])) ++i;
    std::size_t j = i;
    while (j < text.size() && !space(text[j])) ++j;
    if (j > i) {
      const std::string word(text.substr(i, j - i));
      const auto it = std::find(vocabulary.begin(), vocabulary.end(), word);
      out.push_back(it - vocabulary.begin());
      if (it == vocabulary.end()) vocabulary.push_back(word);
    }
    i = j;
  }
  return out;
}

template <class Split>
double error_rate(const char* op, const std::vector<std::string>& predictions,
                  const std::vector<std::string>& references, Split split) {
  KILN_CHECK(predictions.size() == references.size(), "{}: {} predictions for {} references", op, predictions.size(),
             references.size());
  std::int64_t edits = 0, length = 0;
  for (std::size_t i = 0; i < references.size(); ++i) {
    const std::vector<std::int64_t> p = split(predictions[i]), r = split(references[i]);
    edits += edit_distance(p, r);
    length += static_cast<std::int64_t>(r.size());
  }
  KILN_CHECK(length > 0, "{}: the {} references are all empty", op, references.size());
  return static_cast<double>(edits) / static_cast<double>(length);
}
}  // namespace

double char_error_rate(const std::vector<std::string>& predictions, const std::vector<std::string>& references) {
  return error_rate("char_error_rate", predictions, references, [](std::string_view s) { return code_points(s); });
}

double word_error_rate(const std::vector<std::string>& predictions, const std::vector<std::string>& references) {
  std::vector<std::string> vocabulary;
  return error_rate("word_error_rate", predictions, references,
                    [&](std::string_view s) { return word_ids(s, vocabulary); });
}

ErrorRateMetric::ErrorRateMetric(std::string name, std::int64_t pad_id) : name_(std::move(name)), pad_id_(pad_id) {}

std::string ErrorRateMetric::format(double value) const { return fmt::format("{:.4f}", value); }

std::optional<MetricValue> ErrorRateMetric::update(const StepInfo& step) {
  if (step.output == nullptr || step.targets == nullptr) return std::nullopt;
  const Shape& o = step.output->shape();
  const Shape& t = step.targets->shape();
  KILN_CHECK(t.rank() == 2 && (o.rank() == 2 || o.rank() == 3) && o[0] == t[0] && o[1] == t[1],
             "{}: the output must be token ids [N, T] or scores [N, T, V] and the targets ids [N, T], got output {} "
             "and targets {}",
             name_, o, t);
  const std::int64_t n = t[0], length = t[1], vocab = o.rank() == 3 ? o[2] : 1;
  KILN_CHECK(vocab > 0, "{}: the scores {} have no class", name_, o);
  const std::vector<double> out = step.output->to_vec<double>();
  const std::vector<std::int64_t> ref = step.targets->to_vec<std::int64_t>();
  std::int64_t edits = 0, total = 0;
  std::vector<std::int64_t> p, r;
  for (std::int64_t row = 0; row < n; ++row) {
    p.clear(), r.clear();
    for (std::int64_t k = 0; k < length; ++k) {
      const std::int64_t at = row * length + k;
      std::int64_t id = 0;
      if (o.rank() == 3) {
        const double* s = out.data() + at * vocab;
        id = std::max_element(s, s + vocab) - s;
      } else {
        id = static_cast<std::int64_t>(out[static_cast<std::size_t>(at)]);
      }
      if (id != pad_id_) p.push_back(id);
      if (ref[static_cast<std::size_t>(at)] != pad_id_) r.push_back(ref[static_cast<std::size_t>(at)]);
    }
    edits += edit_distance(p, r);
    total += static_cast<std::int64_t>(r.size());
  }
  if (total == 0) return std::nullopt;
  return MetricValue{static_cast<double>(edits) / static_cast<double>(total), static_cast<double>(total)};
}

// ---- PSNR, SSIM

namespace {
void check_images(const char* op, const TensorData& output, const TensorData& targets, double data_range) {
  KILN_CHECK(output.shape() == targets.shape() && output.shape().rank() == 4,
             "{}: the output and targets must both be images [N, C, H, W] of one shape, got output {} and targets {}",
             op, output.shape(), targets.shape());
  KILN_CHECK(std::isfinite(data_range) && data_range > 0, "{}: data_range must be finite and > 0, got {}", op,
             data_range);
}

constexpr int kWindow = 11;
// The normalized 1-D Gaussian of sigma 1.5 over 11 taps; the 2-D window is its outer product.
std::array<double, kWindow> gaussian_taps() {
  std::array<double, kWindow> g{};
  double sum = 0;
  for (int i = 0; i < kWindow; ++i) sum += (g[static_cast<std::size_t>(i)] = std::exp(-(i - 5) * (i - 5) / (2 * 1.5 * 1.5)));
  for (double& v : g) v /= sum;
  return g;
}

// `image` [h, w] filtered by the window over the valid region [h - 10, w - 10].
std::vector<double> filter_valid(const std::vector<double>& image, std::int64_t h, std::int64_t w,
                                 const std::array<double, kWindow>& g) {
  const std::int64_t oh = h - kWindow + 1, ow = w - kWindow + 1;
  std::vector<double> rows(static_cast<std::size_t>(h * ow), 0.0), out(static_cast<std::size_t>(oh * ow), 0.0);
  for (std::int64_t y = 0; y < h; ++y)
    for (std::int64_t x = 0; x < ow; ++x) {
      double s = 0;
      for (int k = 0; k < kWindow; ++k) s += g[static_cast<std::size_t>(k)] * image[static_cast<std::size_t>(y * w + x + k)];
      rows[static_cast<std::size_t>(y * ow + x)] = s;
    }
  for (std::int64_t y = 0; y < oh; ++y)
    for (std::int64_t x = 0; x < ow; ++x) {
      double s = 0;
      for (int k = 0; k < kWindow; ++k) s += g[static_cast<std::size_t>(k)] * rows[static_cast<std::size_t>((y + k) * ow + x)];
      out[static_cast<std::size_t>(y * ow + x)] = s;
    }
  return out;
}
}  // namespace

double psnr(const TensorData& output, const TensorData& targets, double data_range) {
  check_images("psnr", output, targets, data_range);
  const std::vector<double> a = output.to_vec<double>(), b = targets.to_vec<double>();
  KILN_CHECK(!a.empty(), "psnr: the images {} are empty", output.shape());
  double sse = 0;
  for (std::size_t i = 0; i < a.size(); ++i) sse += (a[i] - b[i]) * (a[i] - b[i]);
  return 10.0 * std::log10(data_range * data_range / (sse / static_cast<double>(a.size())));
}

std::vector<double> ssim_per_image(const TensorData& output, const TensorData& targets, double data_range) {
  check_images("ssim", output, targets, data_range);
  const Shape& s = output.shape();
  const std::int64_t n = s[0], channels = s[1], h = s[2], w = s[3];
  KILN_CHECK(h >= kWindow && w >= kWindow && channels > 0,
             "ssim: the images {} must be at least 11x11 (the Gaussian window) with a channel", s);
  const std::vector<double> a = output.to_vec<double>(), b = targets.to_vec<double>();
  const auto g = gaussian_taps();
  const double c1 = (0.01 * data_range) * (0.01 * data_range), c2 = (0.03 * data_range) * (0.03 * data_range);
  const auto plane = static_cast<std::size_t>(h * w);
  std::vector<double> x(plane), y(plane), xx(plane), yy(plane), xy(plane);
  std::vector<double> out;
  for (std::int64_t i = 0; i < n; ++i) {
    double sum = 0;
    std::size_t pixels = 0;
    for (std::int64_t c = 0; c < channels; ++c) {
      const std::size_t start = static_cast<std::size_t>(i * channels + c) * plane;
      for (std::size_t k = 0; k < plane; ++k) {
        x[k] = a[start + k], y[k] = b[start + k];
        xx[k] = x[k] * x[k], yy[k] = y[k] * y[k], xy[k] = x[k] * y[k];
      }
      const auto mx = filter_valid(x, h, w, g), my = filter_valid(y, h, w, g);
      const auto mxx = filter_valid(xx, h, w, g), myy = filter_valid(yy, h, w, g), mxy = filter_valid(xy, h, w, g);
      for (std::size_t k = 0; k < mx.size(); ++k) {
        const double vx = mxx[k] - mx[k] * mx[k], vy = myy[k] - my[k] * my[k], cxy = mxy[k] - mx[k] * my[k];
        sum += ((2 * mx[k] * my[k] + c1) * (2 * cxy + c2)) /
               ((mx[k] * mx[k] + my[k] * my[k] + c1) * (vx + vy + c2));
      }
      pixels += mx.size();
    }
    out.push_back(sum / static_cast<double>(pixels));
  }
  return out;
}

double ssim(const TensorData& output, const TensorData& targets, double data_range) {
  const std::vector<double> v = ssim_per_image(output, targets, data_range);
  KILN_CHECK(!v.empty(), "ssim: the images {} are empty", output.shape());
  return std::accumulate(v.begin(), v.end(), 0.0) / static_cast<double>(v.size());
}

PsnrMetric::PsnrMetric(double data_range) : data_range_(data_range) {
  KILN_CHECK(std::isfinite(data_range) && data_range > 0, "PsnrMetric: data_range must be finite and > 0, got {}",
             data_range);
}

std::string PsnrMetric::format(double value) const { return fmt::format("{:.2f} dB", value); }

std::optional<MetricValue> PsnrMetric::update(const StepInfo& step) {
  if (step.output == nullptr || step.targets == nullptr) return std::nullopt;
  check_images("psnr", *step.output, *step.targets, data_range_);
  const std::vector<double> a = step.output->to_vec<double>(), b = step.targets->to_vec<double>();
  for (std::size_t i = 0; i < a.size(); ++i) squared_error_ += (a[i] - b[i]) * (a[i] - b[i]);
  elements_ += static_cast<std::int64_t>(a.size());
  const auto value = value_of_counts(phase_counts());
  if (!value) return std::nullopt;
  return MetricValue{*value, 1};
}

std::vector<double> PsnrMetric::phase_counts() const { return {squared_error_, static_cast<double>(elements_)}; }
std::optional<double> PsnrMetric::value_of_counts(std::span<const double> counts) const {
  if (counts.size() != 2 || counts[1] <= 0) return std::nullopt;
  return 10.0 * std::log10(data_range_ * data_range_ / (counts[0] / counts[1]));
}

SsimMetric::SsimMetric(double data_range) : data_range_(data_range) {
  KILN_CHECK(std::isfinite(data_range) && data_range > 0, "SsimMetric: data_range must be finite and > 0, got {}",
             data_range);
}

std::string SsimMetric::format(double value) const { return fmt::format("{:.4f}", value); }

std::optional<MetricValue> SsimMetric::update(const StepInfo& step) {
  if (step.output == nullptr || step.targets == nullptr) return std::nullopt;
  const std::vector<double> v = ssim_per_image(*step.output, *step.targets, data_range_);
  if (v.empty()) return std::nullopt;
  return MetricValue{std::accumulate(v.begin(), v.end(), 0.0) / static_cast<double>(v.size()),
                     static_cast<double>(v.size())};
}

}  // namespace kiln::train
