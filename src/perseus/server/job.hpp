// One training job on the control-plane server (architecture section 7): its ranks, the schedule
// barrier, the rounds of plans its scheduler produced and the results the ranks reported. Pure
// state logic on the server's single event-loop thread; persistence goes through the Store before
// any reply, and a job rebuilt from the store (restore) continues where the old process stopped.
//
// Rounds: the scheduler's round k is released to the ranks once every rank has asked for it
// (GET /schedule?round=k, the barrier); when every rank has reported its results for round k, the
// job aggregates them per stage (max time, summed energy), lets the scheduler observe them and
// computes round k+1. A request without `round` means the rank's next round: one past the last
// round it reported.
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "perseus/server/reply.hpp"
#include "perseus/server/scheduler.hpp"
#include "perseus/server/store.hpp"
#include "perseus/wire/protocol.hpp"

namespace perseus::server {

// A round as stored and shown: {"stages": [{"frequencies": [[name, MHz], ...],
// "power_limit_w": W}, ...], "pipelines": {"dp": i}, "variants": [[stage plans], ...], "done":
// bool}: pipeline dp runs variants[i] (round_from_json also reads the older {"dp": [...]}).
nlohmann::json round_to_json(const Round& round);
Round round_from_json(const nlohmann::json& j);
// A round a scheduler made, with its text as the store keeps it (round_to_json, dumped): made
// together off the event loop for a job's first round, which takes long for a large job.
struct MadeRound {
  Round plans;
  std::string text;
};
MadeRound made_round(Round plans);
// The plan one rank runs: its pipeline's override if there is one, else its stage's plan.
const StagePlan& plan_for(const Round& round, int dp_rank, int pp_rank);

// The server memory a job holds (bytes), as budgeted by --max-memory: per rank (its registration,
// its latest results, its barrier state: measured about 8 KB) and per instruction of a round of
// its plans (the rounds held, the scheduler's copy, the answers being written: measured about
// 70 bytes, with room for a straggler variant of the plans).
inline constexpr std::uint64_t kJobBytesPerRank = 8u << 10;
inline constexpr std::uint64_t kJobBytesPerInstruction = 128;
std::uint64_t job_memory_bytes(long world_size, std::size_t instructions);
// The instructions a round holds: its stages' plans and each distinct plan set of its pipelines.
std::size_t round_instructions(const Round& round);
// Whether some plan of the round sets a power limit (power_limit_w) instead of clocks alone.
bool sets_power_limits(const Round& round);

// What the server gives a job: the directories its scheduler may use (it writes under `output`,
// in its own folder output/<job id>/, and reads under `data`), and how long it retries its store.
struct JobSettings {
  std::filesystem::path output = ".";
  std::filesystem::path data = ".";
  // A store write the job's progress waits for (a new round, a barrier release) that fails is
  // tried again, every second, for this long; then the job fails with the reason.
  double store_retry_s = 600.0;
};

// What the scheduler of job `id` is told before its ranks' clocks are known, the order the job
// registered (wire::JobInfo::pipeline_order) parsed into a schedule. Throws perseus::Error naming
// the action or rank when that order is not one (unknown action, a stage on two ranks, a
// deadlock) or has another number of ranks than pp_degree.
JobSpec job_spec(const std::string& id, const wire::JobInfo& info, const JobSettings& settings);

// What the ranks measured in one round whose results are complete: per stage (max time and summed
// energy over the stage's ranks), the mean over the window's iterations.
struct RoundMeasurement {
  int round = 0;
  std::vector<double> stage_time_s, stage_energy_j;
  std::vector<std::size_t> stage_iterations;  // iterations in the window, per stage
  double time_s() const;                      // the slowest stage
  double energy_j() const;                    // all stages
};

// The latest round with every result in, and the latest such round that ran every instruction at
// the ranks' highest common clock (all-max); each absent when there is none.
struct JobMeasurements {
  std::optional<RoundMeasurement> last, all_max;
  // The ranks whose energy counter did not change in the latest round with every result in
  // (wire::ProfilingResult::energy_measured); `last` is an earlier round while any is listed.
  std::vector<int> unmeasured_ranks;
  // Energy saved so far (J, all ranks), over the windows measured: per window, (baseline - its
  // energy) per iteration x its iterations. The baseline is the all-max round measured before
  // (or as) it, else the round's energy as the plans' planned saving says all-max would have
  // spent; what the latter counted is in planned_saved_j too. Iterations outside reported
  // windows are not counted. `counted_round`: the latest round counted (a restart replays the
  // rounds the store still holds; those counted before are not again); the windows of the final
  // round after its first (wire::ProfilingResult::final_window) are counted up to
  // `counted_final_window`.
  double saved_j = 0.0, planned_saved_j = 0.0;
  int counted_round = -1, counted_final_window = 0;
  // What the plans were planned to save when the latest round was measured
  // (Scheduler::planned_saving): what a stored job's summary shows as planned.
  std::optional<PlannedSaving> planned;
  // 1 - energy of `last` / energy of `all_max` (nullopt without both): what the job saves
  // against running at full clock, by its own measurement.
  std::optional<double> energy_saving() const;
  // time of `last` / time of `all_max` - 1 (nullopt without both): what that costs in time.
  std::optional<double> slowdown() const;
  // As the store keeps them for rounds it no longer holds.
  nlohmann::json to_json() const;
  static JobMeasurements from_json(const nlohmann::json& j);
};

// A job as GET /jobs, the status page and GET /metrics show it: a copy, which may be read on
// another thread than the job's.
struct JobSummary {
  std::string id, state, scheduler, error;
  int world_size = 0, pp_degree = 0, dp_degree = 0, tp_degree = 0, ranks_registered = 0;
  int round = -1;           // the latest round made (-1: none yet)
  int simulated_ranks = 0;  // registered ranks on a simulated GPU (wire::RankInfo::simulated_gpu)
  double idle_s = 0;
  bool stale = false;  // set by the control plane (ServerSettings::stale_after_s)
  std::size_t stragglers_reported = 0;
  JobMeasurements measured;
  // What its plans were planned to save (Scheduler::planned_saving): shown, labelled planned,
  // where no all-max round was measured.
  std::optional<PlannedSaving> planned;
  // {"job_id", "state", ..., "simulated_ranks", "energy_saving", "slowdown", "baseline",
  // "energy_saved_kwh", "unmeasured_ranks", "last_results", "stale"}.
  nlohmann::json to_json() const;
  // What the saving is against: the all-max round measured ({"source": "measured", "round",
  // "time_s", "energy_j"}), else the last round as its plans' planned saving and slowdown say
  // all-max would have run ("source": "planned"), else null.
  nlohmann::json baseline_json() const;
  // measured.saved_j, or nullopt while there is no `baseline` (baseline_json()) to count it
  // against and nothing was counted.
  std::optional<double> energy_saved_j(const nlohmann::json& baseline) const;
  // A job as the store holds it (what `perseus export-job` reports): its measurements as last
  // stored and their planned saving; idle since its last stored activity.
  static JobSummary stored(const StoredJob& job);
};

// "failed" (the job has an error), "registering" (no round made yet), "done" (its final round
// was released to the ranks) or "running".
std::string job_state(bool failed, bool started, bool final_round_released);

// A job's saving in words from its JobSummary::to_json: "17.10 %, time +1.90 %" against its
// measured all-max, else "12.00 % (planned)"; then "; 0.0042 kWh saved so far" (and "(against
// the planned all-max)" where that is what it was counted against). "" when there is none.
std::string saving_text(const nlohmann::json& job);

inline constexpr double kJoulesPerKwh = 3.6e6;

// Called exactly once with the answer to a deferred request.
using Responder = std::function<void(const Reply&)>;

class Job {
 public:
  // A new job; stores it. `info` names the effective scheduler and arguments for this job;
  // `secret_sha256` is the digest of its secret ("": the job has none); `instructions` is what a
  // round of its plans holds (round_instructions of the first round its checked scheduler made),
  // kept in the store with the job for its memory_bytes after a restart.
  Job(Store& store, std::string job_id, const wire::JobInfo& info, JobSettings settings,
      std::string secret_sha256 = "", std::size_t instructions = 0);
  // Rebuilds a stored job by replaying its history through a fresh scheduler.
  Job(Store& store, const StoredJob& stored, JobSettings settings);
  // A stored job this server cannot serve (rows it cannot read, above its caps): failed with
  // `reason` in every answer and status; the store keeps the job as it is.
  static std::unique_ptr<Job> unusable(Store& store, const StoredJob& stored, std::string reason);

