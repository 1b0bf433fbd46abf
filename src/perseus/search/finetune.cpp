#include "perseus/search/finetune.hpp"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <optional>

namespace perseus::search {

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
// Long stages try at most this many starting operators per move kind (evenly spaced tunable
// operators): one stage costs O(kMaxStarts) evaluations of O(operators) each.
constexpr int kMaxStarts = 64;

// One assignment of tp, dp and algo to the stage's operators, with its evaluation.
struct Variant {
  std::vector<int> tp, dp, algo;
  std::vector<std::uint8_t> recompute;
  double time_ms = kInf, memory_mb = kInf;
  bool legal = false;
};

class StageTuner {
 public:
  StageTuner(const PerfModel& pm, const Config& c, int stage, const FinetuneLimits& limits)
      : pm_(pm), limits_(limits), mbs_(c.micro_batch_size) {
    view_ = pm.views(c)[static_cast<std::size_t>(stage)];
    n_ = view_.num_ops;
    std::vector<int> tunable;
    for (int i = 0; i < n_; ++i) {
      if (pm.model().traits(pm.model().op(view_.first_op + i)).tunable) tunable.push_back(i);
    }
    const std::size_t stride = (tunable.size() + kMaxStarts - 1) / kMaxStarts;
    for (std::size_t k = 0; k < tunable.size(); k += std::max<std::size_t>(stride, 1)) {
      starts_.push_back(tunable[k]);
    }
  }

  void evaluate(Variant& v) const {
    StageView view = view_;
    view.tp = v.tp.data();
    view.dp = v.dp.data();
    view.algo = v.algo.data();
    view.uniform = false;
    v.recompute.assign(static_cast<std::size_t>(n_), 0);
    const StageCost c = pm_.stage_auto(view, mbs_, limits_.recompute_limit_mb, v.recompute.data());
    if (limits_.work != nullptr) *limits_.work += n_;
    v.legal = c.legal();
    v.time_ms = v.legal ? c.time_ms : kInf;
    v.memory_mb = v.legal ? c.memory_mb : kInf;
  }

  bool fits(const Variant& v) const { return v.legal && v.memory_mb <= limits_.memory_limit_mb; }

  // The fastest dimension move within the memory limit (the least memory when none fits).
  std::optional<Variant> best_dimension(const Variant& current) const {
    std::optional<Variant> best;
    for (int start : starts_) {
      for (bool to_tp : {true, false}) {
        for (int step : {1, -1}) {
          Variant v = current;
          if (!shift(v, start, step, to_tp)) continue;
          evaluate(v);
          if (!v.legal) continue;
          if (!best || preferred(v, *best)) best = std::move(v);
        }
      }
    }
    return best;
  }

  // Each tunable operator in turn takes its fastest other algorithm variant that keeps the
  // stage within the memory limit (any variant while the stage is over the limit).
  void tune_algorithms(Variant& current) const {
    for (int i : starts_) {
      std::optional<Variant> best;
      const bool over = !fits(current);
      for (int a = 0; a < pm_.database().num_algos(); ++a) {
        if (a == current.algo[static_cast<std::size_t>(i)]) continue;
        Variant v = current;
        v.algo[static_cast<std::size_t>(i)] = a;
        evaluate(v);
        if (!v.legal || (!over && !(fits(v) && v.time_ms < current.time_ms))) continue;
        if (!best || v.time_ms < best->time_ms) best = std::move(v);
      }
      if (best) current = std::move(*best);
    }
  }

 private:
  bool listed_share(int dp) const {
    return dp > 0 && mbs_ % dp == 0 &&
           std::binary_search(limits_.listed.begin(), limits_.listed.end(), mbs_ / dp);
  }

  // Trades a factor of two from data to tensor parallelism (to_tp) or back on the longest run
  // of operators from `start` in direction `step` that allows it; false when none does.
  bool shift(Variant& v, int start, int step, bool to_tp) const {
    bool changed = false;
    for (int k = start; k >= 0 && k < n_; k += step) {
      int& tp = v.tp[static_cast<std::size_t>(k)];
      int& dp = v.dp[static_cast<std::size_t>(k)];
      const bool ok = to_tp ? tp * 2 <= limits_.max_tp && dp > 1 && listed_share(dp / 2)
                            : tp > 1 && listed_share(dp * 2);
      if (!ok) break;
      tp = to_tp ? tp * 2 : tp / 2;
      dp = to_tp ? dp / 2 : dp * 2;
      changed = true;
    }
    return changed;
  }

  // Within the memory limit and faster; over it, less memory.
  bool preferred(const Variant& a, const Variant& b) const {
    if (fits(a) != fits(b)) return fits(a);
    return fits(a) ? a.time_ms < b.time_ms : a.memory_mb < b.memory_mb;
  }

  const PerfModel& pm_;
  const FinetuneLimits& limits_;
  const int mbs_;
  StageView view_;
  int n_ = 0;
  std::vector<int> starts_;  // the tunable operators tried (all of them on short stages)
};

}  // namespace

bool finetune_stage(const PerfModel& pm, Config& c, int stage, const FinetuneLimits& limits) {
  StageConfig& s = c.stages[static_cast<std::size_t>(stage)];
  if (s.num_gpus == 1) return false;
  const StageTuner tuner(pm, c, stage, limits);
  Variant current{s.tp, s.dp, s.algo, {}, kInf, kInf, false};
  tuner.evaluate(current);
  const double initial_ms = current.time_ms;
  bool improved = false;
  if (auto moved = tuner.best_dimension(current);
      moved && tuner.fits(*moved) && moved->time_ms < current.time_ms) {
    current = std::move(*moved);
    improved = true;
  }
  Variant algorithms = current;
  tuner.tune_algorithms(algorithms);
  if (tuner.fits(algorithms) && algorithms.time_ms < current.time_ms) {
    current = std::move(algorithms);
    improved = true;
  }
  if (!improved || !(current.time_ms < initial_ms)) return false;
  s.tp = std::move(current.tp);
  s.dp = std::move(current.dp);
  s.algo = std::move(current.algo);
  s.recompute = std::move(current.recompute);
  return true;
}

bool finetune(const PerfModel& pm, Config& c, const FinetuneLimits& limits) {
  bool any = false;
  for (int i = 0; i < c.num_stages(); ++i) any = finetune_stage(pm, c, i, limits) || any;
  return any;
}

}  // namespace perseus::search
