// How far a plan's energy saving may be off because the profile it was planned on was measured
// (the instruction profiler's error columns, profile::Measurement): a standard error from each
// row's relative standard error, and a bound from each row's pooling error. `perseus plan`,
// `plan evaluate` and the report print them beside the saving.
//
// Standard error: a row's energy is one measured mean, so every instruction that runs at that
// row shares its error; rows are independent (each clock is measured in its own windows, each
// stage on its own GPU). A forward and a backward measured in the same windows err in opposite
// directions (their sum is what the counter sees best), so treating them as independent
// overstates the error, never understates it. Times are taken as exact (host timestamps; the
// blocking power's own error is left out).
//
// Pooling bound: a pooled row's energy may lie anywhere within its pooling error of its own
// (a bound, not a spread, that more measuring does not shrink), but the rows of one rank at one
// clock were measured together, each instruction once per microbatch, and a pooled power takes
// from one what it gives another: their errors in J sum to 0. The bound is the farthest the
// saving moves under both (first order; per group the least over lambda of sum(bound x |weight -
// lambda|), LP duality, at the bound-weighted median). So a plan that runs a pooled group's
// instructions at one clock, as the profiling windows did, is not moved at all; pooling matters
// where the plan gives them different clocks. Rows the profiler's split-clock rounds measured as
// differences from one clock's (energy_pooling_reference_mhz) join that clock's group, an
// instruction's rows as one member: they share one offset in J, so a plan that runs each
// instruction once per microbatch gets a bound of 0. What both give on a simulated H100 whose last
// stage's forward and backward draw differently: docs/usage.md, section Usage (how far each saving
// may be off), measured by tests/cli/control_plane_counter.sh and bench/saving_error_bench.sh.
// Complexity: O(instructions + profile rows) per plan.
#pragma once

#include <optional>

#include "perseus/plan/evaluate.hpp"

namespace perseus::plan {

struct SavingError {
  // The standard error of 1 - E(plan) / E(baseline) (a fraction, like the saving), by the delta
  // method over the rows either plan runs at, their shared rows correlating the two energies;
  // nullopt when some such row has no standard error.
  std::optional<double> standard_error;
  // The farthest pooling may move the saving (a fraction; 0 where no row either plan runs at is
  // pooled, or where each pooled group runs at one clock); nullopt when some such row has no
  // pooling error.
  std::optional<double> pooling_bound;
};

// Throws as evaluate.
SavingError saving_error(const profile::Profile& profile, const schedule::Schedule& schedule,
                         const FrequencyPlan& plan, const FrequencyPlan& baseline,
                         double blocking_power_w);

}  // namespace perseus::plan
