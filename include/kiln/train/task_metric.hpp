// Metrics of tasks beyond single-label classification, as train::Metric for the Learner and as
// plain functions: regression (MAE, MSE, RMSE, R²), multi-label (Hamming loss), language
// models (perplexity), ranking (AUROC, average precision), sequences (CER, WER) and images
// (PSNR, SSIM). Definitions follow scikit-learn, torchmetrics and scikit-image; each says
// which. Plain host code in kiln::train, like metric.hpp.
#pragma once

#include "kiln/train/metric.hpp"

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace kiln::train {

// What a metric's score columns hold. auto_detect is torchmetrics' rule: a batch with a value
// outside [0, 1] holds logits (sigmoid / softmax is applied), otherwise probabilities.
enum class Scores { auto_detect, probabilities, logits };

// ---- regression: MAE, MSE, RMSE, R² (scikit-learn's, multioutput="uniform_average")

// The running sums of a phase's regression outputs against targets, both [N] or [N, D] of one
// shape ([N, 1] against [N] is accepted too). Per output column: the count, the summed
// absolute and squared errors, and the targets' mean and sum of squared deviations (merged
// batch by batch, so R² is that of the whole phase, not a mean of batch values).
class RegressionSums {
 public:
  void add(const TensorData& output, const TensorData& targets);
  void clear() { columns_.clear(), n_ = 0; }
  std::int64_t count() const { return n_; }
  // Each the plain mean over the output columns of the column's value (sklearn's
  // uniform_average): mean absolute error, mean squared error, the mean of the columns'
  // root mean squared errors (torchmetrics flattens [N, D] instead; the same for [N]), and
  // R² = 1 - SS_res / SS_tot (a column with constant targets scores 1 if predicted exactly,
  // else 0, as sklearn's force_finite). R² needs two examples; all need one (else an error).
  double mae() const;
  double mse() const;
  double rmse() const;
  double r2() const;
  // The sums as counts that add up across the ranks of a data-parallel run: the count, then
  // per column the summed absolute and squared errors, targets and squared targets.
  std::vector<double> counts() const;
  static RegressionSums from_counts(std::span<const double> counts);

 private:
  struct Column {
    double abs_error = 0, squared_error = 0, mean = 0, m2 = 0;
  };
  std::vector<Column> columns_;
  std::int64_t n_ = 0;
};

// MAE ("mae"), MSE ("mse"), RMSE ("rmse") or R² ("r2") of every step of the phase so far
// (Aggregate::last); the sums start over at each phase, like the precision metrics.
class RegressionMetric final : public Metric {
 public:
  enum class Kind { mae, mse, rmse, r2 };
  explicit RegressionMetric(Kind kind) : kind_(kind) {}
  std::string name() const override;
  std::string format(double value) const override;
  Aggregate aggregate() const override { return Aggregate::last; }
  bool needs_outputs() const override { return true; }
  void begin(Split) override { sums_.clear(); }
  std::optional<MetricValue> update(const StepInfo& step) override;
  std::vector<double> phase_counts() const override;
  std::optional<double> value_of_counts(std::span<const double> counts) const override;

 private:
  Kind kind_;
  RegressionSums sums_;
};
std::unique_ptr<Metric> mae_metric();
std::unique_ptr<Metric> mse_metric();
std::unique_ptr<Metric> rmse_metric();
std::unique_ptr<Metric> r2_metric();

// ---- multi-label: the Hamming loss (sklearn's hamming_loss, torchmetrics' MultilabelHammingDistance)

// The share of label entries predicted wrong: scores [N, L] (or [N]) against 0/1 targets of
// the same shape, a label predicted where its probability > threshold (default 0.5).
double hamming_loss(const TensorData& scores, const TensorData& targets, double threshold = 0.5,
                    Scores kind = Scores::auto_detect);

// "hamming_loss": the phase's mean over all label entries (each step weighted by its entries).
class HammingLossMetric final : public Metric {
 public:
  explicit HammingLossMetric(double threshold = 0.5, Scores kind = Scores::auto_detect);
  std::string name() const override { return "hamming_loss"; }
  std::string format(double value) const override;
  bool needs_outputs() const override { return true; }
  std::optional<MetricValue> update(const StepInfo& step) override;

 private:
  double threshold_;
  Scores kind_;
};

// ---- language models: perplexity (torchmetrics' Perplexity)

// "perplexity": exp of the mean cross-entropy over every token of the phase, computed from the
// step's scores (logits [..., V]) and class-index targets [...] rather than from the loss, so
// that each token counts once whatever the loss's reduction, smoothing or weighting. Targets
// equal to ignore_index (default -100, torch's cross_entropy default) are left out.
class PerplexityMetric final : public Metric {
 public:
  explicit PerplexityMetric(std::int64_t ignore_index = -100) : ignore_index_(ignore_index) {}
  std::string name() const override { return "perplexity"; }
  std::string format(double value) const override;
  Aggregate aggregate() const override { return Aggregate::last; }
  bool needs_outputs() const override { return true; }
  void begin(Split) override { nll_ = 0, tokens_ = 0; }
  std::optional<MetricValue> update(const StepInfo& step) override;
  std::vector<double> phase_counts() const override;
  std::optional<double> value_of_counts(std::span<const double> counts) const override;

 private:
  std::int64_t ignore_index_;
  double nll_ = 0;
  std::int64_t tokens_ = 0;
};

// ---- ranking: AUROC and average precision (scikit-learn's roc_auc_score, average_precision_score)

// Every score of a phase, sorted per class, so that AUROC and average precision are those of
// all its examples. Binary: scores [N] (of class 1) or [N, 2] (class 1's column, after
// softmax when logits) against targets [N] of 0 / 1. Multi-class: scores [N, C > 2] against
// class indices [N], one-vs-rest and the plain mean over the classes (sklearn's
// multi_class="ovr", average="macro"; softmax first when logits). Equal scores form one
// threshold, as sklearn's curves: AUROC counts a positive and a negative of equal score as
// half ordered. Memory: 16 bytes per example and class column kept (N x C for multi-class,
// N for binary) until the phase ends; each step merges its batch in, O(N) per class.
class RankingScores {
 public:
  explicit RankingScores(Scores kind = Scores::auto_detect) : kind_(kind) {}
  void add(const TensorData& scores, const TensorData& targets);
  void clear() { columns_.clear(), classes_ = 0; }
  std::int64_t count() const { return columns_.empty() ? 0 : static_cast<std::int64_t>(columns_[0].size()); }
  // Nothing when a class (class 1 for binary) has no positive example or, for AUROC, no
  // negative one: the value is undefined then (sklearn raises).
  std::optional<double> auroc() const;
  std::optional<double> average_precision() const;

 private:
  struct Entry {
    double score;
    bool positive;
  };
  Scores kind_;
  std::int64_t classes_ = 0;  // the score columns: 0 before any batch, 1 for binary
  std::vector<std::vector<Entry>> columns_;  // per class, sorted by descending score
};

// AUROC and average precision of one set of scores and targets (shapes as RankingScores); an
// undefined value (a class without positives or negatives) is an error naming the class.
double auroc(const TensorData& scores, const TensorData& targets, Scores kind = Scores::auto_detect);
double average_precision(const TensorData& scores, const TensorData& targets, Scores kind = Scores::auto_detect);

// "auroc" or "average_precision" of the phase so far (Aggregate::last); no value while it is
// undefined (the first batches may hold one class only).
class RankingMetric final : public Metric {
 public:
  enum class Kind { auroc, average_precision };
  explicit RankingMetric(Kind kind, Scores scores = Scores::auto_detect) : kind_(kind), scores_(scores) {}
  std::string name() const override { return kind_ == Kind::auroc ? "auroc" : "average_precision"; }
  std::string format(double value) const override;
  Aggregate aggregate() const override { return Aggregate::last; }
  bool needs_outputs() const override { return true; }
  void begin(Split) override { scores_.clear(); }
  std::optional<MetricValue> update(const StepInfo& step) override;

 private:
  Kind kind_;
  RankingScores scores_;
};
std::unique_ptr<Metric> auroc_metric(Scores scores = Scores::auto_detect);
std::unique_ptr<Metric> average_precision_metric(Scores scores = Scores::auto_detect);

// ---- sequences: edit distance, CER, WER (torchmetrics' / jiwer's)

// The Levenshtein distance: the fewest insertions, deletions and substitutions turning
// `hypothesis` into `reference`.
std::int64_t edit_distance(std::span<const std::int64_t> hypothesis, std::span<const std::int64_t> reference);

// The character / word error rate of predictions against references (UTF-8; one prediction
// per reference): the edits summed over all pairs over the references' summed lengths.
// Characters are Unicode code points, spaces included; words are split on whitespace. An
// error when the counts differ or the references are all empty.
double char_error_rate(const std::vector<std::string>& predictions, const std::vector<std::string>& references);
double word_error_rate(const std::vector<std::string>& predictions, const std::vector<std::string>& references);

// An error rate over token ids: the output holds predicted ids [N, T] (or scores [N, T, V],
// whose argmax is the id), the targets reference ids [N, T]; entries equal to pad_id are left
// out wherever they are. Named `name` ("wer" for word ids, "cer" for character ids...); the
// epoch's value is its summed edits over its summed reference lengths (each step's rate
// weighted by its reference tokens). No CTC collapsing: decode first.
class ErrorRateMetric final : public Metric {
 public:
  ErrorRateMetric(std::string name, std::int64_t pad_id);
  std::string name() const override { return name_; }
  std::string format(double value) const override;
  bool needs_outputs() const override { return true; }
  std::optional<MetricValue> update(const StepInfo& step) override;

 private:
  std::string name_;
  std::int64_t pad_id_;
};

// ---- images: PSNR and SSIM of [N, C, H, W]

// PSNR = 10 log10(data_range² / MSE), the MSE over every element (torchmetrics' default
// reduction); data_range is the span of the values (1 for [0, 1] images, 255 for 8-bit).
double psnr(const TensorData& output, const TensorData& targets, double data_range);

// SSIM per image: the mean over channels and pixels of the SSIM map with an 11x11 Gaussian
// window (sigma 1.5), population (co)variances, C1 = (0.01 L)², C2 = (0.03 L)² for
// L = data_range, over the valid region (pixels whose window fits inside the image), as
// skimage's structural_similarity(gaussian_weights=True, use_sample_covariance=False,
// data_range=L). H and W must be >= 11.
std::vector<double> ssim_per_image(const TensorData& output, const TensorData& targets, double data_range);
// The mean over the images (torchmetrics' reduction="elementwise_mean").
double ssim(const TensorData& output, const TensorData& targets, double data_range);

// "psnr" (in dB, from the phase's MSE over all its elements: Aggregate::last) and "ssim" (the
// mean over all the phase's images).
class PsnrMetric final : public Metric {
 public:
  explicit PsnrMetric(double data_range);
  std::string name() const override { return "psnr"; }
  std::string format(double value) const override;
  Aggregate aggregate() const override { return Aggregate::last; }
  bool needs_outputs() const override { return true; }
  void begin(Split) override { squared_error_ = 0, elements_ = 0; }
  std::optional<MetricValue> update(const StepInfo& step) override;
  std::vector<double> phase_counts() const override;
  std::optional<double> value_of_counts(std::span<const double> counts) const override;

 private:
  double data_range_;
  double squared_error_ = 0;
  std::int64_t elements_ = 0;
};

class SsimMetric final : public Metric {
 public:
  explicit SsimMetric(double data_range);
  std::string name() const override { return "ssim"; }
  std::string format(double value) const override;
  bool needs_outputs() const override { return true; }
  std::optional<MetricValue> update(const StepInfo& step) override;

 private:
  double data_range_;
};

}  // namespace kiln::train
