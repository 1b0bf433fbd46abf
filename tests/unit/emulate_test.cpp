// Timeline and cluster emulation (issue 3). The timeline emulator simulates every stage as a GPU
// running its instructions in order; it is checked against the evaluator's critical path and the
// closed-form energy on random pipelines and random plans, against the frontier (a stored plan
// never emulates slower than the time frontier.csv reports), and for its perturbations (seeded
// noise, a slow GPU) and its critical path marks. The cluster emulation is checked against a
// direct recomputation of the three modes and a brute-force deadline lookup.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "perseus/emulate/cluster.hpp"
#include "perseus/emulate/timeline.hpp"
#include "perseus/plan/evaluate.hpp"
#include "perseus/plan/frontier_query.hpp"
#include "perseus/plan/frontier_store.hpp"
#include "perseus/plan/problem.hpp"
#include "perseus/plan/solver.hpp"
#include "perseus/profile/gpu_model.hpp"
#include "perseus/profile/split.hpp"
#include "perseus/schedule/catalog.hpp"
#include "perseus/schedule/schedule.hpp"
#include "perseus/util/error.hpp"
#include "test_support.hpp"

namespace {

namespace emulate = perseus::emulate;
namespace plan = perseus::plan;
namespace profile = perseus::profile;
namespace schedule = perseus::schedule;
using perseus::Error;

// A plan with a random profiled clock for every instruction.
plan::FrequencyPlan random_plan(const profile::Profile& prof, const schedule::Schedule& sched,
                                std::mt19937& rng) {
  return plan::plan_per_instruction(sched, [&](int, const schedule::Instruction& inst) {
    const auto& rows = prof.rows(inst.stage, schedule::type_name(inst.type));
    std::uniform_int_distribution<std::size_t> pick(0, rows.size() - 1);
    return rows[pick(rng)].frequency_mhz;
  });
}

profile::Profile random_profile(int stages, unsigned seed) {
  return profile::synthesize_profile(profile::gpu_model(seed % 2 ? "a100" : "a40"),
                                     profile::default_model(stages), 0.05, seed);
}

// A profile with backward_input / backward_weight rows too, for every schedule.
profile::Profile random_split_profile(int stages, unsigned seed) {
  return profile::split_profile(random_profile(stages, seed), {1, true, 0.3 + 0.05 * (seed % 8)});
}

double closed_form_energy(const profile::Profile& prof, const schedule::Schedule& sched,
                          const plan::FrequencyPlan& p, double time_s, double p_block) {
  double energy = 0.0, busy = 0.0;
  for (std::size_t s = 0; s < sched.ranks.size(); ++s) {
    for (std::size_t i = 0; i < sched.ranks[s].size(); ++i) {
      for (const auto& inst : schedule::actions_of(sched.ranks[s][i])) {  // a pair: one clock
        const auto& m = prof.at(inst.stage, schedule::type_name(inst.type), p[s][i]);
        energy += m.energy_j;
        busy += m.time_s;
      }
    }
  }
  return energy + p_block * (sched.num_ranks() * time_s - busy);
}

// A random schedule of every generator on `ranks` GPUs; torch's interleaved schedules need M to
// split into equal rounds, so M is a multiple of the ranks there.
schedule::Schedule random_schedule(unsigned trial, int ranks, std::mt19937& rng) {
  const auto& names = schedule::schedule_names();
  std::string name = names[trial % names.size()];
  if (name == "envelope") name = "1f1b";
  int per_rank = name == "1f1b" || name == "gpipe" ? 1 : 2;
  int mbs = 1 + static_cast<int>(rng() % 9);
  if (name.rfind("interleaved", 0) == 0) mbs = ranks * (1 + static_cast<int>(rng() % 3));
  if (name == "dualpipev") mbs = std::max(mbs, 2 * ranks);
  return schedule::make_schedule(name, ranks * per_rank, mbs, per_rank);
}

TEST(EmulateTimeline, MatchesEvaluatorAndClosedFormOnRandomPipelines) {
  std::mt19937 rng(2024);
  for (unsigned trial = 0; trial < 70; ++trial) {
    int stages = 1 + static_cast<int>(trial % 6);
    auto sched = random_schedule(trial, stages, rng);
    stages = sched.num_ranks();
    auto prof = random_split_profile(sched.num_stages, trial);
    auto p = random_plan(prof, sched, rng);
    double p_block = 40.0 + trial;
    emulate::Timeline t = emulate::emulate(prof, sched, p, p_block);
    plan::Evaluation ev = plan::evaluate(prof, sched, p, p_block);
    SCOPED_TRACE("trial " + std::to_string(trial) + " " + sched.name);
    EXPECT_NEAR(t.time_s, ev.time_s, 1e-9 * ev.time_s);
    EXPECT_NEAR(t.energy_j, closed_form_energy(prof, sched, p, ev.time_s, p_block),
                1e-9 * t.energy_j);
    std::size_t items = 0;  // an overlapped pair is one entry
    for (const auto& list : sched.ranks) items += list.size();
    ASSERT_EQ(t.entries.size(), items);
    double stage_sum = 0.0;
    for (int s = 0; s < stages; ++s) {
      EXPECT_NEAR(t.rank_busy_s[s], ev.rank_busy_s[s], 1e-9);
      EXPECT_NEAR(t.rank_busy_s[s] + t.rank_idle_s[s], t.time_s, 1e-9);
      stage_sum += t.rank_energy_j[s];
    }
    EXPECT_NEAR(stage_sum, t.energy_j, 1e-9 * t.energy_j);
  }
}

TEST(EmulateTimeline, InstructionsRunInOrderWithoutOverlapAfterTheirInputs) {
  auto sched = schedule::make_1f1b(4, 6);
  auto prof = random_profile(4, 3);
  std::mt19937 rng(5);
  emulate::Timeline t = emulate::emulate(prof, sched, random_plan(prof, sched, rng), 60.0);
  auto find = [&](int stage, schedule::InstructionType type, int mb) {
    for (const auto& e : t.entries)
      if (e.rank == stage && e.instruction.type == type && e.instruction.microbatch == mb) return e;
    ADD_FAILURE() << "missing instruction";
    return t.entries.front();
  };
  for (std::size_t k = 1; k < t.entries.size(); ++k) {
    const auto& prev = t.entries[k - 1];
    const auto& cur = t.entries[k];
    if (prev.rank == cur.rank) {
      EXPECT_GE(cur.start_s, prev.end_s - 1e-12);
    }
    EXPECT_EQ(cur.frequency_mhz > 0, true);
    if (cur.instruction.type == schedule::InstructionType::kForward && cur.rank > 0) {
      EXPECT_GE(cur.start_s,
                find(cur.rank - 1, cur.instruction.type, cur.instruction.microbatch).end_s - 1e-12);
    }
    if (cur.instruction.type == schedule::InstructionType::kBackward && cur.rank < 3) {
      EXPECT_GE(cur.start_s,
                find(cur.rank + 1, cur.instruction.type, cur.instruction.microbatch).end_s - 1e-12);
    }
  }
}

TEST(EmulateTimeline, CriticalPathIsAGaplessChainFromZeroToTheEnd) {
  auto sched = schedule::make_1f1b(5, 7);
  auto prof = random_profile(5, 8);
  std::mt19937 rng(9);
  emulate::Timeline t = emulate::emulate(prof, sched, random_plan(prof, sched, rng), 70.0);
  std::vector<emulate::TimelineEntry> path;
  for (const auto& e : t.entries)
    if (e.critical) path.push_back(e);
  ASSERT_GE(path.size(), 2u);
  std::sort(path.begin(), path.end(),
            [](const auto& a, const auto& b) { return a.start_s < b.start_s; });
  EXPECT_NEAR(path.front().start_s, 0.0, 1e-12);
  EXPECT_NEAR(path.back().end_s, t.time_s, 1e-9);
  double length = 0.0;
  for (std::size_t k = 0; k < path.size(); ++k) {
    length += path[k].duration_s();
    if (k > 0) {
      EXPECT_NEAR(path[k].start_s, path[k - 1].end_s, 1e-9);
    }
  }
  EXPECT_NEAR(length, t.time_s, 1e-9);
}

TEST(EmulateTimeline, FrontierPlansNeverEmulateSlowerThanReported) {
  perseus::test::TempDir dir;
  for (int stages : {3, 4}) {
    auto prof = random_profile(stages, static_cast<unsigned>(stages) + 20);
    auto sched = schedule::make_1f1b(stages, 5);
    plan::PlanSettings settings{0.001, 75.0, plan::CostModelKind::kConvexHull, 1.0};
    auto problem = plan::PlanProblem::build(prof, sched, settings);
    plan::Frontier frontier = plan::solve_frontier(problem, {});
    auto ev = plan::evaluate(prof, sched, plan::all_max_plan(prof, sched), 75.0);
    auto path = dir.path() / std::to_string(stages);
    plan::write_frontier(path, problem, frontier, {"synthetic", {ev.time_s, ev.energy_j}, 0.0});
    plan::StoredFrontier f = plan::read_frontier(path);
    ASSERT_GT(f.rows.size(), 5u);
    for (std::size_t i = 0; i < f.rows.size(); ++i) {
      emulate::Timeline t = emulate::emulate(prof, sched, f.plans[i], 75.0);
      EXPECT_LE(t.time_s, f.rows[i].evaluated_time_s * (1 + 1e-9)) << "plan " << i;
      EXPECT_NEAR(t.energy_j, f.rows[i].evaluated_energy_j, 1e-6 * t.energy_j) << "plan " << i;
    }
  }
}

TEST(EmulateTimeline, NoiseIsSeededAndScalesEnergyWithTime) {
  auto sched = schedule::make_1f1b(4, 8);
  auto prof = random_profile(4, 1);
  auto p = plan::all_max_plan(prof, sched);
  emulate::Timeline base = emulate::emulate(prof, sched, p, 80.0);
  emulate::Timeline a = emulate::emulate(prof, sched, p, 80.0, {.noise = 0.05, .seed = 7});
  emulate::Timeline b = emulate::emulate(prof, sched, p, 80.0, {.noise = 0.05, .seed = 7});
  emulate::Timeline c = emulate::emulate(prof, sched, p, 80.0, {.noise = 0.05, .seed = 8});
  EXPECT_EQ(a.time_s, b.time_s);
  EXPECT_EQ(a.energy_j, b.energy_j);
  EXPECT_NE(a.time_s, c.time_s);
  EXPECT_NE(a.time_s, base.time_s);
  for (std::size_t k = 0; k < a.entries.size(); ++k) {
    // Same power as unperturbed: energy / duration unchanged.
    EXPECT_NEAR(a.entries[k].power_w(), base.entries[k].power_w(),
                1e-6 * base.entries[k].power_w());
  }
  emulate::Timeline zero = emulate::emulate(prof, sched, p, 80.0, {.noise = 0.0, .seed = 7});
  EXPECT_EQ(zero.time_s, base.time_s);
}

TEST(EmulateTimeline, SlowGpuStretchesItsStageOnly) {
  auto sched = schedule::make_1f1b(4, 8);
  auto prof = random_profile(4, 2);
  auto p = plan::all_max_plan(prof, sched);
  emulate::Timeline base = emulate::emulate(prof, sched, p, 80.0);
  emulate::Timeline slow =
      emulate::emulate(prof, sched, p, 80.0, {.slow_rank = 2, .slow_factor = 1.5});
  for (int s = 0; s < 4; ++s) {
    double expected = base.rank_busy_s[s] * (s == 2 ? 1.5 : 1.0);
    EXPECT_NEAR(slow.rank_busy_s[s], expected, 1e-9);
  }
  EXPECT_GT(slow.time_s, base.time_s);
  EXPECT_LE(slow.time_s, 1.5 * base.time_s + 1e-9);
}

TEST(EmulateTimeline, RejectsBadPerturbationsAndPlans) {
  auto sched = schedule::make_1f1b(3, 4);
  auto prof = random_profile(3, 4);
  auto p = plan::all_max_plan(prof, sched);
  EXPECT_THROW(emulate::emulate(prof, sched, p, 80.0, {.noise = -0.1}), Error);
  EXPECT_THROW(emulate::emulate(prof, sched, p, 80.0, {.slow_rank = 3, .slow_factor = 2.0}), Error);
  EXPECT_THROW(emulate::emulate(prof, sched, p, 80.0, {.slow_rank = 0, .slow_factor = 0.9}), Error);
  auto wrong = schedule::make_1f1b(3, 5);
  EXPECT_THROW(emulate::emulate(prof, wrong, p, 80.0), Error);
  p[1][2] = 1234567;
  try {
    emulate::emulate(prof, sched, p, 80.0);
    FAIL() << "unknown clock accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("1234567 MHz"), std::string::npos) << e.what();
  }
}

// --- cluster -------------------------------------------------------------------------------

std::vector<plan::FrontierRow> random_rows(std::mt19937& rng, std::size_t n) {
  std::uniform_real_distribution<double> time(10.0, 20.0), energy(1000.0, 2000.0);
  std::vector<plan::FrontierRow> rows(n);
  for (std::size_t i = 0; i < n; ++i) rows[i] = {i, 0.0, 0.0, time(rng), energy(rng)};
  return rows;
}

// Every consumer's choice on solved frontiers of random profiles is a Pareto row, and the
// cheapest row within its bound (brute force over every row): the queries export, emulate, the
// report and the frontier scheduler use, and the plan the cluster sweep gives the non-stragglers.
TEST(EmulateCluster, EveryChoiceOnRandomProfilesIsTheCheapestParetoRow) {
  for (unsigned seed = 0; seed < 8; ++seed) {
    int stages = 2 + static_cast<int>(seed % 4);
    auto prof = random_profile(stages, seed + 100);
    auto sched = schedule::make_1f1b(stages, 3 + static_cast<int>(seed % 3));
    plan::PlanSettings settings;
    settings.blocking_power_w = 60.0;
    auto problem = plan::PlanProblem::build(prof, sched, settings);
    auto all_max = plan::evaluate(prof, sched, plan::all_max_plan(prof, sched), 60.0);
    plan::StoredFrontier f = plan::stored_frontier(problem, plan::solve_frontier(problem),
                                                   {all_max.time_s, all_max.energy_j});
    plan::FrontierQuery q(f);
    SCOPED_TRACE("seed " + std::to_string(seed) + ", " + std::to_string(f.rows.size()) + " rows");
    auto cheapest = [&](double bound) {
      double best = std::numeric_limits<double>::infinity();
      for (const auto& r : f.rows) {
        if (r.evaluated_time_s <= bound) best = std::min(best, r.evaluated_energy_j);
      }
      return best;
    };
    std::vector<std::size_t> chosen = {q.fastest(), q.min_energy()};
    for (double pct : {0.5, 1.0, 2.0, 5.0, 10.0, 30.0}) {
      auto i = q.within(all_max.time_s * (1.0 + pct / 100.0));
      if (!i) continue;
      EXPECT_EQ(f.rows[*i].evaluated_energy_j, cheapest(all_max.time_s * (1.0 + pct / 100.0)));
      chosen.push_back(*i);
    }
    auto every = q.every(0.01);
    chosen.insert(chosen.end(), every.begin(), every.end());
    for (const auto& p : emulate::sweep_cluster(f, {8, 1}, {1.0, 1.05, 1.2, 1.5})) {
      EXPECT_EQ(f.rows[p.perseus_plan].evaluated_energy_j,
                cheapest(p.perseus.time_s * (1.0 + 1e-12)));
      chosen.push_back(p.perseus_plan);
    }
    for (std::size_t i : chosen) {
      EXPECT_TRUE(q.is_pareto(i)) << "row " << i;
      for (const auto& r : f.rows) {  // nothing is at least as fast and strictly cheaper
        EXPECT_FALSE(r.evaluated_time_s <= f.rows[i].evaluated_time_s &&
                     r.evaluated_energy_j < f.rows[i].evaluated_energy_j)
            << "row " << i << " is dominated by row " << r.index;
      }
    }
  }
}

TEST(EmulateCluster, ModesMatchADirectRecomputation) {
  std::mt19937 rng(3);
  auto rows = random_rows(rng, 30);
  const plan::TimeEnergy all_max{9.5, 2600.0};
  plan::FrontierQuery query(rows, all_max);
  const int stages = 4;
  const double pb = 80.0;
  const emulate::ClusterSpec spec{12, 8};
  const auto& fast = rows[query.fastest()];
  for (double f : {1.0, 1.1, 1.37, 2.0}) {
    emulate::ClusterPoint p = emulate::emulate_cluster(query, stages, pb, spec, f);
    // Baseline: 11 all-max pipelines wait for the all-max straggler, everything x 8 GPUs.
    double end = f * all_max.time_s;
    double base =
        8 * (11 * (all_max.energy_j + stages * pb * (end - all_max.time_s)) + f * all_max.energy_j);
    EXPECT_NEAR(p.baseline.energy_j, base, 1e-9 * base);
    end = f * fast.evaluated_time_s;
    double intrinsic =
        8 * (11 * (fast.evaluated_energy_j + stages * pb * (end - fast.evaluated_time_s)) +
             f * fast.evaluated_energy_j);
    EXPECT_NEAR(p.intrinsic.energy_j, intrinsic, 1e-9 * intrinsic);
    // Perseus: the best any single plan meeting the deadline can do.
    double best = std::numeric_limits<double>::infinity();
    for (const auto& r : rows) {
      if (r.evaluated_time_s > end) continue;
      best = std::min(best, r.evaluated_energy_j + stages * pb * (end - r.evaluated_time_s));
    }
    double perseus = 8 * (11 * best + f * fast.evaluated_energy_j);
    EXPECT_LE(p.perseus.energy_j, intrinsic * (1 + 1e-12));
    EXPECT_GE(p.perseus.energy_j, perseus * (1 - 1e-12));
    EXPECT_NEAR(p.total_saving, p.intrinsic_saving + p.extrinsic_saving, 1e-12);
    EXPECT_NEAR(p.intrinsic_saving, (base - intrinsic) / base, 1e-12);
    if (f == 1.0) {
      EXPECT_NEAR(p.extrinsic_saving, 0.0, 1e-12);
    }
  }
}

TEST(EmulateCluster, ASinglePipelineHasNoExtrinsicSaving) {
  std::mt19937 rng(4);
  auto rows = random_rows(rng, 10);
  plan::FrontierQuery query(rows, {9.0, 2500.0});
  auto p = emulate::emulate_cluster(query, 4, 80.0, {1, 1}, 1.3);
  EXPECT_NEAR(p.extrinsic_saving, 0.0, 1e-12);
}

TEST(EmulateCluster, ParsesFactorSpecs) {
  auto range = emulate::parse_factors("1.00:1.50:0.01");
  ASSERT_EQ(range.size(), 51u);
  EXPECT_DOUBLE_EQ(range.front(), 1.0);
  EXPECT_NEAR(range.back(), 1.5, 1e-12);
  EXPECT_EQ(emulate::parse_factors("1.2").size(), 1u);
  EXPECT_EQ(emulate::parse_factors("1,1.1,1.5"), (std::vector<double>{1.0, 1.1, 1.5}));
  for (const char* bad :
       {"", "0.9", "1,0.5", "1:2", "1:0.5:0.1", "1:2:0", "1:2:-1", "x", "1,,2", "1.2abc"}) {
    EXPECT_THROW(emulate::parse_factors(bad), Error) << bad;
  }
}

TEST(EmulateCluster, RejectsBadSpecs) {
  EXPECT_THROW(emulate::check_cluster({0, 1}, {1.0}), Error);
  EXPECT_THROW(emulate::check_cluster({4, 0}, {1.0}), Error);
  EXPECT_THROW(emulate::check_cluster({4, 1}, {}), Error);
  EXPECT_THROW(emulate::check_cluster({4, 1}, {0.99}), Error);
  EXPECT_NO_THROW(emulate::check_cluster({4, 1}, {1.0, 1.5}));
}

}  // namespace
