// perseus::plan::BoundedMinCut on hand-made networks (chain, parallel paths, a lower bound
// crossing the cut backwards, an infeasible and an infinite case), its warm start from another
// flow, and reuse of one object across networks via assign(), each answer checked against the
// oracles of maxflow_oracles.hpp.
#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "maxflow_oracles.hpp"
#include "perseus/plan/maxflow.hpp"

namespace {

using namespace perseus::test::maxflow;

// ----- hand-made networks -------------------------------------------------------------------

TEST(BoundedMinCut, SimpleChain) {
  // s -> 1 -> 2 -> t: the bottleneck is the last arc.
  Network net{4, 0, 3, {{0, 1, 0.5, 2.0}, {1, 2, 1.0, 3.0}, {2, 3, 0.0, 1.5}}};
  BoundedMinCut cut;
  ASSERT_EQ(run(cut, net), Status::kFinite);
  EXPECT_DOUBLE_EQ(cut.cut_value(), 1.5);
  EXPECT_TRUE(cut.source_side(1));
  EXPECT_TRUE(cut.source_side(2));
  for (int a = 0; a < 3; ++a) EXPECT_NEAR(cut.flow(a), 1.5, 1e-12);
  check_finite_solution(cut, net);
}

TEST(BoundedMinCut, TwoParallelPaths) {
  // s -> 1 -> t carries 1, s -> 2 -> t carries 3.
  Network net{4, 0, 3, {{0, 1, 0.0, 2.0}, {1, 3, 0.0, 1.0}, {0, 2, 0.0, 3.0}, {2, 3, 0.0, 4.0}}};
  BoundedMinCut cut;
  ASSERT_EQ(run(cut, net), Status::kFinite);
  EXPECT_DOUBLE_EQ(cut.cut_value(), 4.0);
  EXPECT_TRUE(cut.source_side(1));   // 1 -> t is saturated
  EXPECT_FALSE(cut.source_side(2));  // s -> 2 is saturated
  EXPECT_NEAR(cut.flow(1), 1.0, 1e-12);
  EXPECT_NEAR(cut.flow(2), 3.0, 1e-12);
  check_finite_solution(cut, net);
}

TEST(BoundedMinCut, LowerBoundCrossingTheCutBackwards) {
  // a -> b must carry 0.5, which then competes for b -> t: max flow 1.5, reached by the cut
  // S = {s, b} whose capacity is ub(s->a) + ub(b->t) - lb(a->b).
  Network net{
      4,
      0,
      3,
      {{0, 1, 0.0, 1.0}, {0, 2, 0.0, 1.0}, {1, 2, 0.5, 5.0}, {1, 3, 0.0, 10.0}, {2, 3, 0.0, 1.0}}};
  BoundedMinCut cut;
  ASSERT_EQ(run(cut, net), Status::kFinite);
  EXPECT_NEAR(cut.cut_value(), 1.5, 1e-12);
  EXPECT_NEAR(brute_force(net).min_cut, 1.5, 1e-12);
  check_finite_solution(cut, net);
}

TEST(BoundedMinCut, InfeasibleLowerBound) {
  // a -> b must carry at least 2, but b -> t, the only arc leaving b, carries at most 1.
  Network net{4, 0, 3, {{0, 1, 0.0, 5.0}, {1, 2, 2.0, 3.0}, {2, 3, 0.0, 1.0}}};
  BoundedMinCut cut;
  EXPECT_EQ(run(cut, net), Status::kInfeasible);
  EXPECT_FALSE(boost_oracle(net).feasible);
  // Raising the outlet's capacity makes it feasible, with the outlet as the cut.
  net.arcs[2].ub = 2.5;
  ASSERT_EQ(run(cut, net), Status::kFinite);
  EXPECT_NEAR(cut.cut_value(), 2.5, 1e-12);
  check_finite_solution(cut, net);
}

TEST(BoundedMinCut, InfinitePath) {
  // s -> a -> t with infinite upper bounds (one with a lower bound) beside a finite arc.
  Network net{3, 0, 2, {{0, 1, 0.0, kInfinity}, {1, 2, 1.0, kInfinity}, {0, 2, 0.0, 1.0}}};
  BoundedMinCut cut;
  EXPECT_EQ(run(cut, net), Status::kInfinite);
  // Breaking the infinite path with one finite arc makes the cut finite and puts it there.
  Network broken{
      4,
      0,
      3,
      {{0, 1, 0.0, kInfinity}, {1, 2, 0.25, 2.0}, {2, 3, 0.0, kInfinity}, {0, 3, 0.0, 1.0}}};
  ASSERT_EQ(run(cut, broken), Status::kFinite);
  EXPECT_NEAR(cut.cut_value(), 3.0, 1e-12);
  EXPECT_TRUE(cut.source_side(1));
  EXPECT_FALSE(cut.source_side(2));
  check_finite_solution(cut, broken);
}

TEST(BoundedMinCut, NoArcs) {
  Network net{2, 0, 1, {}};
  BoundedMinCut cut;
  ASSERT_EQ(run(cut, net), Status::kFinite);
  EXPECT_EQ(cut.cut_value(), 0.0);
  check_finite_solution(cut, net);
}

// The solver's warm start: a network solved once, its bounds moved (set_bounds) and solved
// again from the first flow (set_start_flow, clamped to the new bounds), gives the status, cut
// value and source side of a fresh solve of the moved network (the source side of a minimum cut
// is the same for every maximum flow), and a valid flow.
TEST(BoundedMinCut, WarmStartFromAnotherFlowGivesTheFreshCut) {
  std::mt19937 rng(1616);
  int warm = 0;
  for (int c = 0; c < 200; ++c) {
    Network net = random_network(rng, 4, 12, /*dyadic=*/true, /*back_arcs=*/c % 4 == 3);
    BoundedMinCut cut;
    if (run(cut, net) != Status::kFinite) continue;
    std::vector<double> flows;
    for (int a = 0; a < cut.num_arcs(); ++a) flows.push_back(cut.flow(a));
    Network moved = net;
    std::uniform_real_distribution<double> unit(0.0, 1.0);
    for (std::size_t a = 0; a < moved.arcs.size(); ++a) {
      if (unit(rng) < 0.3) {
        moved.arcs[a] = random_arc(rng, moved.arcs[a].u, moved.arcs[a].v, true, {0.7, 0.2});
      }
      cut.set_bounds(static_cast<int>(a), moved.arcs[a].lb, moved.arcs[a].ub);
      cut.set_start_flow(static_cast<int>(a), flows[a]);
    }
    SCOPED_TRACE("case " + std::to_string(c) + ": " + describe(moved));
    BoundedMinCut fresh;
    Status expected = run(fresh, moved);
    Status got = cut.solve(moved.s, moved.t);
    ASSERT_EQ(status_name(got), std::string(status_name(expected)));
    if (expected != Status::kFinite) continue;  // no cut to compare
    ++warm;
    for (int v = 0; v < moved.n; ++v) EXPECT_EQ(cut.source_side(v), fresh.source_side(v)) << v;
    EXPECT_TRUE(near(cut.cut_value(), fresh.cut_value()));
    check_finite_solution(cut, moved);
  }
  EXPECT_GE(warm, 30);
}

TEST(BoundedMinCut, ReuseAcrossNetworksMatchesFreshObjects) {
  std::vector<Network> nets = {
      {4, 0, 3, {{0, 1, 0.5, 2.0}, {1, 2, 1.0, 3.0}, {2, 3, 0.0, 1.5}}},
      {4, 0, 3, {{0, 1, 0.0, 5.0}, {1, 2, 2.0, 3.0}, {2, 3, 0.0, 1.0}}},  // infeasible
      {3, 0, 2, {{0, 1, 0.0, kInfinity}, {1, 2, 1.0, kInfinity}}},        // infinite
      {4,
       0,
       3,
       {{0, 1, 0.0, 1.0}, {0, 2, 0.0, 1.0}, {1, 2, 0.5, 5.0}, {1, 3, 0.0, 10.0}, {2, 3, 0.0, 1.0}}},
  };
  std::mt19937 rng(99);
  for (int i = 0; i < 40; ++i) {
    // Alternate large and small networks so that the reused buffers shrink and grow.
    nets.push_back(
        random_network(rng, i % 2 == 0 ? 10 : 3, i % 2 == 0 ? 12 : 5, false, i % 5 == 0));
  }
  BoundedMinCut reused;
  for (int pass = 0; pass < 2; ++pass) {
    for (std::size_t i = 0; i < nets.size(); ++i) {
      const Network& net = nets[i];
      SCOPED_TRACE("network " + std::to_string(i) + ": " + describe(net));
      BoundedMinCut fresh;
      Status expected = run(fresh, net);
      Status got = run(reused, net);
      ASSERT_EQ(status_name(got), std::string(status_name(expected)));
      for (int v = 0; v < net.n; ++v) EXPECT_EQ(reused.source_side(v), fresh.source_side(v));
      if (expected != Status::kFinite) continue;
      EXPECT_EQ(reused.cut_value(), fresh.cut_value());
      for (int a = 0; a < fresh.num_arcs(); ++a) EXPECT_EQ(reused.flow(a), fresh.flow(a));
      check_finite_solution(reused, net);
    }
  }
}

}  // namespace

