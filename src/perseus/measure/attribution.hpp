// Attributing a GPU's energy to instructions from a coarse energy counter (architecture section 9).
// The training thread records when each instruction ran; a sampler records when the counter
// changed and to what (counter_series.hpp). When a reporting window closes, this turns both into
// energy per instruction occurrence and per iteration.
//
// Methods (docs/measuring-energy.md):
//   fit      least squares over the counter intervals: the energy of each interval between two
//            observed changes is modelled as sum_k P_k x (time spent on k in the interval), with
//            one average power P_k per instruction key (name and clock), one for idle time inside
//            iterations and one for time outside them. An occurrence's energy is P_k x its
//            duration. Standard errors come from the residuals (sigma^2 (X'X)^-1). Needs more
//            intervals than unknowns and activity mixes that differ between intervals; falls
//            back to `overlap` otherwise.
//   overlap  constant power between two observed changes; an occurrence gets the energy of the
//            counter intervals it overlaps, pro rata. Exact for long instructions, biased for
//            instructions shorter than the refresh period (the energy of an interval is spread
//            over everything in it).
//   busy-overlap  overlap over busy time only: a least-squares fit of a busy power per clock
//            (every instruction at a clock alike), idle inside iterations and outside them
//            (earlier windows may have run other clocks) says how much of each
//            counter interval's energy went to idle time; the rest is spread over the
//            instructions in the interval pro rata. Robust where `fit` is not (instructions of
//            similar power, idle gaps of microseconds, a short window) and, unlike `overlap`,
//            unbiased by pipeline bubbles. Instructions of different power that share a counter
//            interval get its average busy power each, unless the intervals tell them apart:
//            the busy power is then fitted per key instead of per clock, where a nested F test
//            over the intervals rejects one power per clock at kSplitSignificance and the
//            per-key powers are determined (kSplitMaxRelativeStderr; measured on an H100: a
//            memory-bound forward drew 25 % more than its backward). Falls back to
//            `overlap` when its powers cannot be fitted. Standard errors (also overlap's) treat
//            counter intervals as the samples; busy-overlap's add the fitted powers' uncertainty
//            (delta method over their covariance, attribution_model.hpp), which dominates in short
//            windows with bubbles, and, when the changes are timed by a refresh clock, how far
//            the clock's tick error, common to all of them, moves each power (refitted with every
//            change that much earlier and later; the residuals cannot show an error that moves
//            every interval's edges alike).
//   deltas   the counter's value at the end minus at the start of each occurrence: what reading
//            the counter around every instruction gives (kept to show why it is wrong: an
//            occurrence inside one refresh interval reads 0 J).
//
// When the window's observed changes fit one refresh clock (a real H100's do: refresh_clock.hpp),
// every method takes each change's time from the clock's tick instead of the reads around it.
// The counter's changes trail and smooth the energy they report (counter_response; on an H100 a
// lag of 10 ms and a window of 20 ms: NvmlGpu): every method takes a change observed at t as the
// energy spent up to t - lag, and all but deltas up to a time uniform in t - lag -+ window / 2,
// combined with the change's own spread: the fits regress on expected occupancies
// (attribution_model.hpp), and overlap and busy-overlap share each interval's energy by the same
// expectation, so an occurrence at an interval's edge counts towards it by how likely the
// counter put its energy there (on a counter that does exactly this, busy-overlap is exact). An
// interval that reaches beyond the window's known activity (attribution_model::known_interval)
// gives what ran in it the model's energy instead of a share (busy-overlap), as beyond the
// observed changes.
//
// Iteration energy is the counter's own difference over the iteration, with the counter
// interpolated between observed changes (fit and busy-overlap: in proportion to the fitted model's
// energy, so an idle gap does not take a busy share; overlap: linearly; deltas: the step
// function), so the energies of a window's iterations add up to the counter's total. After the last
// observed change the counter is extrapolated with the fitted model (fit, busy-overlap) or the last
// interval's power.
//
// Complexity: O(intervals + occurrences log occurrences + intervals x keys^2 + keys^3).
#pragma once

#include <cstddef>
#include <string>
#include <utility>
#include <vector>

#include "perseus/measure/counter_series.hpp"

