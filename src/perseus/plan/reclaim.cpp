#include "perseus/plan/reclaim.hpp"

#include <algorithm>
#include <bit>
#include <cstdint>

namespace perseus::plan {

namespace {

// A set of positions 0..n-1 that hands out its lowest member below a limit or its highest above
// one (a 64-bit word per 64 positions, scanned from the lowest or highest word that may be
// non-empty).
class PositionSet {
 public:
  void reset(int n) {
    words_.assign(static_cast<std::size_t>(n + 63) / 64, 0);
    low_ = static_cast<long>(words_.size());
    high_ = -1;
  }
  void insert(int i) {
    const long w = i / 64;
    words_[static_cast<std::size_t>(w)] |= std::uint64_t{1} << (i % 64);
    low_ = std::min(low_, w);
    high_ = std::max(high_, w);
  }
  // Removes and returns the lowest member below `limit`; -1 when there is none.
  int take_lowest_below(int limit) {
    for (; low_ < static_cast<long>(words_.size()); ++low_) {
      std::uint64_t& word = words_[static_cast<std::size_t>(low_)];
      if (word == 0) continue;
      const int i = static_cast<int>(low_ * 64) + std::countr_zero(word);
      if (i >= limit) return -1;
      word &= word - 1;
      return i;
    }
    return -1;
  }
  // Removes and returns the highest member above `limit`; -1 when there is none.
  int take_highest_above(int limit) {
    for (; high_ >= 0; --high_) {
      std::uint64_t& word = words_[static_cast<std::size_t>(high_)];
      if (word == 0) continue;
      const int bit = 63 - std::countl_zero(word);
      const int i = static_cast<int>(high_ * 64) + bit;
      if (i <= limit) return -1;
      word &= ~(std::uint64_t{1} << bit);
      return i;
    }
    return -1;
  }

 private:
  std::vector<std::uint64_t> words_;
  long low_ = 0, high_ = -1;
};

// Adjacency in compressed rows.
struct Rows {
  std::vector<int> offset, target;
  void add_row() { offset.push_back(static_cast<int>(target.size())); }
  const int* begin(int i) const { return target.data() + offset[i]; }
  const int* end(int i) const { return target.data() + offset[i + 1]; }
};

struct Candidate {
  double saving_per_s;
  int at;  // position
  bool operator<(const Candidate& o) const { return saving_per_s < o.saving_per_s; }
};

}  // namespace

// Everything is indexed by topological position (source 0, sink n - 1).
struct SlackReclaimer::State {
  int n = 0;
  double blocking_power_w = 0.0;
  std::vector<int> node;                                     // of each position
  std::vector<int> position;                                 // of each node
  std::vector<const std::vector<profile::Option>*> options;  // null for source and sink
  Rows successors, predecessors;

  std::vector<int> option;
  std::vector<double> time, es, lf;
  OptionCosts costs;                     // per node, as load() reads them
  std::vector<double> node_es, node_lf;  // per node
  double tolerance = 0.0;
  std::vector<Candidate> queue;  // a max-heap on saving per second
  // Positions whose finish (start) has not yet been passed to their successors (predecessors).
  PositionSet starts_to_pass, finishes_to_pass;

