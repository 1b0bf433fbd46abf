// The client's reporting window (architecture section 9): the hooks record only timestamps and
// instruction names here (no driver call on the training thread); when the window closes, the
// energy sampler's counter series is turned into energy per instruction occurrence and per
// iteration (perseus/measure/attribution.hpp). The previous window's timeline is kept, so counter
// intervals that straddle the window start can be fitted too.
#pragma once

#include <cstddef>
#include <deque>
#include <map>
#include <string>
#include <vector>

#include "perseus/client/energy_sampler.hpp"
#include "perseus/measure/attribution.hpp"
#include "perseus/measure/attribution_trace.hpp"
#include "perseus/util/clock_observation.hpp"

namespace perseus::client {

// The SM clock an instruction ran at in a window: the sampler's clock samples inside its spans.
struct ClockSummary : ClockObservation {
  int locked_mhz = 0;  // the clock asked for (0: the default; -1: several)

  // The GPU did not reach the one clock locked for the instruction (ClockObservation::below).
  bool locked_clock_not_reached() const { return below(locked_mhz); }
};

struct WindowMeasurements {
  std::vector<double> iter_time, iter_energy;  // one per iteration
  // breakdown[instruction][iteration][occurrence]
  std::map<std::string, std::vector<std::vector<double>>> time_breakdown, energy_breakdown;
  // Per instruction: standard error (J) of the mean energy of one occurrence; absent when
  // unknown.
  std::map<std::string, double> energy_stderr_j;
  // Per instruction: how far (J) the mean energy of one occurrence may be from its own where
  // busy-overlap pooled its power with other instructions' (KeyEstimate::pooling_stderr_w; 0 for
  // an instruction with a power of its own). Kept apart from energy_stderr_j: more windows do not
  // shrink it.
  std::map<std::string, double> energy_pooling_error_j;
  measure::AttributionMethod method =
      measure::AttributionMethod::kFit;  // used (after any fallback)
  // The counter changed during the window; false: its energies are unknown (0, or extrapolated from
  // earlier windows'), and reported as unmeasured.
  bool measured = false;
  // Per instruction with clock samples in its spans (none when the backend reports no clock).
  std::map<std::string, ClockSummary> clocks;
  // What was attributed: this window's timeline after the earlier windows' that were fitted too.
  measure::AttributionTrace trace;
};

class MeasurementWindow {
 public:
  // `response`: GpuBackend::counter_response() of the sampled GPU.
  MeasurementWindow(EnergySampler& sampler, measure::AttributionMethod method,
                    measure::CounterResponse response = {}, double history_s = 120.0)
      : sampler_(sampler), method_(method), response_(response), history_s_(history_s) {}

  // Timestamps on the GPU backend's clock. `mhz` is the clock asked for (0: default).
  void step_begin(double t_s);
  void instruction_begin(double t_s, const std::string& name, int mhz);
  void instruction_end(double t_s);
  void step_end(double t_s);

  // Completed iterations in the window.
  std::size_t iterations() const { return current_.iterations.size(); }
  // Attributes the window's energy and starts the next window.
  WindowMeasurements close();

 private:
  struct Span {
    double begin_s, end_s;
    std::size_t name;  // index into names_
    int mhz;
    std::size_t iteration;  // index into the timeline's iterations
  };
  struct Timeline {
    std::vector<std::pair<double, double>> iterations;
    std::vector<Span> spans;
  };

  std::size_t name_index(const std::string& name);
  void start_next();
  std::map<std::string, ClockSummary> clock_summaries() const;
  WindowMeasurements measurements(const measure::Attribution& a, std::size_t first_span,
                                  std::size_t first_iteration,
                                  const std::vector<std::size_t>& span_keys,
                                  const std::vector<std::pair<std::size_t, int>>& keys) const;

  EnergySampler& sampler_;
  measure::AttributionMethod method_;
  measure::CounterResponse response_;
  double history_s_;
  std::vector<std::string> names_;
  std::deque<Timeline> history_;  // earlier windows, oldest first
  Timeline current_;
  bool in_step_ = false, in_instruction_ = false;
  double step_begin_s_ = 0.0;
  Span open_{};
};

}  // namespace perseus::client
