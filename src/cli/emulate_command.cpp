// `perseus emulate`: run one plan on the pipeline's timeline (optionally with noise or a slow
// GPU) and print time, energy and per-stage busy/idle; `emulate cluster`: the straggler sweep
// over many data-parallel pipelines, with savings split into intrinsic and extrinsic parts.
#include <CLI/CLI.hpp>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <memory>
#include <sstream>

#include "cli/commands.hpp"
#include "cli/common.hpp"
#include "perseus/emulate/cluster.hpp"
#include "perseus/emulate/timeline.hpp"
#include "perseus/plan/frontier_store.hpp"
#include "perseus/profile/csv.hpp"
#include "perseus/util/files.hpp"

namespace perseus::cli {

namespace {

struct EmulateArgs {
  std::string profile, plan, frontier, timeline;
  ScheduleOptions schedule;
  int stages = 0, microbatches = 0;
  PlanChoice choice;
  double blocking_power = std::nan("");  // NaN: not given
  emulate::Perturbation perturbation;
  bool quiet = false, allow_implausible = false, json = false;
};

struct ClusterArgs {
  std::string frontier, plan, profile, factors = "1.00:1.50:0.01", out;
  std::optional<int> pipelines;
  std::optional<long> gpus;
  int tensor_parallel = 1;
  double blocking_power = std::nan("");  // NaN: not given
  bool quiet = false, allow_implausible = false;
};

// The plan to emulate, its schedule and what its source reported about it (if anything).
struct Job {
  plan::FrequencyPlan plan;
  schedule::Schedule schedule;
  std::string label;
  double blocking_power_w = 0.0;
  double reported_time_s = -1.0;
};

Job job_from_frontier(const EmulateArgs& a) {
  require(a.plan.empty(), "give either --plan or --frontier, not both");
  plan::StoredFrontier f = plan::read_frontier(a.frontier);
  // The frontier's plans fix the instruction order: an option that says otherwise is a mistake,
  // not something to ignore.
  const auto conflict = [&](const std::string& option, const std::string& given,
                            const std::string& planned) {
    return option + " " + given + " does not match frontier " + a.frontier + " (planned for " +
           planned + "); leave it out: the frontier's plans fix it";
  };
  require(a.microbatches <= 0 || a.microbatches == f.num_microbatches,
          conflict("--microbatches", std::to_string(a.microbatches),
                   std::to_string(f.num_microbatches) + " microbatches"));
  require(a.stages <= 0 || a.stages == f.num_stages,
          conflict("--stages", std::to_string(a.stages), std::to_string(f.num_stages) + " stages"));
  require(a.schedule.name.empty() || a.schedule.name == f.schedule,
          conflict("--schedule", a.schedule.name, f.schedule));
  require(a.schedule.file.empty() && a.schedule.virtual_stages == 0,
          "--schedule-file and --virtual-stages do not apply to --frontier " + a.frontier +
              ": its plans fix the instruction order; leave them out");
  plan::FrontierQuery q(f);
  std::size_t i = naming(a.frontier, [&] { return choose_plan(a.choice, f, q); });
  Job job{f.plans[i], f.build_schedule(), "frontier " + q.describe(i), f.blocking_power_w,
          f.rows[i].evaluated_time_s};
  return job;
}

Job make_job(const EmulateArgs& a, const profile::Profile& prof) {
  if (!a.frontier.empty()) return job_from_frontier(a);
  require(
      a.choice.count() == 0,
      "--index, --time, --max-slowdown, --fastest and --min-energy select a plan of --frontier");
  if (!a.plan.empty()) {
    baselines::PlanOnProfile p = read_plan_for(a.plan, a.schedule, a.microbatches, prof);
    return {p.plan.frequencies, p.schedule, a.plan, blocking_power_of(p.plan, a.blocking_power)};
  }
  require_microbatches(a.microbatches, a.schedule, "with the all-max plan");
  int stages = a.stages > 0 ? a.stages : prof.num_stages();
  auto sched = resolve_schedule(a.schedule, prof, stages, a.microbatches);
  return {plan::all_max_plan(prof, sched), sched, "all-max", a.blocking_power};
}

std::string timeline_csv(const emulate::Timeline& t) {
  std::ostringstream out;
  out.precision(9);
  out << "rank,position,stage,instruction,microbatch,frequency_mhz,start_s,end_s,energy_j,"
         "power_w,critical\n";
  for (const auto& e : t.entries) {
    out << e.rank << ',' << e.position << ',' << e.instruction.stage << ','
        << schedule::type_name(e.instruction.type) << ',' << e.instruction.microbatch << ','
        << e.frequency_mhz << ',' << e.start_s << ',' << e.end_s << ',' << e.energy_j << ','
        << e.power_w() << ',' << (e.critical ? 1 : 0) << '\n';
  }
  return out.str();
}

void print_timeline(const Job& job, const emulate::Timeline& t) {
  std::printf("plan            %s (%s, %d stages on %d GPUs, %d microbatches)\n", job.label.c_str(),
              job.schedule.name.c_str(), job.schedule.num_stages, job.schedule.num_ranks(),
              job.schedule.num_microbatches);
  std::printf("iteration time  %.6f s\n", t.time_s);
  if (job.reported_time_s >= 0.0) {
    std::printf("frontier time   %.6f s (emulated - reported: %+.3g s)\n", job.reported_time_s,
                t.time_s - job.reported_time_s);
  }
  std::printf("energy          %.4f J\n\n", t.energy_j);
  std::printf("%5s %10s %10s %7s %12s\n", "gpu", "busy_s", "idle_s", "busy_%", "energy_j");
  for (std::size_t r = 0; r < t.rank_busy_s.size(); ++r) {
    std::printf("%5zu %10.4f %10.4f %7.2f %12.2f\n", r, t.rank_busy_s[r], t.rank_idle_s[r],
                percent(t.rank_busy_s[r], t.time_s), t.rank_energy_j[r]);
  }
}

// `perseus emulate --json`: the plan, the iteration and each GPU's share of it.
nlohmann::json timeline_json(const Job& job, const emulate::Timeline& t) {
  nlohmann::json gpus = nlohmann::json::array();
  for (std::size_t r = 0; r < t.rank_busy_s.size(); ++r) {
    gpus.push_back({{"gpu", r},
                    {"busy_s", t.rank_busy_s[r]},
                    {"idle_s", t.rank_idle_s[r]},
                    {"energy_j", t.rank_energy_j[r]}});
  }
  return {{"plan", job.label},
          {"schedule", job.schedule.name},
          {"stages", job.schedule.num_stages},
          {"gpus_per_pipeline", job.schedule.num_ranks()},
          {"microbatches", job.schedule.num_microbatches},
          {"blocking_power_w", job.blocking_power_w},
          {"time_s", t.time_s},
          {"energy_j", t.energy_j},
          {"frontier_time_s",
           job.reported_time_s >= 0.0 ? nlohmann::json(job.reported_time_s) : nlohmann::json()},
          {"gpus", gpus}};
}

void run_emulate(const EmulateArgs& a) {
  require(!a.profile.empty(), "--profile is required");
  require(a.perturbation.slow_factor == 1.0 || a.perturbation.slow_rank >= 0,
          "--slow-factor needs --slow-gpu (which GPU is slow)");
  profile::Profile prof = read_profile(a.profile, a.allow_implausible);
  Job job = make_job(a, prof);
  if (!std::isnan(a.blocking_power)) job.blocking_power_w = a.blocking_power;
  require(job.blocking_power_w >= 0.0 && std::isfinite(job.blocking_power_w),
          "--blocking-power is required (watts, >= 0) unless the plan carries it (--frontier, a "
          "plan JSON)");
  check_blocking_power(prof, job.blocking_power_w, a.allow_implausible);
  emulate::Timeline t = naming(job.label, [&] {
    return emulate::emulate(prof, job.schedule, job.plan, job.blocking_power_w, a.perturbation);
  });
  if (!a.timeline.empty()) write_file_atomic(a.timeline, timeline_csv(t));
  if (a.json) return print_json(timeline_json(job, t));
  if (!a.quiet) print_timeline(job, t);
}

std::string sweep_csv(const std::vector<emulate::ClusterPoint>& points) {
  std::ostringstream out;
  out.precision(10);
  out << "factor,baseline_time_s,baseline_energy_j,intrinsic_time_s,intrinsic_energy_j,"
         "perseus_time_s,perseus_energy_j,perseus_plan,intrinsic_saving_pct,"
         "extrinsic_saving_pct,total_saving_pct\n";
  for (const auto& p : points) {
    out << p.factor << ',' << p.baseline.time_s << ',' << p.baseline.energy_j << ','
        << p.intrinsic.time_s << ',' << p.intrinsic.energy_j << ',' << p.perseus.time_s << ','
        << p.perseus.energy_j << ',' << p.perseus_plan << ',' << 100.0 * p.intrinsic_saving << ','
        << 100.0 * p.extrinsic_saving << ',' << 100.0 * p.total_saving << '\n';
  }
  return out.str();
}

// One line per factor: the cluster's time, the baseline's energy, the plan the other pipelines run
// (index and its own iteration time) and the savings.
void print_sweep(const std::vector<emulate::ClusterPoint>& points, const emulate::ClusterSpec& s,
                 const plan::StoredFrontier& f) {
  const int ranks = f.num_ranks();
  const std::string per_pipeline =
      f.stages_per_rank == 1
          ? std::to_string(ranks) + " stages"
          : std::to_string(ranks) + " GPUs (" + std::to_string(f.num_stages) + " stages)";
  std::printf("%d pipelines x %s x %d-way tensor parallel = %ld GPUs\n", s.pipelines,
              per_pipeline.c_str(), s.tensor_parallel,
              static_cast<long>(s.pipelines) * ranks * s.tensor_parallel);
  std::printf("%7s %12s %14s %8s %11s %11s %11s %9s\n", "factor", "iter_time_s", "baseline_j",
              "plan", "plan_time_s", "intrinsic%", "extrinsic%", "total%");
  for (const auto& p : points) {
    std::printf("%7.3f %12.4f %14.1f %8zu %11.4f %11.2f %11.2f %9.2f\n", p.factor, p.perseus.time_s,
                p.baseline.energy_j, p.perseus_plan, f.rows[p.perseus_plan].evaluated_time_s,
                100.0 * p.intrinsic_saving, 100.0 * p.extrinsic_saving, 100.0 * p.total_saving);
  }
}

// A single plan (a baseline's, say) as a one-row frontier: every pipeline runs it, so the sweep
// shows what that plan saves against all-max with a straggler.
plan::StoredFrontier single_plan_frontier(const ClusterArgs& a) {
  require(!a.profile.empty(), "--plan needs --profile (to evaluate the plan and all-max)");
  profile::Profile prof = read_profile(a.profile, a.allow_implausible);
  baselines::PlanOnProfile p = read_plan_for(a.plan, {}, 0, prof);
  plan::StoredFrontier f;
  f.num_stages = p.schedule.num_stages;
  f.stages_per_rank = p.schedule.stages_per_rank();
  f.blocking_power_w = plan_blocking_power(p.plan, a.blocking_power, prof, a.allow_implausible);
  auto ev = naming(a.plan, [&] {
    return plan::evaluate(prof, p.schedule, p.plan.frequencies, f.blocking_power_w);
  });
  auto base =
      plan::evaluate(prof, p.schedule, plan::all_max_plan(prof, p.schedule), f.blocking_power_w);
  f.all_max = {base.time_s, base.energy_j};
  f.rows.push_back({0, ev.time_s, ev.energy_j, ev.time_s, ev.energy_j});
  return f;
}

void run_cluster(const ClusterArgs& a) {
  auto factors = emulate::parse_factors(a.factors);
  require(a.frontier.empty() != a.plan.empty(), "give either --frontier or --plan");
  plan::StoredFrontier f =
      a.plan.empty() ? plan::read_frontier_rows(a.frontier) : single_plan_frontier(a);
  emulate::ClusterSpec spec =
      cluster_spec(a.pipelines, a.gpus, a.tensor_parallel, f.num_ranks(), std::nullopt);
  auto start = std::chrono::steady_clock::now();
  auto points = emulate::sweep_cluster(f, spec, factors);
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (!a.out.empty()) write_file_atomic(a.out, sweep_csv(points));
  if (a.quiet) return;
  print_sweep(points, spec, f);
  std::printf("swept %zu factors over %zu %s in %.6f s\n", points.size(), f.rows.size(),
              a.plan.empty() ? "frontier plans" : "plan", seconds);
}

void add_cluster_command(CLI::App& parent) {
  auto* c = parent.add_subcommand(
      "cluster", "Straggler sweep: D pipelines, one slowed by each factor; savings as CSV");
  auto a = std::make_shared<ClusterArgs>();
  c->add_option("--frontier", a->frontier, "Frontier directory written by `perseus plan`");
  c->add_option("--plan", a->plan,
                "Instead of a frontier: one plan file (e.g. a baseline's), with --profile");
  c->add_option("--profile", a->profile, "With --plan: the profile that evaluates it");
  c->add_option("--blocking-power", a->blocking_power,
                "With --plan: blocking power in watts (default: the plan JSON's)");
  c->add_flag("--allow-implausible", a->allow_implausible, kAllowImplausibleHelp);
  c->add_option("--pipelines", a->pipelines, "Data-parallel pipelines (D)");
  c->add_option("--gpus", a->gpus, "Total GPUs (instead of --pipelines): D x stages x T");
  c->add_option("--tensor-parallel", a->tensor_parallel, "GPUs per stage (T)")
      ->capture_default_str();
  c->add_option("--factors", a->factors, "Straggler slowdowns: first:last:step or a,b,c")
      ->capture_default_str();
  c->add_option("--out", a->out, "Write the sweep as CSV");
  c->add_flag("--quiet", a->quiet, "Print nothing on success");
  c->callback([a] { run_cluster(*a); });
}

}  // namespace

void add_emulate_command(CLI::App& app) {
  auto* em = app.add_subcommand(
      "emulate", "Run a plan on the pipeline timeline (time, energy, per-stage busy/idle)");
  auto a = std::make_shared<EmulateArgs>();
  em->add_option("--profile", a->profile, "Stage profile CSV (required)");
  em->add_option(
      "--plan", a->plan,
      "Plan file (perseus.plan/1 JSON, or a freqs_pipeline .py of clocks or Zeus pairs)");
  em->add_option("--frontier", a->frontier, "Take the plan from this frontier directory");
  add_plan_choice(em, a->choice, "With --frontier: ");
  em->add_option("--blocking-power", a->blocking_power,
                 "Blocking power in watts (default: the frontier's or plan JSON's)");
  add_schedule_options(em, a->schedule, "default: the plan's, else 1f1b");
  em->add_option("--stages", a->stages, "Stages for the all-max plan (default: the profile's)");
  em->add_option("--microbatches", a->microbatches, "Microbatches (default: the plan's)");
  em->add_option("--noise", a->perturbation.noise,
                 "Per-instruction time noise: duration x exp(noise x N(0,1))");
  em->add_option("--seed", a->perturbation.seed, "Seed of the noise")->capture_default_str();
  em->add_option("--slow-gpu,--slow-stage", a->perturbation.slow_rank,
                 "The slow GPU (pipeline rank; the stage's GPU in one-stage-per-GPU schedules)");
  em->add_option("--slow-factor", a->perturbation.slow_factor,
                 "Its instructions take this many times longer (>= 1)");
  em->add_option("--timeline", a->timeline, "Write every instruction's start/end/clock as CSV");
  em->add_flag("--quiet", a->quiet, "Print nothing on success");
  add_json_flag(em, a->json);
  em->add_flag("--allow-implausible", a->allow_implausible, kAllowImplausibleHelp);
  em->require_subcommand(0, 1);
  add_cluster_command(*em);
  em->callback([em, a] {
    if (em->get_subcommands().empty()) run_emulate(*a);
  });
}

}  // namespace perseus::cli
