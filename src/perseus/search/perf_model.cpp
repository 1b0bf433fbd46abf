// The stage level of the performance model: a stage's time and memory from its operators'
// profiles (the reference's get_time_v3, get_memory_v3 and predict_stage_time/_memory).
#include "perseus/search/perf_model.hpp"

#include <algorithm>

#include "perseus/search/perf_model_internal.hpp"
#include "perseus/search/resharding.hpp"

namespace perseus::search {

using namespace perf_model_detail;

// ---- Activation terms of recomputation ----

namespace perf_model_detail {

// Fills s.freed / s.run / s.closes for the stage (prof resolved).
void prepare_activation_terms(const Model& m, const StageView& v, Scratch& s) {
  const int n = v.num_ops;
  const int* ops = m.ops().data() + v.first_op;
  double* freed = sized(s.freed, n);
  double* run = sized(s.run, n);
  std::uint8_t* closes = sized(s.closes, n);
  for (int i = 0; i + 1 < n; ++i) {
    const OpTraits& t = m.traits(ops[i]);
    const bool next_starts = m.traits(ops[i + 1]).layer_start;
    const double a = s.prof[static_cast<std::size_t>(i)]->activations_mb;
    if (t.activation_x1_5) {
      freed[i] = a * 1.5;
    } else if (t.activation_shared || next_starts) {
      freed[i] = 0.0;
    } else {
      freed[i] = a;
    }
    if (t.activation_shared) {
      run[i] = 0.0;
      closes[i] = 0;
    } else if (t.activation_x1_5) {
      run[i] = a * 1.5;
      closes[i] = 0;  // (the reference closes no run here)
    } else {
      run[i] = a;
      closes[i] = next_starts || i + 1 == n - 1 ? 1 : 0;
    }
  }
}

// Activation memory the recomputation frees (get_activations_v3). Adding 0.0 for the pairs that
// are not recomputed leaves the reference's sum unchanged.
double saved_activations(const Scratch& s, int n, const std::uint8_t* rc) {
  double saved = 0.0;
  for (int i = 0; i + 1 < n; ++i) {
    if ((rc[i] & rc[i + 1]) != 0) saved += s.freed[static_cast<std::size_t>(i)];
  }
  return saved;
}

// The largest run of recomputed activations re-materialized at once (get_peak_activations).
double peak_activations(const Scratch& s, int n, const std::uint8_t* rc) {
  double run = 0.0, peak = 0.0;
  for (int i = 0; i + 1 < n; ++i) {
    const auto u = static_cast<std::size_t>(i);
    if ((rc[i] & rc[i + 1]) != 0) {
      run += s.run[u];
      if (s.closes[u] != 0) {
        peak = std::max(peak, run);
        run = 0.0;
      }
    } else if (run > 0.0) {
      peak = std::max(peak, run);
      run = 0.0;
    }
  }
  return peak;
}

double recompute_us(const OpProfile* const* prof, int n, const std::uint8_t* rc) {
  double rec = 0.0;
  for (int i = 0; i < n; ++i) {
    if (rc[i] != 0) rec += prof[i]->fwd_us;
  }
  return rec;
}

}  // namespace perf_model_detail

PerfModel::PerfModel(const Model& model, const Database& db, PerfOptions options)
    : model_(&model), db_(&db), options_(options) {}

// Resolves the profiles of `v` into scratch().prof; returns the profile the stage's output size
// is read from, or nullptr (with c.illegal set) when one is missing or the batch does not divide.
const OpProfile* PerfModel::resolve_profiles(const StageView& v, int micro_batch,
                                             StageCost& c) const {
  const int n = v.num_ops;
  const Database& db = *db_;
  const int* ops = model_->ops().data() + v.first_op;
  const OpProfile** prof = sized(scratch().prof, n);
  auto missing = [&](int i, int mbs, int tp, int algo) -> const OpProfile* {
    c.illegal.problem = Problem::missing_profile;
    c.illegal.op = i;
    c.illegal.mbs = mbs;
    c.illegal.tp = tp;
    c.illegal.algo = algo;
    return nullptr;
  };
  auto not_divisible = [&](int i) -> const OpProfile* {
    c.illegal.problem = Problem::batch_not_divisible;
    c.illegal.op = i;
    c.illegal.mbs = micro_batch;
    return nullptr;
  };
  if (v.uniform) {
    const int dp = v.dp[0];
    if (dp <= 0 || micro_batch % dp != 0) return not_divisible(0);
    const int mbs = micro_batch / dp;
    const int mi = db.mbs_index(mbs), ti = db.tp_index(v.tp[0]), a = v.algo[0];
    for (int i = 0; i < n; ++i) {
      prof[i] = db.find(ops[i], mi, ti, a);
      if (prof[i] == nullptr) return missing(i, mbs, v.tp[0], a);
    }
  } else {
    for (int i = 0; i < n; ++i) {
      const int dp = v.dp[i];
      if (dp <= 0 || micro_batch % dp != 0) return not_divisible(i);
      const int mbs = micro_batch / dp;
      prof[i] = db.find(ops[i], db.mbs_index(mbs), db.tp_index(v.tp[i]), v.algo[i]);
      if (prof[i] == nullptr) return missing(i, mbs, v.tp[i], v.algo[i]);
    }
  }
  // The reference reads the stage output size at the first operator's tp.
  const OpProfile* out_prof = db.find(ops[n - 1], db.mbs_index(micro_batch / v.dp[n - 1]),
                                      db.tp_index(v.tp[0]), v.algo[n - 1]);
  if (out_prof == nullptr) return missing(n - 1, micro_batch / v.dp[n - 1], v.tp[0], v.algo[n - 1]);
  return out_prof;
}

// Adds the resharding collectives between differently sharded neighbours (milliseconds, forward
// and backward) to `sums`; false (with c.illegal set) when one has no primitive or no table.
bool PerfModel::reshard_sums(const StageView& v, const OpProfile* const* prof, StageCost& c,
                             Sums& sums) const {
  const Model& m = *model_;
  const int* ops = m.ops().data() + v.first_op;
  for (int i = 1; i < v.num_ops; ++i) {
    Spec prev, cur;
    if (!op_spec(m.traits(ops[i - 1]).spec, v.tp[i - 1], v.dp[i - 1], v.algo[i - 1], false, prev) ||
        !op_spec(m.traits(ops[i]).spec, v.tp[i], v.dp[i], v.algo[i], true, cur)) {
      continue;
    }
    Reshard r = reshard_between(prev, cur);
    if (!r.ok || ((r.fwd != Prim::none || r.bwd != Prim::none) && r.devices <= 1)) {
      c.illegal.problem = Problem::unsupported_reshard;
      c.illegal.op = i;
      return false;
    }
    const double size = prof[i]->input_mb;
    for (int pass = 0; pass < 2; ++pass) {
      Prim p = pass == 0 ? r.fwd : r.bwd;
      if (p == Prim::none || p == Prim::split) continue;
      auto ms = db_->collective_ms(to_collective(p), r.devices, size);
      if (!ms) {
        c.illegal.problem = Problem::missing_collective;
        c.illegal.op = i;
        c.illegal.tp = r.devices;
        c.illegal.collective = to_collective(p);
        c.illegal.size_mb = size;
        return false;
      }
      (pass == 0 ? sums.reshard_fwd_ms : sums.reshard_bwd_ms) += *ms;
    }
  }
  return true;
}

// Weights, kept activations and the allocator's reserve (get_memory_v3, get_reserved_memory).
void PerfModel::memory_sums(const StageView& v, const OpProfile* const* prof, Sums& sums) const {
  const int n = v.num_ops;
  const int* ops = model_->ops().data() + v.first_op;
  double weights = 0.0, activations = 0.0, res_fwd = 0.0, res_bwd = 0.0;
  for (int i = 0; i < n; ++i) {
    const OpTraits& t = model_->traits(ops[i]);
    if (t.activation_x1_5) {
      activations += prof[i]->activations_mb * 1.5;
    } else if (!t.activation_shared) {
      activations += prof[i]->activations_mb;
    }
    weights += prof[i]->weights_mb;
  }
  for (int i = 0; i + 1 < n; ++i) {  // the reference skips the last operator
    res_fwd = std::max(res_fwd, prof[i]->fwd_reserved_mb);
    res_bwd = std::max(res_bwd, prof[i]->bwd_reserved_mb);
  }
  sums.weights = weights;
  sums.activations = activations;
  sums.res_fwd = res_fwd;
  sums.res_bwd = res_bwd;
  sums.inputs = prof[0]->input_mb;
}

// Resolves the profiles of `v` into scratch().prof and sums what does not depend on
// recomputation (get_time_v3 and the memory terms); false (with c.illegal set) when the stage
// cannot run.
bool PerfModel::base_sums(const StageView& v, int micro_batch, StageCost& c, Sums& sums) const {
  const int n = v.num_ops;
  if (n <= 0) {
    c.illegal.problem = Problem::empty_stage;
    return false;
  }
  const OpProfile* out_prof = resolve_profiles(v, micro_batch, c);
  if (out_prof == nullptr) return false;
  const OpProfile* const* prof = scratch().prof.data();
  double fwd = 0.0, bwd = 0.0;  // locals: `sums` may alias the profiles for the compiler
  for (int i = 0; i < n; ++i) {
    fwd += prof[i]->fwd_us;
    bwd += prof[i]->bwd_us;
  }
  sums.fwd = fwd;
  sums.bwd = bwd;
  const bool trivial = v.uniform && v.tp[0] == 1 && v.dp[0] == 1;  // every spec is replicated
  if (model_->resharding() && !trivial && !reshard_sums(v, prof, c, sums)) return false;
  sums.in_comm = db_->p2p_us(prof[0]->input_mb, v.in_cross_node) + sums.reshard_fwd_ms * 1000;
  sums.out_comm = db_->p2p_us(out_prof->output_mb, v.out_cross_node) + sums.reshard_bwd_ms * 1000;
  memory_sums(v, prof, sums);
  return true;
}

// Completes `c` from the sums and the recomputation terms (predict_stage_time/_memory).
void PerfModel::finish(const Sums& s, const StageView& v, double rec, double saved, double peak,
                       StageCost& c) const {
  c.fwd_us = s.fwd;
  c.bwd_us = s.bwd;
  c.recompute_us = rec;
  c.in_comm_us = s.in_comm;
  c.out_comm_us = s.out_comm;
  c.reshard_fwd_ms = s.reshard_fwd_ms;
  c.reshard_bwd_ms = s.reshard_bwd_ms;
  c.time_ms = (s.fwd + s.bwd + s.in_comm + s.out_comm + rec) / 1000;
  const ModelDesc& d = model_->desc();
  c.reserved_mb = std::max(s.res_fwd + s.res_bwd, s.weights);
  c.gradients_mb = s.weights;
  c.optimizer_mb = s.weights * d.optimizer_ratio;
  c.weights_mb = s.weights + s.weights * d.main_params_ratio;
  c.activations_mb = (s.inputs + s.activations - saved) * v.num_stages_behind;
  c.peak_mb = s.inputs + s.activations - saved + peak;
  c.memory_mb =
      c.weights_mb + c.gradients_mb + c.optimizer_mb + c.activations_mb + c.peak_mb + c.reserved_mb;
}

namespace {

bool any_set(const std::uint8_t* rc, int n) {
  for (int i = 0; i < n; ++i) {
    if (rc[i] != 0) return true;
  }
  return false;
}

}  // namespace

StageCost PerfModel::stage(const StageView& v, int micro_batch) const {
  StageCost c;
  Sums sums;
  if (!base_sums(v, micro_batch, c, sums)) return c;
  const int n = v.num_ops;
  double rec = 0.0, saved = 0.0, peak = 0.0;
  if (any_set(v.recompute, n)) {
    Scratch& s = scratch();
    prepare_activation_terms(*model_, v, s);
    rec = recompute_us(s.prof.data(), n, v.recompute);
    saved = saved_activations(s, n, v.recompute);
    peak = peak_activations(s, n, v.recompute);
  }
  finish(sums, v, rec, saved, peak, c);
  return c;
}

}  // namespace perseus::search
