// The simulated GPU's energy counter (DESIGN section 9): the power trace it integrates and the
// model of a real GPU's counter (refresh period, read latency, partial sampling, noise).
#include "perseus/measure/energy_counter.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

#include "perseus/client/energy_sampler.hpp"
#include "perseus/client/sim_gpu.hpp"
#include "small_profile.hpp"
#include "test_support.hpp"

namespace {

using perseus::client::SamplerOptions;
using perseus::client::SimGpu;
using perseus::client::SimGpuOptions;
using perseus::measure::CounterOptions;
using perseus::measure::CounterSample;
using perseus::measure::EnergyCounter;
using perseus::measure::PowerTrace;
using perseus::test::error_of;

constexpr double kInf = std::numeric_limits<double>::infinity();

// ---------------------------------------------------------------- PowerTrace

// 50 W base; 300 W over [1, 2] s; 200 W over [3, 3.5] s.
perseus::measure::PowerTrace two_segments() {
  PowerTrace trace(50.0);
  trace.add_busy(1.0, 2.0, 300.0);
  trace.add_busy(3.0, 3.5, 200.0);
  return trace;
}

TEST(EnergyPowerTrace, IntegratesBusySegmentsAndTheBasePowerExactly) {
  const perseus::measure::PowerTrace trace = two_segments();
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
  const perseus::measure::PowerTrace full = two_segments();
  perseus::measure::PowerTrace trace = two_segments();
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
  perseus::measure::PowerTrace trace = two_segments();
  const std::string error = error_of([&] { trace.add_busy(3.25, 4.0, 100.0); });
  EXPECT_CONTAINS(error, "3.25 s");
  EXPECT_CONTAINS(error, "3.5 s");
  EXPECT_CONTAINS(error, "overlaps");
  trace.add_busy(3.5, 4.0, 100.0);  // touching is fine
  EXPECT_DOUBLE_EQ(trace.energy_at(4.0), 200.0 + 250.0 + 75.0 + 25.0);
}

// ---------------------------------------------------------------- EnergyCounter

perseus::measure::CounterOptions steady_counter(double sampled_fraction = 1.0) {
  CounterOptions o;
  o.refresh_jitter_s = 0.0;
  o.lag_s = 0.0;            // a refresh reports the energy up to its own time ...
  o.window_s = 0.0;         // ... exactly
  o.refresh_phase_s = 0.1;  // refreshes at 0.1, 0.2, ...
  o.sampled_fraction = sampled_fraction;
  return o;
}

// A real counter refreshes on its own schedule: by default the first refresh comes at a phase
// drawn from the seed, and brings a whole period's energy (the GPU drew its base power before 0).
TEST(EnergyCounter, TheFirstRefreshComesAtASeededPhaseWithAWholePeriod) {
  perseus::measure::PowerTrace trace(100.0);
  std::vector<double> phases;
  for (std::uint64_t seed : {1u, 2u, 3u}) {
    perseus::measure::CounterOptions o;
    o.refresh_jitter_s = 0.0;
    o.seed = seed;
    perseus::measure::EnergyCounter counter(trace, o);
    double phase = 0.0;  // the first time, in 1 ms steps, at which the counter moved
    while (counter.value_at(phase) == 0.0) phase += 0.001;
    EXPECT_GT(phase, 0.0);
    EXPECT_LE(phase, 0.1 + 1e-9);
    EXPECT_NEAR(counter.value_at(phase), 100.0 * 0.1, 1e-9) << "seed " << seed;
    EXPECT_NEAR(counter.value_at(phase + 0.1), 100.0 * 0.2, 1e-9) << "seed " << seed;
    phases.push_back(phase);
  }
  EXPECT_NE(phases[0], phases[1]);
  EXPECT_NE(phases[1], phases[2]);
}

TEST(EnergyCounter, AReadBetweenRefreshesReturnsTheLastRefreshsValue) {
  perseus::measure::PowerTrace trace(100.0);
  perseus::measure::EnergyCounter counter(trace, steady_counter());
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

// A refresh that reports the energy up to 8 ms before it: a step from 100 W to 500 W at 0.195 s
// is in the refresh at 0.2 s only as far as it came before 0.192 s: not at all.
TEST(EnergyCounter, ARefreshReportsTheEnergyUpToItsLagBeforeIt) {
  perseus::measure::PowerTrace trace(100.0);
  trace.add_busy(0.195, 10.0, 500.0);
  perseus::measure::CounterOptions o = steady_counter();
  o.lag_s = 0.008;
  perseus::measure::EnergyCounter counter(trace, o);
  const double at_02 = counter.value_at(0.25), at_03 = counter.value_at(0.35);
  EXPECT_NEAR(at_02, 20.0, 1e-9);  // 100 W for 0.2 s: the step is not in it
  EXPECT_NEAR(at_03 - at_02, trace.energy_at(0.292) - trace.energy_at(0.192), 1e-9);
  o.lag_s = 0.0;
  perseus::measure::EnergyCounter prompt(trace, o);
  EXPECT_NEAR(prompt.value_at(0.25), trace.energy_at(0.2), 1e-9);
}

// Measured on H100s (bench/gpu/counter_lag.py), the realistic default: a refresh reports the
// energy up to 10 ms before it, averaged over the 20 ms around that time. The same step is in the
// refresh at 0.2 s by its mean over [0.18, 0.2] s: 400 W x (0.005 s)^2 / 2 / 0.02 s = 0.25 J.
TEST(EnergyCounter, ARefreshAveragesTheEnergyOverItsWindow) {
  perseus::measure::PowerTrace trace(100.0);
  trace.add_busy(0.195, 10.0, 500.0);
  perseus::measure::CounterOptions o = steady_counter();
  o.lag_s = perseus::measure::CounterOptions{}.lag_s;
  o.window_s = perseus::measure::CounterOptions{}.window_s;
  ASSERT_EQ(o.lag_s, 0.010);
  ASSERT_EQ(o.window_s, 0.020);
  perseus::measure::EnergyCounter counter(trace, o);
  EXPECT_NEAR(counter.value_at(0.25), 100.0 * 0.2 + 0.25, 1e-9);  // two whole periods and 0.25 J
  // Far from the step, the mean of a linear energy is its value at the middle.
  EXPECT_NEAR(counter.value_at(0.95) - counter.value_at(0.85),
              trace.energy_at(0.89) - trace.energy_at(0.79), 1e-9);
}

// The response measured on H100s (bench/gpu/counter_kernel.py): energy spent s before a refresh
// is counted by it with probability 1 - exp(-s / tau).
TEST(EnergyCounter, AFirstOrderResponseCountsEnergyWithAnExponentialDelay) {
  perseus::measure::PowerTrace trace(100.0);
  trace.add_busy(0.195, 0.205, 500.0);  // 10 ms at 500 W around the refresh at 0.2 s
  perseus::measure::CounterOptions o = steady_counter();
  o.time_constant_s = 0.010;
  perseus::measure::EnergyCounter counter(trace, o);
  EXPECT_NEAR(counter.value_at(0.1), 10.0, 1e-9);  // a whole period at the base power
  // Of the 2 J above base before 0.2 s, the refresh counts 400 (5 ms - tau (1 - e^-0.5)).
  const double counted = 400.0 * (0.005 - 0.010 * (1.0 - std::exp(-0.5)));
  EXPECT_NEAR(counter.value_at(0.2) - counter.value_at(0.1), 10.0 + counted, 1e-9);
  // The rest comes with the next refreshes; nothing is lost once the tail has passed.
  EXPECT_NEAR(counter.value_at(0.35) - counter.value_at(0.2), 10.0 + 4.0 - counted, 1e-3);
  EXPECT_NEAR(counter.value_at(0.95) - counter.value_at(0.1), 80.0 + 4.0, 1e-9);
  EXPECT_EQ(o.response().time_constant_s, 0.010);
  EXPECT_NEAR(o.reach_s(), 0.080, 1e-15);
}

TEST(EnergyCounter, AReadOfAnEarlierTimeGetsThatTimesRefresh) {
  perseus::measure::PowerTrace trace(100.0);
  perseus::measure::EnergyCounter counter(trace, steady_counter());
  EXPECT_NEAR(counter.value_at(0.73), 70.0, 1e-9);  // a reader at the present ...
  EXPECT_NEAR(counter.value_at(0.25), 20.0, 1e-9);  // ... and one catching up on the past
  EXPECT_EQ(counter.value_at(0.05), 0.0);
  EXPECT_NEAR(counter.value_at(0.8), 80.0, 1e-9);
}

// A direct read of the present (Python's SimGpu.total_energy) between two catch-ups of the
// virtual sampler leaves the sampler's series as it would have been without it.
TEST(EnergyCounter, ADirectReadDoesNotDisturbTheVirtualSampler) {
  for (const char* name : {"realistic", "ideal"}) {
    std::vector<std::vector<perseus::measure::CounterSample>> series;
    for (bool direct_read : {false, true}) {
      SimGpu gpu(
          perseus::test::small_profile(),
          SimGpuOptions{{0}, 40.0, false, 1.0, perseus::measure::CounterOptions::named(name)});
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
  perseus::measure::PowerTrace trace(80.0);
  std::mt19937_64 random(7);
  std::uniform_real_distribution<double> length(0.005, 0.080), power(150.0, 500.0);
  for (double t = 0.0; t < 5.0;) {
    const double begin = t + length(random), end = begin + length(random);
    trace.add_busy(begin, end, power(random));
    t = end;
  }
  perseus::measure::EnergyCounter counter(trace, steady_counter(1.0));
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
  perseus::measure::PowerTrace early(100.0), late(100.0);
  for (int k = 0; k < 10; ++k) {
    early.add_busy(0.1 * k, 0.1 * k + 0.05, 400.0);
    late.add_busy(0.1 * k + 0.05, 0.1 * k + 0.1, 400.0);
  }
  perseus::measure::EnergyCounter sampled_early(early, steady_counter(0.25));
  perseus::measure::EnergyCounter exact_early(early, steady_counter(1.0));
  EXPECT_NEAR(early.energy_at(1.0), 250.0, 1e-9);
  EXPECT_NEAR(exact_early.value_at(1.0), 250.0, 1e-9);
  EXPECT_NEAR(sampled_early.value_at(1.0), 100.0, 1e-9);  // 0.4 x the true energy
  // The bias follows where the work falls in the window: busy at the end reads high.
  perseus::measure::EnergyCounter sampled_late(late, steady_counter(0.25));
  EXPECT_NEAR(late.energy_at(1.0), 250.0, 1e-9);
  EXPECT_NEAR(sampled_late.value_at(1.0), 400.0, 1e-9);  // 1.6 x
}

TEST(EnergyCounter, TheIdealCounterReadsTheExactEnergyAtAnyTime) {
  const perseus::measure::PowerTrace trace = two_segments();
  perseus::measure::EnergyCounter counter(trace, CounterOptions::named("ideal"));
  for (double t : {0.0, 0.0123, 1.0, 1.37, 2.0001, 3.4, 9.99}) {
    EXPECT_DOUBLE_EQ(counter.value_at(t), trace.energy_at(t)) << "at " << t;
  }
}

TEST(EnergyCounterOptions, NamesTheRealisticAndTheIdealCounter) {
  const perseus::measure::CounterOptions realistic = CounterOptions::named("realistic");
  EXPECT_FALSE(realistic.ideal);
  EXPECT_DOUBLE_EQ(realistic.refresh_period_s, 0.100);
  EXPECT_DOUBLE_EQ(realistic.read_latency_s, 0.004);
  const perseus::measure::CounterOptions ideal = CounterOptions::named("ideal");
  EXPECT_TRUE(ideal.ideal);
  EXPECT_DOUBLE_EQ(ideal.read_latency_s, 0.0);
  EXPECT_CONTAINS(error_of([] { perseus::measure::CounterOptions::named("bogus"); }),
                  "unknown energy counter 'bogus' (expected realistic or ideal)");
}

// The error of validating the default options with one field changed ("" when valid).
template <typename F>
std::string invalid(F change) {
  perseus::measure::CounterOptions o;
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
    EXPECT_CONTAINS(invalid([&](perseus::measure::CounterOptions& o) { o.refresh_period_s = v; }),
                    "counter option 'refresh_period_s': must be a positive number of seconds");
  }
}

TEST(EnergyCounterOptions, ValidateNamesTheRefreshJitter) {
  for (double v : {-0.001, 0.100, 0.2, std::nan("")}) {
    EXPECT_CONTAINS(invalid([&](perseus::measure::CounterOptions& o) { o.refresh_jitter_s = v; }),
                    "counter option 'refresh_jitter_s': must be >= 0 and less than the refresh");
  }
  EXPECT_EQ(invalid([](perseus::measure::CounterOptions& o) { o.refresh_jitter_s = 0.0; }), "");
}

TEST(EnergyCounterOptions, ValidateNamesTheRefreshPhase) {
  for (double v : {0.0, -0.05, 0.1001, std::nan("")}) {
    EXPECT_CONTAINS(invalid([&](perseus::measure::CounterOptions& o) { o.refresh_phase_s = v; }),
                    "counter option 'refresh_phase_s': must be in (0, refresh period]");
  }
  EXPECT_EQ(invalid([](perseus::measure::CounterOptions& o) { o.refresh_phase_s = 0.1; }), "");
}

TEST(EnergyCounterOptions, ValidateNamesTheReadLatency) {
  for (double v : {-0.004, std::nan(""), kInf}) {
    EXPECT_CONTAINS(invalid([&](perseus::measure::CounterOptions& o) { o.read_latency_s = v; }),
                    "counter option 'read_latency_s': must be a number of seconds >= 0");
  }
  EXPECT_EQ(invalid([](perseus::measure::CounterOptions& o) { o.read_latency_s = 0.0; }), "");
}

TEST(EnergyCounterOptions, ValidateNamesTheSampledFraction) {
  for (double v : {0.0, -0.25, 1.01, std::nan("")}) {
    EXPECT_CONTAINS(invalid([&](perseus::measure::CounterOptions& o) { o.sampled_fraction = v; }),
                    "counter option 'sampled_fraction': must be in (0, 1], got");
  }
  EXPECT_EQ(invalid([](perseus::measure::CounterOptions& o) { o.sampled_fraction = 1.0; }), "");
}

TEST(EnergyCounterOptions, ValidateNamesTheNoise) {
  for (double v : {-0.01, 1.0, std::nan("")}) {
    EXPECT_CONTAINS(invalid([&](perseus::measure::CounterOptions& o) { o.noise = v; }),
                    "counter option 'noise': must be in [0, 1)");
  }
  EXPECT_EQ(invalid([](perseus::measure::CounterOptions& o) { o.noise = 0.5; }), "");
}

TEST(EnergyCounterOptions, ValidateNamesTheLag) {
  for (double v : {-0.001, 0.1, std::nan("")}) {
    EXPECT_CONTAINS(invalid([&](perseus::measure::CounterOptions& o) { o.lag_s = v; }),
                    "counter option 'lag_s': must be >= 0 and less than the refresh period");
  }
  EXPECT_EQ(invalid([](perseus::measure::CounterOptions& o) { o.lag_s = 0.01; }), "");
  EXPECT_EQ(perseus::measure::CounterOptions::named("ideal").lag_s, 0.0);
}

TEST(EnergyCounterOptions, ValidateNamesTheWindow) {
  for (double v : {-0.001, 0.0201, std::nan("")}) {
    EXPECT_CONTAINS(invalid([&](perseus::measure::CounterOptions& o) { o.window_s = v; }),
                    "counter option 'window_s': must be >= 0 and at most twice lag_s");
  }
  EXPECT_CONTAINS(invalid([](perseus::measure::CounterOptions& o) { o.lag_s = 0.0; }),
                  "'window_s'");
  EXPECT_EQ(invalid([](perseus::measure::CounterOptions& o) { o.window_s = 0.0; }), "");
  EXPECT_EQ(perseus::measure::CounterOptions::named("ideal").window_s, 0.0);
}

TEST(EnergyCounterOptions, TheCounterAndTheSimulatedGpuValidateThem) {
  perseus::measure::PowerTrace trace;
  perseus::measure::CounterOptions o;
  o.sampled_fraction = 0.0;
  EXPECT_CONTAINS(error_of([&] { perseus::measure::EnergyCounter counter(trace, o); }),
                  "'sampled_fraction'");
  EXPECT_CONTAINS(
      error_of([&] {
        SimGpu gpu(perseus::test::small_profile(), SimGpuOptions{{0}, 0.0, false, 1.0, o});
      }),
      "'sampled_fraction'");
}

TEST(EnergyCounterOptions, AFirstOrderResponseHasNoWindow) {
  EXPECT_CONTAINS(invalid([](perseus::measure::CounterOptions& o) { o.time_constant_s = 0.011; }),
                  "counter option 'window_s': must be 0 with a first-order response");
  EXPECT_EQ(invalid([](perseus::measure::CounterOptions& o) {
              o.time_constant_s = 0.011;
              o.window_s = 0.0;
            }),
            "");
  for (double v : {-0.01, 0.1, std::nan("")}) {
    EXPECT_CONTAINS(invalid([&](perseus::measure::CounterOptions& o) {
                      o.time_constant_s = v;
                      o.window_s = 0.0;
                    }),
                    "counter option 'time_constant_s': must be >= 0 and less than");
  }
}

}  // namespace
