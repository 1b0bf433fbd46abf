#include "perseus/plan/solver.hpp"

#include <algorithm>
#include <cmath>

#include "perseus/plan/maxflow.hpp"
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
  explicit Solver(const PlanProblem& problem)
      : p_(problem), dag_(problem.dag), n_(problem.dag.num_nodes()) {
    tabulate_bounds();
  }

  Frontier run(const ProgressFn& progress);

 private:
  bool is_dummy(int v) const {
    return !dag_.is_instruction(v) || p_.model(v).min_duration() == p_.model(v).max_duration();
  }
  void set_all(bool fastest);
  void compute_times();
  // Lists the critical network (nodes, arcs and bounds) into net_; true when it equals the
  // previous step's, whose minimum cut then still holds (the algorithm is deterministic).
  bool list_network();
  void build_network();
  // The arc bounds of every cost model at every duration (bounds() reads them).
  void tabulate_bounds();
  std::pair<double, double> bounds(int v) const;
  // Applies one minimum cut; returns false (and sets the stop reason) when no step is possible.
  bool step(std::vector<std::pair<int, int>>& changes);
  void change(int v, int delta, std::vector<std::pair<int, int>>& changes);
  // Appends the point of the current durations; `changes` are the nodes moved since the last.
  void record(const std::vector<std::pair<int, int>>& changes);

  const PlanProblem& p_;
  const schedule::Dag& dag_;
  const int n_;
  std::vector<long> d_, es_, lf_;
  long total_ = 0;
  double cost_sum_ = 0.0;
  std::vector<double> time_, energy_;  // of the realized plan, per node
  std::vector<int> option_;            // realized option index per node
  std::vector<int> clocks_;            // realized clock per instruction
  std::vector<int> in_id_;             // network id of a critical node's entry; exit is in_id_ + 1
  struct Arc {
    int u, v;
    double lb, ub;
    bool operator==(const Arc&) const = default;
  };
  std::vector<Arc> net_, previous_net_;  // this step's and the last solved critical network
  std::vector<char> side_;               // per network id: source side of the last minimum cut
  BoundedMinCut::Status status_ = BoundedMinCut::Status::kFinite;  // of the last solve
  long cuts_ = 0;                                                  // minimum cuts solved
  std::vector<int> realized_;  // per node: option index before slack reclamation
  std::vector<std::vector<std::pair<double, double>>> bound_table_;  // [spec][d - min]
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
  for (std::size_t i = 0; i < p_.models.size(); ++i) {
    const CostModel& c = p_.models[i];
    for (long d = c.min_duration(); d <= c.max_duration(); ++d) {
      double lb = 0.0, ub = kInfinity;
      if (d > c.min_duration()) ub = std::abs(c(d - 1) - c(d));
      if (d < c.max_duration()) lb = std::abs(c(d) - c(d + 1));
      if (d > c.min_duration() && d < c.max_duration()) ub += kFpError;
      bound_table_[i].emplace_back(round_down(lb), round_down(ub));
    }
  }
}

std::pair<double, double> Solver::bounds(int v) const {
  if (is_dummy(v)) return {0.0, kInfinity};
  return bound_table_[static_cast<std::size_t>(p_.node_spec[v])]
                     [static_cast<std::size_t>(d_[v] - p_.model(v).min_duration())];
}

bool Solver::list_network() {
  std::swap(net_, previous_net_);
  net_.clear();
  in_id_.assign(static_cast<std::size_t>(n_), -1);
  int ids = 0;
  for (int v = 0; v < n_; ++v) {
    if (es_[v] + d_[v] == lf_[v]) in_id_[v] = ids, ids += 2;
  }
  for (int v = 0; v < n_; ++v) {
    if (in_id_[v] < 0) continue;
    auto [lb, ub] = bounds(v);
    net_.push_back({in_id_[v], in_id_[v] + 1, lb, ub});
    for (int w : dag_.successors(v)) {
      if (in_id_[w] >= 0 && es_[v] + d_[v] == lf_[w] - d_[w]) {
        net_.push_back({in_id_[v] + 1, in_id_[w], 0.0, kInfinity});
      }
    }
  }
  return cuts_ > 0 && net_ == previous_net_ && side_.size() == static_cast<std::size_t>(ids);
}

void Solver::build_network() {
  cut_.reset(static_cast<int>(side_.size()));
  for (const Arc& a : net_) cut_.add_arc(a.u, a.v, a.lb, a.ub);
}

void Solver::change(int v, int delta, std::vector<std::pair<int, int>>& changes) {
  const CostModel& c = p_.model(v);
  cost_sum_ += c(d_[v] + delta) - c(d_[v]);
  d_[v] += delta;
  changes.emplace_back(v, delta);
}

bool Solver::step(std::vector<std::pair<int, int>>& changes) {
  if (!list_network()) {
    int ids = 0;
    for (int id : in_id_) ids = std::max(ids, id + 2);
    side_.assign(static_cast<std::size_t>(ids), 0);
    build_network();
    status_ = cut_.solve(in_id_[dag_.source()], in_id_[dag_.sink()] + 1);
    ++cuts_;
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
  std::vector<int> faster, slower;
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
  for (int v : faster) change(v, -1, changes);
  for (int v : slower) change(v, +1, changes);
  return true;
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
  Evaluation ev = evaluate_nodes(dag_, p_.schedule.num_ranks(), time_, energy_, s.blocking_power_w);
  out_.points.push_back({total_, cost_sum_ + blocking, ev.time_s, ev.energy_j});
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
    std::vector<std::pair<int, int>> changes;
    long before = total_;
    if (!step(changes)) break;
    compute_times();
    record(changes);
    out_.steps.push_back(std::move(changes));
    if (total_ >= before) {
      out_.stop_reason = "a step did not shorten the iteration";
      break;
    }
    if (progress) progress(out_.slowest_time - total_, expected);
  }
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

Frontier solve_frontier(const PlanProblem& problem, const ProgressFn& progress) {
  return Solver(problem).run(progress);
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
