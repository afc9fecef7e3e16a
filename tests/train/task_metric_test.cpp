// The task metrics of kiln/train/task_metric.hpp against scikit-learn and the explicit
// formulas of tests/golden/gen_metrics.py: regression (MAE, MSE, RMSE, R², [N] and [N, D]),
// the Hamming loss, perplexity, AUROC and average precision with ties (binary, two logit
// columns, multi-class one-vs-rest), CER / WER on strings and the error rate over token ids,
// PSNR and SSIM; each fed as a Metric in batches (the epoch's value is that of every example,
// not a mean of batch values), and the errors.
#include <kiln/train/task_metric.hpp>

#include <gtest/gtest.h>

#include "golden.hpp"

#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace {

using namespace kiln;
using namespace kiln::train;
using kiln::test::GoldenCase;
using kiln::test::golden;

double number(const GoldenCase& c, const std::string& label) { return c[label].to_vec<double>().at(0); }

// Rows [start, start + rows) of `t` (any rank, rows along dimension 0).
TensorData rows_of(const TensorData& t, std::int64_t start, std::int64_t rows) {
  const std::int64_t n = t.shape()[0];
  const std::int64_t row = n == 0 ? 0 : t.shape().numel() / n;
  std::vector<std::int64_t> dims = {rows};
  for (std::size_t d = 1; d < t.shape().rank(); ++d) dims.push_back(t.shape()[d]);
  const Shape shape{std::span<const std::int64_t>(dims)};
  if (t.dtype() == DType::i64) {
    const auto v = t.to_vec<std::int64_t>();
    return TensorData::from(std::vector<std::int64_t>(v.begin() + start * row, v.begin() + (start + rows) * row),
                            shape);
  }
  const auto v = t.to_vec<double>();
  return TensorData::from(std::vector<double>(v.begin() + start * row, v.begin() + (start + rows) * row), shape);
}

// Feeds output and targets to `metric` as one phase, in batches of `batch` rows; returns the
// epoch's value as the learner aggregates it.
double feed(Metric& metric, const TensorData& output, const TensorData& targets, std::int64_t batch) {
  metric.begin(Split::valid);
  Aggregator total;
  const std::int64_t n = output.shape()[0];
  for (std::int64_t start = 0; start < n; start += batch) {
    const std::int64_t rows = std::min(batch, n - start);
    const TensorData o = rows_of(output, start, rows), t = rows_of(targets, start, rows);
    StepInfo step;
    step.split = Split::valid;
    step.output = &o;
    step.targets = &t;
    step.items = rows;
    if (const auto v = metric.update(step)) total.add(*v);
  }
  return total.value(metric.aggregate());
}

TEST(TaskMetrics, RegressionFollowsScikitLearn) {
  for (const std::string name : {"regression_1d", "regression_2d"}) {
    SCOPED_TRACE(name);
    const GoldenCase& c = golden("metrics", name);
    RegressionSums sums;
    sums.add(c["output"], c["targets"]);
    EXPECT_NEAR(sums.mae(), number(c, "mae"), 1e-12);
    EXPECT_NEAR(sums.mse(), number(c, "mse"), 1e-12);
    EXPECT_NEAR(sums.rmse(), number(c, "rmse"), 1e-12);
    EXPECT_NEAR(sums.r2(), number(c, "r2"), 1e-12);
    for (const std::int64_t batch : {std::int64_t{1}, std::int64_t{7}, std::int64_t{1000}}) {
      SCOPED_TRACE(batch);
      EXPECT_NEAR(feed(*mae_metric(), c["output"], c["targets"], batch), number(c, "mae"), 1e-12);
      EXPECT_NEAR(feed(*mse_metric(), c["output"], c["targets"], batch), number(c, "mse"), 1e-12);
      EXPECT_NEAR(feed(*rmse_metric(), c["output"], c["targets"], batch), number(c, "rmse"), 1e-12);
      EXPECT_NEAR(feed(*r2_metric(), c["output"], c["targets"], batch), number(c, "r2"), 1e-12);
    }
  }
  // [N, 1] against [N] is the same as [N] against [N].
  const GoldenCase& c = golden("metrics", "regression_1d");
  const std::int64_t n = c["output"].shape()[0];
  const TensorData column = TensorData::from(c["output"].to_vec<double>(), Shape{n, 1});
  RegressionSums sums;
  sums.add(column, c["targets"]);
  EXPECT_NEAR(sums.r2(), number(c, "r2"), 1e-12);
  EXPECT_EQ(r2_metric()->name(), "r2");
  EXPECT_EQ(rmse_metric()->aggregate(), Aggregate::last);
  // Constant targets: 1 when predicted exactly, else 0 (sklearn's force_finite).
  const TensorData same = TensorData::from(std::vector<double>{2, 2, 2}, Shape{3});
  RegressionSums constant;
  constant.add(same, same);
  EXPECT_EQ(constant.r2(), 1.0);
  constant.add(TensorData::from(std::vector<double>{2, 3}, Shape{2}), TensorData::from(std::vector<double>{2, 2}, Shape{2}));
  EXPECT_EQ(constant.r2(), 0.0);
}

