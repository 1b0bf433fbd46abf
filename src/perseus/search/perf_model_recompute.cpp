// The reference's check_recompute: which operators of a stage to recompute so that it fits the
// memory limit, greedily by operator group (the group freeing the most activation memory first).
#include <algorithm>
#include <limits>

#include "perseus/search/perf_model_internal.hpp"

namespace perseus::search {

using namespace perf_model_detail;

double PerfModel::choose_recompute(const StageView& view, int micro_batch, double memory_limit_mb,
                                   std::uint8_t* out) const {
  StageCost c = recompute_impl(view, micro_batch, memory_limit_mb, out);
  return c.legal() ? c.memory_mb : std::numeric_limits<double>::infinity();
}

StageCost PerfModel::stage_auto(const StageView& view, int micro_batch, double memory_limit_mb,
                                std::uint8_t* out) const {
  return recompute_impl(view, micro_batch, memory_limit_mb, out);
}

namespace {

// Groups the stage's operators by name, in order of first appearance, with each operator's
// activation memory over the `copies` microbatches in flight (into s.groups / s.group_of).
void group_operators(const int* ops, const OpProfile* const* prof, int n, double copies,
                     int num_db_ops, Scratch& s) {
  s.group_of.assign(static_cast<std::size_t>(num_db_ops), -1);
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
}

// The group not yet recomputed that frees the most activation memory and whose head may be
// recomputed; nullptr when none is left. The first of equal groups wins.
Group* largest_group(const Model& m, const int* ops, Scratch& s) {
  Group* best = nullptr;
  double best_size = 0.0;
  for (std::size_t g = 0; g < s.num_groups; ++g) {
    Group& grp = s.groups[g];
    if (!grp.recomputed && grp.sum > best_size && !m.traits(ops[grp.first]).never_recompute_head) {
      best_size = grp.sum;
      best = &grp;
    }
  }
  return best;
}

// Sets the flags of `best`'s operators, each with its successor: all of them, or when the group
// frees at least `exceed`, only as many as cover it.
void mark_recomputed(const Group& best, double exceed, int n, std::uint8_t* out) {
  std::size_t count = best.index.size();
  if (!(best.sum < exceed)) {
    double freed = 0.0;
    count = 0;
    while (freed <= exceed && count < best.size.size()) freed += best.size[count++];
  }
  for (std::size_t k = 0; k < count; ++k) {
    const int i = best.index[k];
    out[i] = 1;
    if (i < n - 1) out[i + 1] = 1;
  }
}

}  // namespace

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
  group_operators(ops, prof, n, copies, db_->num_ops(), s);
  double saved_before = 0.0;
  double peak_before = 0.0;  // nothing recomputed yet
  while (memory - memory_limit_mb > 0) {
    Group* best = largest_group(m, ops, s);
    if (best == nullptr) break;
    best->recomputed = true;
    const int next = best->index[0] + 1;
    if (next >= n) break;
    s.groups[static_cast<std::size_t>(s.group_of[static_cast<std::size_t>(ops[next])])].recomputed =
        true;
    mark_recomputed(*best, memory - memory_limit_mb, n, out);
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

}  // namespace perseus::search
