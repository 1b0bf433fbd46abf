// Pluggable frequency schedulers of the control-plane server (architecture section 7). A scheduler
// sees pure pipeline parallelism: one plan per pipeline position (pp_rank, a "stage" in Zeus's
// words), and one aggregated result per position (the job folds data and tensor parallelism: a
// position's ranks all get its plan, and their results aggregate as max time and summed energy).
// With a schedule that runs several model stages per GPU (interleaved, V-shaped), a position's
// plan covers all its stages, each instruction labelled "<kind>@<stage>" (wire::instruction_label).
// A job runs in rounds: the server asks next() for a round's plans, every rank runs them for a
// window of iterations and reports, and the server hands the aggregated results to observe() before
// asking for the next round.
//
// Schedulers must be deterministic functions of (job, arguments, observed results, straggler
// reports): after a restart the server rebuilds each job's scheduler by replaying its stored
// history through the same calls.
#pragma once

#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "perseus/schedule/schedule.hpp"
#include "perseus/util/clock_observation.hpp"
#include "perseus/util/error.hpp"

namespace perseus::server {

struct JobSpec {
  std::string job_id;
  int pp_degree = 1;
  int dp_degree = 1;
  int tp_degree = 1;
  // The pipeline stage each rank runs: the ranks' own pp_rank once they registered, Megatron's
  // order (tensor-parallel fastest, then data-parallel) before, a single rank's for the server's
  // default check (no job).
  std::vector<int> stage_of_rank;
  // SM clocks (MHz) every rank of the job supports, highest first.
  std::vector<int> available_frequencies;
  nlohmann::json args = nlohmann::json::object();  // scheduler arguments
  // The order the job's ranks run, when the job registered it (wire::JobInfo::pipeline_order, a
  // framework adapter's): schedulers plan for it instead of a schedule their arguments name.
  std::optional<schedule::Schedule> pipeline_order;
  // The job's own microbatch count (wire::JobInfo::num_microbatches): 1F1B with it when neither
  // the arguments nor pipeline_order name the schedule.
  std::optional<int> num_microbatches;
  // Where the scheduler writes its files (profiles, ...): the job's own folder, output_root (the
  // server's --output-dir) / job id. Relative "output" arguments resolve against it, and every
  // output must lie under it.
  std::filesystem::path output_dir;
  std::filesystem::path output_root;
  // Files the scheduler reads (plans, frontiers) must lie under it (the server's --data-dir);
  // relative paths resolve against it.
  std::filesystem::path data_dir;
};

// What one pipeline stage runs in one round.
struct StagePlan {
  std::vector<std::pair<std::string, int>> frequencies;  // (instruction, MHz), execution order
  std::optional<double> power_limit_w;  // power-limit schedulers: set this limit instead
};

using StagePlans = std::vector<StagePlan>;  // one per pipeline stage (pp_degree entries)

struct Round {
  StagePlans stages;
  // Plans for particular data-parallel pipelines (dp_rank -> per-stage plans), e.g. the
  // stragglers run their fastest plan while the others slow down. Pipelines that run the same
  // plans share them: a round holds, stores and serves each once, however many pipelines run it.
  std::map<int, std::shared_ptr<const StagePlans>> pipelines;
  bool done = false;  // the final round: clients keep these plans, report one window, stop
  // Iterations per reporting window the clients are asked for (none: their own report_every).
  std::optional<int> report_every;
};

// Results of one stage for one round, aggregated over the stage's ranks.
struct StageResult {
  std::vector<double> iter_time;    // per iteration: max over the stage's ranks
  std::vector<double> iter_energy;  // per iteration: sum over the stage's ranks
  // breakdown[instruction][iteration][occurrence]: max (time) and sum (energy) over ranks.
  std::map<std::string, std::vector<std::vector<double>>> time_breakdown;
  std::map<std::string, std::vector<std::vector<double>>> energy_breakdown;
  // Per instruction: standard error (J) of the window's mean energy of one occurrence, combined
  // over the stage's ranks; absent when some rank did not report one (e.g. a Zeus client).
  std::map<std::string, double> energy_stderr;
  // Per instruction: how far (J) that mean may be from its own where the attribution pooled its
  // power with other instructions' (wire::ProfilingResult), summed over the stage's ranks (the
  // same pooling errs alike on each); absent when some rank did not report one.
  std::map<std::string, double> energy_pooling_error;
  // Per instruction: the SM clock it ran at, over the stage's ranks (readings pooled); absent
  // when some rank did not report one (a simulated GPU, a Zeus client).
  std::map<std::string, ClockObservation> clocks;
  // Ranks whose GPU energy counter did not change during the window (wire::ProfilingResult's
  // energy_measured): while any is listed, the stage's energies are unknown, not the sums above.
  std::vector<int> unmeasured_ranks;
};

// What the plans a scheduler serves were planned to save against running at full clock (all-max),
// by the planner's evaluation: fractions.
struct PlannedSaving {
  double energy_saving = 0.0;
  double slowdown = 0.0;
  // What all-max would have run, by this evaluation, where the plans ran `time_s` and spent
  // `energy_j` (nullopt for a saving of 100 % or more, which says nothing of all-max).
  std::optional<double> all_max_energy_j(double energy_j) const {
    if (energy_saving >= 1.0) return std::nullopt;
    return energy_j / (1.0 - energy_saving);
  }
  double all_max_time_s(double time_s) const { return time_s / (1.0 + slowdown); }
};

class Scheduler {
 public:
  virtual ~Scheduler() = default;
  // The plans for the next round. Throws (any exception) on failure: the server reports the
  // message to every rank of the job and stops the job; other jobs are not affected.
  virtual Round next() = 0;
  // Results of the round that next() returned last, one per stage in stage order.
  virtual void observe(const std::vector<StageResult>& results) = 0;
  // A straggler report (POST /straggler/{job_id}); applies from the next round on. The default
  // rejects it: throws perseus::Error.
  virtual void report_straggler(const nlohmann::json& report);
  // Scheduler-specific status for GET /jobs/{id} (progress, chosen point, files written).
  virtual nlohmann::json status() const { return nlohmann::json::object(); }
  // Whether next() depends on the straggler reports alone: not on the results observed, nor on
  // how many rounds came before. The server then keeps only such a job's latest rounds in its
  // store, and after a restart rebuilds the scheduler from its straggler reports and those.
  virtual bool history_free() const { return false; }
  // What the plans of the latest round were planned to save (a frontier's evaluation of them);
  // none when the scheduler does not know.
  virtual std::optional<PlannedSaving> planned_saving() const { return std::nullopt; }
};

// Arguments that are valid on their own but cannot be judged without the job.
class DependsOnJob : public Error {
 public:
  using Error::Error;
};
// They do not fit the job's stage count (pp_degree): a plan or frontier for another pipeline
// depth, envelope warm-up counts for another number of stages.
class StageCountMismatch : public DependsOnJob {
 public:
  using DependsOnJob::DependsOnJob;
};
// They name no schedule, which only a job that registers its pipeline_order may leave out.
class ScheduleNotNamed : public DependsOnJob {
 public:
  using DependsOnJob::DependsOnJob;
};

// Creates a scheduler by name ("point-solution", "profiler", "frontier", "all-max",
// "zeus-global", "zeus-per-stage"); throws perseus::Error for unknown names and bad arguments
// (naming the argument).
std::unique_ptr<Scheduler> make_scheduler(const std::string& name, const JobSpec& job);
const std::vector<std::string>& scheduler_names();
// "expected one of point-solution, ...; Zeus aliases PointSolution, ..." for error messages.
std::string scheduler_choices();
// Whether make_scheduler knows `name` (a name above or a Zeus class-name alias).
bool known_scheduler(const std::string& name);
// Whether scheduler `name` takes the instruction order as arguments ("microbatches", "schedule",
// "virtual_stages"): every one but `frontier`, whose frontier holds it; false for unknown names.
bool takes_instruction_order(const std::string& name);

// Checks a scheduler's name and arguments before any rank registered, by building it for `job`
// with every plausible SM clock (kMinClockMhz..kMaxClockMhz) available, since the ranks' clocks
// are not known yet: at server start (`stages_known` false: the job is not known either, so
// DependsOnJob is tolerated: null) and at job registration (true). Returns the scheduler built;
// throws perseus::Error with the scheduler's reason.
std::unique_ptr<Scheduler> check_scheduler(const std::string& name, JobSpec job, bool stages_known);

}  // namespace perseus::server
