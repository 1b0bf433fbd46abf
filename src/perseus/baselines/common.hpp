// Helpers shared by the baseline planners (uniform, EnvPipe, Zeus): looking up an instruction's
// profiled clocks and its energy-optimal clock.
#pragma once

#include <vector>

#include "perseus/plan/evaluate.hpp"
#include "perseus/profile/profile.hpp"
#include "perseus/schedule/schedule.hpp"

namespace perseus::baselines {

// Throws perseus::Error naming the profile when it does not have exactly `num_stages` stages.
void check_stages(const profile::Profile& profile, int num_stages);

// The profiled rows of one instruction's (stage, type).
const std::vector<profile::Measurement>& rows_of(const profile::Profile& profile, int stage,
                                                 schedule::InstructionType type);

// The row with the lowest energy (the faster one on ties); throws perseus::Error when empty.
const profile::Measurement& energy_optimal(const std::vector<profile::Measurement>& rows);

}  // namespace perseus::baselines
