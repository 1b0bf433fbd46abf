// `perseus baseline all-max|uniform|envpipe|zeus-global|zeus-per-stage`: the plans of the
// baselines Perseus is compared with (architecture section 6), scored by the same evaluator and
// compared with all-max; --out writes the plan as plan JSON.
#include <CLI/CLI.hpp>
#include <cmath>
#include <cstdio>
#include <functional>
#include <memory>
#include <string>
#include <utility>

#include "cli/commands.hpp"
#include "cli/common.hpp"
#include "perseus/baselines/common.hpp"
#include "perseus/baselines/envpipe.hpp"
#include "perseus/baselines/uniform.hpp"
#include "perseus/baselines/zeus.hpp"
#include "perseus/plan/plan_io.hpp"
#include "perseus/profile/csv.hpp"
#include "perseus/util/files.hpp"

namespace perseus::cli {

namespace {

struct BaselineArgs {
  std::string profile, out, policy = "balanced";
  ScheduleOptions schedule;
  int stages = 0, microbatches = 0;
  double blocking_power = -1.0, eta = 0.5, step = 25.0;
  bool quiet = false, allow_implausible = false;
};

// The inputs of one run and its all-max reference.
struct Pipeline {
  profile::Profile profile;
  schedule::Schedule schedule;
  plan::Evaluation all_max;
};

Pipeline load(const BaselineArgs& a) {
  require(!a.profile.empty(), "--profile is required");
  require(a.stages >= 0, "--stages must be positive");
  require_microbatches(a.microbatches, a.schedule, "for a baseline");
  require(a.blocking_power >= 0.0 && std::isfinite(a.blocking_power),
          "--blocking-power is required and must be >= 0 watts");
  profile::Profile prof = read_profile(a.profile, a.allow_implausible);
  check_blocking_power(prof, a.blocking_power, a.allow_implausible);
  int stages = a.stages > 0 ? a.stages : prof.num_stages();
  baselines::check_stages(prof, stages);
  schedule::Schedule sched = resolve_schedule(a.schedule, prof, stages, a.microbatches);
  auto all_max = plan::evaluate(prof, sched, plan::all_max_plan(prof, sched), a.blocking_power);
  return {std::move(prof), std::move(sched), std::move(all_max)};
}

// Writes --out (plan JSON with "evaluated") and prints the comparison with all-max.
void finish(const BaselineArgs& a, const Pipeline& p, const plan::FrequencyPlan& frequencies,
            const plan::Evaluation& ev) {
  if (!a.out.empty()) {
    plan::Plan doc;
    doc.schedule = p.schedule.name;
    doc.num_stages = p.schedule.num_stages;
    doc.num_microbatches = p.schedule.num_microbatches;
    doc.blocking_power_w = a.blocking_power;
    doc.evaluated = plan::TimeEnergy{ev.time_s, ev.energy_j};
    doc.frequencies = frequencies;
    write_file_atomic(a.out, plan::plan_to_json(doc, p.schedule));
  }
  if (a.quiet) return;
  print_comparison(ev, p.all_max, summary_stream(a.out));
  if (!a.out.empty()) std::fprintf(summary_stream(a.out), "wrote %s\n", a.out.c_str());
}

void run_all_max(const BaselineArgs& a) {
  Pipeline p = load(a);
  finish(a, p, plan::all_max_plan(p.profile, p.schedule), p.all_max);
}

void run_uniform(const BaselineArgs& a) {
  Pipeline p = load(a);
  auto plan = baselines::uniform_plan(p.profile, p.schedule);
  finish(a, p, plan, plan::evaluate(p.profile, p.schedule, plan, a.blocking_power));
}

void run_envpipe(const BaselineArgs& a) {
  auto policy = naming("--policy", [&] { return baselines::parse_envpipe_policy(a.policy); });
  Pipeline p = load(a);
  auto r = baselines::envpipe(p.profile, p.schedule, a.blocking_power, policy);
  if (!a.quiet) {
    std::printf("schedule %s\npolicy %s\niterations %d\nenvelope_reached %s\nstop_reason %s\n",
                p.schedule.name.c_str(), a.policy.c_str(), r.iterations,
                r.envelope_reached ? "yes" : "no", r.stop_reason.c_str());
  }
  finish(a, p, r.plan, r.evaluation);
}

std::string format_limits(const std::vector<double>& limits, bool per_stage) {
  std::string out;
  for (std::size_t s = 0; s < (per_stage ? limits.size() : 1); ++s) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%s%.1f", s > 0 ? "/" : "", limits[s]);
    out += buf;
  }
  return out;
}

void print_sweep(const baselines::ZeusSweep& sweep, bool per_stage) {
  std::printf("max_power_w %.2f\neta %.3f\n", sweep.max_power_w, sweep.eta);
  int width = per_stage ? 24 : 12;
  for (const auto& point : sweep.points) {
    width = std::max(width, static_cast<int>(format_limits(point.limits_w, per_stage).size()));
  }
  std::printf("  %-*s %10s %12s %14s\n", width, per_stage ? "limits per stage (W)" : "limit (W)",
              "time (s)", "energy (J)", "cost");
  for (std::size_t i = 0; i < sweep.points.size(); ++i) {
    const auto& point = sweep.points[i];
    std::printf("%c %-*s %10.4f %12.2f %14.2f\n", i == sweep.chosen ? '*' : ' ', width,
                format_limits(point.limits_w, per_stage).c_str(), point.evaluation.time_s,
                point.evaluation.energy_j, point.cost);
  }
  std::printf("chosen %s W\n",
              format_limits(sweep.points[sweep.chosen].limits_w, per_stage).c_str());
}

void run_zeus(const BaselineArgs& a, bool per_stage) {
  require(a.eta >= 0.0 && a.eta <= 1.0, "--eta must be in [0, 1]");
  require(a.step > 0.0 && std::isfinite(a.step), "--step must be a positive number of watts");
  Pipeline p = load(a);
  auto sweep = naming("--step", [&] {
    return per_stage
               ? baselines::zeus_per_stage(p.profile, p.schedule, a.blocking_power, a.eta, a.step)
               : baselines::zeus_global(p.profile, p.schedule, a.blocking_power, a.eta, a.step);
  });
  if (!a.quiet) print_sweep(sweep, per_stage);
  const auto& chosen = sweep.points[sweep.chosen];
  finish(a, p, chosen.plan, chosen.evaluation);
}

CLI::App* add_baseline(CLI::App* parent, const std::string& name, const std::string& help,
                       const std::shared_ptr<BaselineArgs>& a,
                       std::function<void(const BaselineArgs&)> run) {
  auto* sub = parent->add_subcommand(name, help);
  sub->add_option("--profile", a->profile, "Stage profile CSV (required)");
  sub->add_option("--stages", a->stages, "Number of pipeline stages (default: the profile's)");
  sub->add_option("--microbatches", a->microbatches, "Microbatches per iteration (required)");
  sub->add_option("--blocking-power", a->blocking_power,
                  "Power (W) drawn while blocked on communication (required)");
  add_schedule_options(sub, a->schedule, "default 1f1b; envelope is EnvPipe's");
  sub->add_option("--out", a->out, "Write the plan as plan JSON to this file");
  sub->add_flag("--quiet", a->quiet, "Print nothing on success");
  sub->add_flag("--allow-implausible", a->allow_implausible, kAllowImplausibleHelp);
  sub->callback([a, run = std::move(run)] { run(*a); });
  return sub;
}

}  // namespace

