#include "perseus/client/driver_call_watch.hpp"

namespace perseus::client {

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
