// Built-in GPU models and synthesized profiles: clocks, calibration against the A100 reference,
// curve shapes, stage weights, seeded noise and CSV round trips.
#include <algorithm>
#include <fstream>
#include <sstream>
#include <string>

#include "perseus/profile/csv.hpp"
#include "perseus/profile/gpu_model.hpp"
#include "perseus/util/error.hpp"
#include "test_support.hpp"

namespace perseus::profile {
namespace {

std::string csv_text(const Profile& p) {
  std::ostringstream out;
  write_profile_csv(p, out);
  return out.str();
}

TEST(GpuModel, ClockRanges) {
  std::vector<int> a100 = gpu_model("a100").frequencies();
  ASSERT_EQ(a100.size(), 38u);
  EXPECT_EQ(a100.front(), 1410);
  EXPECT_EQ(a100.back(), 855);
  EXPECT_EQ(a100[1], 1395);
  EXPECT_EQ(gpu_model("a40").frequencies().size(), 60u);
  EXPECT_EQ(gpu_model("h100").frequencies().size(), 66u);
  EXPECT_EQ(gpu_model("h100").frequencies().front(), 1980);
  EXPECT_EQ(gpu_model("h100").frequencies().back(), 1005);
}

TEST(GpuModel, BlockingPowerOfTheReferenceData) {
  EXPECT_EQ(gpu_model("a100").blocking_power_w, 83.64);
  EXPECT_EQ(gpu_model("a40").blocking_power_w, 70.38);
  EXPECT_GT(gpu_model("h100").blocking_power_w, gpu_model("a100").blocking_power_w);
}

TEST(GpuModel, PowerRisesWithClockAndActivity) {
  const GpuModel& gpu = gpu_model("a100");
  EXPECT_NEAR(gpu.power(1410, 0.9), 475.0, 1.0);  // reference: 23.8 J / 0.050 s
  EXPECT_LT(gpu.power(1200, 0.9), gpu.power(1215, 0.9));
  EXPECT_LT(gpu.power(1200, 0.9), gpu.power(1200, 0.92));
  EXPECT_GT(gpu.power(855, 0.9), gpu.static_power_w);
}

TEST(GpuModel, UnknownNameListsKnownOnes) {
  EXPECT_EQ(gpu_model_names(), (std::vector<std::string>{"a100", "h100", "a40"}));
  try {
    gpu_model("v100");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()), "unknown GPU model 'v100' (known: a100, h100, a40)");
  }
}

TEST(Synth, DefaultModelWeightsFirstAndLastStages) {
  ModelDescription m = default_model(4);
  EXPECT_EQ(m.num_stages, 4);
  EXPECT_EQ(m.stage_work, (std::vector<double>{1.08, 1.0, 1.0, 1.15}));
  EXPECT_EQ(default_model(1, 0.1, 0.2).stage_work, (std::vector<double>{1.0 + 0.1 + 0.2}));
  EXPECT_THROW(default_model(0), Error);
}

TEST(Synth, MatchesTheA100ReferenceAtMaxClock) {
  Profile p = synthesize_profile(gpu_model("a100"), default_model(3));
  const Measurement& fwd = p.at(1, "forward", 1410);
  const Measurement& bwd = p.at(1, "backward", 1410);
  EXPECT_DOUBLE_EQ(fwd.time_s, 0.05);
  EXPECT_NEAR(fwd.energy_j, 23.8, 0.3);
  EXPECT_NEAR(bwd.time_s, 0.093, 0.001);
  EXPECT_NEAR(bwd.energy_j, 44.6, 0.5);
  EXPECT_EQ(p.num_stages(), 3);
  EXPECT_EQ(p.rows(2, "backward").size(), 38u);
  EXPECT_NO_THROW(p.validate());
}

TEST(Synth, TimeGrowsAsTheClockDrops) {
  for (const auto& name : gpu_model_names()) {
    Profile p = synthesize_profile(gpu_model(name), default_model(2));
    for (const auto& [key, rows] : p.all()) {
      for (size_t i = 1; i < rows.size(); ++i) {
        ASSERT_LT(rows[i].frequency_mhz, rows[i - 1].frequency_mhz);
        EXPECT_GT(rows[i].time_s, rows[i - 1].time_s) << name << " " << rows[i].frequency_mhz;
      }
    }
  }
}

