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
    if (dag.node(v).stage == p.slow_stage) factor *= p.slow_factor;
    costs.time_s[v] *= factor;
    costs.energy_j[v] *= factor;
  }
}

// Runs every stage's instructions in order. An instruction starts when its GPU is free and the
// instructions it needs from other stages have ended; a stage that waits is revisited when a
// neighbour makes progress. Fills start[v] for every instruction node v; throws perseus::Error
// if the schedule deadlocks.
void simulate(const schedule::Schedule& schedule, const schedule::Dag& dag,
              const std::vector<double>& time_s, std::vector<double>& start) {
  const int num_stages = schedule.num_stages;
  start.assign(time_s.size(), 0.0);
  std::vector<double> end(time_s.size(), -1.0);
  std::vector<std::size_t> next(static_cast<std::size_t>(num_stages), 0);
  std::deque<int> work;
  for (int s = 0; s < num_stages; ++s) work.push_back(s);
  std::size_t done = 0;
  while (!work.empty()) {
    int s = work.front();
    work.pop_front();
    bool progressed = false;
    while (next[s] < schedule.stages[s].size()) {
      int v = dag.node_id(s, static_cast<int>(next[s]));
      double ready = 0.0;  // the previous instruction of the stage is a predecessor too
      bool inputs_ready = true;
      for (int u : dag.predecessors(v)) {
        if (!dag.is_instruction(u)) continue;
        if (end[u] < 0.0) inputs_ready = false;
        ready = std::max(ready, end[u]);
      }
      if (!inputs_ready) break;
      start[v] = ready;
      end[v] = ready + time_s[v];
      ++next[s];
      ++done;
      progressed = true;
    }
    if (!progressed) continue;
    if (s > 0) work.push_back(s - 1);
    if (s + 1 < num_stages) work.push_back(s + 1);
  }
  if (done != schedule.num_instructions()) {
    throw Error("schedule " + schedule.name + " deadlocks: " + std::to_string(done) + " of " +
                std::to_string(schedule.num_instructions()) + " instructions could run");
  }
}

}  // namespace

void check_perturbation(const Perturbation& p, int num_stages) {
  if (!(p.noise >= 0.0) || !std::isfinite(p.noise)) {
    throw Error("noise must be a finite number >= 0, got " + std::to_string(p.noise));
  }
  if (p.slow_stage < -1 || p.slow_stage >= num_stages) {
    throw Error("slow stage " + std::to_string(p.slow_stage) + " out of range (the pipeline has " +
                std::to_string(num_stages) + " stages, 0.." + std::to_string(num_stages - 1) + ")");
  }
  if (!(p.slow_factor >= 1.0) || !std::isfinite(p.slow_factor)) {
    throw Error("slowdown factor must be >= 1, got " + std::to_string(p.slow_factor));
  }
}

Timeline emulate(const profile::Profile& profile, const schedule::Schedule& schedule,
                 const plan::FrequencyPlan& plan, double blocking_power_w,
                 const Perturbation& perturbation) {
  check_perturbation(perturbation, schedule.num_stages);
  schedule::Dag dag(schedule);
  plan::NodeCosts costs = plan::node_costs(profile, schedule, dag, plan);
  perturb(dag, perturbation, costs);
  std::vector<double> start;
  simulate(schedule, dag, costs.time_s, start);

  Timeline t;
  t.blocking_power_w = blocking_power_w;
  const auto stages = static_cast<std::size_t>(schedule.num_stages);
  t.stage_busy_s.assign(stages, 0.0);
  t.stage_energy_j.assign(stages, 0.0);
  t.entries.reserve(schedule.num_instructions());
  for (int v = 1; v < dag.sink(); ++v) {
    const auto& node = dag.node(v);
    TimelineEntry e{.stage = node.stage,
                    .position = node.position,
                    .instruction = node.instruction,
                    .frequency_mhz = plan[node.stage][node.position],
                    .start_s = start[v],
                    .end_s = start[v] + costs.time_s[v],
                    .energy_j = costs.energy_j[v]};
    t.time_s = std::max(t.time_s, e.end_s);
    t.stage_busy_s[node.stage] += costs.time_s[v];
    t.stage_energy_j[node.stage] += e.energy_j;
    t.entries.push_back(e);
  }
  for (int v : schedule::critical_path(dag, costs.time_s)) t.entries[v - 1].critical = true;
  t.stage_idle_s.resize(stages);
  for (std::size_t s = 0; s < stages; ++s) {
    t.stage_idle_s[s] = t.time_s - t.stage_busy_s[s];
    t.stage_energy_j[s] += blocking_power_w * t.stage_idle_s[s];
    t.energy_j += t.stage_energy_j[s];
  }
  return t;
}

}  // namespace perseus::emulate
