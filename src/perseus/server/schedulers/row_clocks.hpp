// The SM clocks the instruction profiler's rows really ran at, as the clients' samplers read them
// (a simulated GPU reads none): keyed by profile row (stage, instruction, clock), written beside
// the rows as the profile CSV's `measured_clock_mhz` and `clock_held_down` columns, and listed in
// the profiler's summary where the GPU did not reach the row's clock (ClockObservation::below).
#pragma once

#include <cstddef>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <tuple>
#include <vector>

#include "perseus/profile/csv.hpp"
#include "perseus/util/clock_observation.hpp"

namespace perseus::server::schedulers {

// A profile row: (stage, instruction, clock in MHz).
using RowKey = std::tuple<int, std::string, int>;

// A rank's instruction label at a clock as a profile row: a GPU running several stages labels
// its instructions with their stage; otherwise the rank is the stage.
RowKey row_key(std::size_t rank, const std::string& label, int mhz);

class RowClocks {
 public:
  void note(const RowKey& row, const ClockObservation& clock) { rows_[row] = clock; }
  // True when the row's GPU did not reach its clock.
  bool below(const RowKey& row) const;

  // measured_clock_mhz and clock_held_down, each empty where no client read the row's clock; no
  // columns when none did.
  std::vector<profile::ExtraColumn> columns() const;
  // [{"stage", "instruction", "mhz", "measured_mhz", "held_down_share"}] of the rows below their
  // clock.
  nlohmann::json not_reached() const;

 private:
  std::map<RowKey, ClockObservation> rows_;
};

}  // namespace perseus::server::schedulers
