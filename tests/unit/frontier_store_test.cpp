// The frontier store (frontier.csv, plans.txt, meta.json): round trips, plan selection and
// queries, and the staging rules of write_frontier. Corrupt files: frontier_store_corrupt_test.
#include "perseus/plan/frontier_store.hpp"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "frontier_store_fixture.hpp"
#include "perseus/plan/evaluate.hpp"
#include "perseus/plan/frontier_query.hpp"
#include "perseus/plan/plan_io.hpp"
#include "perseus/plan/problem.hpp"
#include "perseus/plan/solver.hpp"
#include "perseus/profile/gpu_model.hpp"
#include "perseus/schedule/catalog.hpp"
#include "perseus/schedule/schedule.hpp"
#include "perseus/util/error.hpp"
#include "test_support.hpp"

namespace perseus::plan {
namespace {

// Entries of `dir` whose name contains ".partial-" (staging directories left behind).
std::vector<std::string> partial_entries(const fs::path& dir) {
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator(dir)) {
    std::string name = e.path().filename().string();
    if (name.find(".partial-") != std::string::npos) out.push_back(name);
  }
  return out;
}

bool near(double a, double b, double rel = 1e-9) {
  return std::abs(a - b) <= rel * std::max({1.0, std::abs(a), std::abs(b)});
}

// ---------------------------------------------------------------------------------------------
// Frontier store

TEST_F(FrontierStore, RoundTripRowsAndPlans) {
  perseus::test::TempDir tmp;
  fs::path dir = write(tmp);
  for (const char* name : {"frontier.csv", "plans.txt", "meta.json"}) {
    EXPECT_TRUE(fs::is_regular_file(dir / name)) << name;
  }
  EXPECT_EQ(partial_entries(tmp.path()), std::vector<std::string>{});

  StoredFrontier f = read_frontier(dir);
  EXPECT_EQ(f.schedule, "1f1b");
  EXPECT_EQ(f.num_stages, 3);
  EXPECT_EQ(f.num_microbatches, 4);
  EXPECT_EQ(f.unit_time_s, 0.001);
  EXPECT_EQ(f.blocking_power_w, 83.64);
  ASSERT_GT(frontier_->points.size(), 10u);
  ASSERT_EQ(f.rows.size(), frontier_->points.size());
  ASSERT_EQ(f.plans.size(), frontier_->points.size());
  for (std::size_t i = 0; i < f.rows.size(); ++i) {
    const FrontierPoint& p = frontier_->points[i];
    const FrontierRow& r = f.rows[i];
    EXPECT_EQ(r.index, i);
    EXPECT_TRUE(near(r.planned_time_s, static_cast<double>(p.quant_time) * 0.001)) << i;
    EXPECT_TRUE(near(r.predicted_energy_j, p.predicted_energy_j)) << i;
    EXPECT_TRUE(near(r.evaluated_time_s, p.evaluated_time_s)) << i;
    EXPECT_TRUE(near(r.evaluated_energy_j, p.evaluated_energy_j)) << i;
    // The stored clocks are the solver's realized clocks: realize(problem, durations(i)) followed
    // by slack reclamation.
    ASSERT_EQ(f.plans[i], to_frequency_plan(problem_->dag, frontier_->clocks(i))) << "plan " << i;
    // The stored evaluation is the evaluation of the stored clocks.
    Evaluation ev = evaluate(*profile_, problem_->schedule, f.plans[i], 83.64);
    EXPECT_TRUE(near(ev.time_s, r.evaluated_time_s)) << i;
    EXPECT_TRUE(near(ev.energy_j, r.evaluated_energy_j)) << i;
  }
  json meta = json::parse(read_text(dir / "meta.json"));
  EXPECT_EQ(meta["format"], "perseus.frontier/1");
  EXPECT_EQ(meta["profile"], "synthetic a100");
  EXPECT_EQ(meta["num_plans"], frontier_->points.size());
  EXPECT_EQ(meta["all_max"]["time_s"], 1.0);
}

TEST_F(FrontierStore, InMemoryFrontierEqualsTheOneReadBack) {
  perseus::test::TempDir tmp;
  StoredFrontier disk = read_frontier(write(tmp));
  StoredFrontier memory = stored_frontier(*problem_, *frontier_, info().all_max);
  EXPECT_EQ(memory.schedule, disk.schedule);
  EXPECT_EQ(memory.num_stages, disk.num_stages);
  EXPECT_EQ(memory.num_microbatches, disk.num_microbatches);
  EXPECT_EQ(memory.unit_time_s, disk.unit_time_s);
  EXPECT_EQ(memory.blocking_power_w, disk.blocking_power_w);
  EXPECT_EQ(memory.all_max.time_s, disk.all_max.time_s);
  EXPECT_EQ(memory.all_max.energy_j, disk.all_max.energy_j);
  EXPECT_EQ(memory.plans, disk.plans);
  ASSERT_EQ(memory.rows.size(), disk.rows.size());
  for (std::size_t i = 0; i < disk.rows.size(); ++i) {
    // The CSV keeps 10 significant digits.
    EXPECT_EQ(memory.rows[i].index, disk.rows[i].index);
    EXPECT_NEAR(memory.rows[i].evaluated_time_s, disk.rows[i].evaluated_time_s, 1e-9);
    EXPECT_NEAR(memory.rows[i].evaluated_energy_j, disk.rows[i].evaluated_energy_j,
                1e-9 * disk.rows[i].evaluated_energy_j);
    EXPECT_NEAR(memory.rows[i].planned_time_s, disk.rows[i].planned_time_s, 1e-12);
  }
}

TEST_F(FrontierStore, StoredPlanExportsAsJsonAndList) {
  perseus::test::TempDir tmp;
  StoredFrontier f = read_frontier(write(tmp));
  const std::size_t i = f.rows.size() / 2;
  Plan p = f.plan(i);
  EXPECT_EQ(p.schedule, "1f1b");
  EXPECT_EQ(p.num_stages, 3);
  EXPECT_EQ(p.num_microbatches, 4);
  ASSERT_TRUE(p.evaluated.has_value());
  EXPECT_EQ(p.evaluated->time_s, f.rows[i].evaluated_time_s);
  ASSERT_TRUE(p.predicted.has_value());
  EXPECT_EQ(p.predicted->time_s, f.rows[i].planned_time_s);
  Plan q = parse_plan(plan_to_json(p, problem_->schedule), "plan.json");
  EXPECT_EQ(q.frequencies, f.plans[i]);
  EXPECT_EQ(q.evaluated->energy_j, f.rows[i].evaluated_energy_j);
  EXPECT_EQ(parse_plan(plan_to_python_list(p.frequencies, "c"), "x.py").frequencies, f.plans[i]);
  EXPECT_THROW(f.plan(f.rows.size()), std::out_of_range);
}

TEST_F(FrontierStore, ReplacesAnEarlierFrontierAndFillsAnEmptyDirectory) {
  perseus::test::TempDir tmp;
  fs::path dir = write(tmp);
  write_text(dir / "frontier.csv", "stale");
  write_frontier(dir, *problem_, *frontier_, info());
  EXPECT_EQ(read_frontier(dir).rows.size(), frontier_->points.size());

  fs::path empty = tmp.path() / "empty";
  fs::create_directory(empty);
  write_frontier(empty, *problem_, *frontier_, info());
  EXPECT_EQ(read_frontier(empty).rows.size(), frontier_->points.size());
  EXPECT_EQ(partial_entries(tmp.path()), std::vector<std::string>{});
}

TEST_F(FrontierStore, RefusesToReplaceAnUnrelatedDirectory) {
  perseus::test::TempDir tmp;
  fs::path dir = tmp.path() / "results";
  fs::create_directory(dir);
  write_text(dir / "notes.txt", "keep me");
  std::string msg = error_of([&] { write_frontier(dir, *problem_, *frontier_, info()); });
  EXPECT_CONTAINS(msg, dir.string());
  EXPECT_CONTAINS(msg, "meta.json");
  EXPECT_EQ(read_text(dir / "notes.txt"), "keep me");
  EXPECT_FALSE(fs::exists(dir / "frontier.csv"));
  EXPECT_EQ(partial_entries(tmp.path()), std::vector<std::string>{});

  // A regular file in the way is not replaced either.
  fs::path file = tmp.path() / "afile";
  write_text(file, "x");
  EXPECT_CONTAINS(error_of([&] { write_frontier(file, *problem_, *frontier_, info()); }),
                  file.string());
  EXPECT_EQ(read_text(file), "x");
  EXPECT_EQ(partial_entries(tmp.path()), std::vector<std::string>{});
}

TEST_F(FrontierStore, SelectByIndex) {
  perseus::test::TempDir tmp;
  StoredFrontier f = read_frontier(write(tmp));
  const long n = static_cast<long>(f.rows.size());
  EXPECT_EQ(select_by_index(f, 0), 0u);
  EXPECT_EQ(select_by_index(f, n - 1), static_cast<std::size_t>(n - 1));
  for (long bad : {-1L, n, n + 100}) {
    std::string msg = error_of([&] { select_by_index(f, bad); });
    EXPECT_CONTAINS(msg, "plan index " + std::to_string(bad) + " out of range");
    EXPECT_CONTAINS(msg, "0.." + std::to_string(n - 1));
  }
}

TEST_F(FrontierStore, QueriesOnASolvedFrontierChooseTheCheapestParetoRow) {
  perseus::test::TempDir tmp;
  StoredFrontier f = read_frontier(write(tmp));
  FrontierQuery q(f);
  const double fastest = f.rows[q.fastest()].evaluated_time_s;
  const double slowest = f.rows[q.min_energy()].evaluated_time_s;
  std::vector<double> targets = {fastest, slowest, slowest * 2.0};
  for (int k = 1; k < 20; ++k) targets.push_back(fastest + (slowest - fastest) * k / 20.0);
  for (const auto& r : f.rows) targets.push_back(r.evaluated_time_s);
  for (double target : targets) {
    std::size_t i = q.within_time(target);
    EXPECT_TRUE(q.is_pareto(i));
    EXPECT_LE(f.rows[i].evaluated_time_s, target);
    for (const auto& r : f.rows) {
      if (r.evaluated_time_s <= target) {
        EXPECT_LE(f.rows[i].evaluated_energy_j, r.evaluated_energy_j)
            << "target " << target << ": plan " << r.index << " is cheaper than " << i;
      }
    }
  }
  std::string msg = error_of([&] { q.within_time(fastest * 0.99); });
  EXPECT_CONTAINS(msg, "no plan finishes within");
  EXPECT_CONTAINS(msg, "the fastest takes");
  // Sampling: distinct Pareto rows in decreasing time, the cheapest first.
  for (double every : {(slowest - fastest) / 5.0, 0.01, 0.001, slowest * 10.0}) {
    std::vector<std::size_t> picks = q.every(every);
    ASSERT_FALSE(picks.empty()) << every;
    EXPECT_EQ(picks.front(), q.min_energy());
    for (std::size_t k = 1; k < picks.size(); ++k) {
      EXPECT_LT(f.rows[picks[k]].evaluated_time_s, f.rows[picks[k - 1]].evaluated_time_s);
    }
  }
  EXPECT_EQ(q.every(slowest * 10.0).size(), 1u);
}

TEST_F(FrontierStore, TheParetoColumnMarksTheQuerysRows) {
  perseus::test::TempDir tmp;
  fs::path dir = write(tmp);
  StoredFrontier f = read_frontier(dir);
  FrontierQuery q(f);
  std::vector<std::string> lines = lines_of(read_text(dir / "frontier.csv"));
  ASSERT_EQ(lines.size(), f.rows.size() + 1);
  EXPECT_EQ(lines[0],
            "index,planned_time_s,predicted_energy_j,evaluated_time_s,evaluated_energy_j,pareto");
  std::size_t marked = 0;
  for (std::size_t i = 0; i < f.rows.size(); ++i) {
    char flag = lines[i + 1].back();
    EXPECT_EQ(flag == '1', q.is_pareto(i)) << lines[i + 1];
    marked += flag == '1';
  }
  EXPECT_EQ(marked, q.pareto().size());
  EXPECT_LT(marked, f.rows.size());  // the solver's rows include dominated ones
  // A frontier written before the column existed still reads.
  std::string old = "index,planned_time_s,predicted_energy_j,evaluated_time_s,evaluated_energy_j\n";
  for (std::size_t i = 1; i < lines.size(); ++i) {
    old += lines[i].substr(0, lines[i].rfind(',')) + "\n";
  }
  write_text(dir / "frontier.csv", old);
  EXPECT_EQ(read_frontier(dir).rows.size(), f.rows.size());
}

}  // namespace
}  // namespace perseus::plan
