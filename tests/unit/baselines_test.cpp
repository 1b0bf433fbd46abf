// The baselines (DESIGN section 6): uniform, EnvPipe and its envelope schedule, Zeus global and
// per-stage power limits; on hand-made profiles whose answers follow from their construction, and
// on the reference profiles (skipped when the shared data is absent).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "perseus/baselines/envpipe.hpp"
#include "perseus/baselines/uniform.hpp"
#include "perseus/baselines/zeus.hpp"
#include "perseus/plan/evaluate.hpp"
#include "perseus/profile/csv.hpp"
#include "perseus/schedule/catalog.hpp"
#include "perseus/schedule/dag.hpp"
#include "perseus/util/error.hpp"
#include "test_support.hpp"

using perseus::test::error_of;

namespace perseus::baselines {
namespace {

using profile::Measurement;
using profile::Profile;
using schedule::InstructionType;
using schedule::Schedule;

const std::vector<int> kClocks = {1000, 1100, 1200, 1300, 1400};

// Stage s's forward takes scale[s] * 1400/f seconds at clock f (backward twice that), drawing
// 345.6 + 100 (f/1000)^3 watts: energy is lowest at 1200 MHz and time falls as the clock rises.
Profile scaled_profile(const std::vector<double>& scale) {
  Profile p("scaled");
  for (int s = 0; s < static_cast<int>(scale.size()); ++s) {
    for (const char* type : {"forward", "backward"}) {
      double base = std::string(type) == "forward" ? 1.0 : 2.0;
      for (int f : kClocks) {
        double x = f / 1000.0;
        double t = base * scale[s] * 1400.0 / f;
        p.add(s, type, {f, t, (345.6 + 100.0 * x * x * x) * t, 0});
      }
    }
  }
  p.validate();
  return p;
}

Profile shared_profile(const std::string& name) {
  return profile::read_profile_csv(
      (test::shared_data() / "perseus" / "stage_profiles" / name).string());
}

bool in_envelope(const schedule::DagNode& node, int stages, int microbatches) {
  const auto& inst = node.instruction;
  return node.rank == stages - 1 ||
         (inst.type == InstructionType::kForward && inst.microbatch == 0) ||
         (inst.type == InstructionType::kBackward && inst.microbatch == microbatches - 1);
}

// The critical path of `plan`, recomputed from the profile.
std::vector<int> plan_critical_path(const Profile& p, const plan::FrequencyPlan& plan,
                                    const schedule::Dag& dag) {
  std::vector<double> duration(static_cast<std::size_t>(dag.num_nodes()), 0.0);
  for (int v = 1; v < dag.sink(); ++v) {
    const auto& node = dag.node(v);
    duration[v] =
        p.at(node.rank, schedule::type_name(node.instruction.type), plan[node.rank][node.position])
            .time_s;
  }
  return schedule::critical_path(dag, duration);
}

// --- uniform ------------------------------------------------------------------------------------

TEST(UniformBaseline, PicksTheLowestEnergyClockOfEachStageAndType) {
  Profile p("hand");
  // (clock, time, energy): the cheapest clock differs per (stage, type).
  auto add = [&](int s, const char* type, std::vector<Measurement> rows) {
    for (auto m : rows) p.add(s, type, m);
  };
  add(0, "forward", {{1000, 1.4, 30, 0}, {1200, 1.2, 25, 0}, {1400, 1.0, 28, 0}});
  add(0, "backward", {{1000, 2.8, 50, 0}, {1200, 2.4, 55, 0}, {1400, 2.0, 60, 0}});
  add(1, "forward", {{1000, 1.4, 40, 0}, {1200, 1.2, 41, 0}, {1400, 1.0, 39, 0}});
  add(1, "backward", {{1000, 2.8, 70, 0}, {1200, 2.4, 66, 0}, {1400, 2.0, 67, 0}});
  p.validate();
  Schedule sched = schedule::make_1f1b(2, 3);
  plan::FrequencyPlan plan = uniform_plan(p, sched);
  const int expected[2][2] = {{1200, 1000}, {1400, 1200}};  // [stage][forward, backward]
  for (int s = 0; s < 2; ++s) {
    for (std::size_t i = 0; i < sched.ranks[s].size(); ++i) {
      int t = sched.ranks[s][i].type == InstructionType::kForward ? 0 : 1;
      EXPECT_EQ(plan[s][i], expected[s][t]) << "stage " << s << " position " << i;
    }
  }
  EXPECT_THROW(uniform_plan(p, schedule::make_1f1b(3, 3)), Error);  // profile has 2 stages
}

// --- EnvPipe ------------------------------------------------------------------------------------

TEST(EnvPipe, ParsesPolicies) {
  EXPECT_EQ(parse_envpipe_policy("greedy"), EnvPipePolicy::kGreedy);
  EXPECT_EQ(parse_envpipe_policy("balanced"), EnvPipePolicy::kBalanced);
  EXPECT_CONTAINS(error_of([] { parse_envpipe_policy("lazy"); }), "unknown EnvPipe policy 'lazy'");
}

// With the last stage the heaviest, the envelope (at max clock) can become the critical path. It
// is only 1.1x heavier, while the other stages start 1400/1200 = 1.17x slower at their
// energy-optimal clock, so EnvPipe has to raise clocks first. All envelope instructions run at
// max clock, so the envelope path is no longer than under all-max: the iteration is not slower.
TEST(EnvPipe, ReachesTheEnvelopeWhenTheLastStageIsHeaviest) {
  Profile p = scaled_profile({1.0, 1.0, 1.0, 1.1});
  Schedule sched = schedule::make_1f1b(4, 8);
  auto all_max = plan::evaluate(p, sched, plan::all_max_plan(p, sched), 20.0);
  schedule::Dag dag(sched);
  for (auto policy : {EnvPipePolicy::kGreedy, EnvPipePolicy::kBalanced}) {
    EnvPipeResult r = envpipe(p, sched, 20.0, policy);
    EXPECT_TRUE(r.envelope_reached) << r.stop_reason;
    EXPECT_GT(r.iterations, 0);
    EXPECT_CONTAINS(r.stop_reason, "lies on the outer envelope");
    for (int v : plan_critical_path(p, r.plan, dag)) {
      EXPECT_TRUE(in_envelope(dag.node(v), 4, 8)) << "node " << v;
    }
    auto ev = plan::evaluate(p, sched, r.plan, 20.0);
    EXPECT_DOUBLE_EQ(ev.time_s, r.evaluation.time_s);
    EXPECT_DOUBLE_EQ(ev.energy_j, r.evaluation.energy_j);
    EXPECT_LE(r.evaluation.time_s, all_max.time_s * (1 + 1e-12));
    EXPECT_LT(r.evaluation.energy_j, all_max.energy_j);
    // The envelope stays at max clock.
    for (int v = 1; v < dag.sink(); ++v) {
      if (in_envelope(dag.node(v), 4, 8)) {
        EXPECT_EQ(r.plan[dag.node(v).rank][dag.node(v).position], 1400);
      }
    }
  }
}

// Bloom's last stage is lighter than the others: the critical path cannot lie on the envelope,
// and EnvPipe must stop (not loop) and say why.
TEST(EnvPipe, TerminatesWithoutTheEnvelopeOnBloom) {
  PERSEUS_REQUIRE_SHARED_DATA();
  Profile p = shared_profile("bloom+a40_bf16.csv");
  Schedule sched = schedule::make_1f1b(8, 12);
  for (auto policy : {EnvPipePolicy::kGreedy, EnvPipePolicy::kBalanced}) {
    EnvPipeResult r = envpipe(p, sched, 70.38, policy);
    EXPECT_FALSE(r.envelope_reached);
    EXPECT_CONTAINS(r.stop_reason, "envelope not reached");
    EXPECT_CONTAINS(r.stop_reason, "at max clock");
    EXPECT_CONTAINS(r.stop_reason, "heavier than the last stage");
    EXPECT_GT(r.iterations, 0);
    EXPECT_TRUE(std::isfinite(r.evaluation.time_s) && r.evaluation.time_s > 0.0);
  }
}

TEST(EnvPipe, SavesEnergyOnGpt3A100) {
  PERSEUS_REQUIRE_SHARED_DATA();
  Profile p = shared_profile("gpt3-175b+a100_sxm_bf16.csv");
  Schedule sched = schedule::make_1f1b(8, 12);
  auto all_max = plan::evaluate(p, sched, plan::all_max_plan(p, sched), 83.64);
  for (auto policy : {EnvPipePolicy::kGreedy, EnvPipePolicy::kBalanced}) {
    EnvPipeResult r = envpipe(p, sched, 83.64, policy);
    EXPECT_FALSE(r.stop_reason.empty());
    EXPECT_LT(r.evaluation.energy_j, all_max.energy_j);
    if (r.envelope_reached) {
      EXPECT_LE(r.evaluation.time_s, all_max.time_s * (1 + 1e-12));
    }
  }
}

// --- envelope schedule --------------------------------------------------------------------------

std::string render(const std::vector<schedule::Instruction>& list) {
  std::string out;
  for (const auto& inst : list) {
    if (!out.empty()) out += " ";
    out += (inst.type == InstructionType::kForward ? "F" : "B") + std::to_string(inst.microbatch);
  }
  return out;
}

TEST(EnvelopeSchedule, CountsFollowEnvPipesFormula) {
  // Backward at max clock: 2 * 1400/1400 = 2 s; forward at the energy-optimal 1200 MHz:
  // 1400/1200 s. Stage s < S-1: floor(2 (S-s-1) / (7/6)), capped at M - (S - s).
  Profile p = scaled_profile({1.0, 1.0, 1.0, 1.0});
  const int S = 4, M = 8;
  std::vector<int> counts = envelope_warmup_counts(p, S, M);
  ASSERT_EQ(counts.size(), 4u);
  for (int s = 0; s < S; ++s) {
    int expected = 0;
    if (s < S - 1) {
      int raw = static_cast<int>(std::floor(2.0 * (S - s - 1) / (1400.0 / 1200.0)));
      expected = std::max(0, std::min(raw, M - (S - s)));
    }
    EXPECT_EQ(counts[s], expected) << "stage " << s;
  }
  EXPECT_EQ(counts, (std::vector<int>{4, 3, 1, 0}));  // the same, worked by hand
  Schedule sched = envelope_schedule(p, S, M);
  EXPECT_EQ(sched.name, "envelope:4,3,1,0");
  EXPECT_EQ(render(sched.ranks[0]), "F0 F1 F2 F3 F4 F5 F6 F7 B0 B1 B2 B3 B4 B5 B6 B7");
  EXPECT_EQ(render(sched.ranks[2]), "F0 F1 F2 B0 F3 B1 F4 B2 F5 B3 F6 B4 F7 B5 B6 B7");
  EXPECT_EQ(render(sched.ranks[3]), "F0 B0 F1 B1 F2 B2 F3 B3 F4 B4 F5 B5 F6 B6 F7 B7");
  schedule::Dag dag(sched);
  EXPECT_EQ(dag.num_nodes(), 2 * S * M + 2);
  // With fewer microbatches than stages every count is 0 (warm-up is already all of M).
  EXPECT_EQ(envelope_warmup_counts(p, S, 2), (std::vector<int>{0, 0, 0, 0}));
}

TEST(EnvelopeSchedule, LowersACountAboveThePreviousStagesLikeEnvPipe) {
  // Stage 1's backward is 8x heavier than stage 0's: its raw count (4) would exceed stage 0's (1)
  // and deadlock; EnvPipe lowers it to stage 0's.
  Profile p("hand");
  for (int s = 0; s < 3; ++s) {
    double b = s == 1 ? 4.0 : 0.5;
    p.add(s, "forward", {1000, 1.0, 10.0, 0});
    p.add(s, "forward", {1400, 0.8, 12.0, 0});
    p.add(s, "backward", {1000, b * 1.25, 20.0, 0});
    p.add(s, "backward", {1400, b, 25.0, 0});
  }
  p.validate();
  EXPECT_EQ(envelope_warmup_counts(p, 3, 10), (std::vector<int>{1, 1, 0}));
  EXPECT_NO_THROW(schedule::Dag(envelope_schedule(p, 3, 10)));
}

TEST(EnvelopeSchedule, NamesRoundTripThroughMakeSchedule) {
  Schedule a = schedule::make_1f1b_warmup(4, 8, {4, 3, 1, 0});
  Schedule b = schedule::make_schedule(a.name, 4, 8);
  EXPECT_EQ(b.name, "envelope:4,3,1,0");
  ASSERT_EQ(a.ranks.size(), b.ranks.size());
  for (std::size_t s = 0; s < a.ranks.size(); ++s) {
    EXPECT_EQ(render(a.ranks[s]), render(b.ranks[s]));
  }
  // All-zero counts are plain 1F1B.
  Schedule zero = schedule::make_schedule("envelope:0,0,0", 3, 5);
  Schedule plain = schedule::make_1f1b(3, 5);
  for (int s = 0; s < 3; ++s) EXPECT_EQ(render(zero.ranks[s]), render(plain.ranks[s]));
  const auto& names = schedule::schedule_names();
  EXPECT_NE(std::find(names.begin(), names.end(), "envelope"), names.end());
}

TEST(EnvelopeSchedule, MakeScheduleRejectsBadEnvelopeNames) {
  using schedule::make_schedule;
  EXPECT_CONTAINS(error_of([] { make_schedule("envelope", 4, 8); }), "needs a profile");
  EXPECT_CONTAINS(error_of([] { make_schedule("envelope:1,2", 4, 8); }),
                  "has 2 warm-up counts but the pipeline has 4 stages");
  EXPECT_CONTAINS(error_of([] { make_schedule("envelope:1,-2,0,0", 4, 8); }),
                  "warm-up count '-2' is not a non-negative integer");
  EXPECT_CONTAINS(error_of([] { make_schedule("envelope:1,x,0,0", 4, 8); }), "'x'");
  EXPECT_CONTAINS(error_of([] { make_schedule("envelope:", 4, 8); }), "''");
  EXPECT_CONTAINS(error_of([] { make_schedule("envelope:1,,0,0", 4, 8); }), "''");
  EXPECT_CONTAINS(error_of([] { make_schedule("envelope:0,5,0,0", 4, 8); }), "deadlocks");
  EXPECT_CONTAINS(error_of([] { make_schedule("envelope:0,0,0,0", 4, 0); }), "microbatches");
  EXPECT_CONTAINS(error_of([] { schedule::make_1f1b_warmup(2, 4, {0, -1}); }), "negative");
  EXPECT_CONTAINS(error_of([] { make_schedule("zigzag", 4, 8); }), "unknown schedule 'zigzag'");
}

// --- Zeus ---------------------------------------------------------------------------------------

TEST(ZeusBaseline, ClockUnderLimitPicksTheFastestClockThatFits) {
  // Average powers: 100, 130, 160 W; the 1300 MHz row draws 170 W, more than the faster one.
  std::vector<Measurement> rows = {
      {1000, 1.0, 100.0, 0}, {1400, 0.8, 128.0, 0}, {1200, 0.9, 117.0, 0}, {1300, 0.85, 144.5, 0}};
  EXPECT_EQ(clock_under_limit(rows, 1000.0), 1400);
  EXPECT_EQ(clock_under_limit(rows, 160.0), 1400);
  EXPECT_EQ(clock_under_limit(rows, 159.9), 1200);
  EXPECT_EQ(clock_under_limit(rows, 130.0), 1200);
  EXPECT_EQ(clock_under_limit(rows, 129.0), 1000);
  EXPECT_EQ(clock_under_limit(rows, 50.0), 1000);  // nothing fits: the lowest-power clock
  EXPECT_THROW(clock_under_limit({}, 100.0), Error);
}

TEST(ZeusBaseline, GlobalSweepIsMonotoneAndEtaPicksTheEnds) {
  Profile p = scaled_profile({1.0, 1.2, 1.0});
  Schedule sched = schedule::make_1f1b(3, 6);
  ZeusSweep half = zeus_global(p, sched, 50.0, 0.5, 10.0);
  ASSERT_GE(half.points.size(), 3u);
  EXPECT_DOUBLE_EQ(half.max_power_w, 345.6 + 100.0 * 1.4 * 1.4 * 1.4);
  EXPECT_DOUBLE_EQ(half.points.front().limits_w[0], half.max_power_w);
  for (std::size_t i = 1; i < half.points.size(); ++i) {
    const auto& prev = half.points[i - 1];
    const auto& cur = half.points[i];
    EXPECT_LT(cur.limits_w[0], prev.limits_w[0]);
    EXPECT_GE(cur.evaluation.time_s, prev.evaluation.time_s);  // lower limit: not faster
    EXPECT_NE(cur.plan, prev.plan);                            // repeated plans are dropped
    for (double l : cur.limits_w) EXPECT_EQ(l, cur.limits_w[0]);
  }
  // The first point is all-max; the last every clock at 1000 MHz (the lowest power).
  EXPECT_EQ(half.points.front().plan, plan::all_max_plan(p, sched));
  for (const auto& stage : half.points.back().plan) {
    for (int f : stage) EXPECT_EQ(f, 1000);
  }
  auto by = [](const ZeusSweep& z, auto key) {
    std::size_t best = 0;
    for (std::size_t i = 0; i < z.points.size(); ++i) {
      if (key(z.points[i].evaluation) < key(z.points[best].evaluation)) best = i;
    }
    return best;
  };
  ZeusSweep energy = zeus_global(p, sched, 50.0, 1.0, 10.0);
  EXPECT_EQ(energy.chosen, by(energy, [](const plan::Evaluation& e) { return e.energy_j; }));
  ZeusSweep time = zeus_global(p, sched, 50.0, 0.0, 10.0);
  EXPECT_EQ(time.chosen, by(time, [](const plan::Evaluation& e) { return e.time_s; }));
  EXPECT_EQ(time.chosen, 0u);
  for (const auto& point : half.points) {
    EXPECT_DOUBLE_EQ(point.cost, 0.5 * point.evaluation.energy_j +
                                     0.5 * half.max_power_w * point.evaluation.time_s);
  }
}

TEST(ZeusBaseline, PerStageGivesTheHeaviestStageTheHighestLimit) {
  Profile p = scaled_profile({1.0, 1.3, 1.0, 0.9});
  Schedule sched = schedule::make_1f1b(4, 6);
  ZeusSweep z = zeus_per_stage(p, sched, 50.0, 0.5, 10.0);
  ASSERT_GE(z.points.size(), 2u);
  bool strictly_lower_somewhere = false;
  for (const auto& point : z.points) {
    const auto& l = point.limits_w;
    EXPECT_EQ(*std::max_element(l.begin(), l.end()), l[1]);
    for (int s : {0, 2, 3}) strictly_lower_somewhere |= l[s] < l[1];
  }
  EXPECT_TRUE(strictly_lower_somewhere);
  // At the highest limit the heaviest stage runs all-max; the others, at lower or equal clocks,
  // cannot make the iteration faster than all-max.
  const auto& front = z.points.front();
  EXPECT_DOUBLE_EQ(front.limits_w[1], z.max_power_w);
  for (int f : front.plan[1]) EXPECT_EQ(f, 1400);
  auto all_max = plan::evaluate(p, sched, plan::all_max_plan(p, sched), 50.0);
  EXPECT_GE(front.evaluation.time_s, all_max.time_s);
}

TEST(ZeusBaseline, RejectsBadEtaAndStep) {
  Profile p = scaled_profile({1.0, 1.0});
  Schedule sched = schedule::make_1f1b(2, 4);
  EXPECT_CONTAINS(error_of([&] { zeus_global(p, sched, 50.0, 1.5); }), "eta must be in [0, 1]");
  EXPECT_CONTAINS(error_of([&] { zeus_per_stage(p, sched, 50.0, -0.1); }), "eta");
  EXPECT_CONTAINS(
      error_of([&] { zeus_global(p, sched, 50.0, std::numeric_limits<double>::quiet_NaN()); }),
      "eta");
  EXPECT_CONTAINS(error_of([&] { zeus_global(p, sched, 50.0, 0.5, 0.0); }), "step");
  EXPECT_CONTAINS(error_of([&] { zeus_per_stage(p, sched, 50.0, 0.5, -25.0); }), "step");
  EXPECT_CONTAINS(error_of([&] { zeus_global(p, sched, 50.0, 0.5, 1e-9); }), "too small");
  EXPECT_THROW(zeus_global(p, schedule::make_1f1b(3, 4), 50.0, 0.5), Error);
}

}  // namespace
}  // namespace perseus::baselines
