#include "perseus/pipeline_sim/processes.hpp"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>
#ifdef __linux__
#include <sys/prctl.h>
#endif

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <thread>

#include "perseus/util/error.hpp"

namespace perseus::pipeline_sim {

std::string describe_status(int status) {
  if (WIFEXITED(status)) return "exit status " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status)) return "killed by signal " + std::to_string(WTERMSIG(status));
  return "status " + std::to_string(status);
}

void RankProcesses::spawn(const std::function<int()>& body) {
  const pid_t parent = getpid();
  std::fflush(nullptr);
  pid_t pid = fork();
  if (pid < 0) throw Error(std::string("cannot fork a rank process: ") + std::strerror(errno));
  if (pid == 0) {
#ifdef __linux__
    prctl(PR_SET_PDEATHSIG, SIGKILL);  // never outlive the parent
#endif
    if (getppid() != parent) _exit(1);
    setpgid(0, group_ > 0 ? group_ : 0);
    int code = 1;
    try {
      code = body();
    } catch (...) {
      code = 1;
    }
    std::fflush(nullptr);
    _exit(code);
  }
  if (group_ <= 0) group_ = pid;
  setpgid(pid, group_);  // also done by the child; whichever runs first wins
  children_.push_back({pid});
}

void RankProcesses::kill_all() {
  bool alive = std::any_of(children_.begin(), children_.end(), [](auto& c) { return !c.reaped; });
  if (!alive) return;  // the group is gone and its id may be reused
  if (group_ > 0) killpg(group_, SIGKILL);
  for (auto& c : children_) {
    if (!c.reaped) kill(c.pid, SIGKILL);
  }
  for (auto& c : children_) reap(c, true);
}

bool RankProcesses::wait_all(double seconds) {
  auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  while (true) {
    bool all = true;
    for (auto& c : children_) all = reap(c, false) && all;
    if (all) return true;
    if (std::chrono::steady_clock::now() >= end) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

bool RankProcesses::reap(Child& c, bool block) {
  if (c.reaped) return true;
  int status = 0;
  pid_t r;
  do {
    r = waitpid(c.pid, &status, block ? 0 : WNOHANG);
  } while (r < 0 && errno == EINTR);
  if (r == c.pid || (r < 0 && errno == ECHILD)) {
    c.reaped = true;
    c.status = status;
  }
  return c.reaped;
}

}  // namespace perseus::pipeline_sim
