// The frontier solver: Phillips-Dessouky iterative minimum cuts on the critical subgraph
// (architecture section 5; Phillips and Dessouky, Management Science 1977). Starts from the
// slowest plan and shortens the iteration by one time unit per step, choosing the cheapest set of
// instructions to speed up (and those that can slow down in return) with a minimum cut whose arc
// bounds are marginal costs from the cost models. Cost: one minimum cut per change of the
// critical network, O((V + E) log k) to find how many steps k a cut makes, and slack
// reclamation and evaluation only for steps that change a realized clock.
#pragma once

#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "perseus/plan/evaluate.hpp"
#include "perseus/plan/problem.hpp"

namespace perseus::plan {

struct FrontierPoint {
  long quant_time = 0;              // planned iteration time in units
  double predicted_energy_j = 0.0;  // cost model: sum of effective energies + S*T*P_block
  double evaluated_time_s = 0.0;    // evaluation against the profile
  double evaluated_energy_j = 0.0;
};

struct Frontier {
  std::vector<FrontierPoint> points;  // slowest first
  long slowest_time = 0;              // critical path with every instruction at its slowest option
  long fastest_time = 0;              // ... at its fastest option
  std::string stop_reason;
  // Minimum cuts solved: a step whose critical network (nodes, arcs, bounds) equals the last
  // step's reuses its cut, as the algorithm is deterministic.
  long min_cuts = 0;
  // Planned durations, compactly: plan 0 per DAG node, then the nodes whose duration changed
  // (by +1 or -1) at each later step: plan i = plan i-1 + steps[i-1].
  std::vector<long> initial_durations;
  std::vector<std::vector<std::pair<int, int>>> steps;
  // Realized clocks (after slack reclamation), compactly: plan 0's clock of every instruction
  // (index = DAG node - 1, i.e. stages in order, each in schedule order), then per later plan the
  // (instruction, clock) pairs that differ from the previous plan.
  std::vector<int> initial_clocks;
  std::vector<std::vector<std::pair<int, int>>> clock_changes;

  // Durations of every DAG node in plan `index` (replays the steps).
  std::vector<long> durations(std::size_t index) const;
  // Clock of every instruction in plan `index` (replays the clock changes).
  std::vector<int> clocks(std::size_t index) const;
};

// Called with (steps done, expected total steps).
using ProgressFn = std::function<void(long, long)>;

// Threads for SolverOptions::threads: `requested`, or one per hardware thread when it is 0.
int solver_threads(int requested);

struct SolverOptions {
  // The published algorithm's way: one unit per step and a fresh minimum cut from the lower
  // bounds every step. The frontier is the same (tests check it); only slower.
  bool per_unit = false;
  // Threads for slack reclamation and evaluation of the points (the minimum cuts stay on the
  // caller's thread); the frontier is the same for any number.
  int threads = 1;
};

// Steps that cannot change the answer are taken together: a step whose critical network equals
// the last one's reuses its cut, the next cut starts from the last one's flow, and with constant
// marginal costs (convex hull) one cut makes as many unit steps as it stays optimal for.
Frontier solve_frontier(const PlanProblem& problem, const ProgressFn& progress = {},
                        const SolverOptions& options = {});

// The realized clocks of a duration assignment: for each instruction, the slowest profiled
// option whose quantized duration fits (before slack reclamation).
FrequencyPlan realize(const PlanProblem& problem, const std::vector<long>& durations);

// Per-rank clock lists from flat per-instruction clocks (as Frontier::clocks returns).
FrequencyPlan to_frequency_plan(const schedule::Dag& dag, const std::vector<int>& clocks);

}  // namespace perseus::plan
