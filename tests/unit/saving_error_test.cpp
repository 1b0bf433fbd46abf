// The standard error of a plan's saving from its profile rows' standard errors
// (perseus/plan/saving_error.hpp).
#include "perseus/plan/saving_error.hpp"

#include <cmath>

#include "perseus/schedule/schedule.hpp"
#include "test_support.hpp"

namespace perseus::plan {
namespace {

// One stage, forward and backward at 1000 and 500 MHz, each row with its relative standard error.
profile::Profile measured(bool backward_at_500_has_error = true) {
  profile::Profile p("measured.csv");
  auto row = [](int mhz, double time, double energy, std::optional<double> rse) {
    profile::Measurement m{mhz, time, energy, 0};
    m.energy_stderr = rse;
    return m;
  };
  p.add(0, "forward", row(1000, 0.1, 10.0, 0.01));
  p.add(0, "forward", row(500, 0.2, 8.0, 0.02));
  p.add(0, "backward", row(1000, 0.2, 20.0, 0.01));
  p.add(0, "backward",
        row(500, 0.4, 16.0, backward_at_500_has_error ? 0.03 : std::optional<double>()));
  return p;
}

// The plan's clocks for F0 B0 F1 B1 (1F1B, one stage, two microbatches).
FrequencyPlan clocks(int forward, int backward) {
  return {{forward, backward, forward, backward}};
}

TEST(SavingError, PropagatesEachRowsErrorToTheSaving) {
  const schedule::Schedule sched = schedule::make_1f1b(1, 2);
  // All-max: 2 x 10 + 2 x 20 = 60 J; the plan, forwards at 500 MHz: 2 x 8 + 2 x 20 = 56 J.
  // Variances (J^2): forward 1000 (0.1)^2, forward 500 (0.16)^2, backward 1000 (0.2)^2, each
  // row's count squared: Var(E_plan) = 4 x 0.0256 + 4 x 0.04, Var(E_max) = 4 x 0.01 + 4 x 0.04,
  // Cov = 4 x 0.04 (the backwards' row is shared). Saving 1 - 56/60, its variance by the delta
  // method: Var(E_plan)/60^2 + 56^2 Var(E_max)/60^4 - 2 x 56 Cov/60^3.
  const double expected =
      std::sqrt(0.2624 / 3600.0 + 3136.0 * 0.2 / 12960000.0 - 2.0 * 56.0 * 0.16 / 216000.0);
  const std::optional<double> e =
      saving_stderr(measured(), sched, clocks(500, 1000), clocks(1000, 1000), 0.0);
  ASSERT_TRUE(e.has_value());
  EXPECT_NEAR(*e, expected, 1e-12);
  EXPECT_NEAR(*e, 0.00619, 1e-5);
}

TEST(SavingError, IsNoneForThePlanAgainstItself) {
  // Every row shared: the two energies err together, and the saving (0) not at all.
  const schedule::Schedule sched = schedule::make_1f1b(1, 2);
  const std::optional<double> e =
      saving_stderr(measured(), sched, clocks(500, 500), clocks(500, 500), 50.0);
  ASSERT_TRUE(e.has_value());
  EXPECT_NEAR(*e, 0.0, 1e-12);
}

TEST(SavingError, IsUnknownWhereARowThePlanRunsAtHasNone) {
  const schedule::Schedule sched = schedule::make_1f1b(1, 2);
  EXPECT_FALSE(saving_stderr(measured(false), sched, clocks(500, 500), clocks(1000, 1000), 0.0));
  // A row no plan runs at does not matter.
  EXPECT_TRUE(saving_stderr(measured(false), sched, clocks(500, 1000), clocks(1000, 1000), 0.0));
}

}  // namespace
}  // namespace perseus::plan
