// Precision, recall, F-beta and the confusion matrix against scikit-learn
// (tests/golden/gen_metrics.py): every `average`, classes absent from the data, a class never
// predicted, and the epoch's value from batches; the names, the reset per phase and the errors.
#include <kiln/train/metric.hpp>

#include "expect_error.hpp"

#include <gtest/gtest.h>

#include "golden.hpp"

#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace {

using namespace kiln;
using namespace kiln::train;
using kiln::test::GoldenCase;
using kiln::test::golden;

double number(const GoldenCase& c, const std::string& label) { return c[label].to_vec<double>().at(0); }

// Feeds the case to `metric` in batches of `batch` rows; returns its last value.
double feed(Metric& metric, const GoldenCase& c, std::int64_t batch) {
  const TensorData& scores = c["scores"];
  const TensorData& targets = c["targets"];
  const std::int64_t n = scores.shape()[0], classes = scores.shape()[1];
  const std::vector<double> s = scores.to_vec<double>();
  const std::vector<std::int64_t> t = targets.to_vec<std::int64_t>();
  metric.begin(Split::valid);
  double last = -1;
  for (std::int64_t start = 0; start < n; start += batch) {
    const std::int64_t rows = std::min(batch, n - start);
    const TensorData part_scores = TensorData::from(
        std::vector<double>(s.begin() + start * classes, s.begin() + (start + rows) * classes), Shape{rows, classes});
    const TensorData part_targets =
        TensorData::from(std::vector<std::int64_t>(t.begin() + start, t.begin() + start + rows), Shape{rows});
    StepInfo step;
    step.split = Split::valid;
    step.output = &part_scores;
    step.targets = &part_targets;
    step.items = rows;
    const auto value = metric.update(step);
    if (value) last = value->value;
  }
  return last;
}

TEST(ClassificationMetrics, FollowScikitLearnForEveryAverage) {
  for (const std::string name : {"multiclass", "absent_classes", "binary"}) {
    SCOPED_TRACE(name);
    const GoldenCase& c = golden("metrics", name);
    int checked = 0;
    for (const Average average : {Average::binary, Average::macro, Average::micro, Average::weighted}) {
      const std::string suffix = "_" + std::string(average_name(average));
      if (!c.tensors.count("precision" + suffix)) continue;
      SCOPED_TRACE(suffix);
      for (const std::int64_t batch : {std::int64_t{7}, std::int64_t{1000}}) {
        ClassificationMetric precision(ClassificationMetric::Kind::precision, average);
        ClassificationMetric recall(ClassificationMetric::Kind::recall, average);
        ClassificationMetric f1(ClassificationMetric::Kind::fbeta, average);
        ClassificationMetric f05(ClassificationMetric::Kind::fbeta, average, 0.5);
        EXPECT_NEAR(feed(precision, c, batch), number(c, "precision" + suffix), 1e-12);
        EXPECT_NEAR(feed(recall, c, batch), number(c, "recall" + suffix), 1e-12);
        EXPECT_NEAR(feed(f1, c, batch), number(c, "f1" + suffix), 1e-12);
        EXPECT_NEAR(feed(f05, c, batch), number(c, "f0_5" + suffix), 1e-12);
        EXPECT_EQ(f05.name(), "f0_5" + suffix);
        ++checked;
      }
    }
    EXPECT_GE(checked, 6);
    // The confusion matrix, counted from the batches.
    ConfusionMatrix matrix;
    matrix.add(c["scores"], c["targets"]);
    const std::vector<std::int64_t> want = c["confusion"].to_vec<std::int64_t>();
    const std::int64_t classes = matrix.classes();
    ASSERT_EQ(static_cast<std::int64_t>(want.size()), classes * classes);
    for (std::int64_t t = 0; t < classes; ++t)
      for (std::int64_t p = 0; p < classes; ++p)
        EXPECT_EQ(matrix.count(t, p), want[static_cast<std::size_t>(t * classes + p)]) << t << ", " << p;
    EXPECT_EQ(matrix.total(), c["scores"].shape()[0]);
  }
}

// A new phase starts the counts over; the metric's epoch value is its last (Aggregate::last).
TEST(ClassificationMetrics, EachPhaseCountsAfresh) {
  const GoldenCase& c = golden("metrics", "multiclass");
  const auto metric = fbeta_metric(1.0, Average::macro);
  EXPECT_EQ(metric->name(), "f1_macro");
  EXPECT_EQ(metric->aggregate(), Aggregate::last);
  EXPECT_TRUE(metric->needs_outputs());
  feed(*metric, golden("metrics", "binary"), 10);  // another phase first, with 2 classes
  EXPECT_NEAR(feed(*metric, c, 16), number(c, "f1_macro"), 1e-12);  // begin() cleared it
  EXPECT_EQ(precision_metric(Average::weighted)->name(), "precision_weighted");
  EXPECT_EQ(recall_metric()->name(), "recall_macro");
}

