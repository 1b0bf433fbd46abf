// Slack reclamation's window bookkeeping (plan/lazy_windows.hpp): PositionSet's drains against a
// std::set doing the same (limits on and around word edges, members inserted by a visit and
// visited after it, words taken in order), and Staleness's bounds against sums over the moves
// it was told of.
#include "perseus/plan/lazy_windows.hpp"

#include <gtest/gtest.h>

#include <random>
#include <set>
#include <vector>

namespace perseus::plan::detail {
namespace {

// Drains `set` below (or above) `limit` and returns the visits; a visit of a member divisible
// by 7 inserts the member `step` ahead of it (when inside 0..n-1), as a propagation would.
// Checks that every member inserted beyond the limit is visited after its insertion.
std::vector<int> drain(PositionSet& set, int n, int limit, bool below, int step) {
  std::vector<int> visited;
  std::set<int> owed;  // inserted beyond the limit and not visited since
  const auto visit = [&](int i) {
    visited.push_back(i);
    owed.erase(i);
    const int next = below ? i + step : i - step;
    if (i % 7 == 0 && next >= 0 && next < n) {
      set.insert_ahead(next);
      if (below ? next < limit : next > limit) owed.insert(next);
    }
  };
  if (below)
    set.drain_below(limit, visit);
  else
    set.drain_above(limit, visit);
  EXPECT_TRUE(owed.empty()) << "a member inserted during the drain was not visited after it";
  return visited;
}

// The same on a std::set: every member below (above) the limit, nearest the start first, with
// the inserted ones too.
std::vector<int> drain(std::set<int>& set, int n, int limit, bool below, int step) {
  std::vector<int> visited;
  while (!set.empty()) {
    const int i = below ? *set.begin() : *set.rbegin();
    if (below ? i >= limit : i <= limit) break;
    set.erase(i);
    visited.push_back(i);
    const int next = below ? i + step : i - step;
    if (i % 7 == 0 && next >= 0 && next < n) set.insert(next);
  }
  return visited;
}

TEST(LazyWindows, DrainsVisitEveryMemberBeyondTheLimitAndLeaveTheRest) {
  std::mt19937 random(3);
  for (int round = 0; round < 300; ++round) {
    const int n = 1 + static_cast<int>(random() % 300);
    const bool below = round % 2 == 0;
    PositionSet mine;
    mine.reset(n);
    std::set<int> theirs;
    for (int k = 0; k < 8; ++k) {
      for (int m = static_cast<int>(random() % 40); m > 0; --m) {
        const int i = static_cast<int>(random() % static_cast<unsigned>(n));
        mine.insert(i);
        theirs.insert(i);
      }
      // Limits on word edges and just off them, and the ends.
      const int edges[] = {-1, 0, 63, 64, 65, 127, 128, n - 1, n};
      const int limit = k % 2 ? edges[random() % 9] : static_cast<int>(random() % (n + 2)) - 1;
      const int step = 1 + static_cast<int>(random() % 70);
      std::vector<int> got = drain(mine, n, limit, below, step);
      std::vector<int> want = drain(theirs, n, limit, below, step);
      // Within a word a visit may come before a member inserted by an earlier one, which can
      // then insert that member again (a propagation passes its new value on once more): the
      // members visited are the same, and so is what is left.
      std::set<int> got_set(got.begin(), got.end()), want_set(want.begin(), want.end());
      ASSERT_EQ(got_set, want_set) << "n " << n << " limit " << limit << " round " << round;
      for (std::size_t v = 1; v < got.size(); ++v) {
        // Words are taken one after another toward the limit.
        if (below)
          ASSERT_LE(got[v - 1] / 64, got[v] / 64);
        else
          ASSERT_GE(got[v - 1] / 64, got[v] / 64);
      }
    }
    std::vector<int> rest = drain(mine, n, below ? n : -1, below, 1000);
    std::vector<int> want = drain(theirs, n, below ? n : -1, below, 1000);
    ASSERT_EQ(std::set<int>(rest.begin(), rest.end()), std::set<int>(want.begin(), want.end()));
  }
}

TEST(LazyWindows, StalenessCountsTheMovesOnEachSideSinceTheLastSettleCoveringThePosition) {
  Staleness s;
  s.reset();
  EXPECT_EQ(s.start_bound(10, false), 0.0);
  s.moved(5, 1.0);
  s.moved(20, 2.0);
  // A start at 10 may grow by the move below it, a finish at 10 shrink by the one above.
  EXPECT_EQ(s.start_bound(10, false), 1.0);
  EXPECT_EQ(s.finish_bound(10, false), 2.0);
  EXPECT_EQ(s.start_bound(10, true), 3.0);  // every move, in constant time
  s.settled_starts(12);                     // starts up to 12 exact
  EXPECT_EQ(s.start_bound(10, false), 0.0);
  EXPECT_EQ(s.start_bound(12, false), 0.0);
  EXPECT_EQ(s.start_bound(30, false), 3.0);  // not covered: both moves are below 30
  s.moved(8, 4.0);
  EXPECT_EQ(s.start_bound(10, false), 4.0);
  EXPECT_EQ(s.start_bound(8, false), 0.0);  // a node's own move is not below it
  s.settled_starts(9);                      // covers 9 and below only; 10's settle stays at 12
  EXPECT_EQ(s.start_bound(10, false), 4.0);
  EXPECT_EQ(s.start_bound(9, false), 0.0);
  s.settled_starts(40);  // supersedes both
  EXPECT_EQ(s.start_bound(30, false), 0.0);
  EXPECT_EQ(s.finish_bound(10, false), 2.0);  // the finishes were never settled
  s.settled_finishes(15);
  EXPECT_EQ(s.finish_bound(10, false), 2.0);  // 10 is below 15: not covered
  EXPECT_EQ(s.finish_bound(15, false), 0.0);
  s.settled_finishes(0);
  EXPECT_EQ(s.finish_bound(10, false), 0.0);
}

TEST(LazyWindows, StalenessFallsBackToEveryMoveWhenThereAreManySinceTheSettle) {
  Staleness s;
  s.reset();
  double above = 0.0, all = 0.0;
  for (int m = 0; m < 200; ++m) {
    const int position = m % 2 ? 100 : 0;  // half below position 50, half above it
    s.moved(position, 1.0);
    all += 1.0;
    if (position > 50) above += 1.0;
    const double bound = s.finish_bound(50, false);
    // Only the moves above 50 while few enough to scan; every move after that (still a bound).
    EXPECT_TRUE(bound == above || bound == all) << m;
    EXPECT_GE(bound, above);
  }
  EXPECT_EQ(s.finish_bound(50, false), all);
}

}  // namespace
}  // namespace perseus::plan::detail
