#include "perseus/plan/solver.hpp"

#include <algorithm>
#include <cmath>
#include <thread>

#include "perseus/plan/no_slowdown.hpp"
#include "perseus/plan/reclaim.hpp"
#include "perseus/plan/solver_impl.hpp"

namespace perseus::plan {

int solver_threads(int requested) {
  return requested > 0 ? requested
                       : std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
}

namespace detail {

void Solver::set_all(bool fastest) {
  d_.assign(static_cast<std::size_t>(n_), 0);
  for (int v = 1; v < dag_.sink(); ++v) {
    d_[v] = fastest ? p_.model(v).min_duration() : p_.model(v).max_duration();
  }
}

void Solver::compute_times() {
  total_ = schedule::critical_windows(dag_, d_, es_, lf_);
}

void Solver::record(const std::vector<std::pair<int, int>>& changes) {
  const auto& s = p_.settings;
  const double blocking = static_cast<double>(p_.schedule.num_ranks()) *
                          static_cast<double>(total_) * s.unit_time_s * s.blocking_power_w;
  // A step that moves no instruction to another profiled option realizes the same clocks:
  // slack reclamation and evaluation would repeat the last point's.
  bool same = num_recorded_++ > 0;
  for (auto [v, delta] : changes) {
    const auto& options = p_.options(v).options;
    int o = static_cast<int>(&p_.options(v).realize(d_[v]) - options.data());
    if (o != realized_[v]) same = false, realized_[v] = o;
  }
  recorded_.push_back({same ? -1 : pool_.submit(realized_), total_, cost_sum_ + blocking});
  finish_points(false);
}

void Solver::finish_points(bool all) {
  // Points left in flight so that every thread has work while the cuts go on.
  const long ahead = pool_.threads() > 1 ? 4L * pool_.threads() : 0;
  while (!recorded_.empty()) {
    const Recorded r = recorded_.front();
    if (r.ticket < 0) {
      FrontierPoint point = out_.points.back();
      point.quant_time = r.quant_time;
      point.predicted_energy_j = r.predicted_energy_j;
      out_.points.push_back(point);
      out_.clock_changes.emplace_back();
    } else if (all || pool_.in_flight() > ahead) {
      append_point(pool_.take(), r.quant_time, r.predicted_energy_j);
    } else {
      return;
    }
    recorded_.pop_front();
  }
}

void Solver::append_point(RealizedPoint point, long quant_time, double predicted_energy_j) {
  option_ = std::move(point.option);
  std::vector<std::pair<int, int>> clock_changes;
  for (int v = 1; v < dag_.sink(); ++v) {
    int& clock = clocks_[v - 1];
    const int mhz = p_.options(v).options[option_[v]].frequency_mhz;
    if (clock != mhz) clock = mhz, clock_changes.emplace_back(v - 1, clock);
  }
  if (out_.points.empty())
    out_.initial_clocks = clocks_;
  else
    out_.clock_changes.push_back(std::move(clock_changes));
  out_.points.push_back({quant_time, predicted_energy_j, point.time_s, point.energy_j});
}

void Solver::append_no_slowdown_point() {
  const double target = fastest_iteration_time(p_);
  const FrontierPoint last = out_.points.back();
  if (last.evaluated_time_s <= target + kNoSlowdownTolerance * std::max(1.0, target)) return;
  std::vector<int> option = option_;
  const TimeEnergy cost = without_slowdown(p_, option, target);
  out_.steps.emplace_back();  // the same planned durations
  append_point(RealizedPoint(std::move(option), cost), last.quant_time, last.predicted_energy_j);
}

Frontier Solver::run(const ProgressFn& progress) {
  set_all(true);
  compute_times();
  out_.fastest_time = total_;
  set_all(false);
  compute_times();
  out_.slowest_time = total_;
  out_.initial_durations = d_;
  realized_.assign(static_cast<std::size_t>(n_), 0);
  clocks_.assign(static_cast<std::size_t>(n_ - 2), 0);
  std::vector<std::pair<int, int>> all;
  for (int v = 1; v < dag_.sink(); ++v) {
    cost_sum_ += p_.model(v)(d_[v]);
    all.emplace_back(v, 0);
  }
  record(all);
  const long expected = out_.slowest_time - out_.fastest_time;
  while (true) {
    std::vector<int> faster, slower;
    if (!cut_step(faster, slower)) break;
    const long start = total_, steps = run_length(faster, slower);
    // States before the last keep the network, so the iteration is one unit shorter each.
    for (long j = 1; j <= steps; ++j) {
      std::vector<std::pair<int, int>> changes;
      apply(faster, slower, changes);
      total_ = start - j;
      if (j == steps) compute_times();
      record(changes);
      out_.steps.push_back(std::move(changes));
    }
    if (total_ >= start - steps + 1) {
      out_.stop_reason = "a step did not shorten the iteration";
      break;
    }
    if (progress) progress(out_.slowest_time - total_, expected);
  }
  finish_points(true);
  append_no_slowdown_point();
  out_.min_cuts = cuts_;
  return std::move(out_);
}

}  // namespace detail

std::vector<long> Frontier::durations(std::size_t index) const {
  std::vector<long> d = initial_durations;
  for (std::size_t i = 0; i < index && i < steps.size(); ++i) {
    for (auto [v, delta] : steps[i]) d[v] += delta;
  }
  return d;
}

std::vector<int> Frontier::clocks(std::size_t index) const {
  std::vector<int> c = initial_clocks;
  for (std::size_t i = 0; i < index && i < clock_changes.size(); ++i) {
    for (auto [pos, mhz] : clock_changes[i]) c[pos] = mhz;
  }
  return c;
}

FrequencyPlan to_frequency_plan(const schedule::Dag& dag, const std::vector<int>& clocks) {
  FrequencyPlan plan;
  for (int v = 1; v < dag.sink(); ++v) {
    const auto& node = dag.node(v);
    if (node.rank >= static_cast<int>(plan.size())) plan.resize(node.rank + 1);
    plan[node.rank].push_back(clocks[v - 1]);
  }
  return plan;
}

Frontier solve_frontier(const PlanProblem& problem, const ProgressFn& progress,
                        const SolverOptions& options) {
  return detail::Solver(problem, options).run(progress);
}

FrequencyPlan realize(const PlanProblem& problem, const std::vector<long>& durations) {
  FrequencyPlan plan(problem.schedule.ranks.size());
  for (std::size_t s = 0; s < plan.size(); ++s) {
    plan[s].resize(problem.schedule.ranks[s].size());
  }
  for (int v = 1; v < problem.dag.sink(); ++v) {
    const auto& node = problem.dag.node(v);
    plan[node.rank][node.position] = problem.options(v).realize(durations[v]).frequency_mhz;
  }
  return plan;
}

}  // namespace perseus::plan
