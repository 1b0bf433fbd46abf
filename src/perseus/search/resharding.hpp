// Resharding between neighbouring operators of a stage whose sharding differs (architecture
// section 8), with exact parity to the reference (Aceso, EuroSys'24: get_op_spec and
// get_reshard_primitives in aceso_cost_model.py). A spec says how a tensor is split over the
// tensor- and data-parallel GPUs: replicated (r), partial sums (v), or split along one of three
// dimensions (d). Between an operator's output spec and its successor's input spec the reference
// inserts at most one collective per pass; this header finds it. O(1) per operator pair.
#pragma once

#include <cstdint>

#include "perseus/search/database.hpp"
#include "perseus/search/model.hpp"

namespace perseus::search {

struct Spec {
  int r = 1, v = 1;
  int d[3] = {1, 1, 1};
};

// The spec of an operator's input (input = true) or output under (tp, dp, algo); false when the
// reference has none (None), which never needs resharding.
bool op_spec(SpecKind k, int tp, int dp, int algo, bool input, Spec& s);

// split needs no communication; the others are the collectives of the database's tables.
enum class Prim : std::uint8_t { none, split, all_gather, all_reduce, reduce_scatter, all_to_all };

struct Reshard {
  Prim fwd = Prim::none, bwd = Prim::none;
  int devices = 0;
  bool ok = true;  // false: the reference finds no primitive (or fails an assertion)
};

// The forward and backward primitives that turn `in` into `req`, over `devices` GPUs.
Reshard reshard_between(const Spec& in, const Spec& req);

// The database's collective for a primitive that communicates (not none or split).
Collective to_collective(Prim p);

}  // namespace perseus::search
