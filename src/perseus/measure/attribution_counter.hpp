// The energy counter's observed changes as energy over time, for the attributions
// (perseus/measure/attribution.hpp): the counter's value at any time, and how the time of each
// span is shared among the counter intervals when the changes' times are spread (the counter's
// window and the reads around each change), with the energy each share gets.
//
// Complexity: span_shares is O(spans x log changes + shares); a Counter answers each query in
// O(log changes) (linear with a model: plus the activity in the interval); IntervalShares is
// built in O(intervals x activity per interval) and answers in O(1).
#pragma once

#include <cstddef>
#include <optional>
#include <vector>

#include "perseus/measure/attribution.hpp"
#include "perseus/measure/attribution_model.hpp"

namespace perseus::measure::attribution_counter {

// A span's time counted towards one counter interval: `interval` is the index of the change that
// closes it (0: before the first change, counter.size(): after the last).
struct SpanShare {
  std::size_t span = 0, interval = 0;
  double seconds = 0.0;
};

// A change observed at t reports the energy spent up to a time uniform in t -+ t_spread_s, so
// time s counts towards the interval between changes i - 1 and i with weight G_{i-1}(s) - G_i(s),
// G_j(s) the probability that change j's time is at or before s; a share's seconds are the
// integral of that weight over the span. A span's shares add up to its duration; without spreads
// they are its pieces cut at the changes. The same expectation as the fits' regressors
// (Activity::expected_occupancy), so that a span at an interval's edge gets the energy the counter
// reported of it, wherever that was. In span order, then interval order; no empty share.
std::vector<SpanShare> span_shares(const AttributionInput& in);

// The power of the counter interval between changes k and k + 1 (its increment over its
// length).
double interval_power(const std::vector<CounterSample>& changes, std::size_t k);

// The counter as a function of time, for iteration energies and deltas.
class Counter {
 public:
  // `changes`, `activity` and `model` must outlive the counter.
  Counter(const std::vector<CounterSample>& changes, const attribution_model::Activity& activity,
          const std::optional<attribution_model::Fit>& model)
      : s_(changes), activity_(activity), model_(model) {}

  // Linear between observed changes (with a model: in proportion to its energy, so that idle
  // gaps do not take a busy share); extrapolated beyond them (see attribution.hpp).
  double linear(double t) const;
  // The value a read at t would have returned (the last change at or before t).
  double step(double t) const;

 private:
  double model_energy(double a, double b) const;
  double extrapolated(double a, double b, std::size_t k) const;
  std::vector<CounterSample>::const_iterator first_after(double t) const;

  const std::vector<CounterSample>& s_;
  const attribution_model::Activity& activity_;
  const std::optional<attribution_model::Fit>& model_;
};

// The energy each span share gets (overlap and busy-overlap), with what the model expects of
// every counter interval. Built in O(intervals x activity per interval).
class IntervalShares {
 public:
  // `in` and `model` must outlive it.
  IntervalShares(const AttributionInput& in, const attribution_model::Activity& activity,
                 const std::optional<attribution_model::Fit>& model);

  // Whether time counted towards interval i gets a share of the interval's increment: not
  // beyond the observed changes, nor, with a model, where the interval reaches beyond the
  // window's known activity (what else ran there, and so the share, is not known).
  bool shared(std::size_t i) const;
  // The energy of `seconds` of key k's time counted towards interval i: its share of the
  // interval's increment, in proportion to the model's energy over the interval as its changes'
  // spreads expect it (constant power without a model); where not shared, the model's energy, or
  // without one the nearest interval's power.
  double share_energy(std::size_t i, std::size_t k, double seconds) const;

  // A shared interval i, with a model: the counter's increment, the expected occupancy
  // (Activity::expected_occupancy) and the model's energy over it.
  double increment(std::size_t i) const { return s_[i].energy_j - s_[i - 1].energy_j; }
  const std::vector<double>& occupancy(std::size_t i) const { return occupancy_[i]; }
  double expected_energy(std::size_t i) const { return expected_[i]; }

 private:
  const std::vector<CounterSample>& s_;
  const std::optional<attribution_model::Fit>& model_;
  // Per interval i (changes i - 1 to i), with a model and shared: the expected occupancy.
  std::vector<std::vector<double>> occupancy_;
  // Per interval i: the model's expected energy (its length without a model; kUnknown where it
  // is not shared).
  std::vector<double> expected_;
};

}  // namespace perseus::measure::attribution_counter
