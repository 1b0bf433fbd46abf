// The control plane's built-in schedulers (DESIGN section 7), driven directly with synthetic
// results: the registry, argument validation, all-max and point solution. The profiler, frontier
// and Zeus schedulers have their own files (scheduler_*_test.cpp).
#include "scheduler_harness.hpp"

namespace perseus::server {
namespace {

using namespace harness;
using perseus::test::error_of;
using perseus::test::TempDir;

// ---------------------------------------------------------------------------------------------
// Registry and argument validation

TEST(SchedulerRegistry, ListsNamesAndRejectsUnknownOnes) {
  EXPECT_EQ(scheduler_names(),
            (std::vector<std::string>{"point-solution", "profiler", "frontier", "all-max",
                                      "zeus-global", "zeus-per-stage"}));
  std::string msg = error_of([] { make_scheduler("fastest-please", job_with({})); });
  EXPECT_CONTAINS(msg, "unknown scheduler 'fastest-please'");
  EXPECT_CONTAINS(msg, "zeus-per-stage");
  EXPECT_CONTAINS(msg,
                  "; Zeus aliases PointSolution, PointSolution3D, InstructionProfiler, "
                  "InstructionProfiler3D, AllMaxFrequency");
}

TEST(SchedulerRegistry, ZeusNamesRunTheSchedulerTheyStandFor) {
  for (const auto& [zeus, ours] :
       std::vector<std::pair<std::string, std::string>>{{"PointSolution", "point-solution"},
                                                        {"PointSolution3D", "point-solution"},
                                                        {"InstructionProfiler", "profiler"},
                                                        {"InstructionProfiler3D", "profiler"},
                                                        {"AllMaxFrequency", "all-max"}}) {
    SCOPED_TRACE(zeus);
    EXPECT_TRUE(known_scheduler(zeus));
    EXPECT_EQ(takes_instruction_order(zeus), takes_instruction_order(ours));
    // Both refuse a job without arguments alike: the same factory made them.
    const std::string refused = error_of([&] { make_scheduler(ours, job_with({})); });
    EXPECT_FALSE(refused.empty());
    EXPECT_EQ(error_of([&] { make_scheduler(zeus, job_with({})); }), refused);
  }
  EXPECT_FALSE(takes_instruction_order("frontier"));
  EXPECT_FALSE(known_scheduler("Frontier"));
}

struct RejectedArgs {
  std::string scheduler;
  json args;
  std::string message;  // part of the error
};

// Each scheduler refuses its arguments with (part of) the message given.
void expect_rejected(const std::vector<RejectedArgs>& cases) {
  ASSERT_FALSE(cases.empty());
  for (const auto& c : cases) {
    SCOPED_TRACE(c.scheduler + " " + c.args.dump());
    EXPECT_CONTAINS(error_of([&] { make_scheduler(c.scheduler, job_with(c.args)); }), c.message);
  }
}

// The arguments every scheduler reads: microbatches and the schedule.
TEST(SchedulerArgs, RejectsUnknownMissingAndMistypedCommonArguments) {
  expect_rejected({
      {"all-max", {{"microbatch", 4}}, "scheduler 'all-max': field 'microbatch': unknown"},
      {"all-max", {}, "scheduler 'all-max': field 'microbatches': missing"},
      {"all-max",
       {{"microbatches", "8"}},
       "scheduler 'all-max': field 'microbatches': must be an integer >= 1, got \"8\""},
      {"all-max", {{"microbatches", 2.5}}, "field 'microbatches': must be an integer >= 1"},
      {"all-max", {{"microbatches", 0}}, "field 'microbatches': must be an integer >= 1"},
      {"all-max", json::array({1, 2}), "scheduler 'all-max': must be a JSON object, got a list"},
      {"all-max", {{"microbatches", 4}, {"schedule", "zigzag"}}, "field 'schedule':"},
      {"all-max", {{"microbatches", 4}, {"schedule", 3}}, "field 'schedule': must be a"},
      {"all-max",
       {{"microbatches", 4}, {"schedule", "zbv"}, {"virtual_stages", 3}},
       "field 'schedule': schedule 'zbv' runs exactly 2 stage(s) per rank, not 3"},
      {"all-max",
       {{"microbatches", 4}, {"schedule", "interleaved-1f1b"}, {"virtual_stages", 0}},
       "field 'virtual_stages': must be an integer >= 1, got 0"},
      {"all-max", {{"microbatches", 9}, {"schedule", "interleaved-1f1b"}}, "field 'schedule': "},
  });
}

TEST(SchedulerArgs, RejectsBadProfilerArguments) {
  expect_rejected({
      {"profiler",
       {{"microbatches", 4}, {"patience", 0}},
       "scheduler 'profiler': field 'patience': must be an integer >= 1"},
      {"profiler",
       {{"microbatches", 4}, {"skip_iterations", true}},
       "field 'skip_iterations': must be an integer >= 0"},
      {"profiler",
       {{"microbatches", 4}, {"min_frequency", 1500}},
       "field 'min_frequency': must be <= max_frequency"},
      {"profiler",
       {{"microbatches", 4}, {"min_frequency", 1411}, {"max_frequency", 1500}},
       "field 'min_frequency': leaves no available frequency up to max_frequency"},
      {"profiler",
       {{"microbatches", 4}, {"split_pooled", "yes"}},
       "scheduler 'profiler': field 'split_pooled': must be true or false, got \"yes\""},
  });
}

// point-solution and frontier, which read a plan or a frontier directory.
TEST(SchedulerArgs, RejectsBadPlanFileArguments) {
  expect_rejected({
      {"point-solution", {}, "scheduler 'point-solution': field 'solution_path': missing"},
      {"point-solution",
       {{"solution_path", "/nonexistent/plan.json"}},
       "field 'solution_path': names no file or directory"},
      {"point-solution",
       {{"solution_path", "x.json"}, {"warmup_rounds", -1}},
       "field 'warmup_rounds': must be an integer >= 0"},
      {"frontier", {}, "scheduler 'frontier': field 'frontier': missing"},
      {"frontier", {{"frontier", "/nonexistent/frontier"}}, "field 'frontier': "},
  });
}

// The Zeus schedulers' power limits.
TEST(SchedulerArgs, RejectsBadPowerLimitArguments) {
  expect_rejected({
      {"zeus-global",
       {{"microbatches", 4}, {"power_limits", json::array({300, 200})}, {"eta", 2}},
       "scheduler 'zeus-global': field 'eta': must be a number in [0, 1], got 2"},
      {"zeus-global", {{"microbatches", 4}}, "field 'power_limits': missing"},
      {"zeus-global",
       {{"microbatches", 4}, {"power_limits", "lots"}},
       "field 'power_limits': must be a non-empty list of watts > 0"},
      {"zeus-global",
       {{"microbatches", 4}, {"power_limits", json::array({300, -5})}},
       "field 'power_limits': must be a non-empty list of watts > 0"},
      {"zeus-per-stage",
       {{"microbatches", 4}, {"power_limits", {{"max_w", 300}, {"min_w", 100}}}},
       "scheduler 'zeus-per-stage': field 'power_limits.step_w': missing"},
      {"zeus-per-stage",
       {{"microbatches", 4}, {"power_limits", {{"max_w", 300}, {"min_w", 100}, {"step", 10}}}},
       "field 'power_limits.step': unknown"},
      {"zeus-per-stage",
       {{"microbatches", 4}, {"power_limits", {{"max_w", 100}, {"min_w", 300}, {"step_w", 10}}}},
       "field 'power_limits.min_w': must be <= max_w"},
      {"zeus-global",
       {{"microbatches", 4}, {"power_limits", json::array({300})}, {"max_power_w", 0}},
       "field 'max_power_w': must be a number of watts > 0"},
  });
}

TEST(SchedulerArgs, NeedsAvailableFrequencies) {
  JobSpec job = job_with({{"microbatches", 4}});
  job.available_frequencies.clear();
  EXPECT_CONTAINS(error_of([&] { make_scheduler("all-max", job); }),
                  "scheduler 'all-max': the job's ranks report no available frequencies");
}

// ---------------------------------------------------------------------------------------------
// all-max

TEST(SchedulerAllMax, ServesEveryInstructionAtTheMaxClockAsTheFinalRound) {
  auto s = make_scheduler("all-max", job_with({{"microbatches", 6}, {"schedule", "gpipe"}}));
  Round r = s->next();
  EXPECT_TRUE(r.done);
  EXPECT_TRUE(r.pipelines.empty());
  ASSERT_EQ(r.stages.size(), 4u);
  EXPECT_TRUE(all_at(r.stages, 1410));
  EXPECT_EQ(names_of(r.stages), names_of(schedule::make_gpipe(4, 6)));
  EXPECT_FALSE(r.stages[0].power_limit_w.has_value());
}

// ---------------------------------------------------------------------------------------------
// point-solution

TEST(SchedulerPointSolution, ServesAJsonPlanAsTheFinalRound) {
  TempDir dir;
  auto sched = schedule::make_1f1b(4, 5);
  auto clocks = mixed_plan(sched, 0);
  write_json_plan(dir.path() / "plan.json", sched, clocks);
  for (const char* name : {"point-solution", "PointSolution"}) {
    auto s =
        make_scheduler(name, job_with({{"solution_path", (dir.path() / "plan.json").string()}}));
    Round r = s->next();
    EXPECT_TRUE(r.done);
    EXPECT_EQ(clocks_of(r.stages), clocks);
    EXPECT_EQ(names_of(r.stages), names_of(sched));
  }
}

TEST(SchedulerPointSolution, ListLiteralTakesItsMicrobatchCountFromItsLength) {
  TempDir dir;
  auto sched = schedule::make_gpipe(4, 3);
  auto clocks = mixed_plan(sched, 2);
  const std::string path = (dir.path() / "freqs_pipeline_00000.py").string();
  write_py_plan(path, clocks);
  // Bare clocks do not name their schedule: 1f1b unless the arguments say otherwise.
  auto s = make_scheduler("point-solution", job_with({{"solution_path", path}}));
  EXPECT_EQ(names_of(s->next().stages), names_of(schedule::make_1f1b(4, 3)));
  s = make_scheduler("point-solution", job_with({{"solution_path", path}, {"schedule", "gpipe"}}));
  Round r = s->next();
  EXPECT_TRUE(r.done);
  EXPECT_EQ(clocks_of(r.stages), clocks);
  EXPECT_EQ(names_of(r.stages), names_of(sched));
  std::string msg = error_of([&] {
    make_scheduler("point-solution", job_with({{"solution_path", path}, {"microbatches", 4}}));
  });
  EXPECT_CONTAINS(msg, "scheduler 'point-solution': " + path);
  EXPECT_CONTAINS(msg, "the plan is for 3 microbatches, not 4");
}

TEST(SchedulerPointSolution, ZeusPairsNeedNoScheduleArguments) {
  TempDir dir;
  auto sched = schedule::make_gpipe(4, 5);
  auto clocks = mixed_plan(sched, 3);
  const std::string path = (dir.path() / "freqs_pipeline_00000.py").string();
  write_file_atomic(path, plan::plan_to_zeus_list(clocks, sched));
  Round r = make_scheduler("point-solution", job_with({{"solution_path", path}}))->next();
  EXPECT_EQ(clocks_of(r.stages), clocks);
  EXPECT_EQ(names_of(r.stages), names_of(sched));
  EXPECT_CONTAINS(
      error_of([&] {
        make_scheduler("point-solution", job_with({{"solution_path", path}, {"schedule", "1f1b"}}));
      }),
      "the plan is for the gpipe schedule, not 1f1b");
}

TEST(SchedulerPointSolution, RunsADirectoryInNameOrderAfterWarmUp) {
  TempDir dir;
  auto sched = schedule::make_1f1b(4, 4);
  std::vector<plan::FrequencyPlan> plans = {mixed_plan(sched, 1), mixed_plan(sched, 2),
                                            mixed_plan(sched, 3)};
  write_py_plan(dir.path() / "a.py", plans[0]);
  write_json_plan(dir.path() / "b.json", sched, plans[1]);
  write_json_plan(dir.path() / "c.json", sched, plans[2]);
  write_file_atomic(dir.path() / "notes.txt", "not a plan\n");
  auto s = make_scheduler("point-solution", job_with({{"solution_path", dir.path().string()},
                                                      {"warmup_rounds", 2},
                                                      {"microbatches", 4}}));
  EXPECT_EQ(s->status()["rounds"], 5);
  for (int k = 0; k < 5; ++k) {
    SCOPED_TRACE(k);
    Round r = s->next();
    EXPECT_EQ(r.done, k == 4);
    EXPECT_EQ(names_of(r.stages), names_of(sched));
    if (k < 2) {
      EXPECT_TRUE(all_at(r.stages, 1410));
      EXPECT_EQ(s->status()["state"], "warmup");
    } else {
      EXPECT_EQ(clocks_of(r.stages), plans[static_cast<std::size_t>(k - 2)]);
    }
    if (!r.done) s->observe(results_of(r, from_profile(a100_profile())));
  }
  EXPECT_EQ(s->status()["state"], "done");
  EXPECT_CONTAINS(s->status()["plan"].get<std::string>(), "c.json");
}

TEST(SchedulerPointSolution, RejectsPlansThatDoNotFitTheJob) {
  TempDir dir;
  auto sched = schedule::make_1f1b(4, 4);
  auto clocks = mixed_plan(sched, 0);
  // Clock count does not match the schedule.
  auto short_plan = clocks;
  short_plan[2].pop_back();
  write_py_plan(dir.path() / "short.py", short_plan);
  EXPECT_CONTAINS(error_of([&] {
                    make_scheduler("point-solution",
                                   job_with({{"solution_path", (dir.path() / "short.py").string()},
                                             {"microbatches", 4}}));
                  }),
                  "plan rank 2 has 7 instructions but the 1f1b schedule has 8");
  // A clock the GPUs do not support.
  auto odd = clocks;
  odd[1][2] = 1234;
  write_json_plan(dir.path() / "odd.json", sched, odd);
  EXPECT_CONTAINS(error_of([&] {
                    make_scheduler(
                        "point-solution",
                        job_with({{"solution_path", (dir.path() / "odd.json").string()}}));
                  }),
                  "stage 1 position 2: clock 1234 MHz is not an available frequency");
  // Stage count differs from pp_degree.
  write_json_plan(dir.path() / "four.json", sched, clocks);
  EXPECT_CONTAINS(error_of([&] {
                    make_scheduler(
                        "point-solution",
                        job_with({{"solution_path", (dir.path() / "four.json").string()}}, 3));
                  }),
                  "plan has 4 stages but the job has pp_degree 3");
  // Arguments that contradict a JSON plan.
  EXPECT_CONTAINS(error_of([&] {
                    make_scheduler("point-solution",
                                   job_with({{"solution_path", (dir.path() / "four.json").string()},
                                             {"microbatches", 6}}));
                  }),
                  "four.json: the plan is for 4 microbatches, not 6");
  // A directory without plans.
  fs::create_directories(dir.path() / "empty");
  EXPECT_CONTAINS(error_of([&] {
                    make_scheduler("point-solution",
                                   job_with({{"solution_path", (dir.path() / "empty").string()}}));
                  }),
                  "has no plan files");
}

}  // namespace
}  // namespace perseus::server
