#include "perseus/measure/attribution_trace.hpp"

#include <algorithm>
#include <cmath>

#include "perseus/util/json_fields.hpp"

namespace perseus::measure {

using nlohmann::json;

namespace {

const JsonFields fields("attribution trace");

// body[field] as a list of rows of `width` numbers >= 0 (or `width` + 1 where the last is
// optional).
std::vector<std::vector<double>> rows(const json& body, const std::string& field, std::size_t width,
                                      bool optional_last = false) {
  const json& list = fields.list(fields.member(body, field), field);
  std::vector<std::vector<double>> out;
  out.reserve(list.size());
  for (std::size_t i = 0; i < list.size(); ++i) {
    out.push_back(fields.numbers(list[i], JsonFields::element(field, i)));
    const std::size_t n = out.back().size();
    if (n != width && !(optional_last && n == width + 1)) {
      fields.fail(JsonFields::element(field, i),
                  "must hold " + std::to_string(width) +
                      (optional_last ? " or " + std::to_string(width + 1) : std::string()) +
                      " numbers");
    }
  }
  return out;
}

std::vector<TraceKey> parse_keys(const json& body) {
  const json& list = fields.list(fields.member(body, "keys"), "keys");
  std::vector<TraceKey> keys;
  for (std::size_t i = 0; i < list.size(); ++i) {
    const std::string where = JsonFields::element("keys", i);
    keys.push_back(
        {fields.text_at(list[i], where, "name", true), fields.int_at(list[i], where, "mhz", 0)});
  }
  return keys;
}

void parse_iterations(const json& body, AttributionInput& in) {
  double last_end = 0.0;
  for (const auto& row : rows(body, "iterations", 2)) {
    const std::string where = JsonFields::element("iterations", in.iterations.size());
    if (row[1] < row[0]) fields.fail(where, "ends before it begins");
    if (row[0] < last_end) fields.fail(where, "begins before the previous iteration ends");
    last_end = row[1];
    in.iterations.emplace_back(row[0], row[1]);
  }
}

void parse_spans(const json& body, AttributionInput& in) {
  double last_end = 0.0;
  std::size_t iteration = 0;
  for (const auto& row : rows(body, "spans", 3)) {
    const std::string where = JsonFields::element("spans", in.spans.size());
    if (row[1] < row[0]) fields.fail(where, "ends before it begins");
    if (row[0] < last_end) fields.fail(where, "begins before the previous span ends");
    if (row[2] != std::floor(row[2]) || row[2] >= static_cast<double>(in.num_keys)) {
      fields.fail(where,
                  "key must be the index of one of the " + std::to_string(in.num_keys) + " keys");
    }
    while (iteration < in.iterations.size() && in.iterations[iteration].second < row[1]) {
      ++iteration;
    }
    if (iteration == in.iterations.size() || row[0] < in.iterations[iteration].first) {
      fields.fail(where, "lies outside every iteration");
    }
    last_end = row[1];
    in.spans.push_back({row[0], row[1], static_cast<std::size_t>(row[2])});
  }
}

void parse_counter(const json& body, AttributionInput& in) {
  for (const auto& row : rows(body, "counter", 2, true)) {
    if (!in.counter.empty() &&
        (row[0] < in.counter.back().t_s || row[1] < in.counter.back().energy_j)) {
      fields.fail(JsonFields::element("counter", in.counter.size()),
                  "goes back in time or in energy");
    }
    in.counter.push_back({row[0], row[1], row.size() > 2 ? row[2] : 0.0});
  }
}

}  // namespace

std::vector<std::size_t> groups_by_clock(const std::vector<TraceKey>& keys) {
  std::vector<int> seen;
  std::vector<std::size_t> group;
  for (const TraceKey& key : keys) {
    auto it = std::find(seen.begin(), seen.end(), key.mhz);
    if (it == seen.end()) it = seen.insert(seen.end(), key.mhz);
    group.push_back(static_cast<std::size_t>(it - seen.begin()));
  }
  return group;
}

json to_json(const AttributionTrace& trace) {
  const AttributionInput& in = trace.input;
  json keys = json::array(), iterations = json::array(), spans = json::array(),
       counter = json::array();
  for (const TraceKey& k : trace.keys) keys.push_back({{"name", k.name}, {"mhz", k.mhz}});
  for (const auto& [begin, end] : in.iterations) iterations.push_back({begin, end});
  for (const TimedSpan& s : in.spans) spans.push_back({s.begin_s, s.end_s, s.key});
  for (const CounterSample& c : in.counter) {
    counter.push_back(c.t_spread_s > 0.0 ? json{c.t_s, c.energy_j, c.t_spread_s}
                                         : json{c.t_s, c.energy_j});
  }
  return {{"version", kTraceVersion},
          {"keys", keys},
          {"known_from_s", in.known_from_s},
          {"iterations", iterations},
          {"spans", spans},
          {"counter", counter},
          {"counter_lag_s", in.counter_response.lag_s},
          {"counter_window_s", in.counter_response.window_s},
          {"counter_time_constant_s", in.counter_response.time_constant_s}};
}

AttributionTrace parse_attribution_trace(const json& body) {
  if (fields.int_field(body, "version", 1) != kTraceVersion) {
    fields.fail("version", "must be " + std::to_string(kTraceVersion));
  }
  AttributionTrace trace;
  trace.keys = parse_keys(body);
  AttributionInput& in = trace.input;
  in.num_keys = trace.keys.size();
  in.busy_group = groups_by_clock(trace.keys);
  in.known_from_s = fields.number_field(body, "known_from_s");
  parse_iterations(body, in);
  parse_spans(body, in);
  parse_counter(body, in);
  // Optional: traces recorded before the lag (or the window) was known say nothing (0).
  for (auto [name, value] :
       {std::pair{"counter_lag_s", &in.counter_response.lag_s},
        std::pair{"counter_window_s", &in.counter_response.window_s},
        std::pair{"counter_time_constant_s", &in.counter_response.time_constant_s}}) {
    if (body.contains(name)) *value = fields.number_field(body, name);
  }
  return trace;
}

json to_json(const Attribution& a, const AttributionTrace& trace) {
  json keys = json::array();
  for (std::size_t k = 0; k < a.keys.size(); ++k) {
    const KeyEstimate& e = a.keys[k];
    const double mean =
        e.occurrences > 0 ? std::max(0.0, e.power_w) * e.seconds / e.occurrences : 0.0;
    keys.push_back({{"name", trace.keys[k].name},
                    {"mhz", trace.keys[k].mhz},
                    {"occurrences", e.occurrences},
                    {"seconds", e.seconds},
                    {"power_w", e.power_w},
                    {"power_stderr_w",
                     std::isfinite(e.power_stderr_w) ? json(e.power_stderr_w) : json(nullptr)},
                    {"pooling_stderr_w", e.pooling_stderr_w},
                    {"mean_energy_j", mean}});
  }
  return {{"method", to_string(a.method)},
          {"measured", a.measured},
          {"per_key_powers", a.per_key_powers},
          {"intervals", a.intervals},
          {"residual_rms_j", a.residual_rms_j},
          {"refresh_period_s", a.refresh_period_s},
          {"changes_on_clock", a.changes_on_clock},
          {"idle_power_w", a.idle_power_w},
          {"keys", keys},
          {"span_energy_j", a.span_energy_j},
          {"iteration_energy_j", a.iteration_energy_j}};
}

}  // namespace perseus::measure
