// The control plane's built-in schedulers (DESIGN section 7), driven directly with synthetic
// results: point solution, all-max, instruction profiler, frontier (with stragglers) and the Zeus
// power-limit baselines, plus argument validation.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "perseus/plan/frontier_query.hpp"
#include "perseus/plan/frontier_store.hpp"
#include "perseus/plan/plan_io.hpp"
#include "perseus/plan/problem.hpp"
#include "perseus/plan/solver.hpp"
#include "perseus/profile/csv.hpp"
#include "perseus/profile/gpu_model.hpp"
#include "perseus/profile/split.hpp"
#include "perseus/schedule/catalog.hpp"
#include "perseus/schedule/schedule.hpp"
#include "perseus/server/scheduler.hpp"
#include "perseus/util/files.hpp"
#include "perseus/wire/protocol.hpp"
#include "test_support.hpp"

namespace perseus::server {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using perseus::test::error_of;
using perseus::test::TempDir;

const profile::GpuModel& a100() {
  return profile::gpu_model("a100");
}

const profile::Profile& a100_profile() {
  static const profile::Profile p = profile::synthesize_profile(a100(), profile::default_model(4));
  return p;
}

JobSpec job_with(json args, int pp = 4, int dp = 1) {
  JobSpec job;
  job.job_id = "job";
  job.pp_degree = pp;
  job.dp_degree = dp;
  job.available_frequencies = a100().frequencies();
  job.args = std::move(args);
  return job;
}

// Time and energy of one occurrence of an instruction run under a stage plan at `mhz`.
using CostFn = std::function<std::pair<double, double>(int stage, const std::string& instruction,
                                                       int mhz, std::optional<double> limit)>;

// Costs from a profile; an instruction labelled with its stage ("forward@5", a GPU that runs
// several stages) costs that stage's row, a bare one the row of the GPU's own stage.
CostFn from_profile(const profile::Profile& prof) {
  return [&prof](int gpu, const std::string& instruction, int mhz, std::optional<double>) {
    auto [kind, stage] = wire::parse_instruction_label(instruction);
    const auto& m = prof.at(stage < 0 ? gpu : stage, kind, mhz);
    return std::make_pair(m.time_s, m.energy_j);
  };
}

struct SynthOptions {
  int iterations = 3;
  double idle_s = 0.02;        // every stage waits this long after the slowest stage's work
  double blocking_w = 83.64;   // ... drawing this power, as does every stage that finishes early
  double warmup_factor = 1.0;  // iteration 0's measurements are scaled by this (a warm-up)
};

// What the clients would report for `round`: every stage runs its plan; the iteration lasts as
// long as the busiest stage plus idle_s, and every stage blocks for the rest at blocking_w.
std::vector<StageResult> results_of(const Round& round, const CostFn& cost,
                                    const SynthOptions& o = {}) {
  std::vector<StageResult> out(round.stages.size());
  std::vector<double> busy(round.stages.size(), 0.0), busy_energy(round.stages.size(), 0.0);
  for (std::size_t s = 0; s < round.stages.size(); ++s) {
    const StagePlan& plan = round.stages[s];
    for (int k = 0; k < o.iterations; ++k) {
      double scale = k == 0 ? o.warmup_factor : 1.0;
      for (const auto& [name, mhz] : plan.frequencies) {
        auto [t, e] = cost(static_cast<int>(s), name, mhz, plan.power_limit_w);
        out[s].time_breakdown[name].resize(static_cast<std::size_t>(o.iterations));
        out[s].energy_breakdown[name].resize(static_cast<std::size_t>(o.iterations));
        out[s].time_breakdown[name][k].push_back(t * scale);
        out[s].energy_breakdown[name][k].push_back(e * scale);
        if (k == 0) {
          busy[s] += t;
          busy_energy[s] += e;
        }
      }
    }
  }
  double iteration = *std::max_element(busy.begin(), busy.end()) + o.idle_s;
  for (std::size_t s = 0; s < out.size(); ++s) {
    for (int k = 0; k < o.iterations; ++k) {
      double scale = k == 0 ? o.warmup_factor : 1.0;
      out[s].iter_time.push_back(iteration * scale);
      out[s].iter_energy.push_back((busy_energy[s] + o.blocking_w * (iteration - busy[s])) * scale);
    }
  }
  return out;
}

// Per stage, the clocks of a round's plans.
plan::FrequencyPlan clocks_of(const std::vector<StagePlan>& stages) {
  plan::FrequencyPlan out;
  for (const auto& st : stages) {
    out.emplace_back();
    for (const auto& [name, mhz] : st.frequencies) out.back().push_back(mhz);
  }
  return out;
}

// Per GPU, the instruction labels of the schedule, in order: the kind, with the stage when a GPU
// runs several.
std::vector<std::vector<std::string>> names_of(const schedule::Schedule& sched) {
  std::vector<std::vector<std::string>> out;
  for (const auto& rank : sched.ranks) {
    out.emplace_back();
    for (const auto& inst : rank) {
      out.back().push_back(wire::instruction_label(schedule::type_name(inst.type),
                                                   sched.one_stage_per_rank() ? -1 : inst.stage));
    }
  }
  return out;
}

std::vector<std::vector<std::string>> names_of(const std::vector<StagePlan>& stages) {
  std::vector<std::vector<std::string>> out;
  for (const auto& st : stages) {
    out.emplace_back();
    for (const auto& [name, mhz] : st.frequencies) out.back().push_back(name);
  }
  return out;
}

bool all_at(const std::vector<StagePlan>& stages, int mhz) {
  for (const auto& st : stages) {
    for (const auto& [name, f] : st.frequencies) {
      if (f != mhz) return false;
    }
  }
  return true;
}

// A plan on a 4-stage 1F1B schedule with clocks taken from the available list.
plan::FrequencyPlan mixed_plan(const schedule::Schedule& sched, int offset) {
  const auto clocks = a100().frequencies();
  plan::FrequencyPlan p(sched.ranks.size());
  for (std::size_t s = 0; s < sched.ranks.size(); ++s) {
    for (std::size_t i = 0; i < sched.ranks[s].size(); ++i) {
      p[s].push_back(clocks[(s + i + static_cast<std::size_t>(offset)) % 10]);
    }
  }
  return p;
}

void write_json_plan(const fs::path& path, const schedule::Schedule& sched,
                     const plan::FrequencyPlan& clocks) {
  plan::Plan p;
  p.schedule = sched.name;
  p.num_stages = sched.num_stages;
  p.num_microbatches = sched.num_microbatches;
  p.frequencies = clocks;
  write_file_atomic(path, plan::plan_to_json(p, sched));
}

void write_py_plan(const fs::path& path, const plan::FrequencyPlan& clocks) {
  write_file_atomic(path, plan::plan_to_python_list(clocks, "test plan"));
}

// ---------------------------------------------------------------------------------------------
// Registry and argument validation

TEST(SchedulerRegistry, ListsNamesAndRejectsUnknownOnes) {
  EXPECT_EQ(scheduler_names(),
            (std::vector<std::string>{"point-solution", "profiler", "frontier", "all-max",
                                      "zeus-global", "zeus-per-stage"}));
  std::string msg = error_of([] { make_scheduler("fastest-please", job_with({})); });
  EXPECT_CONTAINS(msg, "unknown scheduler 'fastest-please'");
  EXPECT_CONTAINS(msg, "zeus-per-stage");
}

TEST(SchedulerArgs, RejectsUnknownArgumentsAndWrongTypes) {
  struct Case {
    std::string scheduler;
    json args;
    std::string message;
  };
  const std::vector<Case> cases = {
      {"all-max", {{"microbatch", 4}}, "scheduler 'all-max': unknown argument 'microbatch'"},
      {"all-max", {}, "scheduler 'all-max': argument 'microbatches' is required"},
      {"all-max",
       {{"microbatches", "8"}},
       "scheduler 'all-max': argument 'microbatches' must be an integer >= 1, got \"8\""},
      {"all-max", {{"microbatches", 2.5}}, "argument 'microbatches' must be an integer >= 1"},
      {"all-max", {{"microbatches", 0}}, "argument 'microbatches' must be an integer >= 1"},
      {"all-max", json::array({1, 2}), "scheduler 'all-max': arguments must be a JSON object"},
      {"all-max", {{"microbatches", 4}, {"schedule", "zigzag"}}, "argument 'schedule':"},
      {"all-max", {{"microbatches", 4}, {"schedule", 3}}, "argument 'schedule' must be a"},
      {"all-max",
       {{"microbatches", 4}, {"schedule", "zbv"}, {"virtual_stages", 3}},
       "argument 'schedule': schedule 'zbv' runs exactly 2 stage(s) per rank, not 3"},
      {"all-max",
       {{"microbatches", 4}, {"schedule", "interleaved-1f1b"}, {"virtual_stages", 0}},
       "argument 'virtual_stages' must be an integer >= 1, got 0"},
      {"all-max", {{"microbatches", 9}, {"schedule", "interleaved-1f1b"}}, "argument 'schedule': "},
      {"profiler",
       {{"microbatches", 4}, {"patience", 0}},
       "scheduler 'profiler': argument 'patience' must be an integer >= 1"},
      {"profiler",
       {{"microbatches", 4}, {"skip_iterations", true}},
       "argument 'skip_iterations' must be an integer >= 0"},
      {"profiler",
       {{"microbatches", 4}, {"min_frequency", 1500}},
       "argument 'min_frequency' must be <= max_frequency"},
      {"profiler",
       {{"microbatches", 4}, {"min_frequency", 1411}, {"max_frequency", 1500}},
       "argument 'min_frequency' and max_frequency leave no available frequency"},
      {"point-solution", {}, "scheduler 'point-solution': argument 'solution_path' is required"},
      {"point-solution",
       {{"solution_path", "/nonexistent/plan.json"}},
       "argument 'solution_path' names no file or directory"},
      {"point-solution",
       {{"solution_path", "x.json"}, {"warmup_rounds", -1}},
       "argument 'warmup_rounds' must be an integer >= 0"},
      {"frontier", {}, "scheduler 'frontier': argument 'frontier' is required"},
      {"frontier", {{"frontier", "/nonexistent/frontier"}}, "argument 'frontier': "},
      {"zeus-global",
       {{"microbatches", 4}, {"power_limits", json::array({300, 200})}, {"eta", 2}},
       "scheduler 'zeus-global': argument 'eta' must be a number in [0, 1], got 2"},
      {"zeus-global", {{"microbatches", 4}}, "argument 'power_limits' is required"},
      {"zeus-global",
       {{"microbatches", 4}, {"power_limits", "lots"}},
       "argument 'power_limits' must be a non-empty list of watts > 0"},
      {"zeus-global",
       {{"microbatches", 4}, {"power_limits", json::array({300, -5})}},
       "argument 'power_limits' must be a non-empty list of watts > 0"},
      {"zeus-per-stage",
       {{"microbatches", 4}, {"power_limits", {{"max_w", 300}, {"min_w", 100}}}},
       "scheduler 'zeus-per-stage': argument 'power_limits.step_w' is required"},
      {"zeus-per-stage",
       {{"microbatches", 4}, {"power_limits", {{"max_w", 300}, {"min_w", 100}, {"step", 10}}}},
       "unknown argument 'power_limits.step'"},
      {"zeus-per-stage",
       {{"microbatches", 4}, {"power_limits", {{"max_w", 100}, {"min_w", 300}, {"step_w", 10}}}},
       "argument 'power_limits.min_w' must be <= max_w"},
      {"zeus-global",
       {{"microbatches", 4}, {"power_limits", json::array({300})}, {"max_power_w", 0}},
       "argument 'max_power_w' must be a number of watts > 0"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.scheduler + " " + c.args.dump());
    EXPECT_CONTAINS(error_of([&] { make_scheduler(c.scheduler, job_with(c.args)); }), c.message);
  }
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

// ---------------------------------------------------------------------------------------------
// profiler

// Runs a scheduler to its final round, feeding it results; returns the rounds it served.
std::vector<Round> run_to_end(Scheduler& s, const CostFn& cost, const SynthOptions& o = {}) {
  std::vector<Round> rounds;
  for (int guard = 0; guard < 1000; ++guard) {
    rounds.push_back(s.next());
    if (rounds.back().done) return rounds;
    s.observe(results_of(rounds.back(), cost, o));
  }
  ADD_FAILURE() << "no final round after 1000 rounds";
  return rounds;
}

// Index (in a100 clocks) of the clock where stage 0's forward + backward energy is lowest.
std::size_t energy_minimum_index() {
  const auto clocks = a100().frequencies();
  std::size_t best = 0;
  auto energy = [&](std::size_t i) {
    return a100_profile().at(0, "forward", clocks[i]).energy_j +
           a100_profile().at(0, "backward", clocks[i]).energy_j;
  };
  for (std::size_t i = 1; i < clocks.size(); ++i) {
    if (energy(i) < energy(best)) best = i;
  }
  return best;
}

TEST(SchedulerProfiler, WritesTheMeasuredProfileAndStopsPastTheEnergyMinimum) {
  const auto clocks = a100().frequencies();
  const std::size_t minimum = energy_minimum_index();
  ASSERT_GT(minimum + 4, 3u);
  ASSERT_LT(minimum + 4, clocks.size());  // the sweep can stop early
  for (int patience : {1, 3}) {
    SCOPED_TRACE(patience);
    TempDir dir;
    JobSpec job =
        job_with({{"microbatches", 4}, {"output", "out/prof.csv"}, {"patience", patience}});
    job.output_dir = dir.path();
    auto s = make_scheduler("InstructionProfiler", job);
    EXPECT_EQ(s->status()["state"], "profiling");
    // Iteration 0 of every window is a slow warm-up that skip_iterations (default 1) drops.
    auto rounds = run_to_end(*s, from_profile(a100_profile()), {.warmup_factor = 1.7});
    const std::size_t measured = minimum + static_cast<std::size_t>(patience) + 1;
    ASSERT_EQ(rounds.size(), measured + 1);
    for (std::size_t i = 0; i < measured; ++i)
      EXPECT_TRUE(all_at(rounds[i].stages, clocks[i])) << i;
    EXPECT_TRUE(rounds.back().done);
    EXPECT_TRUE(all_at(rounds.back().stages, 1410));
    EXPECT_EQ(names_of(rounds.back().stages), names_of(schedule::make_1f1b(4, 4)));

    const fs::path csv = dir.path() / "out" / "prof.csv";
    profile::Profile written = profile::read_profile_csv(csv.string());
    ASSERT_EQ(written.num_stages(), 4);
    for (int st = 0; st < 4; ++st) {
      for (const char* name : {"forward", "backward"}) {
        const auto& rows = written.rows(st, name);
        ASSERT_EQ(rows.size(), measured);
        for (const auto& m : rows) {
          const auto& src = a100_profile().at(st, name, m.frequency_mhz);
          EXPECT_NEAR(m.time_s, src.time_s, 1e-9 * src.time_s);
          EXPECT_NEAR(m.energy_j, src.energy_j, 1e-9 * src.energy_j);
        }
      }
    }
    EXPECT_EQ(written.rows(0, "forward").back().frequency_mhz, clocks[measured - 1]);

    double blocking = std::stod(read_file(csv.string() + ".blocking_power"));
    EXPECT_NEAR(blocking, 83.64, 1e-6);
    json st = s->status();
    EXPECT_EQ(st["state"], "done");
    EXPECT_EQ(st["measured"], measured);
    EXPECT_NEAR(st["blocking_power_w"].get<double>(), 83.64, 1e-6);
    EXPECT_EQ(st["output"], csv.string());
  }
}

TEST(SchedulerProfiler, SweepsOnlyTheClocksWithinTheBounds) {
  TempDir dir;
  JobSpec job = job_with({{"microbatches", 2}, {"min_frequency", 1200}, {"max_frequency", 1300}});
  job.output_dir = dir.path();
  auto s = make_scheduler("profiler", job);
  auto rounds = run_to_end(*s, from_profile(a100_profile()));
  // 1290 .. 1200 MHz: energy still falls there, so the clocks run out first.
  ASSERT_EQ(rounds.size(), 8u);
  for (std::size_t i = 0; i < 7; ++i) {
    EXPECT_TRUE(all_at(rounds[i].stages, 1290 - 15 * static_cast<int>(i))) << i;
  }
  EXPECT_TRUE(all_at(rounds.back().stages, 1410));
  EXPECT_TRUE(fs::exists(dir.path() / "profile.csv"));
}

TEST(SchedulerProfiler, NamesStageAndInstructionOfAMissingBreakdown) {
  TempDir dir;
  JobSpec job = job_with({{"microbatches", 4}});
  job.output_dir = dir.path();
  auto s = make_scheduler("profiler", job);
  auto results = results_of(s->next(), from_profile(a100_profile()));
  results[2].energy_breakdown.erase("backward");
  EXPECT_CONTAINS(error_of([&] { s->observe(results); }),
                  "scheduler 'profiler': stage 2: no energy_breakdown for instruction 'backward'");
  results = results_of(s->next(), from_profile(a100_profile()));
  results.pop_back();
  EXPECT_CONTAINS(error_of([&] { s->observe(results); }), "got results for 3 stages, expected 4");
}

// Interleaved zero bubble on 2 GPUs of 2 stages each: the profiler measures every stage's
// forward, backward_input and backward_weight from labelled instructions, and writes them as the
// rows of the 4 stages.
TEST(SchedulerProfiler, ProfilesEveryStageOfGpusThatRunSeveral) {
  profile::Profile two = profile::synthesize_profile(a100(), profile::default_model(2));
  profile::Profile split = profile::split_profile(two, {2, true, 0.5});
  TempDir dir;
  JobSpec job = job_with(
      {{"microbatches", 4}, {"schedule", "interleaved-zero-bubble"}, {"max_frequency", 1350}}, 2);
  job.output_dir = dir.path();
  auto s = make_scheduler("profiler", job);
  auto rounds = run_to_end(*s, from_profile(split));
  EXPECT_EQ(names_of(rounds.front().stages),
            names_of(schedule::make_schedule("interleaved-zero-bubble", 4, 4, 2)));
  profile::Profile written = profile::read_profile_csv((dir.path() / "profile.csv").string());
  ASSERT_EQ(written.num_stages(), 4);
  for (int st = 0; st < 4; ++st) {
    EXPECT_FALSE(written.has(st, "backward"));
    for (const char* name : {"forward", "backward_input", "backward_weight"}) {
      ASSERT_EQ(written.rows(st, name).size(), rounds.size() - 1) << st << name;
      for (const auto& m : written.rows(st, name)) {
        EXPECT_NEAR(m.energy_j, split.at(st, name, m.frequency_mhz).energy_j, 1e-9) << st << name;
        EXPECT_NEAR(m.time_s, split.at(st, name, m.frequency_mhz).time_s, 1e-12) << st << name;
      }
    }
  }
}

// Every scheduler that builds its plans from the schedule arguments serves a ZBV job on 2 GPUs
// (4 stages): per-GPU plans with stage-labelled instructions, results summarized per GPU, to
// the final round.
TEST(SchedulerMultiStage, EverySchedulerRunsAZbvJobToTheEnd) {
  profile::Profile split = profile::split_profile(
      profile::synthesize_profile(a100(), profile::default_model(2)), {2, true, 0.5});
  const json zbv = {{"microbatches", 4}, {"schedule", "zbv"}};
  const std::vector<std::pair<std::string, json>> cases = {
      {"all-max", json::object()},
      {"profiler", {{"max_frequency", 1300}}},
      {"zeus-global", {{"power_limits", json::array({300, 250, 200})}}},
      {"zeus-per-stage", {{"power_limits", json::array({300, 250, 200})}}},
  };
  for (const auto& [name, extra] : cases) {
    SCOPED_TRACE(name);
    TempDir dir;
    json args = zbv;
    args.update(extra);
    JobSpec job = job_with(args, 2);
    job.output_dir = dir.path();
    auto rounds = run_to_end(*make_scheduler(name, job), from_profile(split));
    ASSERT_FALSE(rounds.empty());
    EXPECT_TRUE(rounds.back().done);
    for (const auto& r : rounds) {
      EXPECT_EQ(names_of(r.stages), names_of(schedule::make_schedule("zbv", 4, 4, 2)));
    }
  }
}

// ---------------------------------------------------------------------------------------------
// frontier

class SchedulerFrontier : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new TempDir;
    auto sched = schedule::make_1f1b(4, 6);
    plan::PlanSettings settings{0.001, a100().blocking_power_w, plan::CostModelKind::kConvexHull,
                                1.0};
    auto problem = plan::PlanProblem::build(a100_profile(), sched, settings);
    plan::Frontier frontier = plan::solve_frontier(problem);
    auto ev = plan::evaluate(a100_profile(), sched, plan::all_max_plan(a100_profile(), sched),
                             settings.blocking_power_w);
    plan::write_frontier(path(), problem, frontier,
                         {"synthetic a100", {ev.time_s, ev.energy_j}, 0});
    stored_ = new plan::StoredFrontier(plan::read_frontier(path()));
  }
  static void TearDownTestSuite() {
    delete stored_;
    delete dir_;
  }

