#include "perseus/plan/no_slowdown.hpp"

#include <algorithm>
#include <limits>
#include <utility>

#include "perseus/plan/evaluate.hpp"
#include "perseus/plan/reclaim.hpp"

namespace perseus::plan {

namespace {

const profile::Option& at(const PlanProblem& p, int v, int k) {
  return p.options(v).options[static_cast<std::size_t>(k)];
}

int fastest_option(const PlanProblem& p, int v) {
  return static_cast<int>(p.options(v).options.size()) - 1;
}

// Every instruction at its fastest option.
std::vector<int> all_fastest(const PlanProblem& p) {
  std::vector<int> option(static_cast<std::size_t>(p.dag.num_nodes()), 0);
  for (int v = 1; v < p.dag.sink(); ++v) option[v] = fastest_option(p, v);
  return option;
}

// Speeds up critical instructions, cheapest energy per second gained first, until the iteration
// takes at most `target` seconds.
void speed_up(const PlanProblem& p, std::vector<int>& option, double target) {
  const double tolerance = kNoSlowdownTolerance * std::max(1.0, target);
  const double blocking = p.settings.blocking_power_w;
  std::vector<double> es, lf;
  OptionCosts r;
  for (;;) {
    option_costs(p, option, r);
    const double total = schedule::critical_windows(p.dag, r.time, es, lf);
    if (total <= target + tolerance) return;
    int best = -1;
    double best_rate = std::numeric_limits<double>::infinity();
    for (int v = 1; v < p.dag.sink(); ++v) {
      if (option[v] == fastest_option(p, v) || es[v] + r.time[v] < lf[v] - tolerance) continue;
      const auto &now = at(p, v, option[v]), &faster = at(p, v, option[v] + 1);
      const double gained = now.time_s - faster.time_s;
      if (gained <= 0.0) continue;
      // Effective energy (as in slack reclamation): the instruction's own, plus the blocking
      // power its GPU draws over the time it gives back.
      const double rate = (faster.energy_j - now.energy_j + blocking * gained) / gained;
      if (rate < best_rate) best_rate = rate, best = v;
    }
    if (best < 0) return;  // every critical instruction is at its fastest option
    ++option[best];
  }
}

}  // namespace

double fastest_iteration_time(const PlanProblem& problem) {
  OptionCosts costs;
  option_costs(problem, all_fastest(problem), costs);
  return schedule::longest_path(problem.dag, costs.time);
}

TimeEnergy without_slowdown(const PlanProblem& problem, std::vector<int>& option, double target_s) {
  speed_up(problem, option, target_s);
  const TimeEnergy sped_up = reclaim_slack(problem, option);
  std::vector<int> from_fastest = all_fastest(problem);
  const TimeEnergy fastest = reclaim_slack(problem, from_fastest);
  if (!(fastest.energy_j < sped_up.energy_j)) return sped_up;
  option = std::move(from_fastest);
  return fastest;
}

}  // namespace perseus::plan
