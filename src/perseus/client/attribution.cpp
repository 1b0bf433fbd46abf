#include "perseus/client/attribution.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <optional>

#include "perseus/util/error.hpp"

namespace perseus::client {

namespace {

constexpr double kUnknown = std::numeric_limits<double>::infinity();

double overlap(double a, double b, double begin, double end) {
  return std::max(0.0, std::min(b, end) - std::max(a, begin));
}

// What the GPU did over time: seconds per regressor (each key, then idle inside iterations,
// then time outside iterations) in any time range.
class Activity {
 public:
  explicit Activity(const AttributionInput& in) : in_(in) {}
  std::size_t regressors() const { return in_.num_keys + 2; }

  std::vector<double> occupancy(double a, double b) const {
    std::vector<double> out(regressors(), 0.0);
    if (b <= a) return out;
    double busy = 0.0, inside = 0.0;
    auto s = std::lower_bound(in_.spans.begin(), in_.spans.end(), a,
                              [](const TimedSpan& span, double t) { return span.end_s <= t; });
    for (; s != in_.spans.end() && s->begin_s < b; ++s) {
      double o = overlap(a, b, s->begin_s, s->end_s);
      out[s->key] += o;
      busy += o;
    }
    auto it = std::lower_bound(in_.iterations.begin(), in_.iterations.end(), a,
                               [](const auto& iter, double t) { return iter.second <= t; });
    for (; it != in_.iterations.end() && it->first < b; ++it) {
      inside += overlap(a, b, it->first, it->second);
    }
    out[in_.num_keys] = std::max(0.0, inside - busy);
    out[in_.num_keys + 1] = std::max(0.0, (b - a) - inside);
    return out;
  }

