// The per-stage fold of the ranks' reports that the scheduler observes.
#include "perseus/server/stage_aggregate.hpp"

#include <gtest/gtest.h>

#include <cmath>

namespace perseus::server {
namespace {

wire::ProfilingResult report(std::vector<double> time, std::vector<double> energy, double scale) {
  wire::ProfilingResult r;
  r.iter_time = std::move(time);
  r.iter_energy = std::move(energy);
  r.time_breakdown["forward1"] = {{0.010 * scale, 0.011 * scale}, {0.012 * scale}};
  r.energy_breakdown["forward1"] = {{2.0 * scale, 2.5 * scale}, {3.0 * scale}};
  return r;
}

TEST(StageAggregate, SlowestTimeSummedEnergyShortestLength) {
  auto a = report({1.0, 2.0, 3.0}, {10.0, 20.0, 30.0}, 1.0);
  auto b = report({1.5, 1.0}, {11.0, 21.0}, 2.0);
  StageResult s = aggregate_stage({&a, &b});
  EXPECT_EQ(s.iter_time, (std::vector<double>{1.5, 2.0}));  // b ran two iterations
  EXPECT_EQ(s.iter_energy, (std::vector<double>{21.0, 41.0}));
  ASSERT_EQ(s.time_breakdown.at("forward1").size(), 2u);
  EXPECT_EQ(s.time_breakdown.at("forward1")[0], (std::vector<double>{0.020, 0.022}));
  EXPECT_EQ(s.energy_breakdown.at("forward1")[1], (std::vector<double>{9.0}));
}

TEST(StageAggregate, InstructionMissingOnOneRankHasNoIterations) {
  auto a = report({1.0}, {10.0}, 1.0);
  auto b = report({1.0}, {10.0}, 1.0);
  a.energy_breakdown["backward1"] = {{4.0}};
  StageResult s = aggregate_stage({&a, &b});
  EXPECT_TRUE(s.energy_breakdown.at("backward1").empty());
  EXPECT_EQ(s.energy_breakdown.at("forward1")[0], (std::vector<double>{4.0, 5.0}));
}

TEST(StageAggregate, StandardErrorsAddInQuadratureOnlyWhereEveryRankHasOne) {
  auto a = report({1.0}, {10.0}, 1.0);
  auto b = report({1.0}, {10.0}, 1.0);
  a.energy_stderr = {{"forward1", 0.3}, {"backward1", 0.1}};
  b.energy_stderr = {{"forward1", 0.4}};  // e.g. a Zeus client reports none for backward1
  StageResult s = aggregate_stage({&a, &b});
  ASSERT_EQ(s.energy_stderr.size(), 1u);
  EXPECT_NEAR(s.energy_stderr.at("forward1"), 0.5, 1e-12);
}

// One pooling errs alike on every rank of a stage: their pooling errors add up.
TEST(StageAggregate, PoolingErrorsAddUpOnlyWhereEveryRankHasOne) {
  auto a = report({1.0}, {10.0}, 1.0);
  auto b = report({1.0}, {10.0}, 1.0);
  a.energy_pooling_error = {{"forward1", 0.3}, {"backward1", 0.1}};
  b.energy_pooling_error = {{"forward1", 0.4}};
  StageResult s = aggregate_stage({&a, &b});
  ASSERT_EQ(s.energy_pooling_error.size(), 1u);
  EXPECT_NEAR(s.energy_pooling_error.at("forward1"), 0.7, 1e-12);
}

TEST(StageAggregate, ClockReadingsPoolOverTheRanksThatAllReportedOne) {
  auto a = report({1.0}, {10.0}, 1.0);
  auto b = report({1.0}, {10.0}, 1.0);
  a.clocks["forward1"] = {10, 1200.0, 1.0};
  b.clocks["forward1"] = {30, 1400.0, 0.0};
  a.clocks["backward1"] = {5, 1005.0, 0.0};  // b read no clock for it (e.g. a simulated GPU)
  StageResult s = aggregate_stage({&a, &b});
  ASSERT_EQ(s.clocks.size(), 1u);
  const ClockObservation& c = s.clocks.at("forward1");
  EXPECT_EQ(c.samples, 40);
  EXPECT_DOUBLE_EQ(c.mean_mhz, 1350.0);  // (10 x 1200 + 30 x 1400) / 40
  EXPECT_DOUBLE_EQ(c.held_down_share, 0.25);
}

TEST(StageAggregate, ARankWhoseCounterDidNotChangeLeavesTheStageUnmeasured) {
  auto a = report({1.0}, {10.0}, 1.0);
  auto b = report({1.0}, {0.0}, 1.0);
  EXPECT_TRUE(aggregate_stage({&a, &b}).unmeasured_ranks.empty());
  a.rank = 4;
  a.energy_measured = false;
  const StageResult s = aggregate_stage({&a, &b});
  EXPECT_EQ(s.unmeasured_ranks, std::vector<int>{4});
}

TEST(StageAggregate, OneRankIsItsOwnResult) {
  auto a = report({1.0, 2.0}, {10.0, 20.0}, 1.0);
  a.energy_stderr = {{"forward1", 0.25}};
  StageResult s = aggregate_stage({&a});
  EXPECT_EQ(s.iter_time, a.iter_time);
  EXPECT_EQ(s.energy_breakdown, a.energy_breakdown);
  EXPECT_DOUBLE_EQ(s.energy_stderr.at("forward1"), 0.25);
}

}  // namespace
}  // namespace perseus::server
