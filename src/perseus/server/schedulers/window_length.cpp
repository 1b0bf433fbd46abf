#include <algorithm>
#include <cmath>
#include <numeric>

#include "perseus/server/schedulers/schedulers.hpp"
#include "perseus/wire/protocol.hpp"

namespace perseus::server::schedulers {

WindowLength::WindowLength(const ArgReader& args)
    : min_s_(args.number("min_window", non_negative, "a number >= 0 (seconds)", kDefaultMinS)) {}

bool WindowLength::too_short(const std::vector<StageResult>& results) {
  double window_s = 0.0;
  std::size_t iterations = 0;
  for (const StageResult& r : results) {
    window_s = std::max(window_s, std::accumulate(r.iter_time.begin(), r.iter_time.end(), 0.0));
    iterations = std::max(iterations, r.iter_time.size());
  }
  if (!(window_s > 0.0) || window_s >= min_s_) return false;
  if (report_every_ && static_cast<int>(iterations) < *report_every_) return false;  // not followed
  if (report_every_ == wire::kMaxReportEvery) return false;
  const double wanted = std::ceil(kSpare * min_s_ / window_s * static_cast<double>(iterations));
  report_every_ = static_cast<int>(std::min<double>(wanted, wire::kMaxReportEvery));
  return true;
}

nlohmann::json WindowLength::status() const {
  return report_every_ ? nlohmann::json(*report_every_) : nlohmann::json(nullptr);
}

}  // namespace perseus::server::schedulers
