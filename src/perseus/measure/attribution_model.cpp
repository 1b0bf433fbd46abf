#include "perseus/measure/attribution_model.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>

namespace perseus::measure::attribution_model {

namespace {

double overlap(double a, double b, double begin, double end) {
  return std::max(0.0, std::min(b, end) - std::max(a, begin));
}

// Solves the normal equations A x = b (A symmetric positive definite, p x p, row-major) by
// Cholesky; also returns A^-1 (row-major). nullopt when a pivot falls below the tolerance.
std::optional<std::pair<std::vector<double>, std::vector<double>>> solve_spd(
    std::vector<double> A, const std::vector<double>& b, std::size_t p) {
  std::vector<double> L(p * p, 0.0);
  for (std::size_t j = 0; j < p; ++j) {
    double d = A[j * p + j];
    for (std::size_t k = 0; k < j; ++k) d -= L[j * p + k] * L[j * p + k];
    if (!(d > kFitSingularTolerance * A[j * p + j])) return std::nullopt;
    L[j * p + j] = std::sqrt(d);
    for (std::size_t i = j + 1; i < p; ++i) {
      double v = A[i * p + j];
      for (std::size_t k = 0; k < j; ++k) v -= L[i * p + k] * L[j * p + k];
      L[i * p + j] = v / L[j * p + j];
    }
  }
  auto solve = [&](std::vector<double> y) {  // L L^T x = y
    for (std::size_t i = 0; i < p; ++i) {
      for (std::size_t k = 0; k < i; ++k) y[i] -= L[i * p + k] * y[k];
      y[i] /= L[i * p + i];
    }
    for (std::size_t i = p; i-- > 0;) {
      for (std::size_t k = i + 1; k < p; ++k) y[i] -= L[k * p + i] * y[k];
      y[i] /= L[i * p + i];
    }
    return y;
  };
  std::vector<double> inverse(p * p);
  for (std::size_t i = 0; i < p; ++i) {
    std::vector<double> e(p, 0.0);
    e[i] = 1.0;
    const std::vector<double> column = solve(e);
    for (std::size_t j = 0; j < p; ++j) inverse[j * p + i] = column[j];
  }
  return std::make_pair(solve(b), inverse);
}

}  // namespace

template <typename Measure>
Activity::Totals Activity::accumulate(double a, double b, const Measure& measure,
                                      std::vector<double>& out) const {
  Totals totals;
  auto s = std::lower_bound(in_.spans.begin(), in_.spans.end(), a,
                            [](const TimedSpan& span, double t) { return span.end_s <= t; });
  for (; s != in_.spans.end() && s->begin_s < b; ++s) {
    const double m = measure(s->begin_s, s->end_s);
    out[s->key] += m;
    totals.busy += m;
  }
  auto it = std::lower_bound(in_.iterations.begin(), in_.iterations.end(), a,
                             [](const auto& iter, double t) { return iter.second <= t; });
  for (; it != in_.iterations.end() && it->first < b; ++it) {
    totals.inside += measure(it->first, it->second);
  }
  return totals;
}

std::vector<double> Activity::occupancy(double a, double b) const {
  std::vector<double> out(regressors(), 0.0);
  if (b <= a) return out;
  const Totals t = accumulate(
      a, b, [&](double begin, double end) { return overlap(a, b, begin, end); }, out);
  out[in_.num_keys] = std::max(0.0, t.inside - t.busy);
  out[in_.num_keys + 1] = std::max(0.0, (b - a) - t.inside);
  return out;
}

std::vector<double> Activity::expected_occupancy(const CounterSample& lo,
                                                 const CounterSample& hi) const {
  std::vector<double> out = occupancy(lo.t_s, hi.t_s);
  add_spread(hi.t_s, hi.t_spread_s, 1.0, out);
  add_spread(lo.t_s, lo.t_spread_s, -1.0, out);
  // A first-order response beside the timing's spread: the two shifts' effects taken as adding
  // up (exact where the activity is linear over both; the spread on the refresh clock is a
  // fraction of a millisecond).
  const double tau = in_.counter_response.time_constant_s;
  if (tau > 0.0) {
    add_first_order(hi.t_s, tau, 1.0, out);
    add_first_order(lo.t_s, tau, -1.0, out);
  }
  for (double& o : out) o = std::max(0.0, o);
  return out;
}

// For one indicator (a set of disjoint ranges), the mean over u of its integral from t to t + u
// is (1 / 2h) x (the integral over [t, t + h] weighted by t + h - s, minus the one over
// [t - h, t] weighted by s - t + h): the weights are how many of the shifts u cover s.
void Activity::add_spread(double t, double h, double sign, std::vector<double>& out) const {
  if (!(h > 0.0)) return;
  const double scale = sign / (2.0 * h);
  auto weighted = [&](double begin, double end) {
    double w = 0.0;
    const double r0 = std::max(begin, t), r1 = std::min(end, t + h);
    if (r1 > r0) w += (r1 - r0) * (h - (0.5 * (r0 + r1) - t));
    const double l0 = std::max(begin, t - h), l1 = std::min(end, t);
    if (l1 > l0) w -= (l1 - l0) * (h + (0.5 * (l0 + l1) - t));
    return scale * w;
  };
  const Totals totals = accumulate(t - h, t + h, weighted, out);
  out[in_.num_keys] += totals.inside - totals.busy;
  out[in_.num_keys + 1] -= totals.inside;  // the whole time line's own term is 0
}

// For one indicator, the mean over x of minus its integral from t - x to t is minus its integral
// over [t - R, t] weighted by e^(-(t - s) / tau) (R = kFirstOrderReachTaus tau; the weight
// beyond is e^-8).
void Activity::add_first_order(double t, double tau, double sign, std::vector<double>& out) const {
  const double reach = kFirstOrderReachTaus * tau;
  auto weighted = [&](double begin, double end) {
    return -sign * first_order_weight(t, tau, std::max(begin, t - reach), end);
  };
  const Totals totals = accumulate(t - reach, t, weighted, out);
  out[in_.num_keys] += totals.inside - totals.busy;
  // The whole time line's own term: -tau (1 - e^-8).
  out[in_.num_keys + 1] += -sign * tau * (1.0 - std::exp(-kFirstOrderReachTaus)) - totals.inside;
}

double Fit::energy(const std::vector<double>& occupancy) const {
  double e = 0.0;
  for (std::size_t r = 0; r < occupancy.size(); ++r) e += std::max(0.0, power[r]) * occupancy[r];
  return e;
}

double first_order_weight(double t, double tau, double a, double b) {
  const double end = std::min(b, t);
  if (!(end > a)) return 0.0;
  return tau * (std::exp(-(t - end) / tau) - std::exp(-(t - a) / tau));
}

bool known_interval(const AttributionInput& in, std::size_t k) {
  const double known_to = in.iterations.empty() ? 0.0 : in.iterations.back().second;
  const CounterSample &lo = in.counter.at(k), &hi = in.counter.at(k + 1);
  const double back = kFirstOrderReachTaus * in.counter_response.time_constant_s;
  return lo.t_s - lo.t_spread_s - back >= in.known_from_s && hi.t_s + hi.t_spread_s <= known_to;
}

std::optional<Fit> fit_powers(const AttributionInput& in, const Activity& activity) {
  const std::size_t R = activity.regressors();
  std::vector<std::vector<double>> rows;
  std::vector<double> y;
  for (std::size_t k = 0; k + 1 < in.counter.size(); ++k) {
    if (!known_interval(in, k)) continue;
    const CounterSample &lo = in.counter[k], &hi = in.counter[k + 1];
    rows.push_back(activity.expected_occupancy(lo, hi));
    y.push_back(in.counter[k + 1].energy_j - in.counter[k].energy_j);
  }
  std::vector<std::size_t> used;  // regressors with any time in the fitted intervals
  for (std::size_t r = 0; r < R; ++r) {
    double total = 0.0;
    for (const auto& row : rows) total += row[r];
    if (total > 0.0) used.push_back(r);
  }
  const std::size_t p = used.size(), n = rows.size();
  if (p == 0 || n <= p) return std::nullopt;
  std::vector<double> A(p * p, 0.0), b(p, 0.0);
  for (std::size_t i = 0; i < n; ++i) {
    for (std::size_t u = 0; u < p; ++u) {
      b[u] += rows[i][used[u]] * y[i];
      for (std::size_t v = 0; v < p; ++v) A[u * p + v] += rows[i][used[u]] * rows[i][used[v]];
    }
  }
  auto solved = solve_spd(A, b, p);
  if (!solved) return std::nullopt;
  const auto& [beta, inverse] = *solved;
  double rss = 0.0;
  for (std::size_t i = 0; i < n; ++i) {
    double predicted = 0.0;
    for (std::size_t u = 0; u < p; ++u) predicted += rows[i][used[u]] * beta[u];
    rss += (y[i] - predicted) * (y[i] - predicted);
  }
  const double sigma2 = rss / static_cast<double>(n - p);
  Fit fit{std::vector<double>(R, 0.0),
          std::vector<double>(R, kUnknown),
          n,
          std::vector<std::size_t>(R),
          R,
          std::vector<double>(R * R, 0.0),
          rss,
          p};
  for (std::size_t r = 0; r < R; ++r) fit.unknown_of[r] = r;
  for (std::size_t u = 0; u < p; ++u) {
    fit.power[used[u]] = beta[u];
    fit.stderr_w[used[u]] = std::sqrt(std::max(0.0, sigma2 * inverse[u * p + u]));
    for (std::size_t v = 0; v < p; ++v) {
      fit.covariance[used[u] * R + used[v]] = sigma2 * inverse[u * p + v];
    }
  }
  return fit;
}

std::optional<Fit> fit_busy(const AttributionInput& in, std::vector<std::size_t> group) {
  if (group.empty()) group.assign(in.num_keys, 0);
  AttributionInput pooled = in;  // the groups are its keys
  for (TimedSpan& s : pooled.spans) s.key = group.at(s.key);
  pooled.num_keys = in.num_keys == 0 ? 0 : *std::max_element(group.begin(), group.end()) + 1;
  pooled.busy_group.clear();
  const std::size_t G = pooled.num_keys;
  if (G == 0) return std::nullopt;
  auto fit = fit_powers(pooled, Activity(pooled));
  if (!fit) return std::nullopt;
  if (std::any_of(fit->power.begin(), fit->power.begin() + G,
                  [](double p) { return !(p > 0.0); })) {
    return std::nullopt;
  }
  const double top = *std::max_element(fit->power.begin(), fit->power.begin() + G);
  const std::size_t R = in.num_keys + 2;
  Fit model{std::vector<double>(R, 0.0),
            std::vector<double>(R, kUnknown),
            fit->intervals,
            std::vector<std::size_t>(R),
            fit->unknowns,
            std::move(fit->covariance),
            fit->rss,
            fit->fitted};
  for (std::size_t k = 0; k < in.num_keys; ++k) {
    model.power[k] = fit->power[group[k]];
    model.unknown_of[k] = group[k];
  }
  model.power[in.num_keys] = std::clamp(fit->power[G], 0.0, top);
  model.power[in.num_keys + 1] = std::clamp(fit->power[G + 1], 0.0, top);
  model.unknown_of[in.num_keys] = G;
  model.unknown_of[in.num_keys + 1] = G + 1;
  return model;
}

namespace {

// The F distribution's upper quantile at kSplitSignificance for (d1, d2) degrees of freedom:
// Wilson-Hilferty's normal approximation of the chi-square quantile, divided by d1 (the limit for
// d2 -> infinity), times the finite-d2 widening at d1 = 1, where F is a squared t: (t / z)^2 with
// t from the Cornish-Fisher expansion to second order. Within 4 % of the exact quantile for
// d2 >= 20 (F(1, 56): 12.4 against 12.0).
double f_quantile(double d1, double d2) {
  static_assert(kSplitSignificance == 0.001, "the normal quantiles below are for this level");
  constexpr double z = 3.090232;      // the standard normal's quantile at 1 - 0.001
  constexpr double z_two = 3.290527;  // ... at 1 - 0.001 / 2 (a two-sided t)
  const double a = 2.0 / (9.0 * d1);
  const double chi2 = d1 * std::pow(1.0 - a + z * std::sqrt(a), 3.0);
  const double z2 = z_two * z_two;
  const double t = z_two + (z2 * z_two + z_two) / (4.0 * d2) +
                   (5.0 * z2 * z2 * z_two + 16.0 * z2 * z_two + 3.0 * z_two) / (96.0 * d2 * d2);
  return chi2 / d1 * (t * t) / z2;
}

// Every busy power of `fit` known to kSplitMaxRelativeStderr (the fit's own covariance).
bool determined(const Fit& fit, std::size_t num_keys) {
  for (std::size_t k = 0; k < num_keys; ++k) {
    const std::size_t u = fit.unknown_of[k];
    const double variance = fit.covariance[u * fit.unknowns + u];
    if (!(std::sqrt(variance) < kSplitMaxRelativeStderr * fit.power[k])) return false;
  }
  return true;
}

// fit_busy with every counter change `shift_s` later (earlier when negative).
std::optional<Fit> fit_busy_shifted(const AttributionInput& in,
                                    const std::vector<std::size_t>& group, double shift_s) {
  AttributionInput moved = in;
  for (CounterSample& c : moved.counter) c.t_s += shift_s;
  return fit_busy(moved, group);
}

// Whether each per-key power stays within kSplitMaxRelativeStderr when every counter change is
// taken kSplitTimingShift_s earlier or later: where forwards and backwards alternate, the
// intervals tell them apart only by what their edges cut, and a millisecond moves the split by
// 10-40 % while the residuals stay small (a simulated 1F1B last stage on a strict refresh clock).
bool timing_stable(const AttributionInput& in, const std::vector<std::size_t>& each,
                   const Fit& per_key) {
  for (double shift : {-kSplitTimingShift_s, kSplitTimingShift_s}) {
    const std::optional<Fit> again = fit_busy_shifted(in, each, shift);
    if (!again) return false;
    for (std::size_t k = 0; k < in.num_keys; ++k) {
      const double p = per_key.power[k];
      if (p > 0.0 && !(std::abs(again->power[k] - p) <= kSplitMaxRelativeStderr * p)) return false;
    }
  }
  return true;
}

// The model with each key's timing_variance (fit_busy_split): half the difference of its power
// refitted with every change common_timing_s earlier and later, squared. Unchanged where a
// refit fails.
Fit with_timing_variance(Fit model, const AttributionInput& in,
                         const std::vector<std::size_t>& group, double common_timing_s) {
  if (!(common_timing_s > 0.0)) return model;
  const std::optional<Fit> early = fit_busy_shifted(in, group, -common_timing_s);
  const std::optional<Fit> late = fit_busy_shifted(in, group, common_timing_s);
  if (!early || !late) return model;
  model.timing_variance.assign(in.num_keys, 0.0);
  for (std::size_t k = 0; k < in.num_keys; ++k) {
    const double half = 0.5 * (late->power[k] - early->power[k]);
    model.timing_variance[k] = half * half;
  }
  return model;
}

// How many keys share each unknown of `fit` (a pooled key: 2 or more).
std::vector<std::size_t> keys_per_unknown(const Fit& fit, std::size_t num_keys) {
  std::vector<std::size_t> members(fit.unknowns, 0);
  for (std::size_t k = 0; k < num_keys; ++k) members[fit.unknown_of[k]] += 1;
  return members;
}

// The pooled model with, per key that shares its busy power with others, what pooling may cost
// it: the per-key fit's disagreement with the pooled power and that fit's own variance. A pooled
// key's standard error says nothing of how far its own power may lie from the group's (on a
// simulated strict-clock counter the windows' errors were 47 of them; with this added, 1.3).
Fit with_pooling_variance(Fit pooled, const Fit& per_key, std::size_t num_keys) {
  const std::vector<std::size_t> members = keys_per_unknown(pooled, num_keys);
  pooled.pooling_variance.assign(num_keys, 0.0);
  for (std::size_t k = 0; k < num_keys; ++k) {
    const std::size_t u = per_key.unknown_of[k];
    const double own = per_key.covariance[u * per_key.unknowns + u];
    if (members[pooled.unknown_of[k]] < 2 || !std::isfinite(own)) continue;
    const double d = per_key.power[k] - pooled.power[k];
    pooled.pooling_variance[k] = d * d + std::max(0.0, own);
  }
  return pooled;
}

// The pooled model where no per-key fit could be made (a key's own power fitted at or below 0,
// or too few intervals): the counter then bounds a pooled key's own power only by what its group
// spent, from 0 to the group's power x the group's time / the key's time, and what pooling may
// cost it is the larger distance from the pooled power to either end (on a recorded H100 window
// of 12-13 ms forwards and backwards alternating, the per-key fit put the forward at -63 W and
// the pooling error read 0 before).
Fit with_unbounded_pooling(Fit pooled, const AttributionInput& in) {
  const std::vector<std::size_t> members = keys_per_unknown(pooled, in.num_keys);
  std::vector<double> key_s(in.num_keys, 0.0), group_s(pooled.unknowns, 0.0);
  for (const TimedSpan& s : in.spans) key_s[s.key] += s.end_s - s.begin_s;
  for (std::size_t k = 0; k < in.num_keys; ++k) group_s[pooled.unknown_of[k]] += key_s[k];
  pooled.pooling_variance.assign(in.num_keys, 0.0);
  for (std::size_t k = 0; k < in.num_keys; ++k) {
    const std::size_t u = pooled.unknown_of[k];
    if (members[u] < 2 || !(key_s[k] > 0.0)) continue;
    const double p = pooled.power[k];
    const double d = std::max(p, p * group_s[u] / key_s[k] - p);
    pooled.pooling_variance[k] = d * d;
  }
  return pooled;
}

// One group per key.
std::vector<std::size_t> each_key(std::size_t num_keys) {
  std::vector<std::size_t> each(num_keys);
  for (std::size_t k = 0; k < num_keys; ++k) each[k] = k;
  return each;
}

// fit_busy_split's choice between one busy power per clock and one per key (before the timing
// error).
std::optional<Fit> choose_busy_model(const AttributionInput& in) {
  std::optional<Fit> pooled = fit_busy(in, in.busy_group);
  const std::vector<std::size_t> each = each_key(in.num_keys);
  std::optional<Fit> per_key = fit_busy(in, each);
  if (!pooled) {
    if (per_key) per_key->per_key = true;
    return per_key;
  }
  if (!per_key || per_key->fitted <= pooled->fitted || per_key->intervals <= per_key->fitted) {
    return with_unbounded_pooling(*pooled, in);
  }
  per_key->per_key = true;
  const double d1 = static_cast<double>(per_key->fitted - pooled->fitted);
  const double d2 = static_cast<double>(per_key->intervals - per_key->fitted);
  // An exact fit (no residual) rejects pooling outright; its covariance is 0, so it is determined.
  const double f = per_key->rss > 0.0 ? (pooled->rss - per_key->rss) / d1 / (per_key->rss / d2)
                                      : std::numeric_limits<double>::infinity();
  const bool split = f > f_quantile(d1, d2) && determined(*per_key, in.num_keys) &&
                     timing_stable(in, each, *per_key);
  return split ? *per_key : with_pooling_variance(*pooled, *per_key, in.num_keys);
}

}  // namespace

std::optional<Fit> fit_busy_split(const AttributionInput& in, double common_timing_s) {
  std::optional<Fit> model = choose_busy_model(in);
  if (!model) return model;
  const std::vector<std::size_t> group = model->per_key ? each_key(in.num_keys) : in.busy_group;
  return with_timing_variance(std::move(*model), in, group, common_timing_s);
}

}  // namespace perseus::measure::attribution_model
