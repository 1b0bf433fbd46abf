// Where the training loop is in the frequency schedule of the round in use, and how it left it
// (architecture section 7): each instruction the loop starts is matched against the schedule's
// next (label, MHz) entry. A loop that runs other instructions, in another order or count, runs
// the rest of the iteration at the default clock; strict mode throws instead, and otherwise each
// reporting window in which it happened gets one warning with its first difference. The caller
// applies the clocks; this class only decides them.
#pragma once

#include <cstddef>
#include <optional>
#include <string>

#include "perseus/wire/protocol.hpp"

namespace perseus::client {

class ScheduleFollower {
 public:
  ScheduleFollower(int rank, bool strict) : rank_(rank), strict_(strict) {}

  // A new round's schedule, followed from the next instruction on / no schedule (the default
  // clock). Either clears a departure.
  void follow(wire::FrequencySchedule schedule);
  void drop();
  const std::optional<wire::FrequencySchedule>& schedule() const { return schedule_; }
  // The loop left the schedule: it runs at the default clock until the next follow() or drop().
  bool departed() const { return departed_; }

  // The label the loop's instruction is measured and matched under: the schedule's next entry
  // when it names this instruction (the same label, or the kind alone on a GPU that runs one
  // stage, for a loop that passes the stage anyway), else the instruction's own label.
  std::string label_of(const std::string& kind, int stage) const;

  // What the next instruction, `label`, runs at; moves on to the entry after it.
  struct Clock {
    bool change = false;  // false: leave the clock as it is (no schedule, a power-limit one, or
                          // already departed)
    int mhz = 0;          // with change: the clock to lock, or 0 for the default clock
  };
  Clock next(const std::string& label);

  void step_begin() { position_ = 0; }
  // At the end of an iteration: true when it ran fewer instructions than the schedule has (it
  // departs; the caller returns to the default clock).
  bool step_end_departs();
  // At the end of an iteration, after step_end_departs: counts it if it ran departed.
  void count_iteration();
  // At a window's end: the one warning for the window's departures (empty when none), naming how
  // many of its `window_iterations` departed and the first difference.
  std::string window_warning(std::size_t window_iterations);
  // Iterations so far that departed.
  std::size_t departed_iterations() const { return departed_iterations_; }

 private:
  // Records a departure: strict throws; otherwise the window keeps its first difference.
  void note(const std::string& what);
  // "expected 12 instructions: forward x6, backward x6".
  std::string shape() const;
  bool matches(const std::string& label);

  int rank_;
  bool strict_;
  std::optional<wire::FrequencySchedule> schedule_;
  std::size_t position_ = 0;  // next schedule entry
  bool departed_ = false;
  std::size_t departed_iterations_ = 0;
  int window_departed_ = 0;       // of them, in the open reporting window
  std::string departure_reason_;  // why it departed from the schedule it follows
};

}  // namespace perseus::client
