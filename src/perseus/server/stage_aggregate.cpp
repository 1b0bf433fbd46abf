#include "perseus/server/stage_aggregate.hpp"

#include <algorithm>
#include <cmath>
#include <functional>

namespace perseus::server {

namespace {

// Element-wise combination of equally indexed values of several ranks (shortest length wins).
std::vector<double> combine(const std::vector<const std::vector<double>*>& lists,
                            const std::function<double(double, double)>& op) {
  std::size_t n = lists.front()->size();
  for (const auto* list : lists) n = std::min(n, list->size());
  std::vector<double> out(lists.front()->begin(), lists.front()->begin() + static_cast<long>(n));
  for (std::size_t r = 1; r < lists.size(); ++r) {
    for (std::size_t i = 0; i < n; ++i) out[i] = op(out[i], (*lists[r])[i]);
  }
  return out;
}

using Breakdown = std::map<std::string, std::vector<std::vector<double>>>;

Breakdown combine_breakdowns(const std::vector<const Breakdown*>& parts,
                             const std::function<double(double, double)>& op) {
  Breakdown out;
  for (const auto& [name, first] : *parts.front()) {
    std::size_t iterations = first.size();
    for (const auto* part : parts) {
      auto it = part->find(name);
      iterations = it == part->end() ? 0 : std::min(iterations, it->second.size());
    }
    auto& rows = out[name];
    for (std::size_t i = 0; i < iterations; ++i) {
      std::vector<const std::vector<double>*> lists;
      for (const auto* part : parts) lists.push_back(&part->at(name)[i]);
      rows.push_back(combine(lists, op));
    }
  }
  return out;
}

// For each instruction every rank reported a value for: fold(the ranks' values).
template <typename T, typename Fold>
std::map<std::string, T> combine_reported(const std::vector<const std::map<std::string, T>*>& parts,
                                          Fold fold) {
  std::map<std::string, T> out;
  for (const auto& entry : *parts.front()) {
    std::vector<const T*> values;
    for (const auto* part : parts) {
      auto it = part->find(entry.first);
      if (it == part->end()) break;
      values.push_back(&it->second);
    }
    if (values.size() == parts.size()) out[entry.first] = fold(values);
  }
  return out;
}

// The standard error of a sum of independent estimates: the root of the summed squares.
double stderr_of_sum(const std::vector<const double*>& errors) {
  double variance = 0.0;
  for (const double* e : errors) variance += *e * *e;
  return std::sqrt(variance);
}

// A sum of errors that err alike (one pooling on every rank): their sum.
double error_of_sum(const std::vector<const double*>& errors) {
  double total = 0.0;
  for (const double* e : errors) total += *e;
  return total;
}

// The ranks' clock readings taken together.
ClockObservation pooled(const std::vector<const ClockObservation*>& ranks) {
  ClockObservation out;
  double mhz = 0.0, held = 0.0;
  for (const ClockObservation* c : ranks) {
    out.samples += c->samples;
    mhz += c->mean_mhz * c->samples;
    held += c->held_down_share * c->samples;
  }
  if (out.samples > 0) {
    out.mean_mhz = mhz / out.samples;
    out.held_down_share = held / out.samples;
  }
  return out;
}

double max_of(double a, double b) {
  return std::max(a, b);
}
double sum_of(double a, double b) {
  return a + b;
}

}  // namespace

StageResult aggregate_stage(const std::vector<const wire::ProfilingResult*>& ranks) {
  std::vector<const std::vector<double>*> times, energies;
  std::vector<const Breakdown*> time_parts, energy_parts;
  std::vector<const std::map<std::string, double>*> stderr_parts, pooling_parts;
  std::vector<const std::map<std::string, ClockObservation>*> clock_parts;
  StageResult out;
  for (const auto* result : ranks) {
    if (!result->energy_measured) out.unmeasured_ranks.push_back(result->rank);
    times.push_back(&result->iter_time);
    energies.push_back(&result->iter_energy);
    time_parts.push_back(&result->time_breakdown);
    energy_parts.push_back(&result->energy_breakdown);
    stderr_parts.push_back(&result->energy_stderr);
    pooling_parts.push_back(&result->energy_pooling_error);
    clock_parts.push_back(&result->clocks);
  }
  out.iter_time = combine(times, max_of);
  out.iter_energy = combine(energies, sum_of);
  out.time_breakdown = combine_breakdowns(time_parts, max_of);
  out.energy_breakdown = combine_breakdowns(energy_parts, sum_of);
  out.energy_stderr = combine_reported(stderr_parts, stderr_of_sum);
  out.energy_pooling_error = combine_reported(pooling_parts, error_of_sum);
  out.clocks = combine_reported(clock_parts, pooled);
  return out;
}

}  // namespace perseus::server
