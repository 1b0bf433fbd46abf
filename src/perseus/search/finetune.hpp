// Per-operator parallelism inside a stage (issue 17), the primitives of the reference's
// fine-tuning (Aceso, EuroSys'24: aceso_prims.py finetune_dim_op_level, finetune_algo_op_level):
//   - dimension: from one tunable operator (model.hpp OpTraits::tunable), the longest run of
//     consecutive operators, forwards or backwards, that can trade a factor of two between tensor
//     and data parallelism (the per-GPU microbatch stays a listed size, tp stays within max_tp);
//     the fastest such run within the memory limit (the least memory when none fits) is taken
//     when it makes the stage faster;
//   - algorithm: each tunable operator in turn takes its fastest algorithm variant that keeps
//     the stage within the memory limit.
// The performance model charges the resharding collectives between differently sharded
// neighbours (perf_model.hpp); recomputation is chosen automatically for the memory limit, as
// everywhere in the search. Long stages try at most 64 evenly spaced tunable operators per move
// kind, so one stage costs O(64) evaluations of O(operators) each.
#pragma once

#include <vector>

#include "perseus/search/config.hpp"
#include "perseus/search/perf_model.hpp"

namespace perseus::search {

struct FinetuneLimits {
  double memory_limit_mb = 0.0;
  double recompute_limit_mb = 0.0;  // what recomputation fits each stage under
  int max_tp = 1;
  std::vector<int> listed;    // per-GPU microbatch sizes allowed, ascending
  long long* work = nullptr;  // when set, incremented by the operators of every stage evaluated
};

// Tunes stage `stage` of `c` in place (its tp, dp, algo and recompute flags); true when its time
// dropped with its memory within the limit. `c` must evaluate legally.
bool finetune_stage(const PerfModel& pm, Config& c, int stage, const FinetuneLimits& limits);

// One round over every stage (the reference's finetune()); true when any stage improved.
bool finetune(const PerfModel& pm, Config& c, const FinetuneLimits& limits);

}  // namespace perseus::search
