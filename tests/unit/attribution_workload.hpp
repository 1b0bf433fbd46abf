// A known piecewise-constant power and the timeline of instructions that drew it, sampled like a
// counter, for attribution tests (energy_attribution_test.cpp, attribution_trace_test.cpp).
#pragma once

#include <algorithm>
#include <cmath>
#include <iterator>
#include <random>
#include <stdexcept>
#include <vector>

#include "perseus/measure/attribution.hpp"
#include "perseus/measure/energy_counter.hpp"

namespace perseus::test {

using measure::Attribution;
using measure::AttributionInput;
using measure::CounterSample;
using measure::PowerTrace;

// A known piecewise-constant power: iterations of "forward" (30-70 ms) and "backward"
// (40-100 ms) with idle gaps inside and between iterations, all durations random but seeded, so
// the mix of work differs from one counter interval to the next. The default shape: forward
// 300 W, backward 450 W, idle 80 W, gaps up to 20 ms inside iterations and 5-60 ms between.
constexpr double kForwardW = 300.0, kBackwardW = 450.0, kIdleW = 80.0;

struct WorkloadShape {
  double forward_w = kForwardW, backward_w = kBackwardW, idle_w = kIdleW;
  double inside_gap_s = 0.010;  // gaps inside an iteration: up to this (twice before B)
  double between_lo_s = 0.005, between_hi_s = 0.060;  // gap between iterations
};

struct Workload {
  measure::PowerTrace trace;
  measure::AttributionInput input;
  std::vector<double> true_span_j;  // per span
};

inline Workload make_workload(double seconds, unsigned seed, const WorkloadShape& shape = {}) {
  Workload w{measure::PowerTrace{shape.idle_w}, {}, {}};
  w.input.num_keys = 2;
  std::mt19937_64 random(seed);
  auto uniform = [&](double lo, double hi) {
    return std::uniform_real_distribution<double>(lo, hi)(random);
  };
  auto busy = [&](double& t, double d, double watts, std::size_t key) {
    w.trace.add_busy(t, t + d, watts);
    w.input.spans.push_back({t, t + d, key});
    w.true_span_j.push_back(watts * d);
    t += d;
  };
  double t = 0.0;
  while (t < seconds) {
    const double begin = t;
    t += uniform(0.0, shape.inside_gap_s);
    busy(t, uniform(0.030, 0.070), shape.forward_w, 0);
    t += uniform(0.0, 2.0 * shape.inside_gap_s);
    busy(t, uniform(0.040, 0.100), shape.backward_w, 1);
    t += uniform(0.0, shape.inside_gap_s);
    w.input.iterations.emplace_back(begin, t);
    t += uniform(shape.between_lo_s, shape.between_hi_s);
  }
  return w;
}

// Exact counter values every 100 ms (+-5 ms jitter) from 0 until past the last iteration.
inline void sample_counter(Workload& w, unsigned seed) {
  std::mt19937_64 random(seed);
  std::uniform_real_distribution<double> jitter(-0.005, 0.005);
  const double end = w.input.iterations.back().second;
  for (double t = 0.0; t < end + 0.2; t += 0.100 + jitter(random)) {
    w.input.counter.push_back({t, w.trace.energy_at(t)});
  }
}

// A pipeline stage as measured on an H100 (bench/gpu/attribution_on_gpu.py): forward and backward
// at the given powers, hooks microseconds apart, bubbles of 20-150 ms at 80 W between iterations.
inline WorkloadShape pipeline_shape(double forward_w, double backward_w) {
  WorkloadShape shape;
  shape.forward_w = forward_w;
  shape.backward_w = backward_w;
  shape.inside_gap_s = 20e-6;
  shape.between_lo_s = 0.020;
  shape.between_hi_s = 0.150;
  return shape;
}

// A workload of `shape` with its counter sampled (sample_counter) and zero-mean noise of
// `noise_j` on each increment between two readings.
inline Workload sampled_with_noise(const WorkloadShape& shape, double noise_j, double seconds,
                                   unsigned seed) {
  Workload w = make_workload(seconds, seed, shape);
  sample_counter(w, seed + 1);
  std::mt19937_64 random(seed + 2);
  std::normal_distribution<double> noise(0.0, noise_j);
  double drift = 0.0;
  for (auto& c : w.input.counter) {
    drift += noise_j > 0.0 ? noise(random) : 0.0;
    c.energy_j += drift;
  }
  return w;
}

inline Workload sampled_workload(double seconds = 30.0, unsigned seed = 42) {
  Workload w = make_workload(seconds, seed);
  sample_counter(w, seed + 1);
  return w;
}

// The counter between its samples: linear, or the step function of what a read returns.
inline double linear_counter(const std::vector<measure::CounterSample>& c, double t) {
  auto hi = std::upper_bound(c.begin(), c.end(), t,
                             [](double x, const measure::CounterSample& s) { return x < s.t_s; });
  if (hi == c.begin() || hi == c.end()) throw std::logic_error("outside the counter samples");
  auto lo = std::prev(hi);
  return lo->energy_j + (hi->energy_j - lo->energy_j) * (t - lo->t_s) / (hi->t_s - lo->t_s);
}

inline double step_counter(const std::vector<measure::CounterSample>& c, double t) {
  auto hi = std::upper_bound(c.begin(), c.end(), t,
                             [](double x, const measure::CounterSample& s) { return x < s.t_s; });
  if (hi == c.begin()) throw std::logic_error("before the counter samples");
  return std::prev(hi)->energy_j;
}

// Mean absolute relative error of the spans' energies with key `key`.
inline double span_error(const Workload& w, const measure::Attribution& a, std::size_t key) {
  double sum = 0.0;
  int n = 0;
  for (std::size_t i = 0; i < w.input.spans.size(); ++i) {
    if (w.input.spans[i].key != key) continue;
    sum += std::abs(a.span_energy_j[i] - w.true_span_j[i]) / w.true_span_j[i];
    ++n;
  }
  return sum / n;
}

}  // namespace perseus::test
