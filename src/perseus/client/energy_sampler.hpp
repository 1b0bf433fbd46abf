// Sampling a GPU's energy counter off the training thread (architecture section 9). A real counter
// is refreshed every ~100 ms and one read blocks for ~4 ms, so the training thread never reads it:
// a sampler reads it continuously and keeps a bounded series of the value's observed changes,
// from which the reporting window attributes energy (perseus/client/attribution.hpp).
//
// A change is timestamped at the midpoint between the previous read and the read that saw it
// (each read's own midpoint), with half their distance as its spread: the counter changed
// somewhere in that range, at any point alike (its refreshes keep their own schedule), so the
// attribution can average over it (perseus/client/attribution_model.hpp). The first
// read is not a change: a real counter refreshes on its own schedule, so a sampler that starts
// between two refreshes first reads a value up to a period old; taken as a change at the read's
// time, the next change's full period of energy would be charged to the part of it after the
// read (measured on H100s: the first instruction of a window got up to 6x its energy).
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
#include "perseus/util/bounded_thread.hpp"

namespace perseus::client {

class GpuBackend;

struct CounterSample {
  double t_s = 0.0;       // when the counter took this value (backend clock)
  double energy_j = 0.0;  // the counter's value
  // The value was taken at a time in [t_s - t_spread_s, t_s + t_spread_s], uniformly (0: at t_s).
  double t_spread_s = 0.0;
};

// A first-order response is modelled back to this many time constants (the weight beyond:
// e^-8 = 0.03 %, as if the power there stayed what it was).
inline constexpr double kFirstOrderReachTaus = 8.0;

// When a counter's changes report their energy (attribution.hpp): a change observed at t holds
// the energy spent up to t - lag_s, averaged over window_s around that time (0, 0: exactly up to
// t). A real counter both trails and smooths (NvmlGpu: kNvmlCounterResponse).
struct CounterResponse {
  double lag_s = 0.0;
  double window_s = 0.0;
  // > 0: a first-order response instead of the window: the energy spent s before t - lag_s is
  // held by the change with probability 1 - exp(-s / time_constant_s) (window_s is then 0).
  double time_constant_s = 0.0;
};

// The GPU's SM clock at one moment, and whether the driver held it below what it would otherwise
// run at: the power limit, thermal or hardware slowdown (NVML's clock event reasons).
struct ClockReading {
  int sm_mhz = 0;
  bool held_down = false;
};

struct ClockSample {
  double t_s = 0.0;  // the middle of the read (backend clock)
  ClockReading clock;
};

struct SamplerOptions {
  double min_period_s = 0.0;     // at least this long from one read's start to the next
  std::size_t capacity = 65536;  // changes kept (oldest dropped first)
};

// The observed changes of a counter. Not thread-safe (the samplers lock around it).
class CounterSeries {
 public:
  explicit CounterSeries(std::size_t capacity) : capacity_(capacity) {}
  // One read that began at `begin_s`, ended at `end_s` and returned `energy_j`; a change from the
  // previous read's value is kept (the first read keeps nothing, nor does the first `after_gap`,
  // a gap of failed reads: the change may lie anywhere in it). A value below the previous one
  // means the counter started again (a GPU reset, or a backend whose total_energy_j is no running
  // total): nobody knows the energy across it, so the series starts again too, the read counting
  // as a first read, and this returns false.
  bool add_read(double begin_s, double end_s, double energy_j, bool after_gap = false);
  // An exactly timed value (ideal counters).
  void add_exact(double t_s, double energy_j);
  // The changes with from_s < t <= to_s, preceded by the last change at or before from_s.
  std::vector<CounterSample> between(double from_s, double to_s) const;
  // Drops changes before t_s except the last one before it.
  void forget_before(double t_s);
  std::size_t size() const { return samples_.size(); }
  std::size_t reads() const { return reads_; }
  double last_value_j() const { return last_value_j_; }  // of the last read (0 before any)

 private:
  void push(const CounterSample& sample);

  std::size_t capacity_;
  std::deque<CounterSample> samples_;
  bool have_read_ = false;
  double last_mid_s_ = 0.0, last_value_j_ = 0.0;
  std::size_t reads_ = 0;
};

class EnergySampler {
 public:
  virtual ~EnergySampler() = default;
  // The observed changes from the last one at or before `from_s` through `to_s` (a virtual
  // sampler first catches up with its GPU's time). Never blocks on the counter.
  virtual std::vector<CounterSample> series(double from_s, double to_s) = 0;
  // Memory bound: changes before t_s (but the last one before it) are no longer needed; clock
  // samples before t_s neither.
  virtual void forget_before(double t_s) = 0;
  // The clock samples with from_s <= t <= to_s, oldest first (empty: the backend reports none).
  virtual std::vector<ClockSample> clocks(double /*from_s*/, double /*to_s*/) { return {}; }
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

  std::vector<CounterSample> series(double from_s, double to_s) override;
  void forget_before(double t_s) override;
  std::vector<ClockSample> clocks(double from_s, double to_s) override;
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
  CounterSeries series_;
  std::deque<ClockSample> clocks_;  // at most options_.capacity, oldest dropped first
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
