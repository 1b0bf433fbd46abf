// A reporting window's measurements as data (docs/measuring-energy.md): its iterations, its
// instruction spans, the energy counter's observed changes and the instruction keys, so a window
// can be attributed again offline with any method (`perseus.attribute` in Python) and windows
// measured on real GPUs can be kept as test fixtures. JSON layout in docs/formats.md.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "perseus/measure/attribution.hpp"

namespace perseus::measure {

struct TraceKey {
  std::string name;
  int mhz = 0;  // the clock asked for (0: the default)
};

struct AttributionTrace {
  AttributionInput input;
  std::vector<TraceKey> keys;  // one per key of input.num_keys
};

inline constexpr int kTraceVersion = 1;

// One busy-power group per distinct clock (AttributionInput::busy_group), in key order.
std::vector<std::size_t> groups_by_clock(const std::vector<TraceKey>& keys);

nlohmann::json to_json(const AttributionTrace& trace);

// Throws perseus::Error "field 'NAME': PROBLEM" naming the first malformed field: a missing or
// mistyped field, an iteration or span that ends before it begins or overlaps the one before, a
// span outside every iteration or with an unknown key, a counter going back in time or value.
AttributionTrace parse_attribution_trace(const nlohmann::json& body);

// An attribution of `trace` as JSON: method (after any fallback), measured, intervals,
// idle_power_w, keys (name, mhz, occurrences, seconds, power_w, power_stderr_w: null when
// unknown, mean_energy_j), span_energy_j, iteration_energy_j.
nlohmann::json to_json(const Attribution& attribution, const AttributionTrace& trace);

}  // namespace perseus::measure
