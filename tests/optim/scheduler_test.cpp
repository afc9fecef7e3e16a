// Learning-rate schedulers against torch.optim.lr_scheduler (tests/golden/gen_scheduler.py):
// every golden case through lr(step) and through Scheduler::step(), the two ways agreeing
// exactly, SequentialLR and warmup_cosine, and the argument errors.
#include "golden.hpp"

#include <kiln/kiln.hpp>
#include <kiln/optim/scheduler.hpp>

#include <fmt/format.h>

#include <cmath>
#include <functional>
#include <limits>
#include <map>
#include <numbers>
#include <numeric>
#include <string>

// docs/optimizers.md's scheduler example, extracted from the page by tests/docs (its #include
// lines are no-ops here: this file includes those headers first).
// A block's main() may end without a return (it is main where the page compiles it); here
// it is an ordinary function, which the tests do not call unless it returns.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wreturn-type"
namespace docs_optimizers {
#include "optimizers_3.cpp"
}  // namespace docs_optimizers
#pragma GCC diagnostic pop

namespace {

using namespace kiln;
using namespace kiln::optim;
using kiln::test::GoldenCase;
using kiln::test::golden;

constexpr double kRelativeTolerance = 1e-12;

double number(const GoldenCase& c, const char* label) { return c[label].to_vec<double>().at(0); }
std::int64_t integer(const GoldenCase& c, const char* label) { return c[label].to_vec<std::int64_t>().at(0); }

// The sub-schedulers of the sequential cases, as gen_scheduler.py builds them.
Scheduler sequential(const std::string& name) {
  if (name == "sequential_0") return SequentialLR({LinearLR(0.1, 0.01, 1.0, 10), CosineAnnealingLR(0.1, 90, 0.001)}, {10});
  if (name == "sequential_1") return SequentialLR({ConstantLR(1.0, 0.1, 2), ExponentialLR(1.0, 0.9)}, {2});
  if (name == "sequential_2")
    return SequentialLR({LinearLR(0.1, 0.1, 1.0, 5), StepLR(0.1, 10, 0.5), CosineAnnealingLR(0.1, 30, 0.0)}, {5, 45});
  throw Error("no sub-schedulers for golden case " + name);
}

Scheduler chained(const std::string& name) {
  if (name == "chained_0") return ChainedScheduler(0.1, {ConstantLR(0.1, 0.5, 3), ExponentialLR(0.1, 0.9)});
  if (name == "chained_1")
    return ChainedScheduler(1.0, {LinearLR(1.0, 0.2, 1.0, 5), StepLR(1.0, 4, 0.5), PolynomialLR(1.0, 30, 2.0)});
  throw Error("no sub-schedulers for golden case " + name);
}

// Builds each golden case's scheduler from the arguments stored in it.
const std::map<std::string, std::function<Scheduler(const GoldenCase&)>> kBuilders = {
    {"step_lr", [](const GoldenCase& c) -> Scheduler {
       return StepLR(number(c, "base_lr"), integer(c, "step_size"), number(c, "gamma"));
     }},
    {"multi_step_lr", [](const GoldenCase& c) -> Scheduler {
       return MultiStepLR(number(c, "base_lr"), c["milestones"].to_vec<std::int64_t>(), number(c, "gamma"));
     }},
    {"exponential_lr",
     [](const GoldenCase& c) -> Scheduler { return ExponentialLR(number(c, "base_lr"), number(c, "gamma")); }},
    {"cosine_annealing_lr", [](const GoldenCase& c) -> Scheduler {
       return CosineAnnealingLR(number(c, "base_lr"), integer(c, "t_max"), number(c, "eta_min"));
     }},
    {"linear_lr", [](const GoldenCase& c) -> Scheduler {
       return LinearLR(number(c, "base_lr"), number(c, "start_factor"), number(c, "end_factor"),
                       integer(c, "total_iters"));
     }},
    {"constant_lr", [](const GoldenCase& c) -> Scheduler {
       return ConstantLR(number(c, "base_lr"), number(c, "factor"), integer(c, "total_iters"));
     }},
    {"one_cycle_lr", [](const GoldenCase& c) -> Scheduler {
       return OneCycleLR(number(c, "max_lr"), integer(c, "total_steps"),
                         {.pct_start = number(c, "pct_start"),
                          .anneal = integer(c, "linear") != 0 ? Anneal::linear : Anneal::cos,
                          .div_factor = number(c, "div_factor"),
                          .final_div_factor = number(c, "final_div_factor"),
                          .three_phase = integer(c, "three_phase") != 0});
     }},
    {"noam", [](const GoldenCase& c) -> Scheduler {
       return NoamLR(integer(c, "d_model"), integer(c, "warmup_steps"), number(c, "factor"));
     }},
    {"sequential", [](const GoldenCase& c) { return sequential(c.name); }},
    {"chained", [](const GoldenCase& c) { return chained(c.name); }},
    {"lambda_lr", [](const GoldenCase& c) -> Scheduler {
       if (integer(c, "factor_kind") == 0) return LambdaLR(number(c, "base_lr"), [](std::int64_t t) { return std::pow(0.97, static_cast<double>(t)); });
       return LambdaLR(number(c, "base_lr"), [](std::int64_t t) { return 1.0 / static_cast<double>(1 + t / 4); });
     }},
    {"polynomial_lr", [](const GoldenCase& c) -> Scheduler {
       return PolynomialLR(number(c, "base_lr"), integer(c, "total_iters"), number(c, "power"));
     }},
    {"cosine_annealing_warm_restarts", [](const GoldenCase& c) -> Scheduler {
       return CosineAnnealingWarmRestarts(number(c, "base_lr"), integer(c, "t_0"), integer(c, "t_mult"),
                                          number(c, "eta_min"));
     }},
    {"cyclic_lr", [](const GoldenCase& c) -> Scheduler {
       const CyclicMode modes[] = {CyclicMode::triangular, CyclicMode::triangular2, CyclicMode::exp_range};
       return CyclicLR(number(c, "base_lr"), number(c, "max_lr"), integer(c, "step_size_up"),
                       integer(c, "step_size_down"), modes[integer(c, "mode")], number(c, "gamma"));
     }},
    {"multiplicative_lr", [](const GoldenCase& c) -> Scheduler {
       if (integer(c, "factor_kind") == 0) return MultiplicativeLR(number(c, "base_lr"), [](std::int64_t) { return 0.95; });
       return MultiplicativeLR(number(c, "base_lr"), [](std::int64_t t) { return t % 3 == 0 ? 0.5 : 1.0; });
     }},
};

// "cosine_annealing_lr_3" -> "cosine_annealing_lr"
std::string kind_of(const std::string& case_name) { return case_name.substr(0, case_name.rfind('_')); }

// The steps a case covers: its `steps`, or 0 .. n - 1.
std::vector<std::int64_t> steps_of(const GoldenCase& c) {
  if (c.tensors.count("steps")) return c["steps"].to_vec<std::int64_t>();
  std::vector<std::int64_t> steps(static_cast<std::size_t>(c["lr"].numel()));
  std::iota(steps.begin(), steps.end(), std::int64_t{0});
  return steps;
}

// |actual - expected| <= 1e-12 |expected| at every step, naming the worst.
::testing::AssertionResult follows(const std::vector<std::int64_t>& steps, const std::vector<double>& actual,
                                   const std::vector<double>& expected) {
  double worst = 0;
  std::size_t worst_at = 0;
  for (std::size_t i = 0; i < steps.size(); ++i) {
    const double error = std::abs(actual[i] - expected[i]);
    const double relative = error == 0 ? 0 : error / std::abs(expected[i]);
    if (relative > worst) worst = relative, worst_at = i;
  }
  if (worst <= kRelativeTolerance) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "step " << steps[worst_at] << ": lr " << actual[worst_at] << ", torch "
                                       << expected[worst_at] << " (relative error " << worst << ")";
}

TEST(Scheduler, EveryGoldenCaseFollowsTorch) {
  std::map<std::string, int> cases_per_kind;
  for (const std::string& name : kiln::test::golden_case_names("scheduler")) {
    SCOPED_TRACE(name);
    const GoldenCase& c = golden("scheduler", name);
    const auto builder = kBuilders.find(kind_of(name));
    ASSERT_NE(builder, kBuilders.end()) << "no builder for the golden case";
    ++cases_per_kind[builder->first];
    const Scheduler scheduler = builder->second(c);
    const std::vector<std::int64_t> steps = steps_of(c);
    const std::vector<double> expected = c["lr"].to_vec<double>();

    std::vector<double> stateless, stateful;
    Scheduler stepper = scheduler;
    for (const std::int64_t step : steps) {
      stateless.push_back(scheduler.lr(step));
      while (stepper.steps() < step) stepper.step();
      stateful.push_back(stepper.current());
    }
    EXPECT_TRUE(follows(steps, stateless, expected)) << "lr(step)";
    EXPECT_TRUE(follows(steps, stateful, expected)) << "Scheduler::step()";
  }
  for (const auto& [kind, builder] : kBuilders) EXPECT_GE(cases_per_kind[kind], 2) << kind;
}

// step() uses the chained form where a schedule has one; it must land on lr(step) exactly.
TEST(Scheduler, SteppingMatchesLrExactly) {
  const std::vector<Scheduler> schedulers = {
      StepLR(0.1, 3, 0.7),
      MultiStepLR(0.1, {2, 9, 9}, 0.5),
      ExponentialLR(0.3, 0.99),
      CosineAnnealingLR(0.1, 37, 0.002),
      CosineAnnealingLR(1.0, 1, 0.5),
      LinearLR(0.1, 0.2, 0.9, 17),
      ConstantLR(0.1, 0.25, 8),
      OneCycleLR(0.1, 500, {.three_phase = true}),
      NoamLR(256, 50),
      warmup_cosine(0.1, 20, 60, 0.01, 0.05),
      SequentialLR({CosineAnnealingLR(0.1, 10), SequentialLR({ExponentialLR(0.05, 0.9), CosineAnnealingLR(0.02, 7)}, {5})},
                   {30}),
  };
  for (std::size_t i = 0; i < schedulers.size(); ++i) {
    SCOPED_TRACE("scheduler " + std::to_string(i));
    Scheduler s = schedulers[i];
    for (std::int64_t step = 0; step <= 400; ++step) {
      ASSERT_EQ(s.steps(), step);
      ASSERT_EQ(s.current(), s.lr(step)) << "step " << step;
      s.step();
    }
  }
}

TEST(Scheduler, CopiesKeepTheirOwnPositionAndSeekResumes) {
  Scheduler a = StepLR(1.0, 2, 0.5);
  a.step();
  a.step();
  Scheduler b = a;
  b.step();
  b.step();
  EXPECT_EQ(a.steps(), 2);
  EXPECT_EQ(a.current(), 0.5);
  EXPECT_EQ(b.steps(), 4);
  EXPECT_EQ(b.current(), 0.25);

  Scheduler c = CosineAnnealingLR(0.1, 25, 0.01);
  c.seek(80);
  EXPECT_EQ(c.steps(), 80);
  EXPECT_EQ(c.current(), c.lr(80));
  c.step();
  EXPECT_EQ(c.current(), c.lr(81));
  EXPECT_KILN_ERROR(c.seek(-1), "CosineAnnealingLR: step must be >= 0, got -1");
  EXPECT_EQ(c.steps(), 81);
}

// Steps up to INT64_MAX (a resumed run seeks to the step count its checkpoint holds):
// no signed overflow and no endless loop. CosineAnnealingLR's replay past t_max used to
// step `t` past INT64_MAX (a hang), `2 * t_max` overflowed for t_max > 2^62, and NoamLR's
// `step + 1` wrapped to a negative step (a NaN rate).
TEST(Scheduler, HugeStepsNeitherOverflowNorHang) {
  constexpr std::int64_t kMax = std::numeric_limits<std::int64_t>::max();
  const CosineAnnealingLR cosine(0.1, 25, 0.01);
  const double last = cosine.lr(kMax);
  // The same replay, written out: from the minimum before kMax (minima at 25, 75, 125...).
  double rate = 0.01;
  for (std::int64_t t = kMax - (kMax - 25) % 50; t < kMax;) rate = cosine.lr_after(++t, rate);
  EXPECT_EQ(last, rate);
  EXPECT_GE(last, 0.01);
  EXPECT_LE(last, 0.1);

  // Beyond max_replayed_t_max, the closed form past t_max too (no O(t_max) replay), in lr and
  // in step() alike, so that a resumed run (seek) continues bitwise as an uninterrupted one.
  for (const std::int64_t t_max : {CosineAnnealingLR::max_replayed_t_max + 1, std::int64_t{1} << 40,
                                   (std::int64_t{1} << 62) + 1, kMax}) {
    SCOPED_TRACE(t_max);
    const CosineAnnealingLR long_cosine(0.1, t_max, 0.001);
    const auto closed = [&](std::int64_t step) {
      return 0.001 + (0.1 - 0.001) * (1 + std::cos(std::numbers::pi * static_cast<double>(step) /
                                                   static_cast<double>(t_max))) / 2;
    };
    for (const std::int64_t step : {t_max, t_max == kMax ? kMax : t_max + 1, kMax})
      EXPECT_EQ(long_cosine.lr(step), closed(step)) << step;
    Scheduler s = long_cosine;
    const std::int64_t from = std::min(t_max, kMax - 8);
    s.seek(from);
    for (std::int64_t step = from; step < from + 3; ++step) {
      s.step();
      EXPECT_EQ(s.current(), long_cosine.lr(step + 1)) << step + 1;
    }
  }

  const double noam = NoamLR(512, 4000).lr(kMax);
  EXPECT_TRUE(std::isfinite(noam) && noam > 0) << noam;
  EXPECT_GT(StepLR(0.1, 1, 0.5).lr(kMax), -1.0);  // 0 after underflow, but defined
  EXPECT_EQ(LinearLR(0.1, 0.5, 1.0, 10).lr(kMax), 0.1);
  EXPECT_EQ(PolynomialLR(0.1, 10, 2.0).lr(kMax), 0.0);
  // Periods that double from 3 reach past INT64_MAX without overflowing the period.
  for (const std::int64_t t_mult : {1, 2, 3, 1000}) {
    const double restart = CosineAnnealingWarmRestarts(0.1, 3, t_mult, 0.01).lr(kMax);
    EXPECT_TRUE(restart >= 0.01 && restart <= 0.1) << t_mult << ": " << restart;
  }
  const double cyclic = CyclicLR(0.01, 0.1, 7, 0, CyclicMode::triangular).lr(kMax);
  EXPECT_TRUE(cyclic >= 0.01 && cyclic <= 0.1) << cyclic;

  // A scheduler at INT64_MAX steps refuses one more, instead of counting to a negative step.
  Scheduler at_end = ExponentialLR(0.1, 0.9);
  at_end.seek(kMax);
  EXPECT_KILN_ERROR(at_end.step(), "Scheduler::step: 9223372036854775807 steps were taken");
  EXPECT_EQ(at_end.steps(), kMax);
}

// Any type with `double lr(std::int64_t) const` is a schedule (PyTorch's LambdaLR).
struct HalvingEvery10 {
  double lr(std::int64_t step) const { return 0.08 / static_cast<double>(1 << (step / 10)); }
};
static_assert(LrSchedule<HalvingEvery10>);
static_assert(!LrSchedule<int>);

TEST(Scheduler, TakesUserSchedules) {
  Scheduler s = SequentialLR({LinearLR(0.08, 0.5, 1.0, 4), HalvingEvery10{}}, {4});
  EXPECT_EQ(s.lr(0), 0.04);
  EXPECT_EQ(s.lr(4), 0.08);
  EXPECT_EQ(s.lr(24), 0.02);
}

TEST(Scheduler, WarmupCosineIsSequentialLinearThenCosine) {
  const GoldenCase& c = golden("scheduler", "sequential_0");
  const SequentialLR schedule = warmup_cosine(0.1, 10, 100, 0.001, 0.01);
  const std::vector<std::int64_t> steps = steps_of(c);
  std::vector<double> actual;
  for (const std::int64_t step : steps) actual.push_back(schedule.lr(step));
  EXPECT_TRUE(follows(steps, actual, c["lr"].to_vec<double>()));
  EXPECT_DOUBLE_EQ(schedule.lr(10), 0.1);    // warmup reaches base_lr
  EXPECT_DOUBLE_EQ(schedule.lr(100), 0.001); // and the cosine eta_min at total_steps
}

TEST(Scheduler, OneCycleEndsAtTotalSteps) {
  const OneCycleLR cycle(0.1, 50);
  EXPECT_DOUBLE_EQ(cycle.lr(0), 0.1 / 25);
  EXPECT_DOUBLE_EQ(cycle.lr(14), 0.1);  // pct_start 0.3: the peak at step 0.3 * 50 - 1
  EXPECT_NEAR(cycle.lr(49), 0.1 / 25 / 1e4, 1e-15);
  EXPECT_KILN_ERROR(cycle.lr(51), "OneCycleLR: step 51 is past total_steps 50");
  Scheduler s = cycle;
  s.seek(50);
  EXPECT_KILN_ERROR(s.step(), "past total_steps 50");
  EXPECT_EQ(s.steps(), 50);
}

TEST(Scheduler, RejectsBadArguments) {
  EXPECT_KILN_ERROR(StepLR(0.1, -3), "StepLR: step_size must be >= 1, got -3");
  EXPECT_KILN_ERROR(StepLR(0.1, 0), "StepLR: step_size must be >= 1, got 0");
  EXPECT_KILN_ERROR(StepLR(-0.1, 3), "StepLR: base_lr must be a finite learning rate >= 0, got -0.1");
  EXPECT_KILN_ERROR(StepLR(NAN, 3), "StepLR: base_lr must be a finite learning rate >= 0, got nan");
  EXPECT_KILN_ERROR(StepLR(0.1, 3, 0.0), "StepLR: gamma must be finite and > 0, got 0");
  EXPECT_KILN_ERROR(StepLR(0.1, 3).lr(-1), "StepLR: step must be >= 0, got -1");

  EXPECT_KILN_ERROR(ChainedScheduler(0.1, {}), "ChainedScheduler: schedulers is empty");
  EXPECT_KILN_ERROR(ChainedScheduler(0.0, {StepLR(0.0, 3)}), "ChainedScheduler: base_lr must be finite and > 0, got 0");
  EXPECT_KILN_ERROR(LambdaLR(0.1, nullptr), "LambdaLR: the factor function is empty");
  EXPECT_KILN_ERROR(MultiStepLR(0.1, {}), "MultiStepLR: milestones is empty");
  EXPECT_KILN_ERROR(MultiStepLR(0.1, {30, 10}), "MultiStepLR: milestones must be in increasing order, got 30 before 10");
  EXPECT_KILN_ERROR(MultiStepLR(0.1, {-5, 10}), "MultiStepLR: milestones must be >= 0, got -5");
  EXPECT_KILN_ERROR(MultiStepLR(0.1, {10}, -0.5), "MultiStepLR: gamma must be finite and > 0, got -0.5");

  EXPECT_KILN_ERROR(PolynomialLR(0.1, 0), "PolynomialLR: total_iters must be >= 1, got 0");
  EXPECT_KILN_ERROR(PolynomialLR(0.1, 5, -1.0), "PolynomialLR: power must be finite and > 0, got -1");
  EXPECT_KILN_ERROR(CosineAnnealingWarmRestarts(0.1, 0), "CosineAnnealingWarmRestarts: t_0 must be >= 1, got 0");
  EXPECT_KILN_ERROR(CosineAnnealingWarmRestarts(0.1, 5, 0), "CosineAnnealingWarmRestarts: t_mult must be >= 1, got 0");
  EXPECT_KILN_ERROR(CyclicLR(0.1, 1.0, 0), "CyclicLR: step_size_up must be >= 1, got 0");
  EXPECT_KILN_ERROR(CyclicLR(0.1, 1.0, 5, -1), "CyclicLR: step_size_down must be >= 0 (0: step_size_up), got -1");
  EXPECT_KILN_ERROR(MultiplicativeLR(0.1, nullptr), "MultiplicativeLR: the factor function is empty");

  EXPECT_KILN_ERROR(ExponentialLR(0.1, 0.0), "ExponentialLR: gamma must be finite and > 0, got 0");
  EXPECT_KILN_ERROR(ExponentialLR(0.1, INFINITY), "ExponentialLR: gamma must be finite and > 0, got inf");

  EXPECT_KILN_ERROR(CosineAnnealingLR(0.1, 0), "CosineAnnealingLR: t_max must be >= 1, got 0");
  EXPECT_KILN_ERROR(CosineAnnealingLR(0.1, 10, -1e-3), "CosineAnnealingLR: eta_min must be a finite learning rate >= 0");

  EXPECT_KILN_ERROR(LinearLR(0.1, 0.0), "LinearLR: start_factor must be in (0, 1], got 0");
  EXPECT_KILN_ERROR(LinearLR(0.1, 1.5), "LinearLR: start_factor must be in (0, 1], got 1.5");
  EXPECT_KILN_ERROR(LinearLR(0.1, 0.5, -0.1), "LinearLR: end_factor must be in [0, 1], got -0.1");
  EXPECT_KILN_ERROR(LinearLR(0.1, 0.5, 1.0, 0), "LinearLR: total_iters must be >= 1, got 0");

  EXPECT_KILN_ERROR(ConstantLR(0.1, 0.0), "ConstantLR: factor must be in (0, 1], got 0");
  EXPECT_KILN_ERROR(ConstantLR(0.1, 0.5, -2), "ConstantLR: total_iters must be >= 1, got -2");

  EXPECT_KILN_ERROR(OneCycleLR(0.1, 0), "OneCycleLR: total_steps must be > 0, got 0");
  EXPECT_KILN_ERROR(OneCycleLR(0.1, 100, {.pct_start = 0.0}), "OneCycleLR: pct_start must be in (0, 1), got 0");
  EXPECT_KILN_ERROR(OneCycleLR(0.1, 100, {.pct_start = 1.0}), "OneCycleLR: pct_start must be in (0, 1), got 1");
  EXPECT_KILN_ERROR(OneCycleLR(0.1, 100, {.div_factor = 0.0}), "OneCycleLR: div_factor must be finite and > 0, got 0");
  EXPECT_KILN_ERROR(OneCycleLR(0.1, 100, {.final_div_factor = -1.0}),
                    "OneCycleLR: final_div_factor must be finite and > 0, got -1");
  EXPECT_KILN_ERROR(OneCycleLR(0.1, 10, {.pct_start = 0.1}), "OneCycleLR: pct_start 0.1 and total_steps 10 leave phase 1 of 2");
  EXPECT_KILN_ERROR(OneCycleLR(0.1, 3, {.pct_start = 2.0 / 3, .three_phase = true}), "leave phase 3 of 3");

  EXPECT_KILN_ERROR(NoamLR(0, 4000), "NoamLR: d_model must be >= 1, got 0");
  EXPECT_KILN_ERROR(NoamLR(512, 0), "NoamLR: warmup_steps must be >= 1, got 0");
  EXPECT_KILN_ERROR(NoamLR(512, 4000, 0.0), "NoamLR: factor must be finite and > 0, got 0");

  EXPECT_KILN_ERROR(SequentialLR({}, {}), "SequentialLR: schedulers is empty");
  EXPECT_KILN_ERROR(SequentialLR({StepLR(0.1, 5), StepLR(0.1, 5)}, {}), "SequentialLR: 2 schedulers need 1 milestones");
  EXPECT_KILN_ERROR(SequentialLR({StepLR(0.1, 5), StepLR(0.1, 5)}, {0}), "SequentialLR: milestones must be >= 1, got 0");
  EXPECT_KILN_ERROR(SequentialLR({StepLR(0.1, 5), StepLR(0.1, 5), StepLR(0.1, 5)}, {10, 10}),
                    "SequentialLR: milestones must be strictly increasing, got 10 before 10 (at index 1)");
  EXPECT_KILN_ERROR(SequentialLR({StepLR(0.1, 5)}, {}).lr(-2), "SequentialLR: step must be >= 0, got -2");

  EXPECT_KILN_ERROR(warmup_cosine(0.1, 0, 100), "warmup_cosine: warmup_steps must be >= 1, got 0");
  EXPECT_KILN_ERROR(warmup_cosine(0.1, 100, 100), "warmup_cosine: total_steps (100) must be greater than warmup_steps (100)");
  EXPECT_KILN_ERROR(warmup_cosine(0.1, 10, 100, 0.0, 0.0), "LinearLR: start_factor must be in (0, 1], got 0");
}

// What the example of docs/optimizers.md ("Learning-rate schedulers") computes.
TEST(Scheduler, DocsExample) {
  for (const float x : docs_optimizers::fit().into_data().to_vec<float>()) EXPECT_NEAR(x, 3.0, 0.05);
}

}  // namespace
