#include "perseus/baselines/zeus.hpp"

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <string>

#include "perseus/baselines/common.hpp"
#include "perseus/util/error.hpp"

namespace perseus::baselines {

namespace {

using profile::Measurement;
using schedule::InstructionType;

constexpr std::size_t kMaxLimits = 100000;

double average_power(const Measurement& m) {
  return m.energy_j / m.time_s;
}

// Highest limit first, in steps of step_w, ending exactly at min_w.
std::vector<double> limit_grid(double max_w, double min_w, double step_w) {
  if (!(step_w > 0.0) || !std::isfinite(step_w)) {
    throw Error("power limit step must be a positive number of watts, got " +
                std::to_string(step_w));
  }
  if ((max_w - min_w) / step_w >= static_cast<double>(kMaxLimits)) {
    throw Error("power limit step " + std::to_string(step_w) + " W is too small: more than " +
                std::to_string(kMaxLimits) + " limits between " + std::to_string(min_w) + " and " +
                std::to_string(max_w) + " W");
  }
  std::vector<double> grid;
  for (std::size_t k = 0;; ++k) {
    double limit = max_w - static_cast<double>(k) * step_w;
    if (limit <= min_w + 1e-9 * step_w) break;
    grid.push_back(limit);
  }
  grid.push_back(min_w);
  return grid;
}

// Per-GPU (rank) limits of the k-th point of the grid.
using LimitsAt = std::function<std::vector<double>(std::size_t k)>;

// Evaluates every grid point's limits, drops repeated plans, prices and picks the cheapest.
ZeusSweep sweep(const profile::Profile& profile, const schedule::Schedule& schedule,
                double blocking_power_w, double eta, double max_power_w, std::size_t num_points,
                const LimitsAt& limits_at) {
  ZeusSweep result;
  result.max_power_w = max_power_w;
  result.eta = eta;
  for (std::size_t k = 0; k < num_points; ++k) {
    PowerLimitPoint point;
    point.limits_w = limits_at(k);
    point.plan =
        plan::plan_per_instruction(schedule, [&](int rank, const schedule::Instruction& inst) {
          return clock_under_limit(plan::instruction_rows(profile, inst), point.limits_w[rank]);
        });
    if (!result.points.empty() && result.points.back().plan == point.plan) continue;
    point.evaluation = plan::evaluate(profile, schedule, point.plan, blocking_power_w);
    point.cost =
        eta * point.evaluation.energy_j + (1.0 - eta) * max_power_w * point.evaluation.time_s;
    if (result.points.empty() || point.cost < result.points[result.chosen].cost) {
      result.chosen = result.points.size();
    }
    result.points.push_back(std::move(point));
  }
  return result;
}

// Checks the inputs common to both sweeps; returns the profile's lowest and highest power.
std::pair<double, double> check_and_power_range(const profile::Profile& profile,
                                                const schedule::Schedule& schedule, double eta) {
  if (!(eta >= 0.0 && eta <= 1.0)) {
    throw Error("eta must be in [0, 1], got " + std::to_string(eta));
  }
  check_stages(profile, schedule.num_stages);
  double lo = std::numeric_limits<double>::infinity(), hi = 0.0;
  for (const auto& [key, rows] : profile.all()) {
    for (const auto& row : rows) {
      lo = std::min(lo, average_power(row));
      hi = std::max(hi, average_power(row));
    }
  }
  return {lo, hi};
}

// The row an instruction runs at under `limit_w`: the fastest clock whose average power fits,
// else the lowest-power clock.
const Measurement& row_under_limit(const std::vector<Measurement>& rows, double limit_w) {
  if (rows.empty()) throw Error("no profiled clocks to choose from");
  const Measurement* fastest = nullptr;
  const Measurement* lowest_power = &rows.front();
  for (const auto& row : rows) {
    if (average_power(row) <= limit_w &&
        (fastest == nullptr || row.frequency_mhz > fastest->frequency_mhz)) {
      fastest = &row;
    }
    if (average_power(row) < average_power(*lowest_power)) lowest_power = &row;
  }
  return fastest != nullptr ? *fastest : *lowest_power;
}

// Forward + backward time of one microbatch through every stage of `rank` under `limit_w`.
double compute_time(const profile::Profile& profile, const schedule::Schedule& schedule, int rank,
                    double limit_w) {
  double t = 0.0;
  for (int stage = 0; stage < schedule.num_stages; ++stage) {
    if (schedule.stage_rank[static_cast<std::size_t>(stage)] != rank) continue;
    for (InstructionType type : {InstructionType::kForward, InstructionType::kBackward}) {
      t += row_under_limit(rows_of(profile, stage, type), limit_w).time_s;
    }
  }
  return t;
}

}  // namespace

int clock_under_limit(const std::vector<Measurement>& rows, double limit_w) {
  return row_under_limit(rows, limit_w).frequency_mhz;
}

ZeusSweep zeus_global(const profile::Profile& profile, const schedule::Schedule& schedule,
                      double blocking_power_w, double eta, double step_w) {
  auto [lo, hi] = check_and_power_range(profile, schedule, eta);
  std::vector<double> grid = limit_grid(hi, lo, step_w);
  const auto ranks = static_cast<std::size_t>(schedule.num_ranks());
  return sweep(profile, schedule, blocking_power_w, eta, hi, grid.size(),
               [&](std::size_t k) { return std::vector<double>(ranks, grid[k]); });
}

ZeusSweep zeus_per_stage(const profile::Profile& profile, const schedule::Schedule& schedule,
                         double blocking_power_w, double eta, double step_w) {
  auto [lo, hi] = check_and_power_range(profile, schedule, eta);
  std::vector<double> grid = limit_grid(hi, lo, step_w);
  const int stages = schedule.num_ranks();  // one limit per GPU
  // time[k][s]: GPU s's forward + backward time under grid limit k.
  std::vector<std::vector<double>> time(grid.size(), std::vector<double>(stages));
  for (std::size_t k = 0; k < grid.size(); ++k) {
    for (int s = 0; s < stages; ++s) time[k][s] = compute_time(profile, schedule, s, grid[k]);
  }
  auto limits_at = [&](std::size_t k) {
    const auto& t = time[k];
    int heaviest = static_cast<int>(std::max_element(t.begin(), t.end()) - t.begin());
    std::vector<double> limits(static_cast<std::size_t>(stages), grid[k]);
    for (int s = 0; s < stages; ++s) {
      if (s == heaviest) continue;
      // Grid k itself qualifies (t[s] <= t[heaviest]); look for a lower limit that does too.
      for (std::size_t j = grid.size(); j-- > k;) {
        if (time[j][s] <= t[heaviest]) {
          limits[s] = grid[j];
          break;
        }
      }
    }
    return limits;
  };
  return sweep(profile, schedule, blocking_power_w, eta, hi, grid.size(), limits_at);
}

}  // namespace perseus::baselines
