// The client's clock thread (architecture section 7): applies SM clock locks and power limits to a
// GpuBackend on a background thread, so the training thread never blocks on the driver. Requests
// coalesce: only the latest clock and the latest power limit asked for are applied, and a request
// equal to what is already applied or pending wakes nothing and makes no driver call (a plan that
// keeps one clock costs the training thread a lock, not a thread handoff per instruction). flush()
// waits until every request made so far took effect. A synchronous backend (the simulator, whose
// measurements would otherwise depend on thread timing, GpuBackend::synchronous_clocks) gets no
// thread: each request is applied on the caller's thread before it returns, so a clock change
// costs the caller the backend's call and no thread handoff (which on a loaded machine waits for
// a core).
//
// Backend failures never reach the training thread: the controller passes each failure's message
// to `on_error` (on the clock thread) and keeps going; the failed setting counts as unknown, so
// the next request for it is tried again.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
#include <string>

#include "perseus/client/driver_call_watch.hpp"
#include "perseus/client/gpu_backend.hpp"
#include "perseus/util/bounded_thread.hpp"

namespace perseus::client {

class FrequencyController {
 public:
  // Starts the clock thread, unless gpu.synchronous_clocks(). `gpu` must outlive the controller.
  explicit FrequencyController(GpuBackend& gpu,
                               std::function<void(const std::string&)> on_error = {});
  // Applies what was requested, then stops the thread (no reset: the owner decides).
  ~FrequencyController();
  FrequencyController(const FrequencyController&) = delete;
  FrequencyController& operator=(const FrequencyController&) = delete;

  void lock_clock(int mhz);
  void reset_clock();
  void set_power_limit(double watts);
  void reset_power_limit();

  // Blocks until every request made before the call was applied (or failed).
  void flush();
  // Applies pending requests and stops the thread; later requests are ignored. Idempotent.
  void stop();
  // stop(), giving up at `deadline`: false when a driver call still blocks then (the controller
  // and its backend must then stay alive for good: BoundedThread).
  bool stop_until(std::chrono::steady_clock::time_point deadline);
  // The driver call the clock thread is blocked in now (nullopt: none).
  std::optional<RunningCall> running_call() const { return calls_.running(); }

  // Number of driver calls made so far (clock and power-limit changes), for tests and stats.
  std::uint64_t applied_changes() const;

 private:
  // A setting: nullopt = reset to the default; a value = lock/limit to it.
  template <typename T>
  struct Setting {
    bool pending = false;
    std::optional<T> wanted;
    bool known = false;  // `applied` reflects the device (false at start and after a failure)
    std::optional<T> applied;
    // Whether asking for `value` changes nothing: it is what the pending request or, with none,
    // the device already has.
    bool settled_at(const std::optional<T>& value) const {
      return pending ? wanted == value : known && applied == value;
    }
  };
  // Requests `value` for `setting` unless it is settled there already (no wake-up, no call).
  template <typename T>
  void ask(Setting<T>& setting, std::optional<T> value);

  void run();
  // Applies the pending requests (made under `lock`, which it releases while calling the backend
  // and holds again on return) and wakes flush().
  void apply_pending(std::unique_lock<std::mutex>& lock);
  void request_stop();

  GpuBackend& gpu_;
  std::function<void(const std::string&)> on_error_;
  mutable std::mutex mutex_;
  std::condition_variable wake_, done_;
  Setting<int> clock_;
  Setting<double> limit_;
  std::uint64_t requested_ = 0, completed_ = 0, changes_ = 0;
  bool stopping_ = false, stopped_ = false;
  DriverCallWatch calls_;
  std::optional<BoundedThread> thread_;  // last: joined before the members it uses go; none for
                                         // a synchronous backend
};

}  // namespace perseus::client