namespace perseus::measure {

enum class AttributionMethod { kFit, kOverlap, kDeltas, kBusyOverlap };

// "fit", "overlap", "deltas", "busy-overlap"; parse throws perseus::Error naming the unknown
// method.
std::string to_string(AttributionMethod method);
AttributionMethod parse_attribution(const std::string& name);

struct TimedSpan {
  double begin_s = 0.0, end_s = 0.0;
  std::size_t key = 0;  // < AttributionInput::num_keys
};

struct AttributionInput {
  std::vector<std::pair<double, double>> iterations;  // [begin, end], in order, disjoint
  std::vector<TimedSpan> spans;                       // inside iterations, in order, disjoint
  std::size_t num_keys = 0;
  // What the GPU did before this time is not known: counter intervals starting earlier are not
  // fitted.
  double known_from_s = 0.0;
  std::vector<CounterSample> counter;  // observed changes, in time order
  // How the counter's changes trail and smooth the energy they report (seconds, each >= 0).
  CounterResponse counter_response;
  // busy-overlap: per key, the group of keys that share one busy power (the keys at one clock,
  // groups_by_clock in attribution_trace.hpp); empty: all keys share one.
  std::vector<std::size_t> busy_group;
  // Time the changes by the counter's refresh clock when they fit one (refresh_clock.hpp).
  bool time_by_refresh_clock = true;
};

struct KeyEstimate {
  double power_w = 0.0;         // average power of the key's occurrences
  double power_stderr_w = 0.0;  // standard error of power_w (infinity when unknown)
  // busy-overlap, a key pooled with others: how far its own power may lie from the pooled one
  // (the per-key fit's disagreement and variance; where no per-key fit is possible, the farthest
  // it may lie given what its group spent; 0 for a key with a power of its own). Kept
  // apart from power_stderr_w, which more windows shrink: where the counter cannot tell the keys
  // apart this stays (docs/measuring-energy.md).
  double pooling_stderr_w = 0.0;
  std::size_t occurrences = 0;
  double seconds = 0.0;  // total duration of the occurrences
};

struct Attribution {
  AttributionMethod method = AttributionMethod::kFit;  // the method used (after any fallback)
  std::vector<double> span_energy_j;                   // one per input span
  std::vector<double> iteration_energy_j;              // one per input iteration
  std::vector<KeyEstimate> keys;                       // one per key
  double idle_power_w = 0.0;                           // fit only (0 otherwise)
  bool per_key_powers = false;  // busy-overlap: busy power fitted per key, not per clock
  std::size_t intervals = 0;    // counter intervals fitted
  // fit and busy-overlap: root mean square of the fitted intervals' residuals (J).
  double residual_rms_j = 0.0;
  double refresh_period_s = 0.0;     // the counter's refresh clock (0: the changes fit none)
  std::size_t changes_on_clock = 0;  // changes timed by the clock's ticks
  bool measured = false;             // false: the counter did not change at all (energies are 0)
};

// Relative tolerance below which a pivot of the normal equations counts as zero (the fit's
// unknowns are not identifiable and `overlap` is used instead).
inline constexpr double kFitSingularTolerance = 1e-9;

// busy-overlap fits busy power per key instead of per clock when one power per clock is
// rejected at this significance (an F test over the counter intervals; Wilson-Hilferty's
// approximation of the quantile). Strict, so that a window whose instructions draw alike keeps the
// pooled power, which a short window determines better.
inline constexpr double kSplitSignificance = 0.001;
// ... and only when each per-key busy power is known to this relative standard error: a split the
// intervals barely determine (3 ms forwards, 30 to an interval) is no better than the pooled power.
inline constexpr double kSplitMaxRelativeStderr = 0.05;
// ... and only when no per-key power moves by more than kSplitMaxRelativeStderr with every counter
// change taken this much earlier or later: how well a change's time is known beyond the reads
// around it (the counter's lag, fitted to recorded H100 windows with bubbles, varied by +-2 ms
// about its 8 ms; a refresh clock's ticks are known to 0.1-0.2 ms).
inline constexpr double kSplitTimingShift_s = 0.001;

Attribution attribute(const AttributionInput& input, AttributionMethod method);

}  // namespace perseus::measure
