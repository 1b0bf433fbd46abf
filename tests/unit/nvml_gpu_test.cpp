// The NVML backend through the real dlopen path, against the fake libnvidia-ml.so.1 built with
// the tests (tests/fake_nvml): it records every call, so the test checks what the backend asked
// the driver to do, including that it restores the default clock and power limit on exit.
#include "perseus/client/nvml_gpu.hpp"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <csignal>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>

#include "test_support.hpp"

namespace {

using perseus::client::NvmlGpu;
using perseus::test::error_of;

// Points the fake library's call log at a fresh file for one test and reads it back.
class CallLog {
 public:
  CallLog() : path_(dir_.path() / "calls.log") { setenv("FAKE_NVML_LOG", path_.c_str(), 1); }
  ~CallLog() { unsetenv("FAKE_NVML_LOG"); }
  std::string text() const {
    std::ifstream in(path_);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
  }

 private:
  perseus::test::TempDir dir_;
  std::filesystem::path path_;
};

TEST(NvmlGpu, ListsClocksAtTheTopMemoryClockHighestFirst) {
  NvmlGpu gpu(0, FAKE_NVML_LIBRARY);
  EXPECT_EQ(gpu.supported_clocks(), (std::vector<int>{1410, 1395, 1380, 1005}));
}

TEST(NvmlGpu, LocksAndRestoresTheClockAndPowerLimit) {
  CallLog log;
  {
    NvmlGpu gpu(0, FAKE_NVML_LIBRARY);
    gpu.lock_clock(1395);
    gpu.set_power_limit(250.0);
  }
  EXPECT_EQ(log.text(),
            "nvmlInit_v2\n"
            "nvmlDeviceGetHandleByIndex_v2 0\n"
            "nvmlDeviceSetGpuLockedClocks 1395 1395\n"
            "nvmlDeviceSetPowerManagementLimit 250000\n"
            "nvmlDeviceResetGpuLockedClocks\n"
            "nvmlDeviceSetPowerManagementLimit 400000\n"
            "nvmlShutdown\n");
}

TEST(NvmlGpu, RestoresNothingItDidNotChange) {
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

TEST(NvmlGpu, ReadsTheEnergyCounterInJoules) {
  NvmlGpu gpu(0, FAKE_NVML_LIBRARY);
  double a = gpu.total_energy_j();
  double b = gpu.total_energy_j();
  EXPECT_NEAR(b - a, 1.5, 1e-9);  // the fake counter advances 1500 mJ per query
}

TEST(NvmlGpu, ReportsDriverErrorsWithTheCallAndNvmlsMessage) {
  NvmlGpu gpu(0, FAKE_NVML_LIBRARY);
  setenv("FAKE_NVML_DENY_LOCK", "1", 1);
  std::string error = error_of([&] { gpu.lock_clock(1410); });
  unsetenv("FAKE_NVML_DENY_LOCK");
  EXPECT_CONTAINS(error, "nvmlDeviceSetGpuLockedClocks failed: Insufficient Permissions");
  EXPECT_CONTAINS(error_of([&] { gpu.lock_clock(0); }), "0 MHz");
  EXPECT_CONTAINS(error_of([&] { gpu.set_power_limit(-5.0); }), "power limit");
}

TEST(NvmlGpu, ImplementsTheClientsGpuBackend) {
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
TEST(NvmlGpu, RestoresClocksAndPowerLimitWhenKilledBySignal) {
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

TEST(NvmlGpu, FailsClearlyWithoutALibraryASymbolOrADevice) {
  EXPECT_CONTAINS(error_of([] { NvmlGpu gpu(0, "/nonexistent/libnvidia-ml.so.1"); }),
                  "cannot load NVML (/nonexistent/libnvidia-ml.so.1)");
  EXPECT_CONTAINS(error_of([] { NvmlGpu gpu(0, "libm.so.6"); }),
                  "NVML symbol nvmlInit_v2 not found");
  EXPECT_CONTAINS(error_of([] { NvmlGpu gpu(3, FAKE_NVML_LIBRARY); }), "NVML device 3");
}

}  // namespace
