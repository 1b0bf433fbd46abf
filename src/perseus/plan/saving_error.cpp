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

// The sum over the rows of term(row error in J, count in the plan, count in the baseline);
// nullopt when a row has no such error.
template <typename Term>
std::optional<double> over_rows(
    const std::map<const profile::Measurement*, std::pair<double, double>>& counts,
    std::optional<double> profile::Measurement::*relative_error, const Term& term) {
  double sum = 0.0;
  for (const auto& [row, n] : counts) {
    const std::optional<double> relative = row->*relative_error;
    if (!relative) return std::nullopt;
    sum += term(*relative * row->energy_j, n.first, n.second);
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
  std::map<const profile::Measurement*, std::pair<double, double>> counts;
  for (const auto& [row, n] : p.count) counts[row].first = n;
  for (const auto& [row, n] : b.count) counts[row].second = n;
  const double ep = p.evaluation.energy_j, eb = b.evaluation.energy_j;
  if (!(eb > 0.0)) return {};
  // s = 1 - E_p / E_b: a row whose energy moves by d moves s by -d (n_p - (E_p / E_b) n_b) / E_b.
  auto weight = [&](double np, double nb) { return (np - ep / eb * nb) / eb; };
  SavingError out;
  const std::optional<double> variance =
      over_rows(counts, &profile::Measurement::energy_stderr,
                [&](double sd, double np, double nb) { return std::pow(sd * weight(np, nb), 2); });
  if (variance) out.standard_error = std::sqrt(*variance);
  out.pooling_bound = over_rows(
      counts, &profile::Measurement::energy_pooling_error,
      [&](double bound, double np, double nb) { return bound * std::abs(weight(np, nb)); });
  return out;
}

}  // namespace perseus::plan
