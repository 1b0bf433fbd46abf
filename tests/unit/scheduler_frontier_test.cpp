// The frontier scheduler, driven with synthetic results: the target plan every round, slowing
// other pipelines down to a straggler, and its bad reports and arguments.
#include "scheduler_harness.hpp"

namespace perseus::server {
namespace {

using namespace harness;
using perseus::test::error_of;
using perseus::test::TempDir;

// ---------------------------------------------------------------------------------------------
// frontier

class SchedulerFrontier : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new TempDir;
    auto sched = schedule::make_1f1b(4, 6);
    plan::PlanSettings settings{0.001, a100().blocking_power_w, plan::CostModelKind::kConvexHull,
                                1.0};
    auto problem = plan::PlanProblem::build(a100_profile(), sched, settings);
    plan::Frontier frontier = plan::solve_frontier(problem);
    auto ev = plan::evaluate(a100_profile(), sched, plan::all_max_plan(a100_profile(), sched),
                             settings.blocking_power_w);
    plan::write_frontier(path(), problem, frontier,
                         {"synthetic a100", {ev.time_s, ev.energy_j}, 0});
    stored_ = new plan::StoredFrontier(plan::read_frontier(path()));
  }
  static void TearDownTestSuite() {
    delete stored_;
    delete dir_;
  }

  static fs::path path() { return dir_->path() / "frontier"; }
  static const plan::StoredFrontier& stored() { return *stored_; }

  static std::size_t fastest() {
    const auto& rows = stored().rows;
    return static_cast<std::size_t>(
        std::min_element(rows.begin(), rows.end(),
                         [](const auto& a, const auto& b) {
                           return std::make_pair(a.evaluated_time_s, a.evaluated_energy_j) <
                                  std::make_pair(b.evaluated_time_s, b.evaluated_energy_j);
                         }) -
        rows.begin());
  }
  // The index of the plan a scheduler serves to non-straggling pipelines, checked against the
  // clocks it serves (several frontier plans can share their clocks).
  static std::size_t served(Scheduler& s) {
    auto index = s.status()["index"].get<std::size_t>();
    EXPECT_EQ(clocks_of(s.next().stages), stored().plans.at(index));
    return index;
  }

  static std::unique_ptr<Scheduler> make(json args, int dp = 1) {
    args["frontier"] = path().string();
    return make_scheduler("frontier", job_with(args, 4, dp));
  }

  static TempDir* dir_;
  static plan::StoredFrontier* stored_;
};

TempDir* SchedulerFrontier::dir_ = nullptr;
plan::StoredFrontier* SchedulerFrontier::stored_ = nullptr;

// A frontier of an interleaved schedule (2 stages per GPU) is served per GPU, each instruction
// labelled with its stage; a job with another number of GPUs is told how many the frontier has.
TEST(SchedulerFrontierMultiStage, ServesOnePlanPerGpuLabelledWithStages) {
  TempDir dir;
  auto sched = schedule::make_schedule("interleaved-1f1b", 4, 4, 2);
  plan::PlanSettings settings{0.001, a100().blocking_power_w, plan::CostModelKind::kConvexHull,
                              1.0};
  auto problem = plan::PlanProblem::build(a100_profile(), sched, settings);
  plan::write_frontier(dir.path() / "f", problem, plan::solve_frontier(problem),
                       {"synthetic a100", {1.0, 1.0}, 0});
  const std::string path = (dir.path() / "f").string();
  auto s = make_scheduler("frontier", job_with({{"frontier", path}, {"target", "cheapest"}}, 2));
  Round r = s->next();
  ASSERT_EQ(r.stages.size(), 2u);
  EXPECT_EQ(names_of(r.stages), names_of(sched));
  EXPECT_EQ(r.stages[0].frequencies.front().first, "forward@0");
  EXPECT_EQ(r.stages[1].frequencies.back().first, "backward@1");
  auto stored = plan::read_frontier(path);
  EXPECT_EQ(clocks_of(r.stages), stored.plans.at(s->status()["index"].get<std::size_t>()));
  s->observe(results_of(r, from_profile(a100_profile())));
  EXPECT_CONTAINS(error_of([&] {
                    make_scheduler("frontier", job_with({{"frontier", path}}, 4));
                  }),
                  "has 2 GPUs (4 stages) but the job has pp_degree 4");
}

