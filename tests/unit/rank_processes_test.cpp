// The forked rank processes of simulate-training: exit codes, exceptions, killing and reaping.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <stdexcept>

#include "perseus/pipeline_sim/processes.hpp"

namespace perseus::pipeline_sim {
namespace {

TEST(RankProcesses, ReportsEachChildsExitCode) {
  RankProcesses p;
  p.spawn([] { return 0; });
  p.spawn([] { return 3; });
  p.spawn([]() -> int { throw std::runtime_error("rank failed"); });
  ASSERT_TRUE(p.wait_all(10.0));
  EXPECT_EQ(describe_status(p.child(0).status), "exit status 0");
  EXPECT_EQ(describe_status(p.child(1).status), "exit status 3");
  EXPECT_EQ(describe_status(p.child(2).status), "exit status 1");
}

TEST(RankProcesses, WaitGivesUpOnAHungChildAndKillAllReapsIt) {
  RankProcesses p;
  p.spawn([] {
    pause();
    return 0;
  });
  EXPECT_FALSE(p.wait_all(0.05));
  EXPECT_FALSE(p.child(0).reaped);
  p.kill_all();
  ASSERT_TRUE(p.child(0).reaped);
  EXPECT_EQ(describe_status(p.child(0).status), "killed by signal " + std::to_string(SIGKILL));
  EXPECT_NE(kill(p.child(0).pid, 0), 0);  // gone, not a zombie left behind
}

TEST(RankProcesses, DestructorLeavesNoChildRunning) {
  pid_t pid = -1;
  {
    RankProcesses p;
    p.spawn([] {
      pause();
      return 0;
    });
    pid = p.child(0).pid;
  }
  EXPECT_NE(kill(pid, 0), 0);
}

TEST(RankProcesses, ChildrenShareOneProcessGroup) {
  RankProcesses p;
  p.spawn([] {
    pause();
    return 0;
  });
  p.spawn([] {
    pause();
    return 0;
  });
  // Either side may set the group first; give the children a moment to run setpgid too.
  pid_t g0 = -1, g1 = -1;
  for (int i = 0; i < 200 && (g0 != p.child(0).pid || g1 != g0); ++i) {
    g0 = getpgid(p.child(0).pid);
    g1 = getpgid(p.child(1).pid);
    usleep(1000);
  }
  EXPECT_EQ(g0, p.child(0).pid);
  EXPECT_EQ(g1, g0);
  p.kill_all();
}

}  // namespace
}  // namespace perseus::pipeline_sim
