// The client over the NVML backend (through the fake NVML): observe-only mode asks the driver for
// no change, and the window reports the SM clock each instruction ran at.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <thread>

#include "fake_nvml_fixture.hpp"
#include "optimizer_harness.hpp"
#include "perseus/client/nvml_gpu.hpp"
#include "perseus/client/optimizer.hpp"
#include "perseus/wire/protocol.hpp"
#include "scripted_server.hpp"
#include "test_support.hpp"

namespace {

using perseus::client::NvmlGpu;
using perseus::test::CallLog;
using perseus::test::is_mutating_call;
using perseus::test::iterate;
using perseus::test::Nvml;
using perseus::test::Warnings;
using namespace std::chrono_literals;

// A client of `server_url` over the fake NVML that reports every 2 iterations, its warnings kept
// in `warnings`.
perseus::client::OptimizerOptions fake_client_options(const std::string& server_url, bool observe,
                                                      Warnings& warnings) {
  perseus::client::OptimizerOptions o = perseus::test::quick_client_options(server_url);
  o.retries = 1;
  o.sampler_period_s = 0.002;
  o.observe = observe;
  o.log = warnings.sink();
  return o;
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
    Warnings warnings;
    {
      perseus::client::PipelineFrequencyOptimizer opt(
          fake_client_options(server.http->url(), observe, warnings),
          std::make_unique<NvmlGpu>(0, FAKE_NVML_LIBRARY));
      EXPECT_EQ(opt.round(), 0);
      iterate(opt, 4, {"forward", "backward"}, 5ms);
      EXPECT_EQ(opt.round(), 1);  // round 0 was reported and round 1 fetched
      EXPECT_FALSE(opt.degraded());
      EXPECT_EQ(opt.iterations().size(), 4u);
    }
    EXPECT_EQ(server.result_count(), 2u);  // round 0, and the final round's first window
    const std::vector<std::string> said = warnings.said();
    EXPECT_TRUE(said.empty()) << said.front();
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
    Warnings warnings;
    perseus::client::OptimizerOptions o =
        fake_client_options(server.http->url(), observe, warnings);
    o.report_every = 5;
    perseus::client::PipelineFrequencyOptimizer opt(
        o, std::make_unique<NvmlGpu>(0, FAKE_NVML_LIBRARY));
    // Two windows, ~15 clock readings per instruction in each.
    iterate(opt, 10, {"forward", "backward"}, 10ms);
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
    const std::vector<std::string> said = warnings.said();
    if (observe) {
      EXPECT_TRUE(said.empty()) << said.front();
      continue;
    }
    ASSERT_EQ(said.size(), 1u);                              // two windows, one warning
    EXPECT_CONTAINS(said[0], "the GPU ran 'forward' at 1");  // 1200 MHz, less the lock's lag
    EXPECT_CONTAINS(said[0],
                    " MHz on average, below its locked 1395 MHz (held down by the "
                    "power limit or temperature in 100 % of ");
  }
}

// A GPU without an energy counter (NVML: Not Supported, as before Volta): the sampler says so
// once, in one warning that names the cause, and reads the counter no more; the windows go to the
// server unmeasured and the schedule's clocks are still set. Nothing advises longer windows.
TEST_F(Nvml, AGpuWithoutAnEnergyCounterIsSaidOnceAndTheScheduleStillFollowed) {
  env_.set("FAKE_NVML_NO_ENERGY_COUNTER", "1");
  perseus::test::ScriptedServer server(std::vector<nlohmann::json>{
      perseus::test::clocks(1395, 1005), perseus::test::clocks(1380, 1005),
      perseus::test::clocks(1380, 1005)});
  CallLog log;
  Warnings warnings;
  {
    perseus::client::PipelineFrequencyOptimizer opt(
        fake_client_options(server.http->url(), false, warnings),
        std::make_unique<NvmlGpu>(0, FAKE_NVML_LIBRARY));
    // The sampler's first read, before the first window closes (a loaded machine may start its
    // thread late).
    for (int i = 0; i < 500 && warnings.said().empty(); ++i) std::this_thread::sleep_for(10ms);
    iterate(opt, 4, {"forward", "backward"}, 5ms);
    EXPECT_EQ(opt.round(), 2);
    EXPECT_FALSE(opt.degraded());
  }
  ASSERT_EQ(server.result_count(), 2u);
  for (const nlohmann::json& body : server.results) {
    EXPECT_FALSE(perseus::wire::parse_profiling_result(body).energy_measured) << body;
  }
  const std::vector<std::string> said = warnings.said();
  ASSERT_EQ(said.size(), 1u) << said.back();
  EXPECT_CONTAINS(said[0],
                  "this GPU has no energy counter (NVML nvmlDeviceGetTotalEnergyConsumption: Not "
                  "Supported, as on GPUs before Volta and some virtual GPUs): Perseus measures no "
                  "energy on it");
  const std::string calls = log.text();
  EXPECT_CONTAINS(calls, "nvmlDeviceSetGpuLockedClocks 1395 1395");
  EXPECT_CONTAINS(calls, "nvmlDeviceSetGpuLockedClocks 1380 1380");
  std::istringstream lines(calls);
  int reads = 0;
  for (std::string line; std::getline(lines, line);) {
    reads += line == "nvmlDeviceGetTotalEnergyConsumption" ? 1 : 0;
  }
  EXPECT_EQ(reads, 1);
}

}  // namespace

