// Choosing a plan from a frontier (plan::FrontierQuery): every choice is a Pareto row of
// evaluated (time, energy), checked by brute force over random rows with ties and duplicates;
// slowdown bounds pick the cheapest row within the bound; the Pareto flags of frontier.csv.
#include "perseus/plan/frontier_query.hpp"

#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "perseus/util/error.hpp"
#include "test_support.hpp"

using perseus::test::error_of;

namespace perseus::plan {
namespace {

// Rows on a coarse grid, so that equal times, equal energies and exact duplicates occur.
std::vector<FrontierRow> random_rows(std::mt19937& rng, std::size_t n) {
  std::uniform_int_distribution<int> time(100, 140), energy(50, 90);
  std::vector<FrontierRow> rows(n);
  for (std::size_t i = 0; i < n; ++i) {
    rows[i] = {i, 0.0, 0.0, time(rng) / 10.0, energy(rng) * 25.0};
  }
  return rows;
}

// Brute force: no other row is at most as slow and as costly and better in one; of exact
// duplicates only the lowest index.
bool dominated(const std::vector<FrontierRow>& rows, std::size_t i) {
  const auto& r = rows[i];
  for (std::size_t j = 0; j < rows.size(); ++j) {
    const auto& o = rows[j];
    bool no_worse =
        o.evaluated_time_s <= r.evaluated_time_s && o.evaluated_energy_j <= r.evaluated_energy_j;
    bool better =
        o.evaluated_time_s < r.evaluated_time_s || o.evaluated_energy_j < r.evaluated_energy_j;
    if (j != i && no_worse && (better || j < i)) return true;
  }
  return false;
}

// The cheapest energy of any row within `deadline` (infinity when none).
double cheapest_within(const std::vector<FrontierRow>& rows, double deadline) {
  double best = std::numeric_limits<double>::infinity();
  for (const auto& r : rows) {
    if (r.evaluated_time_s <= deadline) best = std::min(best, r.evaluated_energy_j);
  }
  return best;
}

TEST(FrontierQuery, ParetoRowsMatchBruteForce) {
  std::mt19937 rng(11);
  for (int trial = 0; trial < 200; ++trial) {
    auto rows = random_rows(rng, 1 + rng() % 60);
    FrontierQuery q(rows, {10.0, 2500.0});
    std::size_t on_front = 0;
    for (std::size_t i = 0; i < rows.size(); ++i) {
      EXPECT_EQ(q.is_pareto(i), !dominated(rows, i)) << trial << " row " << i;
      on_front += q.is_pareto(i);
    }
    ASSERT_EQ(q.pareto().size(), on_front);
    for (std::size_t k = 1; k < q.pareto().size(); ++k) {  // fastest first, energy falling
      EXPECT_LT(rows[q.pareto()[k - 1]].evaluated_time_s, rows[q.pareto()[k]].evaluated_time_s);
      EXPECT_GT(rows[q.pareto()[k - 1]].evaluated_energy_j, rows[q.pareto()[k]].evaluated_energy_j);
    }
  }
}

TEST(FrontierQuery, EveryChoiceIsTheCheapestParetoRowWithinItsBound) {
  std::mt19937 rng(12);
  for (int trial = 0; trial < 100; ++trial) {
    auto rows = random_rows(rng, 1 + rng() % 60);
    const TimeEnergy all_max{10.5, 2600.0};
    FrontierQuery q(rows, all_max);
    for (double deadline = 9.9; deadline < 14.2; deadline += 0.05) {
      double best = cheapest_within(rows, deadline);
      auto got = q.within(deadline);
      ASSERT_EQ(got.has_value(), std::isfinite(best)) << deadline;
      if (!got) continue;
      EXPECT_TRUE(q.is_pareto(*got));
      EXPECT_LE(rows[*got].evaluated_time_s, deadline);
      EXPECT_EQ(rows[*got].evaluated_energy_j, best);
    }
    for (double pct : {0.0, 1.0, 2.0, 5.0, 10.0, 20.0, 35.0}) {
      double deadline = all_max.time_s * (1.0 + pct / 100.0);
      double best = cheapest_within(rows, deadline);
      if (!std::isfinite(best)) {
        EXPECT_CONTAINS(error_of([&] { q.within_slowdown(pct / 100.0); }), "no plan is within");
        continue;
      }
      std::size_t i = q.within_slowdown(pct / 100.0);
      EXPECT_TRUE(q.is_pareto(i));
      EXPECT_EQ(rows[i].evaluated_energy_j, best) << pct;
      EXPECT_LE(q.slowdown(i), pct / 100.0 + 1e-12);
    }
    EXPECT_TRUE(q.is_pareto(q.fastest()));
    EXPECT_TRUE(q.is_pareto(q.min_energy()));
    EXPECT_FALSE(dominated(rows, q.fastest()));
    for (const auto& r : rows) {
      EXPECT_GE(r.evaluated_time_s, rows[q.fastest()].evaluated_time_s);
      EXPECT_GE(r.evaluated_energy_j, rows[q.min_energy()].evaluated_energy_j);
    }
    for (std::size_t i : q.every(0.3)) EXPECT_TRUE(q.is_pareto(i));
  }
}

TEST(FrontierQuery, EveryStepsDownFromTheCheapestRow) {
  std::vector<FrontierRow> rows = {{0, 0, 0, 12.0, 100.0},
                                   {1, 0, 0, 11.0, 150.0},
                                   {2, 0, 0, 11.5, 160.0},  // dominated by row 1
                                   {3, 0, 0, 10.0, 200.0}};
  FrontierQuery q(rows, {10.0, 210.0});
  EXPECT_EQ(q.pareto(), (std::vector<std::size_t>{3, 1, 0}));
  EXPECT_EQ(q.every(1.0), (std::vector<std::size_t>{0, 1, 3}));
  EXPECT_EQ(q.every(100.0), (std::vector<std::size_t>{0}));
  EXPECT_EQ(q.within_time(11.4), 1u);  // row 2 is never chosen
  EXPECT_CONTAINS(error_of([&] { q.within_time(9.0); }),
                  "no plan finishes within 9 s (the fastest takes 10 s)");
  EXPECT_CONTAINS(error_of([&] { q.every(0.0); }), "must be positive");
  EXPECT_EQ(q.describe(1),
            "plan 1: 11.000000 s, 150.00 J; +10.00 % time, -28.57 % energy vs all-max");
  EXPECT_THROW(FrontierQuery({}, {1.0, 1.0}), Error);
}

TEST(FrontierQuery, SlowdownsAsUsersWriteThem) {
  EXPECT_DOUBLE_EQ(parse_slowdown("5%"), 0.05);
  EXPECT_DOUBLE_EQ(parse_slowdown("5"), 0.05);
  EXPECT_DOUBLE_EQ(parse_slowdown("0.5%"), 0.005);
  EXPECT_DOUBLE_EQ(parse_slowdown("0"), 0.0);
  for (const char* bad : {"", "%", "-1%", "five", "5%%", "nan", "inf"}) {
    EXPECT_CONTAINS(error_of([&] { parse_slowdown(bad); }), "is not a percentage >= 0") << bad;
  }
  // A bare number below 1 is likely a fraction (issue 51.6: 0.02 was taken as 0.02 %).
  EXPECT_EQ(error_of([&] { parse_slowdown("0.02"); }),
            "slowdown '0.02' is a percentage, so it would be 0.02 %; if you mean a fraction, "
            "write 2%, else 0.02%");
  EXPECT_DOUBLE_EQ(parse_slowdown("0.02%"), 0.0002);
  EXPECT_DOUBLE_EQ(parse_slowdown("1"), 0.01);
}

}  // namespace
}  // namespace perseus::plan
