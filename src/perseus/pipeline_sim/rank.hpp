// A pipeline-parallel training job on simulated GPUs in virtual time (architecture section 7), the
// engine of `perseus simulate-training`: one rank per (pipeline, GPU of the pipeline), each with
// its own PipelineFrequencyOptimizer and SimGpu, talking to the control-plane server like a real
// job. A GPU runs its schedule actions in order: one stage's, or several stages' (interleaved and
// V-shaped schedules). Ranks run in separate processes (the command) or threads (tests); they
// exchange messages over connected stream sockets (socketpair, perseus/pipeline_sim/channel.hpp),
// never shared memory:
//
//   neighbours    after the forward of stage s on microbatch m, its GPU sends "F s m t" to the
//                 GPU of stage s+1; after the backward (or backward-input) of stage s it sends
//                 "B s m t" to the GPU of stage s-1; t is the sender's virtual time at the end of
//                 the instruction. Neighbouring stages on the same GPU need no message (its order
//                 runs them in turn). The receiver keeps messages that arrive before it needs them
//                 and calls SimGpu::wait_until(t) before the instruction that needs one, so every
//                 instruction starts when its GPU is free and its input has arrived: the iteration
//                 time is the schedule DAG's critical path.
//   coordinator   at the end of each iteration every rank sends its virtual time ("END i t"), the
//                 coordinator answers the maximum ("GO t"), each rank waits until then (blocked,
//                 at blocking power: the gradient all-reduce) and calls on_step_end, so every
//                 rank's measured iteration spans the whole pipeline iteration. When that closed a
//                 reporting window, the rank sends what its client's counter measured for each
//                 iteration of it ("MEASURED first J..."). Then each rank reports the iteration
//                 with its GPU's true time and energy ("ITER ...") and the coordinator says whether
//                 to go on
//                 ("NEXT 1|0"). The coordinator also relays rank 0's job id to every rank
//                 (OptimizerOptions::share_job_id: "JOB id" from each rank, "JOB id0" back).
//
// The coordinator's side is perseus/pipeline_sim/coordinator.hpp. This module is not part of the
// client library: a training process links the client only.
#pragma once

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "perseus/client/optimizer.hpp"
#include "perseus/measure/energy_counter.hpp"
#include "perseus/pipeline_sim/channel.hpp"
#include "perseus/profile/profile.hpp"
#include "perseus/schedule/schedule.hpp"

namespace perseus::pipeline_sim {

struct RankSpec {
  int pp_rank = 0;    // the GPU's position in its pipeline
  int pipeline = 0;   // the data-parallel pipeline
  int num_ranks = 1;  // GPUs per pipeline
  int num_pipelines = 1;
  std::vector<int> stage_rank;                      // pp_rank of each stage (the schedule's)
  std::vector<int> stages;                          // the stages this GPU runs, ascending
  std::vector<schedule::Instruction> instructions;  // this GPU's order in one iteration
  profile::Profile profile;
  double blocking_power_w = 0.0;
  measure::CounterOptions counter;  // the simulated GPU's energy counter (seed + rank per rank)
  // Where each reporting window's attribution trace goes, as rank-R-window-N.json (empty: not
  // written).
  std::string trace_dir;
  // Server, job and reporting options; run_rank fills rank, degrees and share_job_id.
  client::OptimizerOptions optimizer;

  int rank() const { return pipeline * num_ranks + pp_rank; }
};

// The spec of rank `rank` (pipeline rank / R, GPU rank % R, R the schedule's GPUs per pipeline)
// of a job of `num_pipelines` pipelines running `schedule`.
RankSpec rank_spec(int rank, const schedule::Schedule& schedule, int num_pipelines,
                   const profile::Profile& profile, double blocking_power_w,
                   const client::OptimizerOptions& optimizer);

struct RankLinks {
  // One channel to each GPU of the same pipeline that holds a stage next to one of this GPU's
  // (by pp_rank).
  std::map<int, Channel> peers;
  Channel coordinator;  // the process or thread running coordinate()
};

// The links of every rank of `num_pipelines` pipelines running `schedule` (index: rank); the
// coordinator's ends go to `coordinator_ends`, named by `rank_label(rank)` there and
// `coordinator` on the rank's side.
std::vector<RankLinks> make_links(const schedule::Schedule& schedule, int num_pipelines,
                                  const std::function<std::string(int)>& rank_label,
                                  const std::string& coordinator,
                                  std::vector<Channel>& coordinator_ends);

// Runs one rank until the coordinator says stop. Throws perseus::Error (PeerClosed when a peer
// went away first).
void run_rank(const RankSpec& spec, RankLinks& links);
// run_rank for a process or thread of its own: catches every exception, tells the coordinator
// ("ERR message") and returns the message ("" on success).
std::string run_rank_reporting(const RankSpec& spec, RankLinks& links);

}  // namespace perseus::pipeline_sim
