// The training-side client (architecture section 7): drop-in hooks for a training loop that fetch
// frequency plans from the control-plane server, apply them around each instruction through a
// background clock thread, measure time and energy per instruction and per iteration, and report
// them every `report_every` iterations.
//
// Failure policy: the optimizer must never be the reason a training run dies. When the server is
// unreachable, slow or answers garbage, the client retries with bounded exponential backoff, then
// logs one warning and runs at the default clock (and tries again at the next reporting window).
// Only in strict mode do such failures throw into the caller. On destruction the GPU's default
// clocks and power limit are restored, within `shutdown_bound_s`.
//
// Protocol (perseus/wire/protocol.hpp): rank 0 registers the job unless a job id is given; every
// rank registers itself and fetches round 0's schedule (a barrier over the job's ranks). Each
// on_instruction_begin takes the schedule's next (instruction label, MHz) entry and has the clock
// thread lock that clock (schedules with power_limit_w set the limit once per round instead). After
// report_every iterations (or as many as the schedule asks for: the profiler lengthens windows
// too short for the energy counter) the rank posts its measurements for the round and fetches
// the next round's schedule, used from the next step on; a schedule with done=true is kept for
// good and nothing more is reported.
//
// Measurement (architecture section 9): the hooks only record timestamps (the backend's now_s())
// and instruction names; they never read the energy counter, which on a real GPU blocks for ~4 ms.
// A sampler reads the counter continuously (GpuBackend::start_energy_sampler), and when a
// reporting window closes its energy is attributed to the window's iterations and instructions
// (perseus/measure/attribution.hpp; `attribution`, default busy-overlap). Iterations therefore get
// their energy when their window closes, also without a server.
//
// Observe-only mode (`observe`): measures and reports like any client but never locks a clock,
// sets a power limit or resets either (the schedules' clocks are recorded, not applied).
//
// Bounded stall: whatever the server does (no answer, one byte a second, a 1 GiB answer), one
// window boundary blocks the training loop at most `stall_bound_s`, and after a failure the
// client skips a growing number of windows before it contacts the server again.
//
// A driver that stops answering (NVML blocks its callers for good on a GPU that has fallen off
// the bus) never blocks the training thread: the counter and the clocks are driven from their own
// threads. A call blocked for kDriverCallStuckS is warned of at the next window boundary, and the
// destructor leaves such calls behind after `shutdown_bound_s` (they keep the client's objects).
//
// Warnings: one when the client starts running at the default clock (with the server's answer
// or the transport error, and the number of attempts); retries at later window boundaries stay
// silent until one succeeds. A loop whose instructions do not match the schedule gets one warning
// per window (how many iterations, what differs) and runs at the default clock until the next
// schedule; degraded() is true meanwhile. Backend failures
// (e.g. NVML refusing a clock) are warned once each; they may be reported from the clock thread,
// so `log` must be callable from any thread.
#pragma once

#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "perseus/client/gpu_backend.hpp"
#include "perseus/client/measurement_window.hpp"
#include "perseus/measure/attribution.hpp"