  Reply register_rank(const wire::RankInfo& rank, const nlohmann::json& body);
  // Every rank registered and no scheduler was made or is being made for the job: the control
  // plane makes one (its files are read: off the event loop) from start_spec and hands it to
  // start.
  bool ready_to_start() const;
  // The job's scheduler and what it is told: the ranks' common SM clocks included. Marks the job
  // as starting (ready_to_start is false until start or stop_starting). Throws perseus::Error
  // when the ranks have no clock in common.
  std::pair<std::string, JobSpec> start_spec();
  // Takes the scheduler made from start_spec with its round 0 (`first`, made with it off the
  // event loop: a large job's takes long) and serves that round; null: fails the job, the
  // scheduler's `error` the reason.
  void start(std::unique_ptr<Scheduler> scheduler, std::optional<MadeRound> first,
             const std::string& error);
  // The scheduler could not be made now (no error of the job's): ready_to_start again.
  void stop_starting() { starting_ = false; }
  // Answers now or later (barrier); `respond` is called exactly once.
  void request_schedule(int rank, std::optional<int> round, Responder respond);
  Reply report_result(const wire::ProfilingResult& result, const nlohmann::json& body);
  Reply report_straggler(const nlohmann::json& report);
  // Tries again a store write the job's progress waits for (a round to store, a barrier to
  // release) once its retry period has passed; the server calls it periodically.
  void retry_store();

