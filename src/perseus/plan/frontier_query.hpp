// Choosing a plan from a frontier: the one place that answers "which plan?" for every consumer
// (plan export, emulate, cluster emulation, the report, the frontier scheduler).
//
// The solver shortens the iteration one time unit per step, so its rows are ordered by planned
// time; once evaluated against the profile many are dominated (slower and costlier than another
// row) or duplicates. Every choice here is among the Pareto rows of evaluated (time, energy): a row
// is Pareto when no other row is at most as slow and at most as costly and better in one of the
// two; of rows with equal (time, energy) the lowest index. Times compare with a relative
// tolerance kTimeTolerance, so a target equal to a row's printed time selects it.
//
// Construction O(n log n) for n rows; each query O(log n).
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "perseus/plan/frontier_store.hpp"

namespace perseus::plan {

// frontier.csv keeps 10 significant digits (relative rounding <= 5e-10): a row read back still
// compares equal to its own time and to all-max's.
inline constexpr double kTimeTolerance = 1e-9;

class FrontierQuery {
 public:
  // `all_max` is the reference for slowdowns and savings. Throws perseus::Error when `rows` is
  // empty.
  FrontierQuery(const std::vector<FrontierRow>& rows, TimeEnergy all_max);
  explicit FrontierQuery(const StoredFrontier& f) : FrontierQuery(f.rows, f.all_max) {}

  // Row indices of the Pareto rows, fastest first (so energy strictly decreasing).
  const std::vector<std::size_t>& pareto() const { return pareto_; }
  bool is_pareto(std::size_t row) const { return on_front_.at(row); }

  std::size_t fastest() const { return pareto_.front(); }
  std::size_t min_energy() const { return pareto_.back(); }
  // The cheapest Pareto row whose evaluated time is <= deadline_s; nullopt when none is.
  std::optional<std::size_t> within(double deadline_s) const;
  // within(), else throws perseus::Error naming the deadline and the fastest time.
  std::size_t within_time(double deadline_s) const;
  // The cheapest row at most `fraction` slower than all-max (0.05: +5 %).
  std::size_t within_slowdown(double fraction) const;
  // One Pareto row per target time, from the slowest row's time down in steps of `step_s`
  // (distinct rows, slowest first).
  std::vector<std::size_t> every(double step_s) const;

  const FrontierRow& row(std::size_t i) const { return rows_.at(i); }
  const TimeEnergy& all_max() const { return all_max_; }
  // Slowdown and saving of row i against all-max, as fractions (0.05 = 5 %).
  double slowdown(std::size_t i) const;
  double saving(std::size_t i) const;
  // "plan 346: 2.836500 s, 6295.10 J; +0.24 % time, -14.20 % energy vs all-max"
  std::string describe(std::size_t i) const;

 private:
  std::vector<FrontierRow> rows_;
  TimeEnergy all_max_;
  std::vector<std::size_t> pareto_;
  std::vector<bool> on_front_;
};

// A slowdown as the user writes it: "5%", "5" (both 5 %), "0%"; returns the fraction (0.05).
// Throws perseus::Error naming the text when it is not a finite number >= 0, or is a bare number
// between 0 and 1 (a fraction? "0.02" would be 0.02 %: it must be written "0.02%" or "2%").
double parse_slowdown(const std::string& text);

}  // namespace perseus::plan
