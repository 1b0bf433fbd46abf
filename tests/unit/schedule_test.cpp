// Schedules and the instruction DAG.
#include "perseus/schedule/schedule.hpp"

#include <gtest/gtest.h>

#include <string>

#include "perseus/schedule/catalog.hpp"
#include "perseus/schedule/dag.hpp"
#include "perseus/util/error.hpp"

namespace perseus::schedule {
namespace {

std::string render(const std::vector<Instruction>& list) {
  std::string out;
  for (const auto& inst : list) {
    if (!out.empty()) out += " ";
    out += (inst.type == InstructionType::kForward ? "F" : "B") + std::to_string(inst.microbatch);
  }
  return out;
}

TEST(Schedule, OneFOneBMatchesDeepSpeedOrdering) {
  Schedule s = make_1f1b(4, 8);
  EXPECT_EQ(render(s.ranks[0]), "F0 F1 F2 F3 B0 F4 B1 F5 B2 F6 B3 F7 B4 B5 B6 B7");
  EXPECT_EQ(render(s.ranks[3]), "F0 B0 F1 B1 F2 B2 F3 B3 F4 B4 F5 B5 F6 B6 F7 B7");
  EXPECT_EQ(render(s.ranks[1]), "F0 F1 F2 B0 F3 B1 F4 B2 F5 B3 F6 B4 F7 B5 B6 B7");
}

TEST(Schedule, OneFOneBWithFewerMicrobatchesThanStages) {
  Schedule s = make_1f1b(4, 2);
  EXPECT_EQ(render(s.ranks[0]), "F0 F1 B0 B1");
  EXPECT_EQ(render(s.ranks[3]), "F0 B0 F1 B1");
}

TEST(Schedule, GPipeRunsAllForwardsThenBackwards) {
  Schedule s = make_gpipe(2, 3);
  EXPECT_EQ(render(s.ranks[0]), "F0 F1 F2 B0 B1 B2");  // torch's order
  EXPECT_EQ(render(s.ranks[1]), "F0 F1 F2 B0 B1 B2");
}

TEST(Schedule, RejectsBadSizesAndNames) {
  EXPECT_THROW(make_schedule("1f1b", 0, 4), Error);
  EXPECT_THROW(make_schedule("1f1b", 4, -1), Error);
  try {
    make_schedule("zigzag", 4, 4);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("zigzag"), std::string::npos);
  }
}

std::vector<std::vector<InstructionType>> types_of(const Schedule& s) {
  std::vector<std::vector<InstructionType>> out;
  for (const auto& stage : s.ranks) {
    out.emplace_back();
    for (const auto& inst : stage) out.back().push_back(inst.type);
  }
  return out;
}

TEST(Schedule, IdentifiesOneFOneBGPipeAndEnvelopeFromTypesAlone) {
  for (const std::string name : {"1f1b", "gpipe", "envelope:2,2,1,0"}) {
    for (int m : {4, 6, 12}) {
      Schedule want = make_schedule(name, 4, m);
      Schedule got = identify_schedule(types_of(want));
      for (int st = 0; st < 4; ++st) EXPECT_EQ(render(got.ranks[st]), render(want.ranks[st]));
      // Small M clamps warm-ups, so an envelope may come back under equivalent counts.
      if (name != "envelope:2,2,1,0" || m == 12) {
        EXPECT_EQ(got.name, name) << m;
      }
      EXPECT_EQ(got.num_microbatches, m);
      EXPECT_EQ(got.num_stages, 4);
    }
  }
  // One microbatch: every schedule runs F B; 1f1b is the first candidate.
  EXPECT_EQ(identify_schedule(types_of(make_gpipe(3, 1))).name, "1f1b");
}

TEST(Schedule, IdentifyNamesTheStageNoScheduleExplains) {
  auto types = types_of(make_1f1b(4, 6));
  std::swap(types[2][3], types[2][4]);  // stage 2: F F F F B ... is neither 1F1B nor GPipe
  types[2][5] = InstructionType::kBackward;
  try {
    identify_schedule(types);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("stage 2"), std::string::npos) << e.what();
  }
  EXPECT_THROW(identify_schedule({}), Error);
  EXPECT_THROW(identify_schedule({{InstructionType::kBackward}}), Error);
}

