// The fastest plan without slowdown (issue 16). The frontier solver plans durations in whole time
// units, and a planned duration is realized at the slowest profiled option whose duration,
// floored to units, fits. So the plan at the solver's fastest iteration time can take a little
// longer in real time than every instruction at its fastest option does (0.15-0.26 % on GPT-3 on
// A100 at 1 ms). This pass works in continuous time, on the profiled durations themselves:
// starting from a realized plan, it speeds up the critical instruction whose next faster option
// costs the least energy per second gained, until the iteration is no longer than with every
// instruction at its fastest option (which all-max is not faster than), then reclaims slack
// (plan/reclaim.hpp). It also reclaims slack from the all-fastest plan and keeps the cheaper of
// the two. Cost: O((V + E) k) for k speed-ups, plus two slack reclamations.
#pragma once

#include <vector>

#include "perseus/plan/problem.hpp"

namespace perseus::plan {

// Relative tolerance of "no longer than": the critical path is a sum of at most V durations.
inline constexpr double kNoSlowdownTolerance = 1e-12;

// The iteration time (s) with every instruction at its fastest profiled option.
double fastest_iteration_time(const PlanProblem& problem);

// `option` (index per DAG node into problem.options(v).options, 0 = slowest; source and sink
// ignored) turned in place into a plan whose iteration takes at most `target_s`
// (fastest_iteration_time(), which the caller has at hand), at the least energy of the two
// candidates above; returns that plan's time and energy (as evaluate_nodes scores it).
TimeEnergy without_slowdown(const PlanProblem& problem, std::vector<int>& option, double target_s);

}  // namespace perseus::plan