TEST_F(SchedulerFrontier, ServesTheTargetPlanEveryRound) {
  ASSERT_GT(stored().rows.size(), 10u);
  auto s = make(json::object());
  for (int k = 0; k < 3; ++k) {
    Round r = s->next();
    EXPECT_FALSE(r.done);
    EXPECT_TRUE(r.pipelines.empty());
    EXPECT_EQ(clocks_of(r.stages), stored().plans[fastest()]);
    EXPECT_EQ(names_of(r.stages), names_of(schedule::make_1f1b(4, 6)));
    s->observe(results_of(r, from_profile(a100_profile())));
  }
  EXPECT_EQ(s->status()["index"], fastest());
  plan::FrontierQuery fq(stored());
  EXPECT_DOUBLE_EQ(s->status()["slowdown"].get<double>(), fq.slowdown(fastest()));
  EXPECT_DOUBLE_EQ(s->status()["saving"].get<double>(), fq.saving(fastest()));

  plan::FrontierQuery q(stored());
  double lo = stored().rows[q.fastest()].evaluated_time_s;
  double hi = stored().rows[q.min_energy()].evaluated_time_s;
  double target = 0.5 * (lo + hi);
  std::size_t got = served(*make({{"target", target}}));
  EXPECT_EQ(got, q.within_time(target));
  EXPECT_LE(stored().rows[got].evaluated_time_s, target);
  // A slowdown against all-max, as a string with % or a number of percent.
  for (const json& bound : {json("5%"), json(5)}) {
    std::size_t i = served(*make({{"max_slowdown", bound}}));
    EXPECT_EQ(i, q.within_slowdown(0.05));
    EXPECT_LE(q.slowdown(i), 0.05 + 1e-12);
  }
  EXPECT_CONTAINS(error_of([&] {
                    make({{"max_slowdown", "x"}});
                  }),
                  "field 'max_slowdown': slowdown 'x' is not a percentage");
  EXPECT_CONTAINS(error_of([&] {
                    make({{"max_slowdown", "5%"}, {"index", 1}});
                  }),
                  "give at most one of 'target', 'index' and 'max_slowdown'");

  std::size_t cheapest = served(*make({{"target", "cheapest"}}));
  for (const auto& row : stored().rows) {
    EXPECT_LE(stored().rows[cheapest].evaluated_energy_j, row.evaluated_energy_j);
  }
  EXPECT_EQ(served(*make({{"index", 3}})), 3u);
}

TEST_F(SchedulerFrontier, SlowsOtherPipelinesDownToTheStraggler) {
  auto s = make(json::object(), 4);
  const auto& fast = stored().rows[fastest()];
  s->report_straggler({{"dp_rank", 2}, {"factor", 1.15}});
  Round r = s->next();
  ASSERT_EQ(r.pipelines.size(), 1u);
  ASSERT_EQ(r.pipelines.count(2), 1u);
  EXPECT_EQ(clocks_of(*r.pipelines[2]), stored().plans[fastest()]);
  std::size_t others = served(*s);
  plan::FrontierQuery q(stored());
  EXPECT_EQ(others, q.within_time(1.15 * fast.evaluated_time_s));
  EXPECT_TRUE(q.is_pareto(others));
  EXPECT_LE(stored().rows[others].evaluated_time_s, 1.15 * fast.evaluated_time_s);
  EXPECT_GT(stored().rows[others].evaluated_time_s, fast.evaluated_time_s);
  EXPECT_LT(stored().rows[others].evaluated_energy_j, fast.evaluated_energy_j);
  json st = s->status();
  EXPECT_EQ(st["index"], others);
  ASSERT_EQ(st["stragglers"].size(), 1u);
  EXPECT_EQ(st["stragglers"][0]["dp_rank"], 2);
  EXPECT_NEAR(st["stragglers"][0]["time_s"].get<double>(), 1.15 * fast.evaluated_time_s, 1e-12);

  // An absolute time works the same way; the slowest straggler sets the pace.
  double t = 1.3 * fast.evaluated_time_s;
  s->report_straggler({{"dp_rank", 0}, {"time_s", t}});
  r = s->next();
  EXPECT_EQ(r.pipelines.size(), 2u);
  EXPECT_EQ(served(*s), q.within_time(t));

  s->report_straggler({{"dp_rank", 0}, {"clear", true}});
  s->report_straggler({{"dp_rank", 2}, {"clear", true}});
  r = s->next();
  EXPECT_TRUE(r.pipelines.empty());
  EXPECT_EQ(served(*s), fastest());
}

