#include "perseus/search/perf_model.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "perseus/util/error.hpp"

namespace perseus::search {

namespace {

// ---- Sharding specs and resharding primitives (the reference's get_op_spec and
// get_reshard_primitives) ----

struct Spec {
  int r = 1, v = 1;
  int d[3] = {1, 1, 1};
};

Spec spec3(int r, int d0, int d1, int d2) {
  Spec s;
  s.r = r;
  s.d[0] = d0;
  s.d[1] = d1;
  s.d[2] = d2;
  return s;
}

// False when the reference has no spec (None), which never needs resharding.
bool op_spec(SpecKind k, int tp, int dp, int algo, bool input, Spec& s) {
  switch (k) {
    case SpecKind::none:
      return false;
    case SpecKind::embedding:
      if (input) return false;
      s = spec3(tp, 1, dp, 1);
      return true;
    case SpecKind::layernorm:
    case SpecKind::replicated:
      s = spec3(tp, 1, dp, 1);
      return true;
    case SpecKind::final_layernorm:
      s = input ? spec3(tp, 1, dp, 1) : spec3(tp, dp, 1, 1);
      return true;
    case SpecKind::column_linear:
      if (algo == 0) {
        s = input ? spec3(tp, 1, dp, 1) : spec3(1, 1, dp, tp);
      } else if (algo == 1) {
        s = input ? spec3(1, 1, dp, tp) : spec3(tp, 1, dp, 1);
      } else {
        return false;
      }
      return true;
    case SpecKind::attention_score:
      s = input ? spec3(1, 1, dp, tp) : spec3(1, dp, tp, 1);
      return true;
    case SpecKind::attention_probs:
      s = spec3(1, dp, tp, 1);
      return true;
    case SpecKind::attention_context:
      s = input ? spec3(1, dp, tp, 1) : spec3(1, 1, dp, tp);
      return true;
    case SpecKind::row_linear:
      if (algo == 0) {
        s = input ? spec3(1, 1, dp, tp) : spec3(tp, 1, dp, 1);
      } else if (algo == 1) {
        s = input ? spec3(tp, 1, dp, 1) : spec3(1, 1, dp, tp);
      } else {
        return false;
      }
      return true;
    case SpecKind::gelu:
      s = spec3(1, 1, dp, tp);
      return true;
    case SpecKind::post_process:
      if (!input) return false;
      s = spec3(tp, dp, 1, 1);
      return true;
    case SpecKind::resnet:
      s = spec3(tp, dp, 1, 1);
      return true;
  }
  return false;
}

enum class Prim : std::uint8_t { none, split, all_gather, all_reduce, reduce_scatter, all_to_all };

struct Reshard {
  Prim fwd = Prim::none, bwd = Prim::none;
  int devices = 0;
  bool ok = true;  // false: the reference finds no primitive (or fails an assertion)
};

Reshard reshard_between(const Spec& in, const Spec& req) {
  Reshard out;
  bool identical = in.r == req.r && in.v == req.v && in.d[0] == req.d[0] && in.d[1] == req.d[1] &&
                   in.d[2] == req.d[2];
  if (identical) return out;
  auto ratio = [&](int a, int b, Prim f, Prim g) {
    Reshard r;
    if (b <= 0 || a % b != 0) {
      r.ok = false;
      return r;
    }
    r.fwd = f;
    r.bwd = g;
    r.devices = a / b;
    return r;
  };
  if (in.r > req.r) {  // R -> dim: split
    for (int k = 0; k < 3; ++k) {
      if (in.d[k] < req.d[k]) return ratio(in.r, req.r, Prim::split, Prim::all_gather);
    }
  } else if (in.v > req.v) {
    if (in.r < req.r) return ratio(in.v, req.v, Prim::all_reduce, Prim::none);  // V -> R
    for (int k = 0; k < 3; ++k) {                                               // V -> dim
      if (in.d[k] < req.d[k]) return ratio(in.v, req.v, Prim::reduce_scatter, Prim::all_gather);
    }
  } else {
    for (int src = 0; src < 3; ++src) {
      if (in.d[src] <= req.d[src]) continue;
      if (in.r < req.r) {  // dim -> R: all-gather
        return ratio(in.d[src], req.d[src], Prim::all_gather, Prim::split);
      }
      for (int dst = 0; dst < 3; ++dst) {  // dim -> dim: all-to-all
        if (dst != src && in.d[dst] < req.d[dst]) {
          return ratio(in.d[src], req.d[src], Prim::all_to_all, Prim::all_to_all);
        }
      }
    }
  }
  out.ok = false;
  return out;
}

Collective to_collective(Prim p) {
  switch (p) {
    case Prim::all_gather:
      return Collective::all_gather;
    case Prim::reduce_scatter:
      return Collective::reduce_scatter;
    case Prim::all_to_all:
      return Collective::all_to_all;
    default:
      return Collective::all_reduce;
  }
}

// ---- Per-thread scratch ----

struct Group {
  int first = 0;
  double sum = 0.0;
  bool recomputed = false;
  std::vector<int> index;
  std::vector<double> size;
};

struct Scratch {
  std::vector<const OpProfile*> prof;
  // Per operator i (pair i, i+1 recomputed): what get_activations_v3 frees, what
  // get_peak_activations adds to the run, whether it closes the run.
  std::vector<double> freed, run;
  std::vector<std::uint8_t> closes;
  std::vector<int> group_of;  // by database operator
  std::vector<Group> groups;
  std::size_t num_groups = 0;
};

Scratch& scratch() {
  thread_local Scratch s;
  return s;
}

template <typename T>
T* sized(std::vector<T>& v, int n) {
  if (v.size() < static_cast<std::size_t>(n)) v.resize(static_cast<std::size_t>(n));
  return v.data();
}

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

}  // namespace

// The recomputation-independent sums of a stage.
struct PerfModel::Sums {
  double fwd = 0.0, bwd = 0.0, in_comm = 0.0, out_comm = 0.0;
  double reshard_fwd_ms = 0.0, reshard_bwd_ms = 0.0;
  double weights = 0.0, activations = 0.0, res_fwd = 0.0, res_bwd = 0.0, inputs = 0.0;
};

PerfModel::PerfModel(const Model& model, const Database& db, PerfOptions options)
    : model_(&model), db_(&db), options_(options) {}

// Resolves the profiles of `v` into scratch().prof and sums what does not depend on
// recomputation; false (with c.illegal set) when the stage cannot run.
bool PerfModel::base_sums(const StageView& v, int micro_batch, StageCost& c, Sums& sums) const {
  const int n = v.num_ops;
  if (n <= 0) {
    c.illegal.problem = Problem::empty_stage;
    return false;
  }
  const Model& m = *model_;
  const Database& db = *db_;
  const int* ops = m.ops().data() + v.first_op;
  Scratch& s = scratch();
  const OpProfile** prof = sized(s.prof, n);

  auto missing = [&](int i, int mbs, int tp, int algo) {
    c.illegal.problem = Problem::missing_profile;
    c.illegal.op = i;
    c.illegal.mbs = mbs;
    c.illegal.tp = tp;
    c.illegal.algo = algo;
    return false;
  };
  auto not_divisible = [&](int i) {
    c.illegal.problem = Problem::batch_not_divisible;
    c.illegal.op = i;
    c.illegal.mbs = micro_batch;
    return false;
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

  // ---- time (get_time_v3) ----
  double fwd = 0.0, bwd = 0.0;
  for (int i = 0; i < n; ++i) {
    fwd += prof[i]->fwd_us;
    bwd += prof[i]->bwd_us;
  }
  double fwd_reshard = 0.0, bwd_reshard = 0.0;
  const bool trivial = v.uniform && v.tp[0] == 1 && v.dp[0] == 1;  // every spec is replicated
  if (m.resharding() && !trivial) {
    for (int i = 1; i < n; ++i) {
      Spec prev, cur;
      if (!op_spec(m.traits(ops[i - 1]).spec, v.tp[i - 1], v.dp[i - 1], v.algo[i - 1], false,
                   prev) ||
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
        auto ms = db.collective_ms(to_collective(p), r.devices, size);
        if (!ms) {
          c.illegal.problem = Problem::missing_collective;
          c.illegal.op = i;
          c.illegal.tp = r.devices;
          c.illegal.collective = to_collective(p);
          c.illegal.size_mb = size;
          return false;
        }
        (pass == 0 ? fwd_reshard : bwd_reshard) += *ms;
      }
    }
  }
  sums.fwd = fwd;
  sums.bwd = bwd;
  sums.reshard_fwd_ms = fwd_reshard;
  sums.reshard_bwd_ms = bwd_reshard;
  sums.in_comm = db.p2p_us(prof[0]->input_mb, v.in_cross_node) + fwd_reshard * 1000;
  sums.out_comm = db.p2p_us(out_prof->output_mb, v.out_cross_node) + bwd_reshard * 1000;

  // ---- memory (get_memory_v3, get_reserved_memory) ----
  double weights = 0.0, activations = 0.0, res_fwd = 0.0, res_bwd = 0.0;
  for (int i = 0; i < n; ++i) {
    const OpTraits& t = m.traits(ops[i]);
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

double recompute_us(const OpProfile* const* prof, int n, const std::uint8_t* rc) {
  double rec = 0.0;
  for (int i = 0; i < n; ++i) {
    if (rc[i] != 0) rec += prof[i]->fwd_us;
  }
  return rec;
}

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

double PerfModel::choose_recompute(const StageView& view, int micro_batch, double memory_limit_mb,
                                   std::uint8_t* out) const {
  StageCost c = recompute_impl(view, micro_batch, memory_limit_mb, out);
  return c.legal() ? c.memory_mb : std::numeric_limits<double>::infinity();
}

StageCost PerfModel::stage_auto(const StageView& view, int micro_batch, double memory_limit_mb,
                                std::uint8_t* out) const {
  return recompute_impl(view, micro_batch, memory_limit_mb, out);
}

// check_recompute (its stop test uses the reference's incrementally tracked memory); returns the
// stage cost under the chosen flags.
StageCost PerfModel::recompute_impl(const StageView& view, int micro_batch, double memory_limit_mb,
                                    std::uint8_t* out) const {
  const int n = view.num_ops;
  std::fill(out, out + std::max(n, 0), std::uint8_t{0});
  StageCost base;
  Sums sums;
  if (!base_sums(view, micro_batch, base, sums)) return base;
  finish(sums, view, 0.0, 0.0, 0.0, base);
  double memory = base.memory_mb;
  if (memory - memory_limit_mb <= 0) return base;

  const Model& m = *model_;
  StageView v = view;
  v.recompute = out;
  const int* ops = m.ops().data() + v.first_op;
  Scratch& s = scratch();
  prepare_activation_terms(m, v, s);
  const OpProfile* const* prof = s.prof.data();
  const double copies = v.num_stages_behind + 1;
  // Operator groups by name, in order of first appearance.
  s.group_of.assign(static_cast<std::size_t>(db_->num_ops()), -1);
  s.num_groups = 0;
  for (int i = 0; i < n; ++i) {
    int& g = s.group_of[static_cast<std::size_t>(ops[i])];
    if (g < 0) {
      g = static_cast<int>(s.num_groups++);
      if (s.groups.size() < s.num_groups) s.groups.emplace_back();
      Group& fresh = s.groups[static_cast<std::size_t>(g)];
      fresh.first = i;
      fresh.sum = 0.0;
      fresh.recomputed = false;
      fresh.index.clear();
      fresh.size.clear();
    }
    Group& grp = s.groups[static_cast<std::size_t>(g)];
    const double size = prof[i]->activations_mb * copies;
    grp.index.push_back(i);
    grp.size.push_back(size);
    grp.sum += size;
  }

  double saved_before = 0.0;
  double peak_before = 0.0;  // nothing recomputed yet
  while (memory - memory_limit_mb > 0) {
    const double exceed = memory - memory_limit_mb;
    Group* best = nullptr;
    double best_size = 0.0;
    for (std::size_t g = 0; g < s.num_groups; ++g) {
      Group& grp = s.groups[g];
      if (!grp.recomputed && grp.sum > best_size &&
          !m.traits(ops[grp.first]).never_recompute_head) {
        best_size = grp.sum;
        best = &grp;
      }
    }
    if (best == nullptr) break;
    best->recomputed = true;
    const int next = best->index[0] + 1;
    if (next >= n) break;
    s.groups[static_cast<std::size_t>(s.group_of[static_cast<std::size_t>(ops[next])])].recomputed =
        true;
    std::size_t count = best->index.size();
    if (!(best_size < exceed)) {  // only as many as needed to cover the excess
      double freed = 0.0;
      count = 0;
      while (freed <= exceed && count < best->size.size()) freed += best->size[count++];
    }
    for (std::size_t k = 0; k < count; ++k) {
      const int i = best->index[k];
      out[i] = 1;
      if (i < n - 1) out[i + 1] = 1;
    }
    const double saved_now = saved_activations(s, n, out);
    memory -= (saved_now - saved_before) * copies;
    saved_before = saved_now;
    const double peak_now = peak_activations(s, n, out);
    memory += peak_now - peak_before;
    peak_before = peak_now;
  }
  StageCost c;
  finish(sums, v, recompute_us(prof, n, out), saved_before, peak_before, c);
  return c;
}

std::vector<StageView> PerfModel::views(const Config& c) const {
  std::vector<StageView> out;
  const int total = c.num_gpus();
  const int per_node = options_.gpus_per_node > 0 ? options_.gpus_per_node : total;
  int first = 0, gpus = 0;
  for (int i = 0; i < c.num_stages(); ++i) {
    const StageConfig& s = c.stages[static_cast<std::size_t>(i)];
    StageView v;
    v.first_op = first;
    v.num_ops = s.num_ops();
    v.tp = s.tp.data();
    v.dp = s.dp.data();
    v.algo = s.algo.data();
    v.recompute = s.recompute.data();
    v.num_stages_behind = c.num_stages() - 1 - i;
    v.in_cross_node = gpus % per_node == 0 && gpus > 0;
    gpus += s.num_gpus;
    v.out_cross_node = gpus % per_node == 0;
    first += s.num_ops();
    out.push_back(v);
  }
  return out;
}

std::string PerfModel::describe(const Illegal& ill, const StageView& v, int stage) const {
  std::string where = "stage " + std::to_string(stage);
  if (ill.op >= 0) {
    where +=
        " operator " + std::to_string(ill.op) + " (" + model_->op_name(v.first_op + ill.op) + ")";
  }
  char buf[256];
  switch (ill.problem) {
    case Problem::none:
      return "";
    case Problem::empty_stage:
      return where + ": no operators";
    case Problem::batch_not_divisible:
      std::snprintf(buf, sizeof buf, ": microbatch size %d is not divisible by dp %d", ill.mbs,
                    v.dp[ill.op]);
      return where + buf;
    case Problem::missing_profile:
      std::snprintf(buf, sizeof buf,
                    ": no profile for mbs %d, tp %d, algo %d in %s_mbs%d_tp%d_algo%d.csv", ill.mbs,
                    ill.tp, ill.algo, db_->prefix().c_str(), ill.mbs, ill.tp, ill.algo);
      return where + buf;
    case Problem::unsupported_reshard:
      return where + ": no resharding primitive from the previous operator's sharding";
    case Problem::missing_collective:
      std::snprintf(buf, sizeof buf, ": no %s time for %.0f MB on %d GPUs (prim_%s_%s_%dgpus.csv)",
                    collective_name(ill.collective), ill.size_mb, ill.tp, db_->prefix().c_str(),
                    collective_name(ill.collective), ill.tp);
      return where + buf;
  }
  return where;
}

void pipeline_stage_times(const double* stage_ms, int num_stages, int num_microbatches,
                          double* out) {
  double sum = 0.0;
  for (int i = 0; i < num_stages; ++i) sum += stage_ms[i];
  for (int i = 0; i < num_stages; ++i) out[i] = stage_ms[i] * (num_microbatches - 1) + sum;
}

PipelineCost PerfModel::evaluate(const Config& c) const {
  if (c.num_ops() != model_->num_ops()) {
    throw Error("configuration has " + std::to_string(c.num_ops()) + " operators but model " +
                model_->desc().name + " " + model_->desc().size + " with " +
                std::to_string(model_->desc().num_layers) + " layers has " +
                std::to_string(model_->num_ops()));
  }
  PipelineCost out;
  out.num_microbatches = c.num_microbatches();
  const auto vs = views(c);
  std::vector<double> times;
  for (std::size_t i = 0; i < vs.size(); ++i) {
    out.stages.push_back(stage(vs[i], c.micro_batch_size));
    const StageCost& s = out.stages.back();
    if (!s.legal() && out.legal) {
      out.legal = false;
      out.reason = describe(s.illegal, vs[i], static_cast<int>(i));
    }
    times.push_back(s.time_ms);
  }
  out.stage_time_ms.resize(times.size());
  pipeline_stage_times(times.data(), static_cast<int>(times.size()), out.num_microbatches,
                       out.stage_time_ms.data());
  for (std::size_t i = 0; i < times.size(); ++i) {
    if (out.stage_time_ms[i] > out.iteration_ms) {
      out.iteration_ms = out.stage_time_ms[i];
      out.bottleneck = static_cast<int>(i);
    }
  }
  if (out.legal) {
    for (std::size_t i = 0; i < out.stages.size(); ++i) {
      if (out.stages[i].memory_mb > options_.memory_limit_mb) {
        char buf[160];
        std::snprintf(buf, sizeof buf, "stage %zu needs %.2f MB, over the memory limit of %.2f MB",
                      i, out.stages[i].memory_mb, options_.memory_limit_mb);
        out.legal = false;
        out.reason = buf;
        break;
      }
    }
  }
  return out;
}

std::string stage_table_csv(const PipelineCost& cost, const char* line_end) {
  std::string out = "stage-index,time,memory(total),memory(normal),memory(reserved)";
  out += line_end;
  char buf[200];
  for (std::size_t i = 0; i < cost.stages.size(); ++i) {
    const StageCost& s = cost.stages[i];
    std::snprintf(buf, sizeof buf, "stage-%zu,%.2f,%.2f,%.2f,%.2f", i, cost.stage_time_ms[i],
                  s.memory_mb, s.normal_mb(), s.reserved_mb);
    out += buf;
    out += line_end;
  }
  return out;
}

}  // namespace perseus::search