 private:
  const AttributionInput& in_;
};

// ---- least squares ----

struct Fit {
  std::vector<double> power, stderr_w;  // per regressor (0 and kUnknown when not fitted)
  std::size_t intervals = 0;
};

// Solves the normal equations A x = b (A symmetric positive definite, p x p, row-major) by
// Cholesky; also returns diag(A^-1). nullopt when a pivot falls below the tolerance.
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
  std::vector<double> inverse_diagonal(p);
  for (std::size_t i = 0; i < p; ++i) {
    std::vector<double> e(p, 0.0);
    e[i] = 1.0;
    inverse_diagonal[i] = solve(e)[i];
  }
  return std::make_pair(solve(b), inverse_diagonal);
}

std::optional<Fit> fit_powers(const AttributionInput& in, const Activity& activity) {
  const std::size_t R = activity.regressors();
  const double known_to = in.iterations.empty() ? 0.0 : in.iterations.back().second;
  std::vector<std::vector<double>> rows;
  std::vector<double> y;
  for (std::size_t k = 0; k + 1 < in.counter.size(); ++k) {
    const double a = in.counter[k].t_s, b = in.counter[k + 1].t_s;
    if (a < in.known_from_s || b > known_to) continue;
    rows.push_back(activity.occupancy(a, b));
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
  const auto& [beta, inverse_diagonal] = *solved;
  double rss = 0.0;
  for (std::size_t i = 0; i < n; ++i) {
    double predicted = 0.0;
    for (std::size_t u = 0; u < p; ++u) predicted += rows[i][used[u]] * beta[u];
    rss += (y[i] - predicted) * (y[i] - predicted);
  }
  const double sigma2 = rss / static_cast<double>(n - p);
  Fit fit{std::vector<double>(R, 0.0), std::vector<double>(R, kUnknown), n};
  for (std::size_t u = 0; u < p; ++u) {
    fit.power[used[u]] = beta[u];
    fit.stderr_w[used[u]] = std::sqrt(std::max(0.0, sigma2 * inverse_diagonal[u]));
  }
  return fit;
}

// busy-overlap's model: one busy power per group of keys (a clock), one for idle time inside
// iterations and one outside them (few unknowns, well conditioned whenever the GPU is busy most
// of the time); idle and outside powers are clamped to [0, highest busy power], so an idle
// regressor that gaps of microseconds cannot identify does no harm. Every group needs time in the
// fitted intervals and a positive power.
std::optional<Fit> fit_busy(const AttributionInput& in) {
  std::vector<std::size_t> group = in.busy_group;
  if (group.empty()) group.assign(in.num_keys, 0);
  AttributionInput pooled = in;  // the groups are its keys
  for (TimedSpan& s : pooled.spans) s.key = group.at(s.key);
  pooled.num_keys = in.num_keys == 0 ? 0 : *std::max_element(group.begin(), group.end()) + 1;
  pooled.busy_group.clear();
  const auto fit = fit_powers(pooled, Activity(pooled));
  if (!fit) return std::nullopt;
  const std::size_t G = pooled.num_keys;
  if (std::any_of(fit->power.begin(), fit->power.begin() + G,
                  [](double p) { return !(p > 0.0); })) {
    return std::nullopt;
  }
  const double top = *std::max_element(fit->power.begin(), fit->power.begin() + G);
  Fit model{std::vector<double>(in.num_keys + 2, 0.0),
            std::vector<double>(in.num_keys + 2, kUnknown), fit->intervals};
  for (std::size_t k = 0; k < in.num_keys; ++k) model.power[k] = fit->power[group[k]];
  model.power[in.num_keys] = std::clamp(fit->power[G], 0.0, top);
  model.power[in.num_keys + 1] = std::clamp(fit->power[G + 1], 0.0, top);
  return model;
}

// ---- the counter as a function of time ----

class Counter {
 public:
  Counter(const std::vector<CounterSample>& samples, const Activity& activity,
          const std::optional<Fit>& model)
      : s_(samples), activity_(activity), model_(model) {}

  // Linear between observed changes; extrapolated beyond them (see attribution.hpp).
  double linear(double t) const {
    const std::size_t n = s_.size();
    if (t >= s_.back().t_s) return s_.back().energy_j + extrapolated(s_.back().t_s, t, n - 2);
    if (t <= s_.front().t_s) return s_.front().energy_j - extrapolated(t, s_.front().t_s, 0);
    auto it = std::upper_bound(s_.begin(), s_.end(), t,
                               [](double x, const CounterSample& c) { return x < c.t_s; });
    const CounterSample& hi = *it;
    const CounterSample& lo = *std::prev(it);
    // Within an interval the counter's increment is spread in proportion to the fitted model's
    // energy (constant power without a model), so idle gaps do not take a busy share.
    double share = (t - lo.t_s) / (hi.t_s - lo.t_s);
    if (model_) {
      const double whole = model_energy(lo.t_s, hi.t_s);
      if (whole > 0.0) share = std::clamp(model_energy(lo.t_s, t) / whole, 0.0, 1.0);
    }
    return lo.energy_j + (hi.energy_j - lo.energy_j) * share;
  }

  // The value a read at t would have returned (the last change at or before t).
  double step(double t) const {
    auto it = std::upper_bound(s_.begin(), s_.end(), t,
                               [](double x, const CounterSample& c) { return x < c.t_s; });
    return it == s_.begin() ? s_.front().energy_j : std::prev(it)->energy_j;
  }

 private:
  // Energy over [a, b] outside the observed changes: the model's, else interval k's power.
  double model_energy(double a, double b) const {
    auto occupancy = activity_.occupancy(a, b);
    double e = 0.0;
    for (std::size_t r = 0; r < occupancy.size(); ++r) {
      e += std::max(0.0, model_->power[r]) * occupancy[r];
    }
    return e;
  }

  double extrapolated(double a, double b, std::size_t k) const {
    if (model_) return model_energy(a, b);
    const CounterSample &lo = s_[k], &hi = s_[k + 1];
    return (hi.energy_j - lo.energy_j) / (hi.t_s - lo.t_s) * (b - a);
  }

  const std::vector<CounterSample>& s_;
  const Activity& activity_;
  const std::optional<Fit>& model_;
};

// Per key: power = total energy / total time; standard error of the occurrences' mean power
// (deltas: each occurrence reads the counter on its own).
void estimate_keys_from_spans(const AttributionInput& in, Attribution& out) {
  std::vector<double> energy(in.num_keys, 0.0), sum(in.num_keys, 0.0), sum2(in.num_keys, 0.0);
  for (std::size_t i = 0; i < in.spans.size(); ++i) {
    const TimedSpan& s = in.spans[i];
    const double d = s.end_s - s.begin_s;
    energy[s.key] += out.span_energy_j[i];
    if (d > 0.0) {
      const double p = out.span_energy_j[i] / d;
      sum[s.key] += p;
      sum2[s.key] += p * p;
    }
  }
  for (std::size_t k = 0; k < in.num_keys; ++k) {
    KeyEstimate& e = out.keys[k];
    const double n = static_cast<double>(e.occurrences);
    e.power_w = e.seconds > 0.0 ? energy[k] / e.seconds : 0.0;
    if (e.occurrences < 2) continue;
    const double variance = std::max(0.0, (sum2[k] - sum[k] * sum[k] / n) / (n - 1.0));
    e.power_stderr_w = std::sqrt(variance / n);
  }
}

// Per key: power = total energy / total time, with the standard error of a ratio estimator over
// counter intervals (busy-overlap, overlap): the occurrences inside one interval share its
// energy, so the interval, not the occurrence, is the independent sample. `energy(a, b)` is the
// method's energy over [a, b]; pieces of a span telescope to its energy.
template <typename Energy>
void estimate_keys_by_interval(const AttributionInput& in, const Energy& energy, Attribution& out) {
  const auto& c = in.counter;
  std::map<std::pair<std::size_t, std::size_t>, std::pair<double, double>> pieces;
  for (const TimedSpan& s : in.spans) {
    auto next = std::upper_bound(c.begin(), c.end(), s.begin_s,
                                 [](double x, const CounterSample& cs) { return x < cs.t_s; });
    for (double a = s.begin_s; a < s.end_s; ++next) {
      const double b = next == c.end() ? s.end_s : std::min(s.end_s, next->t_s);
      auto& [e, t] = pieces[{s.key, static_cast<std::size_t>(next - c.begin())}];
      e += energy(a, b);
      t += b - a;
      a = b;
      if (next == c.end()) break;
    }
  }
  std::vector<double> energy_j(in.num_keys, 0.0), residual2(in.num_keys, 0.0);
  std::vector<std::size_t> samples(in.num_keys, 0);
  for (const auto& [where, piece] : pieces) {
    energy_j[where.first] += piece.first;
    samples[where.first] += 1;
  }
  for (std::size_t k = 0; k < in.num_keys; ++k) {
    KeyEstimate& e = out.keys[k];
    e.power_w = e.seconds > 0.0 ? energy_j[k] / e.seconds : 0.0;
  }
  for (const auto& [where, piece] : pieces) {
    const double r = piece.first - out.keys[where.first].power_w * piece.second;
    residual2[where.first] += r * r;
  }
  for (std::size_t k = 0; k < in.num_keys; ++k) {
    KeyEstimate& e = out.keys[k];
    const double n = static_cast<double>(samples[k]);
    if (samples[k] < 2 || !(e.seconds > 0.0)) continue;
    e.power_stderr_w = std::sqrt(n / (n - 1.0) * residual2[k]) / e.seconds;
  }
}

}  // namespace

std::string to_string(AttributionMethod method) {
  switch (method) {
    case AttributionMethod::kFit:
      return "fit";
    case AttributionMethod::kOverlap:
      return "overlap";
    case AttributionMethod::kDeltas:
      return "deltas";
    case AttributionMethod::kBusyOverlap:
      return "busy-overlap";
  }
  return "fit";
}

AttributionMethod parse_attribution(const std::string& name) {
  for (auto m : {AttributionMethod::kFit, AttributionMethod::kOverlap, AttributionMethod::kDeltas,
                 AttributionMethod::kBusyOverlap}) {
    if (to_string(m) == name) return m;
  }
  throw Error("unknown attribution method '" + name +
              "' (expected busy-overlap, fit, overlap or deltas)");
}

Attribution attribute(const AttributionInput& in, AttributionMethod method) {
  Attribution out;
  out.method = method;
  out.span_energy_j.assign(in.spans.size(), 0.0);
  out.iteration_energy_j.assign(in.iterations.size(), 0.0);
  out.keys.assign(in.num_keys, KeyEstimate{0.0, kUnknown, 0, 0.0});
  if (!in.busy_group.empty() && in.busy_group.size() != in.num_keys) {
    throw Error("attribution: busy_group must hold one group per key");
  }
  for (const auto& s : in.spans) {
    if (s.key >= in.num_keys) throw Error("attribution: span key out of range");
    out.keys[s.key].occurrences += 1;
    out.keys[s.key].seconds += s.end_s - s.begin_s;
  }
  out.measured = in.counter.size() >= 2;
  if (!out.measured) return out;
  const Activity activity(in);
  std::optional<Fit> model;  // the fitted powers that shape the counter between changes
  if (method == AttributionMethod::kFit) model = fit_powers(in, activity);
  if (method == AttributionMethod::kBusyOverlap) model = fit_busy(in);
  if (!model && method != AttributionMethod::kDeltas) out.method = AttributionMethod::kOverlap;
  const bool fit = out.method == AttributionMethod::kFit;
  const Counter counter(in.counter, activity, model);
  auto energy = [&](double a, double b) {
    return out.method == AttributionMethod::kDeltas ? counter.step(b) - counter.step(a)
                                                    : counter.linear(b) - counter.linear(a);
  };
  for (std::size_t i = 0; i < in.iterations.size(); ++i) {
    out.iteration_energy_j[i] = energy(in.iterations[i].first, in.iterations[i].second);
  }
  for (std::size_t i = 0; i < in.spans.size(); ++i) {
    const TimedSpan& s = in.spans[i];
    out.span_energy_j[i] = fit ? std::max(0.0, model->power[s.key]) * (s.end_s - s.begin_s)
                               : energy(s.begin_s, s.end_s);
  }
  if (model) {
    out.idle_power_w = model->power[in.num_keys];
    out.intervals = model->intervals;
  }
  if (out.method == AttributionMethod::kDeltas) {
    estimate_keys_from_spans(in, out);
    return out;
  }
  if (!fit) {
    estimate_keys_by_interval(in, energy, out);
    return out;
  }
  for (std::size_t k = 0; k < in.num_keys; ++k) {
    out.keys[k].power_w = model->power[k];
    out.keys[k].power_stderr_w = model->stderr_w[k];
  }
  return out;
}

}  // namespace perseus::client