TEST(TaskMetrics, HammingLossFollowsScikitLearn) {
  const GoldenCase& c = golden("metrics", "hamming");
  EXPECT_NEAR(hamming_loss(c["probs"], c["targets"]), number(c, "hamming"), 1e-12);
  EXPECT_NEAR(hamming_loss(c["probs"], c["targets"], 0.3), number(c, "hamming_0_3"), 1e-12);
  EXPECT_NEAR(hamming_loss(c["logits"], c["targets"]), number(c, "hamming"), 1e-12);  // auto: sigmoid
  EXPECT_NEAR(hamming_loss(c["logits"], c["targets"], 0.5, Scores::logits), number(c, "hamming"), 1e-12);
  for (const std::int64_t batch : {std::int64_t{4}, std::int64_t{1000}}) {
    HammingLossMetric metric;
    EXPECT_NEAR(feed(metric, c["logits"], c["targets"], batch), number(c, "hamming"), 1e-12);
    HammingLossMetric low(0.3, Scores::probabilities);
    EXPECT_NEAR(feed(low, c["probs"], c["targets"], batch), number(c, "hamming_0_3"), 1e-12);
  }
}

TEST(TaskMetrics, PerplexityIsTheExpOfTheMeanCrossEntropyOverTokens) {
  const GoldenCase& c = golden("metrics", "perplexity");
  for (const std::int64_t batch : {std::int64_t{1}, std::int64_t{2}, std::int64_t{3}}) {
    PerplexityMetric metric;
    EXPECT_NEAR(feed(metric, c["scores"], c["targets"], batch), number(c, "perplexity"), 1e-10);
  }
}

