#include "perseus/search/resharding.hpp"

namespace perseus::search {

namespace {

Spec spec3(int r, int d0, int d1, int d2) {
  Spec s;
  s.r = r;
  s.d[0] = d0;
  s.d[1] = d1;
  s.d[2] = d2;
  return s;
}

}  // namespace

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

}  // namespace perseus::search