  static fs::path path() { return dir_->path() / "frontier"; }
  static const plan::StoredFrontier& stored() { return *stored_; }

  static std::size_t fastest() {
    const auto& rows = stored().rows;
    return static_cast<std::size_t>(
        std::min_element(rows.begin(), rows.end(),
                         [](const auto& a, const auto& b) {
                           return std::make_pair(a.evaluated_time_s, a.evaluated_energy_j) <
                                  std::make_pair(b.evaluated_time_s, b.evaluated_energy_j);
                         }) -
        rows.begin());
  }
  // The index of the plan a scheduler serves to non-straggling pipelines, checked against the
  // clocks it serves (several frontier plans can share their clocks).
  static std::size_t served(Scheduler& s) {
    auto index = s.status()["index"].get<std::size_t>();
    EXPECT_EQ(clocks_of(s.next().stages), stored().plans.at(index));
    return index;
  }

  static std::unique_ptr<Scheduler> make(json args, int dp = 1) {
    args["frontier"] = path().string();
    return make_scheduler("frontier", job_with(args, 4, dp));
  }

  static TempDir* dir_;
  static plan::StoredFrontier* stored_;
};

TempDir* SchedulerFrontier::dir_ = nullptr;
plan::StoredFrontier* SchedulerFrontier::stored_ = nullptr;

