// Energy as a search objective (issue 17) on GPT-1.3B (Aceso miniset, 1 node x 4 GPUs, 12000 MB)
// with the A100 GPU model: the planned pipeline's all-max time agrees with the performance model,
// the fastest plan saves energy at all-max's time, the plan within the slowdown saves more, and
// extrapolating a long pipeline from two shorter plans agrees with planning it whole.
#include <filesystem>

#include "perseus/search/energy.hpp"
#include "perseus/search/search.hpp"
#include "search_support.hpp"
#include "test_support.hpp"

namespace perseus::search {
namespace {

using test::miniset;

struct Gpt {
  Database db = Database::load(miniset(), "gpt_1_3B");
  Model model = Model::build(make_model_desc("gpt", "1_3B", 24), db);
  PerfModel pm{model, db, PerfOptions{12000.0, 4}};

  // The reference's best 4-stage configuration with `global_batch` samples per iteration.
  Config reference(int global_batch) const {
    Config c = read_config(perseus::test::shared_data() / "aceso" / "golden" / "run_gpt_small" /
                           "gpt_1_3B_4stages.json");
    c.global_batch_size = global_batch;
    return c;
  }
};

TEST(SearchEnergy, PlannedPipelineMatchesThePerformanceModel) {
  REQUIRE_MINISET();
  Gpt g;
  const Config c = g.reference(64);
  const PipelineCost cost = g.pm.evaluate(c);
  ASSERT_TRUE(cost.legal) << cost.reason;
  const PipelineEnergy e = pipeline_energy(c, cost, "a100", 0.05);
  // 1F1B's critical path at the highest clocks is the performance model's formula.
  EXPECT_NEAR(e.all_max_time_s * 1000.0, cost.iteration_ms, 1e-3 * cost.iteration_ms);
  EXPECT_LT(e.fastest_energy_j, e.all_max_energy_j);
  EXPECT_LT(e.planned_energy_j, e.fastest_energy_j);
  EXPECT_LE(e.planned_time_s, e.all_max_time_s * 1.05 * (1 + 1e-9));
}

TEST(SearchEnergy, ExtrapolationAgreesWithPlanningTheWholePipeline) {
  REQUIRE_MINISET();
  Gpt g;
  const Config c = g.reference(128);
  const PipelineCost cost = g.pm.evaluate(c);
  ASSERT_EQ(cost.num_microbatches, 128);
  const PipelineEnergy whole = pipeline_energy(c, cost, "a100", 0.05, 128);
  const PipelineEnergy extrapolated = pipeline_energy(c, cost, "a100", 0.05, 32);
  EXPECT_NEAR(extrapolated.all_max_time_s, whole.all_max_time_s, 1e-3 * whole.all_max_time_s);
  EXPECT_NEAR(extrapolated.all_max_energy_j, whole.all_max_energy_j, 1e-3 * whole.all_max_energy_j);
  EXPECT_NEAR(extrapolated.fastest_energy_j, whole.fastest_energy_j, 1e-3 * whole.fastest_energy_j);
  EXPECT_NEAR(extrapolated.planned_energy_j, whole.planned_energy_j, 1e-3 * whole.planned_energy_j);
}

TEST(SearchEnergy, EnergyOptimalUsesLessThanTheFastestPlanOfTheTimeOptimal) {
  REQUIRE_MINISET();
  Gpt g;
  const SearchResult r = run_search(g.model, g.db, test::four_gpus(512, {1, 2, 4, 8}));
  std::vector<Config> candidates;
  for (const auto& s : r.per_stage_count) {
    candidates.insert(candidates.end(), s.candidates.begin(), s.candidates.end());
  }
  const EnergyChoice choice = choose_for_energy(g.pm, candidates, EnergyOptions{"a100", 0.05});
  ASSERT_GE(choice.time_optimal, 0);
  ASSERT_GE(choice.energy_optimal, 0);
  const auto& fast = choice.candidates[static_cast<std::size_t>(choice.time_optimal)];
  const auto& lean = choice.candidates[static_cast<std::size_t>(choice.energy_optimal)];
  EXPECT_DOUBLE_EQ(fast.cost.iteration_ms, r.best_result()->cost.iteration_ms);
  EXPECT_LT(lean.energy.planned_energy_j, fast.energy.fastest_energy_j);
  EXPECT_LE(lean.energy.planned_time_s, choice.bound_s * (1 + 1e-3));
  for (const auto& c : choice.candidates) {
    if (c.within_bound) {
      EXPECT_GE(c.energy.planned_energy_j, lean.energy.planned_energy_j);
    }
  }
}

}  // namespace
}  // namespace perseus::search
