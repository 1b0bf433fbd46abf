// The instruction profiler scheduler, driven with synthetic results: the measured profile, the
// clock bounds, multi-stage GPUs and where it stops; and every scheduler on a ZBV job.
#include "perseus/server/schedulers/schedulers.hpp"
#include "perseus/util/log.hpp"
#include "scheduler_harness.hpp"

namespace perseus::server {
namespace {

using namespace harness;
using perseus::test::error_of;
using perseus::test::TempDir;

// ---------------------------------------------------------------------------------------------
// profiler

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
    JobSpec job = job_with({{"microbatches", 4},
                            {"output", "out/prof.csv"},
                            {"patience", patience},
                            {"rise_margin", 0}});
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

// A clock measured again (its error above the target) pools the blocking time and energy of all
// its windows: the blocking power is not the last window's alone.
TEST(SchedulerProfiler, PoolsTheBlockingPowerOverEveryWindowAtTheHighestClock) {
  TempDir dir;
  JobSpec job = job_with({{"microbatches", 4}, {"max_windows", 2}});
  job.output_dir = dir.path();
  auto s = make_scheduler("profiler", job);
  auto noisy = results_of(s->next(), from_profile(a100_profile()), {.blocking_w = 60.0});
  for (auto& r : noisy) r.energy_stderr["forward"] = 1e3;  // far above the target: measure again
  s->observe(noisy);
  EXPECT_EQ(s->status()["measured"], 0);
  EXPECT_TRUE(s->status()["blocking_power_w"].is_null());
  s->observe(results_of(s->next(), from_profile(a100_profile()), {.blocking_w = 100.0}));
  EXPECT_EQ(s->status()["measured"], 1);
  // Both windows block equally long on every GPU.
  EXPECT_NEAR(s->status()["blocking_power_w"].get<double>(), 80.0, 1e-9);
}

// A client that pooled the forward's power with the backward's says how far the forward may be
// from its own: the profile keeps it beside the standard error, relative, in its own column.
TEST(SchedulerProfiler, WritesEachRowsPoolingErrorBesideItsStandardError) {
  TempDir dir;
  JobSpec job = job_with({{"microbatches", 2}, {"min_frequency", 1350}});
  job.output_dir = dir.path();
  auto s = make_scheduler("profiler", job);
  for (Round round = s->next(); !round.done; round = s->next()) {
    auto results = results_of(round, from_profile(a100_profile()));
    for (auto& r : results) {
      r.energy_stderr = {{"forward", 1e-4}, {"backward", 1e-4}};
      r.energy_pooling_error = {{"forward", 0.5}};  // the backward: a client that sent none
    }
    s->observe(results);
  }
  std::istringstream csv(read_file((dir.path() / "profile.csv").string()));
  std::string line;
  std::getline(csv, line);
  EXPECT_EQ(line, "stage,instruction,frequency,time,energy,energy_stderr,energy_pooling_error");
  int forwards = 0;
  while (std::getline(csv, line)) {
    std::vector<std::string> cell;
    std::istringstream fields(line);
    for (std::string c; std::getline(fields, c, ',');) cell.push_back(c);
    if (cell.at(1) == "forward") {
      ASSERT_EQ(cell.size(), 7u) << line;
      EXPECT_NEAR(std::stod(cell[6]), 0.5 / std::stod(cell[4]), 1e-9) << line;
      ++forwards;
    } else {
      EXPECT_EQ(cell.size(), 6u) << line;  // no pooling error reported: the cell is empty
    }
  }
  EXPECT_EQ(forwards, 4 * 5);  // 4 stages, 1410 .. 1350 MHz
}

// An attribution that gives the instructions more energy than their iterations drew leaves a
// negative blocking power, which no GPU draws and a planner refuses: the file holds 0 W, the
// status the measured value.
TEST(SchedulerProfiler, WritesANegativeBlockingPowerAsZero) {
  TempDir dir;
  JobSpec job = job_with({{"microbatches", 4}, {"min_frequency", 1380}});
  job.output_dir = dir.path();
  auto s = make_scheduler("profiler", job);
  run_to_end(*s, from_profile(a100_profile()), {.blocking_w = -50.0});
  EXPECT_EQ(s->status()["state"], "done");
  EXPECT_NEAR(s->status()["blocking_power_w"].get<double>(), -50.0, 1e-6);
  EXPECT_EQ(std::stod(read_file((dir.path() / "profile.csv.blocking_power").string())), 0.0);
}

// A client whose backend reports millijoules as joules: the profile is written as measured, and
// the server log names its first implausible row and the likely mistake when profiling ends.
TEST(SchedulerProfiler, SaysWhenItWritesAProfilePlannersRefuse) {
  TempDir dir;
  JobSpec job = job_with({{"microbatches", 4}, {"min_frequency", 1380}});
  job.output_dir = dir.path();
  const fs::path log_path = dir.path() / "server.log";
  const CostFn joules = from_profile(a100_profile());
  for (double unit : {1.0, 1000.0}) {
    log::configure(log::Level::warn, log_path.string());
    auto s = make_scheduler("profiler", job);
    run_to_end(*s, [&](int stage, const std::string& instruction, int mhz, auto limit) {
      auto [time_s, energy_j] = joules(stage, instruction, mhz, limit);
      return std::make_pair(time_s, energy_j * unit);
    });
    log::configure(log::Level::info);
    EXPECT_EQ(s->status()["state"], "done");
    const std::string logged = fs::exists(log_path) ? read_file(log_path.string()) : "";
    if (unit == 1.0) {
      EXPECT_EQ(logged.find("planners refuse"), std::string::npos) << logged;
      continue;
    }
    EXPECT_CONTAINS(logged, "profile.csv:2: field 'energy': average power");
    EXPECT_CONTAINS(logged, "energy in millijoules");
    EXPECT_CONTAINS(logged, "the profile is written as measured, and planners refuse it");
  }
}

// Noise larger than the difference the clocks make (a short sweep on a loaded machine) can make
// an instruction look slower at its highest clock than at its lowest: the sweep's profile is still
// written, and the log says planners refuse it and how to measure better, instead of the job
// failing after its whole sweep. Where the same profile is also implausible (millijoules), that
// is said too.
TEST(SchedulerProfiler, WritesAProfileWhoseNoiseMakesTheHighestClockSlowerAndSaysSo) {
  const CostFn truth = from_profile(a100_profile());
  for (double unit : {1.0, 1000.0}) {
    TempDir dir;
    JobSpec job = job_with({{"microbatches", 4}, {"min_frequency", 1380}});
    job.output_dir = dir.path();
    const fs::path log_path = dir.path() / "server.log";
    log::configure(log::Level::warn, log_path.string());
    auto s = make_scheduler("profiler", job);
    run_to_end(*s, [&](int stage, const std::string& instruction, int mhz, auto limit) {
      auto [time_s, energy_j] = truth(stage, instruction, mhz, limit);
      return std::make_pair(mhz == 1410 ? time_s * 1.1 : time_s, energy_j * unit);
    });
    log::configure(log::Level::info);
    EXPECT_EQ(s->status()["state"], "done");
    EXPECT_TRUE(fs::exists(dir.path() / "profile.csv"));
    const std::string logged = read_file(log_path.string());
    EXPECT_CONTAINS(logged, "at its highest clock 1410 MHz but only");
    EXPECT_CONTAINS(logged, "the profile is written as measured and planners refuse it");
    EXPECT_CONTAINS(logged, "sweep a wider clock range");
    const bool implausible = logged.find("energy in millijoules") != std::string::npos;
    EXPECT_EQ(implausible, unit == 1000.0) << logged;
  }
}

// Windows shorter than `min_window` hold too few refreshes of a real energy counter: the clock is
// measured again, the clients asked for enough iterations per window (with a tenth to spare). A
// client that does not follow (Zeus's) has its short windows taken as they are.
TEST(SchedulerProfiler, AsksForLongerWindowsWhenTheyAreTooShortForTheCounter) {
  TempDir dir;
  JobSpec job = job_with({{"microbatches", 4}, {"min_frequency", 1380}, {"min_window", 5.0}});
  job.output_dir = dir.path();
  const CostFn cost = from_profile(a100_profile());
  for (bool follows : {true, false}) {
    SCOPED_TRACE(follows);
    auto s = make_scheduler("profiler", job);
    const Round first = s->next();
    EXPECT_FALSE(first.report_every);
    const auto short_windows = results_of(first, cost, {.iterations = 2});
    const double window_s = short_windows[0].iter_time[0] * 2;
    ASSERT_LT(window_s, 5.0);
    s->observe(short_windows);
    const Round again = s->next();
    EXPECT_EQ(clocks_of(again.stages), clocks_of(first.stages));  // the same clock, again
    EXPECT_EQ(again.report_every, static_cast<int>(std::ceil(1.1 * 5.0 / window_s * 2)));
    EXPECT_EQ(s->status()["measured"], 0);
    EXPECT_EQ(s->status()["report_every"], *again.report_every);
    s->observe(results_of(again, cost, {.iterations = follows ? *again.report_every : 2}));
    EXPECT_EQ(s->status()["measured"], 1);  // taken: long enough, or not followed
    EXPECT_EQ(s->next().report_every, again.report_every);
  }
  job.args["min_window"] = 0.0;  // never asks
  auto s = make_scheduler("profiler", job);
  s->observe(results_of(s->next(), cost, {.iterations = 1}));
  EXPECT_EQ(s->status()["measured"], 1);
  EXPECT_FALSE(s->next().report_every);
}

// A window in which some rank's energy counter did not change (a stuck counter, a sampler that
// stopped) has unknown energies: the clock is measured again, and after three such rounds in a
// row the profiler fails naming the ranks, instead of writing 0 J rows.
TEST(SchedulerProfiler, MeasuresAgainWhatTheCounterDidNotMeasureAndGivesUpAfterThreeRounds) {
  TempDir dir;
  JobSpec job = job_with({{"microbatches", 4}, {"min_frequency", 1380}, {"min_window", 0.0}});
  job.output_dir = dir.path();
  const CostFn cost = from_profile(a100_profile());
  auto s = make_scheduler("profiler", job);
  const Round first = s->next();
  auto unmeasured = [&](const Round& round) {
    auto results = results_of(round, cost);
    results[2].unmeasured_ranks = {2};
    return results;
  };
  s->observe(unmeasured(first));
  EXPECT_EQ(s->status()["measured"], 0);
  s->observe(results_of(s->next(), cost));  // measured: taken, and the count starts again
  EXPECT_EQ(s->status()["measured"], 1);
  for (int round = 1; round < schedulers::WindowLength::kMaxUnmeasuredRounds; ++round) {
    const Round again = s->next();
    s->observe(unmeasured(again));
    EXPECT_EQ(clocks_of(s->next().stages), clocks_of(again.stages));  // the same clock, again
  }
  EXPECT_EQ(s->status()["measured"], 1);
  const std::string error = error_of([&] { s->observe(unmeasured(s->next())); });
  EXPECT_CONTAINS(error,
                  "the GPU energy counter of rank 2 (stage 2) did not change in 3 "
                  "reporting windows in a row, the last ");
  EXPECT_CONTAINS(error, "the energies of such windows are unknown, not 0 J");
}

// A real GPU's energy is no smooth curve of the clock. In the published profiles it wanders above
// its lowest on the way down to its minimum (BLOOM on A40: up to 1.4 % at one clock, 0.6 % at
// three in a row), so without a margin the sweep stopped at 1590 MHz, 38 clocks before the A40's
// minimum at 1020, and the planner never saw the clocks where instructions cost least. With the
// default margin (2 %) every sweep goes past its minimum and stops where the energy has risen.
TEST(SchedulerProfiler, StopsPastTheMinimumOfAPublishedProfileWhoseEnergyWanders) {
  PERSEUS_REQUIRE_SHARED_DATA();
  struct Case {
    const char* file;
    int stop, stop_without_margin, minimum;
  };
  for (const Case& c : {Case{"bloom+a40_bf16.csv", 900, 1590, 1020},
                        Case{"gpt3-175b+a100_sxm_bf16.csv", 900, 1035, 1080}}) {
    SCOPED_TRACE(c.file);
    const profile::Profile published = profile::read_profile_csv(
        (perseus::test::shared_data() / "perseus" / "stage_profiles" / c.file).string());
    std::vector<int> clocks;
    for (const auto& m : published.rows(0, "forward")) clocks.push_back(m.frequency_mhz);
    std::sort(clocks.rbegin(), clocks.rend());
    for (bool margin : {true, false}) {
      TempDir dir;
      json args = {{"microbatches", 8}};
      if (!margin) args["rise_margin"] = 0;
      JobSpec job = job_with(args, published.num_stages());
      job.available_frequencies = clocks;
      job.output_dir = dir.path();
      const fs::path log_path = dir.path() / "server.log";
      log::configure(log::Level::info, log_path.string());
      auto s = make_scheduler("profiler", job);
      run_to_end(*s, from_profile(published));
      log::configure(log::Level::info);
      const profile::Profile written =
          profile::read_profile_csv((dir.path() / "profile.csv").string());
      EXPECT_EQ(written.rows(0, "forward").back().frequency_mhz,
                margin ? c.stop : c.stop_without_margin);
      if (!margin) continue;
      const json summary = json::parse(read_file((dir.path() / "profile.csv.json").string()));
      EXPECT_EQ(summary["stopped"], "past the energy minimum");
      EXPECT_EQ(
          summary["lowest_energy_clock_mhz"],
          json(std::vector<int>(static_cast<std::size_t>(published.num_stages()), c.minimum)));
      // The server log says where the profile went and why the sweep ended there.
      const std::string logged = read_file(log_path.string());
      const std::string swept =
          std::to_string(std::ranges::count_if(clocks, [&](int mhz) { return mhz >= c.stop; }));
      EXPECT_CONTAINS(logged, "scheduler 'profiler': wrote " +
                                  (dir.path() / "profile.csv").string() + ": " + swept +
                                  " clocks in " + swept + " rounds (");
      EXPECT_CONTAINS(logged, "stopped past every GPU's energy minimum (at " +
                                  std::to_string(c.minimum) + " MHz)");
    }
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
  const json summary = json::parse(read_file((dir.path() / "profile.csv.json").string()));
  EXPECT_EQ(summary["stopped"], "last clock");
  EXPECT_EQ(summary["lowest_energy_clock_mhz"], json({1200, 1200, 1200, 1200}));
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

}  // namespace
}  // namespace perseus::server