// A frontier of an interleaved schedule (2 stages per GPU) is served per GPU, each instruction
// labelled with its stage; a job with another number of GPUs is told how many the frontier has.
TEST(SchedulerFrontierMultiStage, ServesOnePlanPerGpuLabelledWithStages) {
  TempDir dir;
  auto sched = schedule::make_schedule("interleaved-1f1b", 4, 4, 2);
  plan::PlanSettings settings{0.001, a100().blocking_power_w, plan::CostModelKind::kConvexHull,
                              1.0};
  auto problem = plan::PlanProblem::build(a100_profile(), sched, settings);
  plan::write_frontier(dir.path() / "f", problem, plan::solve_frontier(problem),
                       {"synthetic a100", {1.0, 1.0}, 0});
  const std::string path = (dir.path() / "f").string();
  auto s = make_scheduler("frontier", job_with({{"frontier", path}, {"target", "cheapest"}}, 2));
  Round r = s->next();
  ASSERT_EQ(r.stages.size(), 2u);
  EXPECT_EQ(names_of(r.stages), names_of(sched));
  EXPECT_EQ(r.stages[0].frequencies.front().first, "forward@0");
  EXPECT_EQ(r.stages[1].frequencies.back().first, "backward@1");
  auto stored = plan::read_frontier(path);
  EXPECT_EQ(clocks_of(r.stages), stored.plans.at(s->status()["index"].get<std::size_t>()));
  s->observe(results_of(r, from_profile(a100_profile())));
  EXPECT_CONTAINS(error_of([&] {
                    make_scheduler("frontier", job_with({{"frontier", path}}, 4));
                  }),
                  "has 2 GPUs (4 stages) but the job has pp_degree 4");
}

