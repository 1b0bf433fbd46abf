// Analytic GPU and model descriptions that synthesize realistic stage profiles (the embedded
// default used by the README's main command and by tests that need a profile without data).
//
// Time of an instruction with relative work w at clock f (MHz):
//   t(f) = w * T_fwd * r * (m + (1 - m) * f_max / f)
// where T_fwd is ModelDescription::forward_time_s, r is 1 for forward and backward_ratio for
// backward, and m = memory_bound_fraction is the share of time that does not scale with the SM
// clock. Power while busy, with activity factor a (forward_activity / backward_activity):
//   P(f) = P_static + P_dyn * a * (f / f_max) * (V(f) / v_max)^2
// with V(f) rising linearly from v_min at f_min to v_max at f_max (relative, effective values:
// they also absorb the leakage and power-management effects a real board shows). Energy is
// P(f) * t(f). Static power makes the energy curve U-shaped: it falls as the clock drops, has a
// minimum at an intermediate clock, and rises again at the lowest clocks.
//
// Built-in GPUs (clocks in MHz, 15 MHz steps; powers in W):
//   name  clocks       P_static P_dyn  v_min v_max P_block
//   a100  1410..855    225      278    0.26  1.0   83.64   A100 SXM, fitted to the reference
//                                                           GPT-3 A100 profile (475 W busy)
//   h100  1980..1005   280      420    0.30  1.0   110     H100 SXM, not fitted: A100 shape
//                                                           scaled to a 700 W board; P_block is
//                                                           an assumption (not measured)
//   a40   1740..855    110      205    0.35  1.0   70.38   A40 (300 W board); the model has no
//                                                           power cap, so the top clocks are
//                                                           faster than on a real, capped A40
// and their data sheets' dense fp16 TFLOP/s, memory and link GB/s: a100 312, 2039, 300; h100
// 989, 3350, 450; a40 150, 696, 32.
// P_block of a100 and a40 is the measured value of the reference data. The defaults of
// ModelDescription (forward 0.05 s, backward 1.85x, m = 0.15, activity 0.90 / 0.92) reproduce the
// A100 reference profile: forward 0.050 s / 23.8 J and backward 0.093 s / 44.5 J at 1410 MHz,
// energy minimum at 990 MHz (reference: 1080 MHz), +3.6% at 855 MHz (reference: +4.1%).
// docs/synthetic-profiles.md explains the calibration.
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
  // Data-sheet throughput (the synthetic search database, search/synthetic_database.hpp): dense
  // fp16 tensor TFLOP/s, memory GB/s, and the GB/s one GPU sends to another (A100 and H100 over
  // NVLink, one direction; A40 over PCIe 4.0).
  double peak_tflops = 0.0, memory_gbps = 0.0, link_gbps = 0.0;

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
  std::vector<double> stage_work;  // relative work per stage (size num_stages)
  double forward_time_s = 0.05;    // forward time of a stage with work 1.0 at max clock
  double backward_ratio = 1.85;    // backward time / forward time
  // Relative backward work per stage (size num_stages); empty: backward_ratio x stage_work. For
  // pipelines whose stages differ in backward share (recomputation, communication).
  std::vector<double> backward_work;
  double memory_bound_fraction = 0.15;  // share of time that does not scale with the clock
  double forward_activity = 0.90;       // activity factors (scale dynamic power)
  double backward_activity = 0.92;
};

// A model with `stages` stages, middle stages of work 1.0, heavier first and last stages
// (embedding and LM head): `first_extra` and `last_extra` are added to their work.
ModelDescription default_model(int stages, double first_extra = 0.08, double last_extra = 0.15);

// Profile with one row per (stage, forward/backward, clock), clocks highest first. `noise` is the
// relative standard deviation of multiplicative measurement noise (0 = exact): time and power are
// each multiplied by exp(noise * z), z ~ N(0, 1) from std::mt19937_64 seeded with `seed`.
// Throws perseus::Error when the model is inconsistent (stage_work size, non-positive values).
Profile synthesize_profile(const GpuModel& gpu, const ModelDescription& model, double noise = 0.0,
                           std::uint64_t seed = 1);

}  // namespace perseus::profile
