// "frontier": serves one plan of a frontier directory written by `perseus plan` (the fastest,
// the cheapest, the cheapest within a time target or a slowdown against all-max, or by index;
// every choice but an index among the Pareto rows, plan::FrontierQuery) and reacts to stragglers:
// a straggling data-parallel pipeline runs the fastest plan and every other pipeline the cheapest
// plan that still finishes within the straggler's time. The job is done (the round says so, and
// the clients keep its plans and stop reporting) once the plans served have been measured for
// `done_after` reporting windows (default 3) since the last straggler report; with `done_after` 0
// it never is, and keeps serving rounds for stragglers reported at any time.
#include <algorithm>
#include <map>
#include <optional>

#include "perseus/plan/frontier_query.hpp"
#include "perseus/plan/frontier_store.hpp"
#include "perseus/server/schedulers/schedulers.hpp"

namespace perseus::server::schedulers {

namespace {

using nlohmann::json;

bool at_least_one(double v) {
  return v >= 1.0;
}

class FrontierScheduler : public Scheduler {
 public:
  explicit FrontierScheduler(const JobSpec& job)
      : context_(context_of("frontier")), dp_degree_(job.dp_degree) {
    ArgReader args(context_, job.args,
                   {"frontier", "target", "index", "max_slowdown", "done_after"});
    done_after_ = args.integer("done_after", 0, kDoneAfter);
    std::string dir = data_path(args, "frontier", job).string();
    frontier_ = args.naming("frontier", [&] { return plan::read_frontier(dir); });
    query_.emplace(frontier_);
    sched_ = frontier_.build_schedule();
    fastest_ = query_->fastest();
    base_ = others_ = choose(args);
    require_ranks(sched_, job.pp_degree, context_ + ": frontier " + dir);
    require_job_order(sched_, job,
                      context_ + ": frontier " + dir + " was planned for " + sched_.name);
    for (std::size_t i = 0; i < frontier_.plans.size(); ++i) {
      check_clocks(frontier_.plans[i], job.available_frequencies,
                   context_ + ": frontier " + dir + " plan " + std::to_string(i));
    }
  }

  Round next() override {
    Round r;
    r.stages = stage_plans(sched_, frontier_.plans[others_]);
    r.done = done_after_ > 0 && measured_ >= done_after_;
    if (stragglers_.empty()) return r;
    auto fastest =
        std::make_shared<const StagePlans>(stage_plans(sched_, frontier_.plans[fastest_]));
    for (const auto& [dp_rank, time] : stragglers_) r.pipelines[dp_rank] = fastest;
    return r;
  }

  void observe(const std::vector<StageResult>& results) override {
    check_results(context_, results, sched_.num_ranks());
    const bool measured = std::all_of(results.begin(), results.end(), [](const StageResult& s) {
      return s.unmeasured_ranks.empty();
    });
    if (measured) ++measured_;
  }

  std::optional<PlannedSaving> planned_saving() const override {
    return PlannedSaving{query_->saving(others_), query_->slowdown(others_)};
  }

  // Only when it never ends: then next() depends on the straggler reports alone.
  bool history_free() const override { return done_after_ == 0; }

  void report_straggler(const json& report) override {
    ArgReader r(context_ + ": straggler report", report, {"dp_rank", "time_s", "factor", "clear"});
    int dp_rank = r.integer("dp_rank", 0);
    if (dp_rank >= dp_degree_) {
      r.fail("dp_rank", "must be < dp_degree " + std::to_string(dp_degree_) + ", got " +
                            std::to_string(dp_rank));
    }
    if (r.has("time_s") + r.has("factor") + r.has("clear") != 1) {
      throw Error(r.context() + ": give exactly one of 'time_s', 'factor' and 'clear'");
    }
    if (r.has("clear")) {
      if (r.at("clear") != true)
        r.fail("clear", "must be true, got " + JsonFields::shown(r.at("clear")));
      stragglers_.erase(dp_rank);
    } else if (r.has("time_s")) {
      stragglers_[dp_rank] = r.number("time_s", positive, "a number of seconds > 0");
    } else {
      double factor = r.number("factor", at_least_one, "a number >= 1");
      stragglers_[dp_rank] = factor * frontier_.rows[plan_of(dp_rank)].evaluated_time_s;
    }
    measured_ = 0;  // the new plans are measured anew
    update();
  }

