// Private to the frontier solver (plan/solver_impl.hpp): slack reclamation and evaluation of the
// frontier's points, on worker threads when SolverOptions::threads > 1. Points are handed over in
// order and their results taken back in the same order, and each point's reclamation depends on
// that point alone, so the frontier is the same for any number of threads.
#pragma once

#include <condition_variable>
#include <deque>
#include <exception>
#include <map>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include "perseus/plan/problem.hpp"
#include "perseus/plan/reclaim.hpp"

namespace perseus::plan::detail {

// A point's realized plan: option index per DAG node, and its evaluation against the profile.
struct RealizedPoint {
  std::vector<int> option;
  double time_s = 0.0;
  double energy_j = 0.0;
  RealizedPoint(std::vector<int> o, const TimeEnergy& ev)
      : option(std::move(o)), time_s(ev.time_s), energy_j(ev.energy_j) {}
};

class ReclaimPool {
 public:
  // threads - 1 workers; the caller's thread is the last: take() reclaims points itself rather
  // than wait (with threads <= 1 it does all the work).
  ReclaimPool(const PlanProblem& problem, int threads);
  ~ReclaimPool();
  ReclaimPool(const ReclaimPool&) = delete;
  ReclaimPool& operator=(const ReclaimPool&) = delete;

  // Queues a point with its options before reclamation; returns its ticket (0, 1, ...).
  long submit(std::vector<int> realized);
  // The reclaimed, evaluated point of the oldest ticket not yet taken (waits for it).
  RealizedPoint take();
  // Tickets submitted and not yet taken.
  long in_flight() const { return submitted_ - taken_; }
  int threads() const { return static_cast<int>(workers_.size()) + 1; }

 private:
  struct Worker {
    explicit Worker(const PlanProblem& problem) : reclaimer(problem) {}
    SlackReclaimer reclaimer;
  };
  // Reclaims and evaluates the oldest queued point on `w`, without the lock meanwhile, and
  // files its result (or its exception, which take() rethrows). Requires the lock and a job.
  void run_oldest(Worker& w, std::unique_lock<std::mutex>& lock);
  void work();

  const PlanProblem& problem_;
  Worker local_;  // the caller's, in take()
  std::vector<std::thread> workers_;
  std::mutex mutex_;
  std::condition_variable job_ready_, result_ready_;
  std::deque<std::pair<long, std::vector<int>>> jobs_;
  std::map<long, RealizedPoint> results_;
  std::exception_ptr error_;
  bool stopping_ = false;
  long submitted_ = 0, taken_ = 0;
};

}  // namespace perseus::plan::detail
