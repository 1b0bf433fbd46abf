// A reporting window's trace as JSON (perseus/measure/attribution_trace.hpp): written and read back
// bit for bit, attributed again to the same energies, and refused with the field named when
// malformed (more classes of bad input: python/tests/test_attribution_trace.py).
#include "perseus/measure/attribution_trace.hpp"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "attribution_workload.hpp"
#include "perseus/wire/protocol.hpp"
#include "test_support.hpp"

namespace {

using nlohmann::json;
using perseus::measure::attribute;
using perseus::measure::AttributionMethod;
using perseus::measure::AttributionTrace;
using perseus::measure::parse_attribution_trace;
using perseus::measure::to_json;
using perseus::test::error_of;

perseus::measure::AttributionTrace recorded() {
  AttributionTrace trace;
  trace.input = perseus::test::sampled_workload(5.0, 7).input;
  trace.input.known_from_s = trace.input.iterations.front().first;
  trace.keys = {{"forward", 0}, {"backward", 1410}};
  trace.input.busy_group = perseus::measure::groups_by_clock(trace.keys);
  trace.input.counter_response = {0.010, 0.020};
  for (std::size_t i = 0; i < trace.input.counter.size(); i += 2) {
    trace.input.counter[i].t_spread_s = 0.002;  // a sampler's changes; exact ones have none
  }
  return trace;
}

TEST(AttributionTrace, ReadsBackWhatItWroteBitForBit) {
  const perseus::measure::AttributionTrace trace = recorded();
  const std::string text = to_json(trace).dump();
  const perseus::measure::AttributionTrace back =
      parse_attribution_trace(perseus::wire::parse_json(text));
  ASSERT_EQ(back.keys.size(), 2u);
  EXPECT_EQ(back.keys[1].name, "backward");
  EXPECT_EQ(back.keys[1].mhz, 1410);
  EXPECT_EQ(back.input.num_keys, 2u);
  EXPECT_EQ(back.input.known_from_s, trace.input.known_from_s);
  EXPECT_EQ(back.input.counter_response.lag_s, 0.010);
  EXPECT_EQ(back.input.counter_response.window_s, 0.020);
  EXPECT_EQ(back.input.busy_group, (std::vector<std::size_t>{0, 1}));
  EXPECT_EQ(back.input.iterations, trace.input.iterations);
  ASSERT_EQ(back.input.spans.size(), trace.input.spans.size());
  for (std::size_t i = 0; i < back.input.spans.size(); ++i) {
    EXPECT_EQ(back.input.spans[i].begin_s, trace.input.spans[i].begin_s);
    EXPECT_EQ(back.input.spans[i].end_s, trace.input.spans[i].end_s);
    EXPECT_EQ(back.input.spans[i].key, trace.input.spans[i].key);
  }
  ASSERT_EQ(back.input.counter.size(), trace.input.counter.size());
  for (std::size_t i = 0; i < back.input.counter.size(); ++i) {
    EXPECT_EQ(back.input.counter[i].t_s, trace.input.counter[i].t_s);
    EXPECT_EQ(back.input.counter[i].energy_j, trace.input.counter[i].energy_j);
    EXPECT_EQ(back.input.counter[i].t_spread_s, trace.input.counter[i].t_spread_s);
  }
  // A change without a spread is written as [t_s, joules], as before there were spreads.
  EXPECT_EQ(to_json(trace)["counter"][0].size(), 3u);
  EXPECT_EQ(to_json(trace)["counter"][1].size(), 2u);
  for (auto method : {perseus::measure::AttributionMethod::kBusyOverlap,
                      perseus::measure::AttributionMethod::kFit}) {
    EXPECT_EQ(perseus::measure::attribute(back.input, method).span_energy_j,
              perseus::measure::attribute(trace.input, method).span_energy_j);
  }
}

TEST(AttributionTrace, TheAttributionNamesEachKeyWithItsMeanEnergy) {
  const perseus::measure::AttributionTrace trace = recorded();
  const auto a =
      perseus::measure::attribute(trace.input, perseus::measure::AttributionMethod::kBusyOverlap);
  const json j = to_json(a, trace);
  EXPECT_EQ(j["method"], "busy-overlap");
  ASSERT_EQ(j["keys"].size(), 2u);
  EXPECT_EQ(j["keys"][1]["name"], "backward");
  EXPECT_EQ(j["keys"][1]["mhz"], 1410);
  double forward_j = 0.0;
  std::size_t forwards = 0;
  for (std::size_t i = 0; i < trace.input.spans.size(); ++i) {
    if (trace.input.spans[i].key != 0) continue;
    forward_j += a.span_energy_j[i];
    ++forwards;
  }
  EXPECT_NEAR(j["keys"][0]["mean_energy_j"].get<double>(), forward_j / forwards, 1e-9 * forward_j);
  EXPECT_EQ(j["span_energy_j"].size(), trace.input.spans.size());
}

TEST(AttributionTrace, RefusesAMalformedTraceNamingTheField) {
  json j = to_json(recorded());
  j["spans"][2][1] = -1.0;
  EXPECT_CONTAINS(error_of([&] { perseus::measure::parse_attribution_trace(j); }),
                  "field 'spans[2][1]': must be a finite number >= 0");
  j = to_json(recorded());
  j["iterations"][1][0] = j["iterations"][0][0];
  EXPECT_CONTAINS(error_of([&] { perseus::measure::parse_attribution_trace(j); }),
                  "field 'iterations[1]': begins before the previous iteration ends");
  j = to_json(recorded());
  j["spans"][0][2] = 0.5;
  EXPECT_CONTAINS(error_of([&] { perseus::measure::parse_attribution_trace(j); }),
                  "field 'spans[0]': key must be the index of one of the 2 keys");
  j = to_json(recorded());
  j["keys"][0].erase("mhz");
  EXPECT_CONTAINS(error_of([&] { perseus::measure::parse_attribution_trace(j); }),
                  "field 'keys[0].mhz': missing");
  j = to_json(recorded());
  j["counter_lag_s"] = -0.008;
  EXPECT_CONTAINS(error_of([&] { perseus::measure::parse_attribution_trace(j); }),
                  "field 'counter_lag_s': must be a finite number >= 0");
  j = to_json(recorded());
  j["counter_window_s"] = "20 ms";
  EXPECT_CONTAINS(error_of([&] { perseus::measure::parse_attribution_trace(j); }),
                  "field 'counter_window_s': must be a number");
  j = to_json(recorded());
  j["counter"][1].push_back(0.002);
  j["counter"][1].push_back(0.0);
  EXPECT_CONTAINS(error_of([&] { perseus::measure::parse_attribution_trace(j); }),
                  "field 'counter[1]': must hold 2 or 3 numbers");
  j = to_json(recorded());
  j.erase("counter_lag_s");  // traces recorded before the lag (or the window) was known
  j.erase("counter_window_s");
  EXPECT_EQ(perseus::measure::parse_attribution_trace(j).input.counter_response.lag_s, 0.0);
  EXPECT_EQ(perseus::measure::parse_attribution_trace(j).input.counter_response.window_s, 0.0);
  EXPECT_CONTAINS(error_of([&] { perseus::measure::parse_attribution_trace(json::array()); }),
                  "must be a JSON object");
}

}  // namespace
