// What the client says about its reporting windows as they close, each at most once: a window in
// which the energy counter did not change, an average power no GPU draws (a GPU backend's unit
// mistake, after the first kPowerCheckS measured seconds; strict mode raises), and an instruction
// the GPU ran below its locked clock (once per instruction and clock).
#pragma once

#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>

#include "perseus/client/energy_sampler.hpp"
#include "perseus/client/measurement_window.hpp"
#include "perseus/client/problem_log.hpp"

namespace perseus::client {

class WindowChecks {
 public:
  // Measured seconds the power check waits for: 20 refreshes of a real GPU's counter, so that its
  // resolution moves the average power by a few percent at most, far from a unit mistake's 1000x.
  static constexpr double kPowerCheckS = 2.0;

  // `locks_clocks`: the client locks clocks (not observe-only), so a clock not reached is said.
  WindowChecks(ProblemLog& problems, bool locks_clocks)
      : problems_(problems), locks_clocks_(locks_clocks) {}
  // `sampler`: the window's energy sampler. A window without a counter change while it is blocked
  // in a read says so, not that the window was too short; with a GPU that has no counter, the
  // sampler has said why already.
  void check(const WindowMeasurements& m, const EnergySampler& sampler);

 private:
  void check_changed(const WindowMeasurements& m, const EnergySampler& sampler);
  void check_power(const WindowMeasurements& m);
  void check_clocks(const std::map<std::string, ClockSummary>& clocks);

  ProblemLog& problems_;
  bool locks_clocks_;
  bool unmeasured_said_ = false;
  bool power_checked_ = false;
  double power_check_s_ = 0.0, power_check_j_ = 0.0;          // the measured iterations so far
  std::set<std::pair<std::string, int>> clocks_not_reached_;  // (instruction, MHz) said so
};

}  // namespace perseus::client
