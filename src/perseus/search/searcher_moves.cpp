// The search's moves (search/searcher.hpp): stage boundaries (min-max rebalancing, single-boundary
// refinement, windowed exact polish) and the neighbour primitives on the bottleneck stage.
#include <algorithm>

#include "perseus/search/searcher.hpp"

namespace perseus::search::detail {

namespace {

// Boundaries of `stages` stages of `ops` operators split as evenly as whole operators allow (the
// last one takes the remainder).
std::vector<int> even_bounds(int stages, int ops) {
  std::vector<int> b(static_cast<std::size_t>(stages) + 1, 0);
  for (int i = 0; i < stages; ++i) b[static_cast<std::size_t>(i) + 1] = (i + 1) * (ops / stages);
  b[static_cast<std::size_t>(stages)] = ops;
  return b;
}

}  // namespace

void Searcher::rebalance(Plan& p) {
  const int S = p.num_stages();
  if (S == 1) {
    p.bounds = {0, N_};
    score(p);
    return;
  }
  auto cross = cross_flags(p.shapes);
  std::vector<int> b(static_cast<std::size_t>(S) + 1);
  auto fits = [&](int i, int first, int len, double limit_ms) {
    const auto u = static_cast<std::size_t>(i);
    Entry e = stage(first, len, p.shapes[u], p.mbs, i, cross[u]);
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
  if (!greedy(kInf)) {  // no split fits in memory: keep an even one to rank by memory
    p.bounds = even_bounds(S, N_);
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

void Searcher::refine(Plan& p) {
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

void Searcher::polish(Plan& p, int window) {
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
        Entry e = stage(from[a], to[b] - from[a], p.shapes[static_cast<std::size_t>(j) - 1], p.mbs,
                        j - 1, cross[static_cast<std::size_t>(j) - 1]);
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

std::vector<Plan> Searcher::neighbours(const Plan& p) {
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

}  // namespace perseus::search::detail
