// The GPU interface the training-side client drives (DESIGN section 7): clocks, power limits,
// and the time and energy counters used to measure instructions and iterations. Implemented by
// the NVML backend (a real GPU, loaded at run time) and the simulated GPU (a profile).
#pragma once

#include <string>
#include <vector>

namespace perseus::client {

class GpuBackend {
 public:
  virtual ~GpuBackend() = default;
  // Supported SM clocks in MHz, highest first.
  virtual std::vector<int> supported_clocks() const = 0;
  virtual void lock_clock(int mhz) = 0;
  virtual void reset_clock() = 0;
  virtual void set_power_limit(double watts) = 0;
  virtual void reset_power_limit() = 0;
  // Seconds on this backend's clock (wall clock for real GPUs, simulated time for the simulator).
  virtual double now_s() = 0;
  // Energy counter in joules (monotonic).
  virtual double total_energy_j() = 0;
  // Called by the client around each instruction, after the clock for it was applied. A real GPU
  // ignores them; the simulator advances its time and energy by the profiled instruction.
  virtual void instruction_begin(const std::string& /*name*/) {}
  virtual void instruction_end(const std::string& /*name*/) {}
  // True when clock changes must take effect before the next instruction starts (the simulator,
  // whose measurements would otherwise depend on thread timing); the client then waits for its
  // clock thread after each change.
  virtual bool synchronous_clocks() const { return false; }
};

}  // namespace perseus::client
