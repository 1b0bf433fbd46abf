// The frontier solver's shortcuts change no answer (issue 16): reusing a minimum cut while the
// critical network is unchanged, warm-starting the next cut from the last flow, and taking as
// many unit steps with one cut as it stays optimal for (convex hull) give the same frontier as
// the published per-unit algorithm (a fresh cut per unit step, SolverOptions::per_unit): the
// same planned times, durations, realized clocks and evaluated points, and predicted energies
// within 1e-9 relative. Checked on seeded random synthetic pipelines (noisy profiles, 2-6 stages,
// 1-24 microbatches, several units, four schedules, both cost models) and on the shared
// reference profiles. Reclaiming slack on worker threads gives the same frontier bit for bit.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <random>
#include <string>

#include "perseus/plan/problem.hpp"
#include "perseus/plan/solver.hpp"
#include "perseus/profile/csv.hpp"
#include "perseus/profile/gpu_model.hpp"
#include "perseus/profile/split.hpp"
#include "perseus/schedule/catalog.hpp"
#include "test_support.hpp"

namespace {

namespace plan = perseus::plan;
namespace profile = perseus::profile;
namespace schedule = perseus::schedule;

struct Instance {
  std::string label;
  profile::Profile profile;
  schedule::Schedule schedule;
  plan::PlanSettings settings;
};

// Slack reclamation on three worker threads gives the frontier of one thread, bit for bit.
void expect_same_with_threads(const plan::PlanProblem& problem, const plan::Frontier& one) {
  plan::Frontier three = plan::solve_frontier(problem, {}, {.threads = 3});
  EXPECT_EQ(three.steps, one.steps);
  EXPECT_EQ(three.initial_clocks, one.initial_clocks);
  EXPECT_EQ(three.clock_changes, one.clock_changes);
  ASSERT_EQ(three.points.size(), one.points.size());
  for (std::size_t i = 0; i < one.points.size(); ++i) {
    EXPECT_EQ(three.points[i].quant_time, one.points[i].quant_time) << i;
    EXPECT_EQ(three.points[i].predicted_energy_j, one.points[i].predicted_energy_j) << i;
    EXPECT_EQ(three.points[i].evaluated_time_s, one.points[i].evaluated_time_s) << i;
    EXPECT_EQ(three.points[i].evaluated_energy_j, one.points[i].evaluated_energy_j) << i;
  }
}

// The shortcut solver's frontier against the per-unit one, point by point; returns the number of
// unit steps the shortcut solver took per minimum cut.
double expect_same_frontier(const Instance& in) {
  SCOPED_TRACE(in.label);
  auto problem = plan::PlanProblem::build(in.profile, in.schedule, in.settings);
  plan::Frontier fast = plan::solve_frontier(problem);
  plan::Frontier slow = plan::solve_frontier(problem, {}, {.per_unit = true});
  expect_same_with_threads(problem, fast);
  EXPECT_EQ(fast.stop_reason, slow.stop_reason);
  EXPECT_EQ(fast.initial_durations, slow.initial_durations);
  EXPECT_EQ(fast.steps, slow.steps);
  EXPECT_EQ(fast.initial_clocks, slow.initial_clocks);
  EXPECT_EQ(fast.clock_changes, slow.clock_changes);
  long unit_steps = 0;  // the no-slowdown point (plan/no_slowdown.hpp) keeps the planned time
  for (std::size_t i = 1; i < slow.points.size(); ++i) {
    unit_steps += slow.points[i].quant_time < slow.points[i - 1].quant_time;
  }
  EXPECT_EQ(slow.min_cuts, unit_steps + 1);
  EXPECT_LE(fast.min_cuts, slow.min_cuts);
  if (fast.points.size() != slow.points.size()) {
    ADD_FAILURE() << fast.points.size() << " points against " << slow.points.size();
    return 1.0;
  }
  for (std::size_t i = 0; i < fast.points.size(); ++i) {
    const auto &a = fast.points[i], &b = slow.points[i];
    EXPECT_EQ(a.quant_time, b.quant_time) << i;
    EXPECT_NEAR(a.predicted_energy_j, b.predicted_energy_j, 1e-9 * b.predicted_energy_j) << i;
    EXPECT_EQ(a.evaluated_time_s, b.evaluated_time_s) << i;
    EXPECT_EQ(a.evaluated_energy_j, b.evaluated_energy_j) << i;
  }
  return static_cast<double>(unit_steps) / static_cast<double>(std::max(1L, fast.min_cuts));
}

profile::Profile random_profile(std::mt19937_64& random, int stages) {
  const char* gpus[] = {"a100", "h100", "a40"};
  auto model = profile::default_model(stages);
  std::uniform_real_distribution<double> work(0.6, 1.4), forward(0.004, 0.06);
  for (double& w : model.stage_work) w = work(random);
  model.forward_time_s = forward(random);
  const auto& gpu = profile::gpu_model(gpus[random() % 3]);
  return profile::synthesize_profile(gpu, model, 0.02, random());
}

TEST(SolverSteps, RandomPipelinesGiveThePerUnitFrontier) {
  std::mt19937_64 random(16);
  const char* schedules[] = {"1f1b", "gpipe", "interleaved-1f1b", "zbv"};
  const double units[] = {0.001, 0.0005, 0.0002};
  double worst_steps_per_cut = 1e300, best = 0.0;
  for (int k = 0; k < 24; ++k) {
    const std::string name = schedules[k % 4];
    const bool multi = k % 4 >= 2;
    const int gpus = 2 + static_cast<int>(random() % 3);
    // Sizes every schedule takes: interleaved ones need M in equal rounds of R.
    const int microbatches =
        multi ? gpus * (1 + static_cast<int>(random() % 3)) : 1 + static_cast<int>(random() % 24);
    profile::Profile p = random_profile(random, gpus);
    if (multi) p = profile::split_profile(p, {2, name == "zbv", 0.5});
    for (auto model : {plan::CostModelKind::kConvexHull, plan::CostModelKind::kExponential}) {
      Instance in{name + " seed " + std::to_string(k) + " " + plan::cost_model_name(model),
                  p,
                  schedule::make_schedule(name, p.num_stages(), microbatches),
                  {units[k % 3], 80.0, model, 1.0}};
      double r = expect_same_frontier(in);
      if (model == plan::CostModelKind::kConvexHull) {
        worst_steps_per_cut = std::min(worst_steps_per_cut, r);
        best = std::max(best, r);
      }
    }
  }
  std::printf("[ SolverSteps ] convex hull: %.2f to %.2f unit steps per minimum cut\n",
              worst_steps_per_cut, best);
  EXPECT_GT(best, 2.0);  // the shortcut is taken
}

TEST(SolverSteps, SharedProfilesGiveThePerUnitFrontier) {
  PERSEUS_REQUIRE_SHARED_DATA();
  const std::string dir =
      (perseus::test::shared_data() / "perseus" / "stage_profiles").string() + "/";
  auto gpt = profile::read_profile_csv(dir + "gpt3-175b+a100_sxm_bf16.csv");
  auto bloom = profile::read_profile_csv(dir + "bloom+a40_bf16.csv");
  for (auto model : {plan::CostModelKind::kConvexHull, plan::CostModelKind::kExponential}) {
    const std::string m = plan::cost_model_name(model);
    expect_same_frontier({"gpt3 a100 M=8 " + m,
                          gpt,
                          schedule::make_schedule("1f1b", 8, 8),
                          {0.001, 83.64, model, 1.0}});
    expect_same_frontier({"bloom a40 M=4 " + m,
                          bloom,
                          schedule::make_schedule("1f1b", 8, 4),
                          {0.0001, 70.38, model, 1.0}});
  }
}

}  // namespace
