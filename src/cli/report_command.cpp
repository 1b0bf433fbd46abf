// `perseus report`: one self-contained HTML report (frontier with every baseline, the timeline
// of one plan, the straggler sweep, tables) plus each chart as an SVG file. Runs on the embedded
// default (a synthesized profile) or a profile CSV; plans the frontier in-process unless an
// existing frontier directory is given.
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <string_view>

#include "cli/commands.hpp"
#include "cli/common.hpp"
#include "cli/report_inputs.hpp"
#include "perseus/baselines/envpipe.hpp"
#include "perseus/baselines/uniform.hpp"
#include "perseus/baselines/zeus.hpp"
#include "perseus/emulate/cluster.hpp"
#include "perseus/emulate/timeline.hpp"
#include "perseus/plan/frontier_store.hpp"
#include "perseus/plan/solver.hpp"
#include "perseus/profile/gpu_model.hpp"
#include "perseus/profile/measurement_error.hpp"
#include "perseus/report/html.hpp"
#include "perseus/report/svg.hpp"
#include "perseus/util/files.hpp"
#include "perseus/util/json_fields.hpp"
#include "perseus/util/text.hpp"

namespace perseus::cli {

namespace {

namespace fs = std::filesystem;
using report::num;

constexpr int kPipelines = 16;  // the published emulation's cluster, when the user gives none
constexpr int kAssumedTensorParallel = 8;  // ... and its GPUs per stage

plan::TimeEnergy time_energy(const plan::Evaluation& e) {
  return {e.time_s, e.energy_j};
}

// A saving's error in points, as the report shows it.
report::SavingErrorPoints in_points(const plan::SavingError& e) {
  auto points = [](std::optional<double> f) { return f ? std::optional(100.0 * *f) : f; };
  return {points(e.standard_error), points(e.pooling_bound)};
}

// How far a baseline's saving may be off given the profile's errors (none without them).
report::SavingErrorPoints baseline_error(const Inputs& in, const plan::FrequencyPlan& plan) {
  return in_points(plan::saving_error(in.profile, in.schedule, plan,
                                      plan::all_max_plan(in.profile, in.schedule),
                                      in.blocking_power_w));
}

report::NamedPoint envpipe_point(const Inputs& in, baselines::EnvPipePolicy policy,
                                 const std::string& name) {
  auto r = baselines::envpipe(in.profile, in.schedule, in.blocking_power_w, policy);
  return {name, time_energy(r.evaluation), r.stop_reason, baseline_error(in, r.plan)};
}

using ZeusFn = baselines::ZeusSweep (*)(const profile::Profile&, const schedule::Schedule&, double,
                                        double, double);

report::NamedCurve zeus_curve(const Inputs& in, double eta, ZeusFn fn, const std::string& name) {
  baselines::ZeusSweep sweep = fn(in.profile, in.schedule, in.blocking_power_w, eta, 25.0);
  report::NamedCurve c{name, {}, sweep.chosen, ""};
  for (const auto& p : sweep.points) c.points.push_back(time_energy(p.evaluation));
  if (sweep.chosen < sweep.points.size()) {
    const auto& limits = sweep.points[sweep.chosen].limits_w;
    auto [lo, hi] = std::minmax_element(limits.begin(), limits.end());
    std::string range = limits.empty() ? "-"
                        : *lo == *hi   ? num(*lo, 0) + " W"
                                       : num(*lo, 0) + "-" + num(*hi, 0) + " W";
    c.note = "power limit " + range + ", chosen by η = " + num(eta, 2) + " among " +
             std::to_string(sweep.points.size()) + " limits";
    c.chosen_error = baseline_error(in, sweep.points[sweep.chosen].plan);
  }
  return c;
}

std::string plan_name(std::size_t index, std::size_t fastest) {
  return "Frontier plan #" + std::to_string(index) + (index == fastest ? " (fastest)" : "");
}

plan::TimeEnergy row_value(const plan::FrontierQuery& q, std::size_t i) {
  return {q.row(i).evaluated_time_s, q.row(i).evaluated_energy_j};
}

// The chart draws the Pareto rows only (the solver's other rows are dominated).
report::FrontierChartData frontier_data(const Inputs& in, const plan::FrontierQuery& q, double eta,
                                        std::size_t shown) {
  report::FrontierChartData d;
  for (std::size_t i : q.pareto()) d.frontier.push_back(row_value(q, i));
  d.all_max = in.frontier.all_max;
  d.highlight = {plan_name(shown, q.fastest()), row_value(q, shown),
                 "the plan drawn in the timeline"};
  auto uniform = baselines::uniform_plan(in.profile, in.schedule);
  d.baselines = {
      {"Uniform",
       time_energy(plan::evaluate(in.profile, in.schedule, uniform, in.blocking_power_w)),
       "every instruction at its lowest-energy clock", baseline_error(in, uniform)}};
  if (baselines::envpipe_applies(in.schedule)) {  // else the report leaves it out
    d.baselines.push_back(envpipe_point(in, baselines::EnvPipePolicy::kGreedy, "EnvPipe greedy"));
    d.baselines.push_back(
        envpipe_point(in, baselines::EnvPipePolicy::kBalanced, "EnvPipe balanced"));
  }
  d.curves = {zeus_curve(in, eta, &baselines::zeus_global, "Zeus global"),
              zeus_curve(in, eta, &baselines::zeus_per_stage, "Zeus per-stage")};
  return d;
}

// Frontier plan i's row, with how far its saving may be off.
report::SavingRow perseus_row(const plan::FrontierQuery& q, const SavingErrorOf& error,
                              const std::string& label, std::size_t i) {
  return {label, row_value(q, i), "frontier plan #" + std::to_string(i), false,
          in_points(error(i))};
}

// The cheapest plan within `bound_s`, or a row saying there is none.
report::SavingRow perseus_within(const plan::FrontierQuery& q, const SavingErrorOf& error,
                                 const std::string& label, double bound_s) {
  auto i = q.within(bound_s);
  if (!i) {
    return {label, std::nullopt,
            "no plan is this fast: the fastest is " + num(100.0 * q.slowdown(q.fastest()), 2) +
                " % slower than all-max",
            false};
  }
  return perseus_row(q, error, label, *i);
}

// +0, +1, +2, +5, +10 % and the least energy; then each baseline above Perseus at its time.
std::vector<report::SavingRow> saving_rows(const plan::FrontierQuery& q,
                                           const report::FrontierChartData& d,
                                           const SavingErrorOf& error) {
  std::vector<report::SavingRow> rows;
  for (double pct : {0.0, 1.0, 2.0, 5.0, 10.0}) {
    rows.push_back(perseus_within(q, error, "Perseus within +" + num(pct, 0) + " %",
                                  q.all_max().time_s * (1.0 + pct / 100.0)));
  }
  rows.push_back(perseus_row(q, error, "Perseus, least energy", q.min_energy()));
  for (const auto& b : d.chosen_baselines()) {
    rows.push_back({b.name, b.value, b.note, true, b.error});
    rows.push_back(perseus_within(q, error, "Perseus at " + b.name + "'s time", b.value.time_s));
  }
  return rows;
}

// --measured NAME=FILE: a run's mean time and energy from `perseus simulate-training --out`
// (its final schedule, else its last window); `simulated` is set when they are a simulator's.
report::NamedPoint measured_run(const std::string& spec, bool& simulated) {
  auto eq = spec.find('=');
  require(eq != std::string::npos && eq > 0 && eq + 1 < spec.size(),
          "--measured: expected NAME=run.json, got '" + spec + "'");
  std::string name = spec.substr(0, eq), path = spec.substr(eq + 1);
  const JsonFields fields(path);
  const nlohmann::json run = fields.parse(read_file(path));
  const bool mine = run.is_object() && run.value("gpus", "") == "simulated";
  simulated = simulated || mine;
  for (const char* key : {"final_schedule", "last_window"}) {
    const nlohmann::json* mean = fields.optional(run, key);
    if (!mean) continue;
    return report::NamedPoint{name,
                              {fields.number_at(*mean, key, "mean_time_s"),
                               fields.number_at(*mean, key, "mean_energy_j")},
                              mine ? "simulated GPUs, true energy: " + path : path};
  }
  fields.fail("", "no final_schedule or last_window with mean_time_s and mean_energy_j (not a " +
                      std::string("simulate-training --out file?)"));
}

// A word of a shell command: as it is when it needs no quoting, else in single quotes.
std::string shell_word(const std::string& word) {
  const bool plain = !word.empty() && std::all_of(word.begin(), word.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) ||
           std::string_view("%+,-./:=@_").find(c) != std::string_view::npos;
  });
  if (plain) return word;
  std::string quoted = "'";
  for (char c : word) quoted += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return quoted + "'";
}

