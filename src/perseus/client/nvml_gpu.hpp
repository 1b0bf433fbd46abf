// The NVML GPU backend of the training-side client (DESIGN section 7): libnvidia-ml is loaded
// with dlopen at run time, so Perseus has no build-time dependency on CUDA and runs (without
// this backend) on machines that have no driver. One NvmlGpu controls one device: supported SM
// clocks, locking the SM clock, the total energy counter, and the power limit. The destructor
// restores the default clocks and power limit it changed. Every NVML failure becomes a
// perseus::Error naming the call and NVML's own message.
#pragma once

#include <memory>
#include <string>
#include <vector>

namespace perseus::client {

class NvmlGpu {
 public:
  // Loads `library` (default: the driver's libnvidia-ml.so.1), initializes NVML and opens device
  // `index`. Throws perseus::Error when the library or one of its symbols is missing, or NVML
  // fails.
  explicit NvmlGpu(int index = 0, const std::string& library = "libnvidia-ml.so.1");
  ~NvmlGpu();
  NvmlGpu(const NvmlGpu&) = delete;
  NvmlGpu& operator=(const NvmlGpu&) = delete;

  // Supported SM (graphics) clocks in MHz at the highest memory clock, highest first.
  std::vector<int> supported_clocks() const;
  // Locks the SM clock to `mhz` (min = max = mhz).
  void lock_clock(int mhz);
  // Releases the lock (the driver's default clock behaviour).
  void reset_clock();
  // Energy consumed since the driver loaded, in joules.
  double total_energy_j() const;
  // Sets the power limit in watts; reset_power_limit restores the default limit.
  void set_power_limit(double watts);
  void reset_power_limit();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace perseus::client
