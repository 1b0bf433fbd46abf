// A terminal progress bar for long-running commands. It draws on stderr only when stderr is a
// terminal, so piped or redirected runs stay quiet.
#pragma once

#include <chrono>
#include <string>

namespace perseus {

class ProgressBar {
 public:
  // `total` is the expected number of steps (0 when unknown).
  ProgressBar(std::string label, long total);
  ~ProgressBar();
  ProgressBar(const ProgressBar&) = delete;
  ProgressBar& operator=(const ProgressBar&) = delete;

  // Reports that `done` steps are complete; redraws at most ~20 times per second.
  void update(long done);
  // Same, also changing the expected total (when it becomes known while running).
  void update(long done, long total) {
    total_ = total;
    update(done);
  }
  // Clears the bar line.
  void finish();

  bool enabled() const { return enabled_; }

 private:
  void draw(long done);

  std::string label_;
  long total_;
  bool enabled_;
  bool finished_ = false;
  std::chrono::steady_clock::time_point start_;
  std::chrono::steady_clock::time_point last_draw_;
};

}  // namespace perseus
