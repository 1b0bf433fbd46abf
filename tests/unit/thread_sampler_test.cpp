// The thread sampler (DESIGN section 9): beside each energy-counter read it reads the backend's SM
// clock, keeps the readings for the reporting window, forgets them with the counter's; failing
// clock and counter reads are retried with back-off; a counter that goes down is said once.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "perseus/client/energy_sampler.hpp"
#include "perseus/client/gpu_backend.hpp"
#include "scripted_server.hpp"

namespace {

using perseus::client::SamplerOptions;
using perseus::client::ThreadSampler;
using perseus::measure::ClockReading;
using perseus::measure::ClockSample;
using perseus::test::Warnings;

// A backend whose clock reads 1000 + n MHz at its n-th read (held down on odd reads), fails at
// its `fail_at`-th and `fail_at + 1`-th reads (0: never), or reports no clock at all; its counter
// reads n J at its n-th read (in kJ), or starts again at its `reset_at`-th (in J).
class ClockBackend : public perseus::client::GpuBackend {
 public:
  enum class Clock { kCounting, kNone };
  explicit ClockBackend(Clock clock = Clock::kCounting, int fail_at = 0, int reset_at = 0)
      : clock_(clock), fail_at_(fail_at), reset_at_(reset_at) {}
  std::vector<int> supported_clocks() const override { return {1410}; }
  void lock_clock(int) override {}
  void reset_clock() override {}
  void set_power_limit(double) override {}
  void reset_power_limit() override {}
  double now_s() override {
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch())
        .count();
  }
  // 1, 2, 3, ... kJ; from the `reset_at`-th read on (0: never) 1, 2, 3, ... J. Reads
  // counter_fails_from..counter_fails_to (0: none) fail.
  double total_energy_j() override {
    const int n = ++energy_reads_;
    if (n >= counter_fails_from && n <= counter_fails_to) throw std::runtime_error("GPU is lost");
    return reset_at_ > 0 && n >= reset_at_ ? n - reset_at_ + 1 : 1000.0 * n;
  }
  std::optional<perseus::measure::ClockReading> read_clock() override {
    const int n = ++clock_reads_;
    if (clock_ == Clock::kNone) return std::nullopt;
    if (fail_at_ > 0 && n >= fail_at_ && n <= fail_at_ + 1) {
      throw std::runtime_error("NVML timed out");
    }
    return ClockReading{1000 + n, n % 2 == 1};
  }
  std::atomic<int> energy_reads_{0}, clock_reads_{0};
  int counter_fails_from = 0, counter_fails_to = 0;

 private:
  Clock clock_;
  int fail_at_, reset_at_;
};

