// Plan files: the plan JSON (`perseus.plan/1`, DESIGN section 5) and the reference optimizer's
// `freqs_pipeline_%05d.py` list-literal format (one list of clocks per stage), both read and
// written. Reading never evaluates code; malformed files get a one-line perseus::Error.
#pragma once

#include <optional>
#include <string>

#include "perseus/plan/evaluate.hpp"
#include "perseus/schedule/schedule.hpp"

namespace perseus::plan {

struct TimeEnergy {
  double time_s = 0.0;
  double energy_j = 0.0;
};

struct Plan {
  std::string schedule = "1f1b";
  int num_stages = 0;
  int num_microbatches = 0;
  double unit_time_s = 0.0;
  double blocking_power_w = 0.0;
  std::optional<TimeEnergy> predicted;
  std::optional<TimeEnergy> evaluated;
  FrequencyPlan frequencies;  // per stage, in schedule order
};

// Serializes a plan; instruction types and microbatches come from `schedule`.
std::string plan_to_json(const Plan& plan, const schedule::Schedule& schedule);
// The list literal `[\n[1410, 1395, ...],\n...\n]\n` followed by `# ...` comment lines.
std::string plan_to_python_list(const FrequencyPlan& frequencies, const std::string& comment = "");

// Parses either format (JSON when the text starts with '{', list literal when with '[').
// A list literal carries only clocks: schedule fields are left at their defaults and num_stages
// is the number of lists. Throws perseus::Error naming `source` and the problem.
Plan parse_plan(const std::string& text, const std::string& source);
Plan read_plan_file(const std::string& path);

}  // namespace perseus::plan
