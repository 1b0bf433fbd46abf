#include "perseus/baselines/common.hpp"

#include <string>

#include "perseus/util/error.hpp"

namespace perseus::baselines {

void check_stages(const profile::Profile& profile, int num_stages) {
  if (profile.num_stages() != num_stages) {
    throw Error(profile.source() + ": profile has " + std::to_string(profile.num_stages()) +
                " stages but the pipeline has " + std::to_string(num_stages) + " (--stages)");
  }
}

const std::vector<profile::Measurement>& rows_of(const profile::Profile& profile, int stage,
                                                 schedule::InstructionType type) {
  return profile.rows(stage, schedule::type_name(type));
}

const profile::Measurement& energy_optimal(const std::vector<profile::Measurement>& rows) {
  if (rows.empty()) throw Error("no profiled clocks to choose from");
  const profile::Measurement* best = &rows.front();
  for (const auto& row : rows) {
    bool cheaper = row.energy_j < best->energy_j;
    bool as_cheap_faster = row.energy_j == best->energy_j && row.time_s < best->time_s;
    if (cheaper || as_cheap_faster) best = &row;
  }
  return *best;
}

}  // namespace perseus::baselines
