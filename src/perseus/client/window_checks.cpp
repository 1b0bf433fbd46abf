#include "perseus/client/window_checks.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "perseus/profile/plausibility.hpp"
#include "perseus/util/error.hpp"

namespace perseus::client {

namespace {

double sum(const std::vector<double>& values) {
  return std::accumulate(values.begin(), values.end(), 0.0);
}

}  // namespace

void WindowChecks::check(const WindowMeasurements& m, const EnergySampler& sampler) {
  if (m.iter_time.empty()) return;
  if (locks_clocks_) check_clocks(m.clocks);
  check_changed(m, sampler);
  check_power(m);
}

void WindowChecks::check_changed(const WindowMeasurements& m, const EnergySampler& sampler) {
  if (m.measured || unmeasured_said_) return;
  unmeasured_said_ = true;
  if (sampler.no_counter()) return;
  const std::optional<RunningCall> counter_read = sampler.running_call();
  const double window_s = sum(m.iter_time);
  const std::string unchanged =
      "the GPU's energy counter did not change during a reporting window of " + number(window_s) +
      " s";
  // The read in flight began before the window did, and is blocked, not just slow.
  if (counter_read && counter_read->running_s >= std::max(window_s, kDriverCallBlockedS)) {
    problems_.log(unchanged + ": " + counter_read->what + " has been blocked in the driver for " +
                  number(counter_read->running_s) +
                  " s; its energies are unknown and reported as unmeasured");
    return;
  }
  problems_.log(unchanged +
                " (real counters refresh about every 100 ms); its energies are unknown and "
                "reported as unmeasured: report over more iterations (report_every; the profiler "
                "asks for more by itself)");
}

// The energies are reported as measured either way.
void WindowChecks::check_power(const WindowMeasurements& m) {
  if (power_checked_ || !m.measured) return;
  power_check_s_ += sum(m.iter_time);
  power_check_j_ += sum(m.iter_energy);
  if (!(power_check_s_ >= kPowerCheckS)) return;
  power_checked_ = true;
  const std::string problem = profile::power_problem(power_check_j_, power_check_s_);
  if (problem.empty()) return;
  problems_.local_problem(
      "the GPU's energy counter over the first measured iterations: " + problem +
      "; a GPU backend's total_energy_j() must return joules and now_s() seconds");
}

// The power limit or heat held the clock down, so the measurements are those of a lower clock.
void WindowChecks::check_clocks(const std::map<std::string, ClockSummary>& clocks) {
  for (const auto& [name, c] : clocks) {
    if (!c.locked_clock_not_reached() || !clocks_not_reached_.insert({name, c.locked_mhz}).second) {
      continue;
    }
    const std::string held = std::to_string(std::lround(100.0 * c.held_down_share)) + " % of " +
                             std::to_string(c.samples) + " clock readings";
    problems_.log("the GPU ran '" + name + "' at " + std::to_string(std::lround(c.mean_mhz)) +
                  " MHz on average, below its locked " + std::to_string(c.locked_mhz) +
                  " MHz (held down by the power limit or temperature in " + held +
                  "): its measurements are those of the lower clock");
  }
}

}  // namespace perseus::client
