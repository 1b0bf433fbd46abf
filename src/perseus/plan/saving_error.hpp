// How far a plan's energy saving may be off because the profile it was planned on was measured:
// the standard error of the saving from each profile row's relative standard error
// (profile::Measurement::energy_stderr, written by the instruction profiler). `perseus plan` and
// `plan evaluate` print it beside the saving.
//
// Model: a row's energy is one measured mean, so every instruction that runs at that row shares
// its error; rows are independent (each clock is measured in its own windows, each stage on its
// own GPU). A forward and a backward measured in the same windows err in opposite directions
// (their sum is what the counter sees best), so treating them as independent overstates the
// error, never understates it. Times are taken as exact (host timestamps; the blocking power's
// own error is left out). The pooling error (Measurement::energy_pooling_error) is a bound, not a
// spread, and is not in it: profile::describe names the rows it concerns.
// Complexity: O(instructions) per plan.
#pragma once

#include <optional>

#include "perseus/plan/evaluate.hpp"

namespace perseus::plan {

// The standard error of 1 - E(plan) / E(baseline) (a fraction, like the saving), by the delta
// method over the rows either plan runs at, their shared rows correlating the two energies;
// nullopt when some such row has no standard error. Throws as evaluate.
std::optional<double> saving_stderr(const profile::Profile& profile,
                                    const schedule::Schedule& schedule, const FrequencyPlan& plan,
                                    const FrequencyPlan& baseline, double blocking_power_w);

}  // namespace perseus::plan
