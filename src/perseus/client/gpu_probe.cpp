#include "perseus/client/gpu_probe.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <exception>
#include <memory>
#include <thread>
#include <utility>

#include "perseus/client/nvml_gpu.hpp"
#include "perseus/util/bounded_thread.hpp"
#include "perseus/util/error.hpp"
#include "perseus/util/steady_time.hpp"

namespace perseus::client {

namespace {

using Clock = std::chrono::steady_clock;
using nlohmann::json;

constexpr double kMaxDurationS = 600.0;
// Reads that return faster than this are spaced out to it: enough resolution for counters
// refreshed every few milliseconds, without flooding a driver whose reads cost nothing.
constexpr auto kMinReadSpacing = std::chrono::milliseconds(1);
// How often the caller's thread passes the polling's progress on while it waits for the probe.
constexpr auto kProgressPeriod = std::chrono::milliseconds(50);

double seconds(Clock::duration d) {
  return std::chrono::duration<double>(d).count();
}

// A read that returned a new counter value: when (the middle of the read, seconds since polling
// began) and the value.
struct Change {
  double t_s = 0.0;
  double energy_j = 0.0;
};

struct Polling {
  double elapsed_s = 0.0;
  std::vector<double> read_costs_s;
  std::vector<Change> changes;
  std::vector<double> power_w;
  std::vector<double> sm_clock_mhz;
  std::set<std::string> clock_event_reasons;
  std::string clock_error, reasons_error;  // set when the device does not answer the query
  std::string counter_error;               // set when the device has no energy counter
};

// f(), or nullopt with NVML's message in `error` (kept from the first failure) when the device
// does not answer the query (Not Supported: no power management, some virtual GPUs), as it says
// by throwing `Unanswered`.
template <typename Unanswered = Error, typename F>
auto unless_unanswered(F&& f, std::string& error) -> std::optional<decltype(f())> {
  try {
    return f();
  } catch (const Unanswered& e) {
    if (error.empty()) error = e.what();
    return std::nullopt;
  }
}

Polling poll_counter(NvmlGpu& gpu, const ProbeOptions& options) {
  Polling p;
  const Clock::time_point start = Clock::now();
  const auto end = start + steady_duration(options.duration_s);
  double last = 0.0;
  for (Clock::time_point t0 = start; t0 < end; t0 = Clock::now()) {
    const auto energy = p.counter_error.empty()
                            ? unless_unanswered<NoEnergyCounter>(
                                  [&] { return gpu.total_energy_j(); }, p.counter_error)
                            : std::nullopt;
    if (energy) {
      const Clock::time_point t1 = Clock::now();
      if (!p.read_costs_s.empty() && *energy != last) {
        p.changes.push_back({seconds(t0 - start) + seconds(t1 - t0) / 2.0, *energy});
      }
      p.read_costs_s.push_back(seconds(t1 - t0));
      last = *energy;
    }
    p.power_w.push_back(gpu.power_usage_w());
    if (p.clock_error.empty()) {
      auto mhz = unless_unanswered([&] { return gpu.sm_clock_mhz(); }, p.clock_error);
      if (mhz) p.sm_clock_mhz.push_back(*mhz);
    }
    if (p.reasons_error.empty()) {
      auto reasons = unless_unanswered([&] { return gpu.clock_event_reasons(); }, p.reasons_error);
      if (reasons) p.clock_event_reasons.insert(reasons->begin(), reasons->end());
    }
    if (options.progress) {
      options.progress(std::min(1.0, seconds(Clock::now() - start) / options.duration_s));
    }
    std::this_thread::sleep_until(t0 + kMinReadSpacing);
  }
  p.elapsed_s = seconds(Clock::now() - start);
  return p;
}

double mean(const std::vector<double>& values) {
  double sum = 0.0;
  for (double v : values) sum += v;
  return values.empty() ? 0.0 : sum / static_cast<double>(values.size());
}

// The refresh intervals and the counter's slope, from two or more observed changes.
void summarize_changes(const std::vector<Change>& changes, GpuProbe& probe) {
  probe.counter_changes = static_cast<int>(changes.size());
  if (changes.size() < 2) return;
  GpuProbe::Intervals r;
  r.min_s = changes[1].t_s - changes[0].t_s;
  for (std::size_t i = 1; i < changes.size(); ++i) {
    const double interval = changes[i].t_s - changes[i - 1].t_s;
    r.min_s = std::min(r.min_s, interval);
    r.max_s = std::max(r.max_s, interval);
  }
  const double span_s = changes.back().t_s - changes.front().t_s;
  r.mean_s = span_s / static_cast<double>(changes.size() - 1);
  probe.refresh = r;
  probe.counter_power_w = (changes.back().energy_j - changes.front().energy_j) / span_s;
}

json number_or_null(const std::optional<double>& value) {
  return value ? json(*value) : json(nullptr);
}

void validate(const ProbeOptions& options) {
  if (!(options.duration_s > 0.0 && options.duration_s <= kMaxDurationS)) {
    throw Error("probe duration must be a number of seconds in (0, 600], got " +
                number(options.duration_s));
  }
  if (!(options.timeout_s > 0.0 && std::isfinite(options.timeout_s))) {
    throw Error("probe timeout must be a positive number of seconds, got " +
                number(options.timeout_s));
  }
}

// The probe's NVML calls, on the thread that probe_gpu waits for.
GpuProbe probe_now(const ProbeOptions& options) {
  NvmlGpu gpu(options.device, options.library);
  GpuProbe probe;
  probe.name = gpu.name();
  probe.driver = gpu.driver_version();
  probe.uuid = gpu.uuid();
  probe.nvml_index = gpu.nvml_index();
  probe.cuda_index = options.device;
  probe.clocks_mhz = gpu.supported_clocks();
  probe.power_limit_w =
      unless_unanswered([&] { return gpu.power_limit_w(); }, probe.power_limit_error);
  probe.default_power_limit_w =
      unless_unanswered([&] { return gpu.default_power_limit_w(); }, probe.power_limit_error);

  const Polling polled = poll_counter(gpu, options);
  probe.duration_s = polled.elapsed_s;
  probe.counter_reads = static_cast<int>(polled.read_costs_s.size());
  probe.counter_error = polled.counter_error;
  if (!polled.read_costs_s.empty()) {
    probe.read_mean_s = mean(polled.read_costs_s);
    probe.read_max_s = *std::max_element(polled.read_costs_s.begin(), polled.read_costs_s.end());
  }
  probe.power_readings = static_cast<int>(polled.power_w.size());
  probe.power_mean_w = mean(polled.power_w);
  summarize_changes(polled.changes, probe);
  if (!polled.sm_clock_mhz.empty()) {
    probe.sm_clock_mean_mhz = mean(polled.sm_clock_mhz);
    const auto [lowest, highest] =
        std::minmax_element(polled.sm_clock_mhz.begin(), polled.sm_clock_mhz.end());
    probe.sm_clock_min_mhz = static_cast<int>(*lowest);
    probe.sm_clock_max_mhz = static_cast<int>(*highest);
  }
  if (polled.reasons_error.empty()) probe.clock_event_reasons = polled.clock_event_reasons;
  probe.clock_error = polled.clock_error;
  probe.reasons_error = polled.reasons_error;
  return probe;
}

// What the probing thread shares with its caller; kept for good when the thread does not return.
struct ProbeRun {
  ProbeOptions options;
  std::atomic<double> done{0.0};
  std::optional<GpuProbe> probe;
  std::exception_ptr error;
  std::optional<BoundedThread> thread;
};

Error driver_did_not_answer(double timeout_s) {
  return Error("gpu probe: the GPU driver did not answer: the probe had not finished " +
               number(timeout_s) +
               " s after its duration (a GPU that has fallen off the bus blocks NVML's callers; "
               "the probe's timeout sets the wait)");
}

}  // namespace

GpuProbe probe_gpu(const ProbeOptions& options) {
  validate(options);
  auto run = std::make_shared<ProbeRun>();
  ProbeRun& r = *run;
  r.options = options;
  r.options.progress = [&r](double done) { r.done = done; };
  r.thread.emplace([&r] {
    try {
      r.probe = probe_now(r.options);
    } catch (...) {
      r.error = std::current_exception();
    }
  });
  const auto deadline =
      Clock::now() + steady_duration(options.duration_s) + steady_duration(options.timeout_s);
  while (!r.thread->join_until(std::min(deadline, Clock::now() + kProgressPeriod))) {
    if (Clock::now() >= deadline) {
      keep_for_good(std::move(run));
      throw driver_did_not_answer(options.timeout_s);
    }
    if (options.progress) options.progress(r.done);
  }
  if (r.error) std::rethrow_exception(r.error);
  return std::move(*r.probe);
}

json to_json(const GpuProbe& probe) {
  json sm_clock = nullptr, reasons = nullptr;
  if (probe.sm_clock_mean_mhz) {
    sm_clock = {{"mean", *probe.sm_clock_mean_mhz},
                {"min", probe.sm_clock_min_mhz},
                {"max", probe.sm_clock_max_mhz}};
  }
  if (probe.clock_event_reasons) reasons = *probe.clock_event_reasons;
  json refresh = nullptr;
  if (probe.refresh) {
    refresh = {{"mean", probe.refresh->mean_s},
               {"min", probe.refresh->min_s},
               {"max", probe.refresh->max_s}};
  }
  return {
      {"name", probe.name},
      {"driver", probe.driver},
      {"uuid", probe.uuid},
      {"nvml_index", probe.nvml_index},
      {"cuda_index", probe.cuda_index},
      {"sm_clocks_mhz", probe.clocks_mhz},
      {"duration_s", probe.duration_s},
      {"counter_reads", probe.counter_reads},
      {"counter_changes", probe.counter_changes},
      {"refresh_period_s", refresh},
      {"read_cost_s", probe.counter_reads > 0
                          ? json{{"mean", probe.read_mean_s}, {"max", probe.read_max_s}}
                          : json(nullptr)},
      {"counter_error", probe.counter_error.empty() ? json(nullptr) : json(probe.counter_error)},
      {"power_w",
       {{"readings", probe.power_readings},
        {"mean", probe.power_mean_w},
        {"counter_slope", number_or_null(probe.counter_power_w)}}},
      {"power_limit_w",
       {{"enforced", number_or_null(probe.power_limit_w)},
        {"default", number_or_null(probe.default_power_limit_w)}}},
      {"sm_clock_mhz", sm_clock},
      {"clock_event_reasons", reasons}};
}

}  // namespace perseus::client
