#include "perseus/plan/saving_error.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <utility>

namespace perseus::plan {

namespace {

// How many of the plan's instructions run at each profile row, and the plan's evaluation.
struct RowUse {
  std::map<const profile::Measurement*, double> count;
  Evaluation evaluation;
};

RowUse row_use(const profile::Profile& profile, const schedule::Schedule& schedule,
               const schedule::Dag& dag, const FrequencyPlan& plan, double blocking_power_w) {
  RowUse use;
  const NodeRows rows = node_rows(profile, schedule, dag, plan);
  for (const auto& node : rows) {
    for (const profile::Measurement* row : node) use.count[row] += 1.0;
  }
  const NodeCosts costs = costs_of(rows);
  use.evaluation =
      evaluate_nodes(dag, schedule.num_ranks(), costs.time_s, costs.energy_j, blocking_power_w);
  return use;
}

// The standard error: the root of the sum of (row's standard error in J x its weight)^2;
// nullopt when a used row has none.
std::optional<double> standard_error(const std::map<const profile::Measurement*, double>& weight) {
  double variance = 0.0;
  for (const auto& [row, w] : weight) {
    if (!row->energy_stderr) return std::nullopt;
    variance += std::pow(*row->energy_stderr_j() * w, 2);
  }
  return std::sqrt(variance);
}

// Weights equal but for rounding (an instruction's rows' weights summed in another order) leave
// this much of the unconstrained bound (relative); less is 0.
constexpr double kWeightRounding = 1e-9;

// One instruction of a pooling group: its rows' weight in the saving and their pooling error in
// J (one offset shared by the rows).
struct Member {
  double weight = 0.0, bound = 0.0;
};

// The most sum(weight x d) can be over |d| <= bound with sum(d) = 0: by LP duality the least
// over lambda of sum(bound |weight - lambda|), reached at the bound-weighted median of the
// weights. O(members log members).
double group_bound(std::vector<Member> members) {
  std::sort(members.begin(), members.end(),
            [](const Member& a, const Member& b) { return a.weight < b.weight; });
  double total = 0.0;
  for (const Member& m : members) total += m.bound;
  double below = 0.0, lambda = 0.0;
  for (const Member& m : members) {
    below += m.bound;
    lambda = m.weight;
    if (below >= 0.5 * total) break;
  }
  double sum = 0.0, scale = 0.0;
  for (const Member& m : members) {
    sum += m.bound * std::abs(m.weight - lambda);
    scale += m.bound * std::abs(m.weight);
  }
  return sum <= kWeightRounding * scale ? 0.0 : sum;
}

// The pooling bound over every group of profile rows pooled together, given each used row's
// weight in the saving; nullopt when a used row has no pooling error. A group is a rank's rows at
// one clock, with the rows that were measured as differences from them (an instruction's rows
// referring to its row at that clock share its offset in J: one member). A group whose rows all
// carry a pooling error was measured in windows that ran each of its instructions equally often
// (once per microbatch), where a pooled power takes from one instruction what it gives another:
// their offsets in J sum to 0. A group with a row without one gets no such constraint.
std::optional<double> pooling_bound(const profile::Profile& profile,
                                    const schedule::Schedule& schedule,
                                    const std::map<const profile::Measurement*, double>& weight) {
  using Group = std::pair<int, int>;  // (rank, clock)
  std::map<Group, std::map<std::pair<int, std::string>, Member>> groups;
  std::map<Group, bool> constrained;
  for (const auto& [key, rows] : profile.all()) {
    if (key.first >= static_cast<int>(schedule.stage_rank.size())) continue;
    for (const profile::Measurement& row : rows) {
      const Group group{schedule.stage_rank[key.first],
                        row.energy_pooling_reference_mhz.value_or(row.frequency_mhz)};
      const auto w = weight.find(&row);
      constrained.try_emplace(group, true);
      if (!row.energy_pooling_error) {
        if (w != weight.end()) return std::nullopt;
        constrained[group] = false;
        continue;
      }
      Member& m = groups[group][key];
      m.weight += w == weight.end() ? 0.0 : w->second;
      m.bound = std::max(m.bound, *row.energy_pooling_error_j());
    }
  }
  double sum = 0.0;
  for (const auto& [group, by_instruction] : groups) {
    std::vector<Member> members;
    for (const auto& [instruction, m] : by_instruction) members.push_back(m);
    if (constrained[group]) {
      sum += group_bound(std::move(members));
      continue;
    }
    for (const Member& m : members) sum += m.bound * std::abs(m.weight);
  }
  return sum;
}

}  // namespace

SavingError saving_error(const profile::Profile& profile, const schedule::Schedule& schedule,
                         const FrequencyPlan& plan, const FrequencyPlan& baseline,
                         double blocking_power_w) {
  const schedule::Dag dag(schedule);
  const RowUse p = row_use(profile, schedule, dag, plan, blocking_power_w);
  const RowUse b = row_use(profile, schedule, dag, baseline, blocking_power_w);
  const double ep = p.evaluation.energy_j, eb = b.evaluation.energy_j;
  if (!(eb > 0.0)) return {};
  // s = 1 - E_p / E_b: a row whose energy moves by d moves s by -d (n_p - (E_p / E_b) n_b) / E_b,
  // which the rows the two plans share correlate.
  std::map<const profile::Measurement*, double> weight;
  for (const auto& [row, n] : p.count) weight[row] += n / eb;
  for (const auto& [row, n] : b.count) weight[row] -= ep / eb * n / eb;
  return {standard_error(weight), pooling_bound(profile, schedule, weight)};
}

}  // namespace perseus::plan
