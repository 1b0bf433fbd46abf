// "zeus-global" and "zeus-per-stage": the Zeus power-limit baselines, online. One round per power
// limit from highest to lowest (every instruction at the highest clock under that limit), then
// the final round serves the limits with the lowest cost eta * E + (1 - eta) * P_max * T (a limit
// whose windows were too short for the energy counter is measured again, WindowLength):
//   global     one limit for every stage; T = slowest stage's mean iteration time, E = summed
//              mean iteration energy of the stages.
//   per-stage  the heaviest stage (largest busy time at the highest limit) gets a swept limit L,
//              every other stage the lowest swept limit under which its busy time does not exceed
//              the heaviest stage's at L; E = the stages' energies at their limits, T = the
//              heaviest stage's iteration time at L.
#include <algorithm>
#include <cmath>
#include <functional>
#include <optional>

#include "perseus/server/schedulers/schedulers.hpp"

namespace perseus::server::schedulers {

namespace {

using nlohmann::json;

bool unit_interval(double v) {
  return v >= 0.0 && v <= 1.0;
}

constexpr std::size_t kMaxLimits = 10000;

// {"max_w", "min_w", "step_w"}: max_w, max_w - step_w, ... down to min_w (always included).
std::vector<double> limit_range(const ArgReader& args) {
  ArgReader r = args.object("power_limits", {"max_w", "min_w", "step_w"});
  const std::string watts = "a number of watts > 0";
  double hi = r.number("max_w", positive, watts);
  double lo = r.number("min_w", positive, watts);
  double step = r.number("step_w", positive, watts);
  if (lo > hi) r.fail("min_w", "must be <= max_w");
  if ((hi - lo) / step >= kMaxLimits) r.fail("step_w", "is too small (too many limits)");
  std::vector<double> limits;
  for (double l = hi; l > lo + 1e-9 * hi; l = hi - step * static_cast<double>(limits.size())) {
    limits.push_back(l);
  }
  limits.push_back(lo);
  return limits;
}

// The swept limits, highest first, without duplicates.
std::vector<double> power_limits(const ArgReader& args) {
  const json& v = args.at("power_limits");
  if (v.is_object()) return limit_range(args);
  const std::string requirement =
      "must be a non-empty list of watts > 0 or {\"max_w\", \"min_w\", \"step_w\"}, got ";
  if (!v.is_array() || v.empty() || v.size() > kMaxLimits)
    args.fail("power_limits", requirement + v.dump());
  std::vector<double> limits;
  for (const auto& l : v) {
    if (!l.is_number() || !std::isfinite(l.get<double>()) || l.get<double>() <= 0.0) {
      args.fail("power_limits", requirement + v.dump());
    }
    limits.push_back(l.get<double>());
  }
  std::sort(limits.begin(), limits.end(), std::greater<>());
  limits.erase(std::unique(limits.begin(), limits.end()), limits.end());
  return limits;
}

// Per-stage means measured under one limit.
struct LimitRow {
  double limit_w = 0.0;
  std::vector<double> time_s, energy_j, busy_s;
};

struct Choice {
  std::vector<std::size_t> row_of_stage;  // index of each stage's limit in the sweep
  double time_s = 0.0, energy_j = 0.0, cost = 0.0;
};

enum class Mode { kGlobal, kPerStage };

class Zeus : public Scheduler {
 public:
  Zeus(const JobSpec& job, Mode mode)
      : context_(context_of(mode == Mode::kGlobal ? "zeus-global" : "zeus-per-stage")),
        mode_(mode) {
    ArgReader args(context_, job.args,
                   with_schedule_args({"power_limits", "eta", "max_power_w", "min_window"}));
    sched_ = schedule_arg(args, job);
    max_clock_ = max_clock(context_, job);
    limits_ = power_limits(args);
    eta_ = args.number("eta", unit_interval, "a number in [0, 1]", 0.5);
    max_power_w_ = args.number("max_power_w", positive, "a number of watts > 0", limits_.front());
    windows_ = WindowLength(args);
  }

  Round next() override {
    Round r;
    r.done = done();
    r.stages = uniform_plans(sched_, max_clock_);
    for (std::size_t s = 0; s < r.stages.size(); ++s) {
      r.stages[s].power_limit_w = limits_[done() ? choice_->row_of_stage[s] : rows_.size()];
    }
    r.report_every = windows_.report_every();
    return r;
  }

