// Private to the server: the factories of the built-in schedulers (one .cpp each) and the pieces
// they share (argument readers, instruction order, uniform plans, window statistics).
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "perseus/plan/evaluate.hpp"
#include "perseus/schedule/schedule.hpp"
#include "perseus/server/scheduler.hpp"
#include "perseus/util/error.hpp"
#include "perseus/util/json_fields.hpp"

namespace perseus::server::schedulers {

// Factories; each validates job.args and throws perseus::Error naming the bad argument.
std::unique_ptr<Scheduler> make_point_solution(const JobSpec& job);
std::unique_ptr<Scheduler> make_all_max(const JobSpec& job);
std::unique_ptr<Scheduler> make_profiler(const JobSpec& job);
std::unique_ptr<Scheduler> make_frontier(const JobSpec& job);
std::unique_ptr<Scheduler> make_zeus_global(const JobSpec& job);
std::unique_ptr<Scheduler> make_zeus_per_stage(const JobSpec& job);

// Reads the fields of a JSON object with one-line errors: "<context>: <noun> 'name' must be ...".
// The constructor rejects a non-object (null counts as empty) and names outside `known`.
// Checks for number(): v > 0.
inline bool positive(double v) {
  return v > 0.0;
}
// Checks for number(): v >= 0.
inline bool non_negative(double v) {
  return v >= 0.0;
}

class ArgReader {
 public:
  // Messages read "<context>: field 'name': problem" (JsonFields, located()).
  ArgReader(std::string context, const nlohmann::json& args, std::vector<std::string> known);

  const std::string& context() const { return context_; }
  bool has(const std::string& name) const { return args_.contains(name); }
  // `name`, or `zeus_name` when the arguments give Zeus's name for it instead (both: refused),
  // so that a Zeus configuration runs unchanged.
  std::string alias(const std::string& name, const std::string& zeus_name) const;
  // The raw value; throws "... field 'name': missing" when absent.
  const nlohmann::json& at(const std::string& name) const;
  // An integer >= min; `fallback` when absent (required when there is no fallback).
  int integer(const std::string& name, int min, std::optional<int> fallback = {}) const;
  // A finite number satisfying `ok` (described by `requirement`, e.g. "a number > 0").
  double number(const std::string& name, bool (*ok)(double), const std::string& requirement,
                std::optional<double> fallback = {}) const;
  // true or false; `fallback` when absent.
  bool boolean(const std::string& name, bool fallback) const;
  // A non-empty string.
  std::string text(const std::string& name, std::optional<std::string> fallback = {}) const;
  // A sub-object read with the same context; its fields are named "name.field".
  ArgReader object(const std::string& name, std::vector<std::string> known) const;

  [[noreturn]] void fail(const std::string& name, const std::string& problem) const;
  // Runs f(); a perseus::Error it throws is rethrown as this field's problem.
  template <typename F>
  auto naming(const std::string& name, F&& f) const -> decltype(f());

 private:
  ArgReader(const ArgReader& parent, const std::string& name, std::vector<std::string> known);
  void check_known(std::vector<std::string> known) const;
  std::string path(const std::string& name) const;  // the field's path, "power_limits.step_w"

