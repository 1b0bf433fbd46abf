// The instruction profiler's split-clock rounds (server/schedulers/split_rounds.hpp), driven by a
// client whose counter cannot tell the last stage's forward from its backward: it reports their
// pooled power times each one's time (their sum exact), as busy-overlap does in the alternating
// order. The profile must come out with each pooled row's own energy up to one offset per
// instruction shared by every clock, or exactly where some clock was told apart.
#include <sstream>

#include "perseus/plan/evaluate.hpp"
#include "perseus/plan/saving_error.hpp"
#include "perseus/util/log.hpp"
#include "scheduler_harness.hpp"

namespace perseus::server {
namespace {

using namespace harness;
using perseus::test::TempDir;

constexpr std::size_t kPooledStage = 3;
constexpr double kPoolingError = 0.2;  // relative, what the client says of each pooled row

// `p` with forwards drawing 23 % more than backwards (as a memory-bound model did on real H100s).
profile::Profile forward_heavy(const profile::Profile& p) {
  profile::Profile out("forward-heavy");
  for (const auto& [key, rows] : p.all()) {
    for (profile::Measurement row : rows) {
      row.energy_j *= key.second == "forward" ? 1.12 : 0.9;
      out.add(key.first, key.second, row);
    }
  }
  return out;
}

// The GPUs: the synthetic A100s, forward-heavy.
const profile::Profile& truth() {
  static const profile::Profile p = forward_heavy(a100_profile());
  return p;
}

// Every rank's standard error (1e-4 relative) and pooling error (0) as a Perseus client reports
// them; rank `pooled`'s energies replaced by the window's pooled power times each time, with
// kPoolingError, except in a uniform round at one of `told_apart_mhz`. At `wrongly_mhz`, one of
// them, the forward is told apart 8 % too high (the backward, the rest of the sum, too low) with
// the least standard error of all. `split_scale` scales the pooled rank's energies in rounds that
// run it at two clocks (a split round gone wrong).
struct Client {
  const profile::Profile& gpus = truth();
  std::size_t pooled = kPooledStage;
  std::vector<int> told_apart_mhz = {};
  int wrongly_mhz = 0;
  double split_scale = 1.0;
};

// Rank `r`'s forwards 8 % too high and its backwards as much too low in J, standard errors 1e-5.
void told_apart_wrongly(StageResult& r) {
  const double shift = 0.08 * r.energy_breakdown.at("forward")[1][0];
  for (auto& [label, iterations] : r.energy_breakdown) {
    for (auto& occurrences : iterations) {
      for (double& e : occurrences) e += label == "forward" ? shift : -shift;
    }
    r.energy_stderr[label] = 1e-5 * iterations[1][0];
  }
}

std::vector<StageResult> pooled_client(const Round& round, const Client& c = {}) {
  std::vector<StageResult> results = results_of(round, from_profile(c.gpus));
  for (StageResult& r : results) {
    for (const auto& [label, energies] : r.energy_breakdown) {
      r.energy_stderr[label] = 1e-4 * energies[1][0];
      r.energy_pooling_error[label] = 0.0;
    }
  }
  const auto& clocks = round.stages[c.pooled].frequencies;
  const bool uniform = std::all_of(clocks.begin(), clocks.end(),
                                   [&](const auto& f) { return f.second == clocks[0].second; });
  const auto& apart = c.told_apart_mhz;
  if (uniform && std::find(apart.begin(), apart.end(), clocks[0].second) != apart.end()) {
    if (clocks[0].second == c.wrongly_mhz) told_apart_wrongly(results[c.pooled]);
    return results;
  }
  StageResult& r = results[c.pooled];
  double energy = 0.0, time = 0.0;
  for (const auto& [label, iterations] : r.energy_breakdown) {
    for (std::size_t k = 0; k < iterations.size(); ++k) {
      for (std::size_t i = 0; i < iterations[k].size(); ++i) {
        energy += iterations[k][i];
        time += r.time_breakdown[label][k][i];
      }
    }
  }
  const double power = energy / time * (uniform ? 1.0 : c.split_scale);
  for (auto& [label, iterations] : r.energy_breakdown) {
    for (std::size_t k = 0; k < iterations.size(); ++k) {
      for (std::size_t i = 0; i < iterations[k].size(); ++i) {
        iterations[k][i] = power * r.time_breakdown[label][k][i];
      }
    }
    r.energy_stderr[label] = 1e-4 * iterations[1][0];
    r.energy_pooling_error[label] = kPoolingError * iterations[1][0];
  }
  return results;
}

struct Profiled {
  profile::Profile profile;
  int split_rounds = 0;
  std::string log;
};

Profiled profile_with(const std::function<std::vector<StageResult>(const Round&)>& client,
                      json args = {}, int gpus = 4) {
  TempDir dir;
  args["microbatches"] = 4;
  args["min_frequency"] = 1305;
  JobSpec job = job_with(args, gpus);
  job.output_dir = dir.path();
  const fs::path log_path = dir.path() / "server.log";
  log::configure(log::Level::warn, log_path.string());
  auto s = make_scheduler("profiler", job);
  for (Round round = s->next(); !round.done; round = s->next()) s->observe(client(round));
  log::configure(log::Level::info);
  return {profile::read_profile_csv((dir.path() / "profile.csv").string()),
          s->status()["split_rounds"].get<int>(),
          fs::exists(log_path) ? read_file(log_path.string()) : ""};
}

// The measured row against the true one, in J.
double offset_j(const profile::Profile& measured, const char* instruction, int mhz) {
  return measured.at(kPooledStage, instruction, mhz).energy_j -
         truth().at(kPooledStage, instruction, mhz).energy_j;
}

TEST(SchedulerProfilerSplit, SplitsPooledRowsUpToOneOffsetPerInstructionSharedByEveryClock) {
  const Profiled p = profile_with([](const Round& round) { return pooled_client(round); });
  const auto& forwards = p.profile.rows(kPooledStage, "forward");
  ASSERT_GE(forwards.size(), 5u);
  // One round per clock but the reference (every clock pooled alike: any), whose pooled split
  // is off.
  EXPECT_EQ(p.split_rounds, static_cast<int>(forwards.size()) - 1);
  ASSERT_TRUE(forwards[0].energy_pooling_reference_mhz);
  const int reference = *forwards[0].energy_pooling_reference_mhz;
  const double forward_offset = offset_j(p.profile, "forward", reference);
  const double backward_offset = offset_j(p.profile, "backward", reference);
  ASSERT_GT(std::abs(forward_offset), 0.01);                 // pooled: not the truth
  EXPECT_NEAR(forward_offset + backward_offset, 0.0, 1e-9);  // the sum is exact
  for (const profile::Measurement& row : forwards) {
    SCOPED_TRACE(row.frequency_mhz);
    EXPECT_NEAR(offset_j(p.profile, "forward", row.frequency_mhz), forward_offset, 1e-9);
    EXPECT_NEAR(offset_j(p.profile, "backward", row.frequency_mhz), backward_offset, 1e-9);
    EXPECT_EQ(row.energy_pooling_reference_mhz, reference);
    // The reference row's pooling error, the same joules.
    EXPECT_NEAR(*row.energy_pooling_error * row.energy_j,
                kPoolingError * p.profile.at(kPooledStage, "forward", reference).energy_j, 1e-9);
  }
  // Stages the client told apart are left alone.
  EXPECT_FALSE(p.profile.at(0, "forward", 1350).energy_pooling_reference_mhz);
  EXPECT_NEAR(p.profile.at(0, "forward", 1350).energy_j, truth().at(0, "forward", 1350).energy_j,
              1e-9);
}

// A GPU of two stages with split backwards (interleaved zero bubble): six instructions pooled,
// five split-clock rounds per clock, each instruction off by one offset at every clock.
TEST(SchedulerProfilerSplit, SplitsEveryInstructionOfAGpuThatRunsSeveralStages) {
  static const profile::Profile gpus = forward_heavy(profile::split_profile(
      profile::synthesize_profile(a100(), profile::default_model(2)), {2, true, 0.5}));
  const Profiled p = profile_with(
      [](const Round& round) { return pooled_client(round, {.gpus = gpus, .pooled = 1}); },
      {{"schedule", "interleaved-zero-bubble"}}, 2);
  const std::size_t clocks = p.profile.rows(1, "forward").size();
  EXPECT_EQ(p.split_rounds, static_cast<int>(5 * (clocks - 1)));
  double sum = 0.0;
  for (int stage : {1, 3}) {  // GPU 1's
    for (const char* name : {"forward", "backward_input", "backward_weight"}) {
      SCOPED_TRACE(std::to_string(stage) + name);
      const auto& rows = p.profile.rows(stage, name);
      ASSERT_TRUE(rows[0].energy_pooling_reference_mhz);
      const int reference = *rows[0].energy_pooling_reference_mhz;
      const double offset =
          p.profile.at(stage, name, reference).energy_j - gpus.at(stage, name, reference).energy_j;
      sum += offset;
      for (const profile::Measurement& row : rows) {
        EXPECT_NEAR(row.energy_j - gpus.at(stage, name, row.frequency_mhz).energy_j, offset, 1e-9)
            << row.frequency_mhz;
      }
    }
  }
  EXPECT_NEAR(sum, 0.0, 1e-9);
}

TEST(SchedulerProfilerSplit, RecoversEveryRowWhereOneClockWasToldApart) {
  const Profiled p = profile_with(
      [](const Round& round) { return pooled_client(round, {.told_apart_mhz = {1335}}); });
  for (const char* instruction : {"forward", "backward"}) {
    for (const profile::Measurement& row : p.profile.rows(kPooledStage, instruction)) {
      SCOPED_TRACE(std::string(instruction) + " " + std::to_string(row.frequency_mhz));
      EXPECT_NEAR(offset_j(p.profile, instruction, row.frequency_mhz), 0.0, 1e-9);
      EXPECT_EQ(row.energy_pooling_error, 0.0);
      EXPECT_FALSE(row.energy_pooling_reference_mhz);
      EXPECT_GT(*row.energy_stderr, 0.0);
    }
  }
}

// Three clocks told apart, the one measured best (the reference) wrongly: the split rows, and the
// reference's, rest on the median of what the three say, and the log says they disagree.
TEST(SchedulerProfilerSplit, OutvotesAClockToldApartWrongly) {
  const Profiled p = profile_with([](const Round& round) {
    return pooled_client(round, {.told_apart_mhz = {1380, 1350, 1320}, .wrongly_mhz = 1350});
  });
  for (const char* instruction : {"forward", "backward"}) {
    for (const profile::Measurement& row : p.profile.rows(kPooledStage, instruction)) {
      SCOPED_TRACE(std::string(instruction) + " " + std::to_string(row.frequency_mhz));
      EXPECT_NEAR(offset_j(p.profile, instruction, row.frequency_mhz), 0.0, 1e-9);
    }
  }
  EXPECT_CONTAINS(p.log,
                  "GPU 3's split-clock rounds: the clocks where the counter told its instructions "
                  "apart (1350, ");
  EXPECT_CONTAINS(p.log, "disagree beyond 3 standard errors");
  // One round per pooled clock, and per clock told apart but the reference.
  EXPECT_EQ(p.split_rounds,
            static_cast<int>(p.profile.rows(kPooledStage, "forward").size()) - 3 + 2);
}

// A plan that gives the pooled forwards and backwards different clocks: on the pooled profile
// its saving is off and only the pooling bound says how far; on the split one it is right up to
// the shared offsets, which cancel, and the bound is 0.
TEST(SchedulerProfilerSplit, LeavesNoPoolingBoundOnAPlanThatSplitsThePooledInstructions) {
  const Profiled split = profile_with([](const Round& round) { return pooled_client(round); });
  const Profiled kept = profile_with([](const Round& round) { return pooled_client(round); },
                                     {{"split_pooled", false}});
  EXPECT_EQ(kept.split_rounds, 0);
  EXPECT_FALSE(kept.profile.at(kPooledStage, "forward", 1320).energy_pooling_reference_mhz);
  const schedule::Schedule sched = schedule::make_1f1b(4, 4);
  const plan::FrequencyPlan all_max = plan::all_max_plan(split.profile, sched);
  const plan::FrequencyPlan plan = plan::plan_per_instruction(sched, [](int rank, const auto& i) {
    if (rank != static_cast<int>(kPooledStage)) return 1410;
    return i.type == schedule::InstructionType::kForward ? 1320 : 1410;
  });
  auto saving = [&](const profile::Profile& p) {
    const double e = plan::evaluate(p, sched, plan, 83.64).energy_j;
    return 1.0 - e / plan::evaluate(p, sched, all_max, 83.64).energy_j;
  };
  const double right = saving(truth());
  EXPECT_NEAR(saving(split.profile), right, 1e-9);
  EXPECT_GT(std::abs(saving(kept.profile) - right), 1e-3);
  const auto bound = [&](const profile::Profile& p) {
    return *plan::saving_error(p, sched, plan, all_max, 83.64).pooling_bound;
  };
  EXPECT_EQ(bound(split.profile), 0.0);  // exactly: the report says none
  EXPECT_GE(bound(kept.profile), std::abs(saving(kept.profile) - right));
}

TEST(SchedulerProfilerSplit, KeepsTheRowsPooledWhereASplitComesOutAtOrBelowZero) {
  const Profiled p =
      profile_with([](const Round& round) { return pooled_client(round, {.split_scale = 0.01}); });
  EXPECT_GT(p.split_rounds, 0);
  for (const profile::Measurement& row : p.profile.rows(kPooledStage, "forward")) {
    EXPECT_FALSE(row.energy_pooling_reference_mhz) << row.frequency_mhz;
    EXPECT_NEAR(*row.energy_pooling_error, kPoolingError, 1e-9) << row.frequency_mhz;
  }
  EXPECT_CONTAINS(p.log, "GPU 3's split-clock rounds at 1320 MHz gave an energy at or below 0");
}

}  // namespace
}  // namespace perseus::server
