// Planner view of one (stage, instruction): its Pareto-optimal options with durations quantized
// to a time unit and costs turned into effective energy (energy - P_block * time).
#pragma once

#include <vector>

#include "perseus/profile/profile.hpp"

namespace perseus::profile {

struct Option {
  int frequency_mhz = 0;
  double time_s = 0.0;    // measured duration
  double energy_j = 0.0;  // measured energy
  long quant_time = 0;    // floor(time / unit), as Python's `//`
  double cost = 0.0;      // effective energy: energy - P_block * quant_time * unit
};

// Options of one (stage, instruction), slowest (largest quant_time) first, one per quant_time.
struct OptionSet {
  std::vector<Option> options;

  long min_duration() const { return options.back().quant_time; }
  long max_duration() const { return options.front().quant_time; }
  // The slowest option whose quantized duration is <= `duration` (the fastest option when none).
  const Option& realize(long duration) const;
};

// Python's float floor division a // b (quantization must match the reference bit for bit).
double python_floordiv(double a, double b);

// Pareto filtering (an option is dropped when another is strictly faster and cheaper by more
// than `noise_factor`: other.time < time and other.energy * noise_factor < energy), then time
// quantization keeping the most expensive option per quant_time, then effective energy.
// Throws perseus::Error when `rows` is empty or the unit is not positive.
OptionSet make_option_set(const std::vector<Measurement>& rows, double unit_time_s,
                          double blocking_power_w, double noise_factor = 1.0);

}  // namespace perseus::profile
