// Energy measured off the training thread (DESIGN section 9): the power trace and the model of a
// real GPU's energy counter, the sampler's series of counter changes, attribution of a coarse
// counter to instructions (fit, overlap, deltas) against a known piecewise-constant power, and
// the whole path through the simulated GPU's realistic counter and virtual-time sampler.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "perseus/client/attribution.hpp"
#include "perseus/client/energy_counter.hpp"
#include "perseus/client/energy_sampler.hpp"
#include "perseus/client/measurement_window.hpp"
#include "perseus/client/sim_gpu.hpp"
#include "small_profile.hpp"
#include "test_support.hpp"

namespace {

using perseus::client::attribute;
using perseus::client::Attribution;
using perseus::client::AttributionInput;
using perseus::client::AttributionMethod;
using perseus::client::CounterOptions;
using perseus::client::CounterSample;
using perseus::client::CounterSeries;
using perseus::client::EnergyCounter;
using perseus::client::MeasurementWindow;
using perseus::client::PowerTrace;
using perseus::client::SamplerOptions;
using perseus::client::SimGpu;
using perseus::client::SimGpuOptions;
using perseus::client::TimedSpan;
using perseus::client::WindowMeasurements;
using perseus::test::error_of;

constexpr double kInf = std::numeric_limits<double>::infinity();

// ---------------------------------------------------------------- PowerTrace

// 50 W base; 300 W over [1, 2] s; 200 W over [3, 3.5] s.
PowerTrace two_segments() {
  PowerTrace trace(50.0);
  trace.add_busy(1.0, 2.0, 300.0);
  trace.add_busy(3.0, 3.5, 200.0);
  return trace;
}

TEST(EnergyPowerTrace, IntegratesBusySegmentsAndTheBasePowerExactly) {
  const PowerTrace trace = two_segments();
  EXPECT_DOUBLE_EQ(trace.energy_at(0.0), 0.0);
  EXPECT_DOUBLE_EQ(trace.energy_at(0.5), 25.0);                        // base only
  EXPECT_DOUBLE_EQ(trace.energy_at(1.5), 75.0 + 250.0 * 0.5);          // half the first segment
  EXPECT_DOUBLE_EQ(trace.energy_at(2.5), 125.0 + 250.0);               // after it
  EXPECT_DOUBLE_EQ(trace.energy_at(3.25), 162.5 + 250.0 + 37.5);       // inside the second
  EXPECT_DOUBLE_EQ(trace.energy_at(10.0), 500.0 + 250.0 + 150 * 0.5);  // after both
  EXPECT_EQ(trace.boundaries(0.0, 3.0), (std::vector<double>{1.0, 2.0, 3.0}));
  EXPECT_EQ(trace.boundaries(1.0, 10.0), (std::vector<double>{2.0, 3.0, 3.5}));
}

TEST(EnergyPowerTrace, ForgettingOldSegmentsKeepsLaterEnergiesExact) {
  const PowerTrace full = two_segments();
  PowerTrace trace = two_segments();
  trace.forget_before(2.5);  // drops the first segment (ended at 2 s)
  EXPECT_EQ(trace.boundaries(0.0, 10.0), (std::vector<double>{3.0, 3.5}));
  for (double t : {2.5, 3.0, 3.1, 3.5, 4.0, 100.0}) {
    EXPECT_DOUBLE_EQ(trace.energy_at(t), full.energy_at(t)) << "at " << t;
  }
  trace.add_busy(5.0, 6.0, 1050.0);  // new segments go on from the forgotten energy
  EXPECT_DOUBLE_EQ(trace.energy_at(7.0), 350.0 + 250.0 + 75.0 + 1000.0);
  trace.forget_before(100.0);
  EXPECT_DOUBLE_EQ(trace.energy_at(100.0), 5000.0 + 250.0 + 75.0 + 1000.0);
}

TEST(EnergyPowerTrace, RejectsAnOverlappingSegmentNamingBothTimes) {
  PowerTrace trace = two_segments();
  const std::string error = error_of([&] { trace.add_busy(3.25, 4.0, 100.0); });
  EXPECT_CONTAINS(error, "3.25 s");
  EXPECT_CONTAINS(error, "3.5 s");
  EXPECT_CONTAINS(error, "overlaps");
  trace.add_busy(3.5, 4.0, 100.0);  // touching is fine
  EXPECT_DOUBLE_EQ(trace.energy_at(4.0), 200.0 + 250.0 + 75.0 + 25.0);
}

// ---------------------------------------------------------------- EnergyCounter

CounterOptions steady_counter(double sampled_fraction = 1.0) {
  CounterOptions o;
  o.refresh_jitter_s = 0.0;
  o.sampled_fraction = sampled_fraction;
  return o;
}

TEST(EnergyCounter, AReadBetweenRefreshesReturnsTheLastRefreshsValue) {
  PowerTrace trace(100.0);
  EnergyCounter counter(trace, steady_counter());
  EXPECT_EQ(counter.value_at(0.05), 0.0);  // before the first refresh (at 0.1 s)
  EXPECT_EQ(counter.value_at(0.0999), 0.0);
  EXPECT_NEAR(counter.value_at(0.1), 10.0, 1e-9);
  EXPECT_DOUBLE_EQ(counter.last_refresh_s(), 0.1);
  const double at_refresh = counter.value_at(0.1);
  EXPECT_EQ(counter.value_at(0.15), at_refresh);
  EXPECT_EQ(counter.value_at(0.1999), at_refresh);
  EXPECT_NEAR(counter.value_at(0.2), 20.0, 1e-9);
  EXPECT_NEAR(counter.value_at(0.73), 70.0, 1e-9);  // several refreshes at once
  EXPECT_DOUBLE_EQ(counter.last_refresh_s(), 0.7);
}

TEST(EnergyCounter, AReadOfAnEarlierTimeGetsThatTimesRefresh) {
  PowerTrace trace(100.0);
  EnergyCounter counter(trace, steady_counter());
  EXPECT_NEAR(counter.value_at(0.73), 70.0, 1e-9);  // a reader at the present ...
  EXPECT_NEAR(counter.value_at(0.25), 20.0, 1e-9);  // ... and one catching up on the past
  EXPECT_EQ(counter.value_at(0.05), 0.0);
  EXPECT_NEAR(counter.value_at(0.8), 80.0, 1e-9);
}

// A direct read of the present (Python's SimGpu.total_energy) between two catch-ups of the
// virtual sampler leaves the sampler's series as it would have been without it.
TEST(EnergyCounter, ADirectReadDoesNotDisturbTheVirtualSampler) {
  for (const char* name : {"realistic", "ideal"}) {
    std::vector<std::vector<CounterSample>> series;
    for (bool direct_read : {false, true}) {
      SimGpu gpu(perseus::test::small_profile(),
                 SimGpuOptions{{0}, 40.0, false, 1.0, CounterOptions::named(name)});
      auto sampler = gpu.start_energy_sampler(SamplerOptions{}, {});
      for (int i = 0; i < 40; ++i) {
        gpu.instruction_begin("forward");
        gpu.instruction_end("forward");
        gpu.wait_until(gpu.now_s() + 0.003 * (i % 7));
        if (direct_read && i == 20) {
          EXPECT_GT(gpu.total_energy_j(), 0.0) << name;
        }
      }
      series.push_back(sampler->series(0.0, kInf));
    }
    ASSERT_EQ(series[0].size(), series[1].size()) << name;
    ASSERT_GT(series[0].size(), 3u) << name;
    for (std::size_t k = 0; k < series[0].size(); ++k) {
      EXPECT_EQ(series[0][k].t_s, series[1][k].t_s) << name << " change " << k;
      EXPECT_EQ(series[0][k].energy_j, series[1][k].energy_j) << name << " change " << k;
    }
  }
}

TEST(EnergyCounter, AtARefreshItReadsTheTracesEnergy) {
  PowerTrace trace(80.0);
  std::mt19937_64 random(7);
  std::uniform_real_distribution<double> length(0.005, 0.080), power(150.0, 500.0);
  for (double t = 0.0; t < 5.0;) {
    const double begin = t + length(random), end = begin + length(random);
    trace.add_busy(begin, end, power(random));
    t = end;
  }
  EnergyCounter counter(trace, steady_counter(1.0));
  for (int k = 1; k <= 50; ++k) {
    // Anywhere in the window after the k-th refresh: the energy at that refresh.
    const double value = counter.value_at(0.1 * k + 0.05);
    const double r = counter.last_refresh_s();
    EXPECT_NEAR(r, 0.1 * k, 1e-9);
    EXPECT_NEAR(value, trace.energy_at(r), 1e-9 * trace.energy_at(r)) << r;
    EXPECT_EQ(counter.value_at(0.1 * k + 0.095), value) << r;
  }
}

TEST(EnergyCounter, PartialSamplingSeesOnlyTheEndOfEachWindow) {
  // 400 W in the first half of every 100 ms window, 100 W (base) in the second: 25 J per window.
  // A sensor that sees the last 25 % of each window sees 100 W only: 10 J per window, 60 % low.
  PowerTrace early(100.0), late(100.0);
  for (int k = 0; k < 10; ++k) {
    early.add_busy(0.1 * k, 0.1 * k + 0.05, 400.0);
    late.add_busy(0.1 * k + 0.05, 0.1 * k + 0.1, 400.0);
  }
  EnergyCounter sampled_early(early, steady_counter(0.25));
  EnergyCounter exact_early(early, steady_counter(1.0));
  EXPECT_NEAR(early.energy_at(1.0), 250.0, 1e-9);
  EXPECT_NEAR(exact_early.value_at(1.0), 250.0, 1e-9);
  EXPECT_NEAR(sampled_early.value_at(1.0), 100.0, 1e-9);  // 0.4 x the true energy
  // The bias follows where the work falls in the window: busy at the end reads high.
  EnergyCounter sampled_late(late, steady_counter(0.25));
  EXPECT_NEAR(late.energy_at(1.0), 250.0, 1e-9);
  EXPECT_NEAR(sampled_late.value_at(1.0), 400.0, 1e-9);  // 1.6 x
}

TEST(EnergyCounter, TheIdealCounterReadsTheExactEnergyAtAnyTime) {
  const PowerTrace trace = two_segments();
  EnergyCounter counter(trace, CounterOptions::named("ideal"));
  for (double t : {0.0, 0.0123, 1.0, 1.37, 2.0001, 3.4, 9.99}) {
    EXPECT_DOUBLE_EQ(counter.value_at(t), trace.energy_at(t)) << "at " << t;
  }
}

TEST(EnergyCounterOptions, NamesTheRealisticAndTheIdealCounter) {
  const CounterOptions realistic = CounterOptions::named("realistic");
  EXPECT_FALSE(realistic.ideal);
  EXPECT_DOUBLE_EQ(realistic.refresh_period_s, 0.100);
  EXPECT_DOUBLE_EQ(realistic.read_latency_s, 0.004);
  const CounterOptions ideal = CounterOptions::named("ideal");
  EXPECT_TRUE(ideal.ideal);
  EXPECT_DOUBLE_EQ(ideal.read_latency_s, 0.0);
  EXPECT_CONTAINS(error_of([] { CounterOptions::named("bogus"); }),
                  "unknown energy counter 'bogus' (expected realistic or ideal)");
}

// The error of validating the default options with one field changed ("" when valid).
template <typename F>
std::string invalid(F change) {
  CounterOptions o;
  change(o);
  try {
    o.validate();
  } catch (const perseus::Error& e) {
    return e.what();
  }
  return "";
}

TEST(EnergyCounterOptions, ValidateNamesTheRefreshPeriod) {
  for (double v : {0.0, -0.1, std::nan(""), kInf}) {
    EXPECT_CONTAINS(invalid([&](CounterOptions& o) { o.refresh_period_s = v; }),
                    "counter option 'refresh_period_s': must be a positive number of seconds");
  }
}

TEST(EnergyCounterOptions, ValidateNamesTheRefreshJitter) {
  for (double v : {-0.001, 0.100, 0.2, std::nan("")}) {
    EXPECT_CONTAINS(invalid([&](CounterOptions& o) { o.refresh_jitter_s = v; }),
                    "counter option 'refresh_jitter_s': must be >= 0 and less than the refresh");
  }
  EXPECT_EQ(invalid([](CounterOptions& o) { o.refresh_jitter_s = 0.0; }), "");
}

TEST(EnergyCounterOptions, ValidateNamesTheReadLatency) {
  for (double v : {-0.004, std::nan(""), kInf}) {
    EXPECT_CONTAINS(invalid([&](CounterOptions& o) { o.read_latency_s = v; }),
                    "counter option 'read_latency_s': must be a number of seconds >= 0");
  }
  EXPECT_EQ(invalid([](CounterOptions& o) { o.read_latency_s = 0.0; }), "");
}

TEST(EnergyCounterOptions, ValidateNamesTheSampledFraction) {
  for (double v : {0.0, -0.25, 1.01, std::nan("")}) {
    EXPECT_CONTAINS(invalid([&](CounterOptions& o) { o.sampled_fraction = v; }),
                    "counter option 'sampled_fraction': must be in (0, 1], got");
  }
  EXPECT_EQ(invalid([](CounterOptions& o) { o.sampled_fraction = 1.0; }), "");
}

TEST(EnergyCounterOptions, ValidateNamesTheNoise) {
  for (double v : {-0.01, 1.0, std::nan("")}) {
    EXPECT_CONTAINS(invalid([&](CounterOptions& o) { o.noise = v; }),
                    "counter option 'noise': must be in [0, 1)");
  }
  EXPECT_EQ(invalid([](CounterOptions& o) { o.noise = 0.5; }), "");
}

TEST(EnergyCounterOptions, TheCounterAndTheSimulatedGpuValidateThem) {
  PowerTrace trace;
  CounterOptions o;
  o.sampled_fraction = 0.0;
  EXPECT_CONTAINS(error_of([&] { EnergyCounter counter(trace, o); }), "'sampled_fraction'");
  EXPECT_CONTAINS(
      error_of([&] {
        SimGpu gpu(perseus::test::small_profile(), SimGpuOptions{{0}, 0.0, false, 1.0, o});
      }),
      "'sampled_fraction'");
}

// ---------------------------------------------------------------- CounterSeries

std::vector<double> times_of(const std::vector<CounterSample>& samples) {
  std::vector<double> out;
  for (const auto& s : samples) out.push_back(s.t_s);
  return out;
}

std::vector<double> values_of(const std::vector<CounterSample>& samples) {
  std::vector<double> out;
  for (const auto& s : samples) out.push_back(s.energy_j);
  return out;
}

TEST(EnergyCounterSeries, TimestampsAChangeBetweenTheMidpointsOfTheTwoReads) {
  CounterSeries series(100);
  series.add_read(0.000, 0.004, 10.0);  // the first read: at its midpoint, 0.002
  series.add_read(0.004, 0.008, 10.0);  // unchanged: nothing (midpoint 0.006)
  series.add_read(0.008, 0.012, 10.0);  // unchanged (midpoint 0.010)
  EXPECT_EQ(series.size(), 1u);
  series.add_read(0.012, 0.020, 12.0);  // changed; midpoint 0.016: between 0.010 and 0.016
  EXPECT_EQ(series.size(), 2u);
  EXPECT_EQ(series.reads(), 4u);
  auto all = series.between(-kInf, kInf);
  ASSERT_EQ(all.size(), 2u);
  EXPECT_DOUBLE_EQ(all[0].t_s, 0.002);
  EXPECT_EQ(all[0].energy_j, 10.0);
  EXPECT_DOUBLE_EQ(all[1].t_s, 0.013);
  EXPECT_EQ(all[1].energy_j, 12.0);
  // After a long pause the change lands halfway through the pause.
  series.add_read(0.100, 0.104, 15.0);  // midpoint 0.102; previous 0.016
  all = series.between(-kInf, kInf);
  ASSERT_EQ(all.size(), 3u);
  EXPECT_DOUBLE_EQ(all[2].t_s, 0.059);
  EXPECT_EQ(all[2].energy_j, 15.0);
}

TEST(EnergyCounterSeries, BetweenStartsWithTheLastChangeBeforeFrom) {
  CounterSeries series(100);
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
  CounterSeries series(3);
  for (int k = 0; k < 5; ++k) series.add_read(0.01 * k, 0.01 * k + 0.004, 1.0 + k);
  EXPECT_EQ(series.size(), 3u);
  EXPECT_EQ(series.reads(), 5u);
  EXPECT_EQ(values_of(series.between(-kInf, kInf)), (std::vector<double>{3.0, 4.0, 5.0}));
}

// ---------------------------------------------------------------- attribute()

// A known piecewise-constant power: iterations of "forward" (300 W, 30-70 ms) and "backward"
// (450 W, 40-100 ms) with idle gaps at 80 W inside and between iterations, all durations random
// but seeded, so the mix of work differs from one counter interval to the next.
constexpr double kForwardW = 300.0, kBackwardW = 450.0, kIdleW = 80.0;

struct Workload {
  PowerTrace trace{kIdleW};
  AttributionInput input;
  std::vector<double> true_span_j;  // per span
};

Workload make_workload(double seconds, unsigned seed) {
  Workload w;
  w.input.num_keys = 2;
  std::mt19937_64 random(seed);
  auto uniform = [&](double lo, double hi) {
    return std::uniform_real_distribution<double>(lo, hi)(random);
  };
  double t = 0.0;
  while (t < seconds) {
    const double begin = t;
    t += uniform(0.0, 0.010);  // idle inside the iteration
    const double f = uniform(0.030, 0.070);
    w.trace.add_busy(t, t + f, kForwardW);
    w.input.spans.push_back({t, t + f, 0});
    w.true_span_j.push_back(kForwardW * f);
    t += f + uniform(0.0, 0.020);
    const double b = uniform(0.040, 0.100);
    w.trace.add_busy(t, t + b, kBackwardW);
    w.input.spans.push_back({t, t + b, 1});
    w.true_span_j.push_back(kBackwardW * b);
    t += b + uniform(0.0, 0.010);
    w.input.iterations.emplace_back(begin, t);
    t += uniform(0.005, 0.060);  // between iterations
  }
  return w;
}

// Exact counter values every 100 ms (+-5 ms jitter) from 0 until past the last iteration.
void sample_counter(Workload& w, unsigned seed) {
  std::mt19937_64 random(seed);
  std::uniform_real_distribution<double> jitter(-0.005, 0.005);
  const double end = w.input.iterations.back().second;
  for (double t = 0.0; t < end + 0.2; t += 0.100 + jitter(random)) {
    w.input.counter.push_back({t, w.trace.energy_at(t)});
  }
}

Workload sampled_workload(double seconds = 30.0, unsigned seed = 42) {
  Workload w = make_workload(seconds, seed);
  sample_counter(w, seed + 1);
  return w;
}

// The counter between its samples: linear, or the step function of what a read returns.
double linear_counter(const std::vector<CounterSample>& c, double t) {
  auto hi = std::upper_bound(c.begin(), c.end(), t,
                             [](double x, const CounterSample& s) { return x < s.t_s; });
  if (hi == c.begin() || hi == c.end()) throw std::logic_error("outside the counter samples");
  auto lo = std::prev(hi);
  return lo->energy_j + (hi->energy_j - lo->energy_j) * (t - lo->t_s) / (hi->t_s - lo->t_s);
}

double step_counter(const std::vector<CounterSample>& c, double t) {
  auto hi = std::upper_bound(c.begin(), c.end(), t,
                             [](double x, const CounterSample& s) { return x < s.t_s; });
  if (hi == c.begin()) throw std::logic_error("before the counter samples");
  return std::prev(hi)->energy_j;
}

// Mean absolute relative error of the spans' energies with key `key`.
double span_error(const Workload& w, const Attribution& a, std::size_t key) {
  double sum = 0.0;
  int n = 0;
  for (std::size_t i = 0; i < w.input.spans.size(); ++i) {
    if (w.input.spans[i].key != key) continue;
    sum += std::abs(a.span_energy_j[i] - w.true_span_j[i]) / w.true_span_j[i];
    ++n;
  }
  return sum / n;
}

TEST(Attribution, FitRecoversEachInstructionsPower) {
  const Workload w = sampled_workload();
  ASSERT_GT(w.input.counter.size(), 250u);
  const Attribution a = attribute(w.input, AttributionMethod::kFit);
  ASSERT_TRUE(a.measured);
  EXPECT_EQ(a.method, AttributionMethod::kFit);
  EXPECT_GT(a.intervals, 250u);
  ASSERT_EQ(a.keys.size(), 2u);
  EXPECT_NEAR(a.keys[0].power_w, kForwardW, 0.01 * kForwardW);
  EXPECT_NEAR(a.keys[1].power_w, kBackwardW, 0.01 * kBackwardW);
  EXPECT_NEAR(a.idle_power_w, kIdleW, 0.01 * kIdleW);
  for (const auto& k : a.keys) {
    EXPECT_TRUE(std::isfinite(k.power_stderr_w));
    EXPECT_GE(k.power_stderr_w, 0.0);
    EXPECT_LT(k.power_stderr_w, 0.01 * k.power_w);
  }
  EXPECT_EQ(a.keys[0].occurrences + a.keys[1].occurrences, w.input.spans.size());
  EXPECT_LT(span_error(w, a, 0), 0.01);
  EXPECT_LT(span_error(w, a, 1), 0.01);
}

TEST(Attribution, FitsStandardErrorCoversItsErrorOnANoisyCounter) {
  Workload w = sampled_workload();
  std::mt19937_64 random(3);
  std::normal_distribution<double> noise(0.0, 0.5);  // J per reading
  for (auto& s : w.input.counter) s.energy_j += noise(random);
  const Attribution a = attribute(w.input, AttributionMethod::kFit);
  ASSERT_EQ(a.method, AttributionMethod::kFit);
  const double truth[] = {kForwardW, kBackwardW};
  for (std::size_t k = 0; k < 2; ++k) {
    const double se = a.keys[k].power_stderr_w;
    EXPECT_TRUE(std::isfinite(se));
    EXPECT_GT(se, 0.0);
    EXPECT_LT(std::abs(a.keys[k].power_w - truth[k]), 5.0 * se) << "key " << k;
    EXPECT_NEAR(a.keys[k].power_w, truth[k], 0.02 * truth[k]);
  }
}

TEST(Attribution, OverlapAndDeltasAreWorseForInstructionsShorterThanTheInterval) {
  const Workload w = sampled_workload();
  const Attribution fit = attribute(w.input, AttributionMethod::kFit);
  const Attribution overlap = attribute(w.input, AttributionMethod::kOverlap);
  const Attribution deltas = attribute(w.input, AttributionMethod::kDeltas);
  EXPECT_EQ(overlap.method, AttributionMethod::kOverlap);
  EXPECT_EQ(deltas.method, AttributionMethod::kDeltas);
  for (std::size_t key : {0u, 1u}) {
    const double e_fit = span_error(w, fit, key);
    EXPECT_GT(span_error(w, overlap, key), std::max(0.05, 5.0 * e_fit)) << "key " << key;
    EXPECT_GT(span_error(w, deltas, key), std::max(0.20, 5.0 * e_fit)) << "key " << key;
  }
  // An occurrence with no counter change inside it reads 0 J by deltas.
  int inside = 0;
  for (std::size_t i = 0; i < w.input.spans.size(); ++i) {
    const TimedSpan& s = w.input.spans[i];
    const bool change_inside =
        std::any_of(w.input.counter.begin(), w.input.counter.end(),
                    [&](const CounterSample& c) { return c.t_s > s.begin_s && c.t_s <= s.end_s; });
    if (change_inside) continue;
    ++inside;
    EXPECT_EQ(deltas.span_energy_j[i], 0.0) << "span " << i;
    EXPECT_GT(overlap.span_energy_j[i], 0.0) << "span " << i;
  }
  EXPECT_GT(inside, 50);
}

TEST(Attribution, IterationEnergiesFollowTheCounterForEveryMethod) {
  const Workload w = sampled_workload();
  const auto& c = w.input.counter;
  // (fit spreads each interval's increment by its model instead: checked below.)
  for (auto method : {AttributionMethod::kOverlap, AttributionMethod::kDeltas}) {
    const Attribution a = attribute(w.input, method);
    ASSERT_EQ(a.method, method);
    double sum = 0.0, expected_sum = 0.0;
    for (std::size_t i = 0; i < w.input.iterations.size(); ++i) {
      const auto [begin, end] = w.input.iterations[i];
      const double expected = method == AttributionMethod::kDeltas
                                  ? step_counter(c, end) - step_counter(c, begin)
                                  : linear_counter(c, end) - linear_counter(c, begin);
      EXPECT_NEAR(a.iteration_energy_j[i], expected, 1e-9 * std::max(1.0, expected))
          << to_string(method) << " iteration " << i;
      sum += a.iteration_energy_j[i];
      expected_sum += expected;
    }
    EXPECT_NEAR(sum, expected_sum, 1e-9 * expected_sum) << to_string(method);
  }
  // With iterations back to back, the window's iterations add up to the counter's difference.
  Workload contiguous = sampled_workload(10.0, 5);
  auto& iterations = contiguous.input.iterations;
  for (std::size_t i = 0; i + 1 < iterations.size(); ++i) {
    iterations[i].second = iterations[i + 1].first;
  }
  const double from = iterations.front().first, to = iterations.back().second;
  const double total =
      linear_counter(contiguous.input.counter, to) - linear_counter(contiguous.input.counter, from);
  for (auto method : {AttributionMethod::kFit, AttributionMethod::kOverlap}) {
    const Attribution a = attribute(contiguous.input, method);
    double sum = 0.0;
    for (double j : a.iteration_energy_j) sum += j;
    // Interior boundaries telescope; only the two window ends are interpolated differently.
    const double tolerance = method == AttributionMethod::kFit ? 1e-2 : 1e-9;
    EXPECT_NEAR(sum, total, tolerance * total) << to_string(method);
  }
}

TEST(Attribution, FitFallsBackToOverlapWithFewerIntervalsThanUnknowns) {
  Workload w = sampled_workload(0.5, 9);
  ASSERT_GE(w.input.counter.size(), 4u);
  // Unknowns: forward, backward, idle inside and time outside iterations (4); 3 intervals.
  w.input.counter.resize(4);
  const Attribution a = attribute(w.input, AttributionMethod::kFit);
  EXPECT_TRUE(a.measured);
  EXPECT_EQ(a.method, AttributionMethod::kOverlap);
  EXPECT_EQ(a.intervals, 0u);
  EXPECT_EQ(a.idle_power_w, 0.0);
  const Attribution overlap = attribute(w.input, AttributionMethod::kOverlap);
  EXPECT_EQ(a.span_energy_j, overlap.span_energy_j);
  // Control: with enough intervals the same kind of input is fitted.
  EXPECT_EQ(attribute(sampled_workload(3.0, 9).input, AttributionMethod::kFit).method,
            AttributionMethod::kFit);
}

// Back-to-back iterations of forward (d) then backward (ratio x d), nothing else, and the counter
// sampled exactly at iteration boundaries. `first_ratio` is iteration 0's ratio.
AttributionInput same_mix(double ratio, double first_ratio) {
  AttributionInput in;
  in.num_keys = 2;
  PowerTrace trace;
  std::mt19937_64 random(11);
  std::uniform_real_distribution<double> length(0.040, 0.080);
  double t = 0.0;
  in.counter.push_back({0.0, 0.0});
  for (int i = 0; i < 100; ++i) {
    const double d = length(random), b = (i == 0 ? first_ratio : ratio) * d, begin = t;
    trace.add_busy(t, t + d, kForwardW);
    in.spans.push_back({t, t + d, 0});
    t += d;
    trace.add_busy(t, t + b, kBackwardW);
    in.spans.push_back({t, t + b, 1});
    t += b;
    in.iterations.emplace_back(begin, t);
    in.counter.push_back({t, trace.energy_at(t)});
  }
  return in;
}

TEST(Attribution, FitFallsBackToOverlapWhenInstructionsAlwaysComeInTheSameMix) {
  // Every interval has the same forward:backward mix: their powers cannot be told apart.
  const Attribution a = attribute(same_mix(1.5, 1.5), AttributionMethod::kFit);
  EXPECT_TRUE(a.measured);
  EXPECT_EQ(a.method, AttributionMethod::kOverlap);
  EXPECT_EQ(a.intervals, 0u);
  // Control: one iteration with another mix and the powers are identifiable.
  const Attribution b = attribute(same_mix(1.5, 2.5), AttributionMethod::kFit);
  EXPECT_EQ(b.method, AttributionMethod::kFit);
  EXPECT_NEAR(b.keys[0].power_w, kForwardW, 0.01 * kForwardW);
  EXPECT_NEAR(b.keys[1].power_w, kBackwardW, 0.01 * kBackwardW);
}

TEST(Attribution, FewerThanTwoCounterSamplesMeasureNothing) {
  Workload w = sampled_workload(1.0, 13);
  for (std::size_t n : {0u, 1u}) {
    w.input.counter.resize(n);
    for (auto method :
         {AttributionMethod::kFit, AttributionMethod::kOverlap, AttributionMethod::kDeltas}) {
      const Attribution a = attribute(w.input, method);
      EXPECT_FALSE(a.measured);
      ASSERT_EQ(a.span_energy_j.size(), w.input.spans.size());
      ASSERT_EQ(a.iteration_energy_j.size(), w.input.iterations.size());
      for (double j : a.span_energy_j) EXPECT_EQ(j, 0.0);
      for (double j : a.iteration_energy_j) EXPECT_EQ(j, 0.0);
      EXPECT_GT(a.keys[0].occurrences, 0u);  // the timeline is still counted
    }
  }
}

TEST(Attribution, NamesMethodsAndRejectsBadInput) {
  EXPECT_EQ(perseus::client::parse_attribution("deltas"), AttributionMethod::kDeltas);
  EXPECT_EQ(to_string(AttributionMethod::kOverlap), "overlap");
  EXPECT_CONTAINS(error_of([] { perseus::client::parse_attribution("median"); }),
                  "unknown attribution method 'median'");
  AttributionInput in;
  in.num_keys = 1;
  in.iterations.emplace_back(0.0, 1.0);
  in.spans.push_back({0.1, 0.2, 1});
  EXPECT_CONTAINS(error_of([&] { attribute(in, AttributionMethod::kFit); }),
                  "span key out of range");
}

// ---------------------------------------------------------------- through the simulated GPU

// A training loop on a simulated GPU (stage 1 of the small profile: forward 15-24 ms, backward
// 30-48 ms) with its realistic counter (100 ms refresh +-10 ms, 4 ms reads), read by the
// virtual-time sampler; clocks and idle gaps vary (seeded). One reporting window.
struct SimRun {
  WindowMeasurements m;
  std::vector<std::vector<int>> forward_mhz, backward_mhz;  // [iteration][occurrence]
};

SimRun run_sim(AttributionMethod method, int iterations = 400) {
  const perseus::profile::Profile profile = perseus::test::small_profile();
  SimGpu gpu(profile, SimGpuOptions{{1}, 60.0, false, 1.0, CounterOptions::named("realistic")});
  auto sampler = gpu.start_energy_sampler(SamplerOptions{}, {});
  MeasurementWindow window(*sampler, method);
  std::mt19937_64 random(2024);
  const int clocks[] = {1000, 800, 600};
  auto clock = [&] { return clocks[std::uniform_int_distribution<int>(0, 2)(random)]; };
  auto gap = [&](double hi) {
    gpu.wait_until(gpu.now_s() + std::uniform_real_distribution<double>(0.0, hi)(random));
  };
  SimRun run;
  for (int i = 0; i < iterations; ++i) {
    gap(0.040);  // between iterations
    window.step_begin(gpu.now_s());
    run.forward_mhz.emplace_back();
    run.backward_mhz.emplace_back();
    for (const char* name : {"forward", "backward", "forward", "backward"}) {
      gap(0.015);  // waiting for a pipeline neighbour
      const int mhz = clock();
      gpu.lock_clock(mhz);
      window.instruction_begin(gpu.now_s(), name, mhz);
      gpu.instruction_begin(name);
      gpu.instruction_end(name);
      window.instruction_end(gpu.now_s());
      (std::string(name) == "forward" ? run.forward_mhz : run.backward_mhz).back().push_back(mhz);
    }
    window.step_end(gpu.now_s());
  }
  gap(0.3);  // the sampler sees the last iterations' refreshes
  run.m = window.close();
  return run;
}

// Largest relative error of any occurrence of `name` at least `min_s` long.
double worst_error(const SimRun& run, const std::string& name, double min_s) {
  const perseus::profile::Profile profile = perseus::test::small_profile();
  const auto& mhz = name == "forward" ? run.forward_mhz : run.backward_mhz;
  const auto& energies = run.m.energy_breakdown.at(name);
  double worst = 0.0;
  int checked = 0;
  for (std::size_t i = 0; i < mhz.size(); ++i) {
    for (std::size_t j = 0; j < mhz[i].size(); ++j) {
      const auto& row = profile.at(1, name, mhz[i][j]);
      if (row.time_s < min_s) continue;
      EXPECT_NEAR(run.m.time_breakdown.at(name)[i][j], row.time_s, 1e-9);
      worst = std::max(worst, std::abs(energies[i][j] - row.energy_j) / row.energy_j);
      ++checked;
    }
  }
  EXPECT_GT(checked, 100) << name;
  return worst;
}

TEST(AttributionThroughSimGpu, FitMatchesTheProfileWhereDeltasDoNot) {
  const SimRun fit = run_sim(AttributionMethod::kFit);
  ASSERT_TRUE(fit.m.measured);
  ASSERT_EQ(fit.m.method, AttributionMethod::kFit);
  ASSERT_EQ(fit.m.iter_energy.size(), 400u);
  EXPECT_LT(worst_error(fit, "backward", 0.020), 0.02);
  EXPECT_LT(worst_error(fit, "forward", 0.020), 0.02);  // forward at 600 MHz: 24 ms
  for (const auto& [name, se] : fit.m.energy_stderr_j) {
    EXPECT_TRUE(std::isfinite(se)) << name;
    EXPECT_GT(se, 0.0) << name;  // the realistic counter's timestamps are not exact
  }

  const SimRun deltas = run_sim(AttributionMethod::kDeltas);
  ASSERT_EQ(deltas.m.method, AttributionMethod::kDeltas);
  EXPECT_EQ(deltas.forward_mhz, fit.forward_mhz);  // the same deterministic run
  EXPECT_GT(worst_error(deltas, "backward", 0.020), 0.10);
  EXPECT_GT(worst_error(deltas, "forward", 0.020), 0.10);
}

}  // namespace
