// ReduceLROnPlateau against torch.optim.lr_scheduler.ReduceLROnPlateau
// (tests/golden/gen_plateau.py): every golden case's rates, a run restored from its state
// continuing as the uninterrupted one, and the argument errors.
#include "golden.hpp"

#include <kiln/kiln.hpp>
#include <kiln/optim/scheduler.hpp>

#include <cmath>
#include <string>
#include <vector>

namespace {

using namespace kiln;
using namespace kiln::optim;
using kiln::test::GoldenCase;
using kiln::test::golden;

double number(const GoldenCase& c, const char* label) { return c[label].to_vec<double>().at(0); }
std::int64_t integer(const GoldenCase& c, const char* label) { return c[label].to_vec<std::int64_t>().at(0); }

ReduceLROnPlateau from_case(const GoldenCase& c) {
  PlateauOptions o;
  o.mode = integer(c, "maximize") ? PlateauOptions::Mode::max : PlateauOptions::Mode::min;
  o.factor = number(c, "factor");
  o.patience = integer(c, "patience");
  o.threshold = number(c, "threshold");
  o.threshold_mode = integer(c, "absolute") ? PlateauOptions::Threshold::absolute : PlateauOptions::Threshold::relative;
  o.cooldown = integer(c, "cooldown");
  o.min_lr = number(c, "min_lr");
  o.eps = number(c, "eps");
  return ReduceLROnPlateau(number(c, "lr"), o);
}

TEST(ReduceLROnPlateau, EveryGoldenCaseFollowsTorch) {
  const std::vector<std::string> names = kiln::test::golden_case_names("plateau");
  ASSERT_GE(names.size(), 5u);
  for (const std::string& name : names) {
    SCOPED_TRACE(name);
    const GoldenCase& c = golden("plateau", name);
    ReduceLROnPlateau plateau = from_case(c);
    const std::vector<double> metrics = c["metric"].to_vec<double>(), rates = c["rates"].to_vec<double>();
    ASSERT_EQ(metrics.size(), rates.size());
    int cuts = 0;
    for (std::size_t i = 0; i < metrics.size(); ++i) {
      const double before = plateau.current();
      const double rate = plateau.step(metrics[i]);
      EXPECT_EQ(rate, plateau.current());
      EXPECT_NEAR(rate, rates[i], 1e-12 * rates[i]) << "after metric " << i << " (" << metrics[i] << ")";
      cuts += rate < before;
    }
    EXPECT_EQ(plateau.state().steps, static_cast<std::int64_t>(metrics.size()));
    // The cases were chosen so that most cut the rate and one skips a cut below eps.
    if (name == "min_abs_eps") EXPECT_EQ(cuts, 0);
    else EXPECT_GE(cuts, 2);
  }
}

// A run saved halfway and restored into a fresh scheduler gives the same rates as one that
// went straight through (the cooldown and the count of bad steps carry over).
TEST(ReduceLROnPlateau, RestoredStateContinuesTheSameRun) {
  const GoldenCase& c = golden("plateau", "max_abs_cooldown_floor");
  const std::vector<double> metrics = c["metric"].to_vec<double>(), rates = c["rates"].to_vec<double>();
  ReduceLROnPlateau first = from_case(c);
  const std::size_t half = metrics.size() / 2;
  for (std::size_t i = 0; i < half; ++i) first.step(metrics[i]);
  ReduceLROnPlateau second = from_case(c);
  second.restore(first.state());
  for (std::size_t i = half; i < metrics.size(); ++i)
    EXPECT_NEAR(second.step(metrics[i]), rates[i], 1e-12 * rates[i]) << "after metric " << i;
  ReduceLROnPlateau::State bad = first.state();
  bad.bad_steps = -1;
  EXPECT_THROW(second.restore(bad), Error);
}

TEST(ReduceLROnPlateau, RejectsBadArguments) {
  const auto message = [](auto make) {
    try {
      make();
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(message([] { ReduceLROnPlateau(0.1, {.factor = 1.0}); }).find("ReduceLROnPlateau: factor must be in [0, 1), got 1"),
            std::string::npos);
  EXPECT_NE(message([] { ReduceLROnPlateau(0.1, {.patience = -1}); }).find("ReduceLROnPlateau: patience must be >= 0"),
            std::string::npos);
  EXPECT_NE(message([] { ReduceLROnPlateau(-0.1); }).find("ReduceLROnPlateau: lr must be a finite learning rate"),
            std::string::npos);
  EXPECT_NE(message([] { ReduceLROnPlateau(0.1, {.threshold = NAN}); }).find("ReduceLROnPlateau: threshold must be"),
            std::string::npos);
  EXPECT_NE(message([] { ReduceLROnPlateau(0.1, {.cooldown = -2}); }).find("ReduceLROnPlateau: cooldown must be >= 0"),
            std::string::npos);
}

}  // namespace
