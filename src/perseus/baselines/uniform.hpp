// The "uniform" baseline: every instruction at the clock where it uses the least energy, whatever
// that does to the iteration time (EnvPipe's non-envelope starting point applied everywhere).
#pragma once

#include "perseus/plan/evaluate.hpp"
#include "perseus/profile/profile.hpp"
#include "perseus/schedule/schedule.hpp"

namespace perseus::baselines {

// Every instruction at the clock with the lowest profiled energy for its (stage, type). Throws
// perseus::Error when the profile's stage count differs from the schedule's.
plan::FrequencyPlan uniform_plan(const profile::Profile& profile,
                                 const schedule::Schedule& schedule);

}  // namespace perseus::baselines