TEST_F(SchedulerFrontier, RejectsBadReportsAndArguments) {
  auto s = make(json::object(), 4);
  struct Case {
    json report;
    std::string message;
  };
  const std::vector<Case> cases = {
      {{{"dp_rank", 4}, {"factor", 1.2}},
       "scheduler 'frontier': straggler report: field 'dp_rank': must be < dp_degree 4"},
      {{{"dp_rank", -1}, {"factor", 1.2}}, "field 'dp_rank': must be an integer >= 0"},
      {{{"factor", 1.2}}, "field 'dp_rank': missing"},
      {{{"dp_rank", 1}, {"factor", 0.5}}, "field 'factor': must be a number >= 1, got 0.5"},
      {{{"dp_rank", 1}, {"time_s", "slow"}}, "field 'time_s': must be a number of seconds > 0"},
      {{{"dp_rank", 1}, {"clear", false}}, "field 'clear': must be true"},
      {{{"dp_rank", 1}}, "give exactly one of 'time_s', 'factor' and 'clear'"},
      {{{"dp_rank", 1}, {"factor", 2}, {"time_s", 3}}, "give exactly one of"},
      {{{"dp_rank", 1}, {"speed", 2}}, "field 'speed': unknown"},
      {json::array(), "straggler report: must be a JSON object"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.report.dump());
    EXPECT_CONTAINS(error_of([&] { s->report_straggler(c.report); }), c.message);
  }
  EXPECT_TRUE(s->next().pipelines.empty());  // nothing was applied

  EXPECT_CONTAINS(error_of([&] {
                    make({{"target", "soon"}});
                  }),
                  "field 'target': must be \"fastest\", \"cheapest\" or a number of seconds > 0");
  EXPECT_CONTAINS(error_of([&] {
                    make({{"target", 0.001}});
                  }),
                  "scheduler 'frontier': field 'target': no plan finishes within");
  EXPECT_CONTAINS(error_of([&] { make({{"index", 100000}}); }), "field 'index': must be <");
  EXPECT_CONTAINS(error_of([&] {
                    make({{"index", 1}, {"target", "fastest"}});
                  }),
                  "give at most one of 'target', 'index' and 'max_slowdown'");
  EXPECT_CONTAINS(error_of([&] {
                    make_scheduler("frontier", job_with({{"frontier", path().string()}}, 3));
                  }),
                  "has 4 stages but the job has pp_degree 3");
  JobSpec job = job_with({{"frontier", path().string()}});
  job.available_frequencies = {1410, 1395};
  EXPECT_CONTAINS(error_of([&] { make_scheduler("frontier", job); }),
                  "MHz is not an available frequency");
  // The default Scheduler rejects straggler reports.
  EXPECT_CONTAINS(error_of([] {
                    make_scheduler("all-max", job_with({{"microbatches", 2}}))
                        ->report_straggler({{"dp_rank", 0}, {"factor", 2}});
                  }),
                  "does not take straggler reports");
}

}  // namespace
}  // namespace perseus::server
