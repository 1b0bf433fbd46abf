// Slack reclamation: a planned duration usually falls between two profiled options and is
// realized at the faster one, which leaves slack. This pass moves instructions to slower (cheaper)
// profiled options wherever their slack allows, without lengthening the iteration, taking the
// largest energy saving per second of slack first.
#pragma once

#include <memory>
#include <vector>

#include "perseus/plan/problem.hpp"

namespace perseus::plan {

// Reclaims slack for one problem, many times (the frontier solver runs it at every point): the
// DAG is renumbered in topological order once, and every move's saving is ranked, at
// construction.
//
// Greedy: a max-heap of (energy saved per second of extra time, instruction), the saving held as
// its rank among all moves' savings (a small integer that compares as the saving does); an
// instruction's next slower option is taken when it fits its window [earliest start, latest
// finish] within 1e-12 of the iteration time. Windows are kept lazily: a move only marks the
// node, and its new finish (start) reaches successors (predecessors) when a node after (before)
// it in topological order is checked. Windows only shrink, so a candidate that misses its stale
// window is rejected without bringing it up to date. A start is exact once the starts up to
// its position have been settled, and can since have grown by at most the time added by the
// moves at positions below it (its ancestors are among them); a finish likewise from above. So
// a candidate that fits its stale window with that much to spare is taken without an update;
// otherwise the side with more to go is settled, then the other if still undecided. The result
// equals eager propagation's bit for bit (every window is the same fixpoint of max / min over
// the same sums, and every decision is the one exact windows give).
// O((N + E) log N) per run for the heap, plus the window updates of the moves.
class SlackReclaimer {
 public:
  explicit SlackReclaimer(const PlanProblem& problem);
  ~SlackReclaimer();

  // `option[v]` is an index into problem.options(v).options (0 = slowest) for every instruction
  // node (ignored for source and sink); it is updated in place. The critical path of the
  // profiled durations never grows. Returns the reclaimed options' time and energy, equal to
  // evaluate_nodes' on their option_costs, bit for bit.
  TimeEnergy run(std::vector<int>& option);

 private:
  struct State;
  std::unique_ptr<State> s_;
};

// One run of SlackReclaimer.
TimeEnergy reclaim_slack(const PlanProblem& problem, std::vector<int>& option);

}  // namespace perseus::plan
