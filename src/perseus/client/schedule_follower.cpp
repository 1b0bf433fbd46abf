#include "perseus/client/schedule_follower.hpp"

#include <map>
#include <utility>
#include <vector>

#include "perseus/util/error.hpp"

namespace perseus::client {

void ScheduleFollower::follow(wire::FrequencySchedule schedule) {
  schedule_ = std::move(schedule);
  departed_ = false;
  departure_reason_.clear();
}

void ScheduleFollower::drop() {
  schedule_.reset();
  departed_ = false;
  departure_reason_.clear();
}

std::string ScheduleFollower::label_of(const std::string& kind, int stage) const {
  if (schedule_ && position_ < schedule_->frequencies.size()) {
    const std::string& planned = schedule_->frequencies[position_].first;
    if (stage >= 0 && planned == kind) return planned;
  }
  return wire::instruction_label(kind, stage);
}

ScheduleFollower::Clock ScheduleFollower::next(const std::string& label) {
  Clock clock;
  if (schedule_ && !departed_ && !schedule_->power_limit_w) {
    clock.change = true;
    if (matches(label)) {
      clock.mhz = schedule_->frequencies[position_].second;
    } else {
      departed_ = true;
    }
  }
  ++position_;
  return clock;
}

bool ScheduleFollower::matches(const std::string& label) {
  const auto& f = schedule_->frequencies;
  if (position_ < f.size() && f[position_].first == label) return true;
  std::string expected = position_ < f.size() ? "'" + f[position_].first + "'" : "nothing more";
  std::string hint;
  if (position_ < f.size() && wire::parse_instruction_label(f[position_].first).stage >= 0 &&
      wire::parse_instruction_label(label).stage < 0) {
    hint = " (this GPU runs several stages: pass the stage index with the instruction)";
  }
  note("the schedule expects " + expected + " as instruction " + std::to_string(position_ + 1) +
       " of the iteration, but the training loop ran '" + label + "'" + hint);
  return false;
}

bool ScheduleFollower::step_end_departs() {
  if (!schedule_ || departed_ || schedule_->power_limit_w ||
      position_ == schedule_->frequencies.size()) {
    return false;
  }
  note("the training loop ran " + std::to_string(position_) +
       " instructions in an iteration but the schedule has " +
       std::to_string(schedule_->frequencies.size()));
  departed_ = true;
  return true;
}

void ScheduleFollower::count_iteration() {
  if (!departed_) return;
  ++departed_iterations_;
  ++window_departed_;
}

std::string ScheduleFollower::window_warning(std::size_t window_iterations) {
  if (window_departed_ == 0) return "";
  std::string warning =
      std::to_string(window_departed_) + " of this window's " + std::to_string(window_iterations) +
      " iterations did not follow the schedule and ran at the default clock: " + departure_reason_;
  window_departed_ = 0;
  return warning;
}

void ScheduleFollower::note(const std::string& what) {
  std::string message = "schedule of round " + std::to_string(schedule_->round) + " for rank " +
                        std::to_string(rank_) + ": " + what + " (" + shape() + ")";
  if (strict_) throw Error(message);
  if (departure_reason_.empty()) departure_reason_ = message;
}

std::string ScheduleFollower::shape() const {
  std::map<std::string, int> count;
  std::vector<std::string> order;
  for (const auto& [name, mhz] : schedule_->frequencies) {
    if (count[name]++ == 0) order.push_back(name);
  }
  std::string out = "expected " + std::to_string(schedule_->frequencies.size()) + " instructions";
  for (std::size_t i = 0; i < order.size(); ++i) {
    out += (i == 0 ? ": " : ", ") + order[i] + " x" + std::to_string(count[order[i]]);
  }
  return out;
}

}  // namespace perseus::client
