#include "cli/common.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include "perseus/baselines/envpipe.hpp"
#include "perseus/plan/saving_error.hpp"
#include "perseus/profile/csv.hpp"
#include "perseus/profile/measurement_error.hpp"
#include "perseus/profile/plausibility.hpp"
#include "perseus/schedule/catalog.hpp"
#include "perseus/schedule/schedule_file.hpp"
#include "perseus/util/text.hpp"

namespace perseus::cli {

void require(bool ok, const std::string& what) {
  if (!ok) throw Error(what);
}

CLI::Validator output_directory() {
  return CLI::Validator(
      [](std::string& path) -> std::string {
        const std::string ext = std::filesystem::path(path).extension().string();
        const bool file_like =
            ext == ".csv" || ext == ".json" || ext == ".txt" || ext == ".svg" || ext == ".html";
        if (!file_like || std::filesystem::is_directory(path)) return {};
        return "'" + path + "' looks like a file name (" + ext +
               "), but this names the directory the outputs are written into; give a directory, "
               "e.g. " +
               std::filesystem::path(path).stem().string() + "/";
      },
      "DIR");
}

namespace {

// Runs a plausibility check unless the user insisted; its error says how to insist.
template <typename F>
void unless_allowed(bool allow_implausible, F&& check) {
  profile::check_unless_allowed(allow_implausible, "--allow-implausible uses it anyway", check);
}

}  // namespace

profile::Profile read_profile(const std::string& path, bool allow_implausible) {
  profile::Profile prof = profile::read_profile_csv(path);
  unless_allowed(allow_implausible, [&] { profile::check_plausible(prof); });
  return prof;
}

nlohmann::json profile_json(const profile::Profile& profile) {
  const ProfileRanges r = profile_ranges(profile);
  const std::string note = uneven_clocks_note(profile);
  return {{"stages", profile.num_stages()},
          {"instructions", profile.instructions(0)},
          {"clocks_per_instruction", {r.clocks.lo, r.clocks.hi}},
          {"clock_mhz", {r.mhz.lo, r.mhz.hi}},
          {"uneven_clocks", note.empty() ? nlohmann::json() : nlohmann::json(note)},
          {"time_s", {r.time.lo, r.time.hi}},
          {"energy_j", {r.energy.lo, r.energy.hi}},
          {"measurement_error", profile::describe(profile::measurement_error(profile))}};
}

void print_measurement_error(const profile::Profile& profile, const char* prefix) {
  for (const std::string& line : profile::describe(profile::measurement_error(profile))) {
    std::printf("%s%s\n", prefix, line.c_str());
  }
}

std::string token_from_file(const std::string& path) {
  std::ifstream in(path);
  std::string token;
  require(in && std::getline(in, token), "--token-file: cannot read " + path);
  while (!token.empty() && std::isspace(static_cast<unsigned char>(token.back()))) token.pop_back();
  require(!token.empty(), "--token-file: " + path + " has an empty first line");
  return token;
}

ProfileRanges profile_ranges(const profile::Profile& prof) {
  const auto& first_rows = prof.all().begin()->second;
  const profile::Measurement& m0 = first_rows.front();
  ProfileRanges r{{first_rows.size(), first_rows.size()},
                  {m0.frequency_mhz, m0.frequency_mhz},
                  {m0.time_s, m0.time_s},
                  {m0.energy_j, m0.energy_j}};
  for (const auto& [key, rows] : prof.all()) {
    r.clocks.add(rows.size());
    for (const profile::Measurement& m : rows) {
      r.mhz.add(m.frequency_mhz);
      r.time.add(m.time_s);
      r.energy.add(m.energy_j);
    }
  }
  return r;
}

std::string clocks_text(const ProfileRanges& r) {
  std::string count = std::to_string(r.clocks.lo);
  if (r.clocks.hi != r.clocks.lo) count += ".." + std::to_string(r.clocks.hi);
  return count + " clocks (" + std::to_string(r.mhz.hi) + ".." + std::to_string(r.mhz.lo) + " MHz)";
}

std::string profile_shape(const profile::Profile& prof) {
  return std::to_string(prof.num_stages()) + " stage" + (prof.num_stages() == 1 ? "" : "s") +
         " x " + join(prof.instructions(0), "/") + " x " + clocks_text(profile_ranges(prof));
}

std::string uneven_clocks_note(const profile::Profile& prof) {
  const std::size_t most = profile_ranges(prof).clocks.hi;
  std::vector<std::string> fewer;
  for (const auto& [key, rows] : prof.all()) {
    if (rows.size() == most) continue;
    Span<int> mhz{rows.front().frequency_mhz, rows.front().frequency_mhz};
    for (const auto& m : rows) mhz.add(m.frequency_mhz);
    fewer.push_back("stage " + std::to_string(key.first) + " " + key.second + " has " +
                    std::to_string(rows.size()) + " clocks (" + std::to_string(mhz.hi) + ".." +
                    std::to_string(mhz.lo) + " MHz)");
  }
  if (fewer.empty()) return "";
  const std::size_t shown = std::min<std::size_t>(fewer.size(), 3);
  std::string note = join(std::vector<std::string>(fewer.begin(), fewer.begin() + shown), ", ");
  if (fewer.size() > shown) note += " and " + std::to_string(fewer.size() - shown) + " more";
  return note + "; the most is " + std::to_string(most) +
         " (a truncated profile, or a sweep that stopped early?)";
}

void check_blocking_power(const profile::Profile& profile, double watts, bool allow_implausible) {
  unless_allowed(allow_implausible,
                 [&] { profile::check_blocking_power(profile, watts, "--blocking-power"); });
}

double percent(double part, double whole) {
  return 100.0 * part / whole;
}

void add_schedule_options(CLI::App* cmd, ScheduleOptions& o, const std::string& default_note) {
  cmd->add_option("--schedule", o.name,
                  join(schedule::schedule_names()) + " (" + default_note + ")");
  cmd->add_option("--virtual-stages", o.virtual_stages,
                  "Stages per GPU of an interleaved or V-shaped schedule (default 2 for those)");
  cmd->add_option("--schedule-file", o.file,
                  "Per-rank action lists in PyTorch's notation (CSV as torch writes it, or JSON)");
}

namespace {

schedule::Schedule schedule_from_file(const ScheduleOptions& o, int num_stages,
                                      int num_microbatches) {
  require(o.name.empty() && o.virtual_stages == 0,
          "give --schedule-file or --schedule/--virtual-stages, not both");
  auto sched = naming("--schedule-file", [&] { return schedule::read_schedule_file(o.file); });
  require(num_stages <= 0 || sched.num_stages == num_stages,
          o.file + ": the schedule has " + std::to_string(sched.num_stages) +
              " stages but the profile has " + std::to_string(num_stages));
  require(num_microbatches <= 0 || sched.num_microbatches == num_microbatches,
          o.file + ": the schedule runs " + std::to_string(sched.num_microbatches) +
              " microbatches, not " + std::to_string(num_microbatches) + " (--microbatches)");
  return sched;
}

}  // namespace

schedule::Schedule options_schedule(const ScheduleOptions& o, int num_stages,
                                    int num_microbatches) {
  if (!o.file.empty()) return schedule_from_file(o, num_stages, num_microbatches);
  return naming("--schedule", [&] {
    return schedule::make_schedule(o.name.empty() ? "1f1b" : o.name, num_stages, num_microbatches,
                                   o.virtual_stages);
  });
}

void require_microbatches(int microbatches, const ScheduleOptions& o, const std::string& what) {
  require(microbatches > 0 || (microbatches == 0 && !o.file.empty()),
          "--microbatches is required " + what + " and must be positive (or give --schedule-file)");
}

schedule::Schedule resolve_schedule(const ScheduleOptions& o, const profile::Profile& profile,
                                    int num_stages, int num_microbatches) {
  if (o.file.empty() && o.name == "envelope") {
    return naming("--schedule", [&] {
      return baselines::profile_schedule(o.name, profile, num_stages, num_microbatches,
                                         o.virtual_stages);
    });
  }
  return options_schedule(o, num_stages, num_microbatches);
}

SavingErrorOf saving_error_of(const profile::Profile& profile, const schedule::Schedule& schedule,
                              const std::vector<plan::FrequencyPlan>& plans,
                              double blocking_power_w) {
  return [&profile, &schedule, &plans, blocking_power_w,
          all_max = plan::all_max_plan(profile, schedule)](std::size_t i) {
    return plan::saving_error(profile, schedule, plans.at(i), all_max, blocking_power_w);
  };
}

std::vector<ComparisonField> comparison_fields(const plan::Evaluation& ev,
                                               const plan::Evaluation& all_max,
                                               const plan::SavingError& error) {
  std::vector<ComparisonField> fields = {
      {"time_s", ev.time_s, 6},
      {"energy_j", ev.energy_j, 4},
      {"all_max_time_s", all_max.time_s, 6},
      {"all_max_energy_j", all_max.energy_j, 4},
      {"energy_saving_percent", percent(all_max.energy_j - ev.energy_j, all_max.energy_j), 3}};
  if (error.standard_error) {
    fields.push_back({"energy_saving_stderr_percent", 100.0 * *error.standard_error, 3});
  }
  if (error.pooling_bound) {
    fields.push_back({"energy_saving_pooling_bound_percent", 100.0 * *error.pooling_bound, 3});
  }
  fields.push_back({"slowdown_percent", percent(ev.time_s - all_max.time_s, all_max.time_s), 3});
  return fields;
}

void print_comparison(const plan::Evaluation& ev, const plan::Evaluation& all_max, std::FILE* to,
                      const plan::SavingError& error) {
  for (const auto& f : comparison_fields(ev, all_max, error)) {
    std::fprintf(to, "%s %.*f\n", f.key, f.decimals, f.value);
  }
}

nlohmann::json comparison_json(const plan::Evaluation& ev, const plan::Evaluation& all_max,
                               const plan::SavingError& error) {
  nlohmann::json j = nlohmann::json::object();
  for (const auto& f : comparison_fields(ev, all_max, error)) j[f.key] = f.value;
  return j;
}

void add_json_flag(CLI::App* cmd, bool& json) {
  cmd->add_flag("--json", json,
                "Print the summary as one JSON object instead of text (fields: docs/formats.md)");
}

void print_json(const nlohmann::json& summary) {
  std::printf("%s\n", summary.dump(2).c_str());
}

std::FILE* summary_stream(const std::string& out) {
  return out == "-" ? stderr : stdout;
}

double blocking_power_of(const plan::Plan& plan, double given) {
  return plan::blocking_power_for(plan, std::isnan(given) ? std::nullopt : std::optional(given))
      .value_or(-1.0);
}

double plan_blocking_power(const plan::Plan& plan, double given, const profile::Profile& profile,
                           bool allow_implausible) {
  double watts = blocking_power_of(plan, given);
  require(watts >= 0.0 && std::isfinite(watts),
          "--blocking-power is required (watts, >= 0) unless the plan JSON carries it");
  check_blocking_power(profile, watts, allow_implausible);
  return watts;
}

int PlanChoice::count() const {
  return index.has_value() + time.has_value() + max_slowdown.has_value() + fastest + min_energy;
}

void add_plan_choice(CLI::App* cmd, PlanChoice& c, const std::string& scope) {
  cmd->add_option("--index", c.index, scope + "the plan with this index (any row)");
  cmd->add_option("--time", c.time, scope + "the cheapest plan finishing within this many seconds");
  cmd->add_option("--max-slowdown", c.max_slowdown,
                  scope + "the cheapest plan at most this much slower than all-max (5%)");
  cmd->add_flag("--fastest", c.fastest, scope + "the fastest plan (the default)");
  cmd->add_flag("--min-energy", c.min_energy, scope + "the plan with the least energy");
}

void check_plan_choice(const PlanChoice& c) {
  require(c.count() <= 1,
          "give at most one of --index, --time, --max-slowdown, --fastest, --min-energy");
  require(!c.time || (*c.time > 0.0 && std::isfinite(*c.time)),
          "--time must be a positive number of seconds");
  if (c.max_slowdown)
    naming("--max-slowdown", [&] { return plan::parse_slowdown(*c.max_slowdown); });
}

std::size_t choose_plan(const PlanChoice& c, const plan::StoredFrontier& f,
                        const plan::FrontierQuery& q) {
  check_plan_choice(c);
  if (c.index) return naming("--index", [&] { return plan::select_by_index(f, *c.index); });
  if (c.time) return naming("--time", [&] { return q.within_time(*c.time); });
  if (c.max_slowdown) {
    return naming("--max-slowdown",
                  [&] { return q.within_slowdown(plan::parse_slowdown(*c.max_slowdown)); });
  }
  return c.min_energy ? q.min_energy() : q.fastest();
}

emulate::ClusterSpec cluster_spec(std::optional<int> pipelines, std::optional<long> gpus,
                                  int tensor_parallel, int stages, std::optional<int> fallback) {
  require(!(pipelines && gpus), "give either --pipelines or --gpus, not both");
  require(pipelines || gpus || fallback, "--pipelines or --gpus is required");
  emulate::ClusterSpec spec{pipelines ? *pipelines : fallback.value_or(0), tensor_parallel};
  if (gpus) {
    long per_pipeline = static_cast<long>(stages) * tensor_parallel;
    require(*gpus > 0 && *gpus % per_pipeline == 0,
            "--gpus " + std::to_string(*gpus) + " is not a positive multiple of stages x " +
                "tensor-parallel = " + std::to_string(per_pipeline));
    spec.pipelines = static_cast<int>(*gpus / per_pipeline);
  }
  return spec;  // emulate::check_cluster checks the counts
}

baselines::PlanOnProfile read_plan_for(const std::string& path, const ScheduleOptions& given,
                                       int microbatches, const profile::Profile& prof) {
  require(microbatches >= 0, "--microbatches must be positive");
  if (given.file.empty()) {
    return baselines::read_plan_for(path, {given.name, microbatches, given.virtual_stages},
                                    "--schedule", prof);
  }
  plan::Plan p = plan::read_plan_file(path);
  auto sched = options_schedule(given, p.num_stages, microbatches);
  baselines::check_plan_for(p, sched, prof, path);
  return {std::move(p), std::move(sched)};
}

}  // namespace perseus::cli
