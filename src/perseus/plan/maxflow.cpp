#include "perseus/plan/maxflow.hpp"

#include <algorithm>
#include <cmath>

namespace perseus::plan {

void BoundedMinCut::assign(int num_nodes, const std::vector<Arc>& arcs) {
  n_ = num_nodes;
  head_.assign(static_cast<std::size_t>(num_nodes) + 2, -1);
  has_auxiliary_ = false;
  const std::size_t m = arcs.size();
  lb_.resize(m);
  ub_.resize(m);
  from_.resize(m);
  res_.resize(2 * m);
  for (std::size_t k = 0; k < m; ++k) {
    const Arc& a = arcs[k];
    lb_[k] = a.lb;
    ub_[k] = a.ub;
    from_[k] = a.u;
    link_residual_pair(static_cast<int>(2 * k), a.u, a.v, 0.0);  // capacity is set in solve()
  }
  start_ = lb_;
}

void BoundedMinCut::drop_auxiliary_arcs() {
  if (!has_auxiliary_) return;
  // Each auxiliary arc went to the front of its tail's list: unlink them latest first.
  const std::size_t user = 2 * lb_.size();
  for (std::size_t e = res_.size(); e-- > user;) head_[res_[e ^ 1].to] = res_[e].next;
  res_.resize(user);
  has_auxiliary_ = false;
}

void BoundedMinCut::link_residual_pair(int e, int u, int v, double cap) {
  res_[static_cast<std::size_t>(e)] = {v, head_[u], cap};
  head_[u] = e;
  res_[static_cast<std::size_t>(e) + 1] = {u, head_[v], 0.0};
  head_[v] = e + 1;
}

int BoundedMinCut::add_residual_pair(int u, int v, double cap) {
  const int e = static_cast<int>(res_.size());
  res_.resize(res_.size() + 2);
  link_residual_pair(e, u, v, cap);
  return e;
}

BoundedMinCut::Status BoundedMinCut::solve(int s, int t) {
  drop_auxiliary_arcs();  // from an earlier solve() of the same network
  const int arcs = num_arcs();
  finite_ = false;
  // A finite stand-in for infinity: larger than any finite cut.
  double finite_total = 1.0;
  for (int a = 0; a < arcs; ++a) {
    finite_total += lb_[a];
    if (std::isfinite(ub_[a])) finite_total += ub_[a];
  }
  const double big = 2.0 * finite_total;
  eps_ = 1e-12 * finite_total;
  // The start flow f0 within the bounds; its imbalance becomes demands served by a super source
  // and sink.
  excess_.assign(static_cast<std::size_t>(n_), 0.0);
  for (int a = 0; a < arcs; ++a) {
    double ub = std::isfinite(ub_[a]) ? ub_[a] : big;
    double f0 = std::clamp(start_[a], lb_[a], ub);
    Residual& forward = res_[2 * static_cast<std::size_t>(a)];
    forward.cap = ub - f0;
    res_[2 * static_cast<std::size_t>(a) + 1].cap = f0 - lb_[a];
    excess_[forward.to] += f0;
    excess_[from_[a]] -= f0;
  }
  const int ss = n_, tt = n_ + 1;
  const std::size_t aux_begin = res_.size();
  has_auxiliary_ = true;
  double demand = 0.0;
  // An imbalance within eps_ (a warm start's rounding) would get an arc that no search or
  // augmentation could use (both skip capacities <= eps_): it gets none.
  for (int v = 0; v < n_; ++v) {
    if (excess_[v] > eps_)
      add_residual_pair(ss, v, excess_[v]), demand += excess_[v];
    else if (excess_[v] < -eps_)
      add_residual_pair(v, tt, -excess_[v]);
  }
  int ret = add_residual_pair(t, s, big);
  double feasible = max_flow(ss, tt);
  if (feasible < demand - 1e-9 * (1.0 + demand)) {
    mark_reachable(s);
    return Status::kInfeasible;
  }
  double circulated = res_[static_cast<std::size_t>(ret) + 1].cap;
  for (std::size_t e = aux_begin; e < res_.size(); ++e) res_[e].cap = 0.0;  // drop ss, tt, t->s
  double value = circulated + max_flow(s, t);
  // max_flow's last search found t unreachable, so its levels mark what s reaches (every
  // auxiliary arc is closed): the source side, without another search. A cut through an arc of
  // infinite bound carries at least big - (sum of lower bounds) > big / 2; any other cut, at most
  // the sum of finite bounds < big / 2.
  finite_ = value < big * 0.5;
  return finite_ ? Status::kFinite : Status::kInfinite;
}

double BoundedMinCut::cut_value() const {
  if (!finite_) return kInfinity;
  double value = 0.0;
  for (int a = 0; a < num_arcs(); ++a) {
    bool from_s = source_side(from_[a]);
    bool to_s = source_side(res_[2 * static_cast<std::size_t>(a)].to);
    if (from_s && !to_s) value += ub_[a];
    if (!from_s && to_s) value -= lb_[a];
  }
  return value;
}

double BoundedMinCut::max_flow(int s, int t) {
  double total = 0.0;
  iter_.resize(head_.size());
  while (build_levels(s, t)) {
    std::copy(head_.begin(), head_.end(), iter_.begin());
    total += augment(s, t, kInfinity);
  }
  return total;
}

void BoundedMinCut::bfs_levels(int s, int t, int nodes) {
  level_.assign(head_.size(), -1);
  queue_.clear();
  level_[s] = 0;
  queue_.push_back(s);
  for (std::size_t i = 0; i < queue_.size(); ++i) {
    int u = queue_[i];
    // Nodes at t's level or beyond cannot be on a shortest augmenting path.
    if (t >= 0 && level_[t] >= 0 && level_[u] >= level_[t]) break;
    for (int e = head_[u]; e != -1; e = res_[e].next) {
      const int v = res_[e].to;
      if (v < nodes && res_[e].cap > eps_ && level_[v] < 0) {
        level_[v] = level_[u] + 1;
        queue_.push_back(v);
      }
    }
  }
}

bool BoundedMinCut::build_levels(int s, int t) {
  bfs_levels(s, t, static_cast<int>(head_.size()));
  return level_[t] >= 0;
}

double BoundedMinCut::augment(int u, int t, double limit) {
  if (u == t) return limit;
  double total = 0.0;
  for (int& e = iter_[u]; e != -1; e = res_[e].next) {
    Residual& r = res_[e];
    if (r.cap <= eps_ || level_[r.to] != level_[u] + 1) continue;
    const double pushed = augment(r.to, t, std::min(limit - total, r.cap));
    if (pushed > eps_) {
      r.cap -= pushed;
      res_[e ^ 1].cap += pushed;
      total += pushed;
      // Stay on this arc while it has capacity: the next call may push more through it.
      if (limit - total <= eps_) return total;
    }
  }
  return total;
}

void BoundedMinCut::mark_reachable(int s) {
  bfs_levels(s, -1, n_);
}

}  // namespace perseus::plan
