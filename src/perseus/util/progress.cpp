#include "perseus/util/progress.hpp"

#include <unistd.h>

#include <algorithm>
#include <cstdio>

namespace perseus {

ProgressBar::ProgressBar(std::string label, long total)
    : label_(std::move(label)),
      total_(total),
      enabled_(isatty(fileno(stderr)) != 0),
      start_(std::chrono::steady_clock::now()),
      last_draw_(start_ - std::chrono::seconds(1)) {}

ProgressBar::~ProgressBar() {
  finish();
}

void ProgressBar::update(long done) {
  if (!enabled_ || finished_) return;
  auto now = std::chrono::steady_clock::now();
  if (now - last_draw_ < std::chrono::milliseconds(50)) return;
  last_draw_ = now;
  draw(done);
}

void ProgressBar::draw(long done) {
  double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  if (total_ <= 0) {
    std::fprintf(stderr, "\r%s %ld steps %.1fs", label_.c_str(), done, elapsed);
  } else {
    double frac = std::clamp(static_cast<double>(done) / static_cast<double>(total_), 0.0, 1.0);
    constexpr int kWidth = 30;
    int filled = static_cast<int>(frac * kWidth);
    std::string bar(static_cast<size_t>(filled), '#');
    bar.append(static_cast<size_t>(kWidth - filled), '.');
    std::fprintf(stderr, "\r%s [%s] %3.0f%% %ld/%ld %.1fs", label_.c_str(), bar.c_str(),
                 frac * 100.0, done, total_, elapsed);
  }
  std::fflush(stderr);
}

void ProgressBar::finish() {
  if (!enabled_ || finished_) return;
  finished_ = true;
  std::fprintf(stderr, "\r\033[K");
  std::fflush(stderr);
}

}  // namespace perseus