TEST_F(SchedulerFrontier, ServesTheTargetPlanEveryRound) {
  ASSERT_GT(stored().rows.size(), 10u);
  auto s = make(json::object());
  for (int k = 0; k < 3; ++k) {
    Round r = s->next();
    EXPECT_FALSE(r.done);
    EXPECT_TRUE(r.pipelines.empty());
    EXPECT_EQ(clocks_of(r.stages), stored().plans[fastest()]);
    EXPECT_EQ(names_of(r.stages), names_of(schedule::make_1f1b(4, 6)));
    s->observe(results_of(r, from_profile(a100_profile())));
  }
  EXPECT_EQ(s->status()["index"], fastest());
  plan::FrontierQuery fq(stored());
  EXPECT_DOUBLE_EQ(s->status()["slowdown"].get<double>(), fq.slowdown(fastest()));
  EXPECT_DOUBLE_EQ(s->status()["saving"].get<double>(), fq.saving(fastest()));

  plan::FrontierQuery q(stored());
  double lo = stored().rows[q.fastest()].evaluated_time_s;
  double hi = stored().rows[q.min_energy()].evaluated_time_s;
  double target = 0.5 * (lo + hi);
  std::size_t got = served(*make({{"target", target}}));
  EXPECT_EQ(got, q.within_time(target));
  EXPECT_LE(stored().rows[got].evaluated_time_s, target);
  // A slowdown against all-max, as a string with % or a number of percent.
  for (const json& bound : {json("5%"), json(5)}) {
    std::size_t i = served(*make({{"max_slowdown", bound}}));
    EXPECT_EQ(i, q.within_slowdown(0.05));
    EXPECT_LE(q.slowdown(i), 0.05 + 1e-12);
  }
  EXPECT_CONTAINS(error_of([&] {
                    make({{"max_slowdown", "x"}});
                  }),
                  "argument 'max_slowdown': slowdown 'x' is not a percentage");
  EXPECT_CONTAINS(error_of([&] {
                    make({{"max_slowdown", "5%"}, {"index", 1}});
                  }),
                  "give at most one of 'target', 'index' and 'max_slowdown'");

  std::size_t cheapest = served(*make({{"target", "cheapest"}}));
  for (const auto& row : stored().rows) {
    EXPECT_LE(stored().rows[cheapest].evaluated_energy_j, row.evaluated_energy_j);
  }
  EXPECT_EQ(served(*make({{"index", 3}})), 3u);
}

