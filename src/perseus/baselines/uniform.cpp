#include "perseus/baselines/uniform.hpp"

#include "perseus/baselines/common.hpp"

namespace perseus::baselines {

plan::FrequencyPlan uniform_plan(const profile::Profile& profile,
                                 const schedule::Schedule& schedule) {
  check_stages(profile, schedule.num_stages);
  return plan::plan_per_instruction(schedule, [&](int, const schedule::Instruction& inst) {
    return energy_optimal(plan::instruction_rows(profile, inst)).frequency_mhz;
  });
}

}  // namespace perseus::baselines
