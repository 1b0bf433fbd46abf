// `perseus gpu probe`'s measurements against what the fake NVML is configured to do, with
// queries the device does not answer and bad options; it never asks the driver for a change.
#include "perseus/client/gpu_probe.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "fake_nvml_fixture.hpp"
#include "perseus/client/nvml_gpu.hpp"
#include "perseus/wire/protocol.hpp"
#include "test_support.hpp"

namespace {

using perseus::test::CallLog;
using perseus::test::error_of;
using perseus::test::is_mutating_call;
using perseus::test::Nvml;
using perseus::test::probe_fake;

// The probe measures what the fake is configured to do, and asks the driver for no change.
TEST_F(Nvml, ProbeMeasuresTheCounterAndChangesNothing) {
  CallLog log;
  env_.set("FAKE_NVML_DEVICES", "2");
  env_.set("CUDA_VISIBLE_DEVICES", "1");
  env_.set("FAKE_NVML_REFRESH_MS", "50");
  env_.set("FAKE_NVML_READ_MS", "3");
  env_.set("FAKE_NVML_POWER_W", "220");
  perseus::client::GpuProbe p = probe_fake(1.0);
  EXPECT_EQ(p.name, "Fake NVIDIA H100 80GB HBM3");
  EXPECT_EQ(p.driver, "580.159.04");
  EXPECT_EQ(p.uuid, "GPU-00000001-fa4e-4000-8000-000000000001");
  EXPECT_EQ(p.nvml_index, 1);
  EXPECT_EQ(p.cuda_index, 0);
  EXPECT_EQ(p.clocks_mhz, (std::vector<int>{1410, 1395, 1380, 1005}));
  EXPECT_GE(p.counter_changes, 15);
  ASSERT_TRUE(p.refresh.has_value());
  EXPECT_NEAR(p.refresh->mean_s, 0.050, 0.005);
  EXPECT_LE(p.refresh->min_s, p.refresh->mean_s);
  EXPECT_GE(p.refresh->max_s, p.refresh->mean_s);
  EXPECT_GE(p.read_mean_s, 0.8 * 0.003);
  EXPECT_LE(p.read_mean_s, 3.0 * 0.003);
  EXPECT_GE(p.read_max_s, p.read_mean_s);
  EXPECT_NEAR(p.power_mean_w, 220.0, 0.02 * 220.0);
  ASSERT_TRUE(p.counter_power_w.has_value());
  EXPECT_NEAR(*p.counter_power_w, 220.0, 0.02 * 220.0);
  EXPECT_EQ(p.sm_clock_mean_mhz, 1410.0);
  EXPECT_EQ(p.sm_clock_min_mhz, 1410);
  ASSERT_TRUE(p.clock_event_reasons.has_value());
  EXPECT_TRUE(p.clock_event_reasons->empty());  // 220 W, below the 400 W limit
  EXPECT_EQ(p.power_limit_w, 400.0);
  EXPECT_EQ(p.default_power_limit_w, 400.0);

  std::istringstream lines(log.text());
  int reads = 0;
  for (std::string line; std::getline(lines, line);) {
    EXPECT_FALSE(is_mutating_call(line)) << line;
    if (line == "nvmlDeviceGetTotalEnergyConsumption") ++reads;
  }
  EXPECT_EQ(reads, p.counter_reads);
  EXPECT_GT(reads, 100);

  nlohmann::json j = perseus::client::to_json(p);
  EXPECT_EQ(j["uuid"], p.uuid);
  EXPECT_TRUE(p.counter_error.empty());
  EXPECT_TRUE(j["counter_error"].is_null());
  EXPECT_EQ(j["read_cost_s"]["mean"], p.read_mean_s);
  EXPECT_EQ(j["refresh_period_s"]["mean"], p.refresh->mean_s);
  EXPECT_EQ(j["power_w"]["counter_slope"], *p.counter_power_w);
  EXPECT_EQ(j["sm_clocks_mhz"].size(), 4u);
  EXPECT_EQ(j["sm_clock_mhz"]["max"], 1410);
  EXPECT_TRUE(j["clock_event_reasons"].empty());
  EXPECT_EQ(j["power_limit_w"]["enforced"], 400.0);
  EXPECT_EQ(j["power_limit_w"]["default"], 400.0);
}

// A device that does not report its power limit (no power management, some virtual GPUs) is
// still probed; the limit is unknown, with NVML's reason.
TEST_F(Nvml, ProbeGoesOnWithoutAPowerLimit) {
  env_.set("FAKE_NVML_NO_POWER_LIMIT", "1");
  perseus::client::GpuProbe p = probe_fake(0.2);
  EXPECT_FALSE(p.power_limit_w.has_value());
  EXPECT_EQ(p.default_power_limit_w, 400.0);
  EXPECT_EQ(p.power_limit_error, "NVML nvmlDeviceGetEnforcedPowerLimit failed: Not Supported");
  EXPECT_GT(p.counter_reads, 0);
  nlohmann::json j = perseus::client::to_json(p);
  EXPECT_TRUE(j["power_limit_w"]["enforced"].is_null());
  EXPECT_EQ(j["power_limit_w"]["default"], 400.0);
}

// Nor do clock event reasons the device does not report stop the probe.
TEST_F(Nvml, ProbeGoesOnWithoutClockEventReasons) {
  env_.set("FAKE_NVML_NO_CLOCK_REASONS", "1");
  CallLog log;
  perseus::client::GpuProbe p = probe_fake(0.2);
  EXPECT_FALSE(p.clock_event_reasons.has_value());
  EXPECT_EQ(p.reasons_error, "NVML nvmlDeviceGetCurrentClocksEventReasons failed: Not Supported");
  EXPECT_EQ(p.sm_clock_mean_mhz, 1410.0);  // the clock is read all the same
  EXPECT_GT(p.counter_reads, 5);
  // Asked once, not at every poll.
  std::istringstream lines(log.text());
  int asked = 0;
  for (std::string line; std::getline(lines, line);) {
    asked += line == "nvmlDeviceGetCurrentClocksEventReasons" ? 1 : 0;
  }
  EXPECT_EQ(asked, 1);
  EXPECT_TRUE(perseus::client::to_json(p)["clock_event_reasons"].is_null());
}

// Nor does a device without an energy counter (before Volta): its counter fields are unknown,
// with the reason, and the counter is asked once.
TEST_F(Nvml, ProbeGoesOnWithoutAnEnergyCounter) {
  env_.set("FAKE_NVML_NO_ENERGY_COUNTER", "1");
  env_.set("FAKE_NVML_POWER_W", "120");
  CallLog log;
  perseus::client::GpuProbe p = probe_fake(0.2);
  EXPECT_EQ(p.counter_error,
            "this GPU has no energy counter (NVML nvmlDeviceGetTotalEnergyConsumption: Not "
            "Supported, as on GPUs before Volta and some virtual GPUs)");
  EXPECT_EQ(p.counter_reads, 0);
  EXPECT_FALSE(p.refresh.has_value());
  EXPECT_NEAR(p.power_mean_w, 120.0, 1e-9);
  EXPECT_GT(p.power_readings, 5);
  EXPECT_EQ(log.text().find("nvmlDeviceGetTotalEnergyConsumption"),
            log.text().rfind("nvmlDeviceGetTotalEnergyConsumption"));
  nlohmann::json j = perseus::client::to_json(p);
  EXPECT_TRUE(j["read_cost_s"].is_null());
  EXPECT_EQ(j["counter_error"], p.counter_error);
}

TEST_F(Nvml, ProbeWithTooShortADurationReportsNoRefreshPeriod) {
  env_.set("FAKE_NVML_REFRESH_MS", "1000");
  perseus::client::GpuProbe p = probe_fake(0.05);
  EXPECT_EQ(p.counter_changes, 0);
  EXPECT_FALSE(p.refresh.has_value());
  EXPECT_FALSE(p.counter_power_w.has_value());
  nlohmann::json j = perseus::client::to_json(p);
  EXPECT_TRUE(j["refresh_period_s"].is_null());
  EXPECT_TRUE(j["power_w"]["counter_slope"].is_null());
}

// Progress reaches the caller on its own thread (the NVML calls run on another), from 0 to 1.
TEST_F(Nvml, ProbeReportsProgressOnTheCallersThread) {
  perseus::client::ProbeOptions options;
  options.library = FAKE_NVML_LIBRARY;
  options.duration_s = 0.4;
  std::vector<double> done;
  bool elsewhere = false;
  options.progress = [&, caller = std::this_thread::get_id()](double fraction) {
    elsewhere = elsewhere || std::this_thread::get_id() != caller;
    done.push_back(fraction);
  };
  perseus::client::probe_gpu(options);
  EXPECT_FALSE(elsewhere);
  ASSERT_GE(done.size(), 3u);
  EXPECT_TRUE(std::is_sorted(done.begin(), done.end()));
  EXPECT_GT(done.back(), 0.5);
  EXPECT_LE(done.back(), 1.0);
}

// A driver that stops answering (the fake blocks every device call while a file exists) does not
// hold the probe: it throws once `timeout_s` has passed after `duration_s`. In a child process:
// the blocked call is left behind with its NVML session.
TEST_F(Nvml, ProbeGivesUpOnADriverThatDoesNotAnswer) {
  perseus::test::TempDir dir;
  const std::string hang = (dir.path() / "hang").string();
  std::ofstream(hang) << "hang";
  env_.set("FAKE_NVML_HANG_FILE", hang);
  EXPECT_EXIT(
      {
        perseus::client::ProbeOptions options;
        options.library = FAKE_NVML_LIBRARY;
        options.duration_s = 0.1;
        options.timeout_s = 0.3;
        const auto start = std::chrono::steady_clock::now();
        const std::string error = error_of([&] { perseus::client::probe_gpu(options); });
        const std::chrono::duration<double> took = std::chrono::steady_clock::now() - start;
        std::fprintf(stderr, "%s\n", error.c_str());
        std::_Exit(took.count() >= 0.4 && took.count() < 3.0 ? 0 : 1);
      },
      ::testing::ExitedWithCode(0),
      "gpu probe: the GPU driver did not answer: the probe had not finished 0.3 s after its "
      "duration");
}

TEST_F(Nvml, ProbeRejectsBadOptions) {
  EXPECT_CONTAINS(error_of([] { probe_fake(0.0); }),
                  "probe duration must be a number of seconds in (0, 600], got 0");
  perseus::client::ProbeOptions options;
  options.library = FAKE_NVML_LIBRARY;
  options.duration_s = 0.01;
  options.timeout_s = -1.0;
  EXPECT_CONTAINS(error_of([&] { perseus::client::probe_gpu(options); }),
                  "probe timeout must be a positive number of seconds, got -1");
  options.timeout_s = 10.0;
  options.device = 3;
  EXPECT_CONTAINS(error_of([&] { perseus::client::probe_gpu(options); }), "NVML device 3");
}

}  // namespace
