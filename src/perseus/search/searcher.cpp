// The search of one stage count (search/searcher.hpp): the stage cache, scoring, the shapes a
// stage may take, the walk from balanced starts and the final polish.
#include "perseus/search/searcher.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <functional>
#include <optional>
#include <set>

namespace perseus::search::detail {

bool better(const Plan& a, const Plan& b) {
  if (a.feasible != b.feasible) return a.feasible;
  if (a.feasible) return a.objective < b.objective;
  return a.max_mem < b.max_mem;
}

std::vector<int> signature(const Plan& p) {
  std::vector<int> s{p.mbs};
  for (const auto& sh : p.shapes) {
    s.push_back(sh.gpus);
    s.push_back(sh.tp);
    s.push_back(sh.dp);
    s.push_back(sh.algo);
  }
  return s;
}

bool legal_allocation(const std::vector<int>& gpus, int total, int per_node) {
  int start = 0;
  for (int g : gpus) {
    if (!power_of_two(g)) return false;
    const int end = start + g;
    const bool crosses = start / per_node != (end - 1) / per_node;
    if (crosses && (start % per_node != 0 || end % per_node != 0)) return false;
    start = end;
  }
  return start == total;
}

Searcher::Searcher(const Model& m, const Database& db, const SearchOptions& o, int num_stages)
    : m_(m), db_(db), o_(o), pm_(m, db, perf_options(o)), S_(num_stages), N_(m.num_ops()) {
  budget_ = o.max_evaluations > 0 ? o.max_evaluations : kDefaultEvaluations;
  max_tp_ = o.max_tp > 0 ? o.max_tp : o.gpus_per_node;
  mbs_ = o.micro_batch_sizes.empty() ? db.micro_batch_sizes() : o.micro_batch_sizes;
  std::sort(mbs_.begin(), mbs_.end());
  rc_.assign(static_cast<std::size_t>(N_), 0);
}

Searcher::Entry Searcher::stage(int first, int len, const Shape& sh, int mbs, int index,
                                const std::pair<bool, bool>& cross) {
  const int nsb = S_ - 1 - index;
  const int canon = m_.canonical_start(first, len);
  std::pair<std::uint64_t, std::uint64_t> key{
      static_cast<std::uint64_t>(canon) | static_cast<std::uint64_t>(len) << 24 |
          static_cast<std::uint64_t>(mbs) << 48,
      static_cast<std::uint64_t>(sh.tp) | static_cast<std::uint64_t>(sh.dp) << 12 |
          static_cast<std::uint64_t>(sh.algo) << 24 | static_cast<std::uint64_t>(nsb) << 32 |
          static_cast<std::uint64_t>(cross.first) << 48 |
          static_cast<std::uint64_t>(cross.second) << 49};
  auto it = cache_.find(key);
  if (it != cache_.end()) return it->second;
  ++evaluations_;
  StageView v;
  v.first_op = canon;
  v.num_ops = len;
  v.tp = constant(sh.tp);
  v.dp = constant(sh.dp);
  v.algo = constant(sh.algo);
  v.num_stages_behind = nsb;
  v.uniform = true;
  v.in_cross_node = cross.first;
  v.out_cross_node = cross.second;
  StageCost c = pm_.stage_auto(v, mbs, o_.recompute_limit_mb(), rc_.data());
  Entry e{c.time_ms, c.memory_mb, c.legal()};
  cache_.emplace(key, e);
  return e;
}

void Searcher::score(Plan& p) {
  ++configurations_;
  const int S = p.num_stages();
  auto cross = cross_flags(p.shapes);
  double times[64];
  std::vector<double> tv;
  double* t = S <= 64 ? times : (tv.resize(static_cast<std::size_t>(S)), tv.data());
  p.feasible = true;
  p.max_mem = 0.0;
  p.gpu_time = 0.0;
  int mem_bottleneck = 0;
  for (int i = 0; i < S; ++i) {
    const auto u = static_cast<std::size_t>(i);
    Entry e = stage(p.bounds[u], p.bounds[u + 1] - p.bounds[u], p.shapes[u], p.mbs, i, cross[u]);
    if (!e.legal) {
      p.feasible = false;
      p.objective = kInf;
      p.max_mem = kInf;
      p.bottleneck = i;
      return;
    }
    t[i] = e.time_ms;
    p.gpu_time += e.time_ms * p.shapes[u].gpus;
    if (e.mem_mb > p.max_mem) {
      p.max_mem = e.mem_mb;
      mem_bottleneck = i;
    }
  }
  std::vector<double> totals(static_cast<std::size_t>(S));
  pipeline_stage_times(t, S, o_.global_batch_size / p.mbs, totals.data());
  p.objective = 0.0;
  for (int i = 0; i < S; ++i) {
    if (totals[static_cast<std::size_t>(i)] > p.objective) {
      p.objective = totals[static_cast<std::size_t>(i)];
      p.bottleneck = i;
    }
  }
  if (p.max_mem > o_.memory_limit_mb) {
    p.feasible = false;
    p.bottleneck = mem_bottleneck;
  }
}

std::vector<Shape> Searcher::shapes_for(int gpus, int mbs) const {
  std::vector<Shape> out;
  for (int tp = 1; tp <= gpus && tp <= max_tp_; tp *= 2) {
    if (gpus % tp != 0 || db_.tp_index(tp) < 0) continue;
    const int dp = gpus / tp;
    // The per-GPU share must be a listed size, as the reference requires.
    if (mbs % dp != 0 || !listed(mbs / dp) || db_.mbs_index(mbs / dp) < 0) continue;
    for (int a = 0; a < db_.num_algos(); ++a) out.push_back({gpus, tp, dp, a});
  }
  return out;
}

bool Searcher::pick_shape(Plan& p, int i, int gpus) {
  const auto u = static_cast<std::size_t>(i);
  const auto options = shapes_for(gpus, p.mbs);
  Shape keep = p.shapes[u];
  bool found = false;
  Shape best;
  Entry best_e;
  for (const auto& sh : options) {
    p.shapes[u] = sh;
    auto cross = cross_flags(p.shapes);
    Entry e = stage(p.bounds[u], p.bounds[u + 1] - p.bounds[u], sh, p.mbs, i, cross[u]);
    if (!e.legal) continue;
    bool fits = e.mem_mb <= o_.memory_limit_mb, best_fits = best_e.mem_mb <= o_.memory_limit_mb;
    if (!found || (fits && !best_fits) ||
        (fits == best_fits && (fits ? e.time_ms < best_e.time_ms : e.mem_mb < best_e.mem_mb))) {
      found = true;
      best = sh;
      best_e = e;
    }
  }
  p.shapes[u] = found ? best : keep;
  return found;
}

void Searcher::consider(const Plan& p) {
  if (!p.feasible) return;
  const std::size_t keep = static_cast<std::size_t>(std::clamp(kPolishOps / N_, 1, 4));
  const auto sig = signature(p);
  for (Plan& f : finalists_) {
    if (signature(f) == sig) {
      if (better(p, f)) f = p;
      std::stable_sort(finalists_.begin(), finalists_.end(),
                       [](const Plan& a, const Plan& b) { return better(a, b); });
      return;
    }
  }
  finalists_.push_back(p);
  std::stable_sort(finalists_.begin(), finalists_.end(),
                   [](const Plan& a, const Plan& b) { return better(a, b); });
  if (finalists_.size() > keep) finalists_.resize(keep);
}

std::vector<int> Searcher::initial_allocation() const {
  const int total = o_.num_gpus();
  std::vector<int> g(static_cast<std::size_t>(S_), 1);
  int sum = S_, cap = std::max(1, std::min(max_tp_, total));
  while (sum < total) {
    bool progress = false;
    for (int i = 0; i < S_; ++i) {
      auto& gi = g[static_cast<std::size_t>(i)];
      if (sum + gi <= total && gi < cap) {
        sum += gi;
        gi *= 2;
        progress = true;
      }
    }
    if (!progress) {
      if (cap >= total) break;
      cap *= 2;
    }
  }
  if (legal_allocation(g, total, o_.gpus_per_node)) return g;
  // Otherwise the first legal allocation in order of closeness to total / S (bounded search).
  std::vector<int> sizes;
  for (int x = 1; x <= total; x *= 2) sizes.push_back(x);
  const double ideal = static_cast<double>(total) / S_;
  std::stable_sort(sizes.begin(), sizes.end(), [&](int a, int b) {
    return std::abs(std::log2(a / ideal)) < std::abs(std::log2(b / ideal));
  });
  std::vector<int> cur;
  long long budget = 200000;
  std::function<bool(int)> dfs = [&](int left) {
    if (--budget < 0) return false;
    const int placed = static_cast<int>(cur.size());
    if (placed == S_) return left == 0 && legal_allocation(cur, total, o_.gpus_per_node);
    for (int x : sizes) {
      const int rest = S_ - placed - 1;
      if (x > left - rest) continue;
      cur.push_back(x);
      if (dfs(left - x)) return true;
      cur.pop_back();
    }
    return false;
  };
  if (dfs(total)) return cur;
  return {};
}

Config Searcher::to_config(const Plan& p) const {
  Config c;
  c.model = m_.desc();
  c.global_batch_size = o_.global_batch_size;
  c.micro_batch_size = p.mbs;
  c.stages.resize(static_cast<std::size_t>(p.num_stages()));
  for (int i = 0; i < p.num_stages(); ++i) {
    const auto u = static_cast<std::size_t>(i);
    reset_stage(c, i, p.bounds[u + 1] - p.bounds[u], p.shapes[u]);
  }
  return c;
}

void Searcher::reset_stage(Config& c, int i, int num_ops, const Shape& sh) const {
  StageConfig& stage = c.stages[static_cast<std::size_t>(i)];
  stage = StageConfig::uniform(num_ops, sh.tp, sh.dp, sh.algo);
  pm_.choose_recompute(pm_.views(c)[static_cast<std::size_t>(i)], c.micro_batch_size,
                       o_.recompute_limit_mb(), stage.recompute.data());
}

bool Searcher::ahead(const Plan& a, const Plan& b, const Plan& best) const {
  if (o_.sort_metric == SortMetric::max_stage_time) return better(a, b);
  const bool a_improves = better(a, best), b_improves = better(b, best);
  if (a_improves != b_improves) return a_improves;
  if (a_improves || a.feasible != b.feasible) return better(a, b);
  return a.gpu_time < b.gpu_time;
}

std::vector<Plan> Searcher::starting_plans(const std::vector<int>& alloc) {
  std::vector<Plan> starts;
  for (int mbs : mbs_) {
    if (mbs > o_.global_batch_size) continue;
    Plan p;
    p.mbs = mbs;
    p.bounds.resize(static_cast<std::size_t>(S_) + 1);
    for (int i = 0; i <= S_; ++i) {
      p.bounds[static_cast<std::size_t>(i)] = i == S_ ? N_ : i * (N_ / S_);
    }
    for (int g : alloc) p.shapes.push_back({g, 1, g, 0});
    bool ok = true;
    for (int i = 0; i < S_ && ok; ++i) ok = pick_shape(p, i, alloc[static_cast<std::size_t>(i)]);
    if (!ok) continue;
    settle(p);
    starts.push_back(p);
  }
  std::stable_sort(starts.begin(), starts.end(),
                   [](const Plan& a, const Plan& b) { return better(a, b); });
  return starts;
}

void Searcher::climb(Plan cur, std::set<std::vector<int>>& visited, Plan& best) {
  int hops = 0;
  while (hops < o_.max_hops && !exhausted()) {
    Plan next;
    bool found = false;
    for (Plan& q : neighbours(cur)) {
      if (exhausted()) break;
      if (visited.count(signature(q)) != 0) continue;
      settle(q);
      if (!found || ahead(q, next, best)) {
        next = std::move(q);
        found = true;
      }
    }
    if (!found) return;
    visited.insert(signature(next));
    if (better(next, best)) {
      best = next;
      hops = 0;
    } else {
      ++hops;
    }
    cur = std::move(next);
  }
}

void Searcher::conclude(Plan best, StageCountResult& r) {
  // Polish the best few structures (the cut points can reorder them) and keep the fastest.
  std::vector<Plan> finalists = finalists_;
  if (finalists.empty()) finalists.push_back(best);
  for (Plan& f : finalists) {
    for (int round = 0; round < 8 && !exhausted(); ++round) {
      const double before = f.objective;
      polish(f, 2 * std::max(1, m_.ops_per_layer()));
      if (!(f.objective < before)) break;
    }
    if (better(f, best)) best = f;
  }
  r.config = to_config(best);
  r.cost = pm_.evaluate(r.config);
  r.found = r.cost.legal;
  finetune_finalists(finalists, r);
  if (r.found) r.candidates.push_back(r.config);
  for (const Plan& f : finalists) {
    if (f.feasible) r.candidates.push_back(to_config(f));
  }
}

StageCountResult Searcher::run() {
  const auto start_time = std::chrono::steady_clock::now();
  StageCountResult r;
  r.num_stages = S_;
  const std::vector<int> alloc = initial_allocation();
  std::optional<Plan> best;
  std::set<std::vector<int>> visited;
  if (!alloc.empty() && S_ <= N_) {
    for (const Plan& start : starting_plans(alloc)) {
      if (exhausted()) break;
      if (!visited.insert(signature(start)).second) continue;
      if (!best || better(start, *best)) best = start;
      climb(start, visited, *best);
    }
  }
  if (best) conclude(*best, r);
  r.evaluations = evaluations_;
  r.configurations = configurations_;
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_time).count();
  return r;
}

int stage_count_limit(const SearchOptions& o, const Model& m) {
  int hi = o.max_stages > 0 ? o.max_stages : std::min(o.num_gpus(), 16);
  return std::min({hi, o.num_gpus(), m.num_ops()});
}

SearchResult pick_best(std::vector<StageCountResult> results) {
  SearchResult out;
  out.per_stage_count = std::move(results);
  for (std::size_t i = 0; i < out.per_stage_count.size(); ++i) {
    const auto& r = out.per_stage_count[i];
    if (!r.found) continue;
    if (out.best < 0 ||
        r.cost.iteration_ms <
            out.per_stage_count[static_cast<std::size_t>(out.best)].cost.iteration_ms) {
      out.best = static_cast<int>(i);
    }
  }
  return out;
}

}  // namespace perseus::search::detail
