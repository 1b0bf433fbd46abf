// The NVML backend through the real dlopen path, against the fake libnvidia-ml.so.1 built with
// the tests (tests/fake_nvml): it records every call, so the test checks what the backend asked
// the driver to do, including that it restores the default clock and power limit on exit and
// that its read-only queries change nothing. CUDA_VISIBLE_DEVICES, the observe-only client and
// the probe have their own files (cuda_devices_test, nvml_client_test, gpu_probe_test).
#include "perseus/client/nvml_gpu.hpp"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <chrono>
#include <csignal>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <string>
#include <thread>

#include "fake_nvml_fixture.hpp"
#include "perseus/client/gpu_probe.hpp"
#include "perseus/client/nvml_restore.hpp"
#include "test_support.hpp"

namespace {

using perseus::client::NvmlGpu;
using perseus::test::CallLog;
using perseus::test::error_of;
using perseus::test::is_mutating_call;
using perseus::test::Nvml;

TEST_F(Nvml, ListsClocksAtTheTopMemoryClockHighestFirst) {
  NvmlGpu gpu(0, FAKE_NVML_LIBRARY);
  EXPECT_EQ(gpu.supported_clocks(), (std::vector<int>{1410, 1395, 1380, 1005}));
}

TEST_F(Nvml, LocksAndRestoresTheClockAndPowerLimit) {
  CallLog log;
  {
    NvmlGpu gpu(0, FAKE_NVML_LIBRARY);
    gpu.lock_clock(1395);
    gpu.set_power_limit(250.0);
  }
  EXPECT_EQ(log.text(),
            "nvmlInit_v2\n"
            // Opening: every device's name (a machine of one GPU model numbers alike in CUDA).
            "nvmlDeviceGetCount_v2\n"
            "nvmlDeviceGetHandleByIndex_v2 0\n"
            "nvmlDeviceGetName\n"
            "nvmlDeviceGetHandleByIndex_v2 0\n"
            "nvmlDeviceSetGpuLockedClocks 1395 1395\n"
            "nvmlDeviceGetPowerManagementDefaultLimit\n"
            "nvmlDeviceSetPowerManagementLimit 250000\n"
            "nvmlDeviceResetGpuLockedClocks\n"
            "nvmlDeviceGetPowerManagementDefaultLimit\n"
            "nvmlDeviceSetPowerManagementLimit 400000\n"
            "nvmlShutdown\n");
}

TEST_F(Nvml, RestoresNothingItDidNotChange) {
  CallLog log;
  {
    NvmlGpu gpu(0, FAKE_NVML_LIBRARY);
    gpu.lock_clock(1410);
    gpu.reset_clock();
  }
  EXPECT_EQ(log.text().find("nvmlDeviceResetGpuLockedClocks"),
            log.text().rfind("nvmlDeviceResetGpuLockedClocks"));
  EXPECT_EQ(log.text().find("SetPowerManagementLimit"), std::string::npos);
}

// The SM clock follows the lock; sw_power_cap is reported while the draw is at the power limit.
TEST_F(Nvml, ReadsTheSmClockAndTheClockEventReasons) {
  env_.set("FAKE_NVML_POWER_W", "450");
  CallLog log;
  NvmlGpu gpu(0, FAKE_NVML_LIBRARY);
  EXPECT_EQ(gpu.sm_clock_mhz(), 1410);
  gpu.lock_clock(1005);
  EXPECT_EQ(gpu.sm_clock_mhz(), 1005);
  gpu.reset_clock();
  EXPECT_EQ(gpu.sm_clock_mhz(), 1410);
  EXPECT_EQ(gpu.clock_event_reasons(), std::vector<std::string>{"sw_power_cap"});  // 450 > 400 W
  gpu.set_power_limit(500.0);
  EXPECT_TRUE(gpu.clock_event_reasons().empty());
  EXPECT_CONTAINS(log.text(), "nvmlDeviceGetClockInfo 1\n");  // NVML_CLOCK_SM
  EXPECT_CONTAINS(log.text(), "nvmlDeviceGetCurrentClocksEventReasons\n");
  EXPECT_EQ(log.text().find("ThrottleReasons"), std::string::npos);
}

// The enforced limit follows a change; the default stays (the fake's default is 400 W).
TEST_F(Nvml, ReadsThePowerLimits) {
  NvmlGpu gpu(0, FAKE_NVML_LIBRARY);
  EXPECT_EQ(gpu.power_limit_w(), 400.0);
  EXPECT_EQ(gpu.default_power_limit_w(), 400.0);
  gpu.set_power_limit(275.5);
  EXPECT_EQ(gpu.power_limit_w(), 275.5);
  EXPECT_EQ(gpu.default_power_limit_w(), 400.0);
  gpu.reset_power_limit();
  EXPECT_EQ(gpu.power_limit_w(), 400.0);
}

// A driver before R535 has the reasons only under their old name.
TEST_F(Nvml, ReadsTheClockEventReasonsOfADriverBeforeR535) {
  env_.set("FAKE_NVML_POWER_W", "450");
  CallLog log;
  NvmlGpu gpu(0, FAKE_NVML_R530_LIBRARY);
  EXPECT_EQ(gpu.clock_event_reasons(), std::vector<std::string>{"sw_power_cap"});
  EXPECT_CONTAINS(log.text(), "nvmlDeviceGetCurrentClocksThrottleReasons\n");
}

TEST_F(Nvml, ReadsTheEnergyCounterInJoules) {
  env_.set("FAKE_NVML_POWER_W", "300");
  env_.set("FAKE_NVML_REFRESH_MS", "10");
  env_.set("FAKE_NVML_MANUAL_CLOCK", "1");
  NvmlGpu gpu(0, FAKE_NVML_LIBRARY);
  double a = gpu.total_energy_j();
  EXPECT_EQ(a, 1000.0);  // device 0 starts at 1000 J (1,000,000 mJ)
  perseus::test::advance_fake_clock(0.1);
  // 300 W x 0.1 s, to the counter's millijoule
  EXPECT_NEAR(gpu.total_energy_j() - a, 30.0, 0.0015);
  perseus::test::advance_fake_clock(0.0149);  // 15 ms on: one refresh, not two
  EXPECT_NEAR(gpu.total_energy_j() - a, 33.0, 0.0015);
}

// Like the H100's: refreshed every REFRESH_MS, the same value in between, and a read blocks for
// READ_MS.
TEST_F(Nvml, TheFakeCounterIsRefreshedPeriodicallyAndReadsBlock) {
  env_.set("FAKE_NVML_REFRESH_MS", "500");
  env_.set("FAKE_NVML_READ_MS", "20");
  env_.set("FAKE_NVML_MANUAL_CLOCK", "1");
  NvmlGpu gpu(0, FAKE_NVML_LIBRARY);
  auto t0 = std::chrono::steady_clock::now();
  double a = gpu.total_energy_j();
  double b = gpu.total_energy_j();
  double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_GE(elapsed, 0.040);  // each read blocked (a sleep may run long, never short)
  perseus::test::advance_fake_clock(0.499);
  EXPECT_EQ(gpu.total_energy_j(), a);  // no refresh yet: the value of the session's start
  EXPECT_EQ(a, b);
  perseus::test::advance_fake_clock(0.001);
  EXPECT_NEAR(gpu.total_energy_j() - a, 150.0, 0.0015);  // the first refresh: 300 W x 0.5 s
  EXPECT_EQ(gpu.power_usage_w(), 300.0);                 // the default power
}

// Settings changed while a device is open (a second NvmlGpu, e.g. one a failed test left alive)
// apply to every open device, and its counter goes on from where it was.
TEST_F(Nvml, TheFakeAppliesNewSettingsWithoutTurningCountersBack) {
  env_.set("FAKE_NVML_POWER_W", "1000");
  NvmlGpu first(0, FAKE_NVML_LIBRARY);
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  const double before = first.total_energy_j();
  env_.set("FAKE_NVML_POWER_W", "10");
  NvmlGpu second(0, FAKE_NVML_LIBRARY);
  EXPECT_EQ(first.power_usage_w(), 10.0);
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  const double after = first.total_energy_j();
  EXPECT_GE(after, before);
  EXPECT_LT(after - before, 20.0);  // 1000 W for a few ms (50 J had it stayed), then 10 W
  EXPECT_NEAR(second.total_energy_j(), first.total_energy_j(), 0.1);  // one device, one counter
}

TEST_F(Nvml, ReportsDriverErrorsWithTheCallAndNvmlsMessage) {
  env_.set("FAKE_NVML_DENY_LOCK", "1");  // read at nvmlInit, as the driver reads its environment
  NvmlGpu gpu(0, FAKE_NVML_LIBRARY);
  std::string error = error_of([&] { gpu.lock_clock(1410); });
  EXPECT_CONTAINS(error, "nvmlDeviceSetGpuLockedClocks failed: Insufficient Permissions");
  EXPECT_CONTAINS(error_of([&] { gpu.lock_clock(0); }), "0 MHz");
  EXPECT_CONTAINS(error_of([&] { gpu.set_power_limit(-5.0); }), "power limit");
}

TEST_F(Nvml, ImplementsTheClientsGpuBackend) {
  std::unique_ptr<perseus::client::GpuBackend> gpu =
      std::make_unique<NvmlGpu>(0, FAKE_NVML_LIBRARY);
  EXPECT_EQ(gpu->supported_clocks().front(), 1410);
  double a = gpu->now_s();
  double b = gpu->now_s();
  EXPECT_GE(b, a);
  EXPECT_FALSE(gpu->synchronous_clocks());
}

// A SIGTERM (default disposition) in a process with a live NvmlGpu: the handler resets the clock
// and the power limit, then the process still dies of the signal (no normal shutdown).
TEST_F(Nvml, RestoresClocksAndPowerLimitWhenKilledBySignal) {
  CallLog log;
  EXPECT_EXIT(
      {
        NvmlGpu gpu(0, FAKE_NVML_LIBRARY);
        gpu.lock_clock(1395);
        gpu.set_power_limit(250.0);
        std::raise(SIGTERM);
        std::_Exit(0);  // not reached
      },
      ::testing::KilledBySignal(SIGTERM), "");
  std::string text = log.text();
  auto tail = text.substr(text.find("nvmlDeviceSetPowerManagementLimit 250000"));
  EXPECT_EQ(tail,
            "nvmlDeviceSetPowerManagementLimit 250000\n"
            "nvmlDeviceResetGpuLockedClocks\n"
            "nvmlDeviceSetPowerManagementLimit 400000\n");
}

// The same with a driver that stops answering (the fake blocks every device call while a file
// exists): the handler gives up on the reset after kSignalRestoreBoundS and the process still dies
// of the signal, instead of hanging in the handler for good.
TEST_F(Nvml, ASignalStillEndsTheProcessWhenTheDriverDoesNotAnswer) {
#ifdef __SANITIZE_THREAD__
  GTEST_SKIP() << "the thread sanitizer holds back a signal that arrives inside a signal handler "
                  "until the handler returns, so its alarm cannot end the blocked restore";
#endif
  perseus::test::TempDir dir;
  const std::string hang = (dir.path() / "hang").string();
  env_.set("FAKE_NVML_HANG_FILE", hang);
  const auto start = std::chrono::steady_clock::now();
  EXPECT_EXIT(
      {
        NvmlGpu gpu(0, FAKE_NVML_LIBRARY);
        gpu.lock_clock(1395);
        std::ofstream(hang) << "hang";
        std::raise(SIGTERM);
        std::_Exit(0);  // not reached
      },
      ::testing::KilledBySignal(SIGTERM), "");
  const std::chrono::duration<double> took = std::chrono::steady_clock::now() - start;
  EXPECT_GE(took.count(), perseus::client::nvml::kSignalRestoreBoundS - 1.0);  // it did wait
  EXPECT_LT(took.count(), perseus::client::nvml::kSignalRestoreBoundS + 5.0);
}

TEST_F(Nvml, FailsClearlyWithoutALibraryASymbolOrADevice) {
  EXPECT_CONTAINS(error_of([] { NvmlGpu gpu(0, "/nonexistent/libnvidia-ml.so.1"); }),
                  "cannot load NVML (/nonexistent/libnvidia-ml.so.1)");
  EXPECT_CONTAINS(error_of([] { NvmlGpu gpu(0, "libm.so.6"); }),
                  "NVML symbol nvmlInit_v2 not found");
  EXPECT_CONTAINS(error_of([] { NvmlGpu gpu(3, FAKE_NVML_LIBRARY); }), "NVML device 3");
}

TEST_F(Nvml, ReportsTheDevicesIdentityAndPower) {
  env_.set("FAKE_NVML_POWER_W", "250.5");
  NvmlGpu gpu(0, FAKE_NVML_LIBRARY);
  EXPECT_EQ(gpu.name(), "Fake NVIDIA H100 80GB HBM3");
  EXPECT_EQ(gpu.driver_version(), "580.159.04");
  EXPECT_EQ(gpu.uuid(), "GPU-00000000-fa4e-4000-8000-000000000000");
  EXPECT_EQ(gpu.nvml_index(), 0);
  EXPECT_DOUBLE_EQ(gpu.power_usage_w(), 250.5);
}

TEST(IsMutatingCall, RecognizesTheCallsTheClientMakes) {
  EXPECT_TRUE(is_mutating_call("nvmlDeviceSetGpuLockedClocks 1410 1410"));
  EXPECT_TRUE(is_mutating_call("nvmlDeviceResetGpuLockedClocks"));
  EXPECT_TRUE(is_mutating_call("nvmlDeviceSetPowerManagementLimit 400000"));
  EXPECT_FALSE(is_mutating_call("nvmlDeviceGetPowerManagementDefaultLimit"));
}

}  // namespace
