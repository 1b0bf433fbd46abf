// A GPU energy counter's observations as values (architecture section 9): the changes a sampler
// observed (CounterSample, kept by CounterSeries), how the counter's changes report energy
// (CounterResponse), and the SM clock read beside them (ClockSample). What the attribution
// (attribution.hpp) works from, whatever read the counter: the client's sampler thread, the
// simulated GPU's, or a recorded window.
//
// A change is timestamped at the midpoint between the previous read and the read that saw it
// (each read's own midpoint), with half their distance as its spread: the counter changed
// somewhere in that range, at any point alike (its refreshes keep their own schedule), so the
// attribution can average over it (attribution_model.hpp). The first read is not a change: a real
// counter refreshes on its own schedule, so a sampler that starts between two refreshes first
// reads a value up to a period old; taken as a change at the read's time, the next change's full
// period of energy would be charged to the part of it after the read (measured on H100s: the
// first instruction of a window got up to 6x its energy).
//
// Complexity: CounterSeries::add_read and add_exact O(1) amortized; between O(log n + result).
#pragma once

#include <cstddef>
#include <deque>
#include <vector>

namespace perseus::measure {

struct CounterSample {
  double t_s = 0.0;       // when the counter took this value (backend clock)
  double energy_j = 0.0;  // the counter's value
  // The value was taken at a time in [t_s - t_spread_s, t_s + t_spread_s], uniformly (0: at t_s).
  double t_spread_s = 0.0;
};

// A first-order response is modelled back to this many time constants (the weight beyond:
// e^-8 = 0.03 %, as if the power there stayed what it was).
inline constexpr double kFirstOrderReachTaus = 8.0;

// When a counter's changes report their energy (attribution.hpp): a change observed at t holds
// the energy spent up to t - lag_s, averaged over window_s around that time (0, 0: exactly up to
// t). A real counter both trails and smooths (NvmlGpu: kNvmlCounterResponse).
struct CounterResponse {
  double lag_s = 0.0;
  double window_s = 0.0;
  // > 0: a first-order response instead of the window: the energy spent s before t - lag_s is
  // held by the change with probability 1 - exp(-s / time_constant_s) (window_s is then 0).
  double time_constant_s = 0.0;
};

// The GPU's SM clock at one moment, and whether the driver held it below what it would otherwise
// run at: the power limit, thermal or hardware slowdown (NVML's clock event reasons).
struct ClockReading {
  int sm_mhz = 0;
  bool held_down = false;
};

struct ClockSample {
  double t_s = 0.0;  // the middle of the read (backend clock)
  ClockReading clock;
};

// The observed changes of a counter. Not thread-safe (the samplers lock around it).
class CounterSeries {
 public:
  explicit CounterSeries(std::size_t capacity) : capacity_(capacity) {}
  // One read that began at `begin_s`, ended at `end_s` and returned `energy_j`; a change from the
  // previous read's value is kept (the first read keeps nothing, nor does the first `after_gap`,
  // a gap of failed reads: the change may lie anywhere in it). A value below the previous one
  // means the counter started again (a GPU reset, or a backend whose total_energy_j is no running
  // total): nobody knows the energy across it, so the series starts again too, the read counting
  // as a first read, and this returns false.
  bool add_read(double begin_s, double end_s, double energy_j, bool after_gap = false);
  // An exactly timed value (ideal counters).
  void add_exact(double t_s, double energy_j);
  // The changes with from_s < t <= to_s, preceded by the last change at or before from_s.
  std::vector<CounterSample> between(double from_s, double to_s) const;
  // Drops changes before t_s except the last one before it.
  void forget_before(double t_s);
  std::size_t size() const { return samples_.size(); }
  std::size_t reads() const { return reads_; }
  double last_value_j() const { return last_value_j_; }  // of the last read (0 before any)

 private:
  void push(const CounterSample& sample);

  std::size_t capacity_;
  std::deque<CounterSample> samples_;
  bool have_read_ = false;
  double last_mid_s_ = 0.0, last_value_j_ = 0.0;
  std::size_t reads_ = 0;
};

}  // namespace perseus::measure
