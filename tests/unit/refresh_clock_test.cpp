// The energy counter's refresh clock (perseus/measure/refresh_clock.hpp): fitted to the changes a
// sampler observes between its reads, refused where the refreshes wander, and each change timed by
// its tick, also one a stalled sampler saw late.
#include "perseus/measure/refresh_clock.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "perseus/client/energy_sampler.hpp"

namespace {

using perseus::measure::CounterSample;
using perseus::measure::CounterSeries;
using perseus::measure::fit_refresh_clock;
using perseus::measure::time_by_clock;

// What a sampler reading back to back (reads of 3.6-4.4 ms) records of a counter that refreshes
// at `refreshes` (energy: the refresh's index).
std::vector<perseus::measure::CounterSample> sampled(const std::vector<double>& refreshes,
                                                     unsigned seed, double stall_from = -1.0,
                                                     double stall_s = 0.0) {
  std::mt19937_64 random(seed);
  std::uniform_real_distribution<double> cost(0.0036, 0.0044);
  perseus::measure::CounterSeries series(1 << 16);
  double t = 0.0;
  auto value_at = [&](double when) {
    double v = 0.0;
    for (double r : refreshes) v += r <= when ? 1.0 : 0.0;
    return v;
  };
  while (t < refreshes.back() + 0.05) {
    const double c = cost(random);
    series.add_read(t, t + c, value_at(t + 0.5 * c));
    t += c;
    if (stall_from >= 0.0 && t >= stall_from && t < stall_from + c) t += stall_s;
  }
  return series.between(-1.0, t);
}

std::vector<double> strict_clock(double first, double period, int n) {
  std::vector<double> r;
  for (int i = 0; i < n; ++i) r.push_back(first + period * i);
  return r;
}

TEST(RefreshClock, RecoversAStrictClockFromTheReadsAroundItsChanges) {
  const auto refreshes = strict_clock(0.0371, 0.1, 60);
  const auto changes = sampled(refreshes, 3);
  ASSERT_EQ(changes.size(), 60u);
  const auto clock = perseus::measure::fit_refresh_clock(changes);
  ASSERT_TRUE(clock.has_value());
  EXPECT_NEAR(clock->period_s, 0.1, 2e-5);
  EXPECT_GT(clock->robust_sd_s, 2e-4);  // the reads' resolution, not the clock's
  EXPECT_LT(clock->robust_sd_s, 2.5e-3);
  const auto timed = time_by_clock(changes, *clock);
  EXPECT_EQ(timed.on_clock, changes.size());
  double worst_by_reads = 0.0, worst_by_clock = 0.0;
  for (std::size_t i = 0; i < changes.size(); ++i) {
    worst_by_reads = std::max(worst_by_reads, std::abs(changes[i].t_s - refreshes[i]));
    worst_by_clock = std::max(worst_by_clock, std::abs(timed.changes[i].t_s - refreshes[i]));
    EXPECT_EQ(timed.changes[i].energy_j, changes[i].energy_j);
    EXPECT_LT(timed.changes[i].t_spread_s, changes[i].t_spread_s);
  }
  EXPECT_GT(worst_by_reads, 1.5e-3);
  EXPECT_LT(worst_by_clock, 0.5e-3);
}

TEST(RefreshClock, TimesAChangeAStalledSamplerSawLateByTheTickItsReadCouldHaveSeen) {
  const auto refreshes = strict_clock(0.02, 0.1, 40);
  const auto changes = sampled(refreshes, 5, 1.512, 0.06);  // no read for 60 ms from 1.512 s
  ASSERT_EQ(changes.size(), 40u);
  const auto clock = perseus::measure::fit_refresh_clock(changes);
  ASSERT_TRUE(clock.has_value());
  const auto timed = time_by_clock(changes, *clock);
  EXPECT_EQ(timed.on_clock, 40u);
  for (std::size_t i = 0; i < changes.size(); ++i) {
    EXPECT_NEAR(timed.changes[i].t_s, refreshes[i], 0.5e-3) << i;
  }
  EXPECT_GT(changes[15].t_s - refreshes[15], 0.02);  // the late one, by its reads
}

TEST(RefreshClock, RefusesRefreshesThatWander) {
  std::mt19937_64 random(7);
  std::uniform_real_distribution<double> jitter(-0.01, 0.01);
  std::vector<double> refreshes = {0.05};
  for (int i = 1; i < 60; ++i) refreshes.push_back(refreshes.back() + 0.1 + jitter(random));
  EXPECT_FALSE(perseus::measure::fit_refresh_clock(sampled(refreshes, 1)).has_value());
}

TEST(RefreshClock, NeedsEnoughChanges) {
  const auto few = sampled(strict_clock(0.05, 0.1, 7), 2);
  EXPECT_FALSE(perseus::measure::fit_refresh_clock(few).has_value());
  EXPECT_TRUE(
      perseus::measure::fit_refresh_clock(sampled(strict_clock(0.05, 0.1, 12), 2)).has_value());
}

TEST(RefreshClock, TwoChangesOnOneTickKeepTheirReadsTimes) {
  auto changes = sampled(strict_clock(0.05, 0.1, 20), 4);
  const auto clock = perseus::measure::fit_refresh_clock(changes);
  ASSERT_TRUE(clock.has_value());
  // A change that the reads put 1 ms after the one before it: both belong to one tick.
  perseus::measure::CounterSample extra = changes[10];
  extra.t_s += 0.001;
  extra.energy_j += 0.5;
  changes.insert(changes.begin() + 11, extra);
  const auto timed = time_by_clock(changes, *clock);
  EXPECT_EQ(timed.on_clock, changes.size() - 2);
  EXPECT_EQ(timed.changes[10].t_s, changes[10].t_s);
  EXPECT_EQ(timed.changes[11].t_s, changes[11].t_s);
  for (std::size_t i = 1; i < timed.changes.size(); ++i) {
    EXPECT_GT(timed.changes[i].t_s, timed.changes[i - 1].t_s);
  }
}

}  // namespace
