#include "perseus/plan/reclaim.hpp"

#include <algorithm>
#include <array>
#include <cstdint>
#include <functional>
#include <limits>

#include "perseus/plan/evaluate.hpp"
#include "perseus/plan/exact_heap.hpp"
#include "perseus/plan/lazy_windows.hpp"

namespace perseus::plan {

namespace {

// Adjacency in compressed rows (for the full window pass), and each row of at most kNear entries
// again as a fixed array padded with `pad` (for the window updates, which then take a node's
// neighbours without a variable-length loop). An action has at most two successors and two
// predecessors (its rank's next and previous action and one data dependency each way,
// schedule/dag.hpp), an overlapped pair three (one data dependency each way per action); only
// the source's successors and the sink's predecessors are more, and their arrays are pads: no
// update starts from the source's start or the sink's finish, which never change.
constexpr int kNear = 3;
struct Rows {
  std::vector<int> offset, target;
  std::vector<std::array<int, kNear>> near;
  void add_row() { offset.push_back(static_cast<int>(target.size())); }
  // Ends the last row and fills the pairs.
  void close(int pad) {
    add_row();
    for (std::size_t i = 0; i + 1 < offset.size(); ++i) {
      const int size = offset[i + 1] - offset[i];
      std::array<int, kNear> padded;
      padded.fill(pad);
      for (int k = 0; size <= kNear && k < size; ++k) padded[k] = target[offset[i] + k];
      near.push_back(padded);
    }
  }
  const int* begin(int i) const { return target.data() + offset[i]; }
  const int* end(int i) const { return target.data() + offset[i + 1]; }
};

// A move to the next slower option, ordered by its energy saving per second of extra time (the
// rank of that saving among all moves' savings, so that equal savings compare equal).
struct Candidate {
  std::uint32_t saving_rank;
  int at;  // position
  bool operator<(const Candidate& o) const { return saving_rank < o.saving_rank; }
};

// Effective energy saved per second of extra time by moving from option k to k - 1 (the
// instruction's energy plus the blocking power no longer drawn); 0 when the move saves nothing
// or takes no extra time.
double saving_per_s(const std::vector<profile::Option>& options, std::size_t k,
                    double blocking_power_w) {
  const double extra = options[k - 1].time_s - options[k].time_s;
  if (extra <= 0.0) return 0.0;
  const double saving = options[k].energy_j - options[k - 1].energy_j + blocking_power_w * extra;
  return saving > 0.0 ? saving / extra : 0.0;
}

}  // namespace

// Everything is indexed by topological position (source 0, sink n - 1).
struct SlackReclaimer::State {
  int n = 0;
  int num_ranks = 0;
  double blocking_power_w = 0.0;
  std::vector<int> node;                                     // of each position
  std::vector<int> position;                                 // of each node
  std::vector<const std::vector<profile::Option>*> options;  // null for source and sink
  // saving_rank[first_move[i] + k]: the rank of the move of position i from option k to k - 1
  // (1 = the smallest saving; 0 = no saving, never a candidate).
  std::vector<std::uint32_t> saving_rank;
  std::vector<int> first_move;
  Rows successors, predecessors;

  std::vector<int> option;
  std::vector<double> time, es, lf;  // es and lf also at the adjacency pad, position n
  double tolerance = 0.0;
  std::vector<Candidate> queue;  // a max-heap on saving per second
  // Positions whose finish (start) has not yet been passed to their successors (predecessors).
  detail::PositionSet starts_to_pass, finishes_to_pass;
  detail::Staleness staleness;