// A data-parallel run sums the ranks' confusion matrices (phase_counts) and computes the
// metric once from the sum: the value of all the predictions, not a mean of the ranks'.
TEST(ClassificationMetrics, SummedCountsGiveTheValueOfAllPredictions) {
  const TensorData scores = TensorData::from(std::vector<double>{0.9, 0.1, 0.0, 0.2, 0.7, 0.1, 0.3, 0.3, 0.4, 0.6, 0.3, 0.1,
                                                                 0.1, 0.1, 0.8, 0.5, 0.4, 0.1},
                                             Shape{6, 3});
  const TensorData targets = TensorData::from(std::vector<std::int64_t>{0, 1, 1, 0, 2, 2}, Shape{6});
  ConfusionMatrix whole;
  whole.add(scores, targets);
  const auto part = [&](std::int64_t begin) {
    const auto s = scores.to_vec<double>();
    const auto t = targets.to_vec<std::int64_t>();
    return std::pair{TensorData::from(std::vector<double>(s.begin() + begin * 3, s.begin() + (begin + 3) * 3), Shape{3, 3}),
                     TensorData::from(std::vector<std::int64_t>(t.begin() + begin, t.begin() + begin + 3), Shape{3})};
  };
  for (const auto& make : {precision_metric, recall_metric}) {
    std::vector<double> summed(9, 0.0);
    double mean_of_parts = 0;
    std::unique_ptr<Metric> metric;
    for (const std::int64_t begin : {0, 3}) {
      metric = make(Average::macro);
      metric->begin(Split::valid);
      const auto [s, t] = part(begin);
      StepInfo step;
      step.output = &s;
      step.targets = &t;
      mean_of_parts += metric->update(step)->value / 2;
      const auto counts = metric->phase_counts();
      ASSERT_EQ(counts.size(), 9u);
      for (std::size_t i = 0; i < 9; ++i) summed[i] += counts[i];
    }
    const double want = metric->name() == "precision_macro" ? whole.precision(Average::macro) : whole.recall(Average::macro);
    EXPECT_DOUBLE_EQ(*metric->value_of_counts(summed), want) << metric->name();
    EXPECT_NE(mean_of_parts, want) << metric->name() << ": the example should tell the two apart";
  }
  EXPECT_EQ(ConfusionMatrix::from_counts(3, whole.counts()).precision(Average::micro), whole.precision(Average::micro));
  EXPECT_KILN_ERROR(ConfusionMatrix::from_counts(3, {1, 2}), "ConfusionMatrix::from_counts", "2 counts for 3 classes");
}

TEST(ClassificationMetrics, BadInputNamesTheShapes) {
  const GoldenCase& c = golden("metrics", "multiclass");
  ConfusionMatrix matrix;
  matrix.add(c["scores"], c["targets"]);
  const auto message = [](auto&& f) {
    try {
      f();
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(message([&] { (void)matrix.precision(Average::binary); })
                .find("precision with Average::binary needs two classes (class 1 is the positive one), got 4"),
            std::string::npos);
  const TensorData three = TensorData::from(std::vector<double>(6, 0.0), Shape{2, 3});
  const TensorData labels = TensorData::from(std::vector<std::int64_t>{0, 1}, Shape{2});
  EXPECT_NE(message([&] { matrix.add(three, labels); }).find("scores [2, 3] have 3 classes, earlier ones had 4"),
            std::string::npos);
  ConfusionMatrix fresh;
  EXPECT_NE(message([&] { fresh.add(three, TensorData::from(std::vector<std::int64_t>{0, 5}, Shape{2})); })
                .find("target 5 of row 1 is not a class of scores [2, 3]"),
            std::string::npos);
  EXPECT_NE(message([&] { fresh.add(three, TensorData::from(std::vector<std::int64_t>{0, 1, 2}, Shape{3})); })
                .find("the targets must be class indices [2]"),
            std::string::npos);
  EXPECT_NE(message([&] { (void)ConfusionMatrix().recall(Average::macro); }).find("no examples were added"),
            std::string::npos);
  EXPECT_NE(message([] { ClassificationMetric(ClassificationMetric::Kind::fbeta, Average::macro, 0.0); })
                .find("fbeta_metric: beta must be finite and > 0, got 0"),
            std::string::npos);
}

}  // namespace
