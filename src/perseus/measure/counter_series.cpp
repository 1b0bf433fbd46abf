#include "perseus/measure/counter_series.hpp"

#include <algorithm>

namespace perseus::measure {

void CounterSeries::push(const CounterSample& sample) {
  samples_.push_back(sample);
  while (samples_.size() > capacity_) samples_.pop_front();
}

bool CounterSeries::add_read(double begin_s, double end_s, double energy_j, bool after_gap) {
  const double mid = 0.5 * (begin_s + end_s);
  ++reads_;
  const bool went_down = have_read_ && energy_j < last_value_j_;
  if (went_down) samples_.clear();
  // The first read only gives a value to compare with: it returns the refresh before it, up to a
  // period earlier, so its time is no change's time. Nor is the first read's after a gap: its
  // change may lie anywhere in the gap. The next change is timed by its reads again, and the
  // interval from the last change before the gap to it holds the energy spent across the gap.
  if (have_read_ && !went_down && !after_gap && energy_j != last_value_j_) {
    push({0.5 * (last_mid_s_ + mid), energy_j, 0.5 * (mid - last_mid_s_)});
  }
  have_read_ = true;
  last_mid_s_ = mid;
  last_value_j_ = energy_j;
  return !went_down;
}

void CounterSeries::add_exact(double t_s, double energy_j) {
  ++reads_;
  if (!samples_.empty() && t_s <= samples_.back().t_s) return;
  push({t_s, energy_j});
}

std::vector<CounterSample> CounterSeries::between(double from_s, double to_s) const {
  auto first = std::upper_bound(samples_.begin(), samples_.end(), from_s,
                                [](double t, const CounterSample& s) { return t < s.t_s; });
  if (first != samples_.begin()) --first;
  std::vector<CounterSample> out;
  for (auto it = first; it != samples_.end() && it->t_s <= to_s; ++it) out.push_back(*it);
  return out;
}

void CounterSeries::forget_before(double t_s) {
  while (samples_.size() > 1 && samples_[1].t_s < t_s) samples_.pop_front();
}

// ---- ReadBackoff ----

}  // namespace perseus::measure
