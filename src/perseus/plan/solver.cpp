#include "perseus/plan/solver.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include "perseus/plan/maxflow.hpp"
#include "perseus/plan/no_slowdown.hpp"
#include "perseus/plan/reclaim.hpp"

namespace perseus::plan {

namespace {

// Marginal costs are rounded down to this resolution, and an instruction that can move both
// ways gets this much slack on its upper bound (as the published optimizer does).
constexpr double kFpError = 1e-6;

double round_down(double x) {
  return std::isfinite(x) ? profile::python_floordiv(x, kFpError) * kFpError : x;
}

class Solver {
 public:
  Solver(const PlanProblem& problem, const SolverOptions& options)
      : p_(problem), options_(options), dag_(problem.dag), n_(problem.dag.num_nodes()) {
    tabulate_bounds();
    flow_.assign(static_cast<std::size_t>(n_) + dag_.num_edges(), 0.0);
    flow_cut_.assign(flow_.size(), -1);
  }

  Frontier run(const ProgressFn& progress);

 private:
  struct Arc {
    int u, v;
    double lb, ub;
    bool operator==(const Arc&) const = default;
  };

  bool is_dummy(int v) const {
    return !dag_.is_instruction(v) || p_.model(v).min_duration() == p_.model(v).max_duration();
  }
  void set_all(bool fastest);
  void compute_times();
  // Lists the critical network (nodes, arcs and bounds) into net_; true when it equals the
  // previous step's, whose minimum cut then still holds (the algorithm is deterministic).
  bool list_network();
  // The critical network of the current durations and times into `net` (with each arc's key
  // into `keys` when given); numbers the critical nodes in in_id_.
  void list_critical(std::vector<Arc>& net, std::vector<std::size_t>* keys);
  // Fills the minimum-cut network from net_, starting from the last cut's flows.
  void build_network();
  // Keeps the solved flow of every arc for the next cut's warm start.
  void keep_flow();
  // The arc bounds of every cost model at every duration (bounds() reads them).
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
  // Appends the point of the current durations; `changes` are the nodes moved since the last.
  void record(const std::vector<std::pair<int, int>>& changes);
  // Appends the point of the realized options option_ (after slack reclamation).
  void append_point(double predicted_energy_j);
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
  std::vector<double> time_, energy_;  // of the realized plan, per node
  std::vector<int> option_;            // realized option index per node
  std::vector<int> clocks_;            // realized clock per instruction
  std::vector<int> in_id_;             // network id of a critical node's entry; exit is in_id_ + 1
  std::vector<Arc> net_, previous_net_;  // this step's and the last solved critical network
  std::vector<Arc> probe_net_;           // network_holds()'s
  // Per arc of net_: its key in flow_ (a node's own arc: the node; an edge: n_ + its edge id).
  std::vector<std::size_t> arc_key_;
  // The last minimum cut's flow per key, and the cut number it is from (a warm start for the
  // next cut; keys that were not in that network start at their lower bound).
  std::vector<double> flow_;
  std::vector<long> flow_cut_;
  std::vector<char> side_;  // per network id: source side of the last minimum cut
  BoundedMinCut::Status status_ = BoundedMinCut::Status::kFinite;  // of the last solve
  long cuts_ = 0;                                                  // minimum cuts solved
  std::vector<int> realized_;  // per node: option index before slack reclamation
  std::vector<std::vector<std::pair<double, double>>> bound_table_;  // [spec][d - min]
  // [spec][d - min]: how many durations from d down (up) share d's bounds, d included.
  std::vector<std::vector<long>> run_down_, run_up_;
  BoundedMinCut cut_;
  Frontier out_;
};

void Solver::set_all(bool fastest) {
  d_.assign(static_cast<std::size_t>(n_), 0);
  for (int v = 1; v < dag_.sink(); ++v) {
    d_[v] = fastest ? p_.model(v).min_duration() : p_.model(v).max_duration();
  }
}

void Solver::compute_times() {
  es_.assign(static_cast<std::size_t>(n_), 0);
  for (int v : dag_.topological_order()) {
    long start = 0;
    for (int u : dag_.predecessors(v)) start = std::max(start, es_[u] + d_[u]);
    es_[v] = start;
  }
  total_ = es_[dag_.sink()];
  lf_.assign(static_cast<std::size_t>(n_), total_);
  const auto& topo = dag_.topological_order();
  for (auto it = topo.rbegin(); it != topo.rend(); ++it) {
    long finish = total_;
    for (int w : dag_.successors(*it)) finish = std::min(finish, lf_[w] - d_[w]);
    lf_[*it] = finish;
  }
}

void Solver::tabulate_bounds() {
  bound_table_.resize(p_.models.size());
  run_down_.resize(p_.models.size());
  run_up_.resize(p_.models.size());
  for (std::size_t i = 0; i < p_.models.size(); ++i) {
    const CostModel& c = p_.models[i];
    for (long d = c.min_duration(); d <= c.max_duration(); ++d) {
      double lb = 0.0, ub = kInfinity;
      if (d > c.min_duration()) ub = std::abs(c(d - 1) - c(d));
      if (d < c.max_duration()) lb = std::abs(c(d) - c(d + 1));
      if (d > c.min_duration() && d < c.max_duration()) ub += kFpError;
      bound_table_[i].emplace_back(round_down(lb), round_down(ub));
    }
    const auto& b = bound_table_[i];
    const std::size_t size = b.size();
    run_down_[i].assign(size, 1);
    run_up_[i].assign(size, 1);
    for (std::size_t k = 1; k < size; ++k) {
      if (b[k] == b[k - 1]) run_down_[i][k] = run_down_[i][k - 1] + 1;
    }
    for (std::size_t k = size - 1; k-- > 0;) {
      if (b[k] == b[k + 1]) run_up_[i][k] = run_up_[i][k + 1] + 1;
    }
  }
}

std::pair<double, double> Solver::bounds(int v) const {
  if (is_dummy(v)) return {0.0, kInfinity};
  return bound_table_[static_cast<std::size_t>(p_.node_spec[v])]
                     [static_cast<std::size_t>(d_[v] - p_.model(v).min_duration())];
}

void Solver::list_critical(std::vector<Arc>& net, std::vector<std::size_t>* keys) {
  net.clear();
  if (keys) keys->clear();
  in_id_.assign(static_cast<std::size_t>(n_), -1);
  int ids = 0;
  for (int v = 0; v < n_; ++v) {
    if (es_[v] + d_[v] == lf_[v]) in_id_[v] = ids, ids += 2;
  }
  for (int v = 0; v < n_; ++v) {
    if (in_id_[v] < 0) continue;
    auto [lb, ub] = bounds(v);
    net.push_back({in_id_[v], in_id_[v] + 1, lb, ub});
    if (keys) keys->push_back(static_cast<std::size_t>(v));
    const auto successors = dag_.successors(v);
    for (std::size_t k = 0; k < successors.size(); ++k) {
      const int w = successors.begin()[k];
      if (in_id_[w] >= 0 && es_[v] + d_[v] == lf_[w] - d_[w]) {
        net.push_back({in_id_[v] + 1, in_id_[w], 0.0, kInfinity});
        if (keys) keys->push_back(static_cast<std::size_t>(n_) + dag_.edge_id(v, k));
      }
    }
  }
}

bool Solver::list_network() {
  std::swap(net_, previous_net_);
  list_critical(net_, &arc_key_);
  int ids = 0;
  for (int id : in_id_) ids = std::max(ids, id + 2);
  return !options_.per_unit && cuts_ > 0 && net_ == previous_net_ &&
         side_.size() == static_cast<std::size_t>(ids);
}

void Solver::build_network() {
  cut_.reset(static_cast<int>(side_.size()));
  for (std::size_t i = 0; i < net_.size(); ++i) {
    const Arc& a = net_[i];
    const int arc = cut_.add_arc(a.u, a.v, a.lb, a.ub);
    if (!options_.per_unit && flow_cut_[arc_key_[i]] == cuts_) {
      cut_.set_start_flow(arc, flow_[arc_key_[i]]);
    }
  }
}

void Solver::keep_flow() {
  for (std::size_t i = 0; i < net_.size(); ++i) {
    flow_[arc_key_[i]] = cut_.flow(static_cast<int>(i));
    flow_cut_[arc_key_[i]] = cuts_;
  }
}

void Solver::change(int v, int delta, std::vector<std::pair<int, int>>& changes) {
  const CostModel& c = p_.model(v);
  cost_sum_ += c(d_[v] + delta) - c(d_[v]);
  d_[v] += delta;
  changes.emplace_back(v, delta);
}

bool Solver::cut_step(std::vector<int>& faster, std::vector<int>& slower) {
  if (!list_network()) {
    int ids = 0;
    for (int id : in_id_) ids = std::max(ids, id + 2);
    side_.assign(static_cast<std::size_t>(ids), 0);
    build_network();
    status_ = cut_.solve(in_id_[dag_.source()], in_id_[dag_.sink()] + 1);
    ++cuts_;
    if (status_ == BoundedMinCut::Status::kFinite) keep_flow();
    for (int id = 0; id < ids; ++id) side_[id] = cut_.source_side(id) ? 1 : 0;
  }
  if (status_ == BoundedMinCut::Status::kInfinite) {
    out_.stop_reason = "every critical path has an instruction that cannot run faster";
    return false;
  }
  if (status_ == BoundedMinCut::Status::kInfeasible) {
    out_.stop_reason = "no feasible flow: the cost model is not convex at the current durations";
    return false;
  }
  for (int v = 0; v < n_; ++v) {
    if (in_id_[v] < 0) continue;
    bool in_s = side_[in_id_[v]] != 0, out_s = side_[in_id_[v] + 1] != 0;
    if (in_s && !out_s) faster.push_back(v);
    if (!in_s && out_s && !is_dummy(v) && d_[v] < p_.model(v).max_duration()) slower.push_back(v);
  }
  for (int v : faster) {
    if (is_dummy(v) || d_[v] <= p_.model(v).min_duration()) {
      out_.stop_reason = "every critical path has an instruction that cannot run faster";
      return false;
    }
  }
  if (faster.empty()) {
    out_.stop_reason = "the minimum cut speeds up no instruction";
    return false;
  }
  return true;
}

long Solver::run_length(const std::vector<int>& faster, const std::vector<int>& slower) {
  long cap = std::numeric_limits<long>::max();
  auto run = [&](const std::vector<std::vector<long>>& table, int v) {
    const std::size_t at = static_cast<std::size_t>(d_[v] - p_.model(v).min_duration());
    return table[static_cast<std::size_t>(p_.node_spec[v])][at];
  };
  for (int v : faster) cap = std::min(cap, run(run_down_, v));
  for (int v : slower) cap = std::min(cap, run(run_up_, v));
  if (cap <= 1 || options_.per_unit) return 1;
  // States 1..k-1 must keep the network; once it changes it stays changed (a path's slack is
  // linear in the steps, so the least slack through an arc is concave), so gallop, then bisect.
  long good = 0, bad = cap;
  for (long j = 1; j < cap; j *= 2) {
    if (!network_holds(faster, slower, j)) {
      bad = j;
      break;
    }
    good = j;
  }
  while (bad - good > 1) {
    const long mid = good + (bad - good) / 2;
    (network_holds(faster, slower, mid) ? good : bad) = mid;
  }
  return bad;
}

bool Solver::network_holds(const std::vector<int>& faster, const std::vector<int>& slower,
                           long steps) {
  for (int v : faster) d_[v] -= steps;
  for (int v : slower) d_[v] += steps;
  compute_times();
  list_critical(probe_net_, nullptr);
  for (int v : faster) d_[v] += steps;
  for (int v : slower) d_[v] -= steps;
  return probe_net_ == net_;
}

void Solver::apply(const std::vector<int>& faster, const std::vector<int>& slower,
                   std::vector<std::pair<int, int>>& changes) {
  for (int v : faster) change(v, -1, changes);
  for (int v : slower) change(v, +1, changes);
}

void Solver::record(const std::vector<std::pair<int, int>>& changes) {
  const auto& s = p_.settings;
  const double blocking = static_cast<double>(p_.schedule.num_ranks()) *
                          static_cast<double>(total_) * s.unit_time_s * s.blocking_power_w;
  // A step that moves no instruction to another profiled option realizes the same clocks:
  // slack reclamation and evaluation would repeat the last point's.
  bool same = !out_.points.empty();
  for (auto [v, delta] : changes) {
    const auto& options = p_.options(v).options;
    int o = static_cast<int>(&p_.options(v).realize(d_[v]) - options.data());
    if (o != realized_[v]) same = false, realized_[v] = o;
  }
  if (same) {
    FrontierPoint point = out_.points.back();
    point.quant_time = total_;
    point.predicted_energy_j = cost_sum_ + blocking;
    out_.points.push_back(point);
    out_.clock_changes.emplace_back();
    return;
  }
  option_ = realized_;
  reclaim_slack(p_, option_);
  append_point(cost_sum_ + blocking);
}

void Solver::append_point(double predicted_energy_j) {
  std::vector<std::pair<int, int>> clock_changes;
  for (int v = 1; v < dag_.sink(); ++v) {
    const profile::Option& o = p_.options(v).options[option_[v]];
    time_[v] = o.time_s;
    energy_[v] = o.energy_j;
    int& clock = clocks_[v - 1];
    if (clock != o.frequency_mhz) clock = o.frequency_mhz, clock_changes.emplace_back(v - 1, clock);
  }
  if (out_.points.empty())
    out_.initial_clocks = clocks_;
  else
    out_.clock_changes.push_back(std::move(clock_changes));
  Evaluation ev =
      evaluate_nodes(dag_, p_.schedule.num_ranks(), time_, energy_, p_.settings.blocking_power_w);
  out_.points.push_back({total_, predicted_energy_j, ev.time_s, ev.energy_j});
}

void Solver::append_no_slowdown_point() {
  const double target = fastest_iteration_time(p_);
  const FrontierPoint last = out_.points.back();
  if (last.evaluated_time_s <= target + kNoSlowdownTolerance * std::max(1.0, target)) return;
  option_ = without_slowdown(p_, option_);
  out_.steps.emplace_back();  // the same planned durations
  append_point(last.predicted_energy_j);
}

Frontier Solver::run(const ProgressFn& progress) {
  set_all(true);
  compute_times();
  out_.fastest_time = total_;
  set_all(false);
  compute_times();
  out_.slowest_time = total_;
  out_.initial_durations = d_;
  time_.assign(static_cast<std::size_t>(n_), 0.0);
  energy_.assign(time_.size(), 0.0);
  option_.assign(time_.size(), 0);
  realized_.assign(time_.size(), 0);
  clocks_.assign(static_cast<std::size_t>(n_ - 2), 0);
  std::vector<std::pair<int, int>> all;
  for (int v = 1; v < dag_.sink(); ++v) {
    cost_sum_ += p_.model(v)(d_[v]);
    all.emplace_back(v, 0);
  }
  record(all);
  const long expected = out_.slowest_time - out_.fastest_time;
  while (true) {
    std::vector<int> faster, slower;
    if (!cut_step(faster, slower)) break;
    const long start = total_, steps = run_length(faster, slower);
    // States before the last keep the network, so the iteration is one unit shorter each.
    for (long j = 1; j <= steps; ++j) {
      std::vector<std::pair<int, int>> changes;
      apply(faster, slower, changes);
      total_ = start - j;
      if (j == steps) compute_times();
      record(changes);
      out_.steps.push_back(std::move(changes));
    }
    if (total_ >= start - steps + 1) {
      out_.stop_reason = "a step did not shorten the iteration";
      break;
    }
    if (progress) progress(out_.slowest_time - total_, expected);
  }
  append_no_slowdown_point();
  out_.min_cuts = cuts_;
  return std::move(out_);
}

}  // namespace

std::vector<long> Frontier::durations(std::size_t index) const {
  std::vector<long> d = initial_durations;
  for (std::size_t i = 0; i < index && i < steps.size(); ++i) {
    for (auto [v, delta] : steps[i]) d[v] += delta;
  }
  return d;
}

std::vector<int> Frontier::clocks(std::size_t index) const {
  std::vector<int> c = initial_clocks;
  for (std::size_t i = 0; i < index && i < clock_changes.size(); ++i) {
    for (auto [pos, mhz] : clock_changes[i]) c[pos] = mhz;
  }
  return c;
}

FrequencyPlan to_frequency_plan(const schedule::Dag& dag, const std::vector<int>& clocks) {
  FrequencyPlan plan;
  for (int v = 1; v < dag.sink(); ++v) {
    const auto& node = dag.node(v);
    if (node.rank >= static_cast<int>(plan.size())) plan.resize(node.rank + 1);
    plan[node.rank].push_back(clocks[v - 1]);
  }
  return plan;
}

Frontier solve_frontier(const PlanProblem& problem, const ProgressFn& progress,
                        const SolverOptions& options) {
  return Solver(problem, options).run(progress);
}

FrequencyPlan realize(const PlanProblem& problem, const std::vector<long>& durations) {
  FrequencyPlan plan(problem.schedule.ranks.size());
  for (std::size_t s = 0; s < plan.size(); ++s) {
    plan[s].resize(problem.schedule.ranks[s].size());
  }
  for (int v = 1; v < problem.dag.sink(); ++v) {
    const auto& node = problem.dag.node(v);
    plan[node.rank][node.position] = problem.options(v).realize(durations[v]).frequency_mhz;
  }
  return plan;
}

}  // namespace perseus::plan
