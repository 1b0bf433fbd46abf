// The client's schedule follower: which clock each instruction of the loop runs at, and how a
// loop that leaves its schedule (other instruction, one too many, one too few) is reported.
#include "perseus/client/schedule_follower.hpp"

#include <gtest/gtest.h>

#include "test_support.hpp"

namespace {

using perseus::client::ScheduleFollower;
using perseus::test::error_of;

perseus::wire::FrequencySchedule forward_backward(int round = 3) {
  perseus::wire::FrequencySchedule s;
  s.round = round;
  s.frequencies = {{"forward", 800}, {"backward", 600}};
  return s;
}

// Runs one iteration of `labels`; the MHz each got (-1: left as it was).
std::vector<int> iterate(ScheduleFollower& f, const std::vector<std::string>& labels) {
  std::vector<int> clocks;
  f.step_begin();
  for (const auto& label : labels) {
    const ScheduleFollower::Clock c = f.next(label);
    clocks.push_back(c.change ? c.mhz : -1);
  }
  f.step_end_departs();
  f.count_iteration();
  return clocks;
}

TEST(ScheduleFollower, LocksEachPlannedClockAndLeavesTheClockAloneWithoutASchedule) {
  ScheduleFollower f(0, false);
  EXPECT_EQ(iterate(f, {"forward", "backward"}), (std::vector<int>{-1, -1}));
  f.follow(forward_backward());
  EXPECT_EQ(iterate(f, {"forward", "backward"}), (std::vector<int>{800, 600}));
  EXPECT_FALSE(f.departed());
  EXPECT_EQ(f.window_warning(1), "");
  auto limit = forward_backward();
  limit.power_limit_w = 200.0;  // power-limit schedules set the limit once, not per instruction
  f.follow(limit);
  EXPECT_EQ(iterate(f, {"forward", "backward"}), (std::vector<int>{-1, -1}));
}

TEST(ScheduleFollower, ALoopThatRunsFewerInstructionsDepartsUntilTheNextSchedule) {
  ScheduleFollower f(2, false);
  f.follow(forward_backward());
  f.step_begin();
  EXPECT_EQ(f.next("forward").mhz, 800);
  EXPECT_TRUE(f.step_end_departs());  // one instruction of two: back to the default clock
  f.count_iteration();
  EXPECT_TRUE(f.departed());
  EXPECT_EQ(iterate(f, {"forward", "backward"}), (std::vector<int>{-1, -1}));  // stays departed
  EXPECT_EQ(f.departed_iterations(), 2u);
  EXPECT_EQ(f.window_warning(5),
            "2 of this window's 5 iterations did not follow the schedule and ran at the default "
            "clock: schedule of round 3 for rank 2: the training loop ran 1 instructions in an "
            "iteration but the schedule has 2 (expected 2 instructions: forward x1, backward x1)");
  EXPECT_EQ(f.window_warning(5), "");  // said once per window
  // The next window, still departed, says why again (it ended at "default clock: ").
  iterate(f, {"forward", "backward"});
  EXPECT_CONTAINS(f.window_warning(5),
                  "1 of this window's 5 iterations did not follow the schedule and ran at the "
                  "default clock: schedule of round 3 for rank 2: the training loop ran 1");
  f.follow(forward_backward(4));
  EXPECT_FALSE(f.departed());
  EXPECT_EQ(iterate(f, {"forward", "backward"}), (std::vector<int>{800, 600}));
}

TEST(ScheduleFollower, AnotherInstructionRunsAtTheDefaultClockAndStrictModeThrows) {
  ScheduleFollower f(0, false);
  f.follow(forward_backward());
  EXPECT_EQ(iterate(f, {"backward", "forward"}), (std::vector<int>{0, -1}));
  EXPECT_CONTAINS(f.window_warning(1),
                  "expects 'forward' as instruction 1 of the iteration, but "
                  "the training loop ran 'backward'");
  ScheduleFollower strict(0, true);
  strict.follow(forward_backward());
  strict.step_begin();
  EXPECT_CONTAINS(error_of([&] { strict.next("backward"); }), "schedule of round 3 for rank 0");
  EXPECT_FALSE(strict.departed());
}

TEST(ScheduleFollower, LabelsAStagedInstructionAsTheScheduleNamesIt) {
  ScheduleFollower f(0, false);
  EXPECT_EQ(f.label_of("forward", 1), "forward@1");  // no schedule: the instruction's own label
  f.follow(forward_backward());
  f.step_begin();
  EXPECT_EQ(f.label_of("forward", 0), "forward");      // a one-stage schedule names the kind alone
  EXPECT_EQ(f.label_of("backward", 0), "backward@0");  // not the next entry: its own label
}

}  // namespace