  std::string context_;
  JsonFields fields_;
  std::string parent_;  // the path of a sub-object ("power_limits"); empty at the top
  nlohmann::json args_;
};

template <typename F>
auto ArgReader::naming(const std::string& name, F&& f) const -> decltype(f()) {
  try {
    return f();
  } catch (const Error& e) {
    fail(name, e.what());
  }
}

// "scheduler 'name'", the context of every message of that scheduler.
std::string context_of(const std::string& scheduler);

// The arguments "microbatches" (required), "schedule" (default "1f1b") and "virtual_stages" (the
// stages each GPU runs; default the schedule's own) that name the instruction order, and the
// schedule they give on the job's pp_degree GPUs. A job that registered its order
// (JobSpec::pipeline_order) runs that order: the arguments may then be left out, and where given
// must name the same order (require_job_order).
extern const std::vector<std::string> kScheduleArgs;
std::vector<std::string> with_schedule_args(std::vector<std::string> known);
schedule::Schedule schedule_arg(const ArgReader& args, const JobSpec& job);
// Throws perseus::Error unless `sched` (what `where` plans for) is the order the job registered,
// action for action on every rank, naming the first difference; nothing when it registered none.
void require_job_order(const schedule::Schedule& sched, const JobSpec& job,
                       const std::string& where);
// Throws StageCountMismatch ("<where> has 4 GPUs (8 stages) but the job has pp_degree 2") unless
// `sched` runs on pp_degree GPUs.
void require_ranks(const schedule::Schedule& sched, int pp_degree, const std::string& where);

// The wire name of an instruction (wire::instruction_label): its kind, with its stage when the
// schedule runs several stages per GPU.
std::string instruction_label(const schedule::Schedule& sched, const schedule::Instruction& inst);
// Distinct instruction labels of one rank (GPU), sorted ("backward", "forward").
std::vector<std::string> instruction_names(const schedule::Schedule& sched, int rank);

// The highest available clock; throws when the job reports none.
int max_clock(const std::string& context, const JobSpec& job);
// Throws naming `where`, stage, position and clock when a clock is not available.
void check_clocks(const plan::FrequencyPlan& plan, const std::vector<int>& available,
                  const std::string& where);

// Per-rank plans (one per GPU of the pipeline, instructions labelled by instruction_label): the
// given clocks, or every instruction at `mhz`.
std::vector<StagePlan> stage_plans(const schedule::Schedule& sched, const plan::FrequencyPlan& p);
std::vector<StagePlan> uniform_plans(const schedule::Schedule& sched, int mhz);

// A file argument confined to the server's directories: relative paths resolve against the job's
// own output folder (outputs, JobSpec::output_dir) or the data directory (inputs); absolute paths
// must lie under that folder / the server's --data-dir; no '..' components; an output must name
// a file, not a folder. An input, and every member of an input
// directory, must resolve (links followed) under --data-dir to a regular file of at most
// kMaxInputFileBytes: no link out, no FIFO, socket or device, no huge file. Throws naming the
// argument.
inline constexpr std::uintmax_t kMaxInputFileBytes = 64u << 20;
std::filesystem::path output_path(const ArgReader& args, const char* name, const JobSpec& job,
                                  const std::string& path);
std::filesystem::path data_path(const ArgReader& args, const char* name, const JobSpec& job);

// Throws unless there is exactly one result per stage.
void check_results(const std::string& context, const std::vector<StageResult>& results, int stages);

// One stage's measurements over a window, without the first `skip` (warm-up) iterations; at
// least one iteration is always kept.
struct InstructionMean {
  double time_s = 0.0;    // one occurrence
  double energy_j = 0.0;  // one occurrence
};
struct StageWindow {
  std::size_t iterations = 0;  // counted iterations
  double iter_time_s = 0.0;    // sums over the counted iterations
  double iter_energy_j = 0.0;
  double busy_time_s = 0.0;  // the instructions' time and energy, summed the same way
  double busy_energy_j = 0.0;
  std::map<std::string, InstructionMean> instructions;

  double mean_iter_time() const { return iter_time_s / static_cast<double>(iterations); }
  double mean_iter_energy() const { return iter_energy_j / static_cast<double>(iterations); }
  double mean_busy_time() const { return busy_time_s / static_cast<double>(iterations); }
};
// Throws naming context, stage and instruction when a breakdown is missing or malformed.
StageWindow summarize(const std::string& context, const StageResult& result, int stage,
                      const std::vector<std::string>& instructions, std::size_t skip);
// summarize() for every rank (GPU), with each rank's instruction labels from `sched`.
std::vector<StageWindow> summarize_all(const std::string& context,
                                       const std::vector<StageResult>& results,
                                       const schedule::Schedule& sched, std::size_t skip);

// Reporting windows the energy counter measured. A real GPU's counter is refreshed every ~100 ms:
// a round whose longest window lasted under `min_window` seconds (a scheduler argument, 0.5 by
// default; 0: any) held too few refreshes to attribute, or none (its energies unknown). It is
// measured again, with the clients asked for enough iterations per window (Round::report_every,
// with a tenth to spare). Clients that do not follow (Zeus's) keep their windows, which are taken.
// A round in which some rank's counter did not change at all (StageResult::unmeasured_ranks: the
// counter is stuck, or the client's reads of it fail) is measured again too, up to
// kMaxUnmeasuredRounds rounds in a row, after which the job fails naming the ranks: energies that
// are unknown are never taken as 0 J.
class WindowLength {
 public:
  static constexpr double kDefaultMinS = 0.5;  // 5 refreshes of an H100's counter
  static constexpr double kSpare = 1.1;        // iterations asked for, over those just enough
  static constexpr int kMaxUnmeasuredRounds = 3;

  WindowLength() = default;
  explicit WindowLength(const ArgReader& args);
  // True when the round of `results` is to be measured again; throws perseus::Error once
  // kMaxUnmeasuredRounds rounds in a row went unmeasured.
  bool measure_again(const std::vector<StageResult>& results);
  // What to ask the clients for (none until a window was too short).
  std::optional<int> report_every() const { return report_every_; }
  nlohmann::json status() const;

 private:
  bool too_short(const std::vector<StageResult>& results);
  bool unmeasured(const std::vector<StageResult>& results);

  double min_s_ = kDefaultMinS;
  std::optional<int> report_every_;
  int unmeasured_rounds_ = 0;  // in a row
};

}  // namespace perseus::server::schedulers
