// A model of a real GPU's energy counter, for the simulated GPU (architecture section 9). Measured
// on an H100 (observe-only NVML polling, Perseus project measurements): the NVML total-energy
// counter is refreshed about every 100 ms (intervals 69-118 ms under load) and a read in between
// returns the last refresh's value; one read blocks the caller for about 4 ms; Yang et al. (SC'24)
// report that on A100/H100 the power sensor sees only about 25 % of each refresh window, an
// option here (sampled_fraction), but the energy counter of the H100 windows in tests/data fits a
// whole-window integral (with 25 % sampling their fitted residuals would be 4-100x what they
// are); and a refresh reports the energy up to about 10 ms before it, averaged over the 20 ms
// around that time (the lag and window that fitted the recorded windows of 1F1B stages best among
// those that report no energy spent after the refresh, bench/gpu/counter_lag.py).
//
// PowerTrace is the true power of a GPU over time (busy segments at their power, a base power
// elsewhere); EnergyCounter turns it into what a read returns. An `ideal` counter returns the
// true energy at any time, for unit tests that need exact numbers.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <optional>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "perseus/measure/counter_series.hpp"

namespace perseus::measure {

struct CounterOptions {
  bool ideal = false;               // exact value at every read, reads free
  double refresh_period_s = 0.100;  // the counter changes only at refreshes
  // Each refresh interval is period + U(-jitter, +jitter); 0: the H100's strict clock.
  double refresh_jitter_s = 0.0;
  double read_latency_s = 0.004;  // one read blocks the caller this long
  double sampled_fraction = 1.0;  // share of each refresh window the power sensor sees
  double lag_s = 0.010;           // a refresh at r reports the energy up to r - lag_s, ...
  double window_s = 0.020;        // ... averaged over this long around r - lag_s (<= 2 lag_s)
  // > 0: a first-order response instead of the window: the energy spent s before a refresh is
  // counted by it with probability 1 - exp(-(s - lag_s) / time_constant_s), lag_s being the
  // dead time (window_s must be 0). Measured on two H100s with bursts against idle
  // (bench/gpu/counter_kernel.py): 11-12 ms, a dead time of 0 within a millisecond.
  double time_constant_s = 0.0;
  double noise = 0.0;  // relative standard deviation of each refresh's increment
  // When the first refresh comes, in (0, refresh_period_s]; unset: drawn from the seed. A real
  // counter refreshes on its own schedule, so a reader starting at 0 meets it at any phase, and
  // the first refresh brings the energy of a whole period (the GPU drew its base power before 0).
  std::optional<double> refresh_phase_s;
  std::uint64_t seed = 1;

  // Throws perseus::Error naming the field ("counter option 'refresh_period_s': ...").
  void validate() const;
  // How far before a refresh the energy it reports reaches (the trace must be kept that far).
  double reach_s() const;
  // The response as the client takes it back (CounterResponse).
  CounterResponse response() const { return {lag_s, window_s, time_constant_s}; }
  // The realistic default (above) or the ideal counter, by name: "realistic" or "ideal".
  static CounterOptions named(const std::string& name);
};

// Piecewise-constant power over time: busy segments at their own power, `base_power_w` between
// them. Segments are added in time order and never overlap.
class PowerTrace {
 public:
  explicit PowerTrace(double base_power_w = 0.0) : base_power_w_(base_power_w) {}

  // Throws perseus::Error when the segment starts before the previous one ended.
  void add_busy(double begin_s, double end_s, double power_w);
  // Joules consumed from time 0 to `t_s` (t_s at or after the oldest kept segment's start).
  double energy_at(double t_s) const;
  // The mean of energy_at over [from_s, to_s] (energy_at(from_s) when the range is empty).
  double mean_energy(double from_s, double to_s) const;
  // The mean of energy_at(t_s - x) over x exponential with mean tau_s (> 0), exact where the
  // power before t_s - reach_s stays what it was just after (the trace is kept that far).
  double exponential_mean_energy(double t_s, double tau_s, double reach_s) const;
  // Segment boundaries (begin and end times) in (from_s, to_s], in order.
  std::vector<double> boundaries(double from_s, double to_s) const;
  // Drops segments that ended before `t_s` (energy_at stays exact for times >= t_s).
  void forget_before(double t_s);

 private:
  struct Segment {
    double begin_s, end_s, power_w;
    double extra_before_j;  // sum of (power - base) x duration of earlier segments
  };
  double base_power_w_;
  std::deque<Segment> segments_;
  double extra_forgotten_j_ = 0.0;  // the same sum over forgotten segments
};

// What reads of a GPU's energy counter return over a power trace. Refreshes are computed up to
// the latest time read and the last kRefreshHistory of them are kept, so readers at different
// times (a sampler catching up on the past, a direct read of the present) all get the value of
// the refresh at or before their own time; the trace is only needed from the latest refresh on.
class EnergyCounter {
 public:
  static constexpr std::size_t kRefreshHistory = 65536;  // ~1.8 h at 100 ms

  EnergyCounter(const PowerTrace& trace, CounterOptions options);

  // The counter value (joules) a read sampling the device at `t_s` returns.
  double value_at(double t_s);
  // Time of the latest refresh computed so far (before any: the one a period before the first).
  double last_refresh_s() const {
    return refreshes_.empty() ? first_refresh_s_ - options_.refresh_period_s
                              : refreshes_.back().first;
  }
  const CounterOptions& options() const { return options_; }

 private:
  void refresh();  // applies the refresh at next_refresh_s_

  const PowerTrace& trace_;
  CounterOptions options_;
  std::mt19937_64 random_;
  double first_refresh_s_ = 0.0, next_refresh_s_ = 0.0;
  std::deque<std::pair<double, double>> refreshes_;  // (time, value), oldest first
  double before_history_j_ = 0.0;                    // the value before the oldest kept refresh
};

}  // namespace perseus::measure
