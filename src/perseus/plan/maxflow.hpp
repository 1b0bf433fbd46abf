// Minimum s-t cut on a network whose arcs carry flow bounds [lb, ub] (ub may be infinite): the
// step the frontier solver runs on the critical subgraph every iteration (architecture section 5).
// Feasible flow first (from a start flow, lower bounds by default: super source/sink for its
// imbalance, t->s return arc), then a maximum flow from s to t on the residual network, then the
// source side of the cut is the set of nodes reachable from s in the residual. Dinic's algorithm;
// buffers are reused between solves so the solver never reallocates per iteration.
#pragma once

#include <limits>
#include <vector>

namespace perseus::plan {

inline constexpr double kInfinity = std::numeric_limits<double>::infinity();

class BoundedMinCut {
 public:
  enum class Status {
    kFinite,      // a minimum cut of finite capacity exists
    kInfinite,    // every s-t cut contains an arc with infinite upper bound
    kInfeasible,  // no flow satisfies the lower bounds
  };

  // An arc u->v with flow bounds [lb, ub].
  struct Arc {
    int u, v;
    double lb, ub;
    bool operator==(const Arc&) const = default;
  };

  // Starts a new network with nodes 0..num_nodes-1 and `arcs` (arc k is arcs[k]), keeping
  // allocated memory. Requires 0 <= lb <= ub for each.
  void assign(int num_nodes, const std::vector<Arc>& arcs);
  // Changes the bounds of `arc` (for solving a network again with only bounds moved); its start
  // flow becomes the new lower bound. Requires 0 <= lb <= ub.
  void set_bounds(int arc, double lb, double ub) {
    const auto a = static_cast<std::size_t>(arc);
    lb_[a] = lb;
    ub_[a] = ub;
    start_[a] = lb;
  }
  // Starts solve() from this flow on `arc` (clamped to its bounds; default lb), e.g. the flow of
  // a similar network solved before: a warm start needs fewer augmentations, and the cut is the
  // same (the source side is the set reachable from s in the residual of any maximum flow).
  void set_start_flow(int arc, double flow) { start_[static_cast<std::size_t>(arc)] = flow; }
  // Solves for a minimum cut between s and t.
  Status solve(int s, int t);

  // After solve(): whether `node` is on the source side of the minimum cut.
  bool source_side(int node) const { return level_[node] >= 0; }
  // After solve(): cut capacity = sum ub(S->T) - sum lb(T->S) = max flow value (infinity unless
  // the status is kFinite). solve() may be called again, and another network assigned, after a
  // solve().
  double cut_value() const;
  // After solve(): flow on an arc (including its lower bound).
  double flow(int arc) const {
    // Residual of the reverse arc is the flow above the lower bound.
    return lb_[arc] + res_[2 * static_cast<std::size_t>(arc) + 1].cap;
  }
  int num_arcs() const { return static_cast<int>(lb_.size()); }

 private:
  // Writes the residual arc e = u->v with capacity `cap` and its reverse e + 1 (capacity 0) and
  // puts each at the front of its tail's list.
  void link_residual_pair(int e, int u, int v, double cap);
  // Appends such a pair; returns e.
  int add_residual_pair(int u, int v, double cap);
  // Removes the super source/sink and return arcs a previous solve() added.
  void drop_auxiliary_arcs();
  double max_flow(int s, int t);
  // Breadth-first levels (level_) from s over arcs with residual capacity into nodes below
  // `nodes`; with t >= 0 it stops once t's level is complete. O(V + E).
  void bfs_levels(int s, int t, int nodes);
  // Dinic's level graph from s; false when t is unreachable.
  bool build_levels(int s, int t);
  double augment(int u, int t, double limit);
  // Marks the nodes of the user's network that s reaches in the residual network, through them
  // only, in level_ (>= 0): the source side.
  void mark_reachable(int s);

  int n_ = 0;                   // nodes of the user's network; two more are used internally
  std::vector<int> head_;       // first residual arc of each node, -1 when none
  bool has_auxiliary_ = false;  // solve() added its super source/sink and return arcs
  // Residual arcs in per-node lists; arcs 2k and 2k+1 are a pair (arc k and its reverse).
  struct Residual {
    int to;
    int next;    // next arc of the same tail, -1 at the end
    double cap;  // residual capacity
  };
  std::vector<Residual> res_;
  std::vector<double> lb_, ub_, start_;
  std::vector<int> from_, level_, iter_, queue_;
  std::vector<double> excess_;
  bool finite_ = false;  // the last solve() found a finite cut
  double eps_ = 1e-9;
};

}  // namespace perseus::plan