TEST_F(SchedulerFrontier, SlowsOtherPipelinesDownToTheStraggler) {
  auto s = make(json::object(), 4);
  const auto& fast = stored().rows[fastest()];
  s->report_straggler({{"dp_rank", 2}, {"factor", 1.15}});
  Round r = s->next();
  ASSERT_EQ(r.pipelines.size(), 1u);
  ASSERT_EQ(r.pipelines.count(2), 1u);
  EXPECT_EQ(clocks_of(r.pipelines[2]), stored().plans[fastest()]);
  std::size_t others = served(*s);
  plan::FrontierQuery q(stored());
  EXPECT_EQ(others, q.within_time(1.15 * fast.evaluated_time_s));
  EXPECT_TRUE(q.is_pareto(others));
  EXPECT_LE(stored().rows[others].evaluated_time_s, 1.15 * fast.evaluated_time_s);
  EXPECT_GT(stored().rows[others].evaluated_time_s, fast.evaluated_time_s);
  EXPECT_LT(stored().rows[others].evaluated_energy_j, fast.evaluated_energy_j);
  json st = s->status();
  EXPECT_EQ(st["index"], others);
  ASSERT_EQ(st["stragglers"].size(), 1u);
  EXPECT_EQ(st["stragglers"][0]["dp_rank"], 2);
  EXPECT_NEAR(st["stragglers"][0]["time_s"].get<double>(), 1.15 * fast.evaluated_time_s, 1e-12);

  // An absolute time works the same way; the slowest straggler sets the pace.
  double t = 1.3 * fast.evaluated_time_s;
  s->report_straggler({{"dp_rank", 0}, {"time_s", t}});
  r = s->next();
  EXPECT_EQ(r.pipelines.size(), 2u);
  EXPECT_EQ(served(*s), q.within_time(t));

  s->report_straggler({{"dp_rank", 0}, {"clear", true}});
  s->report_straggler({{"dp_rank", 2}, {"clear", true}});
  r = s->next();
  EXPECT_TRUE(r.pipelines.empty());
  EXPECT_EQ(served(*s), fastest());
}

