// The client's warnings and its failure policy: a problem is logged once (to the user's log
// callback, or to stderr) and training goes on; in strict mode it throws instead, and a failure on
// the clock thread is kept and thrown on the training thread at its next hook. Thread-safe: the
// clock and sampler threads report here too.
#pragma once

#include <functional>
#include <mutex>
#include <set>
#include <string>

namespace perseus::client {

class ProblemLog {
 public:
  // `sink` receives each message (empty: "perseus: warning: ..." on stderr).
  ProblemLog(std::function<void(const std::string&)> sink, bool strict)
      : sink_(std::move(sink)), strict_(strict) {}

  // Logs `message` every time.
  void log(const std::string& message) const;
  // Logs `message` the first time it occurs.
  void warn_once(const std::string& message);
  // A problem on the training thread (a backend call, an instruction out of order): strict
  // throws perseus::Error, else warns once.
  void local_problem(const std::string& message);
  // A failure on the clock thread: strict keeps the first for rethrow_clock_error(), else warns
  // once.
  void clock_error(const std::string& message);
  // Strict: throws the kept clock-thread failure, if any (on the training thread).
  void rethrow_clock_error();
  // Drops every later message: for a thread left behind in a driver call, which may return after
  // the sink's owner is gone (the Python interpreter at exit).
  void silence();

 private:
  std::function<void(const std::string&)> sink_;
  bool strict_;
  mutable std::mutex mutex_;
  bool silenced_ = false;
  std::set<std::string> logged_;
  std::string pending_;  // strict: a clock-thread failure to throw on the training thread
};

}  // namespace perseus::client
