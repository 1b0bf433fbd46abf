#include "perseus/client/frequency_controller.hpp"

#include <exception>
#include <utility>
#include <vector>

namespace perseus::client {

FrequencyController::FrequencyController(GpuBackend& gpu,
                                         std::function<void(const std::string&)> on_error)
    : gpu_(gpu), on_error_(std::move(on_error)), thread_([this] { run(); }) {}

FrequencyController::~FrequencyController() {
  stop();
}

void FrequencyController::request(std::unique_lock<std::mutex>& lock) {
  ++requested_;
  lock.unlock();
  wake_.notify_one();
}

void FrequencyController::lock_clock(int mhz) {
  std::unique_lock lock(mutex_);
  if (stopping_) return;
  clock_.pending = true;
  clock_.wanted = mhz;
  request(lock);
}

void FrequencyController::reset_clock() {
  std::unique_lock lock(mutex_);
  if (stopping_) return;
  clock_.pending = true;
  clock_.wanted.reset();
  request(lock);
}

void FrequencyController::set_power_limit(double watts) {
  std::unique_lock lock(mutex_);
  if (stopping_) return;
  limit_.pending = true;
  limit_.wanted = watts;
  request(lock);
}

void FrequencyController::reset_power_limit() {
  std::unique_lock lock(mutex_);
  if (stopping_) return;
  limit_.pending = true;
  limit_.wanted.reset();
  request(lock);
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
  thread_.join();
}

bool FrequencyController::stop_until(std::chrono::steady_clock::time_point deadline) {
  request_stop();
  return thread_.join_until(deadline);
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
    const std::uint64_t target = requested_;
    const bool do_limit = limit_.pending, do_clock = clock_.pending;
    const std::optional<double> limit = limit_.wanted;
    const std::optional<int> clock = clock_.wanted;
    limit_.pending = clock_.pending = false;
    lock.unlock();

    // `known` / `applied` are only touched by this thread.
    std::vector<std::string> errors;
    std::uint64_t changes = 0;
    auto apply = [&](auto& setting, const auto& wanted, const char* what, auto&& call) {
      if (setting.known && setting.applied == wanted) return;
      try {
        const DriverCallWatch::Scope watched(calls_, what);
        call();
        setting.known = true;
        setting.applied = wanted;
        ++changes;
      } catch (const std::exception& e) {
        setting.known = false;
        errors.emplace_back(e.what());
      }
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
  stopped_ = true;
  done_.notify_all();
}

}  // namespace perseus::client
