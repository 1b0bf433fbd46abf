// The search's per-operator fine-tuning (search/searcher.hpp, finetune.hpp): the finalists'
// stages tuned from every starting shape, then the bottleneck's boundaries walked with the two
// stages beside them tuned again.
#include "perseus/search/finetune.hpp"
#include "perseus/search/searcher.hpp"

namespace perseus::search::detail {

void Searcher::tune_stages(Config& c, const std::vector<int>& stages,
                           const FinetuneLimits& limits) const {
  for (int round = 0; round < o_.finetune_rounds; ++round) {
    bool any = false;
    for (int i : stages) any = finetune_stage(pm_, c, i, limits) || any;
    if (!any) break;
  }
}

void Searcher::tune_from_every_shape(Plan& p, Config& c, int i, const FinetuneLimits& limits,
                                     bool always) {
  const auto u = static_cast<std::size_t>(i);
  auto stage_cost = [&](const Config& x) { return pm_.stage(pm_.views(x)[u], x.micro_batch_size); };
  auto fits = [&](const StageCost& x) { return x.legal() && x.memory_mb <= o_.memory_limit_mb; };
  tune_stages(c, {i}, limits);
  StageCost best = stage_cost(c);
  if (!always && fits(best)) return;
  const Shape own = p.shapes[u];
  StageConfig best_stage = c.stages[u];
  for (const Shape& sh : shapes_for(own.gpus, p.mbs)) {
    if (sh == own || tune_work_ >= kTuneWork) continue;
    reset_stage(c, i, best_stage.num_ops(), sh);
    tune_stages(c, {i}, limits);
    StageCost cost = stage_cost(c);
    if (fits(cost) && (!fits(best) || cost.time_ms < best.time_ms)) {
      best = cost;
      best_stage = c.stages[u];
      p.shapes[u] = sh;
    }
  }
  c.stages[u] = std::move(best_stage);
}

void Searcher::finetune_finalists(const std::vector<Plan>& finalists, StageCountResult& r) {
  if (o_.finetune_rounds <= 0) return;
  const FinetuneLimits limits{o_.memory_limit_mb, o_.recompute_limit_mb(), max_tp_, mbs_,
                              &tune_work_};
  std::vector<int> all(static_cast<std::size_t>(S_));
  for (int i = 0; i < S_; ++i) all[static_cast<std::size_t>(i)] = i;
  Plan plan;  // the finalist whose tuned configuration is the fastest
  for (std::size_t k = 0; k < finalists.size() && k < kTunedFinalists; ++k) {
    Plan f = finalists[k];
    Config c = to_config(f);
    if (!pm_.evaluate(c).legal) continue;
    for (int i = 0; i < S_; ++i) tune_from_every_shape(f, c, i, limits, true);
    PipelineCost cost = pm_.evaluate(c);
    if (cost.legal && (!r.found || cost.iteration_ms < r.cost.iteration_ms)) {
      plan = f;
      r.config = std::move(c);
      r.cost = std::move(cost);
      r.found = true;
    }
  }
  if (!plan.bounds.empty() && S_ > 1) walk_tuned_boundaries(plan, r, limits);
}

void Searcher::walk_tuned_boundaries(Plan plan, StageCountResult& r, const FinetuneLimits& limits) {
  // Tuned stages favour other cut points: walk each of the bottleneck's boundaries one operator
  // at a time in both directions, tuning the two stages it separates, while that keeps
  // improving (up to kTunedBoundaryMisses steps past the last improvement).
  for (int pass = 0; pass < kTunedBoundaryPasses && tune_work_ < kTuneWork; ++pass) {
    bool improved = false;
    const int bn = r.cost.bottleneck;
    for (int j : {bn, bn + 1}) {
      if (j <= 0 || j >= S_) continue;
      const auto u = static_cast<std::size_t>(j);
      for (int dir : {-1, 1}) {
        int misses = 0;
        for (int b = plan.bounds[u] + dir; b > plan.bounds[u - 1] && b < plan.bounds[u + 1] &&
                                           misses < kTunedBoundaryMisses && tune_work_ < kTuneWork;
             b += dir) {
          Plan q = plan;
          q.bounds[u] = b;
          Config c = r.config;  // the other stages keep their tuned settings
          reset_stage(c, j - 1, b - q.bounds[u - 1], q.shapes[u - 1]);
          reset_stage(c, j, q.bounds[u + 1] - b, q.shapes[u]);
          tune_from_every_shape(q, c, j - 1, limits, false);
          tune_from_every_shape(q, c, j, limits, false);
          PipelineCost cost = pm_.evaluate(c);
          if (!(cost.legal && cost.iteration_ms < r.cost.iteration_ms)) {
            ++misses;
            continue;
          }
          misses = 0;
          improved = true;
          plan = std::move(q);
          r.config = std::move(c);
          r.cost = std::move(cost);
        }
      }
    }
    if (!improved) break;
  }
}

}  // namespace perseus::search::detail
