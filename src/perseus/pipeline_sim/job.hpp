// A whole simulated training job in processes of its own, the engine of `perseus
// simulate-training`: one process per rank (rank.hpp), forked from the calling process, which
// coordinates them (coordinator.hpp) and, when one fails, says which rank and how its process
// ended.
#pragma once

#include <string>

#include "perseus/client/optimizer.hpp"
#include "perseus/measure/energy_counter.hpp"
#include "perseus/pipeline_sim/coordinator.hpp"
#include "perseus/profile/profile.hpp"
#include "perseus/schedule/schedule.hpp"

namespace perseus::pipeline_sim {

// What `perseus simulate-training` runs: one process per rank of `pipelines` copies of the
// pipeline, each with the real client on a simulated GPU. (The server's job is server::JobSpec.)
struct SimulatedJob {
  profile::Profile profile;
  schedule::Schedule schedule;
  int pipelines = 1;
  double blocking_power_w = 0.0;
  measure::CounterOptions counter;  // the simulated GPUs' energy counter (seed + rank per rank)
  // Server, job and reporting options of every rank (RankSpec::optimizer).
  client::OptimizerOptions optimizer;
  std::string trace_dir;  // RankSpec::trace_dir
};

// "rank R (stage S, pipeline P)", or "(stages S1, S2, ...)" for a GPU that runs several.
std::string rank_label(int rank, const schedule::Schedule& schedule);

// Runs `job` until `stop` (at most `timeout_s`, 0: no limit), each rank's warnings on stderr as
// "perseus: warning: rank R: ...". Throws perseus::Error naming the rank that failed (and how its
// process ended, where it said nothing) after killing the others, or naming a rank whose process
// failed or did not exit after the run.
RunResult run_job(const SimulatedJob& job, const StopRule& stop, double timeout_s);

}  // namespace perseus::pipeline_sim
