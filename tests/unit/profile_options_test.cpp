// Pareto filtering, time quantization (CPython `//` semantics), effective energy and realize(),
// on hand-made cases and on the shared GPT-3 A100 profile.
#include <algorithm>
#include <cmath>
#include <vector>

#include "perseus/profile/csv.hpp"
#include "perseus/profile/options.hpp"
#include "perseus/util/error.hpp"
#include "test_support.hpp"

namespace perseus::profile {
namespace {

std::vector<int> clocks(const OptionSet& set) {
  std::vector<int> out;
  for (const auto& o : set.options) out.push_back(o.frequency_mhz);
  return out;
}

std::vector<long> quant_times(const OptionSet& set) {
  std::vector<long> out;
  for (const auto& o : set.options) out.push_back(o.quant_time);
  return out;
}

TEST(OptionsFloordiv, MatchesCPython) {
  EXPECT_EQ(python_floordiv(0.3, 0.1), 2.0);
  EXPECT_EQ(python_floordiv(1.0, 0.1), 9.0);  // std::floor(1.0 / 0.1) is 10
  EXPECT_EQ(python_floordiv(0.7, 0.1), 6.0);
  EXPECT_EQ(python_floordiv(0.1, 0.001), 100.0);
  EXPECT_EQ(python_floordiv(0.05016166687011708, 0.001), 50.0);
  EXPECT_EQ(python_floordiv(2.0, 0.5), 4.0);
  EXPECT_EQ(python_floordiv(-7.0, 2.0), -4.0);
  EXPECT_EQ(python_floordiv(7.0, -2.0), -4.0);
  EXPECT_EQ(python_floordiv(-1e-20, 1.0), -1.0);
}

TEST(OptionsFloordiv, KeepsTheSignOfZero) {
  EXPECT_EQ(python_floordiv(1e-20, 1.0), 0.0);
  EXPECT_FALSE(std::signbit(python_floordiv(0.0, 1.0)));
  EXPECT_TRUE(std::signbit(python_floordiv(-0.0, 1.0)));
}

TEST(OptionsPareto, DropsOptionsBothSlowerAndCostlier) {
  // 900 MHz is slower and costlier than 1100 MHz; 1000 MHz ties 1100 MHz in energy and stays.
  std::vector<Measurement> rows = {
      {1400, 1.0, 10.0, 0}, {1100, 2.0, 5.0, 0}, {1000, 2.5, 5.0, 0}, {900, 3.0, 6.0, 0}};
  OptionSet set = make_option_set(rows, 0.5, 0.0);
  EXPECT_EQ(clocks(set), (std::vector<int>{1000, 1100, 1400}));
  EXPECT_EQ(quant_times(set), (std::vector<long>{5, 4, 2}));
}

TEST(OptionsQuantization, EnergyTieKeepsTheSlowerOptionLikeTheReference) {
  // Both quantize to 2 units with equal energy; the reference's stable sorts keep the slower.
  std::vector<Measurement> rows = {{1400, 1.0, 10.0, 0}, {1100, 2.0, 5.0, 0}, {1000, 2.5, 5.0, 0}};
  EXPECT_EQ(clocks(make_option_set(rows, 1.0, 0.0)), (std::vector<int>{1000, 1400}));
}

TEST(OptionsPareto, NoiseFactorKeepsNearOptimalOptions) {
  std::vector<Measurement> rows = {{1400, 1.0, 10.0, 0}, {1100, 2.0, 5.0, 0}, {900, 3.0, 6.0, 0}};
  EXPECT_EQ(clocks(make_option_set(rows, 1.0, 0.0, 1.0)), (std::vector<int>{1100, 1400}));
  // 5 * 1.25 = 6.25 is not below 6: 900 MHz is within the noise and stays.
  EXPECT_EQ(clocks(make_option_set(rows, 1.0, 0.0, 1.25)), (std::vector<int>{900, 1100, 1400}));
  // 5 * 1.1 = 5.5 < 6: still dominated.
  EXPECT_EQ(clocks(make_option_set(rows, 1.0, 0.0, 1.1)), (std::vector<int>{1100, 1400}));
}

TEST(OptionsQuantization, KeepsLargestEnergyPerQuantTimeSlowestFirst) {
  // 2.2 s and 2.7 s both quantize to 2 units; the costlier (5 J, 2.2 s) is kept.
  std::vector<Measurement> rows = {
      {1400, 1.5, 9.0, 0}, {1200, 2.2, 5.0, 0}, {1000, 2.7, 4.0, 0}, {800, 3.1, 3.5, 0}};
  OptionSet set = make_option_set(rows, 1.0, 0.0);
  EXPECT_EQ(clocks(set), (std::vector<int>{800, 1200, 1400}));
  EXPECT_EQ(quant_times(set), (std::vector<long>{3, 2, 1}));
  EXPECT_EQ(set.max_duration(), 3);
  EXPECT_EQ(set.min_duration(), 1);
  EXPECT_EQ(set.options[1].time_s, 2.2);
  EXPECT_EQ(set.options[1].energy_j, 5.0);
}

TEST(OptionsQuantization, UsesPythonFloorDivision) {
  // 1.0 / 0.1 rounds to 10.0 but CPython's 1.0 // 0.1 is 9.0.
  OptionSet set = make_option_set({{1000, 1.0, 3.0, 0}}, 0.1, 0.0);
  EXPECT_EQ(set.max_duration(), 9);
}

TEST(OptionsCost, IsEffectiveEnergyOfQuantizedTime) {
  std::vector<Measurement> rows = {{1400, 0.0509, 24.0, 0}, {1000, 0.0625, 18.0, 0}};
  OptionSet set = make_option_set(rows, 0.001, 80.0);
  ASSERT_EQ(set.options.size(), 2u);
  EXPECT_EQ(set.options[0].quant_time, 62);
  EXPECT_DOUBLE_EQ(set.options[0].cost, 18.0 - 80.0 * 0.062);
  EXPECT_EQ(set.options[1].quant_time, 50);
  EXPECT_DOUBLE_EQ(set.options[1].cost, 24.0 - 80.0 * 0.050);
}

TEST(OptionsRealize, PicksSlowestOptionWithinDuration) {
  std::vector<Measurement> rows = {{1400, 1.0, 9.0, 0}, {1100, 3.0, 6.0, 0}, {800, 5.0, 4.0, 0}};
  OptionSet set = make_option_set(rows, 1.0, 0.0);
  EXPECT_EQ(set.realize(9).frequency_mhz, 800);
  EXPECT_EQ(set.realize(5).frequency_mhz, 800);
  EXPECT_EQ(set.realize(4).frequency_mhz, 1100);
  EXPECT_EQ(set.realize(3).frequency_mhz, 1100);
  EXPECT_EQ(set.realize(2).frequency_mhz, 1400);
  EXPECT_EQ(set.realize(0).frequency_mhz, 1400);  // faster than possible: the fastest option
}

TEST(OptionsErrors, RejectsBadInputs) {
  std::vector<Measurement> rows = {{1400, 1.0, 9.0, 0}};
  EXPECT_THROW(make_option_set({}, 0.001, 80.0), Error);
  EXPECT_THROW(make_option_set(rows, 0.0, 80.0), Error);
  EXPECT_THROW(make_option_set(rows, -0.001, 80.0), Error);
  EXPECT_THROW(make_option_set(rows, 0.001, 80.0, 0.9), Error);
  EXPECT_NO_THROW(make_option_set(rows, 0.001, 80.0, 1.0));
}

// Shared GPT-3 A100 profile, 1 ms unit, 83.64 W blocking power (the reference frontier's inputs).
class OptionsReference : public ::testing::Test {
 protected:
  void SetUp() override {
    PERSEUS_REQUIRE_SHARED_DATA();
    profile_ = read_profile_csv(
        (test::shared_data() / "perseus/stage_profiles/gpt3-175b+a100_sxm_bf16.csv").string());
  }

