// The Megatron-LM-style grid baseline of the parallelization search (search/search.hpp).
#include <algorithm>
#include <chrono>

#include "perseus/search/searcher.hpp"
#include "perseus/util/error.hpp"

namespace perseus::search {

using detail::pick_best;
using detail::stage_count_limit;

namespace {

// Operators per stage for S stages, as Megatron-LM splits layers (equal layers per stage; T5: each
// split of the stages between encoder and decoder that divides both evenly). Empty: no split.
std::vector<std::vector<int>> megatron_splits(const Model& model, int S) {
  const int N = model.num_ops();
  const int L = model.desc().num_layers;
  std::vector<std::vector<int>> splits;
  switch (model.desc().family) {
    case ModelFamily::gpt:
      if (L % S == 0) {
        std::vector<int> ops(static_cast<std::size_t>(S), (L / S) * 13);
        ops.front() += 1;
        ops.back() += N - 1 - 13 * L;
        splits.push_back(ops);
      }
      break;
    case ModelFamily::t5:
      if (S == 1) splits.push_back({N});
      for (int enc = 1; enc < S; ++enc) {
        if (L % enc != 0 || L % (S - enc) != 0) continue;
        std::vector<int> ops(static_cast<std::size_t>(enc), (L / enc) * 13);
        ops.front() += 1;
        ops.back() += 1;
        for (int d = 0; d < S - enc; ++d) ops.push_back((L / (S - enc)) * 21);
        ops[static_cast<std::size_t>(enc)] += 1;
        ops.back() += N - (2 + 13 * L + 1 + 21 * L);
        splits.push_back(ops);
      }
      break;
    case ModelFamily::resnet: {
      std::vector<int> ops(static_cast<std::size_t>(S), (L / S) * 8);
      ops.front() += 4;
      ops.back() += 2 + (L - (L / S) * S) * 8;
      int sum = 0;
      for (int x : ops) sum += x;
      if (sum == N) splits.push_back(ops);
      break;
    }
  }
  return splits;
}

// Every stage at the same tp and dp; with `recompute`, every operator but the first and last of
// the pipeline is recomputed.
Config grid_config(const Model& model, int global_batch, const std::vector<int>& ops, int mbs,
                   int tp, int dp, bool recompute) {
  Config c;
  c.model = model.desc();
  c.global_batch_size = global_batch;
  c.micro_batch_size = mbs;
  for (int n : ops) {
    c.stages.push_back(StageConfig::uniform(n, tp, dp));
    if (recompute) c.stages.back().recompute.assign(static_cast<std::size_t>(n), 1);
  }
  if (recompute) {
    c.stages.front().recompute.front() = 0;
    c.stages.back().recompute.back() = 0;
  }
  return c;
}

bool fits(const PipelineCost& cost, double memory_limit_mb) {
  return std::all_of(cost.stages.begin(), cost.stages.end(), [&](const StageCost& s) {
    return s.legal() && s.memory_mb < memory_limit_mb;
  });
}

}  // namespace

SearchResult run_grid(const Model& model, const Database& db, const SearchOptions& o) {
  std::vector<std::string> notices = validate(o, model, db);
  if (!model.desc().segments.empty()) {
    throw Error("grid search supports the standard gpt, t5 and resnet layouts only");
  }
  const auto start_time = std::chrono::steady_clock::now();
  PerfModel pm(model, db, perf_options(o));
  const int total = o.num_gpus();
  const int max_tp = o.max_tp > 0 ? o.max_tp : o.gpus_per_node;
  const std::vector<int> mbs_list =
      o.micro_batch_sizes.empty() ? db.micro_batch_sizes() : o.micro_batch_sizes;
  auto profiled = [&](int mbs) {
    return std::find(mbs_list.begin(), mbs_list.end(), mbs) != mbs_list.end();
  };
  std::vector<StageCountResult> results;
  for (int S = o.min_stages; S <= stage_count_limit(o, model); ++S) {
    StageCountResult r;
    r.num_stages = S;
    const auto splits = megatron_splits(model, S);
    for (int tp = 1; tp <= max_tp; tp *= 2) {
      if (total % (S * tp) != 0) continue;
      const int dp = total / (S * tp);
      for (int mbs : mbs_list) {
        if (mbs > o.global_batch_size || mbs % dp != 0 || !profiled(mbs / dp)) continue;
        for (bool recompute : {true, false}) {
          for (const auto& ops : splits) {
            Config c = grid_config(model, o.global_batch_size, ops, mbs, tp, dp, recompute);
            PipelineCost cost = pm.evaluate(c);
            ++r.configurations;
            r.evaluations += S;
            if (fits(cost, o.memory_limit_mb) &&
                (!r.found || cost.iteration_ms < r.cost.iteration_ms)) {
              r.config = std::move(c);
              r.cost = std::move(cost);
              r.found = true;
            }
          }
        }
      }
    }
    r.seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start_time).count();
    results.push_back(std::move(r));
  }
  SearchResult out = pick_best(std::move(results));
  out.notices = std::move(notices);
  return out;
}

}  // namespace perseus::search
