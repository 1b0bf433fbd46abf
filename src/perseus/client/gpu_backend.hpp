// The GPU interface the training-side client drives (architecture section 7): clocks, power limits,
// and the time and energy counters used to measure instructions and iterations. Implemented by
// the NVML backend (a real GPU, loaded at run time) and the simulated GPU (a profile).
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "perseus/measure/counter_series.hpp"
#include "perseus/util/error.hpp"

namespace perseus::client {

class EnergySampler;    // energy_sampler.hpp
struct SamplerOptions;  // energy_sampler.hpp

// The GPU has no energy counter (NVML: Not Supported, as on GPUs before Volta and some virtual
// GPUs). Unlike a read that failed, asking again cannot help: the sampler says so once and stops.
class NoEnergyCounter : public Error {
 public:
  using Error::Error;
};

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
  // One read of the energy counter, in joules (a running total; NVML's is in millijoules). On a
  // real GPU it blocks for milliseconds and changes only every ~100 ms: the client never calls it
  // on the training thread, only from the energy sampler. A value below the last one is taken as
  // a counter that started again (ThreadSampler), and a power no GPU draws is warned of. Throws
  // NoEnergyCounter when the GPU has none, anything else for a read that failed.
  virtual double total_energy_j() = 0;
  // The SM clock now and whether the driver holds it down (ClockReading; read-only and cheap on
  // NVML, ~10 us). Read by the default energy sampler beside each counter read, never on the
  // training thread. nullopt (the default): this backend cannot tell.
  virtual std::optional<measure::ClockReading> read_clock() { return std::nullopt; }
  // How the energy counter's changes trail and smooth the energy they report (CounterResponse;
  // the default: neither). NvmlGpu: kNvmlCounterResponse; SimGpu: its counter's CounterOptions.
  virtual measure::CounterResponse counter_response() const { return {}; }
  // Starts sampling the energy counter (perseus/client/energy_sampler.hpp). Default: a thread
  // that calls total_energy_j() back to back (at most every options.min_period_s), and
  // read_clock() after each read. Failed reads are retried and said through `on_error`; a GPU
  // without a counter is said once and no longer read.
  virtual std::unique_ptr<EnergySampler> start_energy_sampler(
      const SamplerOptions& options, std::function<void(const std::string&)> on_error);
  // Called by the client around each instruction, after the clock for it was applied. A real GPU
  // ignores them; the simulator advances its time and energy by the profiled instruction.
  virtual void instruction_begin(const std::string& /*name*/) {}
  virtual void instruction_end(const std::string& /*name*/) {}
  // True when clock changes must take effect before the next instruction starts (the simulator,
  // whose measurements would otherwise depend on thread timing); the client then applies each
  // change on the training thread, before the next instruction (FrequencyController).
  virtual bool synchronous_clocks() const { return false; }
  // True for a simulated GPU: the client says so when it registers (wire::RankInfo), so that the
  // server does not show a simulator's energies as a real GPU's.
  virtual bool simulated() const { return false; }
};

}  // namespace perseus::client
