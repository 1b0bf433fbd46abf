// The client's failure policy (perseus/client/problem_log.hpp): a problem is warned once and
// training goes on; strict mode throws instead, a clock-thread failure on the training thread's
// next check, once.
#include "perseus/client/problem_log.hpp"

#include <gtest/gtest.h>

#include <string>
#include <thread>
#include <vector>

#include "test_support.hpp"

namespace {

using perseus::client::ProblemLog;
using perseus::test::error_of;

TEST(ProblemLog, WarnsOnceAndGoesOn) {
  std::vector<std::string> said;
  ProblemLog log([&](const std::string& m) { said.push_back(m); }, false);
  log.warn_once("a");
  log.warn_once("a");
  log.local_problem("b");
  log.local_problem("b");
  log.clock_error("denied");
  log.rethrow_clock_error();  // not strict: nothing kept
  log.log("c");
  log.log("c");
  EXPECT_EQ(said, (std::vector<std::string>{"a", "b", "cannot apply the clock setting: denied", "c",
                                            "c"}));
}

TEST(ProblemLog, StrictThrowsAndKeepsTheFirstClockFailureForTheTrainingThread) {
  std::vector<std::string> said;
  ProblemLog log([&](const std::string& m) { said.push_back(m); }, true);
  EXPECT_EQ(error_of([&] { log.local_problem("out of order"); }), "out of order");
  std::thread clock_thread([&] {
    log.clock_error("denied");
    log.clock_error("denied again");
  });
  clock_thread.join();
  EXPECT_EQ(error_of([&] { log.rethrow_clock_error(); }), "cannot apply the clock setting: denied");
  log.rethrow_clock_error();  // thrown once
  EXPECT_TRUE(said.empty());
}

}  // namespace
