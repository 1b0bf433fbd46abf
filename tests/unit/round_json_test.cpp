// Rounds as the server's store keeps them (round_to_json, round_from_json): a job restored after
// a restart serves the same schedules, the window length the profiler asked for included; plans
// that several pipelines share are stored once and come back shared; rounds stored with a copy
// per pipeline still read.
#include <gtest/gtest.h>

#include "perseus/server/job.hpp"

namespace perseus::server {
namespace {

Round sample_round() {
  Round r;
  r.stages = {StagePlan{{{"forward", 1410}, {"backward", 1380}}, std::nullopt},
              StagePlan{{{"forward", 1200}}, 250.0}};
  auto fast = std::make_shared<const StagePlans>(
      StagePlans{StagePlan{{{"forward", 900}}, std::nullopt}, r.stages[1]});
  r.pipelines[1] = fast;
  r.pipelines[3] = fast;
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
    EXPECT_EQ(plan_for(back, 1, 0).frequencies, (*r.pipelines[1])[0].frequencies);
    EXPECT_EQ(plan_for(back, 2, 0).frequencies, r.stages[0].frequencies);
    EXPECT_EQ(&plan_for(back, 3, 0), &plan_for(back, 1, 0));
  }
}

TEST(RoundJson, ASharedPlanSetIsStoredOnce) {
  Round r = sample_round();
  for (int dp = 4; dp < 100; ++dp) r.pipelines[dp] = r.pipelines[1];
  const nlohmann::json j = round_to_json(r);
  EXPECT_EQ(j["variants"].size(), 1u);
  EXPECT_EQ(j["pipelines"]["99"], 0);
}

TEST(RoundJson, ARoundStoredWithACopyPerPipelineStillReads) {
  nlohmann::json j = round_to_json(sample_round());
  const nlohmann::json copy = j["variants"][0];
  j.erase("variants");
  j["pipelines"] = {{"1", copy}, {"3", copy}};
  const Round back = round_from_json(j);
  EXPECT_EQ(plan_for(back, 3, 0).frequencies,
            (std::vector<std::pair<std::string, int>>{{"forward", 900}}));
  EXPECT_EQ(plan_for(back, 1, 1).power_limit_w, 250.0);
}

}  // namespace
}  // namespace perseus::server
