// The collation of a simulated job's rank warnings (pipeline_sim/rank_log.hpp): one line per
// message for all its ranks, in order of the lowest rank, other lines passed through in order.
#include "perseus/pipeline_sim/rank_log.hpp"

#include <gtest/gtest.h>

namespace perseus::pipeline_sim {
namespace {

using Lines = std::vector<std::string>;

TEST(WarningGroups, OneLinePerMessageInOrderOfTheLowestRank) {
  WarningGroups groups;
  EXPECT_EQ(groups.add("perseus: warning: rank 2: rank 0 did not register the job"), Lines{});
  EXPECT_EQ(groups.add("perseus: warning: rank 3: rank 0 did not register the job"), Lines{});
  EXPECT_EQ(groups.add("perseus: warning: rank 0: HTTP 401: wrong token"), Lines{});
  EXPECT_EQ(groups.add("perseus: warning: rank 1: rank 0 did not register the job"), Lines{});
  EXPECT_EQ(groups.add("perseus: warning: rank 5: rank 0 did not register the job"), Lines{});
  EXPECT_TRUE(groups.holding());
  EXPECT_EQ(groups.flush(), (Lines{"perseus: warning: rank 0: HTTP 401: wrong token",
                                   "perseus: warning: ranks 1-3, 5: rank 0 did not register the "
                                   "job"}));
  EXPECT_FALSE(groups.holding());
}

TEST(WarningGroups, OtherLinesPassThroughAfterWhatWasHeld) {
  WarningGroups groups;
  groups.add("perseus: warning: rank 1: slow");
  EXPECT_EQ(groups.add("perseus: error: something else"),
            (Lines{"perseus: warning: rank 1: slow", "perseus: error: something else"}));
  EXPECT_EQ(groups.add("perseus: warning: rank x: not a rank"),
            Lines{"perseus: warning: rank x: not a rank"});
}

}  // namespace
}  // namespace perseus::pipeline_sim