// A driver that stops answering (the fake blocks every device call while a file exists, as NVML
// does on a GPU that has fallen off the bus): the training loop goes on at full speed, the stuck
// counter read is said once at a window boundary, and the client's destructor gives up on the
// driver after shutdown_bound_s with one warning instead of blocking the process's exit for good.
// Without the hang the same client stops at once and says nothing (the checks can fail). Nothing
// here is timed: a client that blocked would not return at all, which the watchdog turns into a
// failure. The hang
// runs in a child process: the NVML session it leaves behind would outlive the test.
TEST_F(Nvml, ADriverThatStopsAnsweringHoldsNeitherTheTrainingLoopNorItsExit) {
  perseus::test::TempDir dir;
  const std::filesystem::path hang = dir.path() / "hang";
  env_.set("FAKE_NVML_HANG_FILE", hang.string());
  auto run = [&](bool hangs) {
    Warnings warnings;
    perseus::client::OptimizerOptions o = fake_client_options("", false, warnings);
    o.report_every = 4;
    o.shutdown_bound_s = 0.3;
    auto opt = std::make_unique<perseus::client::PipelineFrequencyOptimizer>(
        o, std::make_unique<NvmlGpu>(0, FAKE_NVML_LIBRARY));
    iterate(*opt, 4, {"forward", "backward"}, 5ms);
    if (hangs) std::ofstream(hang.string()) << "hang";
    std::this_thread::sleep_for(50ms);  // a read begun before the hang returns before window 2
    // 12 iterations of 2 x 100 ms: 2.4 s, past kDriverCallStuckS; the hooks take no part of it.
    iterate(*opt, 12, {"forward", "backward"}, 100ms);
    EXPECT_EQ(opt->last_window().measured, !hangs);
    opt.reset();
    const std::vector<std::string> said = warnings.said();
    if (!hangs) {
      EXPECT_TRUE(said.empty()) << said.front();
      return;
    }
    ASSERT_EQ(said.size(), 3u);
    // Window 2 (0.8 s into the hang) is unmeasured; window 4 (2.4 s) finds the read stuck.
    EXPECT_CONTAINS(said[0], "the GPU's energy counter did not change during a reporting window");
    EXPECT_CONTAINS(said[0], ": an energy counter read has been blocked in the driver for ");
    EXPECT_CONTAINS(said[1], "the GPU driver has not returned from an energy counter read in 2 s");
    EXPECT_CONTAINS(said[2], "at exit, the GPU driver did not return from an energy counter read");
    EXPECT_CONTAINS(said[2], "within shutdown_bound_s = 0.3 s");
    EXPECT_CONTAINS(said[2], "nvidia-smi -rgc");
  };
  run(false);
  EXPECT_EXIT(
      {
        // Hooks or an exit that waited on the driver would never return while it hangs; rather
        // than time them, a watchdog ends the child with an error (long after any machine,
        // however loaded, would have finished 2.7 s of training and exit).
        std::thread([] {
          std::this_thread::sleep_for(120s);
          std::fputs("the training loop or its exit waited on the hung driver\n", stderr);
          std::_Exit(2);
        }).detach();
        run(true);
        std::_Exit(::testing::Test::HasFailure() ? 1 : 0);  // the calls left behind still block
      },
      ::testing::ExitedWithCode(0), "");
}
