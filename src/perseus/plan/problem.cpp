#include "perseus/plan/problem.hpp"

#include <cmath>
#include <map>

#include "perseus/util/error.hpp"

namespace perseus::plan {

namespace {

void check_settings(const PlanSettings& settings) {
  if (!(settings.unit_time_s > 0.0) || !std::isfinite(settings.unit_time_s)) {
    throw Error("unit time must be a positive number of seconds");
  }
  if (!(settings.blocking_power_w >= 0.0) || !std::isfinite(settings.blocking_power_w)) {
    throw Error("blocking power must be a non-negative number of watts");
  }
}

}  // namespace

PlanProblem PlanProblem::build(const profile::Profile& profile, schedule::Schedule sched,
                               const PlanSettings& settings) {
  check_settings(settings);
  if (profile.num_stages() != sched.num_stages) {
    throw Error(profile.source() + ": profile has " + std::to_string(profile.num_stages()) +
                " stages but the pipeline has " + std::to_string(sched.num_stages) + " (--stages)");
  }
  schedule::Dag dag(sched);
  PlanProblem problem{std::move(sched), std::move(dag), settings, {}, {}, {}};
  // One option set per distinct (stage, type) item, a pair's by both actions.
  std::map<std::string, int> spec_of;
  problem.node_spec.assign(static_cast<std::size_t>(problem.dag.num_nodes()), -1);
  for (int v = 1; v < problem.dag.sink(); ++v) {
    const schedule::Instruction& item = problem.dag.node(v).instruction;
    std::string key;
    for (const schedule::Instruction& a : schedule::actions_of(item)) {
      key += std::to_string(a.stage) + schedule::type_letter(a.type) + ";";
    }
    auto it = spec_of.find(key);
    if (it == spec_of.end()) {
      for (const schedule::Instruction& a : schedule::actions_of(item)) {
        const std::string& type = schedule::type_name(a.type);
        if (profile.has(a.stage, type)) continue;
        bool split = a.type == schedule::InstructionType::kBackwardInput ||
                     a.type == schedule::InstructionType::kBackwardWeight;
        throw Error(profile.source() + ": no '" + type + "' rows for stage " +
                    std::to_string(a.stage) + ", which the " + problem.schedule.name +
                    " schedule needs" +
                    (split ? " (`perseus profile split --split-backward` derives them)" : ""));
      }
      problem.specs.push_back(
          profile::make_option_set(instruction_rows(profile, item), settings.unit_time_s,
                                   settings.blocking_power_w, settings.noise_factor));
      problem.models.push_back(CostModel::build(problem.specs.back(), settings.cost_model));
      it = spec_of.emplace(key, static_cast<int>(problem.specs.size()) - 1).first;
    }
    problem.node_spec[v] = it->second;
  }
  return problem;
}

void option_costs(const PlanProblem& problem, const std::vector<int>& option, OptionCosts& into) {
  const auto n = static_cast<std::size_t>(problem.dag.num_nodes());
  into.time.assign(n, 0.0);
  into.energy.assign(n, 0.0);
  for (int v = 1; v < problem.dag.sink(); ++v) {
    const profile::Option& o = problem.options(v).options[static_cast<std::size_t>(option[v])];
    into.time[v] = o.time_s;
    into.energy[v] = o.energy_j;
  }
}

}  // namespace perseus::plan
