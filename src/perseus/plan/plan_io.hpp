// Plan files, all read and written: the plan JSON (`perseus.plan/1`, docs/formats.md), the
// reference optimizer's `freqs_pipeline_%05d.py` list literal (one list of clocks per rank, which
// is per stage in the one-stage-per-rank schedules it knows) and Zeus's list of (instruction,
// clock) pairs per rank. Reading never evaluates code; malformed
// files get a one-line perseus::Error.
#pragma once

#include <optional>
#include <string>

#include "perseus/plan/evaluate.hpp"
#include "perseus/schedule/schedule.hpp"

namespace perseus::plan {

struct Plan {
  std::string schedule = "1f1b";  // empty: the file does not say (a list of bare clocks)
  int num_stages = 0;
  int num_microbatches = 0;
  int stages_per_rank = 0;  // stages each rank (GPU) runs (0: the file does not say)
  double unit_time_s = 0.0;
  double blocking_power_w = 0.0;
  std::optional<TimeEnergy> predicted;
  std::optional<TimeEnergy> evaluated;
  FrequencyPlan frequencies;  // per rank, in the rank's action order
};

// The blocking power (W) to evaluate `plan` with: `given` where a user gave one, else the one a
// plan JSON carries (blocking_power_w when positive), else nullopt.
std::optional<double> blocking_power_for(const Plan& plan, std::optional<double> given);

// Serializes a plan; instruction types and microbatches come from `schedule`.
std::string plan_to_json(const Plan& plan, const schedule::Schedule& schedule);
// The list literal `[\n[1410, 1395, ...],\n...\n]\n` followed by `# ...` comment lines.
std::string plan_to_python_list(const FrequencyPlan& frequencies, const std::string& comment = "");

// Zeus's format: `[\n[("forward", 1410), ("backward", 1395), ...],\n...\n]\n`, one list per
// stage, instruction names from `schedule`, then `# ...` comment lines.
std::string plan_to_zeus_list(const FrequencyPlan& frequencies, const schedule::Schedule& schedule,
                              const std::string& comment = "");

// Parses any of the formats (JSON when the text starts with '{', a list literal when with '[').
// Zeus pairs identify the schedule (schedule::identify_schedule); bare clocks leave `schedule`
// empty and give num_microbatches when every stage has the same even number of clocks (2M).
// Throws perseus::Error naming `source` and the problem.
//
// Zeus's PointSolution files hold one list per rank, so a stage with data- or tensor-parallel
// copies appears once per copy; such a file is folded into one list per stage, and the copies of
// a stage must hold the same list (Perseus serves one plan per stage). `stage_of_rank` (the stage
// each rank runs) says which lists are copies when it has one entry per list. Otherwise, when the
// lists taken as stages form no schedule, the copies are taken to be adjacent (Megatron's rank
// order: tensor-parallel fastest, then data-parallel, then pipeline) in the smallest blocks of
// equal lists that form one.
Plan parse_plan(const std::string& text, const std::string& source,
                const std::vector<int>& stage_of_rank = {});
Plan read_plan_file(const std::string& path, const std::vector<int>& stage_of_rank = {});

// The schedule a plan runs on. What the plan says wins; `given` (a user's choice; empty name or 0
// microbatches: none) fills what it does not say and must agree with what it does; the schedule
// defaults to 1f1b. Throws perseus::Error naming `source` on a contradiction or an unknown count.
struct ScheduleChoice {
  std::string name;
  int microbatches = 0;
  int stages_per_rank = 0;  // 0: the schedule's default
};
ScheduleChoice plan_schedule(const Plan& plan, const ScheduleChoice& given,
                             const std::string& source);

}  // namespace perseus::plan