  const profile::Option& at(int i, int k) const { return (*options[i])[k]; }
  bool fits(int i, double t) const { return es[i] + t <= lf[i] + tolerance; }
  void rank_moves(const PlanProblem& problem);
  void load(const std::vector<int>& node_option);
  void push_candidate(int i);
  void settle_start(int i);
  void settle_finish(int i);
  bool fits_exactly(int i, double t, double guard);
  void reclaim();
  TimeEnergy evaluate();
};

SlackReclaimer::SlackReclaimer(const PlanProblem& problem) : s_(std::make_unique<State>()) {
  const schedule::Dag& dag = problem.dag;
  State& s = *s_;
  s.n = dag.num_nodes();
  s.blocking_power_w = problem.settings.blocking_power_w;
  s.num_ranks = problem.schedule.num_ranks();
  s.node = dag.topological_order();
  s.position.resize(static_cast<std::size_t>(s.n));
  std::vector<int>& position = s.position;
  for (int i = 0; i < s.n; ++i) position[s.node[i]] = i;
  for (int i = 0; i < s.n; ++i) {
    const int v = s.node[i];
    const bool instruction = dag.is_instruction(v);
    s.options.push_back(instruction ? &problem.options(v).options : nullptr);
    s.successors.add_row();
    for (int w : dag.successors(v)) s.successors.target.push_back(position[w]);
    s.predecessors.add_row();
    for (int u : dag.predecessors(v)) s.predecessors.target.push_back(position[u]);
  }
  s.successors.close(s.n);
  s.predecessors.close(s.n);
  s.rank_moves(problem);
}

// Every move's saving per second, per option set, then replaced by its rank among them all.
void SlackReclaimer::State::rank_moves(const PlanProblem& problem) {
  std::vector<double> saving;
  std::vector<int> spec_first;
  for (const profile::OptionSet& spec : problem.specs) {
    spec_first.push_back(static_cast<int>(saving.size()));
    saving.push_back(0.0);  // option 0 has no slower option
    for (std::size_t k = 1; k < spec.options.size(); ++k) {
      saving.push_back(saving_per_s(spec.options, k, blocking_power_w));
    }
  }
  std::vector<double> sorted = saving;
  std::sort(sorted.begin(), sorted.end());
  sorted.erase(std::unique(sorted.begin(), sorted.end()), sorted.end());
  for (double x : saving) {
    const auto rank = std::lower_bound(sorted.begin(), sorted.end(), x) - sorted.begin();
    // 0.0 is in `sorted` and ranks 0: no saving.
    saving_rank.push_back(x > 0.0 ? static_cast<std::uint32_t>(rank) : 0);
  }
  for (int i = 0; i < n; ++i) {
    const int spec = problem.node_spec[node[i]];
    first_move.push_back(spec < 0 ? 0 : spec_first[spec]);
  }
}

SlackReclaimer::~SlackReclaimer() = default;

TimeEnergy SlackReclaimer::run(std::vector<int>& option) {
  State& s = *s_;
  s.load(option);
  s.reclaim();
  for (int i = 1; i + 1 < s.n; ++i) option[s.node[i]] = s.option[i];
  return s.evaluate();
}

// Times of the options, then windows as schedule::critical_windows computes them (the same
// maxima and minima of the same sums, in positions).
void SlackReclaimer::State::load(const std::vector<int>& node_option) {
  option.assign(static_cast<std::size_t>(n), 0);
  time.assign(option.size(), 0.0);
  es.assign(option.size(), 0.0);
  for (int i = 0; i < n; ++i) {
    if (options[i] == nullptr) continue;
    option[i] = node_option[node[i]];
    time[i] = at(i, option[i]).time_s;
  }
  for (int i = 1; i < n; ++i) {
    for (const int* u = predecessors.begin(i); u != predecessors.end(i); ++u) {
      es[i] = std::max(es[i], es[*u] + time[*u]);
    }
  }
  lf.assign(option.size(), es[n - 1]);
  for (int i = n - 1; i-- > 0;) {
    for (const int* w = successors.begin(i); w != successors.end(i); ++w) {
      lf[i] = std::min(lf[i], lf[*w] - time[*w]);
    }
  }
  // The windows of the adjacency's pad (position n), which no update can reach.
  es.push_back(std::numeric_limits<double>::infinity());
  lf.push_back(-std::numeric_limits<double>::infinity());
}

// As evaluate_nodes scores the options: the longest path is the sink's settled start, and sums
// run in node order.
TimeEnergy SlackReclaimer::State::evaluate() {
  settle_start(n);
  const double time_s = es[n - 1] + time[n - 1];
  double busy = 0.0, energy = 0.0;
  for (int v = 1; v + 1 < n; ++v) {
    const int i = position[v];
    busy += time[i];
    energy += at(i, option[i]).energy_j;
  }
  return {time_s, iteration_energy(energy, busy, num_ranks, time_s, blocking_power_w)};
}

void SlackReclaimer::State::push_candidate(int i) {
  if (option[i] == 0) return;
  const std::uint32_t rank = saving_rank[static_cast<std::size_t>(first_move[i] + option[i])];
  if (rank == 0) return;
  queue.push_back({rank, i});
  std::push_heap(queue.begin(), queue.end());
}

void SlackReclaimer::State::settle_start(int i) {
  double* start = es.data();
  const double* duration = time.data();
  starts_to_pass.drain_below(i, [&](int u) {
    const double finish = start[u] + duration[u];
    for (const int w : successors.near[u]) {
      if (finish > start[w]) start[w] = finish, starts_to_pass.insert_ahead(w);
    }
  });
}

void SlackReclaimer::State::settle_finish(int i) {
  double* finish = lf.data();
  const double* duration = time.data();
  finishes_to_pass.drain_above(i, [&](int w) {
    const double start = finish[w] - duration[w];
    for (const int u : predecessors.near[w]) {
      if (start < finish[u]) finish[u] = start, finishes_to_pass.insert_ahead(u);
    }
  });
}

// Whether i, which fits with time t in its stale windows, fits in its exact ones. Its stale windows
// are exact but for how much its start may yet grow and its finish shrink (Staleness); when that
// much to spare is not there, the side with more to go is brought up to date first, then the other
// if need be.
bool SlackReclaimer::State::fits_exactly(int i, double t, double guard) {
  const auto sure = [&](double slack) { return es[i] + t + slack <= lf[i] + tolerance - guard; };
  if (sure(staleness.start_bound(i, true) + staleness.finish_bound(i, true))) return true;
  double early = staleness.start_bound(i, false), late = staleness.finish_bound(i, false);
  while (early + late > 0.0 && !sure(early + late)) {
    if (early >= late) {
      settle_start(i);
      staleness.settled_starts(i);
      early = 0.0;
    } else {
      settle_finish(i);
      staleness.settled_finishes(i);
      late = 0.0;
    }
    if (!fits(i, t)) return false;
  }
  return true;
}

void SlackReclaimer::State::reclaim() {
  const double scale = std::max(1.0, es[n - 1]);  // the iteration time, at least 1 s
  tolerance = 1e-12 * scale;
  // Rounding of the sums along a path (at most n additions, in stale and in exact windows).
  const double guard = 8.0 * (n + 1) * std::numeric_limits<double>::epsilon() * scale;
  starts_to_pass.reset(n);
  finishes_to_pass.reset(n);
  staleness.reset();
  queue.clear();
  // In node order: candidates of equal saving then leave the heap in the same order as always.
  for (int v = 1; v + 1 < n; ++v) push_candidate(position[v]);
  while (!queue.empty()) {
    pop_heap_exact(queue.data(), queue.data() + queue.size(), std::less<Candidate>());
    const int i = queue.back().at;
    queue.pop_back();
    const double slower = at(i, option[i] - 1).time_s;
    // Windows only shrink: a stale miss is a miss.
    if (!fits(i, slower) || !fits_exactly(i, slower, guard)) continue;
    staleness.moved(i, slower - time[i]);
    --option[i];
    time[i] = slower;
    starts_to_pass.insert(i);
    finishes_to_pass.insert(i);
    push_candidate(i);
  }
}

TimeEnergy reclaim_slack(const PlanProblem& problem, std::vector<int>& option) {
  return SlackReclaimer(problem).run(option);
}

}  // namespace perseus::plan