  const std::string& id() const { return id_; }
  // True when the job has no secret or `secret` is it.
  bool secret_matches(const std::string& secret) const;
  bool has_secret() const { return !secret_sha256_.empty(); }
  JobSummary summary() const;
  // What GET /jobs/{id} shows: the summary's JSON and the job's details, without its current
  // plans, which current_plan copies (round_to_json writes them off the event loop).
  nlohmann::json status() const;
  std::optional<Round> current_plan() const;
  // "registering", "running", "done" or "failed".
  std::string state() const;
  // Done or failed: no rank will be answered anything new.
  bool finished() const;
  // Answers every rank waiting on the barrier with `reply` (the job is about to be deleted).
  void release_waiters(const Reply& reply);

  // Seconds since any rank of the job last sent a request (registration, schedule, result).
  double idle_s() const;
  // Rounds the scheduler made so far.
  std::size_t rounds() const { return static_cast<std::size_t>(computed()); }
  // The memory the job holds (job_memory_bytes of its ranks and instructions; a job restored
  // unusable holds none).
  std::uint64_t memory_bytes() const {
    return job_memory_bytes(static_cast<long>(ranks_.size()), instructions_);
  }
  // What a stored job (StoredJob::info) will hold once restored.
  static std::uint64_t stored_memory_bytes(const nlohmann::json& stored_info);
  // Called with the milliseconds of each barrier release from now on (the server's share).
  void on_release(std::function<void(double)> observe) { on_release_ = std::move(observe); }

