#include "perseus/search/energy.hpp"

#include <algorithm>
#include <set>
#include <string>

#include "perseus/plan/evaluate.hpp"
#include "perseus/plan/frontier_query.hpp"
#include "perseus/plan/frontier_store.hpp"
#include "perseus/plan/problem.hpp"
#include "perseus/plan/solver.hpp"
#include "perseus/profile/gpu_model.hpp"
#include "perseus/schedule/catalog.hpp"
#include "perseus/util/error.hpp"

namespace perseus::search {

namespace {

// The planner's time unit: this fraction of the shortest instruction at the highest clock.
constexpr double kUnitsPerInstruction = 50.0;

// Stage times per microbatch at the highest clock (seconds) as a GPU-model pipeline.
profile::ModelDescription stage_model(const PipelineCost& cost) {
  profile::ModelDescription md;
  md.num_stages = static_cast<int>(cost.stages.size());
  md.forward_time_s = 1.0;
  for (const StageCost& s : cost.stages) {
    md.stage_work.push_back((s.fwd_us + s.in_comm_us) * 1e-6);
    md.backward_work.push_back((s.bwd_us + s.recompute_us + s.out_comm_us) * 1e-6);
  }
  return md;
}

struct Pipeline {
  profile::Profile profile;
  std::vector<int> gpus;  // per stage
  double blocking_power_w = 0.0;
  double unit_time_s = 0.0;
};

// A plan scored for one GPU per stage (as plan::evaluate) and over every GPU.
struct Scored {
  plan::Evaluation per_stage;
  double all_gpus_j = 0.0;
};

// `plan`'s evaluation and its energy over every GPU: each stage's instruction energy and blocked
// time (at the GPU model's blocking power), times the stage's GPUs.
Scored score(const Pipeline& p, const plan::PlanProblem& problem,
             const plan::FrequencyPlan& clocks) {
  const schedule::Dag& dag = problem.dag;
  const int ranks = problem.schedule.num_ranks();
  const plan::NodeCosts nc = plan::node_costs(p.profile, problem.schedule, dag, clocks);
  const plan::Evaluation ev =
      plan::evaluate_nodes(dag, ranks, nc.time_s, nc.energy_j, p.blocking_power_w);
  std::vector<double> busy_energy(static_cast<std::size_t>(ranks), 0.0);
  for (int v = 1; v < dag.sink(); ++v) {
    busy_energy[static_cast<std::size_t>(dag.node(v).rank)] += nc.energy_j[v];
  }
  double energy = 0.0;
  for (std::size_t r = 0; r < busy_energy.size(); ++r) {
    energy += p.gpus[r] * (busy_energy[r] + (ev.time_s - ev.rank_busy_s[r]) * p.blocking_power_w);
  }
  return {ev, energy};
}

// The frontier of the pipeline at `microbatches` and its all-max, fastest and chosen plans.
PipelineEnergy plan_at(const Pipeline& p, int microbatches, double slowdown) {
  const int stages = static_cast<int>(p.gpus.size());
  schedule::Schedule sched = schedule::make_schedule("1f1b", stages, microbatches);
  const plan::PlanSettings settings{p.unit_time_s, p.blocking_power_w,
                                    plan::CostModelKind::kConvexHull, 1.0};
  const plan::PlanProblem problem = plan::PlanProblem::build(p.profile, sched, settings);
  const plan::Frontier frontier = plan::solve_frontier(problem);
  const Scored all_max = score(p, problem, plan::all_max_plan(p.profile, problem.schedule));
  const plan::StoredFrontier stored = plan::stored_frontier(
      problem, frontier, {all_max.per_stage.time_s, all_max.per_stage.energy_j});
  const plan::FrontierQuery query(stored);
  const Scored fastest = score(p, problem, stored.plans[query.fastest()]);
  const Scored chosen = score(p, problem, stored.plans[query.within_slowdown(slowdown)]);
  return {all_max.per_stage.time_s, all_max.all_gpus_j, fastest.all_gpus_j, chosen.per_stage.time_s,
          chosen.all_gpus_j};
}

// a + (b - a) x t, field by field.
PipelineEnergy extrapolate(const PipelineEnergy& a, const PipelineEnergy& b, double t) {
  auto at = [t](double x, double y) { return x + (y - x) * t; };
  return {at(a.all_max_time_s, b.all_max_time_s), at(a.all_max_energy_j, b.all_max_energy_j),
          at(a.fastest_energy_j, b.fastest_energy_j), at(a.planned_time_s, b.planned_time_s),
          at(a.planned_energy_j, b.planned_energy_j)};
}

}  // namespace

PipelineEnergy pipeline_energy(const Config& c, const PipelineCost& cost,
                               const std::string& gpu_name, double slowdown, int max_planned) {
  const profile::GpuModel& gpu = profile::gpu_model(gpu_name);
  const profile::ModelDescription md = stage_model(cost);
  Pipeline p;
  p.profile = profile::synthesize_profile(gpu, md);
  for (const StageConfig& s : c.stages) p.gpus.push_back(s.num_gpus);
  p.blocking_power_w = gpu.blocking_power_w;
  p.unit_time_s =
      *std::min_element(md.stage_work.begin(), md.stage_work.end()) / kUnitsPerInstruction;
  const int m = cost.num_microbatches, stages = md.num_stages;
  const int m2 = std::min(m, std::max(max_planned, 2 * stages));
  if (m2 == m) return plan_at(p, m, slowdown);
  const int m1 = m2 / 2;
  return extrapolate(plan_at(p, m1, slowdown), plan_at(p, m2, slowdown),
                     static_cast<double>(m - m1) / (m2 - m1));
}

EnergyChoice choose_for_energy(const PerfModel& pm, const std::vector<Config>& candidates,
                               const EnergyOptions& options) {
  EnergyChoice out;
  std::set<std::string> seen;
  for (const Config& c : candidates) {
    PipelineCost cost = pm.evaluate(c);
    if (!cost.legal || !seen.insert(config_to_string(c)).second) continue;
    if (out.time_optimal < 0 ||
        cost.iteration_ms < out.candidates[out.time_optimal].cost.iteration_ms) {
      out.time_optimal = static_cast<int>(out.candidates.size());
    }
    out.candidates.push_back({c, std::move(cost), {}, false});
  }
  if (out.candidates.empty()) throw Error("no legal configuration to plan for energy");
  const double fastest_s = out.candidates[out.time_optimal].cost.iteration_ms / 1000.0;
  out.bound_s = fastest_s * (1.0 + options.max_slowdown);
  for (std::size_t i = 0; i < out.candidates.size(); ++i) {
    EnergyCandidate& e = out.candidates[i];
    const double time_s = e.cost.iteration_ms / 1000.0;
    e.within_bound = time_s <= out.bound_s;
    if (!e.within_bound) continue;
    e.energy = pipeline_energy(e.config, e.cost, options.gpu, out.bound_s / time_s - 1.0);
    if (out.energy_optimal < 0 ||
        e.energy.planned_energy_j < out.candidates[out.energy_optimal].energy.planned_energy_j) {
      out.energy_optimal = static_cast<int>(i);
    }
  }
  return out;
}

}  // namespace perseus::search