TEST_F(SchedulerFrontier, RejectsBadReportsAndArguments) {
  auto s = make(json::object(), 4);
  struct Case {
    json report;
    std::string message;
  };
  const std::vector<Case> cases = {
      {{{"dp_rank", 4}, {"factor", 1.2}},
       "scheduler 'frontier': straggler report: field 'dp_rank' must be < dp_degree 4"},
      {{{"dp_rank", -1}, {"factor", 1.2}}, "field 'dp_rank' must be an integer >= 0"},
      {{{"factor", 1.2}}, "field 'dp_rank' is required"},
      {{{"dp_rank", 1}, {"factor", 0.5}}, "field 'factor' must be a number >= 1, got 0.5"},
      {{{"dp_rank", 1}, {"time_s", "slow"}}, "field 'time_s' must be a number of seconds > 0"},
      {{{"dp_rank", 1}, {"clear", false}}, "field 'clear' must be true"},
      {{{"dp_rank", 1}}, "give exactly one of 'time_s', 'factor' and 'clear'"},
      {{{"dp_rank", 1}, {"factor", 2}, {"time_s", 3}}, "give exactly one of"},
      {{{"dp_rank", 1}, {"speed", 2}}, "unknown field 'speed'"},
      {json::array(), "straggler report: fields must be a JSON object"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.report.dump());
    EXPECT_CONTAINS(error_of([&] { s->report_straggler(c.report); }), c.message);
  }
  EXPECT_TRUE(s->next().pipelines.empty());  // nothing was applied

  EXPECT_CONTAINS(error_of([&] {
                    make({{"target", "soon"}});
                  }),
                  "argument 'target' must be \"fastest\", \"cheapest\" or a number of seconds > 0");
  EXPECT_CONTAINS(error_of([&] {
                    make({{"target", 0.001}});
                  }),
                  "scheduler 'frontier': argument 'target': no plan finishes within");
  EXPECT_CONTAINS(error_of([&] { make({{"index", 100000}}); }), "argument 'index' must be <");
  EXPECT_CONTAINS(error_of([&] {
                    make({{"index", 1}, {"target", "fastest"}});
                  }),
                  "give at most one of 'target', 'index' and 'max_slowdown'");
  EXPECT_CONTAINS(error_of([&] {
                    make_scheduler("frontier", job_with({{"frontier", path().string()}}, 3));
                  }),
                  "has 4 stages but the job has pp_degree 3");
  JobSpec job = job_with({{"frontier", path().string()}});
  job.available_frequencies = {1410, 1395};
  EXPECT_CONTAINS(error_of([&] { make_scheduler("frontier", job); }),
                  "MHz is not an available frequency");
  // The default Scheduler rejects straggler reports.
  EXPECT_CONTAINS(error_of([] {
                    make_scheduler("all-max", job_with({{"microbatches", 2}}))
                        ->report_straggler({{"dp_rank", 0}, {"factor", 2}});
                  }),
                  "does not take straggler reports");
}

