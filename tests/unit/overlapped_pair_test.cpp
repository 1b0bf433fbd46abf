// torch's overlapped pairs (OVERLAP_F_B, DualPipeV's main step) are one instruction to plan: one
// DAG node whose actions' data dependencies all meet there (torch sends after the pair), costed as
// both actions at one clock, and served as both actions' labels at that clock.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "perseus/plan/evaluate.hpp"
#include "perseus/plan/problem.hpp"
#include "perseus/plan/solver.hpp"
#include "perseus/profile/gpu_model.hpp"
#include "perseus/profile/split.hpp"
#include "perseus/schedule/dag.hpp"
#include "perseus/schedule/generators.hpp"
#include "perseus/server/schedulers/schedulers.hpp"

namespace {

namespace plan = perseus::plan;
namespace profile = perseus::profile;
namespace schedule = perseus::schedule;
using schedule::InstructionType;

profile::Profile split_a100(int ranks) {
  profile::Profile p = profile::synthesize_profile(profile::gpu_model("a100"),
                                                   profile::default_model(ranks), 0.0, 7);
  return profile::split_profile(p, {2, true, 0.5});
}

// The node that runs (stage, type, microbatch).
int node_of(const schedule::Dag& dag, int stage, InstructionType type, int microbatch) {
  for (int v = 1; v < dag.sink(); ++v) {
    for (const auto& a : schedule::actions_of(dag.node(v).instruction)) {
      if (a.stage == stage && a.type == type && a.microbatch == microbatch) return v;
    }
  }
  return -1;
}

bool has_edge(const schedule::Dag& dag, int u, int v) {
  const auto next = dag.successors(u);
  return std::find(next.begin(), next.end(), v) != next.end();
}

TEST(OverlappedPair, DualPipeVsPairsAreNodesWhoseSendsFollowBothActions) {
  const schedule::Schedule s = schedule::make_dualpipev(2, 8);
  const schedule::Dag dag(s);
  int pairs = 0;
  for (int v = 1; v < dag.sink(); ++v) {
    const schedule::Instruction& item = dag.node(v).instruction;
    if (!item.overlapped()) continue;
    ++pairs;
    for (const auto& a : schedule::actions_of(item)) {
      ASSERT_EQ(node_of(dag, a.stage, a.type, a.microbatch), v);
      // What the action sends: a forward to the next stage, a backward to the previous one.
      const bool forward = a.type == InstructionType::kForward;
      const int to = forward ? a.stage + 1 : a.stage - 1;
      if (to < 0 || to >= s.num_stages) continue;
      const int receiver =
          forward ? node_of(dag, to, InstructionType::kForward, a.microbatch)
                  : std::max(node_of(dag, to, InstructionType::kBackward, a.microbatch),
                             node_of(dag, to, InstructionType::kBackwardInput, a.microbatch));
      if (receiver != v) {
        EXPECT_TRUE(has_edge(dag, v, receiver)) << schedule::action_name(item);
      }
    }
  }
  EXPECT_GT(pairs, 4);
  // Every forward is an action of some item, once; a pair counts as two instructions.
  std::size_t items = 0, forwards = 0;
  for (const auto& list : s.ranks) {
    items += list.size();
    for (const auto& item : list) {
      for (const auto& a : schedule::actions_of(item))
        forwards += a.type == InstructionType::kForward;
    }
  }
  EXPECT_EQ(forwards, static_cast<std::size_t>(s.num_stages) * 8);
  EXPECT_EQ(s.num_instructions(), items + static_cast<std::size_t>(pairs));
}

TEST(OverlappedPair, IsCostedAsBothActionsAtOneClockAndServedSo) {
  const profile::Profile prof = split_a100(2);
  const schedule::Schedule s = schedule::make_dualpipev(2, 8);
  const plan::PlanProblem problem =
      plan::PlanProblem::build(prof, s, {0.001, 80.0, plan::CostModelKind::kConvexHull, 1.0});
  const plan::Frontier frontier = plan::solve_frontier(problem);
  ASSERT_GT(frontier.points.size(), 2u);
  int checked = 0;
  for (std::size_t i : {std::size_t{0}, frontier.points.size() / 2, frontier.points.size() - 1}) {
    const plan::FrequencyPlan clocks = plan::to_frequency_plan(problem.dag, frontier.clocks(i));
    // Each pair's node costs its two actions' rows at the pair's one clock.
    const plan::NodeCosts costs = plan::node_costs(prof, s, problem.dag, clocks);
    for (int v = 1; v < problem.dag.sink(); ++v) {
      const auto& node = problem.dag.node(v);
      if (!node.instruction.overlapped()) continue;
      const int mhz = clocks[node.rank][node.position];
      double time = 0.0, energy = 0.0;
      for (const auto& a : schedule::actions_of(node.instruction)) {
        time += prof.at(a.stage, schedule::type_name(a.type), mhz).time_s;
        energy += prof.at(a.stage, schedule::type_name(a.type), mhz).energy_j;
      }
      EXPECT_DOUBLE_EQ(costs.time_s[v], time);
      EXPECT_DOUBLE_EQ(costs.energy_j[v], energy);
    }
    // Served: every action's label, a pair's two at the same clock.
    const auto served = perseus::server::schedulers::stage_plans(s, clocks);
    for (int r = 0; r < s.num_ranks(); ++r) {
      std::size_t at = 0;
      for (std::size_t p = 0; p < s.ranks[r].size(); ++p) {
        for (const auto& a : schedule::actions_of(s.ranks[r][p])) {
          ASSERT_LT(at, served[r].frequencies.size());
          const auto& [label, mhz] = served[r].frequencies[at++];
          EXPECT_EQ(label, perseus::server::schedulers::instruction_label(s, a));
          EXPECT_EQ(mhz, clocks[r][p]);
          checked += s.ranks[r][p].overlapped();
        }
      }
      EXPECT_EQ(at, served[r].frequencies.size());
    }
  }
  EXPECT_GT(checked, 0);
}

}  // namespace