namespace perseus::client {

struct OptimizerOptions {
  std::string server_url;  // "http://127.0.0.1:7787"; empty: no server, default clocks
  int rank = 0, dp_rank = 0, pp_rank = 0, tp_rank = 0;
  int dp_degree = 1, pp_degree = 1, tp_degree = 1, world_size = 1;
  // Job id. Empty: rank 0 registers the job; other ranks take PERSEUS_JOB_ID from the
  // environment, else share_job_id below.
  std::string job_id;
  // Called by every rank with rank 0's job id (other ranks pass ""); returns rank 0's id. Lets
  // the caller broadcast the id (torch.distributed in Python). Optional.
  std::function<std::string(const std::string&)> share_job_id;
  std::optional<std::string> job_metadata;
  // The server's cluster token (empty: $PERSEUS_TOKEN, else none); sent with every request.
  std::string token;
  // For an https server_url: the CA certificate (PEM) the server's certificate must chain to
  // (empty: $PERSEUS_CA_FILE, else the system's trusted certificates).
  std::string ca_file;
  // Per-job scheduler (extension; empty: the server's default).
  std::string scheduler;
  nlohmann::json scheduler_args = nlohmann::json::object();
  // The order every pipeline rank runs (wire::JobInfo::pipeline_order: per-rank actions in
  // PyTorch's notation), sent when this rank registers the job so that the server plans for it; a
  // framework adapter (perseus.torch.attach) reads it from the framework. Unset: the scheduler's
  // arguments name the schedule.
  std::optional<nlohmann::json> pipeline_order;
  int report_every = 5;             // iterations per reporting window (a schedule may ask more)
  double request_timeout_s = 5.0;   // per HTTP request (connect, send, short answers)
  double barrier_timeout_s = 10.0;  // waiting for the schedule barrier
  int retries = 3;                  // attempts after the first, per request
  double backoff_s = 0.2;           // first retry delay, doubled each retry
  // The most one window boundary (or the constructor) may block on the server: every request,
  // retry, back-off delay and barrier wait of the exchange together.
  double stall_bound_s = 10.0;
  // The most the destructor may block on the GPU driver (restoring the default clock and power
  // limit, stopping the sampler and clock threads). A driver that does not answer by then (NVML
  // on a GPU that has fallen off the bus) is left behind: one warning, and the process may end.
  double shutdown_bound_s = 5.0;
  // After a failed exchange the client leaves the server alone for 1, 2, 4, ... windows, at
  // most this many (the circuit breaker); one success closes it again.
  int max_skipped_windows = 32;
  bool strict = false;   // throw perseus::Error instead of degrading
  bool observe = false;  // never change a GPU setting (see above)
  measure::AttributionMethod attribution = measure::AttributionMethod::kBusyOverlap;
  double sampler_period_s = 0.0;  // minimum time between two energy-counter reads
  // Where warnings go (default: stderr, one line each, prefixed "perseus: warning: ").
  std::function<void(const std::string&)> log;

  // Throws perseus::Error naming the first bad field ("optimizer options: field 'rank': ...").
  void validate() const;
};

struct IterationMeasurement {
  double time_s = 0.0;
  double energy_j = 0.0;
};

class PipelineFrequencyOptimizer {
 public:
  // Registers the job (rank 0) and this rank, and fetches the first schedule. Never throws for
  // server trouble unless options.strict; throws perseus::Error for invalid options.
  PipelineFrequencyOptimizer(OptimizerOptions options, std::unique_ptr<GpuBackend> gpu);
  ~PipelineFrequencyOptimizer();
  PipelineFrequencyOptimizer(const PipelineFrequencyOptimizer&) = delete;
  PipelineFrequencyOptimizer& operator=(const PipelineFrequencyOptimizer&) = delete;

  void on_step_begin();
  void on_step_end();
  // `name` is the instruction's kind ("forward", "backward", "backward_input",
  // "backward_weight"); `stage` its pipeline stage, needed on a GPU that runs several stages
  // (interleaved and V-shaped schedules; -1: not given). The schedule names such instructions
  // "<kind>@<stage>" (perseus/wire/protocol.hpp); a GPU with one stage may pass it or not.
  void on_instruction_begin(const std::string& name, int stage = -1);
  void on_instruction_end(const std::string& name, int stage = -1);

  const std::string& job_id() const;
  // "<job id>#<secret>" when the server gave the job a secret, else the job id: what other
  // ranks need to join (options.job_id, PERSEUS_JOB_ID).
  std::string job_credential() const;
  // The schedule round in use (-1 while running at the default clock).
  int round() const;
  // True once the server sent its final schedule.
  bool done() const;
  // True once the server said the job failed for good (its scheduler failed): the client runs at
  // the default clock and asks no more.
  bool job_failed() const;
  // One iteration's (instruction label, MHz) in the round in use, in execution order (what the
  // next iteration is to run, unless it departs); empty while running at the default clock.
  std::vector<std::pair<std::string, int>> planned_clocks() const;
  // True while running at the default clock: the server failed us, or the training loop left
  // the schedule (other instructions, order or count than it plans).
  bool degraded() const;
  // Iterations so far that left their schedule (each window with any says so in one warning:
  // how many, and the first difference against the schedule's instructions).
  std::size_t mismatched_iterations() const;
  // Measured time and energy of every iteration whose reporting window closed, in order (where
  // the counter did not change during a window, its energies are unknown: WindowMeasurements).
  const std::vector<IterationMeasurement>& iterations() const;
  // The measurements of the last closed reporting window (per-instruction breakdowns, standard
  // errors, attribution method), also without a server; empty before the first.
  const WindowMeasurements& last_window() const;
  GpuBackend& gpu();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace perseus::client
