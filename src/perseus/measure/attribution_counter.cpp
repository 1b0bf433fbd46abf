#include "perseus/measure/attribution_counter.hpp"

#include <algorithm>
#include <iterator>

namespace perseus::measure::attribution_counter {

using attribution_model::kUnknown;

namespace {

bool earlier(const CounterSample& c, double t) {
  return c.t_s < t;
}

// The integral over [a, b] of G (span_shares) for a change at t -+ h.
double integral_of_g(double t, double h, double a, double b) {
  if (a >= t + h) return b - a;
  if (b <= t - h) return 0.0;
  auto antiderivative = [&](double x) {
    if (x <= t - h) return 0.0;
    return x >= t + h ? x - t : (x - t + h) * (x - t + h) / (4.0 * h);
  };
  return antiderivative(b) - antiderivative(a);
}

// The same for a first-order response (time constant tau): G is 1 after t and e^(-(t - s) / tau)
// before it (the share of what ran at s that the change at t has not yet counted); the timing's
// own spread, a fraction of a millisecond on the refresh clock, is left out.
double integral_of_g_first_order(double t, double tau, double a, double b) {
  return std::max(0.0, b - std::max(a, t)) + attribution_model::first_order_weight(t, tau, a, b);
}

}  // namespace

std::vector<SpanShare> span_shares(const AttributionInput& in) {
  const auto& c = in.counter;
  const double tau = in.counter_response.time_constant_s;
  double reach = 0.0;
  for (const CounterSample& cs : c) reach = std::max(reach, cs.t_spread_s);
  const double after = reach + kFirstOrderReachTaus * tau;
  std::vector<SpanShare> out;
  out.reserve(in.spans.size() * 2);
  for (std::size_t k = 0; k < in.spans.size(); ++k) {
    const TimedSpan& s = in.spans[k];
    // Changes before j have G = 1 over the span, changes from `end` on G = 0.
    auto j = static_cast<std::size_t>(
        std::lower_bound(c.begin(), c.end(), s.begin_s - reach, earlier) - c.begin());
    const auto end = static_cast<std::size_t>(
        std::lower_bound(c.begin() + j, c.end(), s.end_s + after, earlier) - c.begin());
    double previous = s.end_s - s.begin_s;  // the integral of G_{j-1}
    for (; j < end; ++j) {
      const double now = tau > 0.0 ? integral_of_g_first_order(c[j].t_s, tau, s.begin_s, s.end_s)
                                   : integral_of_g(c[j].t_s, c[j].t_spread_s, s.begin_s, s.end_s);
      if (now != previous) out.push_back({k, j, previous - now});
      previous = now;
    }
    if (previous != 0.0) out.push_back({k, end, previous});
  }
  return out;
}

double interval_power(const std::vector<CounterSample>& changes, std::size_t k) {
  const CounterSample &lo = changes[k], &hi = changes[k + 1];
  return (hi.energy_j - lo.energy_j) / (hi.t_s - lo.t_s);
}

double Counter::linear(double t) const {
  const std::size_t n = s_.size();
  if (t >= s_.back().t_s) return s_.back().energy_j + extrapolated(s_.back().t_s, t, n - 2);
  if (t <= s_.front().t_s) return s_.front().energy_j - extrapolated(t, s_.front().t_s, 0);
  const auto it = first_after(t);
  const CounterSample& hi = *it;
  const CounterSample& lo = *std::prev(it);
  double share = (t - lo.t_s) / (hi.t_s - lo.t_s);
  if (model_) {
    const double whole = model_energy(lo.t_s, hi.t_s);
    if (whole > 0.0) share = std::clamp(model_energy(lo.t_s, t) / whole, 0.0, 1.0);
  }
  return lo.energy_j + (hi.energy_j - lo.energy_j) * share;
}

double Counter::step(double t) const {
  const auto it = first_after(t);
  return it == s_.begin() ? s_.front().energy_j : std::prev(it)->energy_j;
}

std::vector<CounterSample>::const_iterator Counter::first_after(double t) const {
  return std::upper_bound(s_.begin(), s_.end(), t,
                          [](double x, const CounterSample& c) { return x < c.t_s; });
}

// Energy over [a, b] by the model's activity.
double Counter::model_energy(double a, double b) const {
  return model_->energy(activity_.occupancy(a, b));
}

// Energy over [a, b] outside the observed changes: the model's, else interval k's power.
double Counter::extrapolated(double a, double b, std::size_t k) const {
  return model_ ? model_energy(a, b) : interval_power(s_, k) * (b - a);
}

IntervalShares::IntervalShares(const AttributionInput& in,
                               const attribution_model::Activity& activity,
                               const std::optional<attribution_model::Fit>& model)
    : s_(in.counter), model_(model), occupancy_(s_.size()), expected_(s_.size(), 0.0) {
  for (std::size_t i = 1; i < s_.size(); ++i) {
    if (!model_) {
      expected_[i] = s_[i].t_s - s_[i - 1].t_s;
    } else if (attribution_model::known_interval(in, i - 1)) {
      occupancy_[i] = activity.expected_occupancy(s_[i - 1], s_[i]);
      expected_[i] = model_->energy(occupancy_[i]);
    } else {
      expected_[i] = kUnknown;
    }
  }
}

bool IntervalShares::shared(std::size_t i) const {
  return i > 0 && i < s_.size() && expected_[i] != kUnknown;
}

double IntervalShares::share_energy(std::size_t i, std::size_t k, double seconds) const {
  const double model_j = model_ ? std::max(0.0, model_->power[k]) * seconds : seconds;
  if (!shared(i)) {
    return model_ ? model_j : interval_power(s_, i == 0 ? 0 : s_.size() - 2) * seconds;
  }
  const double whole = expected_[i] > 0.0 ? expected_[i] : s_[i].t_s - s_[i - 1].t_s;
  const double part = expected_[i] > 0.0 ? model_j : seconds;
  return increment(i) * part / whole;
}

}  // namespace perseus::measure::attribution_counter
