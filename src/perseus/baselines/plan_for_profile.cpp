#include "perseus/baselines/plan_for_profile.hpp"

#include "perseus/baselines/envpipe.hpp"
#include "perseus/plan/evaluate.hpp"
#include "perseus/util/error.hpp"

namespace perseus::baselines {

PlanOnProfile read_plan_for(const std::string& path, const plan::ScheduleChoice& given,
                            const std::string& given_as, const profile::Profile& profile) {
  plan::Plan p = plan::read_plan_file(path);
  const plan::ScheduleChoice choice = plan::plan_schedule(p, given, path);
  schedule::Schedule sched;
  try {
    sched = profile_schedule(choice.name, profile, p.num_stages, choice.microbatches,
                             choice.stages_per_rank);
  } catch (const Error& e) {
    throw Error((p.schedule.empty() ? given_as : path) + ": " + e.what());
  }
  check_plan_for(p, sched, profile, path);
  return {std::move(p), std::move(sched)};
}

void check_plan_for(const plan::Plan& plan, const schedule::Schedule& schedule,
                    const profile::Profile& profile, const std::string& path) {
  plan::check_plan_shape(plan.frequencies, schedule, path);
  if (profile.num_stages() != plan.num_stages) {
    throw Error(path + ": the plan has " + std::to_string(plan.num_stages) +
                " stages but profile " + profile.source() + " has " +
                std::to_string(profile.num_stages()));
  }
}

}  // namespace perseus::baselines
