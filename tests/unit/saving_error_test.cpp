// How far a plan's saving may be off given its profile's measurement errors
// (perseus/plan/saving_error.hpp): the standard error and the pooling bound.
#include "perseus/plan/saving_error.hpp"

#include <cmath>

#include "perseus/schedule/schedule.hpp"
#include "test_support.hpp"

namespace perseus::plan {
namespace {

// One stage, forward and backward at 1000 and 500 MHz, each row with its relative standard
// error and pooling error (the backward at 500 MHz without them when `complete` is false).
profile::Profile measured(bool complete = true) {
  profile::Profile p("measured.csv");
  auto row = [](int mhz, double time, double energy, std::optional<double> rse,
                std::optional<double> pooling) {
    profile::Measurement m{mhz, time, energy, 0};
    m.energy_stderr = rse;
    m.energy_pooling_error = pooling;
    return m;
  };
  p.add(0, "forward", row(1000, 0.1, 10.0, 0.01, 0.1));
  p.add(0, "forward", row(500, 0.2, 8.0, 0.02, 0.1));
  p.add(0, "backward", row(1000, 0.2, 20.0, 0.01, 0.05));
  const std::optional<double> none;
  p.add(0, "backward", row(500, 0.4, 16.0, complete ? 0.03 : none, complete ? 0.05 : none));
  return p;
}

// The plan's clocks for F0 B0 F1 B1 (1F1B, one stage, two microbatches).
FrequencyPlan clocks(int forward, int backward) {
  return {{forward, backward, forward, backward}};
}

const schedule::Schedule kSchedule = schedule::make_1f1b(1, 2);

TEST(SavingError, PropagatesEachRowsStandardErrorToTheSaving) {
  // All-max: 2 x 10 + 2 x 20 = 60 J; the plan, forwards at 500 MHz: 2 x 8 + 2 x 20 = 56 J.
  // Variances (J^2): forward 1000 (0.1)^2, forward 500 (0.16)^2, backward 1000 (0.2)^2, each
  // row's count squared: Var(E_plan) = 4 x 0.0256 + 4 x 0.04, Var(E_max) = 4 x 0.01 + 4 x 0.04,
  // Cov = 4 x 0.04 (the backwards' row is shared). Saving 1 - 56/60, its variance by the delta
  // method: Var(E_plan)/60^2 + 56^2 Var(E_max)/60^4 - 2 x 56 Cov/60^3.
  const double expected =
      std::sqrt(0.2624 / 3600.0 + 3136.0 * 0.2 / 12960000.0 - 2.0 * 56.0 * 0.16 / 216000.0);
  const SavingError e =
      saving_error(measured(), kSchedule, clocks(500, 1000), clocks(1000, 1000), 0.0);
  ASSERT_TRUE(e.standard_error.has_value());
  EXPECT_NEAR(*e.standard_error, expected, 1e-12);
  EXPECT_NEAR(*e.standard_error, 0.00619, 1e-5);
}

TEST(SavingError, BoundsWhatPooledRowsMayMoveTheSaving) {
  // A row moving by d moves the saving by d (n_plan - 56/60 n_max) / 60. Pooling takes from the
  // forward at a clock what it gives the backward (d_F = -d_B), each within its bound (forwards
  // 1 J at 1000 MHz and 0.8 J at 500, backwards 1 J and 0.8 J): at 1000 MHz the forwards weigh
  // -1.8667 / 60 and the backwards 0.1333 / 60, so at most 1 x 2 / 60; at 500 MHz the forwards
  // 2 / 60 and the backwards none, at most 0.8 x 2 / 60. Together 3.6 / 60 = 0.06.
  SavingError e = saving_error(measured(), kSchedule, clocks(500, 1000), clocks(1000, 1000), 0.0);
  ASSERT_TRUE(e.pooling_bound.has_value());
  EXPECT_NEAR(*e.pooling_bound, 0.06, 1e-12);
  // A plan that keeps each clock's forwards and backwards together: what pooling takes from one
  // it gives the other at the same weight, and the saving does not move (each row alone within
  // its bound: 6.4 / 60).
  e = saving_error(measured(), kSchedule, clocks(500, 500), clocks(1000, 1000), 0.0);
  ASSERT_TRUE(e.pooling_bound.has_value());
  EXPECT_NEAR(*e.pooling_bound, 0.0, 1e-12);
}

TEST(SavingError, LetsAnOffsetSharedByEveryClockCancel) {
  // The 500 MHz rows measured as differences from the 1000 MHz ones (the profiler's split-clock
  // rounds): each instruction errs by one offset in J at both clocks, forwards +d and backwards
  // -d. Forwards and backwards each weigh 0.1333 / 60 over their two rows, so d cancels where the
  // per-clock groups bounded the same plan by 0.06.
  const profile::Profile per_clock = measured();
  profile::Profile p("split.csv");
  for (const auto& [key, rows] : per_clock.all()) {
    for (profile::Measurement row : rows) {
      row.energy_pooling_error = 1.0 / row.energy_j;  // the 1000 MHz rows' bound, 1 J
      row.energy_pooling_reference_mhz = 1000;
      p.add(key.first, key.second, row);
    }
  }
  p.validate();
  const SavingError e = saving_error(p, kSchedule, clocks(500, 1000), clocks(1000, 1000), 0.0);
  ASSERT_TRUE(e.pooling_bound.has_value());
  EXPECT_NEAR(*e.pooling_bound, 0.0, 1e-12);
  // Whatever the two plans: each runs every instruction once per microbatch.
  const SavingError against_500 =
      saving_error(p, kSchedule, clocks(1000, 500), clocks(500, 500), 0.0);
  ASSERT_TRUE(against_500.pooling_bound.has_value());
  EXPECT_NEAR(*against_500.pooling_bound, 0.0, 1e-12);
  EXPECT_GT(
      *saving_error(measured(), kSchedule, clocks(1000, 500), clocks(500, 500), 0.0).pooling_bound,
      0.0);
}

TEST(SavingError, IsNoneForThePlanAgainstItself) {
  // Every row shared: the two energies err together, and the saving (0) not at all.
  const SavingError e =
      saving_error(measured(), kSchedule, clocks(500, 500), clocks(500, 500), 50.0);
  ASSERT_TRUE(e.standard_error && e.pooling_bound);
  EXPECT_NEAR(*e.standard_error, 0.0, 1e-12);
  EXPECT_NEAR(*e.pooling_bound, 0.0, 1e-12);
}

TEST(SavingError, IsUnknownWhereARowThePlanRunsAtHasNone) {
  SavingError e =
      saving_error(measured(false), kSchedule, clocks(500, 500), clocks(1000, 1000), 0.0);
  EXPECT_FALSE(e.standard_error);
  EXPECT_FALSE(e.pooling_bound);
  // A row no plan runs at does not matter.
  e = saving_error(measured(false), kSchedule, clocks(500, 1000), clocks(1000, 1000), 0.0);
  EXPECT_TRUE(e.standard_error);
  EXPECT_TRUE(e.pooling_bound);
}

}  // namespace
}  // namespace perseus::plan