  void observe(const std::vector<StageResult>& results) override {
    if (done()) throw Error(context_ + ": results after the final round");
    const std::vector<StageWindow> windows = summarize_all(context_, results, sched_, 0);
    if (windows_.measure_again(results)) return;  // measure this limit again
    LimitRow row{limits_[rows_.size()], {}, {}, {}};
    for (const auto& w : windows) {
      row.time_s.push_back(w.mean_iter_time());
      row.energy_j.push_back(w.mean_iter_energy());
      row.busy_s.push_back(w.mean_busy_time());
    }
    rows_.push_back(std::move(row));
    if (rows_.size() == limits_.size()) {
      choice_ = mode_ == Mode::kGlobal ? choose_global() : choose_per_stage();
    }
  }

  json status() const override {
    json sweep = json::array();
    for (const auto& r : rows_) {
      sweep.push_back({{"limit_w", r.limit_w},
                       {"stage_time_s", r.time_s},
                       {"stage_energy_j", r.energy_j},
                       {"stage_busy_s", r.busy_s}});
    }
    json chosen = nullptr;
    if (choice_) {
      std::vector<double> limits;
      for (std::size_t k : choice_->row_of_stage) limits.push_back(limits_[k]);
      chosen = {{"limits_w", limits},
                {"time_s", choice_->time_s},
                {"energy_j", choice_->energy_j},
                {"cost", choice_->cost}};
    }
    return {{"power_limits_w", limits_},
            {"eta", eta_},
            {"max_power_w", max_power_w_},
            {"sweep", std::move(sweep)},
            {"chosen", chosen},
            {"state", done() ? "done" : "sweeping"},
            {"report_every", windows_.status()}};
  }

 private:
  bool done() const { return choice_.has_value(); }

  // Cost of running each stage s under limit row_of_stage[s], with iteration time `time_s`.
  Choice priced(std::vector<std::size_t> row_of_stage, double time_s) const {
    Choice c{std::move(row_of_stage), time_s, 0.0, 0.0};
    for (std::size_t s = 0; s < c.row_of_stage.size(); ++s) {
      c.energy_j += rows_[c.row_of_stage[s]].energy_j[s];
    }
    c.cost = eta_ * c.energy_j + (1.0 - eta_) * max_power_w_ * c.time_s;
    return c;
  }

  // The cheapest of candidate(j) over the swept limits j (the highest limit on ties).
  Choice cheapest(const std::function<Choice(std::size_t)>& candidate) const {
    Choice best = candidate(0);
    for (std::size_t j = 1; j < rows_.size(); ++j) {
      Choice c = candidate(j);
      if (c.cost < best.cost) best = std::move(c);
    }
    return best;
  }

  Choice choose_global() const {
    return cheapest([&](std::size_t j) {
      const auto& t = rows_[j].time_s;
      return priced(std::vector<std::size_t>(t.size(), j), *std::max_element(t.begin(), t.end()));
    });
  }

  Choice choose_per_stage() const {
    const auto& busy0 = rows_.front().busy_s;
    auto heavy =
        static_cast<std::size_t>(std::max_element(busy0.begin(), busy0.end()) - busy0.begin());
    return cheapest([&](std::size_t j) {
      std::vector<std::size_t> row_of_stage(busy0.size(), 0);
      for (std::size_t s = 0; s < busy0.size(); ++s) {
        for (std::size_t k = 0; k < rows_.size(); ++k) {
          if (rows_[k].busy_s[s] <= rows_[j].busy_s[heavy]) row_of_stage[s] = k;
        }
      }
      row_of_stage[heavy] = j;
      return priced(std::move(row_of_stage), rows_[j].time_s[heavy]);
    });
  }

  std::string context_;
  Mode mode_;
  schedule::Schedule sched_;
  int max_clock_ = 0;
  std::vector<double> limits_;  // highest first
  double eta_ = 0.5;
  double max_power_w_ = 0.0;
  std::vector<LimitRow> rows_;  // measured, parallel to the first limits_
  std::optional<Choice> choice_;
  WindowLength windows_;
};

}  // namespace

std::unique_ptr<Scheduler> make_zeus_global(const JobSpec& job) {
  return std::make_unique<Zeus>(job, Mode::kGlobal);
}

std::unique_ptr<Scheduler> make_zeus_per_stage(const JobSpec& job) {
  return std::make_unique<Zeus>(job, Mode::kPerStage);
}

}  // namespace perseus::server::schedulers
