#include "perseus/plan/frontier_query.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <numeric>

#include "perseus/util/error.hpp"

namespace perseus::plan {

FrontierQuery::FrontierQuery(const std::vector<FrontierRow>& rows, TimeEnergy all_max)
    : rows_(rows), all_max_(all_max), on_front_(rows.size(), false) {
  if (rows_.empty()) throw Error("the frontier has no plans");
  std::vector<std::size_t> order(rows_.size());
  std::iota(order.begin(), order.end(), std::size_t{0});
  std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    const auto &ra = rows_[a], &rb = rows_[b];
    if (ra.evaluated_time_s != rb.evaluated_time_s) {
      return ra.evaluated_time_s < rb.evaluated_time_s;
    }
    if (ra.evaluated_energy_j != rb.evaluated_energy_j) {
      return ra.evaluated_energy_j < rb.evaluated_energy_j;
    }
    return a < b;
  });
  // Fastest first: a row is on the front when it is cheaper than every faster-or-equal row.
  for (std::size_t i : order) {
    if (pareto_.empty() || rows_[i].evaluated_energy_j < rows_[pareto_.back()].evaluated_energy_j) {
      pareto_.push_back(i);
      on_front_[i] = true;
    }
  }
}

std::optional<std::size_t> FrontierQuery::within(double deadline_s) const {
  // Pareto rows are sorted by time with energy falling: the last one in time is the cheapest.
  double limit = deadline_s * (1.0 + kTimeTolerance);
  auto it = std::upper_bound(pareto_.begin(), pareto_.end(), limit, [&](double t, std::size_t i) {
    return t < rows_[i].evaluated_time_s;
  });
  if (it == pareto_.begin()) return std::nullopt;
  return *std::prev(it);
}

std::size_t FrontierQuery::within_time(double deadline_s) const {
  auto found = within(deadline_s);
  if (!found) {
    throw Error("no plan finishes within " + number(deadline_s) + " s (the fastest takes " +
                number(rows_[fastest()].evaluated_time_s) + " s)");
  }
  return *found;
}

std::size_t FrontierQuery::within_slowdown(double fraction) const {
  auto found = within(all_max_.time_s * (1.0 + fraction));
  if (!found) {
    char text[160];
    std::snprintf(text, sizeof text,
                  "no plan is within +%.4g %% of all-max's %.6f s (the fastest plan is %+.4g %%)",
                  100.0 * fraction, all_max_.time_s, 100.0 * slowdown(fastest()));
    throw Error(text);
  }
  return *found;
}

std::vector<std::size_t> FrontierQuery::every(double step_s) const {
  if (!(step_s > 0.0) || !std::isfinite(step_s)) throw Error("sampling interval must be positive");
  std::vector<std::size_t> out;
  double fastest_s = rows_[fastest()].evaluated_time_s;
  for (double t = rows_[min_energy()].evaluated_time_s; t >= fastest_s * (1.0 - kTimeTolerance);
       t -= step_s) {
    std::size_t i = *within(t);
    if (out.empty() || out.back() != i) out.push_back(i);
  }
  return out;
}

double FrontierQuery::slowdown(std::size_t i) const {
  const double slowdown = rows_.at(i).evaluated_time_s / all_max_.time_s - 1.0;
  // A plan as fast as all-max (the no-slowdown point, equal up to rounding) is 0, not -0.00 %.
  return std::abs(slowdown) <= kTimeTolerance ? 0.0 : slowdown;
}

double FrontierQuery::saving(std::size_t i) const {
  return 1.0 - rows_.at(i).evaluated_energy_j / all_max_.energy_j;
}

std::string FrontierQuery::describe(std::size_t i) const {
  char text[200];
  std::snprintf(text, sizeof text,
                "plan %zu: %.6f s, %.2f J; %+.2f %% time, %+.2f %% energy vs all-max", i,
                rows_.at(i).evaluated_time_s, rows_.at(i).evaluated_energy_j, 100.0 * slowdown(i),
                -100.0 * saving(i));
  return text;
}

double parse_slowdown(const std::string& text) {
  std::string number = text;
  if (!number.empty() && number.back() == '%') number.pop_back();
  char* end = nullptr;
  double percent = std::strtod(number.c_str(), &end);
  if (number.empty() || end != number.c_str() + number.size() || !std::isfinite(percent) ||
      percent < 0.0) {
    throw Error("slowdown '" + text + "' is not a percentage >= 0 (e.g. 5%)");
  }
  if (number == text && percent > 0.0 && percent < 1.0) {
    throw Error("slowdown '" + text + "' is a percentage, so it would be " + text +
                " %; if you mean a fraction, write " + perseus::number(percent * 100.0) +
                "%, else " + text + "%");
  }
  return percent / 100.0;
}

}  // namespace perseus::plan
