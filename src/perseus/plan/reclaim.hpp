// Slack reclamation: a planned duration usually falls between two profiled options and is
// realized at the faster one, which leaves slack. This pass moves instructions to slower (cheaper)
// profiled options wherever their slack allows, without lengthening the iteration, taking the
// largest energy saving per second of slack first.
#pragma once

#include <vector>

#include "perseus/plan/problem.hpp"

namespace perseus::plan {

// `option[v]` is an index into problem.options(v).options (0 = slowest) for every instruction
// node (ignored for source and sink); it is updated in place. The critical path of the profiled
// durations never grows.
void reclaim_slack(const PlanProblem& problem, std::vector<int>& option);

}  // namespace perseus::plan
