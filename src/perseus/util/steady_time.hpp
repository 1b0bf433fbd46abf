// Seconds given as a number (timeouts, deadlines, waits, back-off delays) as a duration of the
// steady clock that the waits and deadlines are kept on.
#pragma once

#include <chrono>

namespace perseus {

inline std::chrono::steady_clock::duration steady_duration(double seconds) {
  return std::chrono::duration_cast<std::chrono::steady_clock::duration>(
      std::chrono::duration<double>(seconds));
}

}  // namespace perseus
