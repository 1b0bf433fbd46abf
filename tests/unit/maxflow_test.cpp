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
//   - hand-made networks (chain, parallel paths, a lower bound crossing the cut backwards, an
//     infeasible and an infinite case) and reuse of one object across networks via assign().
#include "perseus/plan/maxflow.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <boost/graph/adjacency_list.hpp>
#include <boost/graph/push_relabel_max_flow.hpp>
#include <cmath>
#include <cstdint>
#include <iostream>
#include <random>
#include <string>
#include <vector>

namespace {

using perseus::plan::BoundedMinCut;
using perseus::plan::kInfinity;
using Status = BoundedMinCut::Status;

using Arc = BoundedMinCut::Arc;

struct Network {
  int n = 0, s = 0, t = 0;
  std::vector<Arc> arcs;
};

std::string describe(const Network& net) {
  std::string out = "n=" + std::to_string(net.n) + " s=" + std::to_string(net.s) +
                    " t=" + std::to_string(net.t) + " arcs:";
  for (const Arc& a : net.arcs) {
    out += " " + std::to_string(a.u) + "->" + std::to_string(a.v) + "[" + std::to_string(a.lb) +
           "," + (std::isfinite(a.ub) ? std::to_string(a.ub) : std::string("inf")) + "]";
  }
  return out;
}

const char* status_name(Status s) {
  switch (s) {
    case Status::kFinite:
      return "finite";
    case Status::kInfinite:
      return "infinite";
    case Status::kInfeasible:
      return "infeasible";
  }
  return "?";
}

bool near(double a, double b, double rel = 1e-9) {
  return std::abs(a - b) <= rel * (1.0 + std::max(std::abs(a), std::abs(b)));
}

Status run(BoundedMinCut& cut, const Network& net) {
  cut.assign(net.n, net.arcs);
  return cut.solve(net.s, net.t);
}

// ----- Boost oracle (integer ticks of 1/kTicks) --------------------------------------------

constexpr int kTicks = 16;

using Traits = boost::adjacency_list_traits<boost::vecS, boost::vecS, boost::directedS>;
using Graph = boost::adjacency_list<
    boost::vecS, boost::vecS, boost::directedS, boost::no_property,
    boost::property<
        boost::edge_capacity_t, std::int64_t,
        boost::property<boost::edge_residual_capacity_t, std::int64_t,
                        boost::property<boost::edge_reverse_t, Traits::edge_descriptor>>>>;

// A flow network for boost::push_relabel_max_flow: every added arc gets a reverse twin.
class BoostNet {
 public:
  explicit BoostNet(int n) : g_(static_cast<std::size_t>(n)) {}

  int add(int u, int v, std::int64_t capacity) {
    auto cap = boost::get(boost::edge_capacity, g_);
    auto rev = boost::get(boost::edge_reverse, g_);
    auto e = boost::add_edge(u, v, g_).first;
    auto r = boost::add_edge(v, u, g_).first;
    cap[e] = capacity;
    cap[r] = 0;
    rev[e] = r;
    rev[r] = e;
    arcs_.push_back(e);
    return static_cast<int>(arcs_.size()) - 1;
  }
  std::int64_t max_flow(int s, int t) {
    return boost::push_relabel_max_flow(g_, static_cast<std::size_t>(s),
                                        static_cast<std::size_t>(t));
  }
  std::int64_t flow(int arc) const {
    auto e = arcs_[static_cast<std::size_t>(arc)];
    return boost::get(boost::edge_capacity, g_, e) -
           boost::get(boost::edge_residual_capacity, g_, e);
  }
  std::int64_t residual(int arc) const {
    return boost::get(boost::edge_residual_capacity, g_, arcs_[static_cast<std::size_t>(arc)]);
  }

