// A plan file read to run on a profile, as `perseus plan evaluate`, `emulate` and Python's
// perseus.evaluate read one: the schedule it runs is what the file says, a caller's choice filling
// what it does not (plan::plan_schedule), built for the profile by profile_schedule (here beside
// it, since that schedule may be EnvPipe's envelope); the plan's shape must fit the schedule and
// its stage count the profile's.
#pragma once

#include <string>

#include "perseus/plan/plan_io.hpp"
#include "perseus/profile/profile.hpp"
#include "perseus/schedule/schedule.hpp"

namespace perseus::baselines {

struct PlanOnProfile {
  plan::Plan plan;
  schedule::Schedule schedule;
};

// Reads `path` (plan::read_plan_file) for `profile`. Throws perseus::Error naming `path` when the
// file, its schedule or a check fails, or `given_as` (how the caller's choice was given:
// "--schedule") when the schedule the file does not name cannot be built.
PlanOnProfile read_plan_for(const std::string& path, const plan::ScheduleChoice& given,
                            const std::string& given_as, const profile::Profile& profile);

// The checks read_plan_for makes, for a plan whose schedule came another way (a schedule file).
void check_plan_for(const plan::Plan& plan, const schedule::Schedule& schedule,
                    const profile::Profile& profile, const std::string& path);

}  // namespace perseus::baselines