// ---------------------------------------------------------------------------------------------
// Zeus power limits

const std::vector<double> kStageWork = {1.2, 1.0, 1.0, 1.1};
constexpr double kMaxLimit = 400.0;
constexpr double kBlocking = 80.0;

// A GPU under power limit L draws L while busy and runs sqrt(L / 400) as fast as at 400 W.
CostFn power_limit_model() {
  return [](int stage, const std::string& instruction, int, std::optional<double> limit) {
    double l = limit.value_or(kMaxLimit);
    double t = kStageWork[static_cast<std::size_t>(stage)] * 0.05 *
               (instruction == "backward" ? 1.85 : 1.0) * std::sqrt(kMaxLimit / l);
    return std::make_pair(t, l * t);
  };
}

// What the sweep measures at one limit: per stage mean iteration time, energy and busy time.
struct Measured {
  std::vector<double> time, energy, busy;
};
Measured measure(double limit, int microbatches) {
  Round r;
  r.stages.resize(4);
  for (auto& st : r.stages) {
    st.power_limit_w = limit;
    for (int m = 0; m < microbatches; ++m) {
      st.frequencies.emplace_back("forward", 1410);
      st.frequencies.emplace_back("backward", 1410);
    }
  }
  auto results = results_of(r, power_limit_model(), {.iterations = 2, .blocking_w = kBlocking});
  Measured out;
  for (int s = 0; s < 4; ++s) {
    const auto& res = results[static_cast<std::size_t>(s)];
    out.time.push_back(res.iter_time[0]);
    out.energy.push_back(res.iter_energy[0]);
    double busy = 0.0;
    for (const auto& [name, its] : res.time_breakdown) {
      for (double t : its[0]) busy += t;
    }
    out.busy.push_back(busy);
  }
  return out;
}

const std::vector<double> kLimits = {400, 375, 350, 325, 300, 275, 250, 225, 200, 175, 150};

