// Slack reclamation (plan/reclaim.hpp) keeps its windows lazily, in topological positions; this
// checks that it moves exactly the instructions the eager algorithm moves (every window brought up
// to date after every move, as the first implementation did), bit for bit, on random pipelines of
// five schedules from random starting options, that it never lengthens the iteration, and that
// the evaluation it returns is evaluate_nodes' on the options' costs, bit for bit.
#include "perseus/plan/reclaim.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <string>
#include <vector>

#include "perseus/plan/problem.hpp"
#include "perseus/profile/gpu_model.hpp"
#include "perseus/profile/split.hpp"
#include "perseus/schedule/catalog.hpp"

namespace {

namespace plan = perseus::plan;
namespace profile = perseus::profile;
namespace schedule = perseus::schedule;

// The eager reference: node ids, a std heap filled in node order, and after every move the new
// finish pushed to every later start and the new start to every earlier finish.
std::vector<int> eager_reclaim(const plan::PlanProblem& p, std::vector<int> option) {
  const schedule::Dag& dag = p.dag;
  const int n = dag.num_nodes();
  auto at = [&](int v, int k) -> const profile::Option& { return p.options(v).options[k]; };
  std::vector<double> time(static_cast<std::size_t>(n), 0.0), es, lf;
  for (int v = 1; v < dag.sink(); ++v) time[v] = at(v, option[v]).time_s;
  schedule::critical_windows(dag, time, es, lf);
  const double tolerance = 1e-12 * std::max(1.0, es[dag.sink()]);
  std::vector<std::pair<double, int>> heap;  // (saving per second, node), ties as std::pop_heap
  auto less = [](const auto& a, const auto& b) { return a.first < b.first; };
  auto push = [&](int v) {
    if (option[v] == 0) return;
    const auto &now = at(v, option[v]), &slower = at(v, option[v] - 1);
    const double extra = slower.time_s - now.time_s;
    const double saving = now.energy_j - slower.energy_j + p.settings.blocking_power_w * extra;
    if (extra <= 0.0 || saving <= 0.0) return;
    heap.emplace_back(saving / extra, v);
    std::push_heap(heap.begin(), heap.end(), less);
  };
  for (int v = 1; v < dag.sink(); ++v) push(v);
  std::vector<int> work;
  while (!heap.empty()) {
    std::pop_heap(heap.begin(), heap.end(), less);
    const int v = heap.back().second;
    heap.pop_back();
    const double slower = at(v, option[v] - 1).time_s;
    if (es[v] + slower > lf[v] + tolerance) continue;
    --option[v];
    time[v] = slower;
    for (work.assign(1, v); !work.empty();) {
      const int u = work.back();
      work.pop_back();
      for (int w : dag.successors(u)) {
        if (es[u] + time[u] > es[w]) es[w] = es[u] + time[u], work.push_back(w);
      }
    }
    for (work.assign(1, v); !work.empty();) {
      const int w = work.back();
      work.pop_back();
      for (int u : dag.predecessors(w)) {
        if (lf[w] - time[w] < lf[u]) lf[u] = lf[w] - time[w], work.push_back(u);
      }
    }
    push(v);
  }
  return option;
}

double iteration_time(const plan::PlanProblem& p, const std::vector<int>& option) {
  std::vector<double> time(option.size(), 0.0);
  for (int v = 1; v < p.dag.sink(); ++v) time[v] = p.options(v).options[option[v]].time_s;
  return schedule::longest_path(p.dag, time);
}

TEST(Reclaim, LazyWindowsMoveWhatEagerWindowsMove) {
  std::mt19937_64 random(11);
  // DualPipeV's overlapped pairs are nodes with three neighbours each way.
  const char* schedules[] = {"1f1b", "gpipe", "interleaved-1f1b", "zbv", "dualpipev"};
  int moved = 0;
  for (int k = 0; k < 50; ++k) {
    const std::string name = schedules[k % 5];
    const bool multi = k % 5 >= 2;
    const int gpus = 2 + static_cast<int>(random() % 4);
    const int microbatches =
        multi ? gpus * (2 + static_cast<int>(random() % 3)) : 1 + static_cast<int>(random() % 16);
    auto model = profile::default_model(gpus);
    model.forward_time_s = 0.005 + 0.05 * static_cast<double>(random() % 100) / 100.0;
    profile::Profile prof = profile::synthesize_profile(profile::gpu_model(k % 2 ? "a100" : "h100"),
                                                        model, 0.03, random());
    if (multi) prof = profile::split_profile(prof, {2, name == "zbv" || name == "dualpipev", 0.5});
    auto problem = plan::PlanProblem::build(
        prof, schedule::make_schedule(name, prof.num_stages(), microbatches),
        {0.001, 80.0, plan::CostModelKind::kConvexHull, 1.0});
    SCOPED_TRACE(name + " seed " + std::to_string(k));
    // Random starting options, mostly fast ones, so there is slack to reclaim.
    std::vector<int> start(static_cast<std::size_t>(problem.dag.num_nodes()), 0);
    for (int v = 1; v < problem.dag.sink(); ++v) {
      const int count = static_cast<int>(problem.options(v).options.size());
      start[v] = count - 1 - static_cast<int>(random() % std::min(count, 3));
    }
    std::vector<int> lazy = start;
    const plan::TimeEnergy ev = plan::reclaim_slack(problem, lazy);
    EXPECT_EQ(lazy, eager_reclaim(problem, start));
    // Its own evaluation is evaluate_nodes', bit for bit.
    plan::OptionCosts costs;
    plan::option_costs(problem, lazy, costs);
    const plan::Evaluation reference =
        plan::evaluate_nodes(problem.dag, problem.schedule.num_ranks(), costs.time, costs.energy,
                             problem.settings.blocking_power_w);
    EXPECT_EQ(ev.time_s, reference.time_s);
    EXPECT_EQ(ev.energy_j, reference.energy_j);
    EXPECT_LE(iteration_time(problem, lazy),
              iteration_time(problem, start) * (1.0 + 1e-12) + 1e-12);
    moved += lazy != start;
  }
  EXPECT_GT(moved, 40);  // slack was reclaimed in most cases, so the comparison means something
}

}  // namespace
