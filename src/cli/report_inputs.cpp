#include "cli/report_inputs.hpp"

#include <cmath>
#include <filesystem>

#include "perseus/plan/planning.hpp"
#include "perseus/profile/gpu_model.hpp"
#include "perseus/util/progress.hpp"
#include "perseus/util/text.hpp"

namespace perseus::cli {

namespace fs = std::filesystem;

namespace {

// The profile and the blocking power: a CSV, or the embedded default synthesized for --gpu
// with `stages` stages.
void load_profile(const ReportArgs& a, int stages, Inputs& in) {
  if (a.profile.empty()) {
    const auto* gpu = naming("--gpu", [&] { return &profile::gpu_model(a.gpu); });
    in.profile = profile::synthesize_profile(*gpu, profile::default_model(stages));
    in.profile_label = "synthesized " + gpu->name + " (embedded default)";
    in.blocking_power_w = a.has_blocking_power ? a.blocking_power : gpu->blocking_power_w;
    return;
  }
  require(!a.has_gpu,
          "--gpu picks the model of the embedded default; it cannot be combined with "
          "--profile");
  require(a.has_blocking_power || !a.frontier.empty(),
          "--blocking-power is required with --profile (watts drawn while blocked, e.g. 83.64 "
          "for A100)");
  in.profile = read_profile(a.profile, a.allow_implausible);
  in.profile_label = a.profile;
  in.blocking_power_w = a.blocking_power;
  if (a.has_blocking_power) check_blocking_power(in.profile, a.blocking_power, a.allow_implausible);
  require(!a.has_stages || a.stages == in.profile.num_stages(),
          "--stages " + std::to_string(a.stages) + " does not match profile " + a.profile + " (" +
              std::to_string(in.profile.num_stages()) + " stages)");
}

// Checks an existing frontier against the profile and the options that describe the pipeline;
// its schedule and blocking power are the report's.
void check_frontier(const ReportArgs& a, Inputs& in) {
  const auto& f = in.frontier;
  auto mismatch = [&](const std::string& option, const std::string& value,
                      const std::string& theirs) {
    return option + " " + value + " does not match frontier " + a.frontier + " (" + theirs + ")";
  };
  require(f.num_stages == in.profile.num_stages(),
          "frontier " + a.frontier + " has " + std::to_string(f.num_stages) +
              " stages but profile " + in.profile_label +
              (a.profile.empty() ? " with --stages " : " has ") +
              std::to_string(in.profile.num_stages()));
  require(!a.has_microbatches || a.microbatches == f.num_microbatches,
          mismatch("--microbatches", std::to_string(a.microbatches),
                   std::to_string(f.num_microbatches) + " microbatches"));
  require(!a.has_schedule || a.schedule.name == f.schedule,
          mismatch("--schedule", a.schedule.name, f.schedule));
  require(
      !a.has_blocking_power || std::abs(a.blocking_power - f.blocking_power_w) < 1e-9,
      mismatch("--blocking-power", num(a.blocking_power, 4), num(f.blocking_power_w, 4) + " W"));
  in.blocking_power_w = f.blocking_power_w;
  in.schedule = f.build_schedule();
}

}  // namespace

void check_options(const ReportArgs& a) {
  check_plan_choice(a.choice);
  require(a.eta >= 0.0 && a.eta <= 1.0, "--eta must be between 0 and 1");
  require(a.unit_time > 0.0 && std::isfinite(a.unit_time),
          "--unit-time must be a positive number of seconds");
  require(!a.has_blocking_power || (a.blocking_power >= 0.0 && std::isfinite(a.blocking_power)),
          "--blocking-power must be a finite number of watts >= 0");
  require(a.stages > 0, "--stages must be positive");
  require(a.microbatches > 0, "--microbatches must be positive");
  require(!a.pipelines || *a.pipelines > 0, "--pipelines must be positive");
  require(!a.tensor_parallel || *a.tensor_parallel > 0, "--tensor-parallel must be positive");
  // A folder (one that exists, or a name ending in '/') is refused before any work.
  const bool folder = !a.out.empty() && (fs::is_directory(a.out) || a.out.back() == '/');
  std::string folder_name = a.out;
  while (folder_name.size() > 1 && folder_name.back() == '/') folder_name.pop_back();
  require(!a.out.empty() && !folder, "--out " + a.out +
                                         " names a folder; give the HTML file to write, e.g. " +
                                         folder_name + "/report.html");
}

Inputs load_inputs(const ReportArgs& a) {
  Inputs in;
  if (!a.frontier.empty()) in.frontier = plan::read_frontier(a.frontier);
  // The embedded default gets the frontier's stage count unless --stages says otherwise.
  load_profile(a, a.frontier.empty() || a.has_stages ? a.stages : in.frontier.num_stages, in);
  if (!a.frontier.empty()) {
    check_frontier(a, in);
  } else {
    in.schedule = resolve_schedule(a.schedule, in.profile, in.profile.num_stages(), a.microbatches);
  }
  return in;
}

plan::StoredFrontier solve(const Inputs& in, double unit_time_s, bool quiet) {
  auto problem = plan::PlanProblem::build(
      in.profile, in.schedule,
      {unit_time_s, in.blocking_power_w, plan::CostModelKind::kConvexHull, 1.0});
  ProgressBar bar("planning", 0);
  const plan::PlannedFrontier planned = plan::plan_frontier(in.profile, std::move(problem),
                                                            [&](long done, long total) {
                                                              if (!quiet) bar.update(done, total);
                                                            },
                                                            {.threads = plan::solver_threads(0)});
  bar.finish();
  return plan::stored_frontier(planned.problem, planned.frontier, planned.all_max);
}

}  // namespace perseus::cli
