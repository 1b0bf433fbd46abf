#include "perseus/plan/evaluate.hpp"

#include <algorithm>
#include <cmath>
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
  ev.energy_j = iteration_energy(energy, busy, num_ranks, ev.time_s, blocking_power_w);
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

NodeRows node_rows(const profile::Profile& profile, const schedule::Schedule& schedule,
                   const schedule::Dag& dag, const FrequencyPlan& plan) {
  check_plan_shape(plan, schedule, "");
  NodeRows rows(static_cast<std::size_t>(dag.num_nodes()));
  for (int v = 1; v < dag.sink(); ++v) {
    const auto& node = dag.node(v);
    const int mhz = plan[node.rank][node.position];
    for (const schedule::Instruction& a : schedule::actions_of(node.instruction)) {
      const std::string& type = schedule::type_name(a.type);
      if (!profile.has(a.stage, type)) {
        throw Error(profile.source() + ": no '" + type + "' rows for stage " +
                    std::to_string(a.stage));
      }
      const profile::Measurement* found = nullptr;
      for (const auto& row : profile.rows(a.stage, type)) {
        if (row.frequency_mhz == mhz) found = &row;
      }
      if (found == nullptr) {
        throw Error("plan rank " + std::to_string(node.rank) + " position " +
                    std::to_string(node.position) + " (" + type + " of stage " +
                    std::to_string(a.stage) + " microbatch " + std::to_string(a.microbatch) +
                    "): clock " + std::to_string(mhz) + " MHz is not in profile " +
                    profile.source());
      }
      rows[static_cast<std::size_t>(v)].push_back(found);
    }
  }
  return rows;
}

NodeCosts node_costs(const profile::Profile& profile, const schedule::Schedule& schedule,
                     const schedule::Dag& dag, const FrequencyPlan& plan) {
  return costs_of(node_rows(profile, schedule, dag, plan));
}

NodeCosts costs_of(const NodeRows& rows) {
  NodeCosts costs;
  costs.time_s.assign(rows.size(), 0.0);
  costs.energy_j.assign(rows.size(), 0.0);
  for (std::size_t v = 0; v < rows.size(); ++v) {
    for (const profile::Measurement* row : rows[v]) {
      costs.time_s[v] += row->time_s;
      costs.energy_j[v] += row->energy_j;
    }
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
    int mhz = 0;
    for (const profile::Measurement& row : instruction_rows(profile, inst)) {
      mhz = std::max(mhz, row.frequency_mhz);
    }
    return mhz;
  });
}

std::vector<profile::Measurement> instruction_rows(const profile::Profile& profile,
                                                   const schedule::Instruction& item) {
  const std::vector<schedule::Instruction> parts = schedule::actions_of(item);
  std::vector<profile::Measurement> rows =
      profile.rows(parts[0].stage, schedule::type_name(parts[0].type));
  if (parts.size() == 1) return rows;
  const std::vector<profile::Measurement>& second =
      profile.rows(parts[1].stage, schedule::type_name(parts[1].type));
  std::vector<profile::Measurement> out;
  for (const profile::Measurement& a : rows) {
    for (const profile::Measurement& b : second) {
      if (a.frequency_mhz != b.frequency_mhz) continue;
      profile::Measurement sum;
      sum.frequency_mhz = a.frequency_mhz;
      sum.time_s = a.time_s + b.time_s;
      sum.energy_j = a.energy_j + b.energy_j;
      const auto aj = a.energy_stderr_j(), bj = b.energy_stderr_j();
      if (aj && bj && sum.energy_j > 0.0) {
        sum.energy_stderr = std::sqrt(*aj * *aj + *bj * *bj) / sum.energy_j;
      }
      const auto ap = a.energy_pooling_error_j(), bp = b.energy_pooling_error_j();
      if (ap && bp && sum.energy_j > 0.0) sum.energy_pooling_error = (*ap + *bp) / sum.energy_j;
      out.push_back(sum);
    }
  }
  if (out.empty()) {
    throw Error(profile.source() + ": the overlapped pair " + schedule::action_name(item) +
                " runs under one clock, but its actions' rows share no clock");
  }
  return out;
}

}  // namespace perseus::plan
