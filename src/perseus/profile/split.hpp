// Deriving the profile of a finer pipeline from a measured or synthetic one, for schedules that
// need rows the profile does not have (docs/formats.md, "Splitting a profile"):
//   - virtual stages: stage s becomes V consecutive stages s*V .. s*V+V-1 of equal work, each
//     taking 1/V of the time and energy at every clock (the layers of a stage are cut evenly;
//     power is unchanged);
//   - split backward: each backward row gains a backward_input row with `input_fraction` of its
//     time and energy and a backward_weight row with the rest (same power). The zero-bubble paper
//     (Qi et al., ICLR 2024) measures the two parts as about equal, hence the default 0.5.
// Rows that exist already are kept as they are; the backward rows stay (DualPipeV runs some
// backwards whole).
#pragma once

#include "perseus/profile/profile.hpp"

namespace perseus::profile {

struct SplitOptions {
  int virtual_stages = 1;       // V >= 1
  bool split_backward = false;  // add backward_input / backward_weight rows
  double input_fraction = 0.5;  // share of a backward that is the input-gradient part, (0, 1)
};

// Throws perseus::Error naming the option when V < 1 or the fraction is not in (0, 1), and when
// the profile already has backward_input or backward_weight rows and split_backward is asked.
Profile split_profile(const Profile& profile, const SplitOptions& options);

}  // namespace perseus::profile
