#include "perseus/measure/energy_counter.hpp"

#include <algorithm>
#include <cmath>
#include <sstream>

#include "perseus/util/error.hpp"

namespace perseus::measure {

namespace {

void check(bool ok, const char* field, const std::string& problem, double value) {
  if (!ok) {
    throw Error(std::string("counter option '") + field + "': " + problem + ", got " +
                number(value));
  }
}

}  // namespace

void CounterOptions::validate() const {
  check(std::isfinite(refresh_period_s) && refresh_period_s > 0.0, "refresh_period_s",
        "must be a positive number of seconds", refresh_period_s);
  check(std::isfinite(refresh_jitter_s) && refresh_jitter_s >= 0.0 &&
            refresh_jitter_s < refresh_period_s,
        "refresh_jitter_s", "must be >= 0 and less than the refresh period", refresh_jitter_s);
  check(std::isfinite(read_latency_s) && read_latency_s >= 0.0, "read_latency_s",
        "must be a number of seconds >= 0", read_latency_s);
  check(sampled_fraction > 0.0 && sampled_fraction <= 1.0, "sampled_fraction", "must be in (0, 1]",
        sampled_fraction);
  check(std::isfinite(noise) && noise >= 0.0 && noise < 1.0, "noise", "must be in [0, 1)", noise);
  check(std::isfinite(lag_s) && lag_s >= 0.0 && lag_s < refresh_period_s, "lag_s",
        "must be >= 0 and less than the refresh period", lag_s);
  check(std::isfinite(window_s) && window_s >= 0.0 && window_s <= 2.0 * lag_s, "window_s",
        "must be >= 0 and at most twice lag_s (a refresh reports no energy spent after it)",
        window_s);
  check(std::isfinite(time_constant_s) && time_constant_s >= 0.0 &&
            time_constant_s < refresh_period_s,
        "time_constant_s", "must be >= 0 and less than the refresh period", time_constant_s);
  check(time_constant_s == 0.0 || window_s == 0.0, "window_s",
        "must be 0 with a first-order response (time_constant_s > 0)", window_s);
  if (refresh_phase_s) {
    check(std::isfinite(*refresh_phase_s) && *refresh_phase_s > 0.0 &&
              *refresh_phase_s <= refresh_period_s,
          "refresh_phase_s", "must be in (0, refresh period]", *refresh_phase_s);
  }
}

double CounterOptions::reach_s() const {
  return lag_s + std::max(0.5 * window_s, kFirstOrderReachTaus * time_constant_s);
}

CounterOptions CounterOptions::named(const std::string& name) {
  CounterOptions o;
  if (name == "ideal") {
    o.ideal = true;
    o.read_latency_s = 0.0;
    o.lag_s = 0.0;
    o.window_s = 0.0;
    return o;
  }
  if (name == "realistic") return o;
  throw Error("unknown energy counter '" + name + "' (expected realistic or ideal)");
}

// ---- PowerTrace ----

void PowerTrace::add_busy(double begin_s, double end_s, double power_w) {
  if (!segments_.empty() && begin_s < segments_.back().end_s) {
    throw Error("power trace: segment starting at " + number(begin_s) +
                " s overlaps the previous one (ends at " + number(segments_.back().end_s) + " s)");
  }
  double before = extra_forgotten_j_;
  if (!segments_.empty()) {
    const Segment& last = segments_.back();
    before = last.extra_before_j + (last.power_w - base_power_w_) * (last.end_s - last.begin_s);
  }
  if (end_s > begin_s) segments_.push_back({begin_s, end_s, power_w, before});
}

double PowerTrace::mean_energy(double from_s, double to_s) const {
  if (!(to_s > from_s)) return energy_at(from_s);
  // Energy is linear between segment boundaries: the trapezoid rule over them is exact.
  double area = 0.0, t = from_s, e = energy_at(from_s);
  std::vector<double> at = boundaries(from_s, to_s);
  at.push_back(to_s);
  for (double next : at) {
    const double e_next = energy_at(next);
    area += 0.5 * (e + e_next) * (next - t);
    t = next;
    e = e_next;
  }
  return area / (to_s - from_s);
}

double PowerTrace::exponential_mean_energy(double t_s, double tau_s, double reach_s) const {
  // Energy is linear in x between segment boundaries, so each piece [a, b] integrates exactly:
  // the integral of (E(a) - p (x - a)) e^(-x / tau) / tau is E(a) w - p (tau w - (b - a) e^(-b /
  // tau)), w = e^(-a / tau) - e^(-b / tau); past the reach, E(X) e^(-X / tau) - p tau e^(-X / tau).
  std::vector<double> xs{0.0};
  const std::vector<double> at = boundaries(t_s - reach_s, t_s);
  for (auto it = at.rbegin(); it != at.rend(); ++it) {
    if (t_s - *it > xs.back()) xs.push_back(t_s - *it);
  }
  if (reach_s > xs.back()) xs.push_back(reach_s);
  double mean = 0.0, e_a = energy_at(t_s), p = 0.0;
  for (std::size_t i = 1; i < xs.size(); ++i) {
    const double a = xs[i - 1], b = xs[i], e_b = energy_at(t_s - b);
    p = (e_a - e_b) / (b - a);
    const double w = std::exp(-a / tau_s) - std::exp(-b / tau_s);
    mean += e_a * w - p * (tau_s * w - (b - a) * std::exp(-b / tau_s));
    e_a = e_b;
  }
  return mean + std::exp(-xs.back() / tau_s) * (e_a - p * tau_s);
}

double PowerTrace::energy_at(double t_s) const {
  // The last segment starting at or before t.
  auto it = std::upper_bound(segments_.begin(), segments_.end(), t_s,
                             [](double t, const Segment& s) { return t < s.begin_s; });
  double extra = extra_forgotten_j_;
  if (it != segments_.begin()) {
    const Segment& s = *std::prev(it);
    extra = s.extra_before_j + (s.power_w - base_power_w_) * (std::min(t_s, s.end_s) - s.begin_s);
  }
  return base_power_w_ * t_s + extra;
}

std::vector<double> PowerTrace::boundaries(double from_s, double to_s) const {
  std::vector<double> out;
  for (const Segment& s : segments_) {
    if (s.begin_s > to_s) break;
    for (double t : {s.begin_s, s.end_s}) {
      if (t > from_s && t <= to_s) out.push_back(t);
    }
  }
  return out;
}

void PowerTrace::forget_before(double t_s) {
  while (!segments_.empty() && segments_.front().end_s < t_s) {
    const Segment& s = segments_.front();
    extra_forgotten_j_ = s.extra_before_j + (s.power_w - base_power_w_) * (s.end_s - s.begin_s);
    segments_.pop_front();
  }
}

// ---- EnergyCounter ----

EnergyCounter::EnergyCounter(const PowerTrace& trace, CounterOptions options)
    : trace_(trace), options_(options), random_(options.seed) {
  options_.validate();
  const double period = options_.refresh_period_s;
  first_refresh_s_ = options_.refresh_phase_s.value_or(
      period * (1.0 - std::uniform_real_distribution<double>(0.0, 1.0)(random_)));
  next_refresh_s_ = first_refresh_s_;
}

void EnergyCounter::refresh() {
  const double r = next_refresh_s_;
  const double window = r - last_refresh_s();
  const double seen = window * options_.sampled_fraction;
  // The sensor sees the last `seen` seconds of the window, lag_s before the refresh, and scales
  // them to the whole window; each end is averaged over window_s.
  const double to = r - options_.lag_s, half = 0.5 * options_.window_s;
  auto energy = [&](double t) {
    const double tau = options_.time_constant_s;
    return tau > 0.0 ? trace_.exponential_mean_energy(t, tau, kFirstOrderReachTaus * tau)
                     : trace_.mean_energy(t - half, t + half);
  };
  double increment = (energy(to) - energy(to - seen)) * (window / seen);
  if (options_.noise > 0.0) {
    increment *= 1.0 + options_.noise * std::normal_distribution<double>(0.0, 1.0)(random_);
  }
  const double previous = refreshes_.empty() ? before_history_j_ : refreshes_.back().second;
  refreshes_.emplace_back(r, previous + std::max(0.0, increment));
  if (refreshes_.size() > kRefreshHistory) {
    before_history_j_ = refreshes_.front().second;
    refreshes_.pop_front();
  }
  const double jitter = options_.refresh_jitter_s;
  next_refresh_s_ =
      r + options_.refresh_period_s +
      (jitter > 0.0 ? std::uniform_real_distribution<double>(-jitter, jitter)(random_) : 0.0);
}

double EnergyCounter::value_at(double t_s) {
  if (options_.ideal) return trace_.energy_at(t_s);
  while (next_refresh_s_ <= t_s) refresh();
  auto after = std::upper_bound(refreshes_.begin(), refreshes_.end(), t_s,
                                [](double t, const auto& refresh) { return t < refresh.first; });
  return after == refreshes_.begin() ? before_history_j_ : std::prev(after)->second;
}

}  // namespace perseus::measure
