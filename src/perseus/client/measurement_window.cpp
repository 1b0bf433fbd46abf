#include "perseus/client/measurement_window.hpp"

#include <cmath>
#include <limits>
#include <utility>

namespace perseus::client {

std::size_t MeasurementWindow::name_index(const std::string& name) {
  for (std::size_t i = 0; i < names_.size(); ++i) {
    if (names_[i] == name) return i;
  }
  names_.push_back(name);
  return names_.size() - 1;
}

void MeasurementWindow::step_begin(double t_s) {
  in_step_ = true;
  in_instruction_ = false;
  step_begin_s_ = t_s;
}

void MeasurementWindow::instruction_begin(double t_s, const std::string& name, int mhz) {
  in_instruction_ = in_step_;
  if (!in_step_) return;
  open_ = {t_s, t_s, name_index(name), mhz, current_.iterations.size()};
}

void MeasurementWindow::instruction_end(double t_s) {
  if (!in_instruction_) return;
  in_instruction_ = false;
  open_.end_s = t_s;
  current_.spans.push_back(open_);
}

void MeasurementWindow::step_end(double t_s) {
  if (!in_step_) return;
  in_step_ = false;
  current_.iterations.emplace_back(step_begin_s_, t_s);
}

void MeasurementWindow::start_next() {
  if (current_.iterations.empty()) return;
  const double end = current_.iterations.back().second;
  history_.push_back(std::move(current_));
  current_ = Timeline{};
  while (history_.size() > 1 && end - history_[1].iterations.front().first > history_s_) {
    history_.pop_front();
  }
  sampler_.forget_before(history_.front().iterations.front().first);
  // Spans of an iteration still open belong to the next window.
  in_instruction_ = false;
}

WindowMeasurements MeasurementWindow::close() {
  if (current_.iterations.empty()) return {};
  // One timeline: the earlier windows', then this one's.
  measure::AttributionInput in;
  std::vector<std::pair<std::size_t, int>> keys;  // (name, mhz) of each key
  std::vector<std::size_t> span_keys;
  auto add = [&](const Timeline& t) {
    for (const Span& s : t.spans) {
      std::pair<std::size_t, int> key{s.name, s.mhz};
      std::size_t k = 0;
      while (k < keys.size() && keys[k] != key) ++k;
      if (k == keys.size()) keys.push_back(key);
      span_keys.push_back(k);
      in.spans.push_back({s.begin_s, s.end_s, k});
    }
    in.iterations.insert(in.iterations.end(), t.iterations.begin(), t.iterations.end());
  };
  std::size_t first_span = 0;
  for (const Timeline& t : history_) {
    add(t);
    first_span += t.spans.size();
  }
  const std::size_t first_iteration = in.iterations.size();
  add(current_);
  in.num_keys = keys.size();
  std::vector<measure::TraceKey> trace_keys;
  for (const auto& [name, mhz] : keys) trace_keys.push_back({names_[name], mhz});
  in.busy_group = groups_by_clock(trace_keys);
  in.known_from_s = in.iterations.front().first;
  in.counter = sampler_.series(in.known_from_s, std::numeric_limits<double>::infinity());
  in.counter_response = response_;
  const measure::Attribution a = attribute(in, method_);
  WindowMeasurements out = measurements(a, first_span, first_iteration, span_keys, keys);
  // Changes seen only before the window (its history's) leave its energies extrapolated: unknown.
  out.measured = a.measured && in.counter.back().t_s > current_.iterations.front().first;
  out.clocks = clock_summaries();
  out.trace = {std::move(in), std::move(trace_keys)};
  start_next();
  return out;
}

std::map<std::string, ClockSummary> MeasurementWindow::clock_summaries() const {
  const std::vector<measure::ClockSample> samples =
      sampler_.clocks(current_.iterations.front().first, current_.iterations.back().second);
  std::map<std::string, ClockSummary> out;
  std::size_t next = 0;  // spans are in time order, and so are the samples
  for (const Span& s : current_.spans) {
    while (next < samples.size() && samples[next].t_s < s.begin_s) ++next;
    auto [entry, first] = out.try_emplace(names_[s.name]);
    ClockSummary& c = entry->second;
    if (first) c.locked_mhz = s.mhz;
    if (c.locked_mhz != s.mhz) c.locked_mhz = -1;
    for (std::size_t i = next; i < samples.size() && samples[i].t_s <= s.end_s; ++i) {
      ++c.samples;
      c.mean_mhz += samples[i].clock.sm_mhz;
      c.held_down_share += samples[i].clock.held_down ? 1.0 : 0.0;
    }
  }
  for (auto it = out.begin(); it != out.end();) {
    ClockSummary& c = it->second;
    if (c.samples == 0) {
      it = out.erase(it);
      continue;
    }
    c.mean_mhz /= c.samples;
    c.held_down_share /= c.samples;
    ++it;
  }
  return out;
}

WindowMeasurements MeasurementWindow::measurements(
    const measure::Attribution& a, std::size_t first_span, std::size_t first_iteration,
    const std::vector<std::size_t>& span_keys,
    const std::vector<std::pair<std::size_t, int>>& keys) const {
  WindowMeasurements out;
  out.method = a.method;
  const std::size_t n = current_.iterations.size();
  for (std::size_t i = 0; i < n; ++i) {
    const auto& [begin, end] = current_.iterations[i];
    out.iter_time.push_back(end - begin);
    out.iter_energy.push_back(a.iteration_energy_j[first_iteration + i]);
  }
  // Per key: occurrences and seconds in this window, for the per-instruction standard error.
  std::vector<double> seconds(keys.size(), 0.0);
  std::map<std::string, double> occurrences;
  for (std::size_t j = 0; j < current_.spans.size(); ++j) {
    const Span& s = current_.spans[j];
    const std::string& name = names_[s.name];
    auto& times = out.time_breakdown[name];
    auto& energies = out.energy_breakdown[name];
    times.resize(n);
    energies.resize(n);
    times[s.iteration].push_back(s.end_s - s.begin_s);
    energies[s.iteration].push_back(a.span_energy_j[first_span + j]);
    seconds[span_keys[first_span + j]] += s.end_s - s.begin_s;
    occurrences[name] += 1.0;
  }
  // Per instruction, from a per-key error of the power (W): the error of the mean energy of one
  // occurrence, its keys' errors taken as independent.
  auto per_occurrence = [&](double measure::KeyEstimate::*watts,
                            std::map<std::string, double>& errors) {
    for (const auto& [name, count] : occurrences) {
      double variance = 0.0;
      for (std::size_t k = 0; k < keys.size(); ++k) {
        if (names_[keys[k].first] != name || seconds[k] == 0.0) continue;
        const double total = a.keys[k].*watts * seconds[k];
        variance += total * total;
      }
      const double error = std::sqrt(variance) / count;
      if (std::isfinite(error)) errors[name] = error;
    }
  };
  per_occurrence(&measure::KeyEstimate::power_stderr_w, out.energy_stderr_j);
  per_occurrence(&measure::KeyEstimate::pooling_stderr_w, out.energy_pooling_error_j);
  return out;
}

}  // namespace perseus::client
