// Attributing a coarse energy counter to instructions (DESIGN section 9): fit, overlap and
// deltas against a known piecewise-constant power, and the whole path through the simulated GPU's
// realistic counter and virtual-time sampler. Busy-overlap, the default, has its own file
// (busy_overlap_test.cpp).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "attribution_workload.hpp"
#include "perseus/client/energy_sampler.hpp"
#include "perseus/client/measurement_window.hpp"
#include "perseus/client/sim_gpu.hpp"
#include "perseus/measure/attribution.hpp"
#include "perseus/measure/attribution_trace.hpp"
#include "small_profile.hpp"
#include "test_support.hpp"

namespace {

using perseus::client::MeasurementWindow;
using perseus::client::SamplerOptions;
using perseus::client::SimGpu;
using perseus::client::SimGpuOptions;
using perseus::client::WindowMeasurements;
using perseus::measure::attribute;
using perseus::measure::Attribution;
using perseus::measure::AttributionInput;
using perseus::measure::AttributionMethod;
using perseus::measure::CounterOptions;
using perseus::measure::CounterSample;
using perseus::measure::PowerTrace;
using perseus::measure::TimedSpan;
using perseus::test::error_of;
using perseus::test::kBackwardW;
using perseus::test::kForwardW;
using perseus::test::kIdleW;
using perseus::test::linear_counter;
using perseus::test::sampled_workload;
using perseus::test::span_error;
using perseus::test::step_counter;
using perseus::test::Workload;

TEST(Attribution, FitRecoversEachInstructionsPower) {
  const Workload w = sampled_workload();
  ASSERT_GT(w.input.counter.size(), 250u);
  const perseus::measure::Attribution a = attribute(w.input, AttributionMethod::kFit);
  ASSERT_TRUE(a.measured);
  EXPECT_EQ(a.method, perseus::measure::AttributionMethod::kFit);
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
  const perseus::measure::Attribution a = attribute(w.input, AttributionMethod::kFit);
  ASSERT_EQ(a.method, perseus::measure::AttributionMethod::kFit);
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
  const perseus::measure::Attribution fit = attribute(w.input, AttributionMethod::kFit);
  const perseus::measure::Attribution overlap = attribute(w.input, AttributionMethod::kOverlap);
  const perseus::measure::Attribution deltas = attribute(w.input, AttributionMethod::kDeltas);
  EXPECT_EQ(overlap.method, perseus::measure::AttributionMethod::kOverlap);
  EXPECT_EQ(deltas.method, perseus::measure::AttributionMethod::kDeltas);
  for (std::size_t key : {0u, 1u}) {
    const double e_fit = span_error(w, fit, key);
    EXPECT_GT(span_error(w, overlap, key), std::max(0.05, 5.0 * e_fit)) << "key " << key;
    EXPECT_GT(span_error(w, deltas, key), std::max(0.20, 5.0 * e_fit)) << "key " << key;
  }
  // An occurrence with no counter change inside it reads 0 J by deltas.
  int inside = 0;
  for (std::size_t i = 0; i < w.input.spans.size(); ++i) {
    const perseus::measure::TimedSpan& s = w.input.spans[i];
    const bool change_inside = std::any_of(w.input.counter.begin(), w.input.counter.end(),
                                           [&](const perseus::measure::CounterSample& c) {
                                             return c.t_s > s.begin_s && c.t_s <= s.end_s;
                                           });
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
  for (auto method : {perseus::measure::AttributionMethod::kOverlap,
                      perseus::measure::AttributionMethod::kDeltas}) {
    const perseus::measure::Attribution a = attribute(w.input, method);
    ASSERT_EQ(a.method, method);
    double sum = 0.0, expected_sum = 0.0;
    for (std::size_t i = 0; i < w.input.iterations.size(); ++i) {
      const auto [begin, end] = w.input.iterations[i];
      const double expected = method == perseus::measure::AttributionMethod::kDeltas
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
  for (auto method :
       {perseus::measure::AttributionMethod::kFit, perseus::measure::AttributionMethod::kOverlap}) {
    const perseus::measure::Attribution a = attribute(contiguous.input, method);
    double sum = 0.0;
    for (double j : a.iteration_energy_j) sum += j;
    // Interior boundaries telescope; only the two window ends are interpolated differently.
    const double tolerance = method == perseus::measure::AttributionMethod::kFit ? 1e-2 : 1e-9;
    EXPECT_NEAR(sum, total, tolerance * total) << to_string(method);
  }
}

TEST(Attribution, FitFallsBackToOverlapWithFewerIntervalsThanUnknowns) {
  Workload w = sampled_workload(0.5, 9);
  ASSERT_GE(w.input.counter.size(), 4u);
  // Unknowns: forward, backward, idle inside and time outside iterations (4); 3 intervals.
  w.input.counter.resize(4);
  const perseus::measure::Attribution a = attribute(w.input, AttributionMethod::kFit);
  EXPECT_TRUE(a.measured);
  EXPECT_EQ(a.method, perseus::measure::AttributionMethod::kOverlap);
  EXPECT_EQ(a.intervals, 0u);
  EXPECT_EQ(a.idle_power_w, 0.0);
  const perseus::measure::Attribution overlap = attribute(w.input, AttributionMethod::kOverlap);
  EXPECT_EQ(a.span_energy_j, overlap.span_energy_j);
  // Control: with enough intervals the same kind of input is fitted.
  EXPECT_EQ(perseus::measure::attribute(sampled_workload(3.0, 9).input,
                                        perseus::measure::AttributionMethod::kFit)
                .method,
            perseus::measure::AttributionMethod::kFit);
}

// Back-to-back iterations of forward (d) then backward (ratio x d), nothing else, and the counter
// sampled exactly at iteration boundaries. `first_ratio` is iteration 0's ratio.
perseus::measure::AttributionInput same_mix(double ratio, double first_ratio) {
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
  const perseus::measure::Attribution a = attribute(same_mix(1.5, 1.5), AttributionMethod::kFit);
  EXPECT_TRUE(a.measured);
  EXPECT_EQ(a.method, perseus::measure::AttributionMethod::kOverlap);
  EXPECT_EQ(a.intervals, 0u);
  // Control: one iteration with another mix and the powers are identifiable.
  const perseus::measure::Attribution b = attribute(same_mix(1.5, 2.5), AttributionMethod::kFit);
  EXPECT_EQ(b.method, perseus::measure::AttributionMethod::kFit);
  EXPECT_NEAR(b.keys[0].power_w, kForwardW, 0.01 * kForwardW);
  EXPECT_NEAR(b.keys[1].power_w, kBackwardW, 0.01 * kBackwardW);
}

TEST(Attribution, FewerThanTwoCounterSamplesMeasureNothing) {
  Workload w = sampled_workload(1.0, 13);
  for (std::size_t n : {0u, 1u}) {
    w.input.counter.resize(n);
    for (auto method :
         {perseus::measure::AttributionMethod::kFit, perseus::measure::AttributionMethod::kOverlap,
          perseus::measure::AttributionMethod::kDeltas}) {
      const perseus::measure::Attribution a = attribute(w.input, method);
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
  EXPECT_EQ(perseus::measure::parse_attribution("deltas"),
            perseus::measure::AttributionMethod::kDeltas);
  EXPECT_EQ(perseus::measure::parse_attribution("busy-overlap"),
            perseus::measure::AttributionMethod::kBusyOverlap);
  EXPECT_EQ(to_string(perseus::measure::AttributionMethod::kBusyOverlap), "busy-overlap");
  EXPECT_EQ(to_string(perseus::measure::AttributionMethod::kOverlap), "overlap");
  EXPECT_CONTAINS(error_of([] { perseus::measure::parse_attribution("median"); }),
                  "unknown attribution method 'median'");
  perseus::measure::AttributionInput in;
  in.num_keys = 1;
  in.iterations.emplace_back(0.0, 1.0);
  in.spans.push_back({0.1, 0.2, 1});
  EXPECT_CONTAINS(
      error_of([&] { perseus::measure::attribute(in, perseus::measure::AttributionMethod::kFit); }),
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

SimRun run_sim(perseus::measure::AttributionMethod method, int iterations = 400) {
  const perseus::profile::Profile profile = perseus::test::small_profile();
  SimGpu gpu(profile, SimGpuOptions{{1}, 60.0, false, 1.0, CounterOptions::named("realistic")});
  auto sampler = gpu.start_energy_sampler(SamplerOptions{}, {});
  MeasurementWindow window(*sampler, method, gpu.counter_response());
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
  const SimRun fit = run_sim(perseus::measure::AttributionMethod::kFit);
  ASSERT_TRUE(fit.m.measured);
  ASSERT_EQ(fit.m.method, perseus::measure::AttributionMethod::kFit);
  ASSERT_EQ(fit.m.iter_energy.size(), 400u);
  EXPECT_LT(worst_error(fit, "backward", 0.020), 0.02);
  EXPECT_LT(worst_error(fit, "forward", 0.020), 0.02);  // forward at 600 MHz: 24 ms
  for (const auto& [name, se] : fit.m.energy_stderr_j) {
    EXPECT_TRUE(std::isfinite(se)) << name;
    EXPECT_GT(se, 0.0) << name;  // the realistic counter's timestamps are not exact
  }

  const SimRun deltas = run_sim(perseus::measure::AttributionMethod::kDeltas);
  ASSERT_EQ(deltas.m.method, perseus::measure::AttributionMethod::kDeltas);
  EXPECT_EQ(deltas.forward_mhz, fit.forward_mhz);  // the same deterministic run
  EXPECT_GT(worst_error(deltas, "backward", 0.020), 0.10);
  EXPECT_GT(worst_error(deltas, "forward", 0.020), 0.10);
}

}  // namespace