  const profile::Option& at(int i, int k) const { return (*options[i])[k]; }
  bool fits(int i, double t) const { return es[i] + t <= lf[i] + tolerance; }
  void load(const PlanProblem& problem, const std::vector<int>& node_option);
  void push_candidate(int i);
  void settle_start(int i);
  void settle_finish(int i);
  void reclaim();
};

SlackReclaimer::SlackReclaimer(const PlanProblem& problem)
    : problem_(problem), s_(std::make_unique<State>()) {
  const schedule::Dag& dag = problem.dag;
  State& s = *s_;
  s.n = dag.num_nodes();
  s.blocking_power_w = problem.settings.blocking_power_w;
  s.node = dag.topological_order();
  s.position.resize(static_cast<std::size_t>(s.n));
  std::vector<int>& position = s.position;
  for (int i = 0; i < s.n; ++i) position[s.node[i]] = i;
  for (int i = 0; i < s.n; ++i) {
    const int v = s.node[i];
    s.options.push_back(dag.is_instruction(v) ? &problem.options(v).options : nullptr);
    s.successors.add_row();
    for (int w : dag.successors(v)) s.successors.target.push_back(position[w]);
    s.predecessors.add_row();
    for (int u : dag.predecessors(v)) s.predecessors.target.push_back(position[u]);
  }
  s.successors.add_row();
  s.predecessors.add_row();
}

SlackReclaimer::~SlackReclaimer() = default;

void SlackReclaimer::run(std::vector<int>& option) {
  State& s = *s_;
  s.load(problem_, option);
  s.reclaim();
  for (int i = 1; i + 1 < s.n; ++i) option[s.node[i]] = s.option[i];
}

// Windows from schedule::critical_windows on node ids, then moved to positions.
void SlackReclaimer::State::load(const PlanProblem& problem, const std::vector<int>& node_option) {
  option_costs(problem, node_option, costs);
  schedule::critical_windows(problem.dag, costs.time, node_es, node_lf);
  option.assign(static_cast<std::size_t>(n), 0);
  time.assign(option.size(), 0.0);
  es.assign(option.size(), 0.0);
  lf.assign(option.size(), 0.0);
  for (int i = 0; i < n; ++i) {
    const int v = node[i];
    option[i] = node_option[v];
    time[i] = costs.time[v];
    es[i] = node_es[v];
    lf[i] = node_lf[v];
  }
}

void SlackReclaimer::State::push_candidate(int i) {
  if (option[i] == 0) return;
  const auto& now = at(i, option[i]);
  const auto& slower = at(i, option[i] - 1);
  double extra = slower.time_s - now.time_s;
  if (extra <= 0.0) return;
  // Effective energy saved: instruction energy plus the blocking power no longer drawn.
  double saving = now.energy_j - slower.energy_j + blocking_power_w * extra;
  if (saving > 0.0) {
    queue.push_back({saving / extra, i});
    std::push_heap(queue.begin(), queue.end());
  }
}

void SlackReclaimer::State::settle_start(int i) {
  for (int u; (u = starts_to_pass.take_lowest_below(i)) >= 0;) {
    const double finish = es[u] + time[u];
    for (const int* w = successors.begin(u); w != successors.end(u); ++w) {
      if (finish > es[*w]) es[*w] = finish, starts_to_pass.insert(*w);
    }
  }
}

void SlackReclaimer::State::settle_finish(int i) {
  for (int w; (w = finishes_to_pass.take_highest_above(i)) >= 0;) {
    const double start = lf[w] - time[w];
    for (const int* u = predecessors.begin(w); u != predecessors.end(w); ++u) {
      if (start < lf[*u]) lf[*u] = start, finishes_to_pass.insert(*u);
    }
  }
}

void SlackReclaimer::State::reclaim() {
  tolerance = 1e-12 * std::max(1.0, es[n - 1]);
  starts_to_pass.reset(n);
  finishes_to_pass.reset(n);
  queue.clear();
  // In node order: candidates of equal saving then leave the heap in the same order as always.
  for (int v = 1; v + 1 < n; ++v) push_candidate(position[v]);
  while (!queue.empty()) {
    std::pop_heap(queue.begin(), queue.end());
    const int i = queue.back().at;
    queue.pop_back();
    const double slower = at(i, option[i] - 1).time_s;
    if (!fits(i, slower)) continue;  // windows only shrink: a stale miss is a miss
    settle_start(i);
    settle_finish(i);
    if (!fits(i, slower)) continue;
    --option[i];
    time[i] = slower;
    starts_to_pass.insert(i);
    finishes_to_pass.insert(i);
    push_candidate(i);
  }
}

void reclaim_slack(const PlanProblem& problem, std::vector<int>& option) {
  SlackReclaimer(problem).run(option);
}

}  // namespace perseus::plan