std::string command(const std::vector<std::string>& words) {
  std::string line;
  for (const auto& w : words) line += (line.empty() ? "" : " ") + shell_word(w);
  return line;
}

// Why the report's plan (its timeline's) is the one, from the option that chose it.
std::string chosen_by(const PlanChoice& c) {
  if (c.index) return "the plan you named (--index " + std::to_string(*c.index) + ")";
  if (c.time) return "the cheapest plan that finishes within " + num(*c.time, 4) + " s (--time)";
  if (c.max_slowdown) {
    return "the cheapest plan within +" + num(100.0 * plan::parse_slowdown(*c.max_slowdown), 2) +
           " % of all-max's iteration time (--max-slowdown)";
  }
  if (c.min_energy) return "the plan with the least energy, however slow (--min-energy)";
  return "the fastest plan, which saves energy without slowing training down (--max-slowdown "
         "2% picks the cheapest plan within +2 %)";
}

// The commands that take plan `index` to a training job: plan the frontier as this report did
// (unless it read one), export the plan, serve it.
std::vector<std::string> next_steps(const ReportArgs& a, const Inputs& in, std::size_t index) {
  std::vector<std::string> steps;
  std::string frontier = a.frontier;
  if (frontier.empty()) {
    std::string profile = a.profile;
    if (profile.empty()) {
      profile = "profile.csv";
      steps.push_back(command({"perseus", "profile", "synth", "--gpu", a.gpu, "--stages",
                               std::to_string(in.frontier.num_stages), "--out", profile}));
    }
    std::vector<std::string> plan = {
        "perseus",          "plan",
        "--profile",        profile,
        "--microbatches",   std::to_string(in.frontier.num_microbatches),
        "--blocking-power", num(in.blocking_power_w, 10)};
    if (!a.schedule.file.empty()) {
      plan.insert(plan.end(), {"--schedule-file", a.schedule.file});
    } else if (!a.schedule.name.empty()) {
      plan.insert(plan.end(), {"--schedule", a.schedule.name});
    }
    if (a.schedule.virtual_stages > 0) {
      plan.insert(plan.end(), {"--virtual-stages", std::to_string(a.schedule.virtual_stages)});
    }
    if (a.unit_time != 0.001) plan.insert(plan.end(), {"--unit-time", num(a.unit_time, 10)});
    if (a.allow_implausible) plan.push_back("--allow-implausible");
    frontier = "frontier";
    plan.insert(plan.end(), {"--out-dir", frontier});
    steps.push_back(command(plan));
  }
  steps.push_back(command({"perseus", "plan", "export", "--frontier", frontier, "--index",
                           std::to_string(index), "--out-dir", "plans"}));
  steps.push_back(command({"perseus", "serve", "--scheduler", "point-solution", "--scheduler-args",
                           R"({"solution_path": "plans"})"}));
  return steps;
}