TEST(TaskMetrics, RankingFollowsScikitLearnWithTies) {
  const GoldenCase& binary = golden("metrics", "ranking_binary");
  EXPECT_NEAR(auroc(binary["scores"], binary["targets"]), number(binary, "auroc"), 1e-12);
  EXPECT_NEAR(average_precision(binary["scores"], binary["targets"]), number(binary, "average_precision"), 1e-12);
  const GoldenCase& two = golden("metrics", "ranking_binary_logits");
  EXPECT_NEAR(auroc(two["scores"], two["targets"]), number(two, "auroc"), 1e-12);
  EXPECT_NEAR(average_precision(two["scores"], two["targets"]), number(two, "average_precision"), 1e-12);
  const GoldenCase& multi = golden("metrics", "ranking_multiclass");
  EXPECT_NEAR(auroc(multi["probs"], multi["targets"]), number(multi, "auroc"), 1e-12);
  EXPECT_NEAR(average_precision(multi["probs"], multi["targets"]), number(multi, "average_precision"), 1e-12);
  EXPECT_NEAR(auroc(multi["logits"], multi["targets"]), number(multi, "auroc_logits"), 1e-12);
  EXPECT_NEAR(average_precision(multi["logits"], multi["targets"], Scores::logits),
              number(multi, "average_precision_logits"), 1e-12);
  // As metrics, batch by batch (the scores of the whole phase are kept).
  for (const std::int64_t batch : {std::int64_t{3}, std::int64_t{16}, std::int64_t{1000}}) {
    SCOPED_TRACE(batch);
    EXPECT_NEAR(feed(*auroc_metric(), binary["scores"], binary["targets"], batch), number(binary, "auroc"), 1e-12);
    EXPECT_NEAR(feed(*average_precision_metric(), binary["scores"], binary["targets"], batch),
                number(binary, "average_precision"), 1e-12);
    EXPECT_NEAR(feed(*auroc_metric(Scores::logits), two["scores"], two["targets"], batch), number(two, "auroc"),
                1e-12);
    EXPECT_NEAR(feed(*auroc_metric(Scores::probabilities), multi["probs"], multi["targets"], batch),
                number(multi, "auroc"), 1e-12);
    EXPECT_NEAR(feed(*average_precision_metric(Scores::probabilities), multi["probs"], multi["targets"], batch),
                number(multi, "average_precision"), 1e-12);
  }
  // Undefined until both classes were seen: no value, then the value.
  RankingMetric metric(RankingMetric::Kind::auroc);
  metric.begin(Split::valid);
  const TensorData s1 = TensorData::from(std::vector<double>{0.2, 0.7}, Shape{2});
  const TensorData t1 = TensorData::from(std::vector<std::int64_t>{1, 1}, Shape{2});
  const TensorData s2 = TensorData::from(std::vector<double>{0.4}, Shape{1});
  const TensorData t2 = TensorData::from(std::vector<std::int64_t>{0}, Shape{1});
  StepInfo step;
  step.output = &s1, step.targets = &t1;
  EXPECT_FALSE(metric.update(step).has_value());
  step.output = &s2, step.targets = &t2;
  EXPECT_NEAR(metric.update(step)->value, 0.5, 1e-15);  // 0.7 above 0.4, 0.2 below
}

std::vector<std::string> sentences(const TensorData& code_points) {
  std::vector<std::string> out(1);
  for (const std::int64_t cp : code_points.to_vec<std::int64_t>()) {
    if (cp == 0) {
      out.emplace_back();
      continue;
    }
    std::string& s = out.back();
    if (cp < 0x80) {
      s += static_cast<char>(cp);
    } else if (cp < 0x800) {
      s += static_cast<char>(0xC0 | (cp >> 6)), s += static_cast<char>(0x80 | (cp & 0x3F));
    } else {
      s += static_cast<char>(0xE0 | (cp >> 12)), s += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      s += static_cast<char>(0x80 | (cp & 0x3F));
    }
  }
  out.pop_back();  // after the last 0
  return out;
}

TEST(TaskMetrics, ErrorRatesSumEditsOverReferenceLengths) {
  const GoldenCase& c = golden("metrics", "error_rates");
  const auto preds = sentences(c["preds"]), refs = sentences(c["refs"]);
  ASSERT_EQ(preds.size(), 5u);
  EXPECT_EQ(refs[2], "na\xC3\xAFve caf\xC3\xA9 d\xC3\xA9j\xC3\xA0 vu");
  EXPECT_NEAR(char_error_rate(preds, refs), number(c, "cer"), 1e-12);
  EXPECT_NEAR(word_error_rate(preds, refs), number(c, "wer"), 1e-12);
  EXPECT_EQ(char_error_rate({"kitten"}, {"sitting"}), 3.0 / 7.0);
  EXPECT_EQ(word_error_rate({""}, {"a b"}), 1.0);
  const std::vector<std::int64_t> a = {1, 2, 3}, b = {2, 3, 4, 5};
  EXPECT_EQ(edit_distance(a, b), 3);
  EXPECT_EQ(edit_distance({}, b), 4);

  const GoldenCase& t = golden("metrics", "token_error_rate");
  for (const std::int64_t batch : {std::int64_t{1}, std::int64_t{4}, std::int64_t{6}}) {
    ErrorRateMetric metric("wer", 0);
    EXPECT_NEAR(feed(metric, t["preds"], t["refs"], batch), number(t, "error_rate"), 1e-12);
    EXPECT_EQ(metric.name(), "wer");
  }
  // Scores [N, T, V] whose argmax are the predicted ids give the same rate.
  const auto ids = t["preds"].to_vec<std::int64_t>();
  std::vector<double> scores(ids.size() * 9, 0.0);
  for (std::size_t i = 0; i < ids.size(); ++i) scores[i * 9 + static_cast<std::size_t>(ids[i])] = 1.0;
  const TensorData one_hot = TensorData::from(scores, Shape{6, 10, 9});
  ErrorRateMetric metric("cer", 0);
  EXPECT_NEAR(feed(metric, one_hot, t["refs"], 6), number(t, "error_rate"), 1e-12);
}

