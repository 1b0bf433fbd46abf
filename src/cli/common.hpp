// Helpers shared by the command implementations in src/cli/: option checks, error prefixes, the
// --schedule option (whose "envelope" needs the profile) and the comparison with all-max.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdio>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "perseus/baselines/plan_for_profile.hpp"
#include "perseus/emulate/cluster.hpp"
#include "perseus/plan/evaluate.hpp"
#include "perseus/plan/frontier_query.hpp"
#include "perseus/plan/plan_io.hpp"
#include "perseus/plan/saving_error.hpp"
#include "perseus/profile/profile.hpp"
#include "perseus/schedule/catalog.hpp"
#include "perseus/schedule/schedule.hpp"
#include "perseus/util/error.hpp"

namespace perseus::cli {

// --allow-implausible (every command that reads a profile or a blocking power).
inline constexpr const char* kAllowImplausibleHelp =
    "Use a profile or blocking power that fails the plausibility checks (power per row "
    "5..2000 W, clocks 50..5000 MHz, blocking power below the highest instruction power)";

// Reads and validates a profile CSV and, unless `allow_implausible`, checks it is plausible for
// one GPU (profile::check_plausible); the error then says how to insist.
profile::Profile read_profile(const std::string& path, bool allow_implausible);
// Prints how well a measured profile's energies are known (profile::describe), one line each
// after `prefix`; nothing for a profile without error columns.
void print_measurement_error(const profile::Profile& profile, const char* prefix);
// The profile's shape in a command's --json summary: stages, instructions,
// clocks_per_instruction and clock_mhz ([least, most]), uneven_clocks (uneven_clocks_note, null
// when even), time_s and energy_j ([least, most] over rows), measurement_error (the lines
// print_measurement_error prints).
nlohmann::json profile_json(const profile::Profile& profile);
// Smallest and largest of a set of values.
template <typename T>
struct Span {
  T lo, hi;
  void add(T x) {
    lo = std::min(lo, x);
    hi = std::max(hi, x);
  }
};
// Ranges over a (validated, so non-empty) profile.
struct ProfileRanges {
  Span<std::size_t> clocks;  // clocks per (stage, instruction)
  Span<int> mhz;
  Span<double> time, energy;
};
ProfileRanges profile_ranges(const profile::Profile& profile);
// "38 clocks (1410..855 MHz)", or "30..38 clocks (...)" when the counts differ.
std::string clocks_text(const ProfileRanges& r);
// "4 stages x forward/backward x 38 clocks (1410..855 MHz)": what a command that plans says of
// its profile, so that a profile truncated at a line boundary (fewer stages) shows.
std::string profile_shape(const profile::Profile& profile);
// Where some (stage, instruction) has fewer clocks than the most any has: "stage 3 backward has
// 19 clocks (1410..1140 MHz), the most is 38 (a truncated profile, or a sweep that stopped
// early?)"; "" when every one has as many.
std::string uneven_clocks_note(const profile::Profile& profile);
// The blocking power's plausibility against the profile (profile::check_blocking_power).
void check_blocking_power(const profile::Profile& profile, double watts, bool allow_implausible);

// The cluster token in a --token-file: its first line, trailing white space dropped. Throws
// perseus::Error naming --token-file when it cannot be read or the line is empty.
std::string token_from_file(const std::string& path);

// Throws perseus::Error(what) unless ok.
void require(bool ok, const std::string& what);

// The check of every --out-dir (alias --out): a path that does not exist yet and ends like a
// file's name (.csv, .json, .txt, .svg, .html) is refused, as `--out frontier.csv` would make a
// directory of that name; an existing directory is taken as it is.
CLI::Validator output_directory();

// Runs `f`, prefixing the message of a perseus::Error it throws with `prefix` (an option or file
// the library's message does not name).
template <typename F>
auto naming(const std::string& prefix, F&& f) {
  try {
    return f();
  } catch (const Error& e) {
    throw Error(prefix + ": " + e.what());
  }
}

double percent(double part, double whole);

// The schedule options every planning command takes: --schedule NAME, --virtual-stages V and
// --schedule-file PATH (a schedule in PyTorch's notation, schedule_file.hpp).
struct ScheduleOptions {
  std::string name;        // empty: not given
  int virtual_stages = 0;  // 0: the schedule's default
  std::string file;        // empty: not given
};
void add_schedule_options(CLI::App* cmd, ScheduleOptions& o, const std::string& default_note);

// The schedule the options give without a profile: a --schedule-file as read (its stage and
// microbatch counts must equal `num_stages` and `num_microbatches` where those are positive), or
// the named schedule (default 1f1b) from schedule::make_schedule. Errors name the option.
schedule::Schedule options_schedule(const ScheduleOptions& o, int num_stages, int num_microbatches);
// options_schedule, where "envelope" is EnvPipe's schedule for this profile
// (baselines::envelope_schedule).
schedule::Schedule resolve_schedule(const ScheduleOptions& o, const profile::Profile& profile,
                                    int num_stages, int num_microbatches);
// --microbatches must be positive, or absent (0) when a --schedule-file gives the count; the error
// says `what` needs it.
void require_microbatches(int microbatches, const ScheduleOptions& o, const std::string& what);

// How far each frontier plan's saving against all-max may be off given its profile's
// measurement errors (plan::saving_error, fractions), by its index in `plans`. The profile,
// schedule and plans must outlive it.
using SavingErrorOf = std::function<plan::SavingError(std::size_t)>;
SavingErrorOf saving_error_of(const profile::Profile& profile, const schedule::Schedule& schedule,
                              const std::vector<plan::FrequencyPlan>& plans,
                              double blocking_power_w);

// A plan's time_s, energy_j, the all-max reference, the energy saving and the slowdown in %, and
// where known how far the saving may be off (energy_saving_stderr_percent,
// energy_saving_pooling_bound_percent): what print_comparison prints, one `key value` line each,
// and comparison_json holds under the same keys.
struct ComparisonField {
  const char* key;
  double value;
  int decimals;
};
std::vector<ComparisonField> comparison_fields(const plan::Evaluation& ev,
                                               const plan::Evaluation& all_max,
                                               const plan::SavingError& error = {});
void print_comparison(const plan::Evaluation& ev, const plan::Evaluation& all_max,
                      std::FILE* to = stdout, const plan::SavingError& error = {});
nlohmann::json comparison_json(const plan::Evaluation& ev, const plan::Evaluation& all_max,
                               const plan::SavingError& error = {});

// --json: a command's summary as one JSON object on standard output instead of its text
// (docs/formats.md lists each command's fields).
void add_json_flag(CLI::App* cmd, bool& json);
void print_json(const nlohmann::json& summary);

// Where a command's summary goes: stderr when its output file is "-" (standard output carries
// the file), else stdout.
std::FILE* summary_stream(const std::string& out);

// --blocking-power when given (not NaN, its default), else the plan's own (a plan JSON's
// blocking_power_w when positive), else -1 (unknown).
double blocking_power_of(const plan::Plan& plan, double given);
// blocking_power_of(), required (a plan without one needs --blocking-power) and checked against
// the profile (check_blocking_power).
double plan_blocking_power(const plan::Plan& plan, double given, const profile::Profile& profile,
                           bool allow_implausible);

// How a command picks one plan of a frontier: at most one of --index N, --time S,
// --max-slowdown P% (against all-max), --fastest, --min-energy; the fastest when none is given.
// Every choice but --index is among the Pareto rows (plan::FrontierQuery).
struct PlanChoice {
  std::optional<long> index;
  std::optional<double> time;
  std::optional<std::string> max_slowdown;
  bool fastest = false, min_energy = false;

  int count() const;  // how many of the options were given
};
// Adds the five options to `cmd`; `scope` prefixes their help ("With --frontier: ").
void add_plan_choice(CLI::App* cmd, PlanChoice& choice, const std::string& scope = "");
// Checks what can be checked before the frontier exists (one choice at most, values in range).
void check_plan_choice(const PlanChoice& choice);
// The chosen row; errors name the option (a bad value, two choices, no plan within the bound).
std::size_t choose_plan(const PlanChoice& choice, const plan::StoredFrontier& frontier,
                        const plan::FrontierQuery& query);

// The straggler sweep's cluster: --pipelines D, or --gpus N (= D x stages x --tensor-parallel),
// not both; `fallback` pipelines when neither is given. Errors name the option.
emulate::ClusterSpec cluster_spec(std::optional<int> pipelines, std::optional<long> gpus,
                                  int tensor_parallel, int stages, std::optional<int> fallback);

// baselines::read_plan_for with the schedule options (`given` / `microbatches`, empty / 0 when not
// given); a --schedule-file is the schedule, checked as read_plan_for checks its own.
baselines::PlanOnProfile read_plan_for(const std::string& path, const ScheduleOptions& given,
                                       int microbatches, const profile::Profile& prof);

}  // namespace perseus::cli
