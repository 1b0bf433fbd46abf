#include "perseus/plan/reclaim.hpp"

#include <algorithm>

namespace perseus::plan {

namespace {

class Reclaimer {
 public:
  Reclaimer(const PlanProblem& problem, std::vector<int>& option)
      : p_(problem), dag_(problem.dag), option_(option), n_(problem.dag.num_nodes()) {}

  void run();

 private:
  const profile::Option& at(int v, int k) const { return p_.options(v).options[k]; }
  void compute_windows();
  void push_candidate(int v);
  void raise_starts(int v);
  void lower_finishes(int v);

  struct Candidate {
    double saving_per_s;
    int node;
    bool operator<(const Candidate& o) const { return saving_per_s < o.saving_per_s; }
  };

  const PlanProblem& p_;
  const schedule::Dag& dag_;
  std::vector<int>& option_;
  const int n_;
  std::vector<double> time_, es_, lf_;
  std::vector<int> work_;
  std::vector<Candidate> queue_;  // a max-heap on saving per second
};

void Reclaimer::compute_windows() {
  time_.assign(static_cast<std::size_t>(n_), 0.0);
  for (int v = 1; v < dag_.sink(); ++v) time_[v] = at(v, option_[v]).time_s;
  schedule::critical_windows(dag_, time_, es_, lf_);
}

void Reclaimer::push_candidate(int v) {
  if (option_[v] == 0) return;
  const auto& now = at(v, option_[v]);
  const auto& slower = at(v, option_[v] - 1);
  double extra = slower.time_s - now.time_s;
  if (extra <= 0.0) return;
  // Effective energy saved: instruction energy plus the blocking power no longer drawn.
  double saving = now.energy_j - slower.energy_j + p_.settings.blocking_power_w * extra;
  if (saving > 0.0) {
    queue_.push_back({saving / extra, v});
    std::push_heap(queue_.begin(), queue_.end());
  }
}

void Reclaimer::raise_starts(int v) {
  work_.assign(1, v);
  while (!work_.empty()) {
    int u = work_.back();
    work_.pop_back();
    for (int w : dag_.successors(u)) {
      if (es_[u] + time_[u] > es_[w]) {
        es_[w] = es_[u] + time_[u];
        work_.push_back(w);
      }
    }
  }
}

void Reclaimer::lower_finishes(int v) {
  work_.assign(1, v);
  while (!work_.empty()) {
    int w = work_.back();
    work_.pop_back();
    for (int u : dag_.predecessors(w)) {
      if (lf_[w] - time_[w] < lf_[u]) {
        lf_[u] = lf_[w] - time_[w];
        work_.push_back(u);
      }
    }
  }
}

void Reclaimer::run() {
  compute_windows();
  const double tolerance = 1e-12 * std::max(1.0, es_[dag_.sink()]);
  for (int v = 1; v < dag_.sink(); ++v) push_candidate(v);
  while (!queue_.empty()) {
    std::pop_heap(queue_.begin(), queue_.end());
    int v = queue_.back().node;
    queue_.pop_back();
    double slower = at(v, option_[v] - 1).time_s;
    if (es_[v] + slower > lf_[v] + tolerance) continue;
    --option_[v];
    time_[v] = slower;
    raise_starts(v);
    lower_finishes(v);
    push_candidate(v);
  }
}

}  // namespace

void reclaim_slack(const PlanProblem& problem, std::vector<int>& option) {
  Reclaimer(problem, option).run();
}

}  // namespace perseus::plan
