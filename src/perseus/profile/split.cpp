#include "perseus/profile/split.hpp"

#include <cmath>
#include <string>

#include "perseus/util/error.hpp"

namespace perseus::profile {

namespace {

void check(const Profile& profile, const SplitOptions& o) {
  if (o.virtual_stages < 1) {
    throw Error("--virtual-stages must be at least 1, got " + std::to_string(o.virtual_stages));
  }
  if (!(o.input_fraction > 0.0 && o.input_fraction < 1.0)) {
    throw Error("--input-fraction must be between 0 and 1 (exclusive), got " +
                std::to_string(o.input_fraction));
  }
  if (!o.split_backward) return;
  for (const auto& [key, rows] : profile.all()) {
    if (key.second == "backward_input" || key.second == "backward_weight") {
      throw Error(profile.source() + ": already has " + key.second +
                  " rows; it needs no --split-backward");
    }
  }
}

// A share of a measured row: its relative errors carry over.
Measurement scaled(Measurement m, double factor) {
  m.time_s *= factor;
  m.energy_j *= factor;
  return m;
}

}  // namespace

Profile split_profile(const Profile& profile, const SplitOptions& o) {
  check(profile, o);
  Profile out(profile.source());
  const double part = 1.0 / o.virtual_stages;
  for (const auto& [key, rows] : profile.all()) {
    const auto& [stage, instruction] = key;
    for (int k = 0; k < o.virtual_stages; ++k) {
      int v = stage * o.virtual_stages + k;
      for (const Measurement& m : rows) {
        out.add(v, instruction, scaled(m, part));
        if (!o.split_backward || instruction != "backward") continue;
        out.add(v, "backward_input", scaled(m, part * o.input_fraction));
        out.add(v, "backward_weight", scaled(m, part * (1.0 - o.input_fraction)));
      }
    }
  }
  out.validate();
  return out;
}

}  // namespace perseus::profile
