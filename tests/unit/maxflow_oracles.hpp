// Independent oracles and random networks for the perseus::plan::BoundedMinCut tests
// (maxflow_test.cpp, maxflow_cases_test.cpp): Boost.Graph push-relabel on the textbook
// lower-bound transformation (bounds in integer ticks of 1/16), brute force over every node
// subset for tiny networks, the structural checks every answer must pass, and random layered
// networks like the solver's critical subgraphs.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <boost/graph/adjacency_list.hpp>
#include <boost/graph/push_relabel_max_flow.hpp>
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "perseus/plan/maxflow.hpp"

namespace perseus::test::maxflow {

using perseus::plan::BoundedMinCut;
using perseus::plan::kInfinity;
using Status = BoundedMinCut::Status;

using Arc = BoundedMinCut::Arc;

struct Network {
  int n = 0, s = 0, t = 0;
  std::vector<Arc> arcs;
};

inline std::string describe(const Network& net) {
  std::string out = "n=" + std::to_string(net.n) + " s=" + std::to_string(net.s) +
                    " t=" + std::to_string(net.t) + " arcs:";
  for (const Arc& a : net.arcs) {
    out += " " + std::to_string(a.u) + "->" + std::to_string(a.v) + "[" + std::to_string(a.lb) +
           "," + (std::isfinite(a.ub) ? std::to_string(a.ub) : std::string("inf")) + "]";
  }
  return out;
}

inline const char* status_name(Status s) {
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

inline bool near(double a, double b, double rel = 1e-9) {
  return std::abs(a - b) <= rel * (1.0 + std::max(std::abs(a), std::abs(b)));
}

inline Status run(BoundedMinCut& cut, const Network& net) {
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

inline std::int64_t ticks(double x) {
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
inline bool infinite_path(const Network& net) {
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

inline OracleAnswer boost_oracle(const Network& net) {
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

inline BruteAnswer brute_force(const Network& net) {
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
inline void check_finite_solution(const BoundedMinCut& cut, const Network& net) {
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
inline Arc random_arc(std::mt19937& rng, int u, int v, bool dyadic, const ArcMix& mix) {
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
inline Network random_network(std::mt19937& rng, int min_n, int max_n, bool dyadic,
                              bool back_arcs) {
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

}  // namespace perseus::test::maxflow
