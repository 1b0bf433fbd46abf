// Analytic GPU and model descriptions that synthesize realistic stage profiles (the embedded
// default used by the README's main command and by tests that need a profile without data).
//
// Time of an instruction at clock f: t(f) = t_mem + t_compute * f_max / f, where t_mem is the
// memory-bound part that does not scale with the SM clock. Power: P(f) = P_static +
// k * f * V(f)^2 * activity, with V(f) rising linearly from V_min at f_min to V_max at f_max.
// Energy = P(f) * t(f). See README "Synthetic profiles" for the parameters of each GPU.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "perseus/profile/profile.hpp"

namespace perseus::profile {

struct GpuModel {
  std::string name;
  int max_mhz = 0;
  int min_mhz = 0;
  int step_mhz = 0;
  double static_power_w = 0.0;      // power drawn regardless of clock while busy
  double dynamic_power_w = 0.0;     // dynamic power at max clock and full activity
  double v_min = 0.0, v_max = 0.0;  // relative voltage at min and max clock
  double blocking_power_w = 0.0;    // power while blocked on communication

  // Supported SM clocks, highest first.
  std::vector<int> frequencies() const;
  // Average power (W) at clock `mhz` for an instruction with the given activity factor.
  double power(int mhz, double activity) const;
};

// Built-in GPU models ("a100", "h100", "a40"); throws perseus::Error listing the known names.
const GpuModel& gpu_model(const std::string& name);
std::vector<std::string> gpu_model_names();

// Pipeline model: per-stage relative work and the forward time of one unit of work at max clock.
struct ModelDescription {
  int num_stages = 4;
  std::vector<double> stage_work;    // relative work per stage (size num_stages)
  double forward_time_s = 0.05;      // forward time of a stage with work 1.0 at max clock
  double backward_ratio = 2.0;       // backward time / forward time
  double memory_bound_fraction = 0.15;  // share of time that does not scale with the clock
  double forward_activity = 0.85;    // activity factors (scale dynamic power)
  double backward_activity = 0.95;
};

// A model with `stages` stages, middle stages of work 1.0, heavier first and last stages
// (embedding and LM head): `first_extra` and `last_extra` are added to their work.
ModelDescription default_model(int stages, double first_extra = 0.08, double last_extra = 0.15);

// Profile with one row per (stage, forward/backward, clock); `noise` is the relative standard
// deviation of multiplicative measurement noise (0 = exact), drawn from a seeded generator.
Profile synthesize_profile(const GpuModel& gpu, const ModelDescription& model,
                           double noise = 0.0, std::uint64_t seed = 1);

}  // namespace perseus::profile