TEST(Synth, EnergyHasAnInteriorMinimum) {
  for (const auto& name : gpu_model_names()) {
    Profile p = synthesize_profile(gpu_model(name), default_model(2));
    for (const auto& [key, rows] : p.all()) {
      auto lowest = std::min_element(rows.begin(), rows.end(), [](const auto& a, const auto& b) {
        return a.energy_j < b.energy_j;
      });
      EXPECT_NE(lowest, rows.begin()) << name << " " << key.second;
      EXPECT_NE(lowest, rows.end() - 1) << name << " " << key.second;
    }
  }
  // A100: the minimum lies well inside the range, and the lowest clock costs a few % more.
  Profile a100 = synthesize_profile(gpu_model("a100"), default_model(1));
  const auto& rows = a100.rows(0, "forward");
  auto lowest = std::min_element(rows.begin(), rows.end(), [](const auto& a, const auto& b) {
    return a.energy_j < b.energy_j;
  });
  EXPECT_GE(lowest->frequency_mhz, 900);
  EXPECT_LE(lowest->frequency_mhz, 1100);
  EXPECT_GT(rows.back().energy_j, 1.02 * lowest->energy_j);
  EXPECT_LT(rows.back().energy_j, rows.front().energy_j);
}

TEST(Synth, FirstAndLastStagesAreHeavier) {
  Profile p = synthesize_profile(gpu_model("h100"), default_model(4));
  for (const char* instruction : {"forward", "backward"}) {
    double middle = p.at(1, instruction, 1500).time_s;
    EXPECT_EQ(p.at(2, instruction, 1500).time_s, middle);
    EXPECT_GT(p.at(0, instruction, 1500).time_s, middle);
    EXPECT_GT(p.at(3, instruction, 1500).time_s, p.at(0, instruction, 1500).time_s);
  }
}

TEST(Synth, CustomStageWorkAndForwardTime) {
  ModelDescription m = default_model(2);
  m.stage_work = {1.0, 2.0};
  m.forward_time_s = 0.1;
  Profile p = synthesize_profile(gpu_model("a40"), m);
  EXPECT_DOUBLE_EQ(p.at(0, "forward", 1740).time_s, 0.1);
  EXPECT_DOUBLE_EQ(p.at(1, "forward", 1740).time_s, 0.2);
}

TEST(Synth, NoiseIsDeterministicForASeed) {
  const GpuModel& gpu = gpu_model("a100");
  std::string a = csv_text(synthesize_profile(gpu, default_model(4), 0.02, 7));
  EXPECT_EQ(a, csv_text(synthesize_profile(gpu, default_model(4), 0.02, 7)));
  EXPECT_NE(a, csv_text(synthesize_profile(gpu, default_model(4), 0.02, 8)));
  EXPECT_NE(a, csv_text(synthesize_profile(gpu, default_model(4))));
  // Without noise the seed does not matter.
  EXPECT_EQ(csv_text(synthesize_profile(gpu, default_model(4), 0.0, 1)),
            csv_text(synthesize_profile(gpu, default_model(4), 0.0, 99)));
}

TEST(Synth, NoisyProfileStaysCloseToTheExactOne) {
  const GpuModel& gpu = gpu_model("a100");
  Profile exact = synthesize_profile(gpu, default_model(2));
  Profile noisy = synthesize_profile(gpu, default_model(2), 0.01, 3);
  for (const auto& [key, rows] : exact.all()) {
    for (const Measurement& m : rows) {
      const Measurement& n = noisy.at(key.first, key.second, m.frequency_mhz);
      EXPECT_NEAR(n.time_s / m.time_s, 1.0, 0.06);
      EXPECT_NEAR(n.energy_j / m.energy_j, 1.0, 0.1);
    }
  }
}

TEST(Synth, WrittenCsvReadsBackIdentically) {
  Profile p = synthesize_profile(gpu_model("a100"), default_model(4), 0.01, 5);
  test::TempDir dir;
  std::string path = (dir.path() / "synth.csv").string();
  std::ofstream(path) << csv_text(p);
  Profile back = read_profile_csv(path);
  EXPECT_EQ(back.num_stages(), 4);
  EXPECT_EQ(csv_text(back), csv_text(p));
}

TEST(Synth, RejectsInconsistentModels) {
  const GpuModel& gpu = gpu_model("a100");
  ModelDescription m = default_model(3);
  m.stage_work = {1.0, 1.0};
  EXPECT_THROW(synthesize_profile(gpu, m), Error);
  m = default_model(3);
  m.stage_work[1] = 0.0;
  EXPECT_THROW(synthesize_profile(gpu, m), Error);
  m = default_model(3);
  m.forward_time_s = -1;
  EXPECT_THROW(synthesize_profile(gpu, m), Error);
  EXPECT_THROW(synthesize_profile(gpu, default_model(3), -0.1), Error);
  GpuModel no_step = gpu;
  no_step.step_mhz = 0;
  EXPECT_THROW(synthesize_profile(no_step, default_model(3)), Error);
}

}  // namespace
}  // namespace perseus::profile
