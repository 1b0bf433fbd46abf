#include "perseus/server/schedulers/sweep_stop.hpp"

#include <algorithm>

namespace perseus::server::schedulers {

SweepStop::SweepStop(std::size_t gpus, int patience, double rise_margin)
    : descents_(gpus), patience_(patience), rise_margin_(rise_margin) {}

void SweepStop::add(std::size_t gpu, int mhz, double energy_j, bool held_below) {
  Descent& d = descents_.at(gpu);
  if (!d.started || energy_j < d.lowest_j) {
    d = {true, energy_j, mhz, 0};
  } else if (energy_j <= d.lowest_j * (1.0 + rise_margin_)) {
    d.rises = 0;  // within the margin: no rise, and the clocks in a row start again
  } else if (!held_below) {
    ++d.rises;
  }
}

bool SweepStop::past_minimum() const {
  return std::all_of(descents_.begin(), descents_.end(),
                     [&](const Descent& d) { return d.rises >= patience_; });
}

std::vector<int> SweepStop::lowest_energy_clocks() const {
  std::vector<int> clocks;
  for (const Descent& d : descents_) clocks.push_back(d.lowest_mhz);
  return clocks;
}

std::string SweepStop::reason() const {
  if (!past_minimum()) return "at the last clock";
  const std::vector<int> clocks = lowest_energy_clocks();
  const auto [lo, hi] = std::minmax_element(clocks.begin(), clocks.end());
  return "past every GPU's energy minimum (at " +
         (*lo == *hi ? std::to_string(*lo) : std::to_string(*lo) + "-" + std::to_string(*hi)) +
         " MHz)";
}

}  // namespace perseus::server::schedulers
