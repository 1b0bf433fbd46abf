// Parallelization search, phase 2: the bottleneck-alleviating search and the Megatron-LM-style
// grid on the Aceso miniset (GPT-1.3B and T5-770M on one node of 4 GPUs, global batch 512,
// 12000 MB): the search matches or beats the reference's best configurations (58760.92 ms and
// 33659.50 ms), the grid reproduces the reference's 73654.74 ms, results are deterministic and
// budgets and options are checked.
#include "perseus/search/search.hpp"

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "perseus/util/error.hpp"
#include "search_support.hpp"
#include "test_support.hpp"

namespace perseus::search {
namespace {

using perseus::test::error_of;
using perseus::test::shared_data;

using test::miniset;

struct Inputs {
  Database db;
  Model model;
  SearchOptions options;
};

Inputs setup(const std::string& name, const std::string& size) {
  Database db = Database::load(miniset(), name + "_" + size);
  Model model = Model::build(make_model_desc(name, size, 24), db);
  return {std::move(db), std::move(model), test::four_gpus(512, {1, 2, 4, 8})};
}

// The result's configuration evaluates (exactly) to the reported cost and fits the limit.
void expect_consistent(const Inputs& s, const StageCountResult& r) {
  ASSERT_TRUE(r.found);
  PerfModel pm(s.model, s.db, perf_options(s.options));
  PipelineCost again = pm.evaluate(r.config);
  EXPECT_TRUE(again.legal) << again.reason;
  EXPECT_DOUBLE_EQ(again.iteration_ms, r.cost.iteration_ms);
  EXPECT_EQ(r.config.num_stages(), r.num_stages);
  EXPECT_EQ(r.config.num_gpus(), s.options.num_gpus());
  for (const auto& st : again.stages) EXPECT_LE(st.memory_mb, s.options.memory_limit_mb);
}

TEST(SearchRun, Gpt13bMatchesOrBeatsReference) {
  REQUIRE_MINISET();
  Inputs s = setup("gpt", "1_3B");
  SearchResult r = run_search(s.model, s.db, s.options);  // speed: bench/search_bench.sh
  ASSERT_NE(r.best_result(), nullptr);
  EXPECT_LE(r.best_result()->cost.iteration_ms, 58760.92);
  ASSERT_EQ(r.per_stage_count.size(), 4u);
  // The reference's best per stage count: 145789.96, 93421.90, 67394.46, 58760.92.
  const double reference[4] = {145789.96, 93421.90, 67394.46, 58760.92};
  for (int i = 0; i < 4; ++i) {
    const auto& pc = r.per_stage_count[static_cast<std::size_t>(i)];
    EXPECT_EQ(pc.num_stages, i + 1);
    EXPECT_LE(pc.cost.iteration_ms, reference[i] + 0.005) << pc.num_stages << " stages";
    EXPECT_GT(pc.evaluations, 0);
    expect_consistent(s, pc);
  }
}

TEST(SearchRun, T5MatchesOrBeatsReference) {
  REQUIRE_MINISET();
  Inputs s = setup("t5", "770M");
  SearchResult r = run_search(s.model, s.db, s.options);  // speed: bench/search_bench.sh
  ASSERT_NE(r.best_result(), nullptr);
  EXPECT_LE(r.best_result()->cost.iteration_ms, 33659.50);
  for (const auto& pc : r.per_stage_count) expect_consistent(s, pc);
}

TEST(SearchRun, DeterministicAcrossThreadCounts) {
  REQUIRE_MINISET();
  Inputs s = setup("gpt", "1_3B");
  s.options.threads = 1;
  SearchResult a = run_search(s.model, s.db, s.options);
  s.options.threads = 3;
  SearchResult b = run_search(s.model, s.db, s.options);
  ASSERT_EQ(a.per_stage_count.size(), b.per_stage_count.size());
  for (std::size_t i = 0; i < a.per_stage_count.size(); ++i) {
    EXPECT_EQ(config_to_string(a.per_stage_count[i].config),
              config_to_string(b.per_stage_count[i].config));
    EXPECT_EQ(a.per_stage_count[i].evaluations, b.per_stage_count[i].evaluations);
  }
  EXPECT_EQ(a.best, b.best);
}

TEST(SearchRun, EvaluationBudgetBoundsTheWork) {
  REQUIRE_MINISET();
  Inputs s = setup("gpt", "1_3B");
  s.options.min_stages = 4;
  s.options.max_stages = 4;
  s.options.max_evaluations = 50;
  SearchResult r = run_search(s.model, s.db, s.options);
  ASSERT_EQ(r.per_stage_count.size(), 1u);
  // A stage count stops within one plan's worth of evaluations of its budget.
  EXPECT_LE(r.per_stage_count[0].evaluations, 50 + 4 * 64);
}

TEST(SearchRun, ImpossibleMemoryLimitFindsNothing) {
  REQUIRE_MINISET();
  Inputs s = setup("gpt", "1_3B");
  s.options.memory_limit_mb = 500;
  SearchResult r = run_search(s.model, s.db, s.options);
  EXPECT_EQ(r.best_result(), nullptr);
  for (const auto& pc : r.per_stage_count) EXPECT_FALSE(pc.found);
}

TEST(SearchGrid, ReproducesMegatronBaseline) {
  REQUIRE_MINISET();
  Inputs s = setup("gpt", "1_3B");
  SearchResult r = run_grid(s.model, s.db, s.options);
  ASSERT_NE(r.best_result(), nullptr);
  const auto& best = *r.best_result();
  EXPECT_NEAR(best.cost.iteration_ms, 73654.74, 0.01);
  EXPECT_EQ(best.num_stages, 4);
  EXPECT_EQ(best.config.micro_batch_size, 2);
  // The same configuration as the reference's grid.
  Config golden = read_config(shared_data() / "aceso" / "golden" / "megatron_grid_gpt_small" /
                              "gpt_1_3B_24layers_megatron_est_73654.json");
  EXPECT_EQ(config_to_string(best.config), config_to_string(golden));
  // The search beats the grid.
  SearchResult searched = run_search(s.model, s.db, s.options);
  ASSERT_NE(searched.best_result(), nullptr);
  EXPECT_LT(searched.best_result()->cost.iteration_ms, best.cost.iteration_ms);
}

TEST(SearchOptionsCheck, BadOptionsAreNamed) {
  REQUIRE_MINISET();
  Inputs s = setup("gpt", "1_3B");
  auto bad = [&](auto edit) {
    SearchOptions o = s.options;
    edit(o);
    return error_of([&] { run_search(s.model, s.db, o); });
  };
  EXPECT_CONTAINS(bad([](SearchOptions& o) { o.memory_limit_mb = -1; }), "--memory-limit");
  EXPECT_CONTAINS(bad([](SearchOptions& o) { o.global_batch_size = 0; }), "--global-batch-size");
  EXPECT_CONTAINS(bad([](SearchOptions& o) { o.gpus_per_node = 0; }), "--gpus-per-node");
  EXPECT_CONTAINS(bad([](SearchOptions& o) { o.micro_batch_sizes = {3}; }),
                  "--micro-batch-sizes: none of 3 was profiled");
  EXPECT_CONTAINS(bad([](SearchOptions& o) { o.max_tp = 3; }), "--max-tp");
  EXPECT_CONTAINS(bad([](SearchOptions& o) { o.min_stages = 9; }), "--min-stages 9 exceeds");
}

TEST(SearchOptionsCheck, UnprofiledListedSizeIsANoticeNotAnError) {
  REQUIRE_MINISET();
  Inputs s = setup("gpt", "1_3B");
  s.options.micro_batch_sizes = {1, 2, 4, 8, 3};
  SearchResult r = run_search(s.model, s.db, s.options);
  ASSERT_NE(r.best_result(), nullptr);
  ASSERT_EQ(r.notices.size(), 1u);
  EXPECT_CONTAINS(r.notices[0], "--micro-batch-sizes: 3 was not profiled");
}

TEST(SearchRun, PeakMemoryInBackwardKeepsHeadroomForRecomputation) {
  REQUIRE_MINISET();
  Inputs s = setup("gpt", "1_3B");
  s.options.peak_mem_in_backward_mb = 1500;
  SearchResult r = run_search(s.model, s.db, s.options);
  ASSERT_NE(r.best_result(), nullptr);
  expect_consistent(s, *r.best_result());
  PerfModel pm(s.model, s.db, perf_options(s.options));
  const Config& c = r.best_result()->config;
  const auto views = pm.views(c);
  bool any = false;
  for (std::size_t i = 0; i < views.size(); ++i) {
    std::vector<std::uint8_t> flags(c.stages[i].recompute.size());
    pm.choose_recompute(views[i], c.micro_batch_size, 12000 - 1500, flags.data());
    EXPECT_EQ(flags, c.stages[i].recompute) << "stage " << i;
    for (auto f : flags) any = any || f != 0;
  }
  EXPECT_TRUE(any) << "no stage needed recomputation under the headroom";
}

TEST(SearchRun, TotalGpuTimeSortMetricStillBeatsTheReference) {
  REQUIRE_MINISET();
  Inputs s = setup("gpt", "1_3B");
  s.options.sort_metric = SortMetric::total_gpu_time;
  SearchResult r = run_search(s.model, s.db, s.options);
  ASSERT_NE(r.best_result(), nullptr);
  expect_consistent(s, *r.best_result());
  EXPECT_LE(r.best_result()->cost.iteration_ms, 58760.92);
}

}  // namespace
}  // namespace perseus::search
