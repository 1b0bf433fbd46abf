// Private to the parallelization search (search/search.hpp): the candidate plans it walks and the
// Searcher of one stage count, shared by searcher.cpp (stage cache, scoring, shapes, the walk),
// searcher_moves.cpp (stage boundaries and the neighbour primitives), searcher_tuning.cpp
// (per-operator fine-tuning) and grid.cpp.
#pragma once

#include <algorithm>
#include <cstdint>
#include <limits>
#include <map>
#include <set>
#include <unordered_map>
#include <utility>
#include <vector>

#include "perseus/search/finetune.hpp"
#include "perseus/search/search.hpp"

namespace perseus::search::detail {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr long long kDefaultEvaluations = 2000000;
constexpr double kRebalanceTolerance = 1e-6;  // relative, on the bottleneck stage time
constexpr int kTunedBoundaryMisses = 4;       // steps past the last improving boundary move
constexpr int kTunedBoundaryPasses = 4;
constexpr std::size_t kTunedFinalists = 2;  // the fastest finalists are fine-tuned
// Operator evaluations per stage count after which fine-tuning tries no other starting shapes
// and no more boundary moves (every finalist's stages are still tuned from their own shapes).
constexpr long long kTuneWork = 4000000;
constexpr int kPolishOps = 20000;  // finalists polished: min(4, kPolishOps / operators), >= 1

inline bool power_of_two(int x) {
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
  double gpu_time = kInf;  // sum over stages of time per microbatch x GPUs (ms)
  int bottleneck = 0;
  int num_stages() const { return static_cast<int>(shapes.size()); }
};

// Feasible first, then faster; among infeasible plans, the one needing less memory.
bool better(const Plan& a, const Plan& b);

// What identifies a plan in the walk: microbatch size and every stage's shape.
std::vector<int> signature(const Plan& p);

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
bool legal_allocation(const std::vector<int>& gpus, int total, int per_node);

class Searcher {
 public:
  Searcher(const Model& m, const Database& db, const SearchOptions& o, int num_stages);

  StageCountResult run();
  Config to_config(const Plan& p) const;

 private:
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
  bool listed(int mbs) const { return std::binary_search(mbs_.begin(), mbs_.end(), mbs); }

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
              const std::pair<bool, bool>& cross);

  void score(Plan& p);

  // Legal (tp, dp, algo) splits of `gpus` GPUs at microbatch size `mbs`.
  std::vector<Shape> shapes_for(int gpus, int mbs) const;

  // The fastest legal shape of `gpus` GPUs for stage `i` of `p` on its current operators (the
  // least memory when none fits); false when there is none.
  bool pick_shape(Plan& p, int i, int gpus);

  // Min-max stage boundaries for the plan's shapes: binary search on the bottleneck time with a
  // greedy fill (each stage takes the longest prefix within time and memory).
  void rebalance(Plan& p);

  // Moves up to `max_step` operators across the bottleneck's boundaries while that improves.
  void refine(Plan& p);

  // Exact min-max boundaries within a window of `window` operators around each current boundary
  // (dynamic programming over the windows): moves stage cuts to cheap cut points (small boundary
  // tensors, favourable recomputation) that the greedy fill misses.
  void polish(Plan& p, int window);

  void settle(Plan& p) {
    rebalance(p);
    refine(p);
    consider(p);
  }

  // Keeps the best few feasible plans with distinct structures for the final polish.
  void consider(const Plan& p);

  // Neighbours of `p` by the primitives applied to its bottleneck stage.
  std::vector<Plan> neighbours(const Plan& p);

  // Stage `i` of `c` becomes `num_ops` operators of shape `sh` (the stages before it as they
  // are) with automatic recomputation.
  void reset_stage(Config& c, int i, int num_ops, const Shape& sh) const;

  // Whether the walk moves to neighbour `a` rather than `b` (SearchOptions::sort_metric): the
  // faster when one improves on `best`, else by the metric.
  bool ahead(const Plan& a, const Plan& b, const Plan& best) const;

  // Per-operator fine-tuning (finetune.hpp) of every stage of each finalist, then, on the
  // fastest, of the two stages beside each move of the bottleneck's boundaries; keeps the
  // fastest in `r`.
  void finetune_finalists(const std::vector<Plan>& finalists, StageCountResult& r);
  // Tunes stage `i` of `c` from its own shape and (always, or when that does not fit) from every
  // other legal shape of its GPUs while the tuning budget lasts, keeping the fastest that fits;
  // p.shapes[i] becomes the shape it started from.
  void tune_from_every_shape(Plan& p, Config& c, int i, const FinetuneLimits& limits, bool always);
  // Walks each of the bottleneck's boundaries of `plan` (r.config's structure) one operator at
  // a time, tuning the two stages it separates, while that improves r.
  void walk_tuned_boundaries(Plan plan, StageCountResult& r, const FinetuneLimits& limits);
  // Up to finetune_rounds rounds over `stages` of `c`, until a round improves none.
  void tune_stages(Config& c, const std::vector<int>& stages, const FinetuneLimits& limits) const;

  // The balanced starting GPU allocation (powers of two, doubled round-robin), if legal.
  std::vector<int> initial_allocation() const;
  // One start per listed microbatch size: operators split evenly, the fastest shape per stage,
  // settled; best first.
  std::vector<Plan> starting_plans(const std::vector<int>& alloc);
  // Walks from `cur` to its best unvisited neighbour (ahead()) until max_hops steps in a row
  // bring no improvement on `best`, which it updates.
  void climb(Plan cur, std::set<std::vector<int>>& visited, Plan& best);
  // Polishes the finalists (or `best`), fine-tunes them and fills r's configuration, cost and
  // candidates from the fastest.
  void conclude(Plan best, StageCountResult& r);

  const Model& m_;
  const Database& db_;
  const SearchOptions& o_;
  PerfModel pm_;
  const int S_, N_;
  long long budget_ = 0, evaluations_ = 0, configurations_ = 0;
  long long tune_work_ = 0;  // operator evaluations of the fine-tuning (finetune_finalists)
  int max_tp_ = 1;
  std::vector<Plan> finalists_;
  std::vector<int> mbs_;  // the listed microbatch sizes, ascending
  std::vector<std::uint8_t> rc_;
  std::map<int, std::vector<int>> constants_;
  std::unordered_map<std::pair<std::uint64_t, std::uint64_t>, Entry, KeyHash> cache_;
};

// The largest stage count worth searching for `o` and `m`.
int stage_count_limit(const SearchOptions& o, const Model& m);
// The results per stage count with the fastest that fits marked best.
SearchResult pick_best(std::vector<StageCountResult> results);

}  // namespace perseus::search::detail
