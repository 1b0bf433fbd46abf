// The frontier solver's steps (plan/solver_impl.hpp): arc bounds from the cost models, the
// critical network and its minimum cut (reused while the network is unchanged, warm-started
// from the last flow), and how many unit steps one cut makes.
#include <algorithm>
#include <limits>

#include "perseus/plan/solver_impl.hpp"

namespace perseus::plan::detail {

void Solver::tabulate_bounds() {
  std::vector<std::size_t> first;  // per model
  for (const CostModel& c : p_.models) {
    first.push_back(bound_.size());
    const std::size_t begin = bound_.size();
    for (long d = c.min_duration(); d <= c.max_duration(); ++d) {
      double lb = 0.0, ub = kInfinity;
      if (d > c.min_duration()) ub = std::abs(c(d - 1) - c(d));
      if (d < c.max_duration()) lb = std::abs(c(d) - c(d + 1));
      if (d > c.min_duration() && d < c.max_duration()) ub += kFpError;
      bound_.emplace_back(round_down(lb), round_down(ub));
    }
    const std::size_t end = bound_.size();
    run_down_.resize(end, 1);
    run_up_.resize(end, 1);
    for (std::size_t k = begin + 1; k < end; ++k) {
      if (bound_[k] == bound_[k - 1]) run_down_[k] = run_down_[k - 1] + 1;
    }
    for (std::size_t k = end - 1; k-- > begin;) {
      if (bound_[k] == bound_[k + 1]) run_up_[k] = run_up_[k + 1] + 1;
    }
  }
  span_.assign(static_cast<std::size_t>(n_), Span{});
  for (int v = 1; v < dag_.sink(); ++v) {
    const CostModel& c = p_.model(v);
    span_[v] = {c.min_duration(), c.max_duration(),
                first[static_cast<std::size_t>(p_.node_spec[v])],
                c.min_duration() == c.max_duration()};
  }
}

std::pair<double, double> Solver::bounds(int v) const {
  if (is_dummy(v)) return {0.0, kInfinity};
  return bound_[row(v)];
}

int Solver::list_critical(std::vector<Arc>& net, std::vector<std::size_t>* keys) {
  net.clear();
  if (keys) keys->clear();
  in_id_.assign(static_cast<std::size_t>(n_), -1);
  critical_.clear();
  int ids = 0;
  for (int v = 0; v < n_; ++v) {
    if (es_[v] + d_[v] == lf_[v]) in_id_[v] = ids, ids += 2, critical_.push_back(v);
  }
  for (int v : critical_) {
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
  return ids;
}

bool Solver::list_network() {
  std::swap(net_, previous_net_);
  std::swap(arc_key_, previous_key_);
  ids_ = list_critical(net_, &arc_key_);
  same_arcs_ = !options_.per_unit && cuts_ > 0 && net_.size() == previous_net_.size();
  bool same_bounds = same_arcs_;
  for (std::size_t i = 0; same_arcs_ && i < net_.size(); ++i) {
    const Arc &a = net_[i], &b = previous_net_[i];
    same_arcs_ = a.u == b.u && a.v == b.v;
    same_bounds = same_bounds && a.lb == b.lb && a.ub == b.ub;
  }
  return same_arcs_ && same_bounds;
}

void Solver::build_network() {
  if (same_arcs_) {
    // Only bounds moved (as every step with a model whose marginal costs change at every
    // unit): update the last network in place, starting from its own flow.
    for (std::size_t i = 0; i < net_.size(); ++i) {
      const int arc = static_cast<int>(i);
      const double flow = cut_.flow(arc);
      cut_.set_bounds(arc, net_[i].lb, net_[i].ub);
      cut_.set_start_flow(arc, flow);
    }
    return;
  }
  if (options_.per_unit) {
    cut_.assign(ids_, net_);
    return;
  }
  keep_flow();  // before cut_ takes the new network
  cut_.assign(ids_, net_);
  for (std::size_t i = 0; i < net_.size(); ++i) {
    if (flow_cut_[arc_key_[i]] == cuts_)
      cut_.set_start_flow(static_cast<int>(i), flow_[arc_key_[i]]);
  }
}

void Solver::keep_flow() {
  if (cuts_ == 0 || status_ != BoundedMinCut::Status::kFinite) return;
  // previous_net_ has the arcs of the last solved network (a network equal to it is not solved
  // again), so cut_ holds their flows.
  for (std::size_t i = 0; i < previous_key_.size(); ++i) {
    flow_[previous_key_[i]] = cut_.flow(static_cast<int>(i));
    flow_cut_[previous_key_[i]] = cuts_;
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
    build_network();
    status_ = cut_.solve(in_id_[dag_.source()], in_id_[dag_.sink()] + 1);
    ++cuts_;
  }
  if (status_ == BoundedMinCut::Status::kInfinite) {
    out_.stop_reason = "every critical path has an instruction that cannot run faster";
    return false;
  }
  if (status_ == BoundedMinCut::Status::kInfeasible) {
    out_.stop_reason = "no feasible flow: the cost model is not convex at the current durations";
    return false;
  }
  for (int v : critical_) {
    bool in_s = cut_.source_side(in_id_[v]), out_s = cut_.source_side(in_id_[v] + 1);
    if (in_s && !out_s) faster.push_back(v);
    if (!in_s && out_s && !is_dummy(v) && d_[v] < span_[v].max_d) slower.push_back(v);
  }
  for (int v : faster) {
    if (is_dummy(v) || d_[v] <= span_[v].min_d) {
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
  for (int v : faster) cap = std::min(cap, run_down_[row(v)]);
  for (int v : slower) cap = std::min(cap, run_up_[row(v)]);
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

}  // namespace perseus::plan::detail
