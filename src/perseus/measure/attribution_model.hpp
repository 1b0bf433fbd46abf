// The least-squares power models behind the `fit` and `busy-overlap` attributions
// (perseus/measure/attribution.hpp): what the GPU did in any time range, and average powers fitted
// over the counter intervals between observed changes, with their covariance so that an
// attribution built on them can say how uncertain the model makes it.
//
// Regressors: each key, then idle time inside iterations, then time outside iterations. A fit's
// unknowns are either the regressors themselves (fit_powers) or fewer (fit_busy: one busy power
// per group of keys, idle, outside); `unknown_of` maps each regressor to its unknown.
//
// Complexity: O(intervals x unknowns^2 + unknowns^3) per fit, plus the occupancy of each interval.
#pragma once

#include <cstddef>
#include <limits>
#include <optional>
#include <vector>

#include "perseus/measure/attribution.hpp"

namespace perseus::measure::attribution_model {

inline constexpr double kUnknown = std::numeric_limits<double>::infinity();

// What the GPU did over time: seconds per regressor in any time range.
// The integral of e^(-(t - s) / tau) over s in [a, b] clipped to s <= t: how much of what ran in
// [a, b] a first-order response (time constant tau) has still to count at t (0 when a >= t).
double first_order_weight(double t, double tau, double a, double b);

class Activity {
 public:
  explicit Activity(const AttributionInput& in) : in_(in) {}
  std::size_t regressors() const { return in_.num_keys + 2; }
  std::vector<double> occupancy(double a, double b) const;
  // The expected occupancy between two observed counter changes whose times are uncertain
  // (CounterSample::t_spread_s: each uniform over its range, independently). Regressing an
  // interval's energy on it rather than on occupancy(lo.t_s, hi.t_s) keeps the fit unbiased: the
  // error of a regressor measured at the observed times grows with what ran at the interval's ends
  // (errors in variables: a key that meets the bubbles' edges gets their idle energy), while the
  // true occupancy's deviation from its expectation given the observed times is uncorrelated with
  // that expectation (a Berkson error). Exact: O(activity within the spreads) more than occupancy.
  std::vector<double> expected_occupancy(const CounterSample& lo, const CounterSample& hi) const;

 private:
  struct Totals {
    double busy = 0.0, inside = 0.0;
  };
  // The one walk over the activity that occupancy and add_spread share: adds measure(begin, end)
  // of each span overlapping [a, b) to its key in `out`; returns the spans' total and the
  // overlapping iterations' total of the same measure.
  template <typename Measure>
  Totals accumulate(double a, double b, const Measure& measure, std::vector<double>& out) const;
  // Adds sign x (the mean of C(t + u) - C(t) over u uniform in [-h, h]) per regressor, C the
  // cumulative occupancy.
  void add_spread(double t, double h, double sign, std::vector<double>& out) const;
  // Adds sign x (the mean of C(t - x) - C(t) over x exponential with mean tau) per regressor.
  void add_first_order(double t, double tau, double sign, std::vector<double>& out) const;

  const AttributionInput& in_;
};

struct Fit {
  std::vector<double> power, stderr_w;  // per regressor (0 and kUnknown when not fitted)
  std::size_t intervals = 0;
  std::vector<std::size_t> unknown_of;  // per regressor: its unknown
  std::size_t unknowns = 0;
  // sigma^2 (X'X)^-1 over the unknowns, row-major (0 for unknowns without time in the fit).
  std::vector<double> covariance;
  double rss = 0.0;        // residual sum of squares over the fitted intervals (J^2)
  std::size_t fitted = 0;  // unknowns with time in the fitted intervals
  bool per_key = false;    // fit_busy_split: one busy power per key
  // fit_busy_split, pooled: per key, the variance pooling may add to its power (W^2; 0 for a key
  // with a busy power of its own; where no per-key fit was possible, the square of the farthest
  // its own power may lie from the pooled one given only what its group spent).
  std::vector<double> pooling_variance = {};
  // fit_busy_split with a common timing error: per key, the variance that error adds to its power
  // (W^2; empty without one).
  std::vector<double> timing_variance = {};

  // The model's energy over a time range with this occupancy (Activity::occupancy); a negative
  // power counts as 0.
  double energy(const std::vector<double>& occupancy) const;
};

// Whether the counter interval between changes k and k + 1 lies, spreads included, within the
// window's known activity (from in.known_from_s to the last iteration's end): only such intervals
// are fitted, and only their increments are shared among what ran in them.
bool known_interval(const AttributionInput& in, std::size_t k);

// One power per regressor; nullopt unless there are more intervals than unknowns with time in
// them and the normal equations are well conditioned (kFitSingularTolerance).
std::optional<Fit> fit_powers(const AttributionInput& in, const Activity& activity);

// busy-overlap's model: one busy power per group of keys (`group`: per key, its group; empty: all
// keys in one), one for idle time inside iterations and one outside them (few unknowns, well
// conditioned whenever the GPU is busy most of the time); idle and outside powers are clamped to
// [0, highest busy power], so an idle regressor that gaps of microseconds cannot identify does no
// harm. nullopt unless every group has time in the fitted intervals and a positive power.
std::optional<Fit> fit_busy(const AttributionInput& in, std::vector<std::size_t> group);

// busy-overlap's model with the busy power per key where the counter intervals tell the keys
// apart: fit_busy per clock (in.busy_group), and per key; the per-key model is chosen when the F
// test of the per-clock one against it rejects at kSplitSignificance and each per-key power's
// standard error is under kSplitMaxRelativeStderr of it. nullopt when neither fits.
// `common_timing_s`: a standard error shared by every change's time (the refresh clock's tick
// error); the chosen model's powers are refitted with every change that much earlier and later,
// and half their difference is each key's timing_variance. The residuals cannot show such an
// error: it moves every interval's edges alike.
std::optional<Fit> fit_busy_split(const AttributionInput& in, double common_timing_s = 0.0);

}  // namespace perseus::measure::attribution_model
