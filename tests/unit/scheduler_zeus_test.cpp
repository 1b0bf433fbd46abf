// The Zeus power-limit baselines (global and per-stage), driven with a GPU model whose speed
// follows its power limit.
#include "scheduler_harness.hpp"

namespace perseus::server {
namespace {

using namespace harness;

// ---------------------------------------------------------------------------------------------
// Zeus power limits

const std::vector<double> kStageWork = {1.2, 1.0, 1.0, 1.1};
constexpr double kMaxLimit = 400.0;
constexpr double kBlocking = 80.0;

// A GPU under power limit L draws L while busy and runs sqrt(L / 400) as fast as at 400 W.
CostFn power_limit_model() {
  return [](int stage, const std::string& instruction, int, std::optional<double> limit) {
    double l = limit.value_or(kMaxLimit);
    double t = kStageWork[static_cast<std::size_t>(stage)] * 0.05 *
               (instruction == "backward" ? 1.85 : 1.0) * std::sqrt(kMaxLimit / l);
    return std::make_pair(t, l * t);
  };
}

// What the sweep measures at one limit: per stage mean iteration time, energy and busy time.
struct Measured {
  std::vector<double> time, energy, busy;
};
Measured measure(double limit, int microbatches) {
  Round r;
  r.stages.resize(4);
  for (auto& st : r.stages) {
    st.power_limit_w = limit;
    for (int m = 0; m < microbatches; ++m) {
      st.frequencies.emplace_back("forward", 1410);
      st.frequencies.emplace_back("backward", 1410);
    }
  }
  auto results = results_of(r, power_limit_model(), {.iterations = 2, .blocking_w = kBlocking});
  Measured out;
  for (int s = 0; s < 4; ++s) {
    const auto& res = results[static_cast<std::size_t>(s)];
    out.time.push_back(res.iter_time[0]);
    out.energy.push_back(res.iter_energy[0]);
    double busy = 0.0;
    for (const auto& [name, its] : res.time_breakdown) {
      for (double t : its[0]) busy += t;
    }
    out.busy.push_back(busy);
  }
  return out;
}

const std::vector<double> kLimits = {400, 375, 350, 325, 300, 275, 250, 225, 200, 175, 150};

TEST(SchedulerZeus, GlobalPicksTheLimitWithTheLowestCost) {
  const double eta = 0.3;
  // The expected choice, straight from the model.
  std::size_t best = 0;
  double best_cost = std::numeric_limits<double>::infinity();
  for (std::size_t j = 0; j < kLimits.size(); ++j) {
    Measured m = measure(kLimits[j], 4);
    double energy = 0.0;
    for (double e : m.energy) energy += e;
    double time = *std::max_element(m.time.begin(), m.time.end());
    double cost = eta * energy + (1 - eta) * kMaxLimit * time;
    if (cost < best_cost) {
      best_cost = cost;
      best = j;
    }
  }
  ASSERT_GT(best, 0u);  // an interior optimum makes the test meaningful
  ASSERT_LT(best, kLimits.size() - 1);

  auto s = make_scheduler(
      "zeus-global",
      job_with({{"microbatches", 4},
                {"eta", eta},
                {"power_limits", {{"max_w", 400}, {"min_w", 150}, {"step_w", 25}}}}));
  auto rounds = run_to_end(*s, power_limit_model(), {.iterations = 2, .blocking_w = kBlocking});
  ASSERT_EQ(rounds.size(), kLimits.size() + 1);
  for (std::size_t j = 0; j < kLimits.size(); ++j) {
    EXPECT_FALSE(rounds[j].done);
    for (const auto& st : rounds[j].stages) EXPECT_EQ(st.power_limit_w, kLimits[j]);
    EXPECT_TRUE(all_at(rounds[j].stages, 1410));
  }
  const Round& final_round = rounds.back();
  EXPECT_TRUE(final_round.done);
  EXPECT_EQ(names_of(final_round.stages), names_of(schedule::make_1f1b(4, 4)));
  for (const auto& st : final_round.stages) EXPECT_EQ(st.power_limit_w, kLimits[best]);
  json st = s->status();
  EXPECT_EQ(st["state"], "done");
  EXPECT_EQ(st["sweep"].size(), kLimits.size());
  EXPECT_NEAR(st["chosen"]["cost"].get<double>(), best_cost, 1e-9 * best_cost);
}

// A limit whose windows were too short for a real energy counter is measured again, in windows of
// as many iterations as the scheduler asks for (WindowLength, as the profiler does).
TEST(SchedulerZeus, MeasuresALimitAgainWhenItsWindowsAreTooShort) {
  auto s = make_scheduler("zeus-global", job_with({{"microbatches", 1},
                                                   {"min_window", 0.5},
                                                   {"power_limits", json::array({400, 300})}}));
  const Round first = s->next();
  const auto short_windows = results_of(first, power_limit_model(), {.iterations = 1});
  const double window_s = short_windows[0].iter_time[0];
  ASSERT_LT(window_s, 0.5);
  s->observe(short_windows);
  const Round again = s->next();
  EXPECT_EQ(again.stages[0].power_limit_w, 400.0);  // the same limit
  EXPECT_EQ(again.report_every, static_cast<int>(std::ceil(1.1 * 0.5 / window_s)));
  EXPECT_TRUE(s->status()["sweep"].empty());
  EXPECT_EQ(s->status()["report_every"], *again.report_every);
  s->observe(results_of(again, power_limit_model(), {.iterations = *again.report_every}));
  EXPECT_EQ(s->status()["sweep"].size(), 1u);
  EXPECT_EQ(s->next().stages[0].power_limit_w, 300.0);
}

TEST(SchedulerZeus, MeasuresALimitAgainWhenTheCounterDidNotMeasureIt) {
  auto s = make_scheduler("zeus-global", job_with({{"microbatches", 1},
                                                   {"min_window", 0.0},
                                                   {"power_limits", json::array({400, 300})}}));
  auto results = results_of(s->next(), power_limit_model());
  results[0].unmeasured_ranks = {0};
  s->observe(results);
  EXPECT_TRUE(s->status()["sweep"].empty());
  EXPECT_EQ(s->next().stages[0].power_limit_w, 400.0);  // the same limit
}

TEST(SchedulerZeus, PerStageBalancesStagesToTheHeaviestOne) {
  const double eta = 0.3;
  std::vector<Measured> sweep;
  for (double l : kLimits) sweep.push_back(measure(l, 4));
  const std::size_t heavy = 0;  // kStageWork's largest
  std::vector<double> best_limits;
  double best_cost = std::numeric_limits<double>::infinity();
  for (std::size_t j = 0; j < kLimits.size(); ++j) {
    std::vector<double> limits(4, kLimits[0]);
    double energy = 0.0;
    for (std::size_t s = 0; s < 4; ++s) {
      std::size_t k = 0;
      for (std::size_t i = 0; i < kLimits.size(); ++i) {
        if (sweep[i].busy[s] <= sweep[j].busy[heavy]) k = i;
      }
      if (s == heavy) k = j;
      limits[s] = kLimits[k];
      energy += sweep[k].energy[s];
    }
    double cost = eta * energy + (1 - eta) * kMaxLimit * sweep[j].time[heavy];
    if (cost < best_cost) {
      best_cost = cost;
      best_limits = limits;
    }
  }
  auto s = make_scheduler(
      "zeus-per-stage",
      job_with({{"microbatches", 4},
                {"eta", eta},
                {"power_limits", {150, 400, 200, 350, 300, 250, 375, 325, 275, 225, 175}}}));
  auto rounds = run_to_end(*s, power_limit_model(), {.iterations = 2, .blocking_w = kBlocking});
  ASSERT_EQ(rounds.size(), kLimits.size() + 1);
  EXPECT_EQ(rounds.front().stages[0].power_limit_w, 400.0);  // highest first
  ASSERT_TRUE(rounds.back().done);
  std::vector<double> got;
  for (const auto& st : rounds.back().stages) got.push_back(st.power_limit_w.value_or(-1));
  EXPECT_EQ(got, best_limits);
  for (std::size_t k = 1; k < 4; ++k) EXPECT_LE(got[k], got[heavy]);
  EXPECT_LT(*std::min_element(got.begin(), got.end()), got[heavy]);  // lighter stages slow down
  EXPECT_NEAR(s->status()["chosen"]["cost"].get<double>(), best_cost, 1e-9 * best_cost);
}

TEST(SchedulerZeus, ReplayingTheSameResultsGivesTheSameChoice) {
  json args = {{"microbatches", 3}, {"power_limits", json::array({300, 250, 200})}, {"eta", 0.8}};
  auto a = make_scheduler("zeus-per-stage", job_with(args));
  auto b = make_scheduler("zeus-per-stage", job_with(args));
  run_to_end(*a, power_limit_model());
  run_to_end(*b, power_limit_model());
  EXPECT_EQ(a->status(), b->status());
  EXPECT_EQ(a->status()["power_limits_w"], json({300.0, 250.0, 200.0}));
}

}  // namespace
}  // namespace perseus::server
