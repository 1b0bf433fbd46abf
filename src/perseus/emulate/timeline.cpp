#include "perseus/emulate/timeline.hpp"

#include <algorithm>
#include <cmath>
#include <deque>
#include <random>
#include <string>

#include "perseus/schedule/dag.hpp"
#include "perseus/util/error.hpp"

namespace perseus::emulate {

namespace {

// Scales every instruction's time and energy by its noise draw and the slow-GPU factor.
void perturb(const schedule::Dag& dag, const Perturbation& p, plan::NodeCosts& costs) {
  std::mt19937_64 rng(p.seed);
  std::normal_distribution<double> normal(0.0, 1.0);
  for (int v = 1; v < dag.sink(); ++v) {
    double factor = p.noise > 0.0 ? std::exp(p.noise * normal(rng)) : 1.0;
    if (dag.node(v).rank == p.slow_rank) factor *= p.slow_factor;
    costs.time_s[v] *= factor;
    costs.energy_j[v] *= factor;
  }
}

// Runs every rank's actions in order. An action starts when its GPU is free and the actions it
// needs from other stages have ended; a rank that waits is revisited when a rank it waits on
// makes progress. Each action runs once, so the work is linear in the DAG's size.
class RankRunner {
 public:
  RankRunner(const schedule::Schedule& schedule, const schedule::Dag& dag,
             const std::vector<double>& time_s)
      : schedule_(schedule),
        dag_(dag),
        time_s_(time_s),
        end_(time_s.size(), -1.0),
        next_(schedule.ranks.size(), 0),
        queued_(schedule.ranks.size(), 1) {
    for (int r = 0; r < schedule.num_ranks(); ++r) work_.push_back(r);
  }

  // Fills start[v] for every instruction node v; throws perseus::Error if the schedule
  // deadlocks.
  void run(std::vector<double>& start) {
    start.assign(time_s_.size(), 0.0);
    while (!work_.empty()) {
      int r = work_.front();
      work_.pop_front();
      queued_[r] = 0;
      run_rank(r, start);
    }
    const auto items = static_cast<std::size_t>(dag_.num_nodes() - 2);  // a pair is one
    if (done_ != items) {
      throw Error("schedule " + schedule_.name + " deadlocks: " + std::to_string(done_) + " of " +
                  std::to_string(items) + " instructions could run");
    }
  }

 private:
  // Runs rank r's actions until one waits on an input.
  void run_rank(int r, std::vector<double>& start) {
    while (next_[r] < schedule_.ranks[r].size()) {
      int v = dag_.node_id(r, static_cast<int>(next_[r]));
      double ready = 0.0;  // the previous action of the rank is a predecessor too
      for (int u : dag_.predecessors(v)) {
        if (!dag_.is_instruction(u)) continue;
        if (end_[u] < 0.0) return;
        ready = std::max(ready, end_[u]);
      }
      start[v] = ready;
      end_[v] = ready + time_s_[v];
      ++next_[r];
      ++done_;
      wake_successors(v);
    }
  }

  void wake_successors(int v) {
    for (int w : dag_.successors(v)) {
      if (!dag_.is_instruction(w)) continue;
      int r = dag_.node(w).rank;
      if (queued_[r]) continue;
      work_.push_back(r);
      queued_[r] = 1;
    }
  }

  const schedule::Schedule& schedule_;
  const schedule::Dag& dag_;
  const std::vector<double>& time_s_;
  std::vector<double> end_;
  std::vector<std::size_t> next_;
  std::vector<char> queued_;
  std::deque<int> work_;
  std::size_t done_ = 0;
};

}  // namespace

void check_perturbation(const Perturbation& p, int num_ranks) {
  if (!(p.noise >= 0.0) || !std::isfinite(p.noise)) {
    throw Error("noise must be a finite number >= 0, got " + std::to_string(p.noise));
  }
  if (p.slow_rank < -1 || p.slow_rank >= num_ranks) {
    throw Error("slow GPU " + std::to_string(p.slow_rank) + " out of range (the pipeline has " +
                std::to_string(num_ranks) + " ranks, 0.." + std::to_string(num_ranks - 1) + ")");
  }
  if (!(p.slow_factor >= 1.0) || !std::isfinite(p.slow_factor)) {
    throw Error("slowdown factor must be >= 1, got " + std::to_string(p.slow_factor));
  }
}

Timeline emulate(const profile::Profile& profile, const schedule::Schedule& schedule,
                 const plan::FrequencyPlan& plan, double blocking_power_w,
                 const Perturbation& perturbation) {
  check_perturbation(perturbation, schedule.num_ranks());
  schedule::Dag dag(schedule);
  plan::NodeCosts costs = plan::node_costs(profile, schedule, dag, plan);
  perturb(dag, perturbation, costs);
  std::vector<double> start;
  RankRunner(schedule, dag, costs.time_s).run(start);

  Timeline t;
  t.blocking_power_w = blocking_power_w;
  const auto ranks = static_cast<std::size_t>(schedule.num_ranks());
  t.rank_busy_s.assign(ranks, 0.0);
  t.rank_energy_j.assign(ranks, 0.0);
  t.entries.reserve(static_cast<std::size_t>(dag.num_nodes()));
  for (int v = 1; v < dag.sink(); ++v) {
    const auto& node = dag.node(v);
    TimelineEntry e{.rank = node.rank,
                    .position = node.position,
                    .instruction = node.instruction,
                    .frequency_mhz = plan[node.rank][node.position],
                    .start_s = start[v],
                    .end_s = start[v] + costs.time_s[v],
                    .energy_j = costs.energy_j[v]};
    t.time_s = std::max(t.time_s, e.end_s);
    t.rank_busy_s[node.rank] += costs.time_s[v];
    t.rank_energy_j[node.rank] += e.energy_j;
    t.entries.push_back(e);
  }
  for (int v : schedule::critical_path(dag, costs.time_s)) t.entries[v - 1].critical = true;
  t.rank_idle_s.resize(ranks);
  for (std::size_t r = 0; r < ranks; ++r) {
    t.rank_idle_s[r] = t.time_s - t.rank_busy_s[r];
    t.rank_energy_j[r] += blocking_power_w * t.rank_idle_s[r];
    t.energy_j += t.rank_energy_j[r];
  }
  return t;
}

}  // namespace perseus::emulate
