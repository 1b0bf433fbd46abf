#include "perseus/search/search.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <functional>
#include <limits>
#include <map>
#include <set>
#include <thread>
#include <unordered_map>

#include "perseus/util/error.hpp"

namespace perseus::search {

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr long long kDefaultEvaluations = 2000000;
constexpr double kRebalanceTolerance = 1e-6;  // relative, on the bottleneck stage time
constexpr int kPolishOps = 20000;  // finalists polished: min(4, kPolishOps / operators), >= 1

bool power_of_two(int x) {
  return x > 0 && (x & (x - 1)) == 0;
}

struct Shape {
  int gpus = 1, tp = 1, dp = 1, algo = 0;
  bool operator==(const Shape& o) const {
    return gpus == o.gpus && tp == o.tp && dp == o.dp && algo == o.algo;
  }
};

// A candidate configuration: uniform tp/dp/algo per stage, automatic recomputation.
struct Plan {
  int mbs = 0;
  std::vector<Shape> shapes;
  std::vector<int> bounds;  // stage i holds operators [bounds[i], bounds[i+1])
  bool feasible = false;    // legal and within the memory limit
  double objective = kInf;  // iteration time (ms)
  double max_mem = kInf;
  int bottleneck = 0;
  int num_stages() const { return static_cast<int>(shapes.size()); }
};

// Feasible first, then faster; among infeasible plans, the one needing less memory.
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

struct KeyHash {
  std::size_t operator()(const std::pair<std::uint64_t, std::uint64_t>& k) const {
    std::uint64_t x = k.first * 0x9E3779B97F4A7C15ULL ^ (k.second + 0x632BE59BD9B4E019ULL);
    x ^= x >> 31;
    x *= 0xBF58476D1CE4E5B9ULL;
    x ^= x >> 29;
    return static_cast<std::size_t>(x);
  }
};

// Node alignment of a GPU allocation: every stage has a power-of-two GPU count, and a stage that
// crosses a node boundary starts and ends on node boundaries (it spans whole nodes).
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

class Searcher {
 public:
  Searcher(const Model& m, const Database& db, const SearchOptions& o, int num_stages)
      : m_(m), db_(db), o_(o), pm_(m, db, options_for(o)), S_(num_stages), N_(m.num_ops()) {
    budget_ = o.max_evaluations > 0 ? o.max_evaluations : kDefaultEvaluations;
    max_tp_ = o.max_tp > 0 ? o.max_tp : o.gpus_per_node;
    mbs_ = o.micro_batch_sizes.empty() ? db.micro_batch_sizes() : o.micro_batch_sizes;
    std::sort(mbs_.begin(), mbs_.end());
    rc_.assign(static_cast<std::size_t>(N_), 0);
  }

  StageCountResult run();

 private:
  static PerfOptions options_for(const SearchOptions& o) {
    PerfOptions p;
    p.memory_limit_mb = o.memory_limit_mb;
    p.gpus_per_node = o.gpus_per_node;
    return p;
  }

  struct Entry {
    double time_ms = 0.0, mem_mb = 0.0;
    bool legal = false;
  };

  const int* constant(int value) {
    auto it = constants_.find(value);
    if (it == constants_.end()) {
      it = constants_.emplace(value, std::vector<int>(static_cast<std::size_t>(N_), value)).first;
    }
    return it->second.data();
  }

  bool exhausted() const { return evaluations_ >= budget_; }

  std::vector<std::pair<bool, bool>> cross_flags(const std::vector<Shape>& shapes) const {
    std::vector<std::pair<bool, bool>> out;
    int gpus = 0;
    for (const auto& sh : shapes) {
      bool in = gpus % o_.gpus_per_node == 0 && gpus > 0;
      gpus += sh.gpus;
      out.emplace_back(in, gpus % o_.gpus_per_node == 0);
    }
    return out;
  }

