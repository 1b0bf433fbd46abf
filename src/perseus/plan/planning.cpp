#include "perseus/plan/planning.hpp"

#include <chrono>
#include <cstdio>

#include "perseus/plan/evaluate.hpp"
#include "perseus/plan/plan_io.hpp"
#include "perseus/util/error.hpp"
#include "perseus/util/files.hpp"

namespace perseus::plan {

PlannedFrontier plan_frontier(const profile::Profile& profile, PlanProblem problem,
                              const ProgressFn& progress, const SolverOptions& options) {
  const auto start = std::chrono::steady_clock::now();
  const schedule::Schedule& schedule = problem.schedule;
  const Evaluation all_max = evaluate(profile, schedule, all_max_plan(profile, schedule),
                                      problem.settings.blocking_power_w);
  PlannedFrontier out{std::move(problem), {}, {all_max.time_s, all_max.energy_j}, 0.0};
  out.frontier = solve_frontier(out.problem, progress, options);
  out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return out;
}

AgainstAllMax evaluate_against_all_max(const profile::Profile& profile,
                                       const schedule::Schedule& schedule,
                                       const FrequencyPlan& plan, double blocking_power_w) {
  const FrequencyPlan all_max = all_max_plan(profile, schedule);
  return {evaluate(profile, schedule, plan, blocking_power_w),
          evaluate(profile, schedule, all_max, blocking_power_w),
          saving_error(profile, schedule, plan, all_max, blocking_power_w)};
}

bool is_plan_format(const std::string& format) {
  return format == "json" || format == "py" || format == "zeus";
}

void check_plan_format(const StoredFrontier& frontier, const std::string& format) {
  if (!is_plan_format(format)) {
    throw Error("plan format '" + format + "': expected json, py or zeus");
  }
  if (format == "zeus" && frontier.stages_per_rank != 1) {
    throw Error("Zeus's pair lists name one stage per GPU, and the " + frontier.schedule +
                " schedule runs " + std::to_string(frontier.stages_per_rank) +
                " per GPU; export json (it names each action's stage)");
  }
}

PlanFile plan_file(const StoredFrontier& frontier, const schedule::Schedule& schedule,
                   std::size_t index, const std::string& format) {
  check_plan_format(frontier, format);
  const Plan plan = frontier.plan(index);
  char name[64];
  if (format == "json") {
    std::snprintf(name, sizeof name, "plan_%05zu.json", index);
    return {name, plan_to_json(plan, schedule)};
  }
  std::snprintf(name, sizeof name, "freqs_pipeline_%05zu.py", index);
  char comment[160];
  std::snprintf(comment, sizeof comment, "plan %zu: evaluated time %.6f s, energy %.4f J", index,
                plan.evaluated->time_s, plan.evaluated->energy_j);
  return {name, format == "zeus" ? plan_to_zeus_list(plan.frequencies, schedule, comment)
                                 : plan_to_python_list(plan.frequencies, comment)};
}

std::filesystem::path write_plan_file(const StoredFrontier& frontier,
                                      const schedule::Schedule& schedule, std::size_t index,
                                      const std::string& format, const std::filesystem::path& dir) {
  const PlanFile file = plan_file(frontier, schedule, index, format);
  ensure_writable_dir(dir);
  const std::filesystem::path path = dir / file.name;
  write_file_atomic(path, file.text);
  return path;
}

}  // namespace perseus::plan
