// Cluster emulation (architecture section 6): D data-parallel pipelines of S stages, each stage a
// T-way tensor-parallel group (energy scales with the T GPUs per stage), synchronized by the
// gradient all-reduce at the end of every iteration. One pipeline straggles: it takes f times
// longer at the same power. Three modes per factor f:
//   baseline   every pipeline runs all-max; the others block (P_block) until the straggler ends;
//   intrinsic  every pipeline runs the fastest frontier plan, the others block until it ends;
//   perseus    the straggler runs the fastest plan, the others the cheapest frontier plan that
//              finishes by the straggler's time, blocking for the rest.
// Savings are relative to the baseline energy: intrinsic = baseline - intrinsic mode,
// extrinsic = intrinsic mode - perseus mode, total = their sum. Each factor costs one binary
// search over the frontier, so the sweep is independent of the number of GPUs.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "perseus/plan/frontier_query.hpp"
#include "perseus/plan/frontier_store.hpp"

namespace perseus::emulate {

struct ClusterSpec {
  int pipelines = 1;        // D, data-parallel degree
  int tensor_parallel = 1;  // T, GPUs per stage
};

struct ModeResult {
  double time_s = 0.0;    // iteration time of the cluster (the straggler's)
  double energy_j = 0.0;  // all GPUs, one iteration
};

struct ClusterPoint {
  double factor = 1.0;
  ModeResult baseline, intrinsic, perseus;
  std::size_t perseus_plan = 0;   // frontier row index the non-stragglers run
  double intrinsic_saving = 0.0;  // fractions of the baseline energy
  double extrinsic_saving = 0.0;
  double total_saving = 0.0;
};

// Slowdown factors from a command-line spec: "a:b:step" (a, a+step, ... up to b inclusive), a
// comma list "a,b,c", or one number. Throws perseus::Error naming the spec when it is malformed,
// a factor is < 1, the step is not positive or the range is empty.
std::vector<double> parse_factors(const std::string& spec);

// Throws perseus::Error for pipelines < 1, tensor_parallel < 1 or a factor < 1 (naming it).
void check_cluster(const ClusterSpec& spec, const std::vector<double>& factors);

// One factor: plans chosen by `query` (its all-max is the baseline).
ClusterPoint emulate_cluster(const plan::FrontierQuery& query, int num_ranks,
                             double blocking_power_w, const ClusterSpec& spec, double factor);

std::vector<ClusterPoint> sweep_cluster(const plan::StoredFrontier& frontier,
                                        const ClusterSpec& spec,
                                        const std::vector<double>& factors);

}  // namespace perseus::emulate
