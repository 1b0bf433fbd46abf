// The sampler's series of counter changes (DESIGN section 9): how a change is timed from the reads
// around it, what `between` returns, the capacity, a sampler that starts between two refreshes,
// and a counter that goes down.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "perseus/client/energy_sampler.hpp"
#include "perseus/measure/attribution.hpp"

namespace {

using perseus::measure::Attribution;
using perseus::measure::AttributionInput;
using perseus::measure::AttributionMethod;
using perseus::measure::CounterSample;
using perseus::measure::CounterSeries;

constexpr double kInf = std::numeric_limits<double>::infinity();

std::vector<double> times_of(const std::vector<perseus::measure::CounterSample>& samples) {
  std::vector<double> out;
  for (const auto& s : samples) out.push_back(s.t_s);
  return out;
}

std::vector<double> values_of(const std::vector<perseus::measure::CounterSample>& samples) {
  std::vector<double> out;
  for (const auto& s : samples) out.push_back(s.energy_j);
  return out;
}

TEST(EnergyCounterSeries, TimestampsAChangeBetweenTheMidpointsOfTheTwoReads) {
  perseus::measure::CounterSeries series(100);
  series.add_read(0.000, 0.004, 10.0);  // the first read: no change, nothing kept
  series.add_read(0.004, 0.008, 10.0);  // unchanged: nothing (midpoint 0.006)
  series.add_read(0.008, 0.012, 10.0);  // unchanged (midpoint 0.010)
  EXPECT_EQ(series.size(), 0u);
  series.add_read(0.012, 0.020, 12.0);  // changed; midpoint 0.016: between 0.010 and 0.016
  EXPECT_EQ(series.size(), 1u);
  EXPECT_EQ(series.reads(), 4u);
  auto all = series.between(-kInf, kInf);
  ASSERT_EQ(all.size(), 1u);
  EXPECT_DOUBLE_EQ(all[0].t_s, 0.013);
  EXPECT_DOUBLE_EQ(all[0].t_spread_s, 0.003);  // it changed somewhere in (0.010, 0.016]
  EXPECT_EQ(all[0].energy_j, 12.0);
  // After a long pause the change lands halfway through the pause.
  series.add_read(0.100, 0.104, 15.0);  // midpoint 0.102; previous 0.016
  all = series.between(-kInf, kInf);
  ASSERT_EQ(all.size(), 2u);
  EXPECT_DOUBLE_EQ(all[1].t_s, 0.059);
  EXPECT_DOUBLE_EQ(all[1].t_spread_s, 0.043);
  EXPECT_EQ(all[1].energy_j, 15.0);
  // An exactly timed value has no spread.
  series.add_exact(0.2, 16.0);
  EXPECT_EQ(series.between(0.15, kInf).back().t_spread_s, 0.0);
}

TEST(EnergyCounterSeries, BetweenStartsWithTheLastChangeBeforeFrom) {
  perseus::measure::CounterSeries series(100);
  for (int k = 0; k < 10; ++k) series.add_exact(0.1 * k, 5.0 * k);  // changes at 0, 0.1, .., 0.9
  EXPECT_EQ(times_of(series.between(0.25, 0.45)), (std::vector<double>{0.1 * 2, 0.1 * 3, 0.1 * 4}));
  EXPECT_EQ(values_of(series.between(0.25, 0.45)), (std::vector<double>{10.0, 15.0, 20.0}));
  EXPECT_EQ(times_of(series.between(0.95, 2.0)), (std::vector<double>{0.1 * 9}));
  EXPECT_EQ(times_of(series.between(-1.0, 0.15)), (std::vector<double>{0.0, 0.1 * 1}));
  EXPECT_TRUE(series.between(-2.0, -1.0).empty());
  series.add_exact(0.9, 99.0);  // not later than the last change: ignored
  EXPECT_EQ(values_of(series.between(0.85, 2.0)), (std::vector<double>{40.0, 45.0}));
  series.forget_before(0.55);  // keeps 0.5 (the last change before 0.55) and later
  EXPECT_EQ(times_of(series.between(-kInf, kInf)),
            (std::vector<double>{0.1 * 5, 0.1 * 6, 0.1 * 7, 0.1 * 8, 0.1 * 9}));
}

TEST(EnergyCounterSeries, CapacityDropsTheOldestChanges) {
  perseus::measure::CounterSeries series(3);
  for (int k = 0; k < 5; ++k) series.add_read(0.01 * k, 0.01 * k + 0.004, 1.0 + k);
  EXPECT_EQ(series.size(), 3u);
  EXPECT_EQ(series.reads(), 5u);
  EXPECT_EQ(values_of(series.between(-kInf, kInf)), (std::vector<double>{3.0, 4.0, 5.0}));
}

// ------------------------------------------------- a sampler that starts between two refreshes

// A real counter refreshes on its own schedule: a sampler that starts halfway between two
// refreshes first reads a value half a period old, and the first change it sees brings a whole
// period's energy. Constant power must still come out as that power.
TEST(EnergyCounterSeries, ASamplerStartingBetweenRefreshesMeasuresTheTruePower) {
  constexpr double kPower = 300.0, kPeriod = 0.1, kPhase = 0.05, kRead = 0.004, kEnd = 0.6;
  auto counter_at = [&](double t) {  // the value of the last refresh (at kPhase + k kPeriod)
    return 1000.0 + kPower * (kPhase + kPeriod * std::floor((t - kPhase) / kPeriod));
  };
  perseus::measure::CounterSeries series(1000);
  for (int i = 0; (i + 1) * kRead <= kEnd; ++i) {
    series.add_read(i * kRead, (i + 1) * kRead, counter_at((i + 0.5) * kRead));
  }
  perseus::measure::AttributionInput in;
  in.iterations = {{0.0, kEnd}};
  for (int i = 0; i < 60; ++i) {
    in.spans.push_back({0.01 * i, 0.01 * (i + 1), static_cast<std::size_t>(i % 2)});
  }
  in.num_keys = 2;
  in.counter = series.between(0.0, kInf);
  ASSERT_FALSE(in.counter.empty());
  EXPECT_NEAR(in.counter.front().t_s, kPhase, kRead);  // the first change, not the first read
  for (auto method : {perseus::measure::AttributionMethod::kOverlap,
                      perseus::measure::AttributionMethod::kBusyOverlap}) {
    const perseus::measure::Attribution a = attribute(in, method);
    EXPECT_EQ(a.method, method);
    for (const auto& key : a.keys) EXPECT_NEAR(key.power_w, kPower, 0.01 * kPower);
    EXPECT_NEAR(a.iteration_energy_j[0], kPower * kEnd, 0.01 * kPower * kEnd);
  }
}

// ------------------------------------------------------------ a counter that goes down

// A GPU reset (or a backend whose counter is no running total) takes the value down: the series
// starts again, as at a sampler's start, so no interval spans the unknown energy across it.
TEST(EnergyCounterSeries, ACounterThatGoesDownStartsTheSeriesAgain) {
  perseus::measure::CounterSeries series(100);
  EXPECT_TRUE(series.add_read(0.000, 0.004, 500.0));
  EXPECT_TRUE(series.add_read(0.100, 0.104, 530.0));
  EXPECT_TRUE(series.add_read(0.200, 0.204, 560.0));
  EXPECT_EQ(series.size(), 2u);
  EXPECT_FALSE(series.add_read(0.300, 0.304, 2.0));  // reset: dropped, taken as a first read
  EXPECT_EQ(series.size(), 0u);
  EXPECT_EQ(series.last_value_j(), 2.0);
  EXPECT_TRUE(series.add_read(0.400, 0.404, 32.0));
  EXPECT_TRUE(series.add_read(0.500, 0.504, 62.0));
  const std::vector<perseus::measure::CounterSample> all = series.between(-kInf, kInf);
  EXPECT_EQ(values_of(all), (std::vector<double>{32.0, 62.0}));
  EXPECT_DOUBLE_EQ(all[0].t_s, 0.352);  // between the reset read and the next, as any change
  // No interval goes down: constant power comes out as it is after the reset.
  perseus::measure::AttributionInput in;
  in.iterations = {{0.0, 0.6}};
  in.spans = {{0.0, 0.6, 0}};
  in.num_keys = 1;
  in.counter = all;
  EXPECT_NEAR(perseus::measure::attribute(in, perseus::measure::AttributionMethod::kBusyOverlap)
                  .keys[0]
                  .power_w,
              300.0, 1e-9);
}

// ------------------------------------------------------------ a gap of failed reads

// The first read after failed reads keeps no change: the counter changed somewhere in the gap,
// not between that read and the one before it. The next change is timed by its reads, and the
// interval from the last change before the gap to it holds the energy spent across it (300 W
// throughout, refreshed every 100 ms; reads failed from 0.25 s to 1.2 s). A reset during the gap
// still starts the series again.
TEST(EnergyCounterSeries, TheFirstReadAfterAGapKeepsNoChange) {
  perseus::measure::CounterSeries series(100);
  series.add_read(0.010, 0.014, 0.0);
  series.add_read(0.110, 0.114, 30.0);
  series.add_read(0.210, 0.214, 60.0);
  EXPECT_TRUE(series.add_read(1.210, 1.214, 360.0, true));
  EXPECT_EQ(series.size(), 2u);  // the changes at 0.11 and 0.21 only
  EXPECT_TRUE(series.add_read(1.310, 1.314, 390.0));
  const std::vector<perseus::measure::CounterSample> all = series.between(-kInf, kInf);
  ASSERT_EQ(all.size(), 3u);
  EXPECT_NEAR(all[2].t_s, 1.262, 1e-12);
  EXPECT_NEAR(all[2].t_spread_s, 0.05, 1e-12);
  // From the last change before the gap to the first after it: the power throughout.
  EXPECT_EQ(all[1].energy_j, 60.0);
  EXPECT_NEAR((all[2].energy_j - all[1].energy_j) / (all[2].t_s - all[1].t_s), 300.0, 1e-9);
  EXPECT_FALSE(series.add_read(2.000, 2.004, 5.0, true));  // went down in a gap: a reset
  EXPECT_EQ(series.size(), 0u);
}

}  // namespace
