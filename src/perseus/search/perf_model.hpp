// Performance model of the parallelization search (architecture section 8), with exact parity to
// the reference (Aceso, EuroSys'24: aceso_cost_model.py). Per stage and microbatch: time = forward
// + backward + recomputed forwards + boundary transfers (point-to-point tables) + resharding
// collectives between differently sharded neighbours; memory per GPU = weights, gradients, master
// weights and optimizer state + activations kept for the in-flight microbatches (minus what
// recomputation frees) + the peak transient of recomputation + reserved (allocator workspace).
// Pipeline: the time of stage i is t_i x (M-1) + sum_j t_j and the iteration time is their max.
// choose_recompute() reproduces the reference's automatic recomputation (recompute the operator
// groups that free the most memory until the stage fits). A configuration that needs an entry the
// database lacks is illegal with a reason, never silently cheap.
//
// Evaluation allocates nothing per call after warm-up (per-thread scratch) and the model is
// read-only, so one PerfModel serves many threads.
#pragma once

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "perseus/search/config.hpp"
#include "perseus/search/database.hpp"
#include "perseus/search/model.hpp"

namespace perseus::search {

struct PerfOptions {
  double memory_limit_mb = std::numeric_limits<double>::infinity();
  int gpus_per_node = 0;  // 0: every GPU of the configuration is in one node
};

// Why a stage cannot run. `op` is the stage-local operator index (-1: the stage).
enum class Problem : std::uint8_t {
  none,
  empty_stage,
  batch_not_divisible,  // microbatch size not divisible by an operator's dp
  missing_profile,      // (op, mbs, tp, algo) not in the database
  unsupported_reshard,  // neighbouring shardings with no resharding primitive
  missing_collective,   // resharding needs a collective table row the database lacks
};

struct Illegal {
  Problem problem = Problem::none;
  int op = -1;
  int mbs = 0, tp = 0, algo = 0;  // missing_profile / missing_collective: the lookup
  Collective collective = Collective::all_reduce;
  double size_mb = 0.0;
};

// One stage: `num_ops` consecutive operators of the model from `first_op`, each with its tp, dp,
// algo and recompute flag (arrays of num_ops entries, owned by the caller).
struct StageView {
  int first_op = 0;
  int num_ops = 0;
  const int* tp = nullptr;
  const int* dp = nullptr;
  const int* algo = nullptr;
  const std::uint8_t* recompute = nullptr;
  int num_stages_behind = 0;  // stages after this one
  bool in_cross_node = false, out_cross_node = false;
  bool uniform = false;  // every operator has tp[0], dp[0], algo[0] (faster resolution)
};

struct StageCost {
  Illegal illegal;
  // Per microbatch, microseconds. in/out_comm include the resharding time.
  double fwd_us = 0.0, bwd_us = 0.0, recompute_us = 0.0, in_comm_us = 0.0, out_comm_us = 0.0;
  double reshard_fwd_ms = 0.0, reshard_bwd_ms = 0.0;
  double time_ms = 0.0;  // (fwd + bwd + in + out + recompute) / 1000
  // Memory per GPU, MB.
  double weights_mb = 0.0;    // weights + master weights
  double gradients_mb = 0.0;  // = raw weights
  double optimizer_mb = 0.0;
  double activations_mb = 0.0;  // kept for the num_stages_behind microbatches in flight
  double peak_mb = 0.0;         // the current microbatch's activations + recompute transient
  double reserved_mb = 0.0;     // max(fwd + bwd reserved, raw weights)
  double memory_mb = 0.0;       // total
  bool legal() const { return illegal.problem == Problem::none; }
  double normal_mb() const { return memory_mb - reserved_mb; }
};

struct PipelineCost {
  std::vector<StageCost> stages;
  std::vector<double> stage_time_ms;  // t_i x (M-1) + sum_j t_j (the golden "time" column)
  double iteration_ms = 0.0;          // max of stage_time_ms
  int bottleneck = 0;                 // first stage with the max time
  int num_microbatches = 0;
  bool legal = true;   // every stage legal and within the memory limit
  std::string reason;  // why not, one line
};

class PerfModel {
 public:
  PerfModel(const Model& model, const Database& db, PerfOptions options = {});

  const Model& model() const { return *model_; }
  const Database& database() const { return *db_; }
  const PerfOptions& options() const { return options_; }

  // Time and memory of one stage at aggregate microbatch size `micro_batch`.
  StageCost stage(const StageView& v, int micro_batch) const;

  // The reference's check_recompute: writes v.num_ops flags to `out` (v.recompute is ignored):
  // none when the stage fits `memory_limit_mb`, else recompute the operator groups freeing the
  // most activation memory until it fits or nothing is left. Returns the stage memory (MB) under
  // those flags; an illegal stage returns +inf and no recomputation.
  double choose_recompute(const StageView& v, int micro_batch, double memory_limit_mb,
                          std::uint8_t* out) const;

  // stage() under the flags choose_recompute() picks (written to `out`), in one pass.
  StageCost stage_auto(const StageView& v, int micro_batch, double memory_limit_mb,
                       std::uint8_t* out) const;

  // Every stage of `c` and the pipeline times. Error when `c` does not match the model (operator
  // count); illegal stages and stages over the memory limit make the result illegal with a reason.
  PipelineCost evaluate(const Config& c) const;

  // Stage views of `c` (pointing into it), with cross-node flags from the GPU placement.
  std::vector<StageView> views(const Config& c) const;

  // One line naming the stage, operator and missing entry.
  std::string describe(const Illegal& ill, const StageView& v, int stage) const;

 private:
  StageCost recompute_impl(const StageView& v, int micro_batch, double memory_limit_mb,
                           std::uint8_t* out) const;
  struct Sums;  // what does not depend on recomputation
  bool base_sums(const StageView& v, int micro_batch, StageCost& c, Sums& sums) const;
  const OpProfile* resolve_profiles(const StageView& v, int micro_batch, StageCost& c) const;
  bool reshard_sums(const StageView& v, const OpProfile* const* prof, StageCost& c,
                    Sums& sums) const;
  void memory_sums(const StageView& v, const OpProfile* const* prof, Sums& sums) const;
  void finish(const Sums& sums, const StageView& v, double rec, double saved, double peak,
              StageCost& c) const;

  const Model* model_;
  const Database* db_;
  PerfOptions options_;
};

// t_i x (M-1) + sum_j t_j for every stage, summed in the reference's order.
void pipeline_stage_times(const double* stage_ms, int num_stages, int num_microbatches,
                          double* out);

// The per-stage table "stage-index,time,memory(total),memory(normal),memory(reserved)" with two
// decimals, exactly as the reference's info_*.csv (whose csv writer ends lines with "\r\n").
std::string stage_table_csv(const PipelineCost& cost, const char* line_end = "\r\n");

}  // namespace perseus::search
