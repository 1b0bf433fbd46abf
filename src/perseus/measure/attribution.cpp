#include "perseus/measure/attribution.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>

#include "perseus/measure/attribution_counter.hpp"
#include "perseus/measure/attribution_model.hpp"
#include "perseus/measure/refresh_clock.hpp"
#include "perseus/util/error.hpp"

namespace perseus::measure {

namespace {

using attribution_counter::Counter;
using attribution_counter::IntervalShares;
using attribution_counter::SpanShare;
using attribution_model::Activity;
using attribution_model::Fit;
using attribution_model::kUnknown;

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
// energy, so the interval, not the occurrence, is the independent sample.
void estimate_keys_by_interval(const AttributionInput& in, const std::vector<SpanShare>& shares,
                               const IntervalShares& intervals, Attribution& out) {
  std::map<std::pair<std::size_t, std::size_t>, std::pair<double, double>> pieces;
  for (const SpanShare& share : shares) {
    const std::size_t key = in.spans[share.span].key;
    auto& [e, t] = pieces[{key, share.interval}];
    e += intervals.share_energy(share.interval, key, share.seconds);
    t += share.seconds;
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

// The model's covariance with no unknown's standard deviation above half the highest busy
// power: the idle and outside powers are clamped to [0, that power], so an unknown the fit cannot
// identify (idle gaps of microseconds: +-1e5 W on real windows) is still known to lie in that
// range. Rows and columns are scaled, so correlations are kept.
std::vector<double> physically_bounded(const Fit& model, std::size_t num_keys) {
  const double top = *std::max_element(model.power.begin(), model.power.begin() + num_keys);
  const double cap = 0.5 * top;
  const std::size_t U = model.unknowns;
  std::vector<double> scale(U, 1.0), out = model.covariance;
  for (std::size_t u = 0; u < U; ++u) {
    const double sd = std::sqrt(std::max(0.0, model.covariance[u * U + u]));
    if (sd > cap) scale[u] = cap / sd;
  }
  for (std::size_t u = 0; u < U; ++u) {
    for (std::size_t v = 0; v < U; ++v) out[u * U + v] *= scale[u] * scale[v];
  }
  return out;
}

// Adds to each key's standard error what the fitted model contributes (busy-overlap): the
// interval-ratio error above takes the model's split of each interval between busy and idle time
// as exact, but with pipeline bubbles and a short history the idle power is poorly identified
// (standard errors 5x too small in simulated 1F1B stages). The variance of a key's energy from
// the model is g' C g (delta method): C the covariance of the model's unknowns, g the gradient of
// the key's energy with respect to them. A share of a span in counter interval i gets
// dE x M(share) / M(i), M the model's energy (expected over the changes' spreads); where the
// interval's increment is not shared (IntervalShares::shared) it gets M(share).
void add_model_error(const AttributionInput& in, const std::vector<SpanShare>& shares,
                     const IntervalShares& intervals, const Fit& model, Attribution& out) {
  std::vector<std::vector<double>> gradient(in.num_keys, std::vector<double>(model.unknowns));
  for (const auto& [span, i, seconds] : shares) {
    const std::size_t key = in.spans[span].key;
    if (!(model.power[key] > 0.0)) continue;
    std::vector<double>& g = gradient[key];
    const std::size_t own = model.unknown_of[key];
    if (!intervals.shared(i)) {
      g[own] += seconds;
      continue;
    }
    const double w = intervals.expected_energy(i);
    if (!(w > 0.0)) continue;
    const double de = intervals.increment(i);
    g[own] += de * seconds / w;
    const double scale = -de * model.power[key] * seconds / (w * w);
    const std::vector<double>& whole = intervals.occupancy(i);
    for (std::size_t r = 0; r < whole.size(); ++r) {
      if (model.power[r] > 0.0) g[model.unknown_of[r]] += scale * whole[r];
    }
  }
  const std::vector<double> covariance = physically_bounded(model, in.num_keys);
  const std::size_t U = model.unknowns;
  for (std::size_t k = 0; k < in.num_keys; ++k) {
    KeyEstimate& e = out.keys[k];
    if (!std::isfinite(e.power_stderr_w) || !(e.seconds > 0.0)) continue;
    double variance = 0.0;
    for (std::size_t u = 0; u < U; ++u) {
      for (std::size_t v = 0; v < U; ++v) {
        variance += gradient[k][u] * covariance[u * U + v] * gradient[k][v];
      }
    }
    const double ratio_j = e.power_stderr_w * e.seconds;
    e.power_stderr_w = std::sqrt(ratio_j * ratio_j + std::max(0.0, variance)) / e.seconds;
  }
}

// What pooling may cost each pooled key (Fit::pooling_variance), beside its standard error: the
// interval ratio and the model's covariance treat the group's power as the key's own.
void add_pooling_error(const Fit& model, Attribution& out) {
  for (std::size_t k = 0; k < model.pooling_variance.size(); ++k) {
    out.keys[k].pooling_stderr_w = std::sqrt(model.pooling_variance[k]);
  }
}

// Adds what the refresh clock's common timing error moves each key's power by
// (Fit::timing_variance) to its standard error: it shrinks as the clock is fitted over more
// changes, like the rest of it.
void add_timing_error(const Fit& model, Attribution& out) {
  for (std::size_t k = 0; k < model.timing_variance.size(); ++k) {
    KeyEstimate& e = out.keys[k];
    if (std::isfinite(e.power_stderr_w)) {
      e.power_stderr_w = std::hypot(e.power_stderr_w, std::sqrt(model.timing_variance[k]));
    }
  }
}

// The attribution's frame: one estimate per key with its occurrences and seconds, energies to
// fill; throws on a span whose key is out of range or a busy_group of the wrong size.
Attribution frame(const AttributionInput& in, AttributionMethod method) {
  Attribution out;
  out.method = method;
  out.span_energy_j.assign(in.spans.size(), 0.0);
  out.iteration_energy_j.assign(in.iterations.size(), 0.0);
  out.keys.assign(in.num_keys, KeyEstimate{0.0, kUnknown, 0.0, 0, 0.0});
  if (!in.busy_group.empty() && in.busy_group.size() != in.num_keys) {
    throw Error("attribution: busy_group must hold one group per key");
  }
  for (const auto& s : in.spans) {
    if (s.key >= in.num_keys) throw Error("attribution: span key out of range");
    out.keys[s.key].occurrences += 1;
    out.keys[s.key].seconds += s.end_s - s.begin_s;
  }
  out.measured = in.counter.size() >= 2;
  return out;
}

// ---- the changes as the attribution takes them ----

// Keeps each change's range from reaching into its neighbours' (a change cannot come before the
// one it follows): where two ranges overlap (a sampler that stalled for tens of milliseconds
// knows a change only that well), each is cut at the midpoint of the two changes' times and
// centred on what is left, so a narrow range beside a wide one keeps itself and the wide one
// keeps the side its time is on. Overlapping ranges would count time towards an interval with a
// negative weight (span_shares: spans of -139 kW in tests/unit/attribution_spread_test.cpp).
void keep_ranges_apart(std::vector<CounterSample>& changes) {
  const std::size_t n = changes.size();
  std::vector<double> lo(n), hi(n);
  for (std::size_t j = 0; j < n; ++j) {
    lo[j] = changes[j].t_s - changes[j].t_spread_s;
    hi[j] = changes[j].t_s + changes[j].t_spread_s;
  }
  bool cut = false;
  for (std::size_t j = 0; j + 1 < n; ++j) {
    if (hi[j] <= lo[j + 1]) continue;
    const double middle = 0.5 * (changes[j].t_s + changes[j + 1].t_s);
    hi[j] = std::min(hi[j], middle);
    lo[j + 1] = std::max(lo[j + 1], middle);
    cut = true;
  }
  for (std::size_t j = 0; j < n && cut; ++j) {
    changes[j].t_s = 0.5 * (lo[j] + hi[j]);
    changes[j].t_spread_s = 0.5 * (hi[j] - lo[j]);
  }
}

struct TimedChanges {
  AttributionInput input;  // its changes timed; no response or clock left to apply
  std::optional<RefreshClock> clock;
  std::size_t on_clock = 0;
  // The clock's tick error at the last change, common to every change it times (0: no clock).
  double common_timing_s = 0.0;
};

// The changes timed by the refresh clock where they fit one, then taken back by the lag (a change
// observed at t reports the energy up to t - lag) and spread over the window (a uniform time with
// the variance of the window's and the timing's sum), their ranges kept apart.
TimedChanges time_changes(const AttributionInput& input) {
  TimedChanges timed{input, std::nullopt, 0};
  AttributionInput& in = timed.input;
  in.time_by_refresh_clock = false;
  in.counter_response = {0.0, 0.0, input.counter_response.time_constant_s};
  if (input.time_by_refresh_clock) timed.clock = fit_refresh_clock(input.counter);
  if (timed.clock) {
    ClockTimedChanges changes = time_by_clock(input.counter, *timed.clock);
    in.counter = std::move(changes.changes);
    timed.on_clock = changes.on_clock;
    const RefreshClock& c = *timed.clock;
    timed.common_timing_s =
        c.tick_stderr_s(std::round((input.counter.back().t_s - c.first_tick_s) / c.period_s));
  }
  const double half = 0.5 * input.counter_response.window_s;
  for (CounterSample& c : in.counter) {
    c.t_s -= input.counter_response.lag_s;
    c.t_spread_s = std::hypot(c.t_spread_s, half);
  }
  keep_ranges_apart(in.counter);
  return timed;
}

// ---- the methods ----

// The attribution of changes already timed (time_changes); `common_timing_s` as in
// fit_busy_split.
Attribution attribute_timed(const AttributionInput& in, AttributionMethod method,
                            double common_timing_s) {
  Attribution out = frame(in, method);
  if (!out.measured) return out;
  const Activity activity(in);
  std::optional<Fit> model;  // the fitted powers that shape the counter between changes
  if (method == AttributionMethod::kFit) model = attribution_model::fit_powers(in, activity);
  if (method == AttributionMethod::kBusyOverlap) {
    model = attribution_model::fit_busy_split(in, common_timing_s);
  }
  if (!model && method != AttributionMethod::kDeltas) out.method = AttributionMethod::kOverlap;
  const Counter counter(in.counter, activity, model);
  auto energy = [&](double a, double b) {
    return out.method == AttributionMethod::kDeltas ? counter.step(b) - counter.step(a)
                                                    : counter.linear(b) - counter.linear(a);
  };
  for (std::size_t i = 0; i < in.iterations.size(); ++i) {
    out.iteration_energy_j[i] = energy(in.iterations[i].first, in.iterations[i].second);
  }
  if (model) {
    out.idle_power_w = model->power[in.num_keys];
    out.per_key_powers = model->per_key;
    out.intervals = model->intervals;
    if (model->intervals > 0) {
      out.residual_rms_j = std::sqrt(model->rss / static_cast<double>(model->intervals));
    }
  }
  if (out.method == AttributionMethod::kDeltas) {
    for (std::size_t i = 0; i < in.spans.size(); ++i) {
      out.span_energy_j[i] = energy(in.spans[i].begin_s, in.spans[i].end_s);
    }
    estimate_keys_from_spans(in, out);
    return out;
  }
  if (out.method == AttributionMethod::kFit) {
    for (std::size_t i = 0; i < in.spans.size(); ++i) {
      const TimedSpan& s = in.spans[i];
      out.span_energy_j[i] = std::max(0.0, model->power[s.key]) * (s.end_s - s.begin_s);
    }
    for (std::size_t k = 0; k < in.num_keys; ++k) {
      out.keys[k].power_w = model->power[k];
      out.keys[k].power_stderr_w = model->stderr_w[k];
    }
    return out;
  }
  // overlap and busy-overlap: each counter interval's energy shared among what ran in it.
  const std::vector<SpanShare> shares = attribution_counter::span_shares(in);
  const IntervalShares intervals(in, activity, model);
  for (const auto& [span, i, seconds] : shares) {
    out.span_energy_j[span] += intervals.share_energy(i, in.spans[span].key, seconds);
  }
  estimate_keys_by_interval(in, shares, intervals, out);
  if (model) {
    add_model_error(in, shares, intervals, *model, out);
    add_pooling_error(*model, out);
    add_timing_error(*model, out);
  }
  return out;
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

Attribution attribute(const AttributionInput& input, AttributionMethod method) {
  const CounterResponse& response = input.counter_response;
  for (auto [name, value] : {std::pair{"counter_lag_s", response.lag_s},
                             std::pair{"counter_window_s", response.window_s},
                             std::pair{"counter_time_constant_s", response.time_constant_s}}) {
    if (!(value >= 0.0) || !std::isfinite(value)) {
      throw Error(std::string("attribution: ") + name + " must be a finite number of seconds >= 0");
    }
  }
  if (response.window_s > 0.0 && response.time_constant_s > 0.0) {
    throw Error(
        "attribution: counter_window_s and counter_time_constant_s are two models of the "
        "counter's response: give one");
  }
  TimedChanges timed = time_changes(input);
  Attribution out = attribute_timed(timed.input, method, timed.common_timing_s);
  if (timed.clock) {
    out.refresh_period_s = timed.clock->period_s;
    out.changes_on_clock = timed.on_clock;
  }
  return out;
}

}  // namespace perseus::measure
