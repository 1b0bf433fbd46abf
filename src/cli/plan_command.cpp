// `perseus plan`: compute the frontier; `plan evaluate`: score a plan; `plan export`: write plans
// from a frontier directory as plan JSON, the reference list literal or Zeus's pairs.
#include <CLI/CLI.hpp>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <functional>
#include <memory>

#include "cli/commands.hpp"
#include "cli/common.hpp"
#include "perseus/plan/frontier_store.hpp"
#include "perseus/plan/plan_io.hpp"
#include "perseus/plan/planning.hpp"
#include "perseus/plan/saving_error.hpp"
#include "perseus/profile/csv.hpp"
#include "perseus/util/error.hpp"
#include "perseus/util/files.hpp"
#include "perseus/util/progress.hpp"
#include "perseus/util/text.hpp"

namespace perseus::cli {

namespace {

namespace fs = std::filesystem;

struct PlanArgs {
  std::string profile, out, cost_model = "convex-hull";
  ScheduleOptions schedule;
  int stages = 0, microbatches = 0, threads = 0;
  double blocking_power = -1.0, unit_time = 0.001, noise_factor = 1.0;
  bool quiet = false, allow_implausible = false, json = false;
};

struct EvaluateArgs {
  std::string profile, plan;
  ScheduleOptions schedule;
  int microbatches = 0;
  double blocking_power = std::nan("");  // not given
  bool allow_implausible = false, json = false;
};

struct ExportArgs {
  std::string frontier, out, format = "json";
  PlanChoice choice;
  std::optional<double> every;
};

// A fraction in points with two decimals ("-" when unknown).
std::string points(std::optional<double> fraction) {
  return fraction ? fixed(100.0 * *fraction, 2) : "-";
}

// One plan of the summary: its name ("fastest", "within +2%", "least energy"), row and how far
// its saving may be off.
struct SummaryRow {
  std::string name;
  std::size_t index;
  plan::SavingError error;
};

// The fastest plan, the cheapest within +1, +2, +5 and +10 % of all-max, and the plan with the
// least energy: Pareto rows only; with how far each saving may be off where the profile's rows
// say: its standard error, and the bound pooled rows put on it.
std::vector<SummaryRow> summary_rows(const plan::FrontierQuery& q, const SavingErrorOf& error_of) {
  std::vector<SummaryRow> rows = {{"fastest", q.fastest(), {}}};
  for (double pct : {1.0, 2.0, 5.0, 10.0}) {
    auto i = q.within(q.all_max().time_s * (1.0 + pct / 100.0));
    if (i && *i != q.fastest()) {
      rows.push_back({"within +" + std::to_string(static_cast<int>(pct)) + "%", *i, {}});
    }
  }
  rows.push_back({"least energy", q.min_energy(), {}});
  for (auto& row : rows) row.error = error_of(row.index);
  return rows;
}

// The summary as a table, all-max first, savings and their errors in points.
void print_summary(const plan::FrontierQuery& q, const std::vector<SummaryRow>& rows) {
  bool with_stderr = false, with_pooling = false;
  for (const auto& row : rows) {
    with_stderr = with_stderr || row.error.standard_error;
    with_pooling = with_pooling || row.error.pooling_bound.value_or(0.0) > 0.0;
  }
  std::printf("%zu Pareto-optimal plans (evaluated time and energy)\n", q.pareto().size());
  std::printf("%-22s %10s %12s %10s %10s%s%s\n", "plan", "time (s)", "energy (J)", "time +%",
              "saving %", with_stderr ? "  +- std. error" : "",
              with_pooling ? "  +- pooled rows (bound)" : "");
  const auto& all_max = q.all_max();
  std::printf("%-22s %10.4f %12.2f %10s %10s\n", "all-max", all_max.time_s, all_max.energy_j, "-",
              "-");
  for (const auto& [name, i, error] : rows) {
    const auto& r = q.row(i);
    std::printf("%-22s %10.4f %12.2f %+10.2f %10.2f", (name + " #" + std::to_string(i)).c_str(),
                r.evaluated_time_s, r.evaluated_energy_j, 100.0 * q.slowdown(i),
                100.0 * q.saving(i));
    if (with_stderr) std::printf(" %15s", points(error.standard_error).c_str());
    if (with_pooling) std::printf(" %24s", points(error.pooling_bound).c_str());
    std::printf("\n");
  }
}

nlohmann::json fraction_json(std::optional<double> fraction) {
  return fraction ? nlohmann::json(*fraction) : nlohmann::json();
}

// `perseus plan --json`: what the run planned and its summary rows (fractions, not points).
nlohmann::json summary_json(const PlanArgs& a, const profile::Profile& prof,
                            const schedule::Schedule& sched, const plan::PlannedFrontier& planned,
                            double seconds, const plan::FrontierQuery& q,
                            const std::vector<SummaryRow>& rows) {
  nlohmann::json plans = nlohmann::json::array();
  for (const auto& [name, i, error] : rows) {
    plans.push_back({{"name", name},
                     {"index", i},
                     {"time_s", q.row(i).evaluated_time_s},
                     {"energy_j", q.row(i).evaluated_energy_j},
                     {"slowdown", q.slowdown(i)},
                     {"saving", q.saving(i)},
                     {"saving_stderr", fraction_json(error.standard_error)},
                     {"saving_pooling_bound", fraction_json(error.pooling_bound)}});
  }
  return {{"profile", a.profile},
          {"profile_shape", profile_json(prof)},
          {"schedule", sched.name},
          {"microbatches", sched.num_microbatches},
          {"blocking_power_w", a.blocking_power},
          {"out_dir", a.out},
          {"plans", planned.frontier.points.size()},
          {"pareto_plans", q.pareto().size()},
          {"seconds", seconds},
          {"min_cuts", planned.frontier.min_cuts},
          {"stop_reason", planned.frontier.stop_reason},
          {"all_max", {{"time_s", q.all_max().time_s}, {"energy_j", q.all_max().energy_j}}},
          {"summary", plans}};
}

void run_plan(const PlanArgs& a) {
  require(!a.profile.empty(), "--profile is required");
  require(a.stages >= 0, "--stages must be positive");
  require_microbatches(a.microbatches, a.schedule, "to plan");
  require(a.blocking_power >= 0.0, "--blocking-power is required and must be >= 0 watts");
  require(!a.out.empty(), "--out-dir is required");
  require(std::isfinite(a.blocking_power), "--blocking-power must be a finite number of watts");
  require(a.unit_time > 0.0 && std::isfinite(a.unit_time),
          "--unit-time must be a positive number of seconds");
  require(a.noise_factor >= 1.0, "--noise-factor must be >= 1");
  require(a.threads >= 0, "--threads must be >= 0 (0: one per hardware thread)");
  auto cost_model = naming("--cost-model", [&] { return plan::parse_cost_model(a.cost_model); });
  auto start = std::chrono::steady_clock::now();
  // Inputs first, so that bad input leaves nothing on disk (not even parent directories).
  profile::Profile prof = read_profile(a.profile, a.allow_implausible);
  check_blocking_power(prof, a.blocking_power, a.allow_implausible);
  auto sched = resolve_schedule(a.schedule, prof, a.stages > 0 ? a.stages : prof.num_stages(),
                                a.microbatches);
  plan::PlanSettings settings{a.unit_time, a.blocking_power, cost_model, a.noise_factor};
  auto problem = plan::PlanProblem::build(prof, sched, settings);
  fs::path out(a.out);
  {
    // Fail on an unusable output location before the (possibly long) solve.
    StagingDir probe(out, "meta.json");
  }
  ProgressBar bar("planning", 0);
  const plan::PlannedFrontier planned = plan::plan_frontier(
      prof, std::move(problem), [&](long done, long total) { bar.update(done, total); },
      {.threads = plan::solver_threads(a.threads)});
  bar.finish();
  const auto& frontier = planned.frontier;
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  plan::write_frontier(out, planned.problem, frontier, {a.profile, planned.all_max, seconds});
  if (a.quiet && !a.json) return;
  const plan::StoredFrontier stored =
      plan::stored_frontier(planned.problem, frontier, planned.all_max);
  const plan::FrontierQuery query(stored);
  const auto rows =
      summary_rows(query, saving_error_of(prof, sched, stored.plans, a.blocking_power));
  if (a.json) return print_json(summary_json(a, prof, sched, planned, seconds, query, rows));
  std::printf("profile %s: %s; %s, %d microbatches\n", a.profile.c_str(),
              profile_shape(prof).c_str(), sched.name.c_str(), sched.num_microbatches);
  if (const std::string note = uneven_clocks_note(prof); !note.empty()) {
    std::printf("note: %s\n", note.c_str());
  }
  std::printf(
      "%zu plans in %.3f s (%s, %ld minimum cuts); stopped: %s\n"
      "wrote %s/{frontier.csv,plans.txt,meta.json}\n\n",
      frontier.points.size(), seconds, a.cost_model.c_str(), frontier.min_cuts,
      frontier.stop_reason.c_str(), a.out.c_str());
  print_measurement_error(prof, "profile ");
  print_summary(query, rows);
}

void run_evaluate(const EvaluateArgs& a) {
  require(a.microbatches >= 0, "--microbatches must be positive");
  profile::Profile prof = read_profile(a.profile, a.allow_implausible);
  auto [p, sched] = read_plan_for(a.plan, a.schedule, a.microbatches, prof);
  double blocking = plan_blocking_power(p, a.blocking_power, prof, a.allow_implausible);
  const plan::AgainstAllMax ev = naming(
      a.plan, [&] { return plan::evaluate_against_all_max(prof, sched, p.frequencies, blocking); });
  if (a.json) return print_json(comparison_json(ev.plan, ev.all_max, ev.error));
  print_comparison(ev.plan, ev.all_max, stdout, ev.error);
}

// Writes plan i and says which plan it is (FrontierQuery::describe, then " -> file").
void write_plan(const plan::StoredFrontier& f, const plan::FrontierQuery& q,
                const schedule::Schedule& sched, std::size_t i, const ExportArgs& a) {
  const fs::path path = plan::write_plan_file(f, sched, i, a.format, a.out);
  std::printf("%s -> %s\n", q.describe(i).c_str(), path.c_str());
}

void run_export(const ExportArgs& a) {
  require(a.choice.count() + a.every.has_value() == 1,
          "choose exactly one of --index, --time, --max-slowdown, --fastest, --min-energy, "
          "--every");
  require(!a.every || (*a.every > 0.0 && std::isfinite(*a.every)),
          "--every must be a positive number of seconds");
  require(plan::is_plan_format(a.format), "--format must be json, py or zeus");
  plan::StoredFrontier f = plan::read_frontier(a.frontier);
  naming("--format " + a.format, [&] { plan::check_plan_format(f, a.format); });
  plan::FrontierQuery q(f);
  std::vector<std::size_t> picks = naming(a.frontier, [&] {
    return a.every ? q.every(*a.every) : std::vector<std::size_t>{choose_plan(a.choice, f, q)};
  });
  auto sched = f.build_schedule();
  for (std::size_t i : picks) write_plan(f, q, sched, i, a);
  std::printf("exported %zu plan%s to %s\n", picks.size(), picks.size() == 1 ? "" : "s",
              a.out.c_str());
}

}  // namespace

void add_plan_command(CLI::App& app) {
  auto* plan =
      app.add_subcommand("plan", "Compute the iteration time-energy frontier of a pipeline");
  auto pa = std::make_shared<PlanArgs>();
  plan->add_option("--profile", pa->profile,
                   "Stage profile CSV (stage,instruction,frequency,time,energy) (required)");
  plan->add_option("--stages", pa->stages, "Number of pipeline stages (default: the profile's)");
  plan->add_option("--microbatches", pa->microbatches,
                   "Microbatches per iteration (required, unless --schedule-file)");
  plan->add_option("--blocking-power", pa->blocking_power,
                   "Power (W) drawn while blocked on communication (required)");
  plan->add_option("--unit-time", pa->unit_time, "Time unit in seconds")->capture_default_str();
  plan->add_option("--cost-model", pa->cost_model, "exponential or convex-hull")
      ->capture_default_str();
  add_schedule_options(plan, pa->schedule, "default 1f1b; envelope is EnvPipe's, from the profile");
  plan->add_option("--noise-factor", pa->noise_factor,
                   "Keep options within this factor of Pareto-optimal")
      ->capture_default_str();
  plan->add_option("--out-dir,--out", pa->out,
                   "Output directory (frontier.csv, plans.txt, meta.json) (required)")
      ->check(output_directory());
  plan->add_option("--threads", pa->threads,
                   "Threads for slack reclamation and evaluation of the plans (default: hardware "
                   "threads); the frontier is the same for any number");
  plan->add_flag("--quiet", pa->quiet, "Print nothing on success");
  plan->add_flag("--allow-implausible", pa->allow_implausible, kAllowImplausibleHelp);
  add_json_flag(plan, pa->json);
  plan->require_subcommand(0, 1);

  auto* ev = plan->add_subcommand(
      "evaluate", "Score a plan (JSON, list literal or Zeus pairs) against a profile");
  auto ea = std::make_shared<EvaluateArgs>();
  ev->add_option("--profile", ea->profile, "Stage profile CSV (required)")->required();
  ev->add_option("--plan", ea->plan,
                 "Plan file (perseus.plan/1 JSON, or a freqs_pipeline .py of clocks or Zeus pairs) "
                 "(required)")
      ->required();
  ev->add_option("--blocking-power", ea->blocking_power,
                 "Blocking power in watts (default: the plan JSON's)");
  add_schedule_options(ev, ea->schedule, "default: from the plan, else 1f1b");
  ev->add_option("--microbatches", ea->microbatches, "Microbatches (default: from the plan)");
  ev->add_flag("--allow-implausible", ea->allow_implausible, kAllowImplausibleHelp);
  add_json_flag(ev, ea->json);
  ev->callback([ea] { run_evaluate(*ea); });

  auto* ex = plan->add_subcommand("export", "Write plans from a frontier directory");
  auto xa = std::make_shared<ExportArgs>();
  ex->add_option("--frontier", xa->frontier,
                 "Frontier directory written by `perseus plan` (required)")
      ->required();
  add_plan_choice(ex, xa->choice, "Export ");
  ex->add_option("--every", xa->every,
                 "Export one Pareto plan every this many seconds of iteration time");
  ex->add_option("--format", xa->format,
                 "json (plan_%05d.json), py (freqs_pipeline_%05d.py, clocks) or zeus "
                 "(freqs_pipeline_%05d.py, (instruction, clock) pairs for Zeus's PointSolution)")
      ->capture_default_str();
  ex->add_option("--out-dir,--out", xa->out, "Output directory (required)")
      ->required()
      ->check(output_directory());
  ex->callback([xa] { run_export(*xa); });

  plan->callback([plan, pa] {
    if (plan->get_subcommands().empty()) run_plan(*pa);
  });
}

}  // namespace perseus::cli
