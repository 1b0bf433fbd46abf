// One planning run, as `perseus plan` and Python's `perseus.plan` make it: a profile and the
// schedule it runs become a PlanProblem (problem.hpp), its iteration time-energy frontier
// (solver.hpp, Perseus SOSP '24 section 4) and the evaluated all-max plan every saving is
// measured against; one plan evaluated against all-max. Also the plan files `plan export` writes
// from a frontier, in each format.
#pragma once

#include <filesystem>
#include <string>

#include "perseus/plan/frontier_store.hpp"
#include "perseus/plan/problem.hpp"
#include "perseus/plan/saving_error.hpp"
#include "perseus/plan/solver.hpp"

namespace perseus::plan {

struct PlannedFrontier {
  PlanProblem problem;
  Frontier frontier;
  TimeEnergy all_max;    // the evaluated all-max plan
  double seconds = 0.0;  // wall-clock time the run took
};

// Solves the frontier of `problem` (PlanProblem::build from `profile`, which throws
// perseus::Error when the profile does not cover the schedule or a setting is out of range;
// progress as solve_frontier's) and evaluates all-max on the profile.
PlannedFrontier plan_frontier(const profile::Profile& profile, PlanProblem problem,
                              const ProgressFn& progress = {}, const SolverOptions& options = {});

// A plan evaluated against the all-max plan on the same profile and schedule, with how far its
// saving may be off (saving_error.hpp): what `perseus plan evaluate` and Python's
// perseus.evaluate report. Throws as evaluate.
struct AgainstAllMax {
  Evaluation plan, all_max;
  SavingError error;
};
AgainstAllMax evaluate_against_all_max(const profile::Profile& profile,
                                       const schedule::Schedule& schedule,
                                       const FrequencyPlan& plan, double blocking_power_w);

// A plan file: its name in an export directory and its text.
struct PlanFile {
  std::string name, text;
};
// Whether `format` is one `plan export --format` writes: json, py or zeus.
bool is_plan_format(const std::string& format);
// Throws perseus::Error when `frontier`'s plans cannot be written in `format`: another format,
// or "zeus" for a schedule that runs several stages per GPU (the message says why, not which
// option).
void check_plan_format(const StoredFrontier& frontier, const std::string& format);
// Row `index` of `frontier` (planned on `schedule`, its build_schedule()) as a plan file:
// "json" (plan_NNNNN.json, perseus.plan/1), "py" (freqs_pipeline_NNNNN.py, the reference
// optimizer's list of clocks) or "zeus" (freqs_pipeline_NNNNN.py, Zeus's (instruction, clock)
// pairs; one stage per GPU only). Throws as check_plan_format.
PlanFile plan_file(const StoredFrontier& frontier, const schedule::Schedule& schedule,
                   std::size_t index, const std::string& format);
// plan_file written into `dir` (created if needed; the file replaced atomically); its path.
std::filesystem::path write_plan_file(const StoredFrontier& frontier,
                                      const schedule::Schedule& schedule, std::size_t index,
                                      const std::string& format, const std::filesystem::path& dir);

}  // namespace perseus::plan