report::ReportData report_data(const ReportArgs& a, const Inputs& in, const plan::FrontierQuery& q,
                               std::size_t shown, const std::vector<double>& factors) {
  const auto& f = in.frontier;
  const std::size_t fastest = q.fastest();
  report::ReportData d;
  d.settings = {
      {"profile", in.profile_label},
      {"blocking power", num(in.blocking_power_w, 2) + " W"},
      {"time unit", num(f.unit_time_s * 1e3, 3) + " ms"},
      {"frontier source", a.frontier.empty() ? "planned now (convex-hull cost model)" : a.frontier},
      {"Zeus cost", "η·E + (1 − η)·P_max·T, η = " + num(a.eta, 2)}};
  d.profile_error = profile::describe(profile::measurement_error(in.profile));
  d.schedule = f.schedule;
  d.num_stages = f.num_stages;
  d.num_microbatches = f.num_microbatches;
  d.frontier = frontier_data(in, q, a.eta, shown);
  d.savings = saving_rows(q, d.frontier,
                          saving_error_of(in.profile, in.schedule, f.plans, in.blocking_power_w));
  d.fastest = {plan_name(fastest, fastest), row_value(q, fastest),
               shown == fastest ? "the frontier's fastest plan, drawn in the timeline"
                                : "the frontier's fastest plan"};
  d.timeline = naming(plan_name(shown, fastest) + " on profile " + in.profile_label, [&] {
    return emulate::emulate(in.profile, in.schedule, f.plans[shown], in.blocking_power_w);
  });
  d.cluster_assumed = !a.pipelines && !a.gpus;
  // As `emulate cluster`: one GPU per stage unless told, except in the assumed cluster.
  const int tensor_parallel =
      a.tensor_parallel.value_or(d.cluster_assumed ? kAssumedTensorParallel : 1);
  d.cluster = cluster_spec(a.pipelines, a.gpus, tensor_parallel, f.num_stages, kPipelines);
  d.sweep = emulate::sweep_cluster(f, d.cluster, factors);
  d.chosen_by = chosen_by(a.choice);
  d.next_steps = next_steps(a, in, shown);
  return d;
}

