// The NVML backend through the real dlopen path, against the fake libnvidia-ml.so.1 built with
// the tests (tests/fake_nvml): it records every call, so the test checks what the backend asked
// the driver to do, including that it restores the default clock and power limit on exit and
// that the read-only probe asks for no change at all. Also: CUDA device indices mapped through
// CUDA_VISIBLE_DEVICES, and the probe's measurements against the fake's configured counter.
#include "perseus/client/nvml_gpu.hpp"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <chrono>
#include <csignal>
#include <cstdlib>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <sstream>
#include <string>
#include <thread>

#include "perseus/client/cuda_devices.hpp"
#include "perseus/client/gpu_probe.hpp"
#include "perseus/client/optimizer.hpp"
#include "perseus/wire/protocol.hpp"
#include "scripted_server.hpp"
#include "test_support.hpp"

namespace {

using perseus::client::cuda_to_nvml_index;
using perseus::client::NvmlGpu;
using perseus::test::error_of;

// Sets (or, with nullopt, unsets) environment variables for one scope and restores them after.
class ScopedEnv {
 public:
  ScopedEnv(std::initializer_list<std::pair<const char*, std::optional<std::string>>> vars) {
    for (const auto& [name, value] : vars) set(name, value);
  }
  ~ScopedEnv() {
    for (const auto& [name, value] : saved_) {
      value ? setenv(name.c_str(), value->c_str(), 1) : unsetenv(name.c_str());
    }
  }
  void set(const std::string& name, const std::optional<std::string>& value) {
    const char* old = std::getenv(name.c_str());
    if (saved_.count(name) == 0) {
      saved_[name] = old != nullptr ? std::optional<std::string>(old) : std::nullopt;
    }
    value ? setenv(name.c_str(), value->c_str(), 1) : unsetenv(name.c_str());
  }

 private:
  std::map<std::string, std::optional<std::string>> saved_;
};

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

// Every test starts with CUDA_VISIBLE_DEVICES unset and a fake whose counter reads cost nothing
// and refresh every millisecond (tests that care about timing set their own).
// The probe of the fake's device 0, polling its counter for `seconds`.
perseus::client::GpuProbe probe_fake(double seconds) {
  perseus::client::ProbeOptions options;
  options.library = FAKE_NVML_LIBRARY;
  options.duration_s = seconds;
  return perseus::client::probe_gpu(options);
}

class Nvml : public ::testing::Test {
 protected:
  ScopedEnv env_{{"CUDA_VISIBLE_DEVICES", std::nullopt},
                 {"FAKE_NVML_DEVICES", std::nullopt},
                 {"FAKE_NVML_POWER_W", std::nullopt},
                 {"FAKE_NVML_READ_MS", "0"},
                 {"FAKE_NVML_REFRESH_MS", "1"}};
};

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
  NvmlGpu gpu(0, FAKE_NVML_LIBRARY);
  double a = gpu.total_energy_j();
  EXPECT_NEAR(a, 1000.0, 3.0 + 1e-9);  // device 0 starts at 1000 J (1,000,000 mJ)
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  double b = gpu.total_energy_j();
  EXPECT_NEAR(b - a, 30.0, 6.0);  // 300 W x 0.1 s, give or take a refresh period and scheduling
}

