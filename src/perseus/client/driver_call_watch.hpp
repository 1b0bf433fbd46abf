// Which driver call a background thread (the energy sampler, the clock thread) is blocked in and
// for how long, read from other threads: a driver that stops answering (NVML on a GPU that has
// fallen off the bus blocks its callers for good) is said to the user, not waited for.
#pragma once

#include <chrono>
#include <mutex>
#include <optional>
#include <string>

namespace perseus::client {

// A call that has not returned: what it is ("an energy counter read") and for how long.
struct RunningCall {
  std::string what;
  double running_s = 0.0;
};

// A driver call that runs this long has stopped answering (NVML's calls take milliseconds).
inline constexpr double kDriverCallStuckS = 2.0;
// A driver call that runs this long is blocked, not slow: what a window without a counter change
// blames on the read in flight (an H100's counter read takes about 4 ms).
inline constexpr double kDriverCallBlockedS = 0.25;

// The warning for `call`, stuck for kDriverCallStuckS; `meanwhile`: how training goes on.
std::string stuck_call_warning(const RunningCall& call, const std::string& meanwhile);
// The warning for `call` (nullopt: some call) not returned within `bound_s` at exit, left behind;
// `restoring`: the client was to restore the clock and power limit.
std::string left_behind_warning(const std::optional<RunningCall>& call, double bound_s,
                                bool restoring);

class DriverCallWatch {
 public:
  // The calling thread starts `what` (a string literal) / returned from it.
  void begin(const char* what);
  void end();
  // The call running now (nullopt: none).
  std::optional<RunningCall> running() const;

  // begin() and end() around one call.
  class Scope {
   public:
    Scope(DriverCallWatch& watch, const char* what) : watch_(watch) { watch_.begin(what); }
    ~Scope() { watch_.end(); }
    Scope(const Scope&) = delete;
    Scope& operator=(const Scope&) = delete;

   private:
    DriverCallWatch& watch_;
  };

 private:
  mutable std::mutex mutex_;
  const char* what_ = nullptr;  // nullptr: no call running
  std::chrono::steady_clock::time_point began_;
};

}  // namespace perseus::client
