// The NVML GPU backend of the training-side client (DESIGN section 7): libnvidia-ml is loaded
// with dlopen at run time, so Perseus has no build-time dependency on CUDA and runs (without
// this backend) on machines that have no driver. One NvmlGpu controls one device: supported SM
// clocks, locking the SM clock, the total energy counter, and the power limit. The destructor
// restores the default clocks and power limit it changed. Every NVML failure becomes a
// perseus::Error naming the call and NVML's own message.
//
// Restore on signals: live NvmlGpu objects are kept in a process-wide registry. The first
// NvmlGpu installs handlers for SIGINT and SIGTERM (once per process; a signal whose disposition
// is "ignore" is left alone). The handler resets the locked clock and the power limit of every
// live NvmlGpu that changed them, then hands the signal on: to the previous handler if there
// was one, else it restores the default disposition and re-raises, so the process still ends.
// NVML functions are not documented as async-signal-safe; calling the two reset functions from
// the handler is a deliberate, best-effort trade-off (a GPU left at a low clock or power limit
// outlives the process and slows the next job). The handler allocates nothing, takes no locks and
// only reads atomics and pointers prepared outside it; in a forked child (a data-loader worker)
// it leaves the parent's devices alone. If the process goes on after a chained handler (Python
// turns SIGINT into KeyboardInterrupt, which a loop may catch), the device runs at its defaults
// until the client next asks for a different clock or limit.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "perseus/client/gpu_backend.hpp"

namespace perseus::client {

class NvmlGpu : public GpuBackend {
 public:
  // Loads `library` (default: the driver's libnvidia-ml.so.1), initializes NVML and opens device
  // `index`. Throws perseus::Error when the library or one of its symbols is missing, or NVML
  // fails.
  explicit NvmlGpu(int index = 0, const std::string& library = "libnvidia-ml.so.1");
  ~NvmlGpu() override;
  NvmlGpu(const NvmlGpu&) = delete;
  NvmlGpu& operator=(const NvmlGpu&) = delete;

  // Supported SM (graphics) clocks in MHz at the highest memory clock, highest first.
  std::vector<int> supported_clocks() const override;
  // Locks the SM clock to `mhz` (min = max = mhz).
  void lock_clock(int mhz) override;
  // Releases the lock (the driver's default clock behaviour).
  void reset_clock() override;
  // Energy consumed since the driver loaded, in joules.
  double total_energy_j() override;
  // Sets the power limit in watts; reset_power_limit restores the default limit.
  void set_power_limit(double watts) override;
  void reset_power_limit() override;
  // Steady-clock seconds (the host's monotonic clock).
  double now_s() override;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace perseus::client
