#include "perseus/plan/saving_error.hpp"

#include <algorithm>
#include <cmath>
#include <map>

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
  std::vector<double> time(static_cast<std::size_t>(dag.num_nodes()), 0.0), energy(time);
  const std::vector<const profile::Measurement*> rows = node_rows(profile, schedule, dag, plan);
  for (std::size_t v = 0; v < rows.size(); ++v) {
    if (rows[v] == nullptr) continue;
    use.count[rows[v]] += 1.0;
    time[v] = rows[v]->time_s;
    energy[v] = rows[v]->energy_j;
  }
  use.evaluation = evaluate_nodes(dag, schedule.num_ranks(), time, energy, blocking_power_w);
  return use;
}

// The variance of one row's energy (J^2); nullopt without a standard error.
std::optional<double> row_variance(const profile::Measurement& row) {
  if (!row.energy_stderr) return std::nullopt;
  const double sd = *row.energy_stderr * row.energy_j;
  return sd * sd;
}

}  // namespace

std::optional<double> saving_stderr(const profile::Profile& profile,
                                    const schedule::Schedule& schedule, const FrequencyPlan& plan,
                                    const FrequencyPlan& baseline, double blocking_power_w) {
  const schedule::Dag dag(schedule);
  const RowUse p = row_use(profile, schedule, dag, plan, blocking_power_w);
  const RowUse b = row_use(profile, schedule, dag, baseline, blocking_power_w);
  // Var(E_p), Var(E_b) and Cov(E_p, E_b): each row's variance times the counts that use it.
  std::map<const profile::Measurement*, std::pair<double, double>> counts;
  for (const auto& [row, n] : p.count) counts[row].first = n;
  for (const auto& [row, n] : b.count) counts[row].second = n;
  double var_p = 0.0, var_b = 0.0, cov = 0.0;
  for (const auto& [row, n] : counts) {
    const std::optional<double> v = row_variance(*row);
    if (!v) return std::nullopt;
    var_p += n.first * n.first * *v;
    var_b += n.second * n.second * *v;
    cov += n.first * n.second * *v;
  }
  const double ep = p.evaluation.energy_j, eb = b.evaluation.energy_j;
  if (!(eb > 0.0)) return std::nullopt;
  // s = 1 - E_p / E_b: ds/dE_p = -1 / E_b, ds/dE_b = E_p / E_b^2.
  const double gp = -1.0 / eb, gb = ep / (eb * eb);
  const double variance = gp * gp * var_p + gb * gb * var_b + 2.0 * gp * gb * cov;
  return std::sqrt(std::max(0.0, variance));
}

}  // namespace perseus::plan
