// When the client says a locked clock was not reached: only a shortfall the driver explains.
#include <gtest/gtest.h>

#include "perseus/client/measurement_window.hpp"

namespace {

using perseus::client::ClockSummary;

ClockSummary summary(int samples, double mean_mhz, double held_down_share, int locked_mhz) {
  ClockSummary c;
  c.samples = samples;
  c.mean_mhz = mean_mhz;
  c.held_down_share = held_down_share;
  c.locked_mhz = locked_mhz;
  return c;
}

TEST(ClockSummary, ShortfallHeldDownByTheDriverIsNotReached) {
  EXPECT_TRUE(summary(20, 1200.0, 1.0, 1395).locked_clock_not_reached());
  EXPECT_TRUE(summary(5, 1360.0, 0.5, 1395).locked_clock_not_reached());  // 2.5 % short, half held
}

// The clock thread's lag: readings at the previous instruction's lower clock, nothing held down.
TEST(ClockSummary, ShortfallWithoutTheDriverHoldingTheClockIsTheLocksLag) {
  EXPECT_FALSE(summary(20, 1200.0, 0.0, 1395).locked_clock_not_reached());
  EXPECT_FALSE(summary(20, 1200.0, 0.45, 1395).locked_clock_not_reached());
}

TEST(ClockSummary, SmallShortfallsAndFewReadingsSayNothing) {
  EXPECT_FALSE(summary(20, 1370.0, 1.0, 1395).locked_clock_not_reached());  // 1.8 % short
  EXPECT_FALSE(summary(4, 1200.0, 1.0, 1395).locked_clock_not_reached());
}

TEST(ClockSummary, NoSingleLockNothingToReach) {
  EXPECT_FALSE(summary(20, 1200.0, 1.0, 0).locked_clock_not_reached());   // default clocks
  EXPECT_FALSE(summary(20, 1200.0, 1.0, -1).locked_clock_not_reached());  // several locks
}

}  // namespace
