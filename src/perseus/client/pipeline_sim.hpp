// A pipeline-parallel training job on simulated GPUs in virtual time (DESIGN section 7), the
// engine of `perseus simulate-training`: one rank per (pipeline, stage), each with its own
// PipelineFrequencyOptimizer and SimGpu, talking to the control-plane server like a real job.
// Ranks run in separate processes (the command) or threads (tests); they exchange messages over
// connected stream sockets (socketpair), never shared memory:
//
//   neighbours    stage s sends "F m t" to s+1 after forward m, s+1 sends "B m t" to s after
//                 backward m; t is the sender's virtual time at the end of the instruction. The
//                 receiver calls SimGpu::wait_until(t) before the instruction that needs it, so
//                 every instruction starts when its GPU is free and its input has arrived: the
//                 iteration time is the schedule DAG's critical path.
//   coordinator   at the end of each iteration every rank sends its virtual time ("END i t"), the
//                 coordinator answers the maximum ("GO t"), each rank waits until then (blocked,
//                 at blocking power: the gradient all-reduce) and calls on_step_end, so every
//                 rank's measured iteration spans the whole pipeline iteration. Then each rank
//                 reports the iteration ("ITER ...") and the coordinator says whether to go on
//                 ("NEXT 1|0"). The coordinator also relays rank 0's job id to every rank
//                 (OptimizerOptions::share_job_id: "JOB id" from each rank, "JOB id0" back).
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "perseus/client/optimizer.hpp"
#include "perseus/profile/profile.hpp"
#include "perseus/schedule/schedule.hpp"
#include "perseus/util/error.hpp"

namespace perseus::client::pipeline {

// The peer closed its end (it failed or exited): usually the consequence of another failure.
class PeerClosed : public Error {
 public:
  using Error::Error;
};

// One end of a connected stream socket carrying text lines. Owns the descriptor.
class Channel {
 public:
  Channel() = default;
  Channel(int fd, std::string peer) : fd_(fd), peer_(std::move(peer)) {}
  ~Channel();
  Channel(Channel&& other) noexcept;
  Channel& operator=(Channel&& other) noexcept;
  Channel(const Channel&) = delete;
  Channel& operator=(const Channel&) = delete;

  bool open() const { return fd_ >= 0; }
  int fd() const { return fd_; }
  const std::string& peer() const { return peer_; }
  // Sends one line (no '\n' inside). Throws PeerClosed when the peer is gone.
  void send(const std::string& line);
  // Blocks for the next line. Throws PeerClosed at end of stream.
  std::string receive();
  // For poll() loops: reads what is available once; false at end of stream.
  bool fill();
  // Takes a complete buffered line, if any.
  bool next_line(std::string& line);
  void close();

 private:
  int fd_ = -1;
  std::string peer_;
  std::string buffer_;
};

// A connected pair of channels (socketpair); throws perseus::Error when the OS refuses.
std::pair<Channel, Channel> channel_pair(const std::string& peer_of_first,
                                         const std::string& peer_of_second);

struct RankSpec {
  int stage = 0;
  int pipeline = 0;
  int num_stages = 1;
  int num_pipelines = 1;
  std::vector<schedule::Instruction> instructions;  // this stage's order in one iteration
  profile::Profile profile;
  double blocking_power_w = 0.0;
  // Server, job and reporting options; run_rank fills rank, degrees and share_job_id.
  OptimizerOptions optimizer;

  int rank() const { return pipeline * num_stages + stage; }
};

// The spec of rank `rank` (pipeline rank / S, stage rank % S) of a job of `num_pipelines`
// pipelines running `schedule`.
RankSpec rank_spec(int rank, const schedule::Schedule& schedule, int num_pipelines,
                   const profile::Profile& profile, double blocking_power_w,
                   const OptimizerOptions& optimizer);

struct RankLinks {
  Channel prev;         // stage - 1 (absent on the first stage)
  Channel next;         // stage + 1 (absent on the last stage)
  Channel coordinator;  // the process or thread running coordinate()
};

// Runs one rank until the coordinator says stop. Throws perseus::Error (PeerClosed when a peer
// went away first).
void run_rank(const RankSpec& spec, RankLinks& links);
// run_rank for a process or thread of its own: catches every exception, tells the coordinator
// ("ERR message") and returns the message ("" on success).
std::string run_rank_reporting(const RankSpec& spec, RankLinks& links);

struct StopRule {
  int iterations = 20;         // without until_done: exactly this many
  bool until_done = false;     // run until `final_window` iterations ran on the final schedule
  int final_window = 5;        // the reporting window
  int max_iterations = 10000;  // cap for until_done
  // until_done: stop early after this many iterations in a row in which some rank ran at the
  // default clock because the server failed it (0: never).
  int give_up_degraded = 0;
};

struct IterationRecord {
  double time_s = 0.0;    // pipeline iteration time (max over ranks)
  double energy_j = 0.0;  // summed over all ranks
  int round = -1;         // rank 0's schedule round (-1: default clock)
  bool final = false;     // every rank ran its final schedule
  bool degraded = false;  // some rank ran at the default clock because the server failed it
};

struct RunResult {
  std::string job_id;  // rank 0's
  std::vector<IterationRecord> iterations;
  bool finished = false;  // until_done: the final schedule ran a full window
  bool gave_up = false;   // until_done: stopped by StopRule::give_up_degraded
};

// A rank failed: its message, and which rank (index into the coordinator's channels).
class RankFailure : public Error {
 public:
  RankFailure(int rank, const std::string& message, bool exited_silently)
      : Error(message), rank_(rank), exited_silently_(exited_silently) {}
  int rank() const { return rank_; }
  // The rank closed its channel without reporting an error (crashed or was killed).
  bool exited_silently() const { return exited_silently_; }

 private:
  int rank_;
  bool exited_silently_;
};

// Drives the ranks (channel i talks to rank i) until the stop rule ends the run; returns once
// every rank was told to stop. On the first failure it collects failures for half a second more
// and throws RankFailure for the most telling one (a rank's own error over a silent exit over a
// neighbour's "peer closed"; among equals the lowest rank). Throws perseus::Error after
// `timeout_s` seconds (0: no limit).
RunResult coordinate(std::vector<Channel>& ranks, const StopRule& stop, double timeout_s);

}  // namespace perseus::client::pipeline
