// Scoring a plan against a profile, the same way for every planner (ours, baselines, others):
// iteration time = critical path of the profiled durations of the chosen clocks; energy = sum of
// profiled instruction energies + P_block * (R * T - sum of busy time) over the R ranks (GPUs)
// (architecture section 5).
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "perseus/profile/profile.hpp"
#include "perseus/schedule/dag.hpp"
#include "perseus/schedule/schedule.hpp"

namespace perseus::plan {

// Clock (MHz) of every instruction: per rank, in the rank's action order.
using FrequencyPlan = std::vector<std::vector<int>>;

// An iteration's time and energy (a plan's evaluation without the per-rank detail).
struct TimeEnergy {
  double time_s = 0.0;
  double energy_j = 0.0;
};

struct Evaluation {
  double time_s = 0.0;
  double energy_j = 0.0;
  std::vector<double> rank_busy_s;  // per rank: sum of its action durations
};

// One iteration's energy on `num_ranks` GPUs over `time_s`: what the instructions drew
// (`busy_energy_j` over `busy_s` GPU-seconds) plus the blocking power over the rest (Perseus
// SOSP '24, section 3). Every evaluation of a plan computes it here.
inline double iteration_energy(double busy_energy_j, double busy_s, int num_ranks, double time_s,
                               double blocking_power_w) {
  return busy_energy_j + blocking_power_w * (num_ranks * time_s - busy_s);
}

// Closed form of the iteration energy from per-node times and energies (iteration_energy).
Evaluation evaluate_nodes(const schedule::Dag& dag, int num_ranks,
                          const std::vector<double>& node_time,
                          const std::vector<double>& node_energy, double blocking_power_w);

// Checks that the plan's clocks match the schedule's shape (ranks, actions per rank);
// throws perseus::Error prefixed with `source` otherwise.
void check_plan_shape(const FrequencyPlan& plan, const schedule::Schedule& schedule,
                      const std::string& source);

// The profile rows every DAG node runs at under the plan: one per action (an overlapped pair's
// two at the pair's clock; none for source and sink). Throws perseus::Error when the plan's shape
// does not match the schedule or a clock is not in the profile for that stage and instruction
// (naming rank, position, action and clock).
using NodeRows = std::vector<std::vector<const profile::Measurement*>>;
NodeRows node_rows(const profile::Profile& profile, const schedule::Schedule& schedule,
                   const schedule::Dag& dag, const FrequencyPlan& plan);

// Profiled time and energy of every DAG node at the plan's clock (0 for source and sink).
struct NodeCosts {
  std::vector<double> time_s;
  std::vector<double> energy_j;
};
// The time and energy of node_rows' rows, summed per node (0 where a node has none).
NodeCosts costs_of(const NodeRows& rows);
// Throws as node_rows.
NodeCosts node_costs(const profile::Profile& profile, const schedule::Schedule& schedule,
                     const schedule::Dag& dag, const FrequencyPlan& plan);

// Scores `plan`; throws perseus::Error when its shape does not match the schedule or a clock is
// not in the profile for that stage and instruction (naming rank, position, action and clock).
Evaluation evaluate(const profile::Profile& profile, const schedule::Schedule& schedule,
                    const FrequencyPlan& plan, double blocking_power_w);

// The plan that runs every instruction at clock_of(rank, instruction).
using ClockOf = std::function<int(int rank, const schedule::Instruction& instruction)>;
FrequencyPlan plan_per_instruction(const schedule::Schedule& schedule, const ClockOf& clock_of);

// The profile rows of one item: its action's, or for an overlapped pair one row per clock both
// actions have, time and energy summed (their standard errors in quadrature,
// their pooling errors added). Throws perseus::Error when the profile lacks an action's rows or
// a pair's actions share no clock.
std::vector<profile::Measurement> instruction_rows(const profile::Profile& profile,
                                                   const schedule::Instruction& item);

// The plan with every instruction at its highest profiled clock (a pair's: the highest both
// actions have).
FrequencyPlan all_max_plan(const profile::Profile& profile, const schedule::Schedule& schedule);

}  // namespace perseus::plan