// Like the H100's: refreshed every REFRESH_MS, the same value in between, and a read blocks for
// READ_MS.
TEST_F(Nvml, TheFakeCounterIsRefreshedPeriodicallyAndReadsBlock) {
  env_.set("FAKE_NVML_REFRESH_MS", "500");
  env_.set("FAKE_NVML_READ_MS", "20");
  NvmlGpu gpu(0, FAKE_NVML_LIBRARY);
  auto t0 = std::chrono::steady_clock::now();
  double a = gpu.total_energy_j();
  double b = gpu.total_energy_j();
  double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_GE(elapsed, 0.040);
  EXPECT_EQ(a, b);  // both reads fall between two refreshes (about 45 ms into a 500 ms period)
  EXPECT_EQ(gpu.power_usage_w(), 300.0);  // the default power
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
  NvmlGpu gpu(0, FAKE_NVML_LIBRARY);
  setenv("FAKE_NVML_DENY_LOCK", "1", 1);
  std::string error = error_of([&] { gpu.lock_clock(1410); });
  unsetenv("FAKE_NVML_DENY_LOCK");
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

TEST_F(Nvml, FailsClearlyWithoutALibraryASymbolOrADevice) {
  EXPECT_CONTAINS(error_of([] { NvmlGpu gpu(0, "/nonexistent/libnvidia-ml.so.1"); }),
                  "cannot load NVML (/nonexistent/libnvidia-ml.so.1)");
  EXPECT_CONTAINS(error_of([] { NvmlGpu gpu(0, "libm.so.6"); }),
                  "NVML symbol nvmlInit_v2 not found");
  EXPECT_CONTAINS(error_of([] { NvmlGpu gpu(3, FAKE_NVML_LIBRARY); }), "NVML device 3");
}

// CUDA_VISIBLE_DEVICES as CUDA reads it: integer entries are NVML indices, GPU- entries UUIDs or
// unique prefixes of one; the UUID list is asked for only when an entry needs it.
TEST(CudaToNvmlIndex, MapsIndicesAndUuidsTheWayCudaDoes) {
  const std::vector<std::string> uuids = {"GPU-5e3b1a8c-1f2d-4c4e-9a0b-3d2e1f4a5b6c",
                                          "GPU-5e3b9f00-0000-4000-8000-000000000001",
                                          "GPU-a1b2c3d4-0000-4000-8000-000000000002"};
  int asked = 0;
  auto list = [&] {
    ++asked;
    return uuids;
  };
  EXPECT_EQ(cuda_to_nvml_index(1, nullptr, list), 1);
  EXPECT_EQ(cuda_to_nvml_index(1, "", list), 1);
  EXPECT_EQ(cuda_to_nvml_index(0, "2,0", list), 2);
  EXPECT_EQ(cuda_to_nvml_index(1, "2, 0", list), 0);
  EXPECT_EQ(asked, 0);
  EXPECT_EQ(cuda_to_nvml_index(0, uuids[1].c_str(), list), 1);
  EXPECT_EQ(cuda_to_nvml_index(1, "0,GPU-a1", list), 2);
  EXPECT_EQ(cuda_to_nvml_index(0, "GPU-5e3b1", list), 0);
  EXPECT_EQ(asked, 3);
}

TEST(CudaToNvmlIndex, RejectsWhatCudaWouldNotOpen) {
  auto list = [] {
    return std::vector<std::string>{"GPU-5e3b1a8c-1f2d-4c4e-9a0b-3d2e1f4a5b6c",
                                    "GPU-5e3b9f00-0000-4000-8000-000000000001"};
  };
  auto error = [&](int index, const char* visible) {
    return error_of([&] { cuda_to_nvml_index(index, visible, list); });
  };
  EXPECT_CONTAINS(error(2, "0,1"), "CUDA device 2 is not visible: CUDA_VISIBLE_DEVICES=0,1");
  EXPECT_CONTAINS(error(0, "GPU-5e3b"),
                  "CUDA_VISIBLE_DEVICES entry 'GPU-5e3b' (CUDA device 0) is ambiguous");
  EXPECT_CONTAINS(error(1, "0,GPU-ffff"),
                  "CUDA_VISIBLE_DEVICES entry 'GPU-ffff' (CUDA device 1) matches none");
  EXPECT_CONTAINS(error(0, "MIG-4f2e0c11-1d2b-5b5a-9c3f-2a7a0e9d3c21"),
                  "CUDA_VISIBLE_DEVICES entry 'MIG-4f2e0c11-1d2b-5b5a-9c3f-2a7a0e9d3c21' "
                  "(CUDA device 0) is a MIG instance");
  EXPECT_CONTAINS(error(0, "gpu0"),
                  "CUDA_VISIBLE_DEVICES entry 'gpu0' (CUDA device 0) is neither a device index");
  EXPECT_CONTAINS(error(-1, nullptr), "CUDA device index must be >= 0");
}

TEST_F(Nvml, OpensTheDeviceCudaVisibleDevicesNames) {
  env_.set("FAKE_NVML_DEVICES", "3");
  const std::string uuid2 = "GPU-00000002-fa4e-4000-8000-000000000002";
  env_.set("CUDA_VISIBLE_DEVICES", uuid2 + ",0,GPU-00000001");
  NvmlGpu first(0, FAKE_NVML_LIBRARY), second(1, FAKE_NVML_LIBRARY), third(2, FAKE_NVML_LIBRARY);
  EXPECT_EQ(first.nvml_index(), 2);
  EXPECT_EQ(first.uuid(), uuid2);
  EXPECT_EQ(second.nvml_index(), 0);
  EXPECT_EQ(second.uuid(), "GPU-00000000-fa4e-4000-8000-000000000000");
  EXPECT_EQ(third.nvml_index(), 1);
  env_.set("CUDA_VISIBLE_DEVICES", "2");
  EXPECT_EQ(NvmlGpu(0, FAKE_NVML_LIBRARY).nvml_index(), 2);
}

TEST_F(Nvml, FailsClearlyForADeviceCudaVisibleDevicesCannotName) {
  CallLog log;
  env_.set("FAKE_NVML_DEVICES", "2");
  env_.set("CUDA_VISIBLE_DEVICES", "GPU-0000000");
  EXPECT_CONTAINS(error_of([] { NvmlGpu gpu(0, FAKE_NVML_LIBRARY); }),
                  "CUDA_VISIBLE_DEVICES entry 'GPU-0000000' (CUDA device 0) is ambiguous");
  env_.set("CUDA_VISIBLE_DEVICES", "5");
  EXPECT_CONTAINS(error_of([] { NvmlGpu gpu(0, FAKE_NVML_LIBRARY); }),
                  "NVML device 5 (CUDA device 0 under CUDA_VISIBLE_DEVICES=5): Invalid Argument");
  env_.set("CUDA_VISIBLE_DEVICES", "1");
  EXPECT_CONTAINS(error_of([] { NvmlGpu gpu(1, FAKE_NVML_LIBRARY); }),
                  "CUDA device 1 is not visible: CUDA_VISIBLE_DEVICES=1 lists 1 device(s)");
  // Every failed open shut NVML down again.
  const std::string text = log.text();
  auto count = [&](const std::string& line) {
    std::size_t n = 0;
    for (auto at = text.find(line); at != std::string::npos; at = text.find(line, at + 1)) ++n;
    return n;
  };
  EXPECT_EQ(count("nvmlInit_v2\n"), 3u);
  EXPECT_EQ(count("nvmlShutdown\n"), 3u);
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

// The NVML calls that change a device or the system (none may appear in a read-only run).
bool is_mutating_call(const std::string& line) {
  for (const char* prefix : {"nvmlDeviceSet", "nvmlDeviceReset", "nvmlDeviceClear", "nvmlSystemSet",
                             "nvmlGpuInstance", "nvmlDeviceCreate"}) {
    if (line.starts_with(prefix)) return true;
  }
  return false;
}

TEST(IsMutatingCall, RecognizesTheCallsTheClientMakes) {
  EXPECT_TRUE(is_mutating_call("nvmlDeviceSetGpuLockedClocks 1410 1410"));
  EXPECT_TRUE(is_mutating_call("nvmlDeviceResetGpuLockedClocks"));
  EXPECT_TRUE(is_mutating_call("nvmlDeviceSetPowerManagementLimit 400000"));
  EXPECT_FALSE(is_mutating_call("nvmlDeviceGetPowerManagementDefaultLimit"));
}

// A client of `server_url` over the fake NVML that reports every 2 iterations, its warnings kept
// in `warnings` (guarded by `mutex`).
perseus::client::OptimizerOptions fake_client_options(const std::string& server_url, bool observe,
                                                      std::mutex& mutex,
                                                      std::vector<std::string>& warnings) {
  perseus::client::OptimizerOptions o = perseus::test::quick_client_options(server_url);
  o.retries = 1;
  o.sampler_period_s = 0.002;
  o.observe = observe;
  o.log = [&](const std::string& w) {
    std::lock_guard lock(mutex);
    warnings.push_back(w);
  };
  return o;
}

// Runs `iterations` of forward and backward, `span_ms` each.
void run_iterations(perseus::client::PipelineFrequencyOptimizer& opt, int iterations,
                    int span_ms = 5) {
  for (int i = 0; i < iterations; ++i) {
    opt.on_step_begin();
    for (const char* name : {"forward", "backward"}) {
      opt.on_instruction_begin(name);
      std::this_thread::sleep_for(std::chrono::milliseconds(span_ms));
      opt.on_instruction_end(name);
    }
    opt.on_step_end();
  }
}

// The client in observe-only mode over the NVML backend: it fetches a schedule with clocks,
// measures, reports and is destroyed without asking the driver for any change; the same run
// without `observe` locks and resets the clock (so the check can fail).
TEST_F(Nvml, ObserveOnlyClientNeverChangesTheDevice) {
  env_.set("FAKE_NVML_READ_MS", "1");
  auto run = [](bool observe) {
    perseus::test::ScriptedServer server(std::vector<nlohmann::json>{
        perseus::test::clocks(1395, 1005), perseus::test::clocks(1380, 1005)});
    CallLog log;
    std::mutex mutex;
    std::vector<std::string> warnings;
    {
      perseus::client::PipelineFrequencyOptimizer opt(
          fake_client_options(server.http->url(), observe, mutex, warnings),
          std::make_unique<NvmlGpu>(0, FAKE_NVML_LIBRARY));
      EXPECT_EQ(opt.round(), 0);
      run_iterations(opt, 4);
      EXPECT_EQ(opt.round(), 1);  // round 0 was reported and round 1 fetched
      EXPECT_FALSE(opt.degraded());
      EXPECT_EQ(opt.iterations().size(), 4u);
    }
    EXPECT_EQ(server.result_count(), 1u);
    std::lock_guard lock(mutex);
    EXPECT_TRUE(warnings.empty()) << warnings.front();
    return log.text();
  };

  const std::string observed = run(true);
  std::istringstream lines(observed);
  int reads = 0;
  for (std::string line; std::getline(lines, line);) {
    EXPECT_FALSE(is_mutating_call(line)) << line;
    if (line == "nvmlDeviceGetTotalEnergyConsumption") ++reads;
  }
  EXPECT_GT(reads, 0);  // the sampler read the counter: the log saw the whole run
  EXPECT_CONTAINS(observed, "nvmlShutdown");

  const std::string controlled = run(false);
  EXPECT_CONTAINS(controlled, "nvmlDeviceSetGpuLockedClocks ");  // the schedule's clocks
  EXPECT_CONTAINS(controlled, "nvmlDeviceResetGpuLockedClocks");
}

// The window reports the SM clock each instruction ran at; a locked clock that the power limit
// holds down is said once (here the fake runs at 1200 MHz while capped: forward, locked to 1395
// MHz, falls short; backward, at 1005 MHz, does not). Observe-only clients lock nothing and say
// nothing of it.
TEST_F(Nvml, SaysOnceWhenTheGpuRunsBelowItsLockedClock) {
  env_.set("FAKE_NVML_READ_MS", "1");
  env_.set("FAKE_NVML_POWER_W", "450");  // above the fake's 400 W limit
  env_.set("FAKE_NVML_CAPPED_MHZ", "1200");
  for (bool observe : {false, true}) {
    perseus::test::ScriptedServer server(std::vector<nlohmann::json>{
        perseus::test::clocks(1395, 1005), perseus::test::clocks(1395, 1005),
        perseus::test::clocks(1395, 1005)});
    std::mutex mutex;
    std::vector<std::string> warnings;
    perseus::client::OptimizerOptions o =
        fake_client_options(server.http->url(), observe, mutex, warnings);
    o.report_every = 5;
    perseus::client::PipelineFrequencyOptimizer opt(
        o, std::make_unique<NvmlGpu>(0, FAKE_NVML_LIBRARY));
    run_iterations(opt, 10, 10);  // two windows, ~15 clock readings per instruction in each
    const auto& clocks = opt.last_window().clocks;
    ASSERT_EQ(clocks.count("forward"), 1u) << observe;
    const perseus::client::ClockSummary& forward = clocks.at("forward");
    EXPECT_GE(forward.samples, 5);
    EXPECT_EQ(forward.held_down_share, 1.0);
    EXPECT_EQ(forward.locked_mhz, 1395);  // the schedule's (observe-only: recorded, not applied)
    const double backward = clocks.at("backward").mean_mhz;
    if (observe) {  // nothing locked: capped at 1200 throughout
      EXPECT_EQ(forward.mean_mhz, 1200.0);
      EXPECT_EQ(backward, 1200.0);
    } else {  // the clock thread applies each lock a little after its instruction begins
      EXPECT_LE(forward.mean_mhz, 1200.0);
      EXPECT_GE(backward, 1005.0);
    }
    // The server gets the same clocks with each window's result.
    ASSERT_GE(server.result_count(), 2u) << observe;
    const auto reported =
        perseus::wire::parse_profiling_result(server.results.back()).clocks.at("forward");
    EXPECT_EQ(reported.samples, forward.samples);
    EXPECT_EQ(reported.mean_mhz, forward.mean_mhz);
    EXPECT_EQ(reported.held_down_share, 1.0);
    std::lock_guard lock(mutex);
    if (observe) {
      EXPECT_TRUE(warnings.empty()) << warnings.front();
      continue;
    }
    ASSERT_EQ(warnings.size(), 1u);                              // two windows, one warning
    EXPECT_CONTAINS(warnings[0], "the GPU ran 'forward' at 1");  // 1200 MHz, less the lock's lag
    EXPECT_CONTAINS(warnings[0],
                    " MHz on average, below its locked 1395 MHz (held down by the "
                    "power limit or temperature in 100 % of ");
  }
}

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

TEST_F(Nvml, ProbeRejectsBadOptions) {
  EXPECT_CONTAINS(error_of([] { probe_fake(0.0); }),
                  "probe duration must be a number of seconds in (0, 600]");
  perseus::client::ProbeOptions options;
  options.library = FAKE_NVML_LIBRARY;
  options.duration_s = 0.01;
  options.device = 3;
  EXPECT_CONTAINS(error_of([&] { perseus::client::probe_gpu(options); }), "NVML device 3");
}

}  // namespace
