// Where the instruction profiler's clock sweep stops: each GPU's energy per iteration at each
// clock, highest clock first, against its lowest so far. The sweep is past a GPU's minimum once
// its energy has been more than `rise_margin` above that lowest for `patience` clocks in a row;
// it stops when every GPU is (profiler.cpp says why the margin is there).
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace perseus::server::schedulers {

class SweepStop {
 public:
  SweepStop() = default;
  SweepStop(std::size_t gpus, int patience, double rise_margin);

  // GPU `gpu`'s energy (J, its instructions' per iteration) at the next clock. A GPU that did not
  // reach the clock (`held_below`: its power limit holds its top clocks at one speed) counts no
  // rise: its energy there differs from the last clock's by noise only, and stopping on noise
  // would leave the profile without a clock it really ran at.
  void add(std::size_t gpu, int mhz, double energy_j, bool held_below);

  bool past_minimum() const;
  // Per GPU, the clock of its lowest energy so far.
  std::vector<int> lowest_energy_clocks() const;
  // Why the sweep ended, for the log: past every GPU's minimum (and where it was), or out of
  // clocks.
  std::string reason() const;

 private:
  // Per GPU: its lowest energy so far, at which clock, and the clocks in a row since that rose
  // more than rise_margin_ above it.
  struct Descent {
    bool started = false;
    double lowest_j = 0.0;
    int lowest_mhz = 0;
    int rises = 0;
  };
  std::vector<Descent> descents_;
  int patience_ = 1;
  double rise_margin_ = 0.0;
};

}  // namespace perseus::server::schedulers
