// Timeline emulation of one pipeline iteration (architecture section 6): every stage is a GPU that
// runs its instructions in schedule order, each starting when the GPU is free and its input from
// the neighbouring stage has arrived. Durations and energies come from the profile at the planned
// clock; optional perturbations model measurement noise and a slow GPU. The result carries the
// iteration time, per-stage busy/idle time and energy, and every instruction's start, end, clock
// and power, with one critical path marked.
#pragma once

#include <cstdint>
#include <vector>

#include "perseus/plan/evaluate.hpp"
#include "perseus/profile/profile.hpp"
#include "perseus/schedule/schedule.hpp"

namespace perseus::emulate {

struct Perturbation {
  // Per-instruction noise: each duration is multiplied by exp(noise * z), z ~ N(0, 1), drawn
  // from a generator seeded with `seed` (same seed, same timeline). Power is unchanged, so the
  // energy scales with the duration. 0 disables noise.
  double noise = 0.0;
  std::uint64_t seed = 0;
  // One slow GPU: every instruction of `slow_stage` takes `slow_factor` times longer at the same
  // power (a throttled GPU). -1 slows nothing; slow_factor must be >= 1.
  int slow_stage = -1;
  double slow_factor = 1.0;
};

struct TimelineEntry {
  int stage = 0;
  int position = 0;  // index in the stage's instruction list
  schedule::Instruction instruction{schedule::InstructionType::kForward, 0};
  int frequency_mhz = 0;
  double start_s = 0.0;
  double end_s = 0.0;
  double energy_j = 0.0;
  bool critical = false;  // on the marked critical path

  double duration_s() const { return end_s - start_s; }
  double power_w() const { return energy_j / duration_s(); }
};

struct Timeline {
  double time_s = 0.0;    // iteration time: when the last instruction ends
  double energy_j = 0.0;  // instruction energy + blocking power x idle time, all stages
  double blocking_power_w = 0.0;
  std::vector<double> stage_busy_s;    // per stage: sum of instruction durations
  std::vector<double> stage_idle_s;    // per stage: time_s - busy
  std::vector<double> stage_energy_j;  // per stage: its instructions + blocking while idle
  std::vector<TimelineEntry> entries;  // stage-major, schedule order within a stage
};

// Checks the perturbation; throws perseus::Error naming the bad field.
void check_perturbation(const Perturbation& perturbation, int num_stages);

// Runs `plan` on `schedule`. Throws perseus::Error when the plan's shape does not match the
// schedule or a clock is not in the profile (same messages as plan::evaluate).
Timeline emulate(const profile::Profile& profile, const schedule::Schedule& schedule,
                 const plan::FrequencyPlan& plan, double blocking_power_w,
                 const Perturbation& perturbation = {});

}  // namespace perseus::emulate
