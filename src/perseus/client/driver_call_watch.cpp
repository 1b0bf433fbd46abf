#include "perseus/client/driver_call_watch.hpp"

#include "perseus/util/error.hpp"

namespace perseus::client {

std::string stuck_call_warning(const RunningCall& call, const std::string& meanwhile) {
  return "the GPU driver has not returned from " + call.what + " in " + number(kDriverCallStuckS) +
         " s (a GPU that has fallen off the bus blocks NVML's callers): training goes on, " +
         meanwhile;
}

std::string left_behind_warning(const std::optional<RunningCall>& call, double bound_s,
                                bool restoring) {
  std::string message =
      "at exit, the GPU driver did not return from " +
      (call ? call->what + " (blocked for " + number(call->running_s) + " s)" : "a call") +
      " within shutdown_bound_s = " + number(bound_s) +
      " s; the client leaves it behind so that the process can end";
  if (restoring) {
    message +=
        ": the GPU may keep the clock and power limit the plan set (nvidia-smi -rgc and -pl "
        "restore them)";
  }
  return message;
}

void DriverCallWatch::begin(const char* what) {
  std::lock_guard lock(mutex_);
  what_ = what;
  began_ = std::chrono::steady_clock::now();
}

void DriverCallWatch::end() {
  std::lock_guard lock(mutex_);
  what_ = nullptr;
}

std::optional<RunningCall> DriverCallWatch::running() const {
  std::lock_guard lock(mutex_);
  if (what_ == nullptr) return std::nullopt;
  const std::chrono::duration<double> running = std::chrono::steady_clock::now() - began_;
  return RunningCall{what_, running.count()};
}

}  // namespace perseus::client