fs::path html_dir(const ReportArgs& a) {
  fs::path dir = fs::path(a.out).parent_path();
  return dir.empty() ? fs::path(".") : dir;
}

fs::path svg_dir(const ReportArgs& a) {
  return a.svg_dir.empty() ? html_dir(a) : fs::path(a.svg_dir);
}

// Checks, without creating anything, that `dir` is a writable directory or can be created (its
// nearest existing ancestor is a writable directory); `option` names it in the error.
void check_creatable(const fs::path& dir, const std::string& option) {
  fs::path p = fs::absolute(dir);
  while (!fs::exists(p) && p.has_parent_path() && p != p.parent_path()) p = p.parent_path();
  require(fs::is_directory(p) && access(p.c_str(), W_OK) == 0,
          option + ": cannot write to " + p.string());
}

void write_outputs(const ReportArgs& a, const report::ReportData& d) {
  report::Charts charts = report::render_charts(d);
  std::vector<std::pair<fs::path, std::string>> files{
      {a.out, report::render_report(d, charts)},
      {svg_dir(a) / "frontier.svg", report::svg_file(charts.frontier)},
      {svg_dir(a) / "timeline.svg", report::svg_file(charts.timeline)},
      {svg_dir(a) / "sweep.svg", report::svg_file(charts.sweep)},
      {svg_dir(a) / "saving.svg", report::svg_file(charts.saving)}};
  ensure_writable_dir(html_dir(a));
  ensure_writable_dir(svg_dir(a));
  for (const auto& [path, text] : files) write_file_atomic(path, text);
  if (a.quiet) return;
  for (const auto& file : files) std::printf("wrote %s\n", file.first.string().c_str());
}

