#include "perseus/plan/evaluate.hpp"

#include <algorithm>
#include <string>

#include "perseus/util/error.hpp"

namespace perseus::plan {

Evaluation evaluate_nodes(const schedule::Dag& dag, int num_ranks,
                          const std::vector<double>& node_time,
                          const std::vector<double>& node_energy, double blocking_power_w) {
  Evaluation ev;
  ev.time_s = schedule::longest_path(dag, node_time);
  ev.rank_busy_s.assign(static_cast<std::size_t>(num_ranks), 0.0);
  double busy = 0.0, energy = 0.0;
  for (int v = 0; v < dag.num_nodes(); ++v) {
    if (!dag.is_instruction(v)) continue;
    ev.rank_busy_s[dag.node(v).rank] += node_time[v];
    busy += node_time[v];
    energy += node_energy[v];
  }
  ev.energy_j = energy + blocking_power_w * (num_ranks * ev.time_s - busy);
  return ev;
}

void check_plan_shape(const FrequencyPlan& plan, const schedule::Schedule& schedule,
                      const std::string& source) {
  const std::string where = source.empty() ? "" : source + ": ";
  if (plan.size() != schedule.ranks.size()) {
    throw Error(where + "plan has " + std::to_string(plan.size()) +
                " ranks (clock lists) but the schedule has " +
                std::to_string(schedule.ranks.size()));
  }
  for (std::size_t r = 0; r < plan.size(); ++r) {
    if (plan[r].size() != schedule.ranks[r].size()) {
      throw Error(where + "plan rank " + std::to_string(r) + " has " +
                  std::to_string(plan[r].size()) + " instructions but the " + schedule.name +
                  " schedule has " + std::to_string(schedule.ranks[r].size()));
    }
  }
}

std::vector<const profile::Measurement*> node_rows(const profile::Profile& profile,
                                                   const schedule::Schedule& schedule,
                                                   const schedule::Dag& dag,
                                                   const FrequencyPlan& plan) {
  check_plan_shape(plan, schedule, "");
  std::vector<const profile::Measurement*> rows(static_cast<std::size_t>(dag.num_nodes()), nullptr);
  for (int v = 1; v < dag.sink(); ++v) {
    const auto& node = dag.node(v);
    const std::string& type = schedule::type_name(node.instruction.type);
    int mhz = plan[node.rank][node.position];
    if (!profile.has(node.stage(), type)) {
      throw Error(profile.source() + ": no '" + type + "' rows for stage " +
                  std::to_string(node.stage()));
    }
    for (const auto& row : profile.rows(node.stage(), type)) {
      if (row.frequency_mhz == mhz) rows[v] = &row;
    }
    if (rows[v] == nullptr) {
      throw Error("plan rank " + std::to_string(node.rank) + " position " +
                  std::to_string(node.position) + " (" + type + " of stage " +
                  std::to_string(node.stage()) + " microbatch " +
                  std::to_string(node.instruction.microbatch) + "): clock " + std::to_string(mhz) +
                  " MHz is not in profile " + profile.source());
    }
  }
  return rows;
}

NodeCosts node_costs(const profile::Profile& profile, const schedule::Schedule& schedule,
                     const schedule::Dag& dag, const FrequencyPlan& plan) {
  return costs_of(node_rows(profile, schedule, dag, plan));
}

NodeCosts costs_of(const std::vector<const profile::Measurement*>& rows) {
  NodeCosts costs;
  costs.time_s.assign(rows.size(), 0.0);
  costs.energy_j.assign(rows.size(), 0.0);
  for (std::size_t v = 0; v < rows.size(); ++v) {
    if (rows[v] == nullptr) continue;
    costs.time_s[v] = rows[v]->time_s;
    costs.energy_j[v] = rows[v]->energy_j;
  }
  return costs;
}

Evaluation evaluate(const profile::Profile& profile, const schedule::Schedule& schedule,
                    const FrequencyPlan& plan, double blocking_power_w) {
  schedule::Dag dag(schedule);
  NodeCosts costs = node_costs(profile, schedule, dag, plan);
  return evaluate_nodes(dag, schedule.num_ranks(), costs.time_s, costs.energy_j, blocking_power_w);
}

FrequencyPlan plan_per_instruction(const schedule::Schedule& schedule, const ClockOf& clock_of) {
  FrequencyPlan plan(schedule.ranks.size());
  for (std::size_t r = 0; r < schedule.ranks.size(); ++r) {
    plan[r].reserve(schedule.ranks[r].size());
    for (const auto& inst : schedule.ranks[r])
      plan[r].push_back(clock_of(static_cast<int>(r), inst));
  }
  return plan;
}

FrequencyPlan all_max_plan(const profile::Profile& profile, const schedule::Schedule& schedule) {
  return plan_per_instruction(schedule, [&](int, const schedule::Instruction& inst) {
    return profile.max_frequency(inst.stage, schedule::type_name(inst.type));
  });
}

}  // namespace perseus::plan
