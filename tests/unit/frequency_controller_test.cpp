// The client's clock thread (FrequencyController): driver calls on its own thread, coalesced
// requests while the driver is busy, failures reported and the setting retried.
#include "perseus/client/frequency_controller.hpp"

#include <gtest/gtest.h>

#include <atomic>
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
    while (hold) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    if (slow) std::this_thread::sleep_for(std::chrono::milliseconds(30));
    if (fail_lock) throw Error("lock denied");
    add("lock " + std::to_string(mhz));
  }
  void reset_clock() override { add("reset_clock"); }
  void set_power_limit(double w) override { add("limit " + std::to_string(static_cast<int>(w))); }
  void reset_power_limit() override { add("reset_limit"); }
  double now_s() override { return 0.0; }
  double total_energy_j() override { return 0.0; }
  bool synchronous_clocks() const override { return synchronous; }

  std::vector<std::string> calls() const {
    std::lock_guard lock(mutex);
    return log;
  }
  std::set<std::thread::id> threads() const {
    std::lock_guard lock(mutex);
    return ids;
  }

  std::atomic<bool> slow{false}, fail_lock{false};
  std::atomic<bool> hold{false};  // lock_clock blocks while set (a driver that stops answering)
  bool synchronous = false;       // the simulator's kind: no clock thread

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

TEST(ClientFrequencyController, AppliesASynchronousBackendsChangesBeforeReturning) {
  RecordingBackend gpu;
  gpu.synchronous = true;
  FrequencyController c(gpu, [&](const std::string&) { gpu.fail_lock = false; });
  c.lock_clock(800);
  EXPECT_EQ(gpu.calls(), (std::vector<std::string>{"lock 800"}));
  EXPECT_EQ(gpu.threads(), (std::set<std::thread::id>{std::this_thread::get_id()}));
  c.lock_clock(800);  // already applied: no call
  c.set_power_limit(250.0);
  EXPECT_EQ(gpu.calls(), (std::vector<std::string>{"lock 800", "limit 250"}));
  gpu.fail_lock = true;
  c.lock_clock(600);  // fails; on_error runs before the call returns and clears the failure
  EXPECT_FALSE(gpu.fail_lock);
  c.lock_clock(600);  // the failed setting is unknown, so it is tried again
  EXPECT_EQ(gpu.calls().back(), "lock 600");
  EXPECT_EQ(c.applied_changes(), 3u);
  c.stop();
  c.reset_clock();  // after stop: ignored
  EXPECT_EQ(gpu.calls().size(), 3u);
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

// A clock change that blocks in the driver: stop_until gives up at its deadline and names the
// call; once the driver answers, the change is applied and the thread stops.
TEST(ClientFrequencyController, StopGivesUpOnADriverCallThatDoesNotReturn) {
  RecordingBackend gpu;
  gpu.hold = true;
  FrequencyController c(gpu);
  c.lock_clock(800);
  const auto start = std::chrono::steady_clock::now();
  EXPECT_FALSE(c.stop_until(start + std::chrono::milliseconds(50)));
  EXPECT_GE(std::chrono::steady_clock::now() - start, std::chrono::milliseconds(50));
  const auto call = c.running_call();
  ASSERT_TRUE(call.has_value());
  EXPECT_EQ(call->what, "a clock change");
  EXPECT_GT(call->running_s, 0.0);
  gpu.hold = false;
  EXPECT_TRUE(c.stop_until(std::chrono::steady_clock::now() + std::chrono::seconds(10)));
  EXPECT_FALSE(c.running_call().has_value());
  EXPECT_EQ(gpu.calls(), (std::vector<std::string>{"lock 800"}));
}

}  // namespace
