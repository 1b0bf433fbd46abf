// Rounds as the server's store keeps them (round_to_json, round_from_json): a job restored after
// a restart serves the same schedules, the window length the profiler asked for included.
#include <gtest/gtest.h>

#include "perseus/server/job.hpp"

namespace perseus::server {
namespace {

Round sample_round() {
  Round r;
  r.stages = {StagePlan{{{"forward", 1410}, {"backward", 1380}}, std::nullopt},
              StagePlan{{{"forward", 1200}}, 250.0}};
  r.pipelines[1] = {StagePlan{{{"forward", 900}}, std::nullopt}, r.stages[1]};
  return r;
}

TEST(RoundJson, ARoundComesBackAsItWasStored) {
  for (std::optional<int> every : {std::optional<int>(), std::optional<int>(12)}) {
    Round r = sample_round();
    r.report_every = every;
    r.done = every.has_value();
    const Round back = round_from_json(nlohmann::json::parse(round_to_json(r).dump()));
    EXPECT_EQ(back.report_every, every);
    EXPECT_EQ(back.done, r.done);
    EXPECT_EQ(plan_for(back, 0, 0).frequencies, r.stages[0].frequencies);
    EXPECT_EQ(plan_for(back, 0, 1).power_limit_w, 250.0);
    EXPECT_EQ(plan_for(back, 1, 0).frequencies, r.pipelines[1][0].frequencies);
  }
}

}  // namespace
}  // namespace perseus::server
