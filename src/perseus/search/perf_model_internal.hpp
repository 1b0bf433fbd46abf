// Internal to the performance model: what the stage cost (perf_model.cpp) and the recomputation
// choice (perf_model_recompute.cpp) share. Per-thread scratch, the activation-memory terms of a
// stage's recomputation (the reference's get_activations_v3 and get_peak_activations), and the
// stage sums that do not depend on recomputation.
#pragma once

#include <cstdint>
#include <vector>

#include "perseus/search/perf_model.hpp"

namespace perseus::search {

// Names that only the performance model's files use, apart from the search's own.
namespace perf_model_detail {

// ---- Per-thread scratch ----

// The operators of one name in a stage: check_recompute's unit.
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

// This thread's scratch.
inline Scratch& scratch() {
  thread_local Scratch s;
  return s;
}

template <typename T>
T* sized(std::vector<T>& v, int n) {
  if (v.size() < static_cast<std::size_t>(n)) v.resize(static_cast<std::size_t>(n));
  return v.data();
}

// ---- Activation terms of recomputation ----

// Fills s.freed / s.run / s.closes for the stage (s.prof resolved).
void prepare_activation_terms(const Model& m, const StageView& v, Scratch& s);

// Activation memory the recomputation flags `rc` free (get_activations_v3).
double saved_activations(const Scratch& s, int n, const std::uint8_t* rc);

// The largest run of recomputed activations re-materialized at once (get_peak_activations).
double peak_activations(const Scratch& s, int n, const std::uint8_t* rc);

// Forward time of the recomputed operators (microseconds).
double recompute_us(const OpProfile* const* prof, int n, const std::uint8_t* rc);

}  // namespace perf_model_detail

// ---- Stage sums ----

// The recomputation-independent sums of a stage.
struct PerfModel::Sums {
  double fwd = 0.0, bwd = 0.0, in_comm = 0.0, out_comm = 0.0;
  double reshard_fwd_ms = 0.0, reshard_bwd_ms = 0.0;
  double weights = 0.0, activations = 0.0, res_fwd = 0.0, res_bwd = 0.0, inputs = 0.0;
};

}  // namespace perseus::search