  json status() const override {
    json stragglers = json::array();
    for (const auto& [dp_rank, time] : stragglers_) {
      stragglers.push_back({{"dp_rank", dp_rank}, {"time_s", time}, {"index", fastest_}});
    }
    json out = row_json(others_);
    out["plans"] = frontier_.rows.size();
    out["target_index"] = base_;
    out["stragglers"] = std::move(stragglers);
    out["measured_windows"] = measured_;
    out["done_after"] = done_after_;
    return out;
  }

 private:
  std::size_t choose(const ArgReader& args) const {
    const std::size_t n = frontier_.rows.size();
    if (args.has("target") + args.has("index") + args.has("max_slowdown") > 1) {
      throw Error(context_ + ": give at most one of 'target', 'index' and 'max_slowdown'");
    }
    if (args.has("index")) {
      auto index = static_cast<std::size_t>(args.integer("index", 0));
      if (index >= n) args.fail("index", "must be < " + std::to_string(n) + " (the plan count)");
      return index;
    }
    if (args.has("max_slowdown")) {
      const json& v = args.at("max_slowdown");  // "5%", or a number of percent
      std::string text = v.is_string() ? v.get<std::string>() : v.is_number() ? v.dump() : "";
      if (text.empty())
        args.fail("max_slowdown", "must be a percentage like \"5%\", got " + v.dump());
      return args.naming("max_slowdown",
                         [&] { return query_->within_slowdown(plan::parse_slowdown(text)); });
    }
    const json target = args.has("target") ? args.at("target") : json("fastest");
    if (target == "fastest") return fastest_;
    if (target == "cheapest" || target == "min-energy") return query_->min_energy();
    if (!target.is_number()) {
      args.fail("target", "must be \"fastest\", \"cheapest\" or a number of seconds > 0, got " +
                              target.dump());
    }
    double seconds =
        args.number("target", positive, "\"fastest\", \"cheapest\" or a number of seconds > 0");
    return args.naming("target", [&] { return query_->within_time(seconds); });
  }

  std::size_t plan_of(int dp_rank) const { return stragglers_.count(dp_rank) ? fastest_ : others_; }

  // Non-straggling pipelines: the cheapest plan that finishes by the slowest straggler (never
  // slower than the target plan, never more expensive than it).
  void update() {
    double time = frontier_.rows[base_].evaluated_time_s;
    for (const auto& [dp_rank, t] : stragglers_) time = std::max(time, t);
    others_ = stragglers_.empty() ? base_ : query_->within_time(time);
  }

  // The plan served, as every choice is echoed: index, time, energy, and the slowdown and
  // saving against the frontier's all-max (fractions).
  json row_json(std::size_t i) const {
    const auto& r = frontier_.rows[i];
    return {{"index", i},
            {"time_s", r.evaluated_time_s},
            {"energy_j", r.evaluated_energy_j},
            {"slowdown", query_->slowdown(i)},
            {"saving", query_->saving(i)}};
  }

  static constexpr int kDoneAfter = 3;
  std::string context_;
  int dp_degree_ = 1;
  int done_after_ = kDoneAfter;  // measured windows until done (0: never)
  int measured_ = 0;             // windows measured since the start or the last straggler report
  plan::StoredFrontier frontier_;
  std::optional<plan::FrontierQuery> query_;  // set once frontier_ is read
  schedule::Schedule sched_;
  std::size_t fastest_ = 0;
  std::size_t base_ = 0;              // the plan the target chose
  std::size_t others_ = 0;            // the plan of the non-straggling pipelines
  std::map<int, double> stragglers_;  // dp_rank -> its iteration time
};

}  // namespace

std::unique_ptr<Scheduler> make_frontier(const JobSpec& job) {
  return std::make_unique<FrontierScheduler>(job);
}

}  // namespace perseus::server::schedulers
