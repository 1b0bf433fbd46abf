// The Zeus baselines (You et al., NSDI'23) applied to a pipeline: GPU power limits instead of
// per-instruction clocks (architecture section 6). A power limit caps each instruction at the
// fastest profiled clock whose average power fits under it. "Global" sweeps one limit for every
// GPU; "per-stage" gives the heaviest stage the swept limit and balances the others to its time.
// Both pick the limit with the lowest cost eta * E + (1 - eta) * P_max * T.
#pragma once

#include <cstddef>
#include <vector>

#include "perseus/plan/evaluate.hpp"
#include "perseus/profile/profile.hpp"
#include "perseus/schedule/schedule.hpp"

namespace perseus::baselines {

struct PowerLimitPoint {
  std::vector<double> limits_w;  // per GPU (rank; a stage in one-stage-per-GPU schedules)
  plan::FrequencyPlan plan;
  plan::Evaluation evaluation;
  double cost = 0.0;  // eta * energy + (1 - eta) * max_power_w * time
};

struct ZeusSweep {
  std::vector<PowerLimitPoint> points;  // highest limit first
  std::size_t chosen = 0;               // index of the lowest-cost point (the first on ties)
  // P_max of the cost: the highest average power (energy / time) of any row of the profile,
  // i.e. one GPU's maximum draw (not multiplied by the number of stages).
  double max_power_w = 0.0;
  double eta = 0.0;
};

// A power limit L caps an instruction at the fastest profiled clock whose average power
// (energy / time) is <= L, or at the lowest-power clock when none qualifies. Throws
// perseus::Error when `rows` is empty.
int clock_under_limit(const std::vector<profile::Measurement>& rows, double limit_w);

// Limits swept from the highest average power in the profile down in steps of `step_w`, ending
// exactly at the lowest average power. A limit that gives the same plan as the previous point is
// dropped. Throw perseus::Error when eta is outside [0, 1], step_w is not positive (or so small
// that the sweep has more than 100000 limits), or the profile's stage count differs from the
// schedule's.
ZeusSweep zeus_global(const profile::Profile& profile, const schedule::Schedule& schedule,
                      double blocking_power_w, double eta, double step_w = 25.0);
// For each swept limit L: the heaviest GPU (largest forward + backward time under L) gets L;
// every other GPU the lowest swept limit under which its forward + backward time does not
// exceed the heaviest GPU's time under L.
ZeusSweep zeus_per_stage(const profile::Profile& profile, const schedule::Schedule& schedule,
                         double blocking_power_w, double eta, double step_w = 25.0);

}  // namespace perseus::baselines
