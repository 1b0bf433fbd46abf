#include "perseus/plan/reclaim_pool.hpp"

#include "perseus/plan/evaluate.hpp"

namespace perseus::plan::detail {

void evaluate_point(const PlanProblem& problem, RealizedPoint& point, std::vector<double>& time,
                    std::vector<double>& energy) {
  const schedule::Dag& dag = problem.dag;
  time.assign(static_cast<std::size_t>(dag.num_nodes()), 0.0);
  energy.assign(time.size(), 0.0);
  for (int v = 1; v < dag.sink(); ++v) {
    const profile::Option& o = problem.options(v).options[point.option[v]];
    time[v] = o.time_s;
    energy[v] = o.energy_j;
  }
  const Evaluation ev = evaluate_nodes(dag, problem.schedule.num_ranks(), time, energy,
                                       problem.settings.blocking_power_w);
  point.time_s = ev.time_s;
  point.energy_j = ev.energy_j;
}

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

void ReclaimPool::process(Worker& w, RealizedPoint& point) {
  w.reclaimer.run(point.option);
  evaluate_point(problem_, point, w.time, w.energy);
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
    if (jobs_.empty()) {
      result_ready_.wait(lock);
      continue;
    }
    // Rather than wait, reclaim the oldest point no worker has started (the caller's turn).
    auto [started, option] = std::move(jobs_.front());
    jobs_.pop_front();
    lock.unlock();
    RealizedPoint point{std::move(option)};
    process(local_, point);
    lock.lock();
    results_.emplace(started, std::move(point));
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
    auto [ticket, option] = std::move(jobs_.front());
    jobs_.pop_front();
    lock.unlock();
    RealizedPoint point{std::move(option)};
    std::exception_ptr error;
    try {
      process(w, point);
    } catch (...) {
      error = std::current_exception();
    }
    lock.lock();
    if (error) error_ = error;
    results_.emplace(ticket, std::move(point));
    result_ready_.notify_all();
  }
}

}  // namespace perseus::plan::detail
