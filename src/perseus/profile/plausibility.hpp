// Plausibility of a profile and a blocking power for one GPU: the checks that catch unit mistakes
// a format check cannot see (time in milliseconds, energy in kilojoules or millijoules, power in
// milliwatts, clocks in kHz). A profile row's average power (energy / time) must lie within
// [kMinPowerW, kMaxPowerW], a clock within [kMinClockMhz, kMaxClockMhz] (util/gpu_limits.hpp),
// and the blocking power (drawn while a GPU waits) must not exceed the profile's highest
// instruction power.
#pragma once

#include <string>

#include "perseus/profile/profile.hpp"
#include "perseus/util/error.hpp"
#include "perseus/util/gpu_limits.hpp"

namespace perseus::profile {

// Input that is well formed but physically implausible; the caller may let the user insist.
class ImplausibleInput : public Error {
 public:
  using Error::Error;
};

// Runs `check` (one of the checks below) unless `allowed` (the user insisted); its
// ImplausibleInput comes back as a perseus::Error ending in "; " + `insist`, how to insist
// ("--allow-implausible uses it anyway").
template <typename F>
void check_unless_allowed(bool allowed, const std::string& insist, F&& check) {
  if (allowed) return;
  try {
    check();
  } catch (const ImplausibleInput& e) {
    throw Error(std::string(e.what()) + "; " + insist);
  }
}

// "" when `energy_j` over `time_s` is a power one GPU draws; else what is wrong, with the likely
// unit mistake ("average power 1200 J / 0.01 s = 120000 W is outside ...; energy in
// millijoules ...?").
std::string power_problem(double energy_j, double time_s);
// " (time and energy columns swapped? ...)" when the row's power is not one a GPU draws but would
// be with time and energy swapped; else "". For errors whose symptom is something else (a row
// slower at its highest clock).
std::string swapped_columns_hint(double energy_j, double time_s);

// Throws ImplausibleInput naming the first implausible row (source:line, field), its value and
// the likely unit mistake. O(n log n) in the number of rows.
void check_plausible(const Profile& profile);

// Throws ImplausibleInput when `watts` is above the profile's highest instruction power, naming
// both (and milliwatts when `watts` / 1000 would fit), or above 0 and below kMinBlockingPowerW
// (kilowatts: no GPU idles below a watt). `what` names the value ("--blocking-power").
inline constexpr double kMinBlockingPowerW = 1.0;
void check_blocking_power(const Profile& profile, double watts, const std::string& what);

}  // namespace perseus::profile