TEST(TaskMetrics, PsnrAndSsimFollowTheExplicitFormulas) {
  for (const std::string name : {"images", "images_255"}) {
    SCOPED_TRACE(name);
    const GoldenCase& c = golden("metrics", name);
    const double range = name == "images" ? 1.0 : 255.0;
    EXPECT_NEAR(psnr(c["output"], c["targets"], range), number(c, "psnr"), 1e-10);
    EXPECT_NEAR(ssim(c["output"], c["targets"], range), number(c, "ssim"), 1e-12);
    for (const std::int64_t batch : {std::int64_t{1}, std::int64_t{3}}) {
      PsnrMetric p(range);
      SsimMetric s(range);
      EXPECT_NEAR(feed(p, c["output"], c["targets"], batch), number(c, "psnr"), 1e-10);
      EXPECT_NEAR(feed(s, c["output"], c["targets"], batch), number(c, "ssim"), 1e-12);
    }
  }
  const GoldenCase& c = golden("metrics", "images");
  const std::vector<double> per = ssim_per_image(c["output"], c["targets"], 1.0);
  const std::vector<double> want = c["ssim_per_image"].to_vec<double>();
  ASSERT_EQ(per.size(), want.size());
  for (std::size_t i = 0; i < per.size(); ++i) EXPECT_NEAR(per[i], want[i], 1e-12);
  EXPECT_NEAR(ssim(c["targets"], c["targets"], 1.0), 1.0, 1e-12);
}

// The counts a data-parallel run sums across its ranks: each rank's part of the phase fed to
// a metric of its own, the parts' phase_counts() summed, value_of_counts() of the sum is
// the value of the whole phase on one process (the golden value).
double across_parts(const std::function<std::unique_ptr<Metric>()>& make, const TensorData& output,
                    const TensorData& targets, std::int64_t parts) {
  const std::int64_t n = output.shape()[0];
  std::vector<double> summed;
  std::unique_ptr<Metric> metric;
  for (std::int64_t part = 0; part < parts; ++part) {
    const std::int64_t begin = n * part / parts, end = n * (part + 1) / parts;
    metric = make();
    (void)feed(*metric, rows_of(output, begin, end - begin), rows_of(targets, begin, end - begin), 2);
    const std::vector<double> counts = metric->phase_counts();
    summed.resize(std::max(summed.size(), counts.size()), 0.0);
    for (std::size_t i = 0; i < counts.size(); ++i) summed[i] += counts[i];
  }
  return metric->value_of_counts(summed).value();
}

TEST(TaskMetrics, CountsSummedOverPartsGiveTheWholePhasesValue) {
  for (const std::string name : {"regression_1d", "regression_2d"}) {
    SCOPED_TRACE(name);
    const GoldenCase& c = golden("metrics", name);
    for (const std::int64_t parts : {std::int64_t{1}, std::int64_t{2}, std::int64_t{3}}) {
      EXPECT_NEAR(across_parts(mae_metric, c["output"], c["targets"], parts), number(c, "mae"), 1e-12);
      EXPECT_NEAR(across_parts(mse_metric, c["output"], c["targets"], parts), number(c, "mse"), 1e-12);
      EXPECT_NEAR(across_parts(rmse_metric, c["output"], c["targets"], parts), number(c, "rmse"), 1e-12);
      EXPECT_NEAR(across_parts(r2_metric, c["output"], c["targets"], parts), number(c, "r2"), 1e-10);
    }
  }
  const GoldenCase& p = golden("metrics", "perplexity");
  const auto perplexity = [] { return std::make_unique<PerplexityMetric>(); };
  EXPECT_NEAR(across_parts(perplexity, p["scores"], p["targets"], 2), number(p, "perplexity"), 1e-10);
  const GoldenCase& i = golden("metrics", "images");
  const auto image_psnr = [] { return std::make_unique<PsnrMetric>(1.0); };
  EXPECT_NEAR(across_parts(image_psnr, i["output"], i["targets"], 2), number(i, "psnr"), 1e-10);
  // A metric of the mean of its steps has no counts: the learner combines its weighted sums.
  EXPECT_TRUE(HammingLossMetric().phase_counts().empty());
  EXPECT_EQ(ThroughputMetric().across_ranks(), AcrossRanks::sum);
  EXPECT_EQ(MemoryMetric().across_ranks(), AcrossRanks::max);
}

