// The pipeline simulator's ranks in threads over socket pairs, checked against the planner's
// evaluator (one and several stages per GPU), with a server that shares the job id, fails or is
// left by a failing rank.
#include <gtest/gtest.h>

#include <algorithm>
#include <thread>

#include "perseus/client/optimizer.hpp"
#include "perseus/pipeline_sim/coordinator.hpp"
#include "perseus/pipeline_sim/rank.hpp"
#include "perseus/plan/evaluate.hpp"
#include "perseus/profile/gpu_model.hpp"
#include "perseus/profile/split.hpp"
#include "perseus/schedule/catalog.hpp"
#include "perseus/schedule/schedule.hpp"
#include "perseus/wire/protocol.hpp"
#include "scripted_server.hpp"
#include "small_profile.hpp"
#include "test_support.hpp"

namespace {

using nlohmann::json;
using perseus::client::OptimizerOptions;
using perseus::profile::Profile;
namespace pipeline = perseus::pipeline_sim;
using perseus::test::closed_url;
using perseus::test::fast_options;
using perseus::test::ScriptedServer;
using perseus::test::small_profile;
using perseus::test::Warnings;

// ---------------------------------------------------------------- the pipeline simulator

struct SimJob {
  Profile profile;
  perseus::schedule::Schedule schedule;
  int pipelines = 1;
  double blocking_power_w = 0.0;
  OptimizerOptions optimizer;
};

// Runs the job's ranks in threads over socket pairs, the coordinator on this thread.
pipeline::RunResult run_in_threads(const SimJob& job, const pipeline::StopRule& stop) {
  std::vector<pipeline::Channel> coordinator_ends;
  std::vector<pipeline::RankLinks> links = pipeline::make_links(
      job.schedule, job.pipelines, [](int r) { return "rank " + std::to_string(r); }, "coordinator",
      coordinator_ends);
  const int n = static_cast<int>(links.size());
  std::vector<pipeline::RankSpec> specs;
  for (int r = 0; r < n; ++r) {
    specs.push_back(pipeline::rank_spec(r, job.schedule, job.pipelines, job.profile,
                                        job.blocking_power_w, job.optimizer));
  }
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([spec = specs[r], l = std::move(links[r])]() mutable {
      pipeline::run_rank_reporting(spec, l);
    });
  }
  try {
    auto result = pipeline::coordinate(coordinator_ends, stop, 60.0);
    for (auto& t : threads) t.join();
    return result;
  } catch (...) {
    coordinator_ends.clear();  // ranks waiting for the coordinator see it close
    for (auto& t : threads) t.join();
    throw;
  }
}

TEST(ClientPipelineSim, AllMaxIterationsMatchThePlannersEvaluation) {
  SimJob job;
  job.profile = perseus::profile::synthesize_profile(perseus::profile::gpu_model("a100"),
                                                     perseus::profile::default_model(4));
  job.schedule = perseus::schedule::make_1f1b(4, 8);
  job.blocking_power_w = 83.64;
  auto expected = perseus::plan::evaluate(job.profile, job.schedule,
                                          perseus::plan::all_max_plan(job.profile, job.schedule),
                                          job.blocking_power_w);
  for (int pipelines : {1, 2}) {
    job.pipelines = pipelines;
    pipeline::StopRule stop;
    stop.iterations = 3;
    auto result = run_in_threads(job, stop);
    ASSERT_EQ(result.iterations.size(), 3u);
    EXPECT_TRUE(result.finished);
    for (const auto& it : result.iterations) {
      EXPECT_NEAR(it.time_s, expected.time_s, 1e-9 * expected.time_s);
      EXPECT_NEAR(it.energy_j, pipelines * expected.energy_j, 1e-9 * expected.energy_j);
      EXPECT_EQ(it.round, -1);
      EXPECT_FALSE(it.degraded);
    }
  }
  job.schedule = perseus::schedule::make_gpipe(4, 6);
  job.pipelines = 1;
  expected = perseus::plan::evaluate(job.profile, job.schedule,
                                     perseus::plan::all_max_plan(job.profile, job.schedule),
                                     job.blocking_power_w);
  auto result = run_in_threads(job, pipeline::StopRule{2, false, 5, 10000});
  EXPECT_NEAR(result.iterations[1].time_s, expected.time_s, 1e-9 * expected.time_s);
  EXPECT_NEAR(result.iterations[1].energy_j, expected.energy_j, 1e-9 * expected.energy_j);
}