namespace perseus::plan {
namespace {

TEST(BoundedMinCut, SolvingTwiceAndAssigningAfterASolveGiveFreshAnswers) {
  BoundedMinCut c;
  std::vector<BoundedMinCut::Arc> arcs = {{0, 1, 0.0, 2.0}, {1, 2, 0.0, 1.0}};
  c.assign(3, arcs);
  ASSERT_EQ(c.solve(0, 2), BoundedMinCut::Status::kFinite);
  ASSERT_EQ(c.solve(0, 2), BoundedMinCut::Status::kFinite);
  EXPECT_DOUBLE_EQ(c.cut_value(), 1.0);
  EXPECT_DOUBLE_EQ(c.flow(0), 1.0);
  EXPECT_DOUBLE_EQ(c.flow(1), 1.0);
  arcs.push_back({0, 2, 0.5, 3.0});  // a parallel path, after a solve
  c.assign(3, arcs);
  ASSERT_EQ(c.solve(0, 2), BoundedMinCut::Status::kFinite);
  EXPECT_DOUBLE_EQ(c.cut_value(), 4.0);
  EXPECT_DOUBLE_EQ(c.flow(2), 3.0);
  arcs.push_back({1, 2, 0.0, kInfinity});
  c.assign(3, arcs);
  EXPECT_EQ(c.solve(0, 2), BoundedMinCut::Status::kFinite);
  EXPECT_DOUBLE_EQ(c.cut_value(), 5.0);
  c.assign(2, {});  // a smaller network, no arcs: nothing left of the last one
  EXPECT_EQ(c.solve(0, 1), BoundedMinCut::Status::kFinite);
  EXPECT_DOUBLE_EQ(c.cut_value(), 0.0);
  EXPECT_FALSE(c.source_side(1));
}

}  // namespace
}  // namespace perseus::plan
