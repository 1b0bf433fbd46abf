// The energy counter's refresh clock: when a window's observed counter changes fit one clock, each
// change is timed by the clock's tick rather than by the reads around it (attribution.hpp).
//
// A sampler sees a change only between two reads: on an H100 each change's time is known to
// +-1.5-2.5 ms (CounterSample::t_spread_s), and an interval's energy to 2-3 % (its power times
// those errors). But the H100's counter refreshes on a clock of its own: 100.00 ms apart, idle
// and loaded, every one of 240 changes on two GPUs inside the two reads around it
// (bench/gpu/refresh_clock.py). The clock's ticks, fitted over a window's ~60 changes, time each
// change to a fraction of a millisecond: on the recorded memory-bound windows whose changes carry
// their spread, the counter intervals' residual fell by 19-64 % (test_real_gpu_traces.py).
//
// Fit: the ticks are numbered by rounding each gap between changes to a whole number of periods
// (the median gap: a sampler that stalls past a refresh sees one change for two ticks), the clock
// is the least-squares line of time on tick number, refitted on the changes within
// kRefreshClockInlier robust standard deviations (1.4826 x the median absolute residual) of it.
// A clock is accepted when at least kRefreshClockMinChanges changes are observed and the robust
// standard deviation is under kRefreshClockTolerance of the period (a counter whose refreshes
// wander, or a reader that sees every change exactly at irregular times, has none). Each change
// then takes the last tick no later than its time + spread + margin (the latest refresh its read
// could have seen) if that tick is no earlier than its time - spread - margin, margin
// kRefreshClockInlier robust standard deviations; its spread becomes the tick's standard error.
// Other changes keep their observed time. Complexity: O(n log n) for n changes.
#pragma once

#include <cstddef>
#include <optional>
#include <vector>

#include "perseus/measure/counter_series.hpp"

namespace perseus::measure {

inline constexpr std::size_t kRefreshClockMinChanges = 8;
// The robust standard deviation of the changes about the clock, as a share of its period, above
// which the changes are not taken to follow one clock (H100: 0.6-1.2 ms of 100 ms).
inline constexpr double kRefreshClockTolerance = 0.02;
// Changes within this many robust standard deviations (beyond their own spread) of a tick are
// timed by it.
inline constexpr double kRefreshClockInlier = 3.0;

struct RefreshClock {
  double first_tick_s = 0.0;  // the tick numbered 0 (at or near the first change)
  double period_s = 0.0;
  double robust_sd_s = 0.0;  // of the changes' observed times about their ticks
  // Standard errors of first_tick_s and period_s, and their covariance (least squares).
  double var_first_s2 = 0.0, var_period_s2 = 0.0, cov_s2 = 0.0;

  double tick(double n) const { return first_tick_s + period_s * n; }
  double tick_stderr_s(double n) const;
};

// nullopt unless the changes fit one clock (see above).
std::optional<RefreshClock> fit_refresh_clock(const std::vector<CounterSample>& changes);

struct ClockTimedChanges {
  std::vector<CounterSample> changes;
  std::size_t on_clock = 0;  // changes timed by a tick
};

// The changes with every one the clock explains timed by its tick; times stay in order.
ClockTimedChanges time_by_clock(const std::vector<CounterSample>& changes,
                                const RefreshClock& clock);

}  // namespace perseus::measure