// Waits until `done` holds (at most 5 s).
template <typename F>
void wait_for(F done) {
  for (int i = 0; i < 5000 && !done(); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
}

TEST(ThreadSampler, KeepsAClockReadingBesideEachCounterReadAndForgetsThemWithIt) {
  ClockBackend gpu;
  ThreadSampler sampler(gpu, SamplerOptions{0.001, 65536});
  wait_for([&] { return gpu.clock_reads_ >= 20; });
  const double now = gpu.now_s();
  std::vector<perseus::measure::ClockSample> all = sampler.clocks(0.0, now);
  ASSERT_GE(all.size(), 20u);
  for (std::size_t i = 0; i < all.size(); ++i) {
    EXPECT_EQ(all[i].clock.sm_mhz, 1001 + static_cast<int>(i));  // every read kept, in order
    EXPECT_EQ(all[i].clock.held_down, i % 2 == 0);
    if (i > 0) {
      EXPECT_GT(all[i].t_s, all[i - 1].t_s);
    }
  }
  EXPECT_EQ(sampler.clocks(all[5].t_s, all[9].t_s).size(), 5u);  // both ends included
  sampler.forget_before(all[10].t_s);
  EXPECT_EQ(sampler.clocks(0.0, now).front().clock.sm_mhz, all[10].clock.sm_mhz);
}

// A clock read that fails is retried after 0.1 s, then 0.2 s, while the counter reads go on; the
// failure and the recovery are each said once.
TEST(ThreadSampler, AFailingClockReadIsRetriedWithBackOffWhileTheCounterGoesOn) {
  ClockBackend gpu(ClockBackend::Clock::kCounting, 4);
  Warnings errors;
  ThreadSampler sampler(gpu, SamplerOptions{0.001, 65536}, errors.sink());
  wait_for([&] { return gpu.clock_reads_ >= 8; });
  EXPECT_GE(gpu.energy_reads_, 50);  // every millisecond meanwhile, for 0.3 s
  const std::vector<perseus::measure::ClockSample> all = sampler.clocks(0.0, gpu.now_s());
  ASSERT_GE(all.size(), 5u);
  std::vector<int> mhz;
  for (std::size_t i = 0; i < 5; ++i) mhz.push_back(all[i].clock.sm_mhz);
  EXPECT_EQ(mhz, (std::vector<int>{1001, 1002, 1003, 1006, 1007}));  // reads 4 and 5 failed
  EXPECT_GE(all[3].t_s - all[2].t_s, 0.1 + 0.2);
  EXPECT_EQ(errors.said(),
            (std::vector<std::string>{"SM clock read failed: NVML timed out; retried after 0.1 s, "
                                      "then less often, at most every 10 s",
                                      "SM clock reads work again after failing"}));
}

TEST(ThreadSampler, ABackendWithoutAClockIsAskedOnce) {
  ClockBackend gpu(ClockBackend::Clock::kNone);
  ThreadSampler sampler(gpu, SamplerOptions{0.001, 65536});
  wait_for([&] { return gpu.energy_reads_ >= 10; });
  EXPECT_TRUE(sampler.clocks(0.0, gpu.now_s()).empty());
  EXPECT_EQ(gpu.clock_reads_, 1);
}

TEST(ThreadSampler, ACounterThatGoesDownIsSaidOnceAndTheSeriesStartsAgain) {
  ClockBackend gpu(ClockBackend::Clock::kNone, 0, 10);
  Warnings errors;
  ThreadSampler sampler(gpu, SamplerOptions{0.001, 65536}, errors.sink());
  wait_for([&] { return gpu.energy_reads_ >= 20; });
  const auto series = sampler.series(0.0, gpu.now_s());
  ASSERT_FALSE(series.empty());
  EXPECT_EQ(series.front().energy_j, 2.0);  // nothing from before; the reset read is a first read
  for (std::size_t i = 1; i < series.size(); ++i) {
    EXPECT_GT(series[i].energy_j, series[i - 1].energy_j);
  }
  EXPECT_EQ(errors.said(),
            std::vector<std::string>{
                "the GPU's energy counter went down, from 9000 J to 1 J (a GPU reset, or a backend "
                "whose total_energy_j() is no running total): the changes read before it are "
                "dropped and attribution starts again from that read"});
}

// A counter read that fails is retried, after 0.1 s, 0.2 s, 0.4 s, ...: the failure and the
// recovery are each said once. The first read after the gap keeps no change (it may lie anywhere
// in the gap): the energy spent across the gap is in the interval from the last change before it
// to the first after it, both timed by their reads.
TEST(ThreadSampler, AFailingCounterReadIsRetriedWithBackOffUntilItWorksAgain) {
  ClockBackend gpu(ClockBackend::Clock::kNone);
  gpu.counter_fails_from = 5;
  gpu.counter_fails_to = 7;
  Warnings errors;
  const auto started = std::chrono::steady_clock::now();
  ThreadSampler sampler(gpu, SamplerOptions{0.001, 65536}, errors.sink());
  wait_for([&] { return gpu.energy_reads_ >= 12; });
  const double waited =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  EXPECT_GE(waited, 0.1 + 0.2 + 0.4);  // the waits after the three failures
  const auto series = sampler.series(0.0, gpu.now_s());
  ASSERT_GE(series.size(), 6u);
  // Reads 1-4 (the first a first read), then 8 (a first read again), 9, ...
  EXPECT_EQ(series[2].energy_j, 4000.0);
  EXPECT_EQ(series[3].energy_j, 9000.0);
  EXPECT_GE(series[3].t_s - series[2].t_s, 0.1 + 0.2 + 0.4);
  for (const auto& change : series) EXPECT_LT(change.t_spread_s, 0.05);
  EXPECT_EQ(errors.said(),
            (std::vector<std::string>{
                "energy counter read failed: GPU is lost; retried after 0.1 s, then less often, at "
                "most every 10 s (windows without a counter change meanwhile are reported as "
                "unmeasured)",
                "energy counter reads work again after failing"}));
}

}  // namespace
