// A planning problem: a schedule's DAG plus, for every instruction node, its options (Pareto,
// quantized) and cost model. Built from a profile; checks that the profile covers the schedule.
#pragma once

#include <string>
#include <vector>

#include "perseus/plan/cost_model.hpp"
#include "perseus/plan/evaluate.hpp"
#include "perseus/profile/options.hpp"
#include "perseus/profile/profile.hpp"
#include "perseus/schedule/dag.hpp"
#include "perseus/schedule/schedule.hpp"

namespace perseus::plan {

struct PlanSettings {
  double unit_time_s = 0.001;
  double blocking_power_w = 0.0;
  CostModelKind cost_model = CostModelKind::kConvexHull;
  double noise_factor = 1.0;
};

struct PlanProblem {
  schedule::Schedule schedule;
  schedule::Dag dag;
  PlanSettings settings;
  std::vector<profile::OptionSet> specs;  // one per (stage, instruction type)
  std::vector<CostModel> models;          // parallel to specs
  std::vector<int> node_spec;             // per DAG node; -1 for source and sink

  // Builds the problem; throws perseus::Error when the profile's stages or instructions do not
  // match the schedule or a setting is out of range.
  static PlanProblem build(const profile::Profile& profile, schedule::Schedule schedule,
                           const PlanSettings& settings);

  const profile::OptionSet& options(int node) const { return specs[node_spec[node]]; }
  const CostModel& model(int node) const { return models[node_spec[node]]; }
};

// Per DAG node: the profiled time and energy of an option index (0 for source and sink).
struct OptionCosts {
  std::vector<double> time, energy;
};

// The costs of `option` (index per DAG node into problem.options(v).options; source and sink
// ignored) into `into` (resized, so buffers are reused).
void option_costs(const PlanProblem& problem, const std::vector<int>& option, OptionCosts& into);

}  // namespace perseus::plan
