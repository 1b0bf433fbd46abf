#include "perseus/client/energy_sampler.hpp"

#include <algorithm>
#include <chrono>
#include <exception>
#include <optional>

#include "perseus/client/gpu_backend.hpp"
#include "perseus/util/error.hpp"
#include "perseus/util/steady_time.hpp"

namespace perseus::client {

bool ReadBackoff::failed() {
  const bool first = wait_s_ == 0.0;
  wait_s_ = first ? kFirstRetryS : std::min(2.0 * wait_s_, kMaxRetryS);
  return first;
}

bool ReadBackoff::worked() {
  const bool ended = wait_s_ > 0.0;
  wait_s_ = 0.0;
  return ended;
}

std::string ReadBackoff::policy() {
  return "retried after " + number(kFirstRetryS) + " s, then less often, at most every " +
         number(kMaxRetryS) + " s";
}

// ---- ThreadSampler ----

std::unique_ptr<EnergySampler> GpuBackend::start_energy_sampler(
    const SamplerOptions& options, std::function<void(const std::string&)> on_error) {
  return std::make_unique<ThreadSampler>(*this, options, std::move(on_error));
}

ThreadSampler::ThreadSampler(GpuBackend& gpu, SamplerOptions options,
                             std::function<void(const std::string&)> on_error)
    : gpu_(gpu),
      options_(options),
      on_error_(std::move(on_error)),
      series_(options.capacity),
      thread_([this] { run(); }) {}

ThreadSampler::~ThreadSampler() {
  request_stop();
}  // thread_ joins first

void ThreadSampler::request_stop() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
}

bool ThreadSampler::stop_until(std::chrono::steady_clock::time_point deadline) {
  request_stop();
  return thread_.join_until(deadline);
}

void ThreadSampler::run() {
  using clock = std::chrono::steady_clock;
  while (true) {
    const auto started = clock::now();
    std::string failure;
    try {
      failure = read_counter(counter_backoff_.wait_s() > 0.0);
    } catch (const NoEnergyCounter& e) {
      return without_counter(e.what());
    }
    if (!failure.empty()) {
      if (counter_backoff_.failed() && on_error_) {
        on_error_("energy counter read failed: " + failure + "; " + ReadBackoff::policy() +
                  " (windows without a counter change meanwhile are reported as unmeasured)");
      }
    } else if (counter_backoff_.worked() && on_error_) {
      on_error_("energy counter reads work again after failing");
    }
    const double wait_s =
        counter_backoff_.wait_s() > 0.0 ? counter_backoff_.wait_s() : options_.min_period_s;
    std::unique_lock lock(mutex_);
    if (stopping_) return;
    if (wait_s > 0.0) {
      wake_.wait_until(lock, started + steady_duration(wait_s), [&] { return stopping_; });
    }
    if (stopping_) return;
  }
}

std::string ThreadSampler::read_counter(bool after_gap) {
  double begin = 0.0, value = 0.0, end = 0.0;
  try {
    const DriverCallWatch::Scope call(calls_, "an energy counter read");
    begin = gpu_.now_s();
    value = gpu_.total_energy_j();
    end = gpu_.now_s();
  } catch (const NoEnergyCounter&) {
    throw;  // not a failed read: run() stops reading
  } catch (const std::exception& e) {
    return e.what()[0] == '\0' ? "unknown error" : e.what();
  }
  read_clock();
  std::unique_lock lock(mutex_);
  const double before = series_.last_value_j();
  if (!series_.add_read(begin, end, value, after_gap) && !said_went_down_) {
    said_went_down_ = true;
    lock.unlock();
    report_went_down(before, value);
  }
  return "";
}

void ThreadSampler::without_counter(const std::string& why) {
  no_counter_ = true;
  if (on_error_) {
    on_error_(why +
              ": Perseus measures no energy on it, and every reporting window is reported "
              "unmeasured (the clocks a schedule plans are still set)");
  }
  std::unique_lock lock(mutex_);
  wake_.wait(lock, [&] { return stopping_; });
}

void ThreadSampler::report_went_down(double before_j, double after_j) {
  if (!on_error_) return;
  on_error_("the GPU's energy counter went down, from " + number(before_j) + " J to " +
            number(after_j) +
            " J (a GPU reset, or a backend whose total_energy_j() is no running total): the "
            "changes read before it are dropped and attribution starts again from that read");
}

void ThreadSampler::read_clock() {
  if (!read_clocks_ || std::chrono::steady_clock::now() < clock_retry_at_) return;
  try {
    double begin = 0.0, end = 0.0;
    std::optional<measure::ClockReading> clock;
    {
      const DriverCallWatch::Scope call(calls_, "an SM clock read");
      begin = gpu_.now_s();
      clock = gpu_.read_clock();
      end = gpu_.now_s();
    }
    if (!clock) {
      read_clocks_ = false;  // this backend cannot tell
      return;
    }
    if (clock_backoff_.worked() && on_error_) on_error_("SM clock reads work again after failing");
    std::lock_guard lock(mutex_);
    clocks_.push_back({(begin + end) / 2.0, *clock});
    if (clocks_.size() > options_.capacity) clocks_.pop_front();
  } catch (const std::exception& e) {
    if (clock_backoff_.failed() && on_error_) {
      on_error_(std::string("SM clock read failed: ") + e.what() + "; " + ReadBackoff::policy());
    }
    clock_retry_at_ = std::chrono::steady_clock::now() + steady_duration(clock_backoff_.wait_s());
  }
}

std::vector<measure::ClockSample> ThreadSampler::clocks(double from_s, double to_s) {
  std::lock_guard lock(mutex_);
  std::vector<measure::ClockSample> out;
  for (const measure::ClockSample& c : clocks_) {
    if (c.t_s >= from_s && c.t_s <= to_s) out.push_back(c);
  }
  return out;
}

std::vector<measure::CounterSample> ThreadSampler::series(double from_s, double to_s) {
  std::lock_guard lock(mutex_);
  return series_.between(from_s, to_s);
}

void ThreadSampler::forget_before(double t_s) {
  std::lock_guard lock(mutex_);
  series_.forget_before(t_s);
  while (!clocks_.empty() && clocks_.front().t_s < t_s) clocks_.pop_front();
}

}  // namespace perseus::client
