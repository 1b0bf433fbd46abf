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

// Standard errors of summed energies: the root of the summed squares, for the instructions every
// rank reported one for.
std::map<std::string, double> combine_stderr(
    const std::vector<const std::map<std::string, double>*>& parts) {
  std::map<std::string, double> out;
  for (const auto& [name, first] : *parts.front()) {
    double variance = 0.0;
    bool everywhere = true;
    for (const auto* part : parts) {
      auto it = part->find(name);
      everywhere = everywhere && it != part->end();
      if (it != part->end()) variance += it->second * it->second;
    }
    if (everywhere) out[name] = std::sqrt(variance);
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
  std::vector<const std::map<std::string, double>*> stderr_parts;
  for (const auto* result : ranks) {
    times.push_back(&result->iter_time);
    energies.push_back(&result->iter_energy);
    time_parts.push_back(&result->time_breakdown);
    energy_parts.push_back(&result->energy_breakdown);
    stderr_parts.push_back(&result->energy_stderr);
  }
  StageResult out;
  out.iter_time = combine(times, max_of);
  out.iter_energy = combine(energies, sum_of);
  out.time_breakdown = combine_breakdowns(time_parts, max_of);
  out.energy_breakdown = combine_breakdowns(energy_parts, sum_of);
  out.energy_stderr = combine_stderr(stderr_parts);
  return out;
}

}  // namespace perseus::server
