// "all-max": every instruction at the highest available clock, served as the final round at
// once (the "no Perseus" reference).
#include "perseus/server/schedulers/schedulers.hpp"

namespace perseus::server::schedulers {

namespace {

class AllMax : public Scheduler {
 public:
  explicit AllMax(const JobSpec& job) {
    const std::string context = context_of("all-max");
    ArgReader args(context, job.args, kScheduleArgs);
    round_.stages = uniform_plans(schedule_arg(args, job), max_clock(context, job));
    round_.done = true;
  }

  Round next() override { return round_; }
  void observe(const std::vector<StageResult>& /*results*/) override {}
  bool history_free() const override { return true; }
  nlohmann::json status() const override {
    return {{"frequency", round_.stages.front().frequencies.front().second}, {"state", "done"}};
  }

 private:
  Round round_;
};

}  // namespace

std::unique_ptr<Scheduler> make_all_max(const JobSpec& job) {
  return std::make_unique<AllMax>(job);
}

}  // namespace perseus::server::schedulers