TEST(SchedulerZeus, GlobalPicksTheLimitWithTheLowestCost) {
  const double eta = 0.3;
  // The expected choice, straight from the model.
  std::size_t best = 0;
  double best_cost = std::numeric_limits<double>::infinity();
  for (std::size_t j = 0; j < kLimits.size(); ++j) {
    Measured m = measure(kLimits[j], 4);
    double energy = 0.0;
    for (double e : m.energy) energy += e;
    double time = *std::max_element(m.time.begin(), m.time.end());
    double cost = eta * energy + (1 - eta) * kMaxLimit * time;
    if (cost < best_cost) {
      best_cost = cost;
      best = j;
    }
  }
  ASSERT_GT(best, 0u);  // an interior optimum makes the test meaningful
  ASSERT_LT(best, kLimits.size() - 1);

  auto s = make_scheduler(
      "zeus-global",
      job_with({{"microbatches", 4},
                {"eta", eta},
                {"power_limits", {{"max_w", 400}, {"min_w", 150}, {"step_w", 25}}}}));
  auto rounds = run_to_end(*s, power_limit_model(), {.iterations = 2, .blocking_w = kBlocking});
  ASSERT_EQ(rounds.size(), kLimits.size() + 1);
  for (std::size_t j = 0; j < kLimits.size(); ++j) {
    EXPECT_FALSE(rounds[j].done);
    for (const auto& st : rounds[j].stages) EXPECT_EQ(st.power_limit_w, kLimits[j]);
    EXPECT_TRUE(all_at(rounds[j].stages, 1410));
  }
  const Round& final_round = rounds.back();
  EXPECT_TRUE(final_round.done);
  EXPECT_EQ(names_of(final_round.stages), names_of(schedule::make_1f1b(4, 4)));
  for (const auto& st : final_round.stages) EXPECT_EQ(st.power_limit_w, kLimits[best]);
  json st = s->status();
  EXPECT_EQ(st["state"], "done");
  EXPECT_EQ(st["sweep"].size(), kLimits.size());
  EXPECT_NEAR(st["chosen"]["cost"].get<double>(), best_cost, 1e-9 * best_cost);
}

TEST(SchedulerZeus, PerStageBalancesStagesToTheHeaviestOne) {
  const double eta = 0.3;
  std::vector<Measured> sweep;
  for (double l : kLimits) sweep.push_back(measure(l, 4));
  const std::size_t heavy = 0;  // kStageWork's largest
  std::vector<double> best_limits;
  double best_cost = std::numeric_limits<double>::infinity();
  for (std::size_t j = 0; j < kLimits.size(); ++j) {
    std::vector<double> limits(4, kLimits[0]);
    double energy = 0.0;
    for (std::size_t s = 0; s < 4; ++s) {
      std::size_t k = 0;
      for (std::size_t i = 0; i < kLimits.size(); ++i) {
        if (sweep[i].busy[s] <= sweep[j].busy[heavy]) k = i;
      }
      if (s == heavy) k = j;
      limits[s] = kLimits[k];
      energy += sweep[k].energy[s];
    }
    double cost = eta * energy + (1 - eta) * kMaxLimit * sweep[j].time[heavy];
    if (cost < best_cost) {
      best_cost = cost;
      best_limits = limits;
    }
  }
  auto s = make_scheduler(
      "zeus-per-stage",
      job_with({{"microbatches", 4},
                {"eta", eta},
                {"power_limits", {150, 400, 200, 350, 300, 250, 375, 325, 275, 225, 175}}}));
  auto rounds = run_to_end(*s, power_limit_model(), {.iterations = 2, .blocking_w = kBlocking});
  ASSERT_EQ(rounds.size(), kLimits.size() + 1);
  EXPECT_EQ(rounds.front().stages[0].power_limit_w, 400.0);  // highest first
  ASSERT_TRUE(rounds.back().done);
  std::vector<double> got;
  for (const auto& st : rounds.back().stages) got.push_back(st.power_limit_w.value_or(-1));
  EXPECT_EQ(got, best_limits);
  for (std::size_t k = 1; k < 4; ++k) EXPECT_LE(got[k], got[heavy]);
  EXPECT_LT(*std::min_element(got.begin(), got.end()), got[heavy]);  // lighter stages slow down
  EXPECT_NEAR(s->status()["chosen"]["cost"].get<double>(), best_cost, 1e-9 * best_cost);
}

TEST(SchedulerZeus, ReplayingTheSameResultsGivesTheSameChoice) {
  json args = {{"microbatches", 3}, {"power_limits", json::array({300, 250, 200})}, {"eta", 0.8}};
  auto a = make_scheduler("zeus-per-stage", job_with(args));
  auto b = make_scheduler("zeus-per-stage", job_with(args));
  run_to_end(*a, power_limit_model());
  run_to_end(*b, power_limit_model());
  EXPECT_EQ(a->status(), b->status());
  EXPECT_EQ(a->status()["power_limits_w"], json({300.0, 250.0, 200.0}));
}

}  // namespace
}  // namespace perseus::server