TEST(Dag, ReferenceSizeForEightStagesTwelveMicrobatches) {
  // The reference optimizer's DAG for this case has 194 nodes and 354 edges.
  Dag dag(make_1f1b(8, 12));
  EXPECT_EQ(dag.num_nodes(), 194);
  EXPECT_EQ(dag.num_edges(), 354u);
  EXPECT_EQ(dag.topological_order().front(), dag.source());
  EXPECT_EQ(dag.topological_order().back(), dag.sink());
}

TEST(Dag, CrossStageEdgesFollowForwardAndBackwardDependencies) {
  Schedule s = make_1f1b(3, 4);
  Dag dag(s);
  auto has_edge = [&](int u, int v) {
    for (int w : dag.successors(u)) {
      if (w == v) return true;
    }
    return false;
  };
  auto find = [&](int stage, InstructionType type, int mb) {
    for (int p = 0; p < static_cast<int>(s.ranks[stage].size()); ++p) {
      const auto& inst = s.ranks[stage][p];
      if (inst.type == type && inst.microbatch == mb) return dag.node_id(stage, p);
    }
    return -1;
  };
  for (int st = 0; st + 1 < 3; ++st) {
    for (int mb = 0; mb < 4; ++mb) {
      EXPECT_TRUE(has_edge(find(st, InstructionType::kForward, mb),
                           find(st + 1, InstructionType::kForward, mb)));
      EXPECT_TRUE(has_edge(find(st + 1, InstructionType::kBackward, mb),
                           find(st, InstructionType::kBackward, mb)));
    }
  }
  // Topological order respects every edge.
  std::vector<int> rank(dag.num_nodes());
  for (int i = 0; i < dag.num_nodes(); ++i) rank[dag.topological_order()[i]] = i;
  for (int u = 0; u < dag.num_nodes(); ++u) {
    for (int v : dag.successors(u)) EXPECT_LT(rank[u], rank[v]);
  }
}

// Slack reclamation's window updates (plan/reclaim.cpp) take a node's neighbours as a fixed array:
// an action has at most two each way, an overlapped pair three.
TEST(Dag, ActionsHaveAtMostTwoSuccessorsAndTwoPredecessors) {
  for (std::string name : schedule_names()) {
    if (name == "envelope") name = "envelope:7,6,5,4,3,2,1,0";
    for (int microbatches : {8, 12, 16}) {
      SCOPED_TRACE(name + " M=" + std::to_string(microbatches));
      const Dag dag(make_schedule(name, 8, microbatches));
      int pairs = 0;  // actions with two successors: the bound is reached
      for (int v = 1; v < dag.sink(); ++v) {
        const std::size_t most = dag.node(v).instruction.overlapped() ? 3u : 2u;
        EXPECT_LE(dag.successors(v).size(), most);
        EXPECT_LE(dag.predecessors(v).size(), most);
        pairs += dag.successors(v).size() == 2;
      }
      EXPECT_GT(pairs, 0);
    }
  }
}

TEST(Dag, RejectsDuplicateInstructionAndCycle) {
  Schedule dup = make_1f1b(2, 2);
  dup.ranks[0][1] = dup.ranks[0][0];
  EXPECT_THROW(Dag{dup}, Error);
  // A backward before its own forward on the same stage.
  Schedule early = make_1f1b(2, 1);
  std::swap(early.ranks[1][0], early.ranks[1][1]);
  EXPECT_THROW(Dag{early}, Error);
  // Stage 0 waits for B0 before F1, stage 1 needs F1 before B0: a deadlock.
  Schedule cyc = make_1f1b(2, 2);
  cyc.ranks[0] = {{InstructionType::kForward, 0},
                  {InstructionType::kBackward, 0},
                  {InstructionType::kForward, 1},
                  {InstructionType::kBackward, 1}};
  cyc.ranks[1] = {{InstructionType::kForward, 0, 1},
                  {InstructionType::kForward, 1, 1},
                  {InstructionType::kBackward, 0, 1},
                  {InstructionType::kBackward, 1, 1}};
  try {
    Dag dag(cyc);
    FAIL() << "expected a deadlock error";
  } catch (const Error& e) {
    // Rank 0 waits at B0 for stage 1's B0, which waits behind F1, which needs rank 0's F1.
    EXPECT_NE(std::string(e.what()).find("deadlocks: waiting forever are rank 0 at 0B0, rank 1 at "
                                         "1F1"),
              std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace perseus::schedule