// GPUs that run several stages (interleaved, V-shaped, split backward) exchange each stage's
// activations and gradients with the GPU of the neighbouring stage: every generator's iteration
// takes the evaluator's critical path and energy, with 1 and 2 pipelines.
TEST(ClientPipelineSim, MultiStageSchedulesMatchThePlannersEvaluation) {
  SimJob job;
  job.profile = perseus::profile::split_profile(
      perseus::profile::synthesize_profile(perseus::profile::gpu_model("a100"),
                                           perseus::profile::default_model(4)),
      {2, true, 0.5});
  job.blocking_power_w = 83.64;
  for (const char* name :
       {"interleaved-1f1b", "looped-bfs", "interleaved-zero-bubble", "zbv", "dualpipev"}) {
    job.schedule = perseus::schedule::make_schedule(name, 8, 8, 2);
    auto expected = perseus::plan::evaluate(job.profile, job.schedule,
                                            perseus::plan::all_max_plan(job.profile, job.schedule),
                                            job.blocking_power_w);
    for (int pipelines : {1, 2}) {
      SCOPED_TRACE(std::string(name) + " x" + std::to_string(pipelines));
      job.pipelines = pipelines;
      auto result = run_in_threads(job, pipeline::StopRule{2, false, 5, 10000});
      ASSERT_EQ(result.iterations.size(), 2u);
      for (const auto& it : result.iterations) {
        EXPECT_NEAR(it.time_s, expected.time_s, 1e-9 * expected.time_s);
        EXPECT_NEAR(it.energy_j, pipelines * expected.energy_j, 1e-9 * expected.energy_j);
      }
    }
  }
}

TEST(ClientPipelineSim, SharesRankZerosJobIdAndRunsUntilTheFinalSchedule) {
  SimJob job;
  job.profile = small_profile();
  job.schedule = perseus::schedule::make_1f1b(2, 3);
  ScriptedServer server(std::vector<json>{json::object(), json::object()});
  server.plan_for = [&](int rank, int round) {
    json f = json::array();
    for (const auto& inst : job.schedule.ranks[rank % 2]) {
      f.push_back({perseus::schedule::type_name(inst.type), round == 0 ? 800 : 600});
    }
    return json{{"frequencies", f}};
  };
  job.pipelines = 2;
  Warnings w;
  job.optimizer = fast_options(server.http->url(), w);
  pipeline::StopRule stop;
  stop.until_done = true;
  stop.final_window = 2;
  auto result = run_in_threads(job, stop);
  EXPECT_EQ(result.job_id, "job-7");
  EXPECT_TRUE(result.finished);
  ASSERT_EQ(result.iterations.size(), 4u);
  EXPECT_EQ(result.iterations[0].round, 0);
  EXPECT_FALSE(result.iterations[1].final);
  EXPECT_TRUE(result.iterations[2].final);
  EXPECT_EQ(result.iterations[3].round, 1);
  // Every instruction at 800 MHz, then at 600 MHz: the server's clocks were applied.
  auto expected = [&](int mhz) {
    auto plan = perseus::plan::plan_per_instruction(
        job.schedule, [&](int, const perseus::schedule::Instruction&) { return mhz; });
    return perseus::plan::evaluate(job.profile, job.schedule, plan, 0.0);
  };
  EXPECT_NEAR(result.iterations[0].time_s, expected(800).time_s, 1e-12);
  EXPECT_NEAR(result.iterations[3].time_s, expected(600).time_s, 1e-12);
  EXPECT_NEAR(result.iterations[3].energy_j, 2 * expected(600).energy_j, 1e-12);
  auto targets = server.targets();
  EXPECT_EQ(std::count(targets.begin(), targets.end(), "POST /register_job"), 1);
  // Each of the 4 ranks reports round 0, and the final round's first window (what it saved).
  EXPECT_EQ(std::count(targets.begin(), targets.end(), "POST /result/job-7"), 8);
  EXPECT_TRUE(w.lines->empty()) << w.lines->front();
}

TEST(ClientPipelineSim, GivesUpWaitingForTheFinalScheduleWhenTheServerKeepsFailing) {
  SimJob job;
  job.profile = small_profile();
  job.schedule = perseus::schedule::make_1f1b(2, 2);
  Warnings w;
  job.optimizer = fast_options(closed_url(), w);
  job.optimizer.retries = 0;
  pipeline::StopRule stop;
  stop.until_done = true;
  stop.final_window = 2;
  stop.give_up_degraded = 4;
  auto result = run_in_threads(job, stop);
  EXPECT_TRUE(result.gave_up);
  EXPECT_FALSE(result.finished);
  EXPECT_EQ(result.iterations.size(), 4u);
  EXPECT_TRUE(result.iterations[0].degraded);
  EXPECT_EQ(w.lines->size(), 2u);  // one per rank
}

TEST(ClientPipelineSim, ReportsTheRankThatFailedFirst) {
  SimJob job;
  job.profile = small_profile();
  job.schedule = perseus::schedule::make_1f1b(2, 3);
  std::swap(job.schedule.ranks[1][0], job.schedule.ranks[1][2]);  // stage 1 out of order
  try {
    run_in_threads(job, pipeline::StopRule{});
    ADD_FAILURE() << "no RankFailure";
  } catch (const pipeline::RankFailure& e) {
    EXPECT_EQ(e.rank(), 1);
    EXPECT_CONTAINS(e.what(), "schedule error: 1B0 runs before its forward on the same GPU");
  }
}

}  // namespace
