#include "perseus/plan/reclaim_pool.hpp"

namespace perseus::plan::detail {

ReclaimPool::ReclaimPool(const PlanProblem& problem, int threads)
    : problem_(problem), local_(problem) {
  for (int i = 1; i < threads; ++i) workers_.emplace_back([this] { work(); });
}

ReclaimPool::~ReclaimPool() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  job_ready_.notify_all();
  for (std::thread& t : workers_) t.join();
}

void ReclaimPool::run_oldest(Worker& w, std::unique_lock<std::mutex>& lock) {
  auto [ticket, option] = std::move(jobs_.front());
  jobs_.pop_front();
  lock.unlock();
  std::exception_ptr error;
  TimeEnergy ev;
  try {
    ev = w.reclaimer.run(option);
  } catch (...) {
    error = std::current_exception();
  }
  lock.lock();
  if (error) error_ = error;
  results_.emplace(ticket, RealizedPoint(std::move(option), ev));
  result_ready_.notify_all();
}

long ReclaimPool::submit(std::vector<int> realized) {
  {
    std::lock_guard lock(mutex_);
    jobs_.emplace_back(submitted_, std::move(realized));
  }
  job_ready_.notify_one();
  return submitted_++;
}

RealizedPoint ReclaimPool::take() {
  const long ticket = taken_++;
  std::unique_lock lock(mutex_);
  while (!error_ && results_.count(ticket) == 0) {
    // Rather than wait, reclaim the oldest point no worker has started (the caller's turn).
    if (jobs_.empty())
      result_ready_.wait(lock);
    else
      run_oldest(local_, lock);
  }
  if (error_) std::rethrow_exception(error_);
  RealizedPoint point = std::move(results_.at(ticket));
  results_.erase(ticket);
  return point;
}

void ReclaimPool::work() {
  Worker w(problem_);
  std::unique_lock lock(mutex_);
  while (true) {
    job_ready_.wait(lock, [&] { return stopping_ || !jobs_.empty(); });
    if (jobs_.empty()) return;
    run_oldest(w, lock);
  }
}

}  // namespace perseus::plan::detail
