// What one GPU of any generation can plausibly report: the ranges that separate real values from
// unit mistakes (clocks in kHz, power in milliwatts, time in milliseconds). Shared by the profile
// checks and the control plane's wire types.
#pragma once

namespace perseus {

inline constexpr int kMinClockMhz = 50;
inline constexpr int kMaxClockMhz = 5000;
// Average power of one GPU running an instruction: an idle A40 draws ~20 W, a busy B200 ~1000 W.
inline constexpr double kMinPowerW = 5.0;
inline constexpr double kMaxPowerW = 2000.0;

}  // namespace perseus