 private:
  // The stored job info's field holding the digest of the job's secret.
  static constexpr const char* kSecretField = "secret_sha256";
  // ... and the instructions of a round of its plans.
  static constexpr const char* kInstructionsField = "planned_instructions";
  static std::size_t stored_instructions(const nlohmann::json& stored_info);
  Job(Store& store, std::string job_id, wire::JobInfo info, JobSettings settings, bool);
  // One report per rank, by rank.
  using RankResults = std::vector<std::optional<wire::ProfilingResult>>;
  // A round the job still holds: its plans, whether its barrier was released, its results.
  struct HeldRound {
    Round plans;
    bool released = false;
    RankResults results;
    int results_in = 0;
  };
  // Rounds held in memory: the current one and the one before (where a retried report of a
  // rank's last round is found). Older rounds live on as the measurements they gave, and in the
  // store (for a history-free scheduler, only as those measurements: Scheduler::history_free).
  static constexpr std::size_t kHeldRounds = 2;
  // Barrier release times kept for GET /jobs/{id}: the latest ones.
  static constexpr std::size_t kReleaseTimesShown = 1000;
  int computed() const { return first_held_ + static_cast<int>(held_.size()); }
  // The round if it is held, else nullptr.
  HeldRound* held(int round);
  const HeldRound* held(int round) const;
  // Holds a new round, letting go of the oldest beyond kHeldRounds.
  void hold(Round plans, bool released);
  // Every rank reported a window of `round` (with `plans`): its measurement becomes the job's
  // latest (measured_). `final_window`: which window of the final round after its first it is
  // (0: the round's first).
  void record_measurement(int round, const Round& plans, const RankResults& results,
                          int final_window = 0);
  // Adds what measured window `m` saved to measured_.saved_j (JobMeasurements), unless counted.
  void count_saved(const RoundMeasurement& m, int final_window);
  // A report of a later window of the final round (wire::ProfilingResult::final_window): once
  // every rank's is in, measured and counted as the round's first was.
  Reply report_final_window(const wire::ProfilingResult& result);
  // Stores measured_ (StoredJob::measurements: what export-job and a restart read); a failure is
  // logged, and the next measured round stores them again.
  void store_measurements();
  // Drops a history-free job's rounds before the held ones from the store, with the
  // measurements so far; a failure is logged and tried again at the next round.
  void compact_store();
  // Takes the scheduler made from start_spec (null: fails the job with `error`); false when the
  // job failed.
  bool install(std::unique_ptr<Scheduler> scheduler, const std::string& error);
  // start_spec, make_scheduler and install in one go (a restored job, before it replays its
  // rounds); false when the job failed.
  bool start_scheduler();
  bool replay_round(const StoredJob& stored, std::size_t index);
  // Plans the next round (Scheduler::next, or `made` when it was made already), stores, holds
  // and releases it; a scheduler that throws fails the job.
  void compute_round(std::optional<MadeRound> made = std::nullopt);
  void finish_round(int round);
  bool already_acknowledged(const wire::ProfilingResult& result, int round) const;
  void try_release(int round);
  void fail(const std::string& message);
  // Runs a store write the job's progress depends on. False when it failed: it is tried again
  // (retry_store, a later request) after kStoreRetryPeriod, for JobSettings::store_retry_s;
  // then, or at once for a failure other than the store's (out of memory), the job fails with
  // the reason, which every waiting rank receives.
  bool persist(const std::string& what, const std::function<void()>& write);
  // Stores the round the scheduler made last (unstored_) and holds and releases it.
  void store_next_round();
  void restore_history(const StoredJob& stored);
  // Sets the last activity to a time the store kept (StoredJob::active_at).
  void active_since(double unix_seconds);
  wire::FrequencySchedule schedule_for(int rank, int round) const;
  // The schedule answer of `rank` as JSON text; `cache` maps a plan to its serialized rest.
  std::string schedule_text(int rank, int round,
                            std::map<const StagePlan*, std::string>& cache) const;
  std::vector<StageResult> aggregate(const RankResults& results) const;
  int registered() const { return registered_; }
  // Holds `rank` and its body; registered() counts it once.
  void set_rank(const wire::RankInfo& rank, const nlohmann::json& body);
  // "<field>: N is out of range for world_size W".
  std::string rank_out_of_range(const std::string& field, int rank) const;
  // Why `rank` is not a rank of this job (rank or its pp/dp/tp ranks out of range); "" if it is.
  std::string rank_problem(const wire::RankInfo& rank) const;

  Store& store_;
  std::string id_;
  wire::JobInfo info_;
  JobSettings settings_;
  std::string secret_sha256_;         // "" = no secret
  std::size_t instructions_ = 0;      // in a round of its plans (memory_bytes)
  mutable std::string known_secret_;  // the secret itself, once a request proved it
  std::vector<std::optional<wire::RankInfo>> ranks_;
  std::vector<nlohmann::json> rank_bodies_;
  int registered_ = 0;  // ranks_ that hold a value
  int simulated_ = 0;   // ... whose GPU is simulated (wire::RankInfo::simulated_gpu)
  std::unique_ptr<Scheduler> scheduler_;
  bool starting_ = false;              // start_spec was taken; start has not come yet
  std::deque<HeldRound> held_;         // rounds first_held_, first_held_ + 1, ...
  std::optional<MadeRound> unstored_;  // the next round, made, until the store took it
  // Since when the job's store writes fail (none: they do not), and when to try again.
  std::optional<std::chrono::steady_clock::time_point> store_failing_since_;
  std::chrono::steady_clock::time_point next_store_try_{};
  int first_held_ = 0;
  JobMeasurements measured_;  // as of the latest round with every result in
  // Windows of the final round after its first, by number, until every rank's is in (the
  // latest kHeldRounds numbers: a rank that stopped reporting holds no more).
  std::map<int, RankResults> final_windows_;
  std::vector<int> next_round_;  // per rank: one past its last reported round
  std::map<int, std::vector<std::pair<int, Responder>>> waiters_;  // round -> (rank, reply)
  struct Barrier {
    std::vector<char> asked;  // per rank
    int count = 0;
  };
  std::map<int, Barrier> asked_;  // round -> ranks that asked for it
  std::string error_;
  // The latest released rounds since this process started: milliseconds from the last rank's
  // request to every answer written (the server's share of the round latency).
  std::deque<double> release_ms_;
  std::function<void(double)> on_release_;
  std::size_t stragglers_reported_ = 0;
  int top_clock_ = 0;  // the ranks' highest common SM clock, once the scheduler started
  std::chrono::steady_clock::time_point last_activity_ = std::chrono::steady_clock::now();
};

}  // namespace perseus::server