 private:
  Graph g_;
  std::vector<Traits::edge_descriptor> arcs_;
};

std::int64_t ticks(double x) {
  double scaled = x * kTicks;
  std::int64_t r = std::llround(scaled);
  EXPECT_EQ(static_cast<double>(r), scaled) << "oracle needs bounds that are multiples of 1/16";
  return r;
}

struct OracleAnswer {
  bool feasible = false;
  bool infinite = false;
  double value = 0.0;  // maximum s-t flow value when feasible and finite
};

// Whether t is reachable from s through arcs with infinite upper bound: then (and only then)
// every s-t cut has an infinite arc going forward.
bool infinite_path(const Network& net) {
  std::vector<char> seen(static_cast<std::size_t>(net.n), 0);
  std::vector<int> stack = {net.s};
  seen[net.s] = 1;
  while (!stack.empty()) {
    int u = stack.back();
    stack.pop_back();
    for (const Arc& a : net.arcs) {
      if (a.u == u && std::isinf(a.ub) && !seen[a.v]) seen[a.v] = 1, stack.push_back(a.v);
    }
  }
  return seen[net.t] != 0;
}

OracleAnswer boost_oracle(const Network& net) {
  std::int64_t finite_total = 1;
  for (const Arc& a : net.arcs) {
    finite_total += ticks(a.lb);
    if (std::isfinite(a.ub)) finite_total += ticks(a.ub);
  }
  const std::int64_t big = 4 * finite_total;
  // Phase 1: feasible circulation.
  const int ss = net.n, tt = net.n + 1;
  BoostNet phase1(net.n + 2);
  std::vector<std::int64_t> excess(static_cast<std::size_t>(net.n), 0);
  for (const Arc& a : net.arcs) {
    std::int64_t lb = ticks(a.lb);
    std::int64_t ub = std::isfinite(a.ub) ? ticks(a.ub) : big;
    phase1.add(a.u, a.v, ub - lb);
    excess[a.v] += lb;
    excess[a.u] -= lb;
  }
  std::int64_t demand = 0;
  for (int v = 0; v < net.n; ++v) {
    if (excess[v] > 0) phase1.add(ss, v, excess[v]), demand += excess[v];
    if (excess[v] < 0) phase1.add(v, tt, -excess[v]);
  }
  const int ret = phase1.add(net.t, net.s, big);
  OracleAnswer answer;
  answer.feasible = phase1.max_flow(ss, tt) == demand;
  if (!answer.feasible) return answer;
  answer.infinite = infinite_path(net);
  if (answer.infinite) return answer;
  // Phase 2: augment s -> t on the residual of the original arcs (return arc and super arcs
  // dropped): every arc contributes its forward residual and its flow as reverse capacity.
  BoostNet phase2(net.n);
  for (int i = 0; i < static_cast<int>(net.arcs.size()); ++i) {
    const Arc& a = net.arcs[static_cast<std::size_t>(i)];
    phase2.add(a.u, a.v, phase1.residual(i));
    phase2.add(a.v, a.u, phase1.flow(i));
  }
  std::int64_t value = phase1.flow(ret) + phase2.max_flow(net.s, net.t);
  answer.value = static_cast<double>(value) / kTicks;
  return answer;
}

// ----- brute force (tiny networks, arbitrary real bounds) ----------------------------------

struct BruteAnswer {
  bool feasible = false;
  bool ambiguous = false;  // a Hoffman condition holds with (near) equality: skip the case
  double min_cut = kInfinity;
};

BruteAnswer brute_force(const Network& net) {
  BruteAnswer answer;
  answer.feasible = true;
  const unsigned subsets = 1u << net.n;
  // Hoffman: a circulation (including the return arc t->s with bounds [0, inf]) exists iff for
  // every node set X, the lower bounds entering X do not exceed the upper bounds leaving X.
  for (unsigned x = 1; x + 1 < subsets; ++x) {
    auto in = [&](int v) { return ((x >> v) & 1u) != 0; };
    if (in(net.t) && !in(net.s)) continue;  // the return arc leaves X with infinite capacity
    double lb_in = 0.0, ub_out = 0.0;
    for (const Arc& a : net.arcs) {
      if (!in(a.u) && in(a.v)) lb_in += a.lb;
      if (in(a.u) && !in(a.v)) ub_out += a.ub;
    }
    if (lb_in > ub_out + 1e-9) answer.feasible = false;
    if (lb_in > 0.0 && std::abs(lb_in - ub_out) <= 1e-9) answer.ambiguous = true;
  }
  // Minimum over cuts with s on the source side and t on the sink side.
  for (unsigned x = 0; x < subsets; ++x) {
    auto in = [&](int v) { return ((x >> v) & 1u) != 0; };
    if (!in(net.s) || in(net.t)) continue;
    double value = 0.0;
    for (const Arc& a : net.arcs) {
      if (in(a.u) && !in(a.v)) value += a.ub;
      if (!in(a.u) && in(a.v)) value -= a.lb;
    }
    answer.min_cut = std::min(answer.min_cut, value);
  }
  return answer;
}

// ----- structural checks --------------------------------------------------------------------

// For a kFinite answer: the cut is an s-t cut whose capacity is cut_value(), and the flow is
// feasible, conserved and of value cut_value() (max-flow = min-cut).
void check_finite_solution(const BoundedMinCut& cut, const Network& net) {
  SCOPED_TRACE(describe(net));
  ASSERT_TRUE(cut.source_side(net.s));
  ASSERT_FALSE(cut.source_side(net.t));
  ASSERT_TRUE(std::isfinite(cut.cut_value()));
  double capacity = 0.0;
  for (const Arc& a : net.arcs) {
    bool from_s = cut.source_side(a.u), to_s = cut.source_side(a.v);
    if (from_s && !to_s) capacity += a.ub;
    if (!from_s && to_s) capacity -= a.lb;
  }
  EXPECT_TRUE(near(capacity, cut.cut_value())) << capacity << " vs " << cut.cut_value();
  std::vector<double> net_out(static_cast<std::size_t>(net.n), 0.0);
  double scale = 1.0;
  for (int i = 0; i < static_cast<int>(net.arcs.size()); ++i) {
    const Arc& a = net.arcs[static_cast<std::size_t>(i)];
    double f = cut.flow(i);
    scale += std::abs(f);
    EXPECT_GE(f, a.lb - 1e-9) << "arc " << i;
    EXPECT_LE(f, a.ub + 1e-9) << "arc " << i;
    net_out[a.u] += f;
    net_out[a.v] -= f;
  }
  for (int v = 0; v < net.n; ++v) {
    if (v == net.s || v == net.t) continue;
    EXPECT_NEAR(net_out[v], 0.0, 1e-9 * scale) << "conservation at node " << v;
  }
  EXPECT_NEAR(net_out[net.s], cut.cut_value(), 1e-9 * scale) << "flow value out of s";
  EXPECT_NEAR(-net_out[net.t], cut.cut_value(), 1e-9 * scale) << "flow value into t";
}

// ----- random networks ----------------------------------------------------------------------

// Per-network mix of bounds: how often an arc has no lower bound and how often no upper bound.
struct ArcMix {
  double p_zero_lb, p_infinite_ub;
};

// Bounds in ticks of 1/16 when `dyadic`, otherwise arbitrary reals: lb in [0, 1], ub = lb +
// [0, 2], with lb = 0 and ub = inf as often as `mix` says.
Arc random_arc(std::mt19937& rng, int u, int v, bool dyadic, const ArcMix& mix) {
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  Arc a{u, v, 0.0, 0.0};
  double lb_draw = unit(rng), extra_draw = unit(rng);
  if (dyadic) {
    lb_draw = std::floor(lb_draw * (kTicks + 1)) / kTicks;            // 0 .. 1
    extra_draw = std::floor(extra_draw * (2 * kTicks + 1)) / kTicks;  // 0 .. 2
  } else {
    extra_draw *= 2.0;
  }
  a.lb = unit(rng) < mix.p_zero_lb ? 0.0 : lb_draw;
  a.ub = unit(rng) < mix.p_infinite_ub ? kInfinity : a.lb + extra_draw;
  return a;
}

// Layered network: s = 0 in layer 0, t = n-1 in the last layer, inner nodes spread over the
// layers between; arcs mostly go one layer forward, some skip layers, every inner node has an
// arc in from an earlier layer and out to a later one (as in the solver's critical subgraphs),
// and with `back_arcs` a few arcs go backwards (the class takes any digraph).
Network random_network(std::mt19937& rng, int min_n, int max_n, bool dyadic, bool back_arcs) {
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  static const ArcMix kMixes[] = {{0.9, 0.1}, {0.6, 0.2}, {0.35, 0.3}, {0.8, 0.6}, {0.5, 0.75}};
  const ArcMix& mix = kMixes[std::uniform_int_distribution<int>(0, 4)(rng)];
  Network net;
  net.n = std::uniform_int_distribution<int>(min_n, max_n)(rng);
  net.s = 0;
  net.t = net.n - 1;
  int inner_layers = std::uniform_int_distribution<int>(1, std::max(1, net.n - 2))(rng);
  std::vector<int> layer(static_cast<std::size_t>(net.n), 0);
  for (int v = 1; v < net.n - 1; ++v) {
    layer[v] = std::uniform_int_distribution<int>(1, inner_layers)(rng);
  }
  layer[net.t] = inner_layers + 1;
  std::vector<char> has_in(static_cast<std::size_t>(net.n), 0), has_out(has_in);
  auto add = [&](int u, int v) {
    net.arcs.push_back(random_arc(rng, u, v, dyadic, mix));
    if (layer[v] > layer[u]) has_out[u] = 1, has_in[v] = 1;
  };
  for (int u = 0; u < net.n; ++u) {
    for (int v = 0; v < net.n; ++v) {
      if (u == v) continue;
      int gap = layer[v] - layer[u];
      double p = gap == 1 ? 0.5 : gap > 1 ? 0.12 : (back_arcs && gap < 0 ? 0.05 : 0.0);
      if (unit(rng) < p) add(u, v);
    }
  }
  auto pick = [&](auto accept) {  // a random node whose layer passes `accept`
    std::vector<int> candidates;
    for (int w = 0; w < net.n; ++w) {
      if (accept(layer[w])) candidates.push_back(w);
    }
    return candidates[std::uniform_int_distribution<std::size_t>(0, candidates.size() - 1)(rng)];
  };
  for (int v = 1; v < net.n - 1; ++v) {
    if (!has_in[v]) add(pick([&](int l) { return l < layer[v]; }), v);
    if (!has_out[v]) add(v, pick([&](int l) { return l > layer[v]; }));
  }
  return net;
}

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