  // One stage under automatic recomputation, cached by content.
  Entry stage(int first, int len, const Shape& sh, int mbs, int index,
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
    StageCost c = pm_.stage_auto(v, mbs, o_.memory_limit_mb, rc_.data());
    Entry e{c.time_ms, c.memory_mb, c.legal()};
    cache_.emplace(key, e);
    return e;
  }

  void score(Plan& p) {
    ++configurations_;
    const int S = p.num_stages();
    auto cross = cross_flags(p.shapes);
    double times[64];
    std::vector<double> tv;
    double* t = S <= 64 ? times : (tv.resize(static_cast<std::size_t>(S)), tv.data());
    p.feasible = true;
    p.max_mem = 0.0;
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

  // Legal (tp, dp, algo) splits of `gpus` GPUs at microbatch size `mbs`.
  std::vector<Shape> shapes_for(int gpus, int mbs) const {
    std::vector<Shape> out;
    for (int tp = 1; tp <= gpus && tp <= max_tp_; tp *= 2) {
      if (gpus % tp != 0 || db_.tp_index(tp) < 0) continue;
      const int dp = gpus / tp;
      if (mbs % dp != 0 || db_.mbs_index(mbs / dp) < 0) continue;
      for (int a = 0; a < db_.num_algos(); ++a) out.push_back({gpus, tp, dp, a});
    }
    return out;
  }

  // The fastest legal shape of `gpus` GPUs for stage `i` of `p` on its current operators (the
  // least memory when none fits); false when there is none.
  bool pick_shape(Plan& p, int i, int gpus) {
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

  // Min-max stage boundaries for the plan's shapes: binary search on the bottleneck time with a
  // greedy fill (each stage takes the longest prefix within time and memory).
  void rebalance(Plan& p) {
    const int S = p.num_stages();
    if (S == 1) {
      p.bounds = {0, N_};
      score(p);
      return;
    }
    auto cross = cross_flags(p.shapes);
    std::vector<int> b(static_cast<std::size_t>(S) + 1);
    auto fits = [&](int i, int first, int len, double limit_ms) {
      Entry e = stage(first, len, p.shapes[static_cast<std::size_t>(i)], p.mbs, i,
                      cross[static_cast<std::size_t>(i)]);
      return e.legal && e.mem_mb <= o_.memory_limit_mb && e.time_ms <= limit_ms;
    };
    auto greedy = [&](double limit_ms) {
      int pos = 0;
      b[0] = 0;
      for (int i = 0; i + 1 < S; ++i) {
        const int max_len = N_ - pos - (S - 1 - i);
        if (max_len < 1 || !fits(i, pos, 1, limit_ms)) return false;
        int lo = 1, hi = max_len;
        while (lo < hi) {
          const int mid = lo + (hi - lo + 1) / 2;
          if (fits(i, pos, mid, limit_ms)) {
            lo = mid;
          } else {
            hi = mid - 1;
          }
        }
        pos += lo;
        b[static_cast<std::size_t>(i) + 1] = pos;
      }
      b[static_cast<std::size_t>(S)] = N_;
      return fits(S - 1, pos, N_ - pos, limit_ms);
    };
    if (!greedy(kInf)) {  // no split fits in memory: keep a balanced one to rank by memory
      p.bounds.assign(static_cast<std::size_t>(S) + 1, 0);
      for (int i = 0; i < S; ++i) p.bounds[static_cast<std::size_t>(i) + 1] = (i + 1) * (N_ / S);
      p.bounds[static_cast<std::size_t>(S)] = N_;
      score(p);
      return;
    }
    double hi = 0.0;
    for (int i = 0; i < S; ++i) {
      const auto u = static_cast<std::size_t>(i);
      hi = std::max(hi, stage(b[u], b[u + 1] - b[u], p.shapes[u], p.mbs, i, cross[u]).time_ms);
    }
    std::vector<int> best_b = b;
    double lo = 0.0;
    for (int iter = 0; iter < 40 && hi - lo > hi * kRebalanceTolerance && !exhausted(); ++iter) {
      const double mid = 0.5 * (lo + hi);
      if (greedy(mid)) {
        hi = mid;
        best_b = b;
      } else {
        lo = mid;
      }
    }
    p.bounds = best_b;
    score(p);
  }

  // Moves up to `max_step` operators across the bottleneck's boundaries while that improves.
  void refine(Plan& p) {
    const int S = p.num_stages();
    if (S == 1 || !p.feasible) return;
    const int max_step = std::max(2, m_.ops_per_layer());
    for (int round = 0; round < 4 * S && !exhausted(); ++round) {
      Plan best = p;
      const int bn = p.bottleneck;
      for (int j : {bn, bn + 1}) {  // boundary j separates stages j-1 and j
        if (j <= 0 || j >= S) continue;
        const auto u = static_cast<std::size_t>(j);
        for (int d = -max_step; d <= max_step; ++d) {
          if (d == 0) continue;
          const int nb = p.bounds[u] + d;
          if (nb <= p.bounds[u - 1] || nb >= p.bounds[u + 1]) continue;
          Plan q = p;
          q.bounds[u] = nb;
          score(q);
          if (better(q, best)) best = q;
        }
      }
      if (!better(best, p)) break;
      p = best;
    }
  }

  // Exact min-max boundaries within a window of `window` operators around each current boundary
  // (dynamic programming over the windows): moves stage cuts to cheap cut points (small boundary
  // tensors, favourable recomputation) that the greedy fill misses.
  void polish(Plan& p, int window) {
    const int S = p.num_stages();
    if (S == 1 || !p.feasible) return;
    auto cross = cross_flags(p.shapes);
    const double m1 = o_.global_batch_size / p.mbs - 1;
    std::vector<std::vector<int>> cand(static_cast<std::size_t>(S) + 1);
    cand[0] = {0};
    cand[static_cast<std::size_t>(S)] = {N_};
    for (int j = 1; j < S; ++j) {
      const int c = p.bounds[static_cast<std::size_t>(j)];
      for (int b = std::max(j, c - window); b <= std::min(N_ - (S - j), c + window); ++b) {
        cand[static_cast<std::size_t>(j)].push_back(b);
      }
    }
    struct Cell {
      double max_t = kInf, sum_t = 0.0;
      int prev = -1;
    };
    std::vector<std::vector<Cell>> dp(static_cast<std::size_t>(S) + 1);
    dp[0] = {Cell{0.0, 0.0, -1}};
    for (int j = 1; j <= S; ++j) {
      const auto& from = cand[static_cast<std::size_t>(j) - 1];
      const auto& to = cand[static_cast<std::size_t>(j)];
      auto& cells = dp[static_cast<std::size_t>(j)];
      cells.assign(to.size(), Cell{});
      for (std::size_t a = 0; a < from.size(); ++a) {
        const Cell& src = dp[static_cast<std::size_t>(j) - 1][a];
        if (src.max_t == kInf) continue;
        for (std::size_t b = 0; b < to.size(); ++b) {
          if (to[b] <= from[a]) continue;
          if (exhausted()) return;
          Entry e = stage(from[a], to[b] - from[a], p.shapes[static_cast<std::size_t>(j) - 1],
                          p.mbs, j - 1, cross[static_cast<std::size_t>(j) - 1]);
          if (!e.legal || e.mem_mb > o_.memory_limit_mb) continue;
          Cell c{std::max(src.max_t, e.time_ms), src.sum_t + e.time_ms, static_cast<int>(a)};
          Cell& dst = cells[b];
          if (dst.max_t == kInf || c.max_t * m1 + c.sum_t < dst.max_t * m1 + dst.sum_t) {
            dst = c;
          }
        }
      }
    }
    if (dp[static_cast<std::size_t>(S)][0].max_t == kInf) return;
    Plan q = p;
    int at = 0;
    for (int j = S; j > 0; --j) {
      q.bounds[static_cast<std::size_t>(j)] =
          cand[static_cast<std::size_t>(j)][static_cast<std::size_t>(at)];
      at = dp[static_cast<std::size_t>(j)][static_cast<std::size_t>(at)].prev;
    }
    score(q);
    if (better(q, p)) p = q;
  }

  void settle(Plan& p) {
    rebalance(p);
    refine(p);
    consider(p);
  }

  // Keeps the best few feasible plans with distinct structures for the final polish.
  void consider(const Plan& p) {
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

  // Neighbours of `p` by the primitives applied to its bottleneck stage.
  std::vector<Plan> neighbours(const Plan& p) {
    std::vector<Plan> out;
    const int S = p.num_stages();
    const int b = p.bottleneck;
    const auto ub = static_cast<std::size_t>(b);
    // tp/dp/algo of the bottleneck stage.
    for (const auto& sh : shapes_for(p.shapes[ub].gpus, p.mbs)) {
      if (sh == p.shapes[ub]) continue;
      Plan q = p;
      q.shapes[ub] = sh;
      out.push_back(std::move(q));
    }
    // GPU trades: one stage doubles, one or two halve (or the reverse); the bottleneck takes part.
    std::vector<int> gpus;
    for (const auto& sh : p.shapes) gpus.push_back(sh.gpus);
    auto trade = [&](const std::vector<int>& doubled, const std::vector<int>& halved) {
      std::vector<int> g = gpus;
      for (int i : doubled) g[static_cast<std::size_t>(i)] *= 2;
      for (int i : halved) g[static_cast<std::size_t>(i)] /= 2;
      if (!legal_allocation(g, o_.num_gpus(), o_.gpus_per_node)) return;
      Plan q = p;
      for (int i = 0; i < S; ++i) {
        if (g[static_cast<std::size_t>(i)] != gpus[static_cast<std::size_t>(i)] &&
            !pick_shape(q, i, g[static_cast<std::size_t>(i)])) {
          return;
        }
      }
      out.push_back(std::move(q));
    };
    for (int c = 0; c < S; ++c) {
      const int gc = gpus[static_cast<std::size_t>(c)];
      for (int d = 0; d < S; ++d) {
        if (d == c) continue;
        const int gd = gpus[static_cast<std::size_t>(d)];
        if (gd == 2 * gc && (b == c || b == d)) trade({c}, {d});
        for (int e = d + 1; e < S; ++e) {
          if (e == c || (b != c && b != d && b != e)) continue;
          const int ge = gpus[static_cast<std::size_t>(e)];
          if (gd == gc && ge == gc && gc >= 2) trade({c}, {d, e});  // c doubles, d and e halve
          if (gc >= 4 && gd == gc / 4 && ge == gc / 4) trade({d, e}, {c});  // c halves
        }
      }
    }
    // Microbatch size: the neighbouring candidates; every stage picks its best shape again.
    auto it = std::find(mbs_.begin(), mbs_.end(), p.mbs);
    std::vector<int> next;
    if (it != mbs_.end() && it != mbs_.begin()) next.push_back(*(it - 1));
    if (it != mbs_.end() && it + 1 != mbs_.end()) next.push_back(*(it + 1));
    for (int mbs : next) {
      if (mbs > o_.global_batch_size) continue;
      Plan q = p;
      q.mbs = mbs;
      bool ok = true;
      for (int i = 0; i < S && ok; ++i)
        ok = pick_shape(q, i, q.shapes[static_cast<std::size_t>(i)].gpus);
      if (ok) out.push_back(std::move(q));
    }
    return out;
  }

  // The balanced starting GPU allocation (powers of two, doubled round-robin), if legal.
  std::vector<int> initial_allocation() const {
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

  const Model& m_;
  const Database& db_;
  const SearchOptions& o_;
  PerfModel pm_;
  const int S_, N_;
  long long budget_ = 0, evaluations_ = 0, configurations_ = 0;
  int max_tp_ = 1;
  std::vector<Plan> finalists_;
  std::vector<int> mbs_;
  std::vector<std::uint8_t> rc_;
  std::map<int, std::vector<int>> constants_;
  std::unordered_map<std::pair<std::uint64_t, std::uint64_t>, Entry, KeyHash> cache_;

 public:
  Config to_config(const Plan& p) {
    Config c;
    c.model = m_.desc();
    c.global_batch_size = o_.global_batch_size;
    c.micro_batch_size = p.mbs;
    for (int i = 0; i < p.num_stages(); ++i) {
      const auto u = static_cast<std::size_t>(i);
      const Shape& sh = p.shapes[u];
      c.stages.push_back(
          StageConfig::uniform(p.bounds[u + 1] - p.bounds[u], sh.tp, sh.dp, sh.algo));
    }
    auto views = pm_.views(c);
    for (std::size_t i = 0; i < views.size(); ++i) {
      pm_.choose_recompute(views[i], c.micro_batch_size, o_.memory_limit_mb,
                           c.stages[i].recompute.data());
    }
    return c;
  }
};

StageCountResult Searcher::run() {
  const auto start_time = std::chrono::steady_clock::now();
  StageCountResult r;
  r.num_stages = S_;
  const std::vector<int> alloc = initial_allocation();
  Plan best;
  bool have = false;
  std::set<std::vector<int>> visited;
  if (!alloc.empty() && S_ <= N_) {
    // One start per microbatch size: balanced operators, the best shape per stage.
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
    for (Plan cur : starts) {
      if (exhausted()) break;
      if (!visited.insert(signature(cur)).second) continue;
      if (!have || better(cur, best)) {
        best = cur;
        have = true;
      }
      int hops = 0;
      while (hops < o_.max_hops && !exhausted()) {
        Plan next;
        bool found = false;
        for (Plan& q : neighbours(cur)) {
          if (exhausted()) break;
          if (visited.count(signature(q)) != 0) continue;
          settle(q);
          if (!found || better(q, next)) {
            next = std::move(q);
            found = true;
          }
        }
        if (!found) break;
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
  }
  if (have) {
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
  }
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

}  // namespace

void validate(const SearchOptions& o, const Model& model, const Database& db) {
  if (o.num_nodes <= 0) throw Error("--nodes must be positive");
  if (o.gpus_per_node <= 0) throw Error("--gpus-per-node must be positive");
  if (o.global_batch_size <= 0) throw Error("--global-batch-size must be positive");
  if (!(o.memory_limit_mb > 0.0) || !std::isfinite(o.memory_limit_mb)) {
    throw Error("--memory-limit must be a positive number of MB");
  }
  if (o.min_stages < 1) throw Error("--min-stages must be at least 1");
  if (o.max_stages < 0) throw Error("--max-stages must be positive");
  if (o.max_stages > 0 && o.max_stages < o.min_stages) {
    throw Error("--max-stages must not be below --min-stages");
  }
  if (o.min_stages > std::min(o.num_gpus(), model.num_ops())) {
    throw Error("--min-stages " + std::to_string(o.min_stages) + " exceeds the " +
                std::to_string(o.num_gpus()) + " GPUs");
  }
  if (o.max_tp < 0 || (o.max_tp > 0 && !power_of_two(o.max_tp))) {
    throw Error("--max-tp must be a power of two");
  }
  if (o.max_hops < 0) throw Error("--max-hops must be >= 0");
  if (o.max_evaluations < 0) throw Error("--max-evaluations must be >= 0");
  if (o.threads < 0) throw Error("--threads must be >= 0");
  for (int mbs : o.micro_batch_sizes) {
    if (db.mbs_index(mbs) < 0) {
      throw Error("--micro-batch-sizes: " + std::to_string(mbs) + " was not profiled in " +
                  db.dir().string());
    }
  }
}

SearchResult run_search(const Model& model, const Database& db, const SearchOptions& o) {
  validate(o, model, db);
  const int lo = o.min_stages, hi = stage_count_limit(o, model);
  const int count = std::max(0, hi - lo + 1);
  std::vector<StageCountResult> results(static_cast<std::size_t>(count));
  int threads = o.threads > 0 ? o.threads
                              : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  threads = std::max(1, std::min(threads, count));
  std::atomic<int> next{0};
  auto worker = [&] {
    for (int k = next++; k < count; k = next++) {
      Searcher s(model, db, o, lo + k);
      results[static_cast<std::size_t>(k)] = s.run();
    }
  };
  std::vector<std::thread> pool;
  for (int t = 1; t < threads; ++t) pool.emplace_back(worker);
  worker();
  for (auto& t : pool) t.join();
  return pick_best(std::move(results));
}

SearchResult run_grid(const Model& model, const Database& db, const SearchOptions& o) {
  validate(o, model, db);
  const auto start_time = std::chrono::steady_clock::now();
  PerfOptions popt;
  popt.memory_limit_mb = o.memory_limit_mb;
  popt.gpus_per_node = o.gpus_per_node;
  PerfModel pm(model, db, popt);
  const int N = model.num_ops();
  const int L = model.desc().num_layers;
  const int total = o.num_gpus();
  const int max_tp = o.max_tp > 0 ? o.max_tp : o.gpus_per_node;
  std::vector<int> mbs_list =
      o.micro_batch_sizes.empty() ? db.micro_batch_sizes() : o.micro_batch_sizes;
  const auto& fam = model.desc().family;
  if (!model.desc().segments.empty()) {
    throw Error("grid search supports the standard gpt, t5 and resnet layouts only");
  }
  std::vector<StageCountResult> results;
  for (int S = o.min_stages; S <= stage_count_limit(o, model); ++S) {
    StageCountResult r;
    r.num_stages = S;
    // Operators per stage, as Megatron-LM splits layers.
    std::vector<std::vector<int>> splits;
    if (fam == ModelFamily::gpt && L % S == 0) {
      std::vector<int> ops(static_cast<std::size_t>(S), (L / S) * 13);
      ops.front() += 1;
      ops.back() += N - 1 - 13 * L;
      splits.push_back(ops);
    } else if (fam == ModelFamily::t5) {
      if (S == 1) {
        splits.push_back({N});
      } else {
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
      }
    } else if (fam == ModelFamily::resnet) {
      std::vector<int> ops(static_cast<std::size_t>(S), (L / S) * 8);
      ops.front() += 4;
      ops.back() += 2 + (L - (L / S) * S) * 8;
      int sum = 0;
      for (int x : ops) sum += x;
      if (sum == N) splits.push_back(ops);
    }
    bool have = false;
    for (int tp = 1; tp <= max_tp; tp *= 2) {
      if (total % (S * tp) != 0) continue;
      const int dp = total / (S * tp);
      for (int mbs : mbs_list) {
        if (mbs > o.global_batch_size || mbs % dp != 0 ||
            std::find(mbs_list.begin(), mbs_list.end(), mbs / dp) == mbs_list.end()) {
          continue;
        }
        for (bool recompute : {true, false}) {
          for (const auto& ops : splits) {
            Config c;
            c.model = model.desc();
            c.global_batch_size = o.global_batch_size;
            c.micro_batch_size = mbs;
            for (int n : ops) {
              c.stages.push_back(StageConfig::uniform(n, tp, dp));
              if (recompute) c.stages.back().recompute.assign(static_cast<std::size_t>(n), 1);
            }
            if (recompute) {
              c.stages.front().recompute.front() = 0;
              c.stages.back().recompute.back() = 0;
            }
            PipelineCost cost = pm.evaluate(c);
            ++r.configurations;
            r.evaluations += S;
            bool fits = true;
            for (const auto& s : cost.stages) {
              if (!s.legal() || !(s.memory_mb < o.memory_limit_mb)) fits = false;
            }
            if (fits && (!have || cost.iteration_ms < r.cost.iteration_ms)) {
              r.config = c;
              r.cost = cost;
              r.found = true;
              have = true;
            }
          }
        }
      }
    }
    r.seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start_time).count();
    results.push_back(std::move(r));
  }
  return pick_best(std::move(results));
}

}  // namespace perseus::search
