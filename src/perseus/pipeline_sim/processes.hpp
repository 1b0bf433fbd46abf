// The rank processes of a simulated training job: one forked child per rank, all in one process
// group, none outliving the parent (PR_SET_PDEATHSIG on Linux). The destructor kills and reaps
// whatever is still running, so an exception in the parent never leaves ranks behind.
#pragma once

#include <sys/types.h>

#include <functional>
#include <string>
#include <vector>

namespace perseus::pipeline_sim {

struct Child {
  pid_t pid = -1;
  bool reaped = false;
  int status = 0;  // waitpid's status once reaped
};

// "exit status N", "killed by signal N", ...
std::string describe_status(int status);

class RankProcesses {
 public:
  RankProcesses() = default;
  RankProcesses(const RankProcesses&) = delete;
  RankProcesses& operator=(const RankProcesses&) = delete;
  ~RankProcesses() { kill_all(); }

  // Forks the child of the next rank; `body` runs in the child and returns its exit code (an
  // exception exits with 1). Throws perseus::Error when fork fails.
  void spawn(const std::function<int()>& body);

  // SIGKILL to every child (the process group and each pid), then reaps them.
  void kill_all();

  // Waits up to `seconds` for every child to exit on its own; true when all did.
  bool wait_all(double seconds);

  // Reaps `c` if it exited (waits for it when `block`); true once it is reaped.
  bool reap(Child& c, bool block);

  const Child& child(int rank) const { return children_.at(static_cast<std::size_t>(rank)); }
  Child& child(int rank) { return children_.at(static_cast<std::size_t>(rank)); }

 private:
  pid_t group_ = -1;
  std::vector<Child> children_;
};

}  // namespace perseus::pipeline_sim
