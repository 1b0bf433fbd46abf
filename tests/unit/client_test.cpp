// The training-side client's optimizer: measuring without a server, its options, and its protocol
// against a scripted loopback server (rounds, power limits, schedules that do not match the loop,
// stage-qualified instructions). Its failure policy, the clock thread and the pipeline simulator
// have their own files.
#include <gtest/gtest.h>

#include "optimizer_harness.hpp"
#include "perseus/client/optimizer.hpp"
#include "perseus/client/sim_gpu.hpp"
#include "perseus/schedule/schedule.hpp"
#include "perseus/wire/protocol.hpp"
#include "scripted_server.hpp"
#include "small_profile.hpp"
#include "test_support.hpp"

namespace {

using nlohmann::json;
using perseus::client::OptimizerOptions;
using perseus::client::PipelineFrequencyOptimizer;
using perseus::client::SimGpu;
using perseus::client::SimGpuOptions;
using perseus::measure::CounterOptions;
using perseus::test::error_of;
using perseus::test::fast_options;
using perseus::test::iterate;
using perseus::test::sim;
using perseus::test::small_profile;
using perseus::test::Warnings;

TEST(ClientOptimizer, MeasuresIterationsWithoutAServer) {
  OptimizerOptions o;
  o.report_every = 3;
  PipelineFrequencyOptimizer opt(o, sim(1));
  iterate(opt, 5);
  // Energy is attributed when a window closes: the first 3 iterations are measured so far.
  ASSERT_EQ(opt.iterations().size(), 3u);
  for (const auto& it : opt.iterations()) {
    EXPECT_NEAR(it.time_s, 0.045, 1e-12);  // forward + backward at the highest clock
    EXPECT_NEAR(it.energy_j, 9.6, 1e-12);
  }
  EXPECT_EQ(opt.round(), -1);
  EXPECT_FALSE(opt.degraded());
  EXPECT_FALSE(opt.done());
  EXPECT_EQ(opt.job_id(), "");
}

// Hooks called out of order are warned of, each naming what it drops, and the iterations after
// them are measured as if nothing had happened; strict mode throws instead.
TEST(ClientOptimizer, WarnsOfHooksOutOfOrderAndKeepsMeasuring) {
  Warnings w;
  OptimizerOptions o;
  o.report_every = 2;
  o.log = w.sink();
  PipelineFrequencyOptimizer opt(o, sim());
  opt.on_instruction_begin("forward");  // before any iteration
  opt.on_instruction_end("forward");
  opt.on_step_begin();
  opt.on_step_begin();  // the first iteration never ends
  opt.on_instruction_begin("forward");
  opt.on_instruction_begin("backward");  // the forward never ends
  opt.on_instruction_end("backward");
  opt.on_instruction_end("forward");  // nothing to end
  opt.on_instruction_begin("forward");
  opt.on_step_end();  // the forward still runs
  opt.on_instruction_end("forward");
  opt.on_step_end();  // no iteration runs
  std::string all;
  for (const auto& line : *w.lines) all += line + "\n";
  EXPECT_CONTAINS(all,
                  "on_instruction_begin('forward') outside an iteration (before "
                  "on_step_begin or after on_step_end); its measurement is dropped");
  EXPECT_CONTAINS(all,
                  "on_step_begin while an iteration is running (no on_step_end); that "
                  "iteration is dropped");
  EXPECT_CONTAINS(all,
                  "on_instruction_begin('backward') while 'forward' is running (no "
                  "on_instruction_end); the measurement of 'forward' is dropped");
  EXPECT_CONTAINS(all, "on_instruction_end('forward') does not follow any on_instruction_begin");
  EXPECT_CONTAINS(all, "on_step_end while 'forward' is running (call on_instruction_end first)");
  EXPECT_CONTAINS(all, "on_step_end without on_step_begin; the iteration is not measured");
  iterate(opt, 1);  // closes the window of the one misused iteration that ended and a good one
  iterate(opt, 2);
  ASSERT_EQ(opt.iterations().size(), 4u);
  for (std::size_t i = 1; i < 4; ++i) {
    EXPECT_NEAR(opt.iterations()[i].time_s, 0.030, 1e-12) << i;  // forward + backward, stage 0
    EXPECT_NEAR(opt.iterations()[i].energy_j, 6.4, 1e-12) << i;
  }
  o.strict = true;
  PipelineFrequencyOptimizer strict(o, sim());
  EXPECT_CONTAINS(error_of([&] { strict.on_instruction_begin("forward"); }),
                  "outside an iteration");
}

TEST(ClientOptimizer, RejectsInvalidOptions) {
  OptimizerOptions o;
  o.report_every = 0;
  EXPECT_CONTAINS(error_of([&] { PipelineFrequencyOptimizer opt(o, sim()); }),
                  "optimizer options: field 'report_every': must be >= 1");
  o = OptimizerOptions{};
  o.pp_degree = 2;
  EXPECT_CONTAINS(error_of([&] { PipelineFrequencyOptimizer opt(o, sim()); }),
                  "field 'world_size': is 1 but pp_degree * dp_degree * tp_degree is 2");
  o = OptimizerOptions{};
  o.server_url = "ftp://x";
  EXPECT_CONTAINS(error_of([&] { PipelineFrequencyOptimizer opt(o, sim()); }),
                  "field 'server_url': server URL 'ftp://x': must start with http://");
  EXPECT_CONTAINS(error_of([&] { PipelineFrequencyOptimizer opt(OptimizerOptions{}, nullptr); }),
                  "no GPU backend");
}

using perseus::test::clocks;
using perseus::test::ScriptedServer;

TEST(ClientOptimizer, FollowsTheServersSchedulesRoundByRound) {
  ScriptedServer server(std::vector<json>{clocks(800, 600), clocks(600, 1000)});
  Warnings w;
  OptimizerOptions o = fast_options(server.http->url(), w);
  o.scheduler = "all-max";
  o.job_metadata = "test job";
  PipelineFrequencyOptimizer opt(o, sim());
  EXPECT_EQ(opt.job_id(), "job-7");
  EXPECT_EQ(opt.round(), 0);
  EXPECT_FALSE(opt.done());
  iterate(opt, 2);
  EXPECT_EQ(opt.round(), 1);
  EXPECT_TRUE(opt.done());
  iterate(opt, 4);  // the final schedule: its first window, then its next, as final window 1
  ASSERT_EQ(opt.iterations().size(), 6u);
  EXPECT_NEAR(opt.iterations()[0].time_s, 0.012 + 0.032, 1e-12);
  EXPECT_NEAR(opt.iterations()[0].energy_j, 1.8 + 3.52, 1e-12);
  EXPECT_NEAR(opt.iterations()[5].time_s, 0.016 + 0.020, 1e-12);
  EXPECT_TRUE(w.lines->empty());
  EXPECT_FALSE(opt.degraded());
  EXPECT_EQ(server.targets(),
            (std::vector<std::string>{"POST /register_job", "POST /register_rank/job-7",
                                      "GET /schedule/job-7?rank=0&round=0", "POST /result/job-7",
                                      "GET /schedule/job-7?rank=0&round=1", "POST /result/job-7",
                                      "POST /result/job-7"}));
  auto requests = server.http->requests();
  json job = json::parse(requests[0].body);
  EXPECT_EQ(job["scheduler"], "all-max");
  EXPECT_EQ(job["job_metadata"], "test job");
  EXPECT_EQ(job["world_size"], 1);
  json rank = json::parse(requests[1].body);
  EXPECT_EQ(rank["available_frequencies"], json({1000, 800, 600}));
  ASSERT_EQ(server.results.size(), 3u);
  auto result = perseus::wire::parse_profiling_result(server.results[0]);
  EXPECT_EQ(result.round, 0);
  EXPECT_EQ(result.final_window, std::nullopt);
  EXPECT_EQ(perseus::wire::parse_profiling_result(server.results[1]).round, 1);
  EXPECT_EQ(perseus::wire::parse_profiling_result(server.results[1]).final_window, std::nullopt);
  auto later = perseus::wire::parse_profiling_result(server.results[2]);
  EXPECT_EQ(later.round, 1);
  EXPECT_EQ(later.final_window, 1);
  ASSERT_EQ(result.iter_time.size(), 2u);
  EXPECT_NEAR(result.iter_time[1], 0.044, 1e-12);
  ASSERT_EQ(result.time_breakdown["forward"].size(), 2u);
  ASSERT_EQ(result.time_breakdown["forward"][1].size(), 1u);
  EXPECT_NEAR(result.time_breakdown["forward"][1][0], 0.012, 1e-12);
  EXPECT_NEAR(result.energy_breakdown["backward"][0][0], 3.52, 1e-12);
}

// After the final plans' first window, each window is reported as the final round's next
// (final_window 1, 2, ...) so the job's saving keeps counting; one the server does not take ends
// them, with one warning, and training asks nothing more of it.
TEST(ClientOptimizer, ReportsTheFinalPlansWindowsUntilOneFails) {
  ScriptedServer server(std::vector<json>{clocks(800, 600)});
  Warnings w;
  PipelineFrequencyOptimizer opt(fast_options(server.http->url(), w), sim());
  ASSERT_TRUE(opt.done());
  iterate(opt, 6);  // three windows: the first, final windows 1 and 2
  ASSERT_EQ(server.results.size(), 3u);
  for (int k = 1; k <= 2; ++k) {
    auto result = perseus::wire::parse_profiling_result(server.results[k]);
    EXPECT_EQ(result.round, 0);
    EXPECT_EQ(result.final_window, k);
  }
  EXPECT_TRUE(w.lines->empty());
  server.failing = true;
  iterate(opt, 2);
  const std::size_t asked = server.targets().size();
  iterate(opt, 6);
  EXPECT_EQ(server.targets().size(), asked);  // nothing more after the failure
  ASSERT_EQ(w.lines->size(), 1u);
  EXPECT_CONTAINS(w.lines->front(), "the final plans' windows are no longer reported");
  EXPECT_CONTAINS(w.lines->front(), "training is not affected");
  EXPECT_FALSE(opt.degraded());
  EXPECT_EQ(opt.iterations().size(), 14u);  // still measured
}

TEST(ClientOptimizer, SetsThePowerLimitOfPowerLimitSchedules) {
  ScriptedServer server(
      std::vector<json>{json{{"frequencies", json::array()}, {"power_limit_w", 155.0}}});
  Warnings w;
  PipelineFrequencyOptimizer opt(fast_options(server.http->url(), w), sim());
  EXPECT_TRUE(opt.done());
  iterate(opt, 2);
  EXPECT_NEAR(opt.iterations()[0].time_s, 0.012 + 0.032, 1e-12);  // 800 and 600 MHz fit 155 W
  EXPECT_TRUE(w.lines->empty());
}

// A schedule that asks for more iterations per window (the profiler, when windows are too short
// for the energy counter) is followed from the window after it; one that does not ask goes back
// to the client's own report_every.
TEST(ClientOptimizer, ReportsEveryAsManyIterationsAsTheScheduleAsks) {
  json longer = clocks(800, 600);
  longer["report_every"] = 5;
  ScriptedServer server(std::vector<json>{longer, clocks(800, 600), clocks(600, 600)});
  Warnings w;
  PipelineFrequencyOptimizer opt(fast_options(server.http->url(), w), sim());  // report_every 2
  iterate(opt, 5);
  ASSERT_EQ(server.result_count(), 1u);  // round 0's window of 5 iterations
  EXPECT_EQ(server.results[0]["iter_time"].size(), 5u);
  EXPECT_EQ(opt.round(), 1);
  iterate(opt, 2);
  ASSERT_EQ(server.result_count(), 2u);  // round 1 asks nothing: 2 again
  EXPECT_EQ(server.results[1]["iter_time"].size(), 2u);
  EXPECT_TRUE(opt.done());
  for (json every : {json(0), json(perseus::wire::kMaxReportEvery + 1), json(2.5), json("5")}) {
    json bad = clocks(800, 600);
    bad["report_every"] = every;
    bad["rank"] = 0;
    EXPECT_CONTAINS(error_of([&] { perseus::wire::parse_frequency_schedule(bad); }),
                    "field 'report_every'");
  }
}

TEST(ClientOptimizer, RunsAtTheDefaultClockWhenTheScheduleDoesNotMatchTheLoop) {
  ScriptedServer server(std::vector<json>{clocks(800, 600), clocks(600, 600)});
  Warnings w;
  PipelineFrequencyOptimizer opt(fast_options(server.http->url(), w), sim());
  iterate(opt, 1, {"backward", "forward"});
  EXPECT_TRUE(opt.degraded());  // not silent: the iteration ran at the default clock
  EXPECT_EQ(opt.mismatched_iterations(), 1u);
  EXPECT_TRUE(w.lines->empty());  // said once, when the window closes
  iterate(opt, 1, {"backward", "forward"});
  EXPECT_NEAR(opt.iterations()[0].time_s, 0.030, 1e-12);  // the default (highest) clocks
  ASSERT_EQ(w.lines->size(), 1u);
  EXPECT_CONTAINS(w.lines->front(),
                  "2 of this window's 2 iterations did not follow the schedule and ran at the "
                  "default clock: schedule of round 0 for rank 0: the schedule expects 'forward' "
                  "as instruction 1 of the iteration, but the training loop ran 'backward' "
                  "(expected 2 instructions: forward x1, backward x1)");
  EXPECT_EQ(opt.round(), 1);                            // the protocol goes on
  iterate(opt, 2, {"forward", "backward", "forward"});  // a loop with one instruction too many
  ASSERT_EQ(w.lines->size(), 2u);                       // one line per window
  EXPECT_CONTAINS(w.lines->back(), "2 of this window's 2 iterations");
  EXPECT_CONTAINS(w.lines->back(), "expects nothing more as instruction 3");
  EXPECT_EQ(opt.mismatched_iterations(), 4u);
  Warnings w2;
  OptimizerOptions strict = fast_options(server.http->url(), w2);
  strict.strict = true;
  PipelineFrequencyOptimizer opt2(strict, sim());
  opt2.on_step_begin();
  EXPECT_CONTAINS(error_of([&] { opt2.on_instruction_begin("backward"); }), "expects 'forward'");
}

// A GPU that runs stages 0 and 1 (an interleaved or V-shaped schedule) gets a plan whose
// instructions name their stage: the hooks pass it, the clocks follow the plan and the breakdowns
// carry the labels. A loop that leaves the stage out is told to pass it.
TEST(ClientOptimizer, MatchesInstructionsByStageOnAGpuThatRunsSeveral) {
  const json plan = {
      {"frequencies",
       json::array({json::array({"forward@0", 800}), json::array({"forward@1", 600}),
                    json::array({"backward@1", 1000}), json::array({"backward@0", 600})})}};
  ScriptedServer server(std::vector<json>{plan, plan});
  Warnings w;
  auto two_stages = std::make_unique<SimGpu>(
      small_profile(),
      SimGpuOptions{{0, 1}, 0.0, false, 1.0, perseus::measure::CounterOptions::named("ideal")});
  PipelineFrequencyOptimizer opt(fast_options(server.http->url(), w), std::move(two_stages));
  const std::vector<std::pair<std::string, int>> order = {
      {"forward", 0}, {"forward", 1}, {"backward", 1}, {"backward", 0}};
  for (int i = 0; i < 2; ++i) {
    opt.on_step_begin();
    for (const auto& [name, stage] : order) {
      opt.on_instruction_begin(name, stage);
      opt.on_instruction_end(name, stage);
    }
    opt.on_step_end();
  }
  EXPECT_TRUE(w.lines->empty()) << w.lines->front();
  ASSERT_EQ(opt.iterations().size(), 2u);
  EXPECT_NEAR(opt.iterations()[0].time_s, 0.012 + 0.016 * 1.5 + 0.020 * 1.5 + 0.032, 1e-12);
  ASSERT_EQ(server.results.size(), 1u);
  auto result = perseus::wire::parse_profiling_result(server.results[0]);
  EXPECT_NEAR(result.energy_breakdown.at("backward@1")[0][0], 4.4 * 1.5, 1e-12);
  EXPECT_NEAR(result.time_breakdown.at("forward@0")[1][0], 0.012, 1e-12);

  iterate(opt, 2);  // "forward", "backward": no stage
  // The simulated GPU refuses the unlabelled instructions too (warned once each), so the window
  // lasted 0 s and the counter did not change in it (said too).
  const std::string expected =
      "the schedule expects 'forward@0' as instruction 1 of the iteration, but the training loop "
      "ran 'forward' (this GPU runs several stages: pass the stage index with the instruction)";
  EXPECT_TRUE(std::any_of(w.lines->begin(), w.lines->end(), [&](const std::string& line) {
    return line.find(expected) != std::string::npos;
  })) << testing::PrintToString(*w.lines);
}

// With one stage per GPU the plan names bare kinds (Zeus's names); a loop that passes the stage
// anyway matches them, and its measurements go under the plan's names.
TEST(ClientOptimizer, AcceptsAStageForAPlanWithBareNames) {
  ScriptedServer server(std::vector<json>{clocks(800, 600), clocks(800, 600)});
  Warnings w;
  PipelineFrequencyOptimizer opt(fast_options(server.http->url(), w), sim(1));
  for (int i = 0; i < 2; ++i) {
    opt.on_step_begin();
    for (const char* name : {"forward", "backward"}) {
      opt.on_instruction_begin(name, 1);
      opt.on_instruction_end(name, 1);
    }
    opt.on_step_end();
  }
  EXPECT_TRUE(w.lines->empty()) << w.lines->front();
  EXPECT_NEAR(opt.iterations()[0].time_s, (0.012 + 0.032) * 1.5, 1e-12);
  auto result = perseus::wire::parse_profiling_result(server.results.at(0));
  EXPECT_EQ(result.time_breakdown.count("forward"), 1u);
  EXPECT_EQ(result.time_breakdown.count("forward@1"), 0u);
}

}  // namespace
