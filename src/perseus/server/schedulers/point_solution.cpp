// "point-solution": runs given plans, one round each (a plan file, or every `*.json`/`*.py` plan
// of a directory in name order, or reversed), after optional all-max warm-up rounds; the last
// plan is final. Zeus's argument names (its Perseus PointSolution's warmup_iters) are read too.
#include <algorithm>
#include <filesystem>

#include "perseus/plan/plan_io.hpp"
#include "perseus/schedule/catalog.hpp"
#include "perseus/server/schedulers/schedulers.hpp"

namespace perseus::server::schedulers {

namespace {

namespace fs = std::filesystem;

struct PlanRound {
  std::string source;
  schedule::Schedule sched;
  plan::FrequencyPlan clocks;
};

class PointSolution : public Scheduler {
 public:
  explicit PointSolution(const JobSpec& job) : context_(context_of("point-solution")) {
    ArgReader args(
        context_, job.args,
        with_schedule_args({"solution_path", "warmup_rounds", "warmup_iters", "reverse"}));
    warmup_ =
        static_cast<std::size_t>(args.integer(args.alias("warmup_rounds", "warmup_iters"), 0, 0));
    auto files = plan_files(args, job);
    if (args.boolean("reverse", false)) std::reverse(files.begin(), files.end());
    for (const auto& file : files) plans_.push_back(load(args, file, job));
    if (warmup_ > 0) max_clock_ = max_clock(context_, job);
  }

  Round next() override {
    Round r;
    if (round_ < warmup_) {
      r.stages = uniform_plans(plans_.front().sched, max_clock_);
      return r;
    }
    r.stages = stage_plans(current().sched, current().clocks);
    r.done = round_ + 1 >= rounds();
    return r;
  }

  void observe(const std::vector<StageResult>& results) override {
    check_results(context_, results, plans_.front().sched.num_ranks());
    if (round_ + 1 >= rounds()) throw Error(context_ + ": results after the final round");
    ++round_;
  }

  nlohmann::json status() const override {
    bool warming = round_ < warmup_;
    return {{"round", round_},
            {"rounds", rounds()},
            {"warmup_rounds", warmup_},
            {"plan", warming ? nlohmann::json(nullptr) : nlohmann::json(current().source)},
            {"state", state()}};
  }

 private:
  std::size_t rounds() const { return warmup_ + plans_.size(); }
  const char* state() const {
    if (round_ < warmup_) return "warmup";
    return round_ + 1 >= rounds() ? "done" : "running";
  }
  // The plan of the current round (the first plan during warm-up).
  const PlanRound& current() const {
    return plans_[round_ < warmup_ ? 0 : std::min(round_ - warmup_, plans_.size() - 1)];
  }

  std::vector<fs::path> plan_files(const ArgReader& args, const JobSpec& job) const {
    fs::path path = data_path(args, "solution_path", job);
    std::error_code ec;
    if (!fs::is_directory(path, ec)) {
      if (!fs::exists(path, ec))
        args.fail("solution_path", "names no file or directory: " + path.string());
      return {path};
    }
    std::vector<fs::path> files;
    for (const auto& entry : fs::directory_iterator(path, ec)) {
      auto ext = entry.path().extension();
      if (entry.is_regular_file() && (ext == ".json" || ext == ".py"))
        files.push_back(entry.path());
    }
    if (ec)
      args.fail("solution_path", "cannot list directory " + path.string() + ": " + ec.message());
    if (files.empty()) {
      args.fail("solution_path",
                "directory " + path.string() + " has no plan files (*.json, *.py)");
    }
    std::sort(files.begin(), files.end(),
              [](const fs::path& a, const fs::path& b) { return a.filename() < b.filename(); });
    return files;
  }

  // The schedule of a plan: what the plan file says, the rest from the arguments.
  schedule::Schedule schedule_of(const ArgReader& args, const plan::Plan& p,
                                 const std::string& source, int stages) const {
    plan::ScheduleChoice given{args.text("schedule", ""),
                               args.has("microbatches") ? args.integer("microbatches", 1) : 0,
                               args.integer("virtual_stages", 1, 0)};
    try {
      auto [name, microbatches, per_rank] = plan::plan_schedule(p, given, source);
      return schedule::make_schedule(name, stages, microbatches, per_rank);
    } catch (const Error& e) {
      throw Error(context_ + ": " + e.what());
    }
  }

  PlanRound load(const ArgReader& args, const fs::path& file, const JobSpec& job) const {
    const std::string source = file.string();
    plan::Plan p = args.naming("solution_path",
                               [&] { return plan::read_plan_file(source, job.stage_of_rank); });
    const std::string where = context_ + ": " + source;
    PlanRound round{source, schedule_of(args, p, source, p.num_stages), p.frequencies};
    require_ranks(round.sched, job.pp_degree, where + ": the plan");
    require_job_order(round.sched, job, where + ": the plan is for " + round.sched.name);
    plan::check_plan_shape(round.clocks, round.sched, where);
    check_clocks(round.clocks, job.available_frequencies, where);
    return round;
  }

  std::string context_;
  std::size_t warmup_ = 0;
  int max_clock_ = 0;
  std::vector<PlanRound> plans_;
  std::size_t round_ = 0;  // the round next() serves
};

}  // namespace

std::unique_ptr<Scheduler> make_point_solution(const JobSpec& job) {
  return std::make_unique<PointSolution>(job);
}

}  // namespace perseus::server::schedulers
