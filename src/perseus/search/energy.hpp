// Energy as an objective of the parallelization search (issue 17; none of the published systems
// has it). For each candidate configuration:
//   - stage time per microbatch comes from the performance model (perf_model.hpp): forward =
//     forward compute + incoming transfer and resharding, backward = backward compute +
//     recomputed forwards + outgoing transfer and resharding;
//   - each stage's time and energy at every clock come from a GPU model (profile/gpu_model.hpp,
//     as `perseus profile synth`), with those times at the highest clock;
//   - the iteration's time-energy frontier comes from the frontier planner (plan/solver.hpp) on
//     the 1F1B pipeline of those stages, one clock plan per pipeline stage shared by all the
//     stage's GPUs; energy per iteration counts every GPU (a stage's GPUs each draw its energy).
// Planning cost grows with the microbatch count M, so pipelines with M > kMaxPlannedMicrobatches
// are planned at two smaller counts (m/2 and m, m = max(kMaxPlannedMicrobatches, 2S) for S
// stages) and their time and energy extrapolated linearly to M: 1F1B's steady state repeats one
// forward and backward per stage per microbatch (on GPT-1.3B, 4 stages, M = 128, the
// extrapolation is within 0.1 % of planning all 128; search_energy_test.cpp).
#pragma once

#include <string>
#include <vector>

#include "perseus/search/config.hpp"
#include "perseus/search/perf_model.hpp"

namespace perseus::search {

inline constexpr int kMaxPlannedMicrobatches = 64;

struct EnergyOptions {
  std::string gpu = "a100";    // a GPU model name (profile::gpu_model)
  double max_slowdown = 0.05;  // fraction of the fastest candidate's iteration time
};

// A configuration's pipeline under the frontier planner (times in seconds, energy in joules per
// iteration over all its GPUs).
struct PipelineEnergy {
  double all_max_time_s = 0.0, all_max_energy_j = 0.0;  // every GPU at its highest clock
  double fastest_energy_j = 0.0;  // the fastest frontier plan (at all-max's time)
  double planned_time_s = 0.0, planned_energy_j = 0.0;  // least energy within the slowdown
};

// `cost` is the performance model's evaluation of `c`; `slowdown` the fraction of the pipeline's
// own all-max time the chosen plan may add; more than `max_planned` microbatches are
// extrapolated.
PipelineEnergy pipeline_energy(const Config& c, const PipelineCost& cost,
                               const std::string& gpu_name, double slowdown,
                               int max_planned = kMaxPlannedMicrobatches);

struct EnergyCandidate {
  Config config;
  PipelineCost cost;
  PipelineEnergy energy;
  bool within_bound = false;  // its all-max time is within the slowdown bound
};

struct EnergyChoice {
  std::vector<EnergyCandidate> candidates;
  int time_optimal = -1;    // the fastest (by the performance model)
  int energy_optimal = -1;  // least planned energy among those within the bound
  double bound_s = 0.0;     // (1 + max_slowdown) x the fastest candidate's all-max time
};

// Plans every legal candidate and picks the energy-optimal one. Error when none is legal.
EnergyChoice choose_for_energy(const PerfModel& pm, const std::vector<Config>& candidates,
                               const EnergyOptions& options);

}  // namespace perseus::search
