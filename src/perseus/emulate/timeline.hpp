// Timeline emulation of one pipeline iteration (architecture section 6): every rank is a GPU that
// runs all its stages' actions in the schedule's order, each starting when the GPU is free and
// its input from the neighbouring stage has arrived. Durations and energies come from the profile
// at the planned clock; optional perturbations model measurement noise and a slow GPU. The result
// carries the iteration time, per-rank busy/idle time and energy, and every instruction's start,
// end, clock and power, with one critical path marked.
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
  // One slow GPU: every action of rank `slow_rank` takes `slow_factor` times longer at the same
  // power (a throttled GPU). -1 slows nothing; slow_factor must be >= 1.
  int slow_rank = -1;
  double slow_factor = 1.0;
};

struct TimelineEntry {
  int rank = 0;
  int position = 0;  // index in the rank's action list
  schedule::Instruction instruction{schedule::InstructionType::kForward, 0};  // with its stage
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
  double energy_j = 0.0;  // instruction energy + blocking power x idle time, all ranks
  double blocking_power_w = 0.0;
  std::vector<double> rank_busy_s;     // per rank: sum of action durations
  std::vector<double> rank_idle_s;     // per rank: time_s - busy
  std::vector<double> rank_energy_j;   // per rank: its actions + blocking while idle
  std::vector<TimelineEntry> entries;  // rank-major, schedule order within a rank
};

// Checks the perturbation; throws perseus::Error naming the bad field.
void check_perturbation(const Perturbation& perturbation, int num_ranks);

// Runs `plan` on `schedule`. Throws perseus::Error when the plan's shape does not match the
// schedule or a clock is not in the profile (same messages as plan::evaluate).
Timeline emulate(const profile::Profile& profile, const schedule::Schedule& schedule,
                 const plan::FrequencyPlan& plan, double blocking_power_w,
                 const Perturbation& perturbation = {});

}  // namespace perseus::emulate
