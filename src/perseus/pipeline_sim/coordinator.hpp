// The coordinator of the pipeline simulator (perseus/pipeline_sim/rank.hpp): synchronizes the
// iteration ends of every rank, relays rank 0's job id, records each iteration and decides when
// the run stops.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "perseus/pipeline_sim/channel.hpp"

namespace perseus::pipeline_sim {

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
  double energy_j = 0.0;  // summed over all ranks (the simulated GPUs' true energy)
  // Summed over all ranks as their clients' energy counters measured it (the counter model's
  // noise and lag included); nullopt where a rank's window did not close before the run ended
  // or its counter did not change.
  std::optional<double> measured_energy_j;
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

}  // namespace perseus::pipeline_sim
