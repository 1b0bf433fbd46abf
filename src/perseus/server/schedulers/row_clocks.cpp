#include "perseus/server/schedulers/row_clocks.hpp"

#include <optional>

#include "perseus/wire/protocol.hpp"

namespace perseus::server::schedulers {

RowKey row_key(std::size_t rank, const std::string& label, int mhz) {
  auto [kind, stage] = wire::parse_instruction_label(label);
  return {stage < 0 ? static_cast<int>(rank) : stage, kind, mhz};
}

bool RowClocks::below(const RowKey& row) const {
  auto it = rows_.find(row);
  return it != rows_.end() && it->second.below(std::get<2>(row));
}

std::vector<profile::ExtraColumn> RowClocks::columns() const {
  // The column of value(observation), empty where the row has none.
  auto column = [this](const char* name, auto value) {
    return profile::ExtraColumn{name, [this, value](int s, const std::string& i, int mhz) {
                                  auto it = rows_.find(RowKey{s, i, mhz});
                                  return it == rows_.end() ? std::optional<double>()
                                                           : std::optional(value(it->second));
                                }};
  };
  if (rows_.empty()) return {};
  return {column("measured_clock_mhz", [](const ClockObservation& c) { return c.mean_mhz; }),
          column("clock_held_down", [](const ClockObservation& c) { return c.held_down_share; })};
}

nlohmann::json RowClocks::not_reached() const {
  nlohmann::json rows = nlohmann::json::array();
  for (const auto& [key, c] : rows_) {
    const auto& [stage, instruction, mhz] = key;
    if (!c.below(mhz)) continue;
    rows.push_back({{"stage", stage},
                    {"instruction", instruction},
                    {"mhz", mhz},
                    {"measured_mhz", c.mean_mhz},
                    {"held_down_share", c.held_down_share}});
  }
  return rows;
}

}  // namespace perseus::server::schedulers
