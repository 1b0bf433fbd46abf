// Parallelization search (architecture section 8): from per-operator profiles to the fastest legal
// configuration. For every stage count (one thread each) the search starts from balanced splits
// and repeatedly alleviates the bottleneck stage (by time, or by memory while over the limit)
// with primitives: change the stage's tp/dp/algo, trade GPUs with other stages (one stage doubles
// its GPUs, others halve theirs), change the microbatch size, and move operators between stages
// (a min-max rebalancing of the stage boundaries followed by single-boundary moves); every stage
// recomputes automatically just enough to fit the memory limit. The walk is a bounded-depth
// (max_hops without improvement), deterministic search whose cost is counted in stage evaluations
// (max_evaluations per stage count). run_grid is the Megatron-LM-style baseline: uniform stages,
// one tp/dp for all, full or no recomputation, every microbatch size.
#pragma once

#include <string>
#include <vector>

#include "perseus/search/config.hpp"
#include "perseus/search/database.hpp"
#include "perseus/search/model.hpp"
#include "perseus/search/perf_model.hpp"

namespace perseus::search {

// How the walk ranks the neighbours it may move to when none is faster than the best so far
// (the reference's --sort-metric): the iteration time, or the GPU time per microbatch summed
// over the stages (stage time x its GPUs), which favours configurations that waste fewer GPUs.
enum class SortMetric { max_stage_time, total_gpu_time };

struct SearchOptions {
  int num_nodes = 1;
  int gpus_per_node = 1;
  int global_batch_size = 0;
  std::vector<int> micro_batch_sizes;  // candidates; empty: every profiled size
  double memory_limit_mb = 0.0;        // per GPU
  int min_stages = 1;
  int max_stages = 0;             // 0: min(number of GPUs, 16)
  int max_tp = 0;                 // 0: gpus_per_node
  int max_hops = 7;               // search depth without improvement
  long long max_evaluations = 0;  // stage evaluations per stage count; 0: 2,000,000
  int threads = 0;                // 0: one per stage count, at most the hardware's
  // Rounds of per-operator fine-tuning (finetune.hpp) of every stage of each stage count's
  // finalists; the reference's --finetune-after-trial.
  int finetune_rounds = 1;
  SortMetric sort_metric = SortMetric::max_stage_time;
  // MB of headroom kept for the backward pass's peak when recomputation is chosen (the
  // reference's --peak-mem-in-backward): recomputation fits each stage under memory_limit_mb
  // minus this; the limit itself is unchanged.
  double peak_mem_in_backward_mb = 0.0;
  double recompute_limit_mb() const { return memory_limit_mb - peak_mem_in_backward_mb; }
  int num_gpus() const { return num_nodes * gpus_per_node; }
};

struct StageCountResult {
  int num_stages = 0;
  bool found = false;  // a configuration within the memory limit
  Config config;       // the best found (fits the limit when `found`)
  PipelineCost cost;   // its exact evaluation
  // The configurations this stage count ended with (the best and the polished finalists), for
  // objectives other than time (energy.hpp).
  std::vector<Config> candidates;
  long long evaluations = 0;     // stage evaluations (cache misses)
  long long configurations = 0;  // configurations scored
  double seconds = 0.0;
};

struct SearchResult {
  std::vector<StageCountResult> per_stage_count;  // ascending stage count
  int best = -1;                                  // index of the fastest found, -1 when none fits
  // One line per listed microbatch size the database lacks (for some or every tp/algo): the
  // configurations that need it were skipped.
  std::vector<std::string> notices;
  const StageCountResult* best_result() const {
    return best < 0 ? nullptr : &per_stage_count[static_cast<std::size_t>(best)];
  }
};

// The performance model's options for a search's cluster and memory limit.
PerfOptions perf_options(const SearchOptions& o);

// Checks the options against the cluster and database (Error naming the option). Listed
// microbatch sizes the database lacks, wholly or for some (tp, algo), are not errors (the
// configurations that need them are illegal): one notice each is returned; none profiled at all
// is an Error.
std::vector<std::string> validate(const SearchOptions& o, const Model& model, const Database& db);

SearchResult run_search(const Model& model, const Database& db, const SearchOptions& o);

// Megatron-LM-style grid: for every stage count, tp (power of two up to max_tp) and microbatch
// size, uniform layers per stage, dp = GPUs / (stages x tp), recomputation of every operator
// but the model's first and last, or none; the fastest strictly under the memory limit.
SearchResult run_grid(const Model& model, const Database& db, const SearchOptions& o);

}  // namespace perseus::search
