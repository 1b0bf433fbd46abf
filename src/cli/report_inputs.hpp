// `perseus report`'s options and what the report is computed from: the profile (a CSV or the
// embedded default), the schedule, and the frontier (read from a directory, checked against the
// profile and options, or planned in memory).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "cli/common.hpp"
#include "perseus/plan/frontier_store.hpp"
#include "perseus/profile/csv.hpp"
#include "perseus/schedule/schedule.hpp"

namespace perseus::cli {

struct ReportArgs {
  std::string profile, gpu = "a100", frontier, factors = "1.00:1.50:0.01";
  ScheduleOptions schedule;
  std::string out = "out/report/report.html", svg_dir;
  int stages = 8, microbatches = 12;
  std::optional<int> pipelines;  // the sweep's cluster: --pipelines or --gpus, else kPipelines
  // ... x this many GPUs per stage: as emulate cluster, 1, except in the assumed cluster
  // (kAssumedTensorParallel)
  std::optional<int> tensor_parallel;
  std::optional<long> gpus;
  std::vector<std::string> measured;  // NAME=run.json (simulate-training --out)
  PlanChoice choice;                  // the plan of the timeline
  double blocking_power = -1.0, unit_time = 0.001, eta = 0.5;
  bool quiet = false, allow_implausible = false;
  // Given on the command line (the defaults above apply otherwise).
  bool has_gpu = false, has_stages = false, has_microbatches = false, has_schedule = false,
       has_blocking_power = false;
};

// Everything the report is computed from.
struct Inputs {
  profile::Profile profile;
  std::string profile_label;
  double blocking_power_w = 0.0;
  plan::StoredFrontier frontier;
  schedule::Schedule schedule;
};

// Checks the options that need no file; throws the first problem.
void check_options(const ReportArgs& a);

// The profile, blocking power and schedule; with --frontier also the frontier, checked against
// them.
Inputs load_inputs(const ReportArgs& a);

// Plans the frontier in memory (convex-hull cost model), as `perseus plan` would write it.
plan::StoredFrontier solve(const Inputs& in, double unit_time_s, bool quiet);

}  // namespace perseus::cli
