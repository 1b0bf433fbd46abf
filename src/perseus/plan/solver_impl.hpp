// Private to the frontier solver (plan/solver.hpp): its state, shared by solver.cpp (times,
// recording the frontier, the main loop) and solver_steps.cpp (the critical network, its minimum
// cut, and how many unit steps one cut makes).
#pragma once

#include <cmath>
#include <deque>
#include <utility>
#include <vector>

#include "perseus/plan/maxflow.hpp"
#include "perseus/plan/reclaim_pool.hpp"
#include "perseus/plan/solver.hpp"

namespace perseus::plan::detail {

// Marginal costs are rounded down to this resolution, and an instruction that can move both
// ways gets this much slack on its upper bound (as the published optimizer does).
inline constexpr double kFpError = 1e-6;

inline double round_down(double x) {
  return std::isfinite(x) ? profile::python_floordiv(x, kFpError) * kFpError : x;
}

class Solver {
 public:
  Solver(const PlanProblem& problem, const SolverOptions& options)
      : p_(problem),
        options_(options),
        dag_(problem.dag),
        n_(problem.dag.num_nodes()),
        pool_(problem, options.threads) {
    tabulate_bounds();
    flow_.assign(static_cast<std::size_t>(n_) + dag_.num_edges(), 0.0);
    flow_cut_.assign(flow_.size(), -1);
  }

  Frontier run(const ProgressFn& progress);

 private:
  using Arc = BoundedMinCut::Arc;

  // Per node: its duration range and where its model's rows start in the tables of
  // tabulate_bounds(); a dummy (source, sink, or a single duration) has no arc bounds.
  struct Span {
    long min_d = 0, max_d = 0;
    std::size_t first = 0;
    bool dummy = true;
  };
  bool is_dummy(int v) const { return span_[v].dummy; }
  // Index of node v's current duration in the tables.
  std::size_t row(int v) const {
    return span_[v].first + static_cast<std::size_t>(d_[v] - span_[v].min_d);
  }
  void set_all(bool fastest);
  void compute_times();
  // Lists the critical network (nodes, arcs and bounds) into net_; true when it equals the
  // previous step's, whose minimum cut then still holds (the algorithm is deterministic).
  bool list_network();
  // The critical network of the current durations and times into `net` (with each arc's key
  // into `keys` when given); numbers the critical nodes in in_id_ and returns how many network
  // ids that takes (two per critical node).
  int list_critical(std::vector<Arc>& net, std::vector<std::size_t>* keys);
  // Fills the minimum-cut network from net_, starting from the last cut's flows.
  void build_network();
  // Keeps the last solved network's flow per key before cut_ takes another network, so that
  // arcs in both start from it.
  void keep_flow();
  // The arc bounds of every cost model at every duration (bounds() reads them), and span_.
  void tabulate_bounds();
  std::pair<double, double> bounds(int v) const;
  // The instructions the current minimum cut speeds up and slows down by one unit; false (and the
  // stop reason set) when no step is possible.
  bool cut_step(std::vector<int>& faster, std::vector<int>& slower);
  // How many unit steps the same cut makes (Phillips-Dessouky with constant marginal costs): as
  // long as no instruction it moves reaches another bound (a breakpoint of its cost model) and
  // no other path becomes critical. 1 for models whose marginal costs change at every unit.
  long run_length(const std::vector<int>& faster, const std::vector<int>& slower);
  // Whether the critical network after `steps` more steps of this cut (faster nodes `steps`
  // units shorter, slower ones longer) is still net_. Leaves the times of that state.
  bool network_holds(const std::vector<int>& faster, const std::vector<int>& slower, long steps);
  void apply(const std::vector<int>& faster, const std::vector<int>& slower,
             std::vector<std::pair<int, int>>& changes);
  void change(int v, int delta, std::vector<std::pair<int, int>>& changes);
  // Records the point of the current durations; `changes` are the nodes moved since the last.
  // Its slack reclamation goes to pool_; the point is appended by finish_points.
  void record(const std::vector<std::pair<int, int>>& changes);
  // Appends recorded points in order: every one when `all`, else while more than a few per
  // thread are in flight (none with one thread).
  void finish_points(bool all);
  // Appends the point of the realized options `point.option` (becomes option_).
  void append_point(RealizedPoint point, long quant_time, double predicted_energy_j);
  // When the fastest point takes longer in real time than every instruction at its fastest
  // option, appends the same durations realized without slowdown (plan/no_slowdown.hpp).
  void append_no_slowdown_point();

  const PlanProblem& p_;
  const SolverOptions options_;
  const schedule::Dag& dag_;
  const int n_;
  std::vector<long> d_, es_, lf_;
  long total_ = 0;
  double cost_sum_ = 0.0;
  std::vector<int> option_;  // the last appended point's option index per node
  std::vector<int> clocks_;  // realized clock per instruction
  std::vector<int> in_id_;   // network id of a critical node's entry; exit is in_id_ + 1
  int ids_ = 0;              // network ids of net_
  std::vector<Arc> net_, previous_net_;  // this step's and the last step's critical network
  bool same_arcs_ = false;               // net_ has previous_net_'s arcs (bounds may differ)
  std::vector<int> critical_;            // critical nodes, as list_critical() numbered them
  std::vector<Arc> probe_net_;           // network_holds()'s
  // Per arc of net_: its key in flow_ (a node's own arc: the node; an edge: n_ + its edge id).
  std::vector<std::size_t> arc_key_, previous_key_;
  // The last minimum cut's flow per key, and the cut number it is from (a warm start for the
  // next cut; keys that were not in that network start at their lower bound).
  std::vector<double> flow_;
  std::vector<long> flow_cut_;
  BoundedMinCut::Status status_ = BoundedMinCut::Status::kFinite;  // of the last solve
  long cuts_ = 0;                                                  // minimum cuts solved
  std::vector<int> realized_;                     // per node: option index before slack reclamation
  std::vector<Span> span_;                        // per node
  std::vector<std::pair<double, double>> bound_;  // [row]: arc bounds
  // [row]: how many durations from d down (up) share d's bounds, d included.
  std::vector<long> run_down_, run_up_;
  BoundedMinCut cut_;
  ReclaimPool pool_;
  // Recorded points not yet appended, in order: with a ticket of pool_, or -1 for a point that
  // realizes the same clocks as the one before it.
  struct Recorded {
    long ticket;
    long quant_time;
    double predicted_energy_j;
  };
  std::deque<Recorded> recorded_;
  long num_recorded_ = 0;
  Frontier out_;
};

}  // namespace perseus::plan::detail