void add_baseline_command(CLI::App& app) {
  auto* baseline =
      app.add_subcommand("baseline", "Plans of the baselines (all-max, uniform, EnvPipe, Zeus)");
  baseline->require_subcommand(1);
  auto a = std::make_shared<BaselineArgs>();
  add_baseline(baseline, "all-max", "Every instruction at its highest clock", a, run_all_max);
  add_baseline(baseline, "uniform", "Every instruction at its lowest-energy clock", a, run_uniform);
  add_baseline(baseline, "envpipe", "EnvPipe: outer envelope at max clock, raise the rest", a,
               run_envpipe)
      ->add_option("--policy", a->policy, "greedy or balanced")
      ->capture_default_str();
  for (bool per_stage : {false, true}) {
    auto* zeus =
        add_baseline(baseline, per_stage ? "zeus-per-stage" : "zeus-global",
                     per_stage ? "Zeus with per-stage power limits balanced to the heaviest stage"
                               : "Zeus with one power limit for every GPU",
                     a, [per_stage](const BaselineArgs& args) { run_zeus(args, per_stage); });
    zeus->add_option("--eta", a->eta, "Weight of energy in the cost eta*E + (1-eta)*P_max*T")
        ->capture_default_str();
    zeus->add_option("--step", a->step, "Power limit step in watts")->capture_default_str();
  }
}

}  // namespace perseus::cli
