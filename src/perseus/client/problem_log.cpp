#include "perseus/client/problem_log.hpp"

#include <cstdio>
#include <utility>

#include "perseus/util/error.hpp"

namespace perseus::client {

void ProblemLog::log(const std::string& message) const {
  {
    std::lock_guard lock(mutex_);
    if (silenced_) return;
  }
  if (sink_) {
    sink_(message);
    return;
  }
  const std::string line = "perseus: warning: " + message + "\n";
  std::fwrite(line.data(), 1, line.size(), stderr);
  std::fflush(stderr);
}

void ProblemLog::warn_once(const std::string& message) {
  {
    std::lock_guard lock(mutex_);
    if (!logged_.insert(message).second) return;
  }
  log(message);
}

void ProblemLog::local_problem(const std::string& message) {
  if (strict_) throw Error(message);
  warn_once(message);
}

void ProblemLog::clock_error(const std::string& message) {
  const std::string text = "cannot apply the clock setting: " + message;
  if (strict_) {
    std::lock_guard lock(mutex_);
    if (pending_.empty()) pending_ = text;
    return;
  }
  warn_once(text);
}

void ProblemLog::silence() {
  std::lock_guard lock(mutex_);
  silenced_ = true;
}

void ProblemLog::rethrow_clock_error() {
  if (!strict_) return;
  std::string error;
  {
    std::lock_guard lock(mutex_);
    std::swap(error, pending_);
  }
  if (!error.empty()) throw Error(error);
}

}  // namespace perseus::client
