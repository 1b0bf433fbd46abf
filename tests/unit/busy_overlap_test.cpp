// Busy-overlap attribution (the default, DESIGN section 9) on what a GPU at its power limit in a
// pipeline looks like: the bubbles' idle energy kept off the instructions, one busy power per
// clock, and a standard error that covers its error, the idle power's uncertainty included.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "attribution_workload.hpp"
#include "perseus/measure/attribution.hpp"
#include "perseus/measure/attribution_trace.hpp"
#include "test_support.hpp"

namespace {

using perseus::measure::attribute;
using perseus::measure::Attribution;
using perseus::measure::AttributionMethod;
using perseus::measure::PowerTrace;
using perseus::measure::TimedSpan;
using perseus::test::kIdleW;
using perseus::test::span_error;
using perseus::test::Workload;

// What a GPU at its power limit in a pipeline looks like (measured on an H100,
// bench/gpu/attribution_on_gpu.py): forward and backward at one power, hooks microseconds apart,
// bubbles of 20-150 ms at 80 W between iterations.
perseus::test::WorkloadShape at_power_limit() {
  return perseus::test::pipeline_shape(650.0, 650.0);
}

// Zero-mean noise of `noise_j` on each counter increment (increments are >= 8 J).
Workload sampled_at_power_limit(double noise_j, double seconds = 30.0, unsigned seed = 42) {
  return perseus::test::sampled_with_noise(at_power_limit(), noise_j, seconds, seed);
}

TEST(Attribution, BusyOverlapKeepsTheBubblesIdleEnergyOffTheInstructions) {
  const Workload w = sampled_at_power_limit(0.0);
  const perseus::measure::Attribution busy = attribute(w.input, AttributionMethod::kBusyOverlap);
  const perseus::measure::Attribution overlap = attribute(w.input, AttributionMethod::kOverlap);
  ASSERT_EQ(busy.method, perseus::measure::AttributionMethod::kBusyOverlap);
  EXPECT_GT(busy.intervals, 250u);
  for (std::size_t key : {0u, 1u}) {
    EXPECT_LT(span_error(w, busy, key), 0.01) << "key " << key;
    EXPECT_GT(span_error(w, overlap, key), 0.10) << "key " << key;
    EXPECT_NEAR(busy.keys[key].power_w, 650.0, 6.5) << "key " << key;
  }
  // Idle inside iterations (gaps of microseconds) is clamped to [0, busy power].
  EXPECT_GE(busy.idle_power_w, 0.0);
  EXPECT_LE(busy.idle_power_w, busy.keys[0].power_w * 1.01);
  EXPECT_EQ(busy.iteration_energy_j.size(), w.input.iterations.size());
}

TEST(Attribution, BusyOverlapHoldsWhereTheFitCannotTellItsUnknownsApart) {
  // Eight 6 s windows with 0.5 J of noise per reading. Idle time inside iterations adds up to a
  // fraction of a millisecond per interval, so the fit's idle power is noise: often outside any
  // physical range. busy-overlap clamps it and keeps every instruction's energy.
  int unphysical_fits = 0;
  for (unsigned seed = 1; seed <= 8; ++seed) {
    const Workload w = sampled_at_power_limit(0.5, 6.0, seed);
    const perseus::measure::Attribution busy = attribute(w.input, AttributionMethod::kBusyOverlap);
    const perseus::measure::Attribution fit = attribute(w.input, AttributionMethod::kFit);
    ASSERT_EQ(fit.method, perseus::measure::AttributionMethod::kFit);
    ASSERT_EQ(busy.method, perseus::measure::AttributionMethod::kBusyOverlap);
    if (fit.idle_power_w < 0.0 || fit.idle_power_w > fit.keys[0].power_w) ++unphysical_fits;
    EXPECT_GE(busy.idle_power_w, 0.0) << "seed " << seed;
    EXPECT_LE(busy.idle_power_w, busy.keys[0].power_w * 1.01) << "seed " << seed;
    for (std::size_t key : {0u, 1u}) {
      EXPECT_LT(span_error(w, busy, key), 0.02) << "seed " << seed << " key " << key;
    }
  }
  EXPECT_GE(unphysical_fits, 4);
}

// 15 s at 650 W (keys 0 and 1, one clock), then 15 s at 400 W (keys 2 and 3, a lower clock), as
// when a window's fit also covers the profiler's previous clock; bubbles at 80 W throughout.
Workload two_clocks() {
  perseus::test::WorkloadShape shape = at_power_limit();
  const Workload high = perseus::test::make_workload(15.0, 3, shape);
  shape.forward_w = shape.backward_w = 400.0;
  const Workload low = perseus::test::make_workload(15.0, 4, shape);
  Workload w{perseus::measure::PowerTrace{kIdleW}, {}, {}};
  w.input.num_keys = 4;
  auto add = [&](const Workload& from, double dt, std::size_t dk) {
    for (std::size_t i = 0; i < from.input.spans.size(); ++i) {
      perseus::measure::TimedSpan s = from.input.spans[i];
      s.begin_s += dt;
      s.end_s += dt;
      s.key += dk;
      w.trace.add_busy(s.begin_s, s.end_s, from.true_span_j[i] / (s.end_s - s.begin_s));
      w.input.spans.push_back(s);
      w.true_span_j.push_back(from.true_span_j[i]);
    }
    for (const auto& [begin, end] : from.input.iterations) {
      w.input.iterations.emplace_back(begin + dt, end + dt);
    }
  };
  add(high, 0.0, 0);
  add(low, high.input.iterations.back().second + 0.05, 2);
  perseus::test::sample_counter(w, 5);
  return w;
}

TEST(Attribution, BusyOverlapFitsOneBusyPowerPerClock) {
  Workload w = two_clocks();
  w.input.busy_group = perseus::measure::groups_by_clock(
      {{"forward", 1980}, {"backward", 1980}, {"forward", 1200}, {"backward", 1200}});
  ASSERT_EQ(w.input.busy_group, (std::vector<std::size_t>{0, 0, 1, 1}));
  const perseus::measure::Attribution by_clock =
      attribute(w.input, AttributionMethod::kBusyOverlap);
  ASSERT_EQ(by_clock.method, perseus::measure::AttributionMethod::kBusyOverlap);
  EXPECT_FALSE(by_clock.per_key_powers);  // each clock's keys draw alike
  // Told that all keys share one busy power, the fit's F test finds that they do not.
  w.input.busy_group.clear();
  const perseus::measure::Attribution pooled = attribute(w.input, AttributionMethod::kBusyOverlap);
  EXPECT_TRUE(pooled.per_key_powers);
  for (std::size_t key = 0; key < 4; ++key) {
    EXPECT_LT(span_error(w, by_clock, key), 0.002) << "key " << key;
    EXPECT_LT(span_error(w, pooled, key), 0.002) << "key " << key;
  }
}

// Occurrences inside one counter interval share its energy: the standard error counts intervals
// as the samples, and covers the error on a noisy counter. The fit's idle power is unidentified
// here (microsecond gaps); bounded by its physical range, it does not blow the error up.
TEST(Attribution, BusyOverlapsStandardErrorCoversItsError) {
  double z2 = 0.0;
  int n = 0;
  for (unsigned seed = 1; seed <= 8; ++seed) {
    const Workload w = sampled_at_power_limit(0.5, 6.0, seed);
    const perseus::measure::Attribution a = attribute(w.input, AttributionMethod::kBusyOverlap);
    for (std::size_t key : {0u, 1u}) {
      const double se = a.keys[key].power_stderr_w, z = (a.keys[key].power_w - 650.0) / se;
      EXPECT_LT(se, 0.01 * 650.0) << "seed " << seed << " key " << key;
      EXPECT_LT(std::abs(z), 3.5) << "seed " << seed << " key " << key;
      z2 += z * z;
      ++n;
    }
  }
  EXPECT_LT(std::sqrt(z2 / n), 2.0);
}

// A pipeline stage's short window: bubbles at blocking power inside iterations, forward and
// backward at one power, the counter's changes timed to +-2 ms (a read's midpoint). How much of
// each interval went to the bubbles rests on the fitted idle power, which 1.5 s pins down
// poorly; the standard error must carry that, or a profiler that stops at a target error stops
// too early (measured before: root mean square z of 4.5-6.6 in such windows).
TEST(Attribution, BusyOverlapsStandardErrorCarriesTheIdlePowersUncertainty) {
  perseus::test::WorkloadShape shape;
  shape.forward_w = shape.backward_w = 430.0;
  shape.idle_w = 110.0;
  shape.inside_gap_s = 0.030;
  double z2 = 0.0;
  int n = 0;
  for (unsigned seed = 1; seed <= 30; ++seed) {
    Workload w = perseus::test::make_workload(1.5, seed, shape);
    perseus::test::sample_counter(w, seed + 1);
    std::mt19937_64 random(seed + 2);
    std::uniform_real_distribution<double> timing(-0.002, 0.002);
    for (auto& c : w.input.counter) c.t_s += timing(random);
    const perseus::measure::Attribution a = attribute(w.input, AttributionMethod::kBusyOverlap);
    ASSERT_EQ(a.method, perseus::measure::AttributionMethod::kBusyOverlap) << "seed " << seed;
    for (std::size_t key : {0u, 1u}) {
      const double z = (a.keys[key].power_w - 430.0) / a.keys[key].power_stderr_w;
      z2 += z * z;
      ++n;
    }
  }
  EXPECT_LT(std::sqrt(z2 / n), 1.6);
}

}  // namespace
