// A tiny hand-made profile for the client tests: exact numbers that are easy to check by hand.
#pragma once

#include "perseus/profile/profile.hpp"

namespace perseus::test {

// Two stages; forward at 1000/800/600 MHz draws 200/150/100 W, backward 220/160/110 W; stage 1
// does 1.5x the work of stage 0.
inline profile::Profile small_profile() {
  profile::Profile p("small");
  for (int s = 0; s < 2; ++s) {
    double k = s == 0 ? 1.0 : 1.5;
    p.add(s, "forward", {1000, 0.010 * k, 2.0 * k});
    p.add(s, "forward", {800, 0.012 * k, 1.8 * k});
    p.add(s, "forward", {600, 0.016 * k, 1.6 * k});
    p.add(s, "backward", {1000, 0.020 * k, 4.4 * k});
    p.add(s, "backward", {800, 0.024 * k, 3.84 * k});
    p.add(s, "backward", {600, 0.032 * k, 3.52 * k});
  }
  return p;
}

}  // namespace perseus::test
