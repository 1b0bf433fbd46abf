// Reproduction of the published optimizer's frontiers on the shared reference profiles, with the
// exponential cost model and the published settings: critical-path bounds and predicted energy
// within 0.5% at every reference time (DESIGN section 5, ../shared/data/perseus/).
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <map>

#include "perseus/plan/solver.hpp"
#include "perseus/profile/csv.hpp"
#include "test_support.hpp"

namespace perseus::plan {
namespace {

struct Reference {
  const char* profile;
  const char* frontier;
  double unit;
  double blocking_power;
  long slowest;  // known critical paths in units (0 = not published)
  long fastest;
  std::size_t rows;
};

std::vector<std::pair<double, double>> read_reference(const std::filesystem::path& path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  std::vector<std::pair<double, double>> rows;
  double t = 0, e = 0;
  char comma = 0;
  while (in >> t >> comma >> e) rows.emplace_back(t, e);
  return rows;
}

void check_reproduction(const Reference& ref) {
  auto data = test::shared_data() / "perseus";
  auto prof = profile::read_profile_csv((data / "stage_profiles" / ref.profile).string());
  auto problem =
      PlanProblem::build(prof, schedule::make_1f1b(8, 12),
                         {ref.unit, ref.blocking_power, CostModelKind::kExponential, 1.0});
  Frontier f = solve_frontier(problem);
  if (ref.slowest) {
    EXPECT_EQ(f.slowest_time, ref.slowest);
  }
  if (ref.fastest) {
    EXPECT_EQ(f.fastest_time, ref.fastest);
  }
  std::map<long, double> predicted;
  for (const auto& p : f.points) predicted[p.quant_time] = p.predicted_energy_j;

  auto rows = read_reference(data / "frontiers" / ref.frontier);
  ASSERT_EQ(rows.size(), ref.rows);
  double worst = 0.0;
  for (const auto& [time, energy] : rows) {
    long units = std::lround(time / ref.unit);
    auto it = predicted.find(units);
    ASSERT_NE(it, predicted.end()) << "no plan at " << time << " s";
    double rel = std::abs(it->second - energy) / energy;
    worst = std::max(worst, rel);
    EXPECT_LT(rel, 0.005) << "at " << time << " s: ours " << it->second << " J, reference "
                          << energy << " J";
  }
  std::cout << ref.frontier << ": " << rows.size() << " reference points, " << f.points.size()
            << " plans, worst relative energy difference " << worst * 100 << " %\n";
}

TEST(SolverReference, Gpt3A100TwelveMicrobatches) {
  PERSEUS_REQUIRE_SHARED_DATA();
  check_reproduction({"gpt3-175b+a100_sxm_bf16.csv", "gpt3-175b+a100_sxm_mb12.csv", 0.001, 83.64,
                      3457, 2818, 639});
}

TEST(SolverReference, BloomA40TwelveMicrobatches) {
  PERSEUS_REQUIRE_SHARED_DATA();
  check_reproduction({"bloom+a40_bf16.csv", "bloom+a40_mb12.csv", 0.0001, 70.38, 0, 0, 10517});
}

}  // namespace
}  // namespace perseus::plan