  // Checks the rules independently of make_option_set's implementation.
  void expect_consistent(int stage, const char* instruction, const OptionSet& set) const {
    const auto& rows = profile_.rows(stage, instruction);
    auto by_energy = [](const Measurement& a, const Measurement& b) {
      return a.energy_j < b.energy_j;
    };
    auto by_time = [](const Measurement& a, const Measurement& b) { return a.time_s < b.time_s; };
    // The slowest Pareto option is the cheapest row; the fastest is the fastest row.
    const Measurement& cheapest = *std::min_element(rows.begin(), rows.end(), by_energy);
    const Measurement& fastest = *std::min_element(rows.begin(), rows.end(), by_time);
    EXPECT_EQ(set.max_duration(), static_cast<long>(std::floor(cheapest.time_s / 0.001)));
    EXPECT_EQ(set.min_duration(), static_cast<long>(std::floor(fastest.time_s / 0.001)));
    for (size_t i = 0; i < set.options.size(); ++i) {
      const Option& o = set.options[i];
      const Measurement& m = profile_.at(stage, instruction, o.frequency_mhz);
      EXPECT_EQ(o.time_s, m.time_s);
      EXPECT_EQ(o.energy_j, m.energy_j);
      EXPECT_EQ(o.cost, m.energy_j - 83.64 * static_cast<double>(o.quant_time) * 0.001);
      if (i > 0) {
        EXPECT_LT(o.quant_time, set.options[i - 1].quant_time);
      }
      for (const Measurement& other : rows) {
        EXPECT_FALSE(other.time_s < m.time_s && other.energy_j < m.energy_j)
            << o.frequency_mhz << " MHz is dominated by " << other.frequency_mhz << " MHz";
      }
    }
  }

  Profile profile_;
};

TEST_F(OptionsReference, Stage0Forward) {
  OptionSet set = make_option_set(profile_.rows(0, "forward"), 0.001, 83.64);
  expect_consistent(0, "forward", set);
  EXPECT_EQ(clocks(set), (std::vector<int>{1080, 1095, 1110, 1125, 1140, 1170, 1200, 1215, 1245,
                                           1260, 1290, 1320, 1410}));
  EXPECT_EQ(set.max_duration(), 62);
  EXPECT_EQ(set.min_duration(), 50);
  EXPECT_EQ(set.options.front().cost, 12.327408000000453);  // CPython's value, bit for bit
  EXPECT_EQ(set.realize(50).frequency_mhz, 1410);
}

TEST_F(OptionsReference, Stage7Backward) {
  OptionSet set = make_option_set(profile_.rows(7, "backward"), 0.001, 83.64);
  expect_consistent(7, "backward", set);
  EXPECT_EQ(set.options.size(), 20u);
  EXPECT_EQ(set.max_duration(), 120);
  EXPECT_EQ(set.min_duration(), 98);
  EXPECT_EQ(set.options.front().cost, 23.597186666666808);
  EXPECT_EQ(set.options.back().cost, 38.20928199999971);
  EXPECT_EQ(set.realize(119).frequency_mhz, 1095);  // no option at 119 units: next faster
}

}  // namespace
}  // namespace perseus::profile
