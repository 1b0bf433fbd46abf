// The SM clock a GPU ran one instruction at over a reporting window, as the client's sampler read
// it, and the rule for when that means the GPU did not reach the clock locked for it. Shared by
// the client (which warns), the wire protocol (which carries it) and the instruction profiler
// (which records it beside each profile row).
#pragma once

namespace perseus {

struct ClockObservation {
  int samples = 0;               // SM clock readings inside the instruction's spans
  double mean_mhz = 0.0;         // their mean
  double held_down_share = 0.0;  // of the readings, those the driver held down (power, heat)

  // True when the GPU did not reach `locked_mhz`: the mean over at least kMinSamples readings is
  // more than kShortfall below it, with the driver holding the clock down (power limit, heat) in
  // at least kHeldDownShare of them. Without that, a shortfall is the clock thread's lag: each
  // lock takes effect a little after its instruction begins, so an instruction that follows a
  // lower clock starts at it. False for locked_mhz <= 0 (no single lock).
  bool below(int locked_mhz) const {
    return locked_mhz > 0 && samples >= kMinSamples && mean_mhz < (1.0 - kShortfall) * locked_mhz &&
           held_down_share >= kHeldDownShare;
  }
  static constexpr int kMinSamples = 5;
  static constexpr double kShortfall = 0.02;
  static constexpr double kHeldDownShare = 0.5;
};

}  // namespace perseus