void run_report(const ReportArgs& a) {
  check_options(a);
  auto factors = naming("--factors", [&] { return emulate::parse_factors(a.factors); });
  std::vector<report::NamedPoint> measured;
  bool simulated = false;
  for (const auto& spec : a.measured) measured.push_back(measured_run(spec, simulated));
  Inputs in = load_inputs(a);
  // Fail on an unusable output location before the (possibly long) planning.
  check_creatable(html_dir(a), "--out");
  check_creatable(svg_dir(a), a.svg_dir.empty() ? "--out" : "--svg-dir");
  if (a.frontier.empty()) in.frontier = solve(in, a.unit_time, a.quiet);
  plan::FrontierQuery query(in.frontier);
  const std::size_t shown = choose_plan(a.choice, in.frontier, query);
  if (!a.quiet) std::printf("timeline: %s\n", query.describe(shown).c_str());
  report::ReportData data = report_data(a, in, query, shown, factors);
  data.measured_simulated = simulated;
  data.measured = std::move(measured);
  write_outputs(a, data);
}

}  // namespace

void add_report_command(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "report",
      "Write a self-contained HTML report (frontier, baselines, timeline, straggler "
      "sweep) and one SVG per chart");
  auto a = std::make_shared<ReportArgs>();
  cmd->add_option("--profile", a->profile,
                  "Stage profile CSV (default: the embedded default, a synthesized profile)");
  cmd->add_option("--gpu", a->gpu,
                  "GPU model of the embedded default: " + join(profile::gpu_model_names()))
      ->capture_default_str();
  cmd->add_option("--stages", a->stages, "Stages (default: 8, or the profile's)");
  cmd->add_option("--microbatches", a->microbatches, "Microbatches per iteration")
      ->capture_default_str();
  cmd->add_option("--blocking-power", a->blocking_power,
                  "Power (W) drawn while blocked (default: the GPU model's; required with "
                  "--profile unless --frontier)");
  cmd->add_option("--unit-time", a->unit_time, "Planning time unit in seconds")
      ->capture_default_str();
  add_schedule_options(cmd, a->schedule, "default 1f1b; envelope is EnvPipe's");
  cmd->add_option("--frontier", a->frontier,
                  "Use this frontier directory (from `perseus plan`) instead of planning");
  add_plan_choice(cmd, a->choice, "Timeline: ");
  cmd->add_option("--pipelines", a->pipelines,
                  "Straggler sweep: data-parallel pipelines D (default " +
                      std::to_string(kPipelines) + ", said to be assumed)");
  cmd->add_option("--gpus", a->gpus, "Straggler sweep: total GPUs (instead of --pipelines)");
  cmd->add_option("--measured", a->measured,
                  "NAME=run.json: a measured run (simulate-training --out) shown in a table; "
                  "repeat it, the first is the reference (e.g. all-max=allmax.json)");
  cmd->add_option("--tensor-parallel", a->tensor_parallel,
                  "Straggler sweep: GPUs per stage (T; default 1 as in emulate cluster, " +
                      std::to_string(kAssumedTensorParallel) + " in the assumed cluster)");
  cmd->add_option("--factors", a->factors, "Straggler slowdowns: first:last:step or a,b,c")
      ->capture_default_str();
  cmd->add_option("--eta", a->eta, "Zeus cost weight of energy, in [0, 1]")->capture_default_str();
  cmd->add_option("--out", a->out, "HTML file to write")->capture_default_str();
  cmd->add_option("--svg-dir", a->svg_dir,
                  "Where frontier.svg, timeline.svg, sweep.svg go (default: next to the HTML)");
  cmd->add_flag("--quiet", a->quiet, "Print nothing on success");
  cmd->add_flag("--allow-implausible", a->allow_implausible, kAllowImplausibleHelp);
  cmd->callback([cmd, a] {
    a->has_gpu = cmd->count("--gpu") > 0;
    a->has_stages = cmd->count("--stages") > 0;
    a->has_microbatches = cmd->count("--microbatches") > 0;
    a->has_schedule = cmd->count("--schedule") > 0;
    a->has_blocking_power = cmd->count("--blocking-power") > 0;
    run_report(*a);
  });
}

}  // namespace perseus::cli
