// The EnvPipe baseline (Choi et al., ATC'23): keep the pipeline's outer envelope at the maximum
// clock, start everything else at its energy-optimal clock, and raise clocks on the critical path
// until it lies on the envelope (architecture section 6). Also EnvPipe's reordered schedule, which
// runs extra warm-up forwards on every stage but the last.
#pragma once

#include <string>

#include "perseus/plan/evaluate.hpp"
#include "perseus/profile/profile.hpp"
#include "perseus/schedule/schedule.hpp"

namespace perseus::baselines {

// greedy: the critical instruction nearest the end of the path goes up 3 clock steps;
// balanced: every critical instruction at the path's lowest clock goes up 1 step.
enum class EnvPipePolicy { kGreedy, kBalanced };

// "greedy" or "balanced"; throws perseus::Error naming the unknown policy otherwise.
EnvPipePolicy parse_envpipe_policy(const std::string& name);

// Whether EnvPipe applies to `schedule`: its envelope is defined for one stage per GPU (1f1b,
// gpipe, envelope), not for interleaved or V-shaped schedules.
bool envpipe_applies(const schedule::Schedule& schedule);

struct EnvPipeResult {
  plan::FrequencyPlan plan;
  plan::Evaluation evaluation;
  int iterations = 0;             // clock raises applied
  bool envelope_reached = false;  // the final critical path lies on the outer envelope
  std::string stop_reason;        // a sentence saying why the loop stopped
};

// The outer envelope: every instruction of the last stage, the forward of microbatch 0 and the
// backward of the last microbatch on every stage. Clocks step through each (stage, type)'s
// profiled clocks in increasing order. Always terminates: each iteration raises at least one
// clock, and an iteration cap guards the loop besides. Throws perseus::Error when the profile's
// stage count differs from the schedule's, or when EnvPipe does not apply to the schedule.
EnvPipeResult envpipe(const profile::Profile& profile, const schedule::Schedule& schedule,
                      double blocking_power_w, EnvPipePolicy policy);

// EnvPipe's extra warm-up forwards per stage: for s < S-1,
// floor(t_B(s, max clock) * (S - s - 1) / t_F(s, energy-optimal clock)), capped so that the stage
// runs at most M warm-up forwards; 0 for the last stage. Like EnvPipe, a count larger than the
// previous stage's is lowered to it (unless the previous stage already runs all M forwards in
// warm-up), so the schedule cannot deadlock.
std::vector<int> envelope_warmup_counts(const profile::Profile& profile, int num_stages,
                                        int num_microbatches);

// EnvPipe's reordered schedule: schedule::make_1f1b_warmup with envelope_warmup_counts.
schedule::Schedule envelope_schedule(const profile::Profile& profile, int num_stages,
                                     int num_microbatches);

// The schedule named `name` for `profile`: "envelope" is envelope_schedule (one stage per GPU:
// stages_per_rank 0 or 1), any other schedule::make_schedule's. Throws perseus::Error.
schedule::Schedule profile_schedule(const std::string& name, const profile::Profile& profile,
                                    int num_stages, int num_microbatches, int stages_per_rank = 0);

}  // namespace perseus::baselines
