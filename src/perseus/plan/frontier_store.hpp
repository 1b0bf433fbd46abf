// The frontier on disk: one directory with three files, however many plans there are.
//   frontier.csv  index,planned_time_s,predicted_energy_j,evaluated_time_s,evaluated_energy_j,
//                 pareto
//   plans.txt     every plan's clocks, compactly: plan 0 in full, then only the clocks that
//                 changed from the previous plan ("perseus.plans/1", see frontier_store.cpp)
//   meta.json     settings, schedule, all-max reference, stop reason, cost model parameters
// frontier.csv ends with a `pareto` column (1: Pareto-optimal in evaluated time and energy).
// Written into a staging directory and renamed into place, so a failed run leaves nothing that
// looks complete.
#pragma once

#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include "perseus/plan/plan_io.hpp"
#include "perseus/plan/solver.hpp"

namespace perseus::plan {

struct FrontierRow {
  std::size_t index = 0;
  double planned_time_s = 0.0;
  double predicted_energy_j = 0.0;
  double evaluated_time_s = 0.0;
  double evaluated_energy_j = 0.0;
};

struct StoredFrontier {
  std::string schedule;
  int num_stages = 0;
  int num_microbatches = 0;
  int stages_per_rank = 1;
  std::string schedule_actions;  // the schedule as CSV in PyTorch's notation (empty: by name)
  double unit_time_s = 0.0;
  double blocking_power_w = 0.0;
  TimeEnergy all_max;  // the evaluated all-max plan, the reference for savings
  std::vector<FrontierRow> rows;
  std::vector<FrequencyPlan> plans;  // parallel to rows

  // The plan at `index` with its metadata, ready to write as JSON.
  Plan plan(std::size_t index) const;
  // The schedule the frontier was planned on; throws perseus::Error when the stored name and sizes
  // do not make one.
  schedule::Schedule build_schedule() const;
  // GPUs of one pipeline (its ranks).
  int num_ranks() const { return num_stages / stages_per_rank; }
};

struct FrontierInfo {
  std::string profile_source;
  TimeEnergy all_max;  // evaluated all-max plan
  double seconds = 0.0;
};

// The frontier as read_frontier would return it after write_frontier, without touching disk.
StoredFrontier stored_frontier(const PlanProblem& problem, const Frontier& frontier,
                               const TimeEnergy& all_max);

// Writes the frontier directory `dir` (created if needed; replaced atomically if it exists).
void write_frontier(const std::filesystem::path& dir, const PlanProblem& problem,
                    const Frontier& frontier, const FrontierInfo& info);
// Reads it back; throws perseus::Error naming the file on any inconsistency.
StoredFrontier read_frontier(const std::filesystem::path& dir);
// Only the settings and the rows, not the plans (`plans` stays empty): what choosing a plan by
// time, energy or slowdown needs, in memory linear in the rows alone.
StoredFrontier read_frontier_rows(const std::filesystem::path& dir);

// The row `index` names, checked (an explicit choice: it may be a dominated row). Every other
// choice of a plan goes through FrontierQuery (frontier_query.hpp).
std::size_t select_by_index(const StoredFrontier& f, long index);

}  // namespace perseus::plan
