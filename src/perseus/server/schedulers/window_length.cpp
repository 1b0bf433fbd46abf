#include <algorithm>
#include <cmath>
#include <numeric>

#include "perseus/server/schedulers/schedulers.hpp"
#include "perseus/util/error.hpp"
#include "perseus/wire/protocol.hpp"

namespace perseus::server::schedulers {

namespace {

// The longest window of the round, in seconds.
double longest_s(const std::vector<StageResult>& results) {
  double out = 0.0;
  for (const StageResult& r : results) {
    out = std::max(out, std::accumulate(r.iter_time.begin(), r.iter_time.end(), 0.0));
  }
  return out;
}

}  // namespace

WindowLength::WindowLength(const ArgReader& args)
    : min_s_(args.number("min_window", non_negative, "a number >= 0 (seconds)", kDefaultMinS)) {}

bool WindowLength::measure_again(const std::vector<StageResult>& results) {
  if (too_short(results)) return true;
  return unmeasured(results);
}

bool WindowLength::too_short(const std::vector<StageResult>& results) {
  const double window_s = longest_s(results);
  std::size_t iterations = 0;
  for (const StageResult& r : results) iterations = std::max(iterations, r.iter_time.size());
  if (!(window_s > 0.0) || window_s >= min_s_) return false;
  if (report_every_ && static_cast<int>(iterations) < *report_every_) return false;  // not followed
  if (report_every_ == wire::kMaxReportEvery) return false;
  const double wanted = std::ceil(kSpare * min_s_ / window_s * static_cast<double>(iterations));
  report_every_ = static_cast<int>(std::min<double>(wanted, wire::kMaxReportEvery));
  return true;
}

bool WindowLength::unmeasured(const std::vector<StageResult>& results) {
  std::string ranks;
  for (std::size_t stage = 0; stage < results.size(); ++stage) {
    for (int rank : results[stage].unmeasured_ranks) {
      ranks += (ranks.empty() ? "rank " : ", rank ") + std::to_string(rank) + " (stage " +
               std::to_string(stage) + ")";
    }
  }
  if (ranks.empty()) {
    unmeasured_rounds_ = 0;
    return false;
  }
  if (++unmeasured_rounds_ < kMaxUnmeasuredRounds) return true;
  throw Error("the GPU energy counter of " + ranks + " did not change in " +
              std::to_string(kMaxUnmeasuredRounds) + " reporting windows in a row, the last " +
              number(longest_s(results)) +
              " s long: a counter refreshed less often than that (a real GPU's, about every "
              "100 ms: min_window asks for longer windows), a counter that is stuck, a client "
              "whose counter reads fail, or a GPU without an energy counter (before Volta; the "
              "client's log says which); the energies of such windows are unknown, not 0 J");
}

nlohmann::json WindowLength::status() const {
  return report_every_ ? nlohmann::json(*report_every_) : nlohmann::json(nullptr);
}

}  // namespace perseus::server::schedulers
