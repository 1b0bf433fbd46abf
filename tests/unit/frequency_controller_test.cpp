// The client's clock thread (FrequencyController): driver calls on its own thread, coalesced
// requests while the driver is busy, failures reported and the setting retried.
#include "perseus/client/frequency_controller.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <mutex>
#include <set>
#include <thread>

#include "perseus/schedule/schedule.hpp"
#include "test_support.hpp"

namespace {

using perseus::Error;
using perseus::client::FrequencyController;
using perseus::client::GpuBackend;

// ---------------------------------------------------------------- the clock thread

// Records every backend call with the thread that made it; can fail or slow down lock_clock.
class RecordingBackend : public GpuBackend {
 public:
  std::vector<int> supported_clocks() const override { return {1000, 800, 600}; }
  void lock_clock(int mhz) override {
    if (slow) std::this_thread::sleep_for(std::chrono::milliseconds(30));
    if (fail_lock) throw Error("lock denied");
    add("lock " + std::to_string(mhz));
  }
  void reset_clock() override { add("reset_clock"); }
  void set_power_limit(double w) override { add("limit " + std::to_string(static_cast<int>(w))); }
  void reset_power_limit() override { add("reset_limit"); }
  double now_s() override { return 0.0; }
  double total_energy_j() override { return 0.0; }

  std::vector<std::string> calls() const {
    std::lock_guard lock(mutex);
    return log;
  }
  std::set<std::thread::id> threads() const {
    std::lock_guard lock(mutex);
    return ids;
  }

  std::atomic<bool> slow{false}, fail_lock{false};

 private:
  void add(const std::string& call) {
    std::lock_guard lock(mutex);
    log.push_back(call);
    ids.insert(std::this_thread::get_id());
  }
  mutable std::mutex mutex;
  std::vector<std::string> log;
  std::set<std::thread::id> ids;
};

TEST(ClientFrequencyController, AppliesChangesOnItsOwnThread) {
  RecordingBackend gpu;
  FrequencyController c(gpu);
  c.lock_clock(1000);
  c.flush();
  EXPECT_EQ(gpu.calls(), (std::vector<std::string>{"lock 1000"}));
  EXPECT_EQ(gpu.threads().count(std::this_thread::get_id()), 0u);
  c.lock_clock(1000);  // already applied: no driver call
  c.flush();
  EXPECT_EQ(gpu.calls().size(), 1u);
  c.set_power_limit(250.0);
  c.reset_clock();
  c.flush();
  EXPECT_EQ(gpu.calls(), (std::vector<std::string>{"lock 1000", "limit 250", "reset_clock"}));
  c.reset_power_limit();
  c.lock_clock(800);
  c.stop();  // applies what is pending
  EXPECT_EQ(gpu.calls().back(), "lock 800");
  EXPECT_EQ(gpu.calls()[3], "reset_limit");
  EXPECT_EQ(c.applied_changes(), 5u);
  c.lock_clock(600);  // after stop: ignored
  c.flush();
  EXPECT_EQ(gpu.calls().size(), 5u);
}

TEST(ClientFrequencyController, CoalescesRequestsWhileTheDriverIsBusy) {
  RecordingBackend gpu;
  gpu.slow = true;
  FrequencyController c(gpu);
  for (int mhz : {1000, 800, 600, 800, 1000, 600}) c.lock_clock(mhz);
  c.flush();
  auto calls = gpu.calls();
  EXPECT_LT(calls.size(), 6u);
  EXPECT_EQ(calls.back(), "lock 600");
}

TEST(ClientFrequencyController, ReportsDriverFailuresAndRetriesTheSetting) {
  RecordingBackend gpu;
  gpu.fail_lock = true;
  std::mutex m;
  std::vector<std::string> errors;
  FrequencyController c(gpu, [&](const std::string& e) {
    std::lock_guard lock(m);
    errors.push_back(e);
  });
  c.lock_clock(800);
  c.flush();
  gpu.fail_lock = false;
  c.lock_clock(800);  // the failed setting is unknown, so it is tried again
  c.flush();
  EXPECT_EQ(gpu.calls(), (std::vector<std::string>{"lock 800"}));
  std::lock_guard lock(m);
  EXPECT_EQ(errors, (std::vector<std::string>{"lock denied"}));
}

}  // namespace
