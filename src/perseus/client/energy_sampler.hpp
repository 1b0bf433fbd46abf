// Sampling a GPU's energy counter off the training thread (architecture section 9). A real counter
// is refreshed every ~100 ms and one read blocks for ~4 ms, so the training thread never reads it:
// a sampler reads it continuously and keeps a bounded series of the value's observed changes
// (perseus/measure/counter_series.hpp), from which the reporting window attributes energy
// (perseus/measure/attribution.hpp).
//
// ThreadSampler reads any GpuBackend on its own thread (NVML, the real-time simulated GPU, a
// Python backend); the virtual-time simulated GPU has its own deterministic sampler
// (SimGpu::start_energy_sampler).
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "perseus/client/driver_call_watch.hpp"
#include "perseus/measure/counter_series.hpp"
#include "perseus/util/bounded_thread.hpp"

namespace perseus::client {

class GpuBackend;

struct SamplerOptions {
  double min_period_s = 0.0;     // at least this long from one read's start to the next
  std::size_t capacity = 65536;  // changes kept (oldest dropped first)
};

class EnergySampler {
 public:
  virtual ~EnergySampler() = default;
  // The observed changes from the last one at or before `from_s` through `to_s` (a virtual
  // sampler first catches up with its GPU's time). Never blocks on the counter.
  virtual std::vector<measure::CounterSample> series(double from_s, double to_s) = 0;
  // Memory bound: changes before t_s (but the last one before it) are no longer needed; clock
  // samples before t_s neither.
  virtual void forget_before(double t_s) = 0;
  // The clock samples with from_s <= t <= to_s, oldest first (empty: the backend reports none).
  virtual std::vector<measure::ClockSample> clocks(double /*from_s*/, double /*to_s*/) {
    return {};
  }
  // Stops sampling by `deadline`; false when a read still blocks in the driver then (the sampler
  // and its backend must then stay alive for good: BoundedThread). Default: nothing to stop.
  virtual bool stop_until(std::chrono::steady_clock::time_point /*deadline*/) { return true; }
  // The driver call the sampler is blocked in now (nullopt: none).
  virtual std::optional<RunningCall> running_call() const { return std::nullopt; }
  // True once the sampler found that its GPU has no energy counter (NoEnergyCounter): nothing
  // is measured, and the sampler has said why.
  virtual bool no_counter() const { return false; }
};

// Retries of a read that failed (a transient driver error, or a GPU that is lost): after
// kFirstRetryS, each wait twice the last, at most kMaxRetryS.
class ReadBackoff {
 public:
  static constexpr double kFirstRetryS = 0.1;
  static constexpr double kMaxRetryS = 10.0;
  // A read failed; true when it starts a streak of failures (to be said).
  bool failed();
  // A read worked; true when it ends a streak (to be said).
  bool worked();
  double wait_s() const { return wait_s_; }  // before the next try (0: not failing)
  // "retried after 0.1 s, then less often, at most every 10 s"
  static std::string policy();

 private:
  double wait_s_ = 0.0;
};

// Reads `gpu.total_energy_j()` (timed by `gpu.now_s()`) on its own thread until destroyed, and
// `gpu.read_clock()` after each read. A failing counter or clock read is retried (ReadBackoff);
// the first failure of a streak and the first read that works again are passed to `on_error`.
// A GPU without an energy counter (NoEnergyCounter) is passed to it once, and no longer read.
// The energy spent across a gap in the counter reads is in the interval from the last change
// before it to the first after it. A counter that goes down starts the series again
// (CounterSeries::add_read); the first time, that is passed to `on_error` too.
class ThreadSampler : public EnergySampler {
 public:
  ThreadSampler(GpuBackend& gpu, SamplerOptions options,
                std::function<void(const std::string&)> on_error = {});
  ~ThreadSampler() override;
  ThreadSampler(const ThreadSampler&) = delete;
  ThreadSampler& operator=(const ThreadSampler&) = delete;

  std::vector<measure::CounterSample> series(double from_s, double to_s) override;
  void forget_before(double t_s) override;
  std::vector<measure::ClockSample> clocks(double from_s, double to_s) override;
  bool stop_until(std::chrono::steady_clock::time_point deadline) override;
  std::optional<RunningCall> running_call() const override { return calls_.running(); }
  bool no_counter() const override { return no_counter_; }

 private:
  void request_stop();
  void run();
  // One counter read (then a clock read) into the series (`after_gap`: the first after failed
  // reads); the read's error, else "". Throws NoEnergyCounter for a GPU without a counter.
  std::string read_counter(bool after_gap);
  // Notes and says that the GPU has no counter (`why`), then waits to be stopped.
  void without_counter(const std::string& why);
  // One clock read after a counter read (the lock is taken only to keep it); none once the
  // backend reported no clock (read_clocks_), nor while a failed one waits for its retry.
  void read_clock();
  // The first counter that went down, to `on_error_` (the lock not held).
  void report_went_down(double before_j, double after_j);

  GpuBackend& gpu_;
  SamplerOptions options_;
  std::function<void(const std::string&)> on_error_;
  std::mutex mutex_;
  std::condition_variable wake_;
  measure::CounterSeries series_;
  std::deque<measure::ClockSample> clocks_;  // at most options_.capacity, oldest dropped first
  // Sampler thread only:
  bool read_clocks_ = true;
  bool said_went_down_ = false;
  ReadBackoff counter_backoff_, clock_backoff_;
  std::chrono::steady_clock::time_point clock_retry_at_;
  bool stopping_ = false;
  std::atomic<bool> no_counter_ = false;
  DriverCallWatch calls_;
  BoundedThread thread_;  // last: joined before the members it uses go
};

}  // namespace perseus::client
