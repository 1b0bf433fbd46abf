#include "perseus/client/frequency_controller.hpp"

#include <exception>
#include <utility>
#include <vector>

namespace perseus::client {

FrequencyController::FrequencyController(GpuBackend& gpu,
                                         std::function<void(const std::string&)> on_error)
    : gpu_(gpu), on_error_(std::move(on_error)) {
  if (!gpu_.synchronous_clocks()) thread_.emplace([this] { run(); });
}

FrequencyController::~FrequencyController() {
  stop();
}

template <typename T>
void FrequencyController::ask(Setting<T>& setting, std::optional<T> value) {
  std::unique_lock lock(mutex_);
  if (stopping_ || setting.settled_at(value)) return;
  setting.pending = true;
  setting.wanted = value;
  ++requested_;
  if (!thread_) {
    apply_pending(lock);
    return;
  }
  lock.unlock();
  wake_.notify_one();
}

void FrequencyController::lock_clock(int mhz) {
  ask(clock_, std::optional<int>(mhz));
}

void FrequencyController::reset_clock() {
  ask(clock_, std::optional<int>());
}

void FrequencyController::set_power_limit(double watts) {
  ask(limit_, std::optional<double>(watts));
}

void FrequencyController::reset_power_limit() {
  ask(limit_, std::optional<double>());
}

void FrequencyController::flush() {
  std::unique_lock lock(mutex_);
  const std::uint64_t target = requested_;
  done_.wait(lock, [&] { return completed_ >= target || stopped_; });
}

void FrequencyController::request_stop() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_one();
}

void FrequencyController::stop() {
  request_stop();
  if (thread_) thread_->join();
}

bool FrequencyController::stop_until(std::chrono::steady_clock::time_point deadline) {
  request_stop();
  return !thread_ || thread_->join_until(deadline);
}

std::uint64_t FrequencyController::applied_changes() const {
  std::lock_guard lock(mutex_);
  return changes_;
}

void FrequencyController::run() {
  std::unique_lock lock(mutex_);
  while (true) {
    wake_.wait(lock, [&] { return stopping_ || completed_ < requested_; });
    if (completed_ == requested_) break;  // stopping with nothing left to apply
    apply_pending(lock);
  }
  stopped_ = true;
  done_.notify_all();
}

void FrequencyController::apply_pending(std::unique_lock<std::mutex>& lock) {
  const std::uint64_t target = requested_;
  const bool do_limit = limit_.pending, do_clock = clock_.pending;
  const std::optional<double> limit = limit_.wanted;
  const std::optional<int> clock = clock_.wanted;
  limit_.pending = clock_.pending = false;
  lock.unlock();

  // `known` / `applied` change only here, under the lock (ask() reads them).
  std::vector<std::string> errors;
  std::uint64_t changes = 0;
  auto apply = [&](auto& setting, const auto& wanted, const char* what, auto&& call) {
    {
      std::lock_guard relock(mutex_);
      if (setting.known && setting.applied == wanted) return;
    }
    bool ok = true;
    try {
      const DriverCallWatch::Scope watched(calls_, what);
      call();
      ++changes;
    } catch (const std::exception& e) {
      ok = false;
      errors.emplace_back(e.what());
    }
    std::lock_guard relock(mutex_);
    setting.known = ok;
    if (ok) setting.applied = wanted;
  };
  if (do_limit) {
    apply(limit_, limit, "a power-limit change", [&] {
      if (limit) {
        gpu_.set_power_limit(*limit);
      } else {
        gpu_.reset_power_limit();
      }
    });
  }
  if (do_clock) {
    apply(clock_, clock, "a clock change", [&] {
      if (clock) {
        gpu_.lock_clock(*clock);
      } else {
        gpu_.reset_clock();
      }
    });
  }
  if (on_error_) {
    for (const auto& e : errors) on_error_(e);
  }

  lock.lock();
  changes_ += changes;
  completed_ = target;
  done_.notify_all();
}

}  // namespace perseus::client
