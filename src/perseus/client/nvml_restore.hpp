// Restoring GPUs on SIGINT and SIGTERM (see nvml_gpu.hpp, "Restore on signals"): a process-wide
// registry of the live NvmlGpu objects' restore records and the signal handler that resets their
// locked clocks and power limits. Internal to the NVML backend.
#pragma once

#include <sys/types.h>

#include <atomic>

#include "perseus/client/nvml_api.hpp"

namespace perseus::client::nvml {

// What the signal handler needs to restore one device: prepared outside the handler, read there
// through atomics only.
struct RestoreRecord {
  DeviceFn reset_locked_clocks = nullptr;
  SetLimitFn set_power_limit = nullptr;
  nvmlDevice_t device = nullptr;
  pid_t owner = 0;  // the process that opened the device (forked children leave it alone)
  std::atomic<bool> clock_locked{false};
  std::atomic<bool> limit_changed{false};
  std::atomic<unsigned> default_limit_mw{0};  // 0: not known yet
};

// The most the signal handler waits for the driver to restore the devices (an alarm, in seconds):
// past it the process ends by its signal as it would have without Perseus.
inline constexpr unsigned kSignalRestoreBoundS = 2;

// Adds a live device to the registry (the first call installs the signal handlers), and removes
// it. With more live devices than the registry's 64 slots, the extra ones are restored on normal
// exit only.
void register_live(RestoreRecord* record);
void unregister_live(RestoreRecord* record);

}  // namespace perseus::client::nvml