TEST(TaskMetrics, BadInputNamesTheShapes) {
  const TensorData a = TensorData::from(std::vector<double>(6, 0.5), Shape{2, 3});
  const TensorData b = TensorData::from(std::vector<double>(6, 0.5), Shape{3, 2});
  EXPECT_KILN_ERROR(RegressionSums().add(a, b), "regression metric", "output [2, 3] and targets [3, 2]");
  EXPECT_KILN_ERROR((void)RegressionSums().r2(), "r2", "at least two examples, got 0");
  EXPECT_KILN_ERROR((void)hamming_loss(a, b), "hamming_loss", "scores [2, 3] and targets [3, 2]");
  EXPECT_KILN_ERROR((void)hamming_loss(a, a), "hamming_loss: target 0.5 at 0 of targets [2, 3] is not 0 or 1");
  const TensorData labels = TensorData::from(std::vector<std::int64_t>{1, 1}, Shape{2});
  EXPECT_KILN_ERROR((void)auroc(TensorData::from(std::vector<double>{0.1, 0.2}, Shape{2}), labels),
                    "auroc: undefined for scores [2]", "no positive or no negative");
  EXPECT_KILN_ERROR((void)auroc(a, TensorData::from(std::vector<std::int64_t>{0, 3}, Shape{2})),
                    "target 3 of row 1 is not a class of scores [2, 3]");
  EXPECT_KILN_ERROR((void)average_precision(a, TensorData::from(std::vector<std::int64_t>{0}, Shape{1})),
                    "scores [2, 3] and targets [1]");
  EXPECT_KILN_ERROR((void)char_error_rate({"a"}, {"a", "b"}), "char_error_rate: 1 predictions for 2 references");
  EXPECT_KILN_ERROR((void)word_error_rate({"a"}, {"  "}), "word_error_rate: the 1 references are all empty");
  const TensorData small = TensorData::from(std::vector<double>(100, 0.5), Shape{1, 1, 10, 10});
  EXPECT_KILN_ERROR((void)ssim(small, small, 1.0), "ssim: the images [1, 1, 10, 10] must be at least 11x11");
  EXPECT_KILN_ERROR((void)psnr(a, a, 1.0), "psnr", "images [N, C, H, W]", "output [2, 3]");
  EXPECT_KILN_ERROR((void)psnr(small, small, 0.0), "psnr: data_range must be finite and > 0, got 0");
  EXPECT_KILN_ERROR(PsnrMetric(-1.0), "PsnrMetric: data_range must be finite and > 0, got -1");
  EXPECT_KILN_ERROR(HammingLossMetric(2.0), "HammingLossMetric: the threshold is a probability in [0, 1], got 2");
  PerplexityMetric perplexity;
  StepInfo step;
  step.output = &a, step.targets = &a;
  EXPECT_KILN_ERROR((void)perplexity.update(step), "perplexity", "scores [2, 3] and targets [2, 3]");
  step.targets = &labels;
  const TensorData bad = TensorData::from(std::vector<std::int64_t>{0, 7}, Shape{2});
  step.targets = &bad;
  EXPECT_KILN_ERROR((void)perplexity.update(step), "perplexity: target 7 at 1 is not a class of scores [2, 3]");
  ErrorRateMetric wer("wer", 0);
  EXPECT_KILN_ERROR((void)wer.update(step), "wer: the output must be token ids [N, T]", "output [2, 3]");
}

}  // namespace
