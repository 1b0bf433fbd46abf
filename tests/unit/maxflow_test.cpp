// Checks perseus::plan::BoundedMinCut (minimum s-t cut with lower and upper flow bounds per arc)
// against independent oracles:
//   - Boost.Graph push-relabel max flow run on the textbook lower-bound transformation (super
//     source/sink carrying the lower-bound demands, an infinite t->s return arc; feasible iff the
//     super-source arcs saturate; max flow = flow on t->s + augmenting s-t flow on the residual),
//     on random layered networks whose bounds are multiples of 1/16 (exact integer arithmetic);
//   - brute force over every node subset for tiny networks with arbitrary real bounds: Hoffman's
//     circulation theorem for feasibility and the minimum of ub(S->T) - lb(T->S) over all cuts;
//   - structural checks on every answer: s on the source side and t not, cut_value() equal to
//     the capacity of the cut read back from source_side(), and flow(arc) within [lb, ub],
//     conserved at every inner node and of net value cut_value() out of s;
//   - hand-made networks, warm starts and reuse of one object: maxflow_cases_test.cpp.
#include "perseus/plan/maxflow.hpp"

#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "maxflow_oracles.hpp"

namespace {

using namespace perseus::test::maxflow;

TEST(BoundedMinCut, RandomLayeredNetworksMatchBoostOracle) {
  std::mt19937 rng(20240611);
  int counts[3] = {0, 0, 0};
  BoundedMinCut cut;
  for (int c = 0; c < 300; ++c) {
    Network net = random_network(rng, 4, 12, /*dyadic=*/true, /*back_arcs=*/c % 4 == 3);
    SCOPED_TRACE("case " + std::to_string(c) + ": " + describe(net));
    OracleAnswer oracle = boost_oracle(net);
    Status status = run(cut, net);
    ++counts[static_cast<int>(status)];
    if (!oracle.feasible) {
      EXPECT_EQ(status_name(status), std::string("infeasible"));
      continue;
    }
    if (oracle.infinite) {
      EXPECT_EQ(status_name(status), std::string("infinite"));
      continue;
    }
    ASSERT_EQ(status_name(status), std::string("finite"));
    EXPECT_TRUE(near(cut.cut_value(), oracle.value))
        << "cut_value " << cut.cut_value() << ", Boost " << oracle.value;
    check_finite_solution(cut, net);
    if (net.n <= 8) {
      BruteAnswer brute = brute_force(net);
      EXPECT_TRUE(brute.feasible);
      EXPECT_TRUE(near(cut.cut_value(), brute.min_cut))
          << "cut_value " << cut.cut_value() << ", brute force " << brute.min_cut;
    }
  }
  std::cout << "[ BoundedMinCut ] finite " << counts[0] << ", infinite " << counts[1]
            << ", infeasible " << counts[2] << "\n";
  // The generator must exercise every outcome.
  EXPECT_GE(counts[0], 60);
  EXPECT_GE(counts[1], 20);
  EXPECT_GE(counts[2], 20);
}

TEST(BoundedMinCut, TinyRealValuedNetworksMatchBruteForce) {
  std::mt19937 rng(7);
  int counts[3] = {0, 0, 0};
  int skipped = 0;
  BoundedMinCut cut;
  for (int c = 0; c < 400; ++c) {
    Network net = random_network(rng, 3, 8, /*dyadic=*/false, /*back_arcs=*/c % 3 == 2);
    SCOPED_TRACE("case " + std::to_string(c) + ": " + describe(net));
    BruteAnswer brute = brute_force(net);
    if (brute.ambiguous) {
      ++skipped;
      continue;
    }
    Status status = run(cut, net);
    ++counts[static_cast<int>(status)];
    if (!brute.feasible) {
      EXPECT_EQ(status_name(status), std::string("infeasible"));
      continue;
    }
    if (std::isinf(brute.min_cut)) {
      EXPECT_EQ(status_name(status), std::string("infinite"));
      continue;
    }
    ASSERT_EQ(status_name(status), std::string("finite"));
    EXPECT_TRUE(near(cut.cut_value(), brute.min_cut))
        << "cut_value " << cut.cut_value() << ", brute force " << brute.min_cut;
    check_finite_solution(cut, net);
  }
  std::cout << "[ BoundedMinCut ] finite " << counts[0] << ", infinite " << counts[1]
            << ", infeasible " << counts[2] << ", skipped (ties) " << skipped << "\n";
  EXPECT_GE(counts[0], 80);
  EXPECT_GE(counts[1], 20);
  EXPECT_GE(counts[2], 20);
}

}  // namespace
