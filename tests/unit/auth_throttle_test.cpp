#include "perseus/server/auth_throttle.hpp"

#include <gtest/gtest.h>

#include <string>

using perseus::server::AuthThrottle;
using perseus::server::kAuthFailureWindow;
using perseus::server::kAuthLockout;
using perseus::server::kMaxAuthFailures;
using perseus::server::kMaxTrackedPeers;

namespace {

AuthThrottle::Clock::time_point at(double s) {
  return AuthThrottle::Clock::time_point{} +
         std::chrono::duration_cast<AuthThrottle::Clock::duration>(
             std::chrono::duration<double>(s));
}

}  // namespace

TEST(AuthThrottle, LocksOutAfterTooManyFailuresInAWindowAndForAWhile) {
  AuthThrottle t;
  for (std::size_t i = 0; i < kMaxAuthFailures; ++i) {
    EXPECT_FALSE(t.failed("10.0.0.1", at(100.0 + 0.01 * i)));
  }
  EXPECT_FALSE(t.locked_for("10.0.0.1", at(101.0)));
  EXPECT_TRUE(t.failed("10.0.0.1", at(101.0)));  // one too many
  ASSERT_TRUE(t.locked_for("10.0.0.1", at(101.0)));
  EXPECT_NEAR(*t.locked_for("10.0.0.1", at(103.0)), kAuthLockout.count() - 2.0, 1e-6);
  EXPECT_FALSE(t.locked_for("10.0.0.2", at(101.0)));  // others go on
  EXPECT_FALSE(t.locked_for("10.0.0.1", at(101.0 + kAuthLockout.count())));
  // After the lockout, counting starts again from nothing.
  EXPECT_FALSE(t.failed("10.0.0.1", at(112.0)));
}

TEST(AuthThrottle, FailuresSpreadOverWindowsNeverLockOut) {
  AuthThrottle t;
  double s = 0.0;
  for (int window = 0; window < 5; ++window) {
    for (std::size_t i = 0; i < kMaxAuthFailures; ++i) EXPECT_FALSE(t.failed("a", at(s + 0.1 * i)));
    s += kAuthFailureWindow.count();
  }
  EXPECT_FALSE(t.locked_for("a", at(s)));
}

TEST(AuthThrottle, AnUnknownPeerIsNeverLockedOut) {
  AuthThrottle t;
  for (std::size_t i = 0; i <= 2 * kMaxAuthFailures; ++i) EXPECT_FALSE(t.failed("", at(1.0)));
  EXPECT_FALSE(t.locked_for("", at(1.0)));
}

TEST(AuthThrottle, RemembersABoundedNumberOfPeersAndKeepsTheLockedOnes) {
  AuthThrottle t;
  for (std::size_t i = 0; i <= kMaxAuthFailures; ++i) t.failed("a-locked", at(0.0));
  ASSERT_TRUE(t.locked_for("a-locked", at(1.0)));
  // Three times as many addresses as are remembered, each failing once during the lockout: the
  // others are forgotten to make room (each new one counts from nothing), the locked one stays.
  for (std::size_t i = 0; i < 3 * kMaxTrackedPeers; ++i) {
    t.failed("peer" + std::to_string(i),
             at(1.0 + 8.0 * static_cast<double>(i) / (3 * kMaxTrackedPeers)));
  }
  EXPECT_TRUE(t.locked_for("a-locked", at(9.0)));
  for (std::size_t i = 0; i < kMaxAuthFailures; ++i) EXPECT_FALSE(t.failed("peer0", at(9.0)));
}
