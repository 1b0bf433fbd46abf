#include "perseus/profile/plausibility.hpp"

#include <algorithm>
#include <vector>

namespace perseus::profile {

namespace {

bool plausible_power(double watts) {
  return watts >= kMinPowerW && watts <= kMaxPowerW;
}

// The unit mistake that would explain an average power 1000 times too small or too large.
std::string unit_hint(double power_w) {
  if (power_w < kMinPowerW) {
    return power_w * 1000.0 >= kMinPowerW ? "; time in milliseconds, or energy in kilojoules?" : "";
  }
  return power_w / 1000.0 <= kMaxPowerW ? "; energy in millijoules, or time in kiloseconds?" : "";
}

double max_power(const Profile& profile) {
  double highest = 0.0;
  for (const auto& [key, rows] : profile.all()) {
    for (const auto& m : rows) highest = std::max(highest, m.energy_j / m.time_s);
  }
  return highest;
}

}  // namespace

std::string power_problem(double energy_j, double time_s) {
  const double power = energy_j / time_s;
  if (plausible_power(power)) return "";
  return "average power " + number(energy_j) + " J / " + number(time_s) + " s = " + number(power) +
         " W is outside " + number(kMinPowerW) + ".." + number(kMaxPowerW) +
         " W for one GPU (time in seconds, energy in joules" + unit_hint(power) + ")";
}

std::string swapped_columns_hint(double energy_j, double time_s) {
  if (plausible_power(energy_j / time_s) || !plausible_power(time_s / energy_j)) return "";
  return " (time and energy columns swapped? as written the row draws " +
         number(energy_j / time_s) + " W, swapped " + number(time_s / energy_j) + " W)";
}

void check_plausible(const Profile& profile) {
  std::vector<const Measurement*> rows;  // in file order, so the first bad line is named
  for (const auto& [key, list] : profile.all()) {
    for (const auto& m : list) rows.push_back(&m);
  }
  std::sort(rows.begin(), rows.end(), [](auto* a, auto* b) { return a->line < b->line; });
  for (const Measurement* m : rows) {
    if (m->frequency_mhz < kMinClockMhz || m->frequency_mhz > kMaxClockMhz) {
      throw ImplausibleInput(located(
          profile.source(), m->line, "frequency",
          std::to_string(m->frequency_mhz) + " MHz is outside " + std::to_string(kMinClockMhz) +
              ".." + std::to_string(kMaxClockMhz) + " MHz (clocks are in MHz)"));
    }
    if (const std::string problem = power_problem(m->energy_j, m->time_s); !problem.empty()) {
      throw ImplausibleInput(located(profile.source(), m->line, "energy",
                                     problem + swapped_columns_hint(m->energy_j, m->time_s)));
    }
  }
}

void check_blocking_power(const Profile& profile, double watts, const std::string& what) {
  if (watts > 0.0 && watts < kMinBlockingPowerW) {
    throw ImplausibleInput(what + ": " + number(watts) +
                           " W is below what any GPU draws while it waits (in kilowatts? it is in "
                           "watts: " +
                           number(watts * 1000.0) + " W)");
  }
  double highest = max_power(profile);
  if (watts <= highest) return;
  std::string hint = watts / 1000.0 <= highest ? " (in milliwatts? it is in watts)" : "";
  throw ImplausibleInput(
      what + ": " + number(watts) + " W is above the highest instruction power of " +
      profile.source() + " (" + number(highest) +
      " W): a GPU waiting for its neighbours draws less than one computing" + hint);
}

}  // namespace perseus::profile
