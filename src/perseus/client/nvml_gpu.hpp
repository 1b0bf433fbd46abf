// The NVML GPU backend of the training-side client (architecture section 7): libnvidia-ml is loaded
// with dlopen at run time, so Perseus has no build-time dependency on CUDA and runs (without
// this backend) on machines that have no driver. One NvmlGpu controls one device: supported SM
// clocks, locking the SM clock, the total energy counter, and the power limit. The destructor
// restores the default clocks and power limit it changed (nothing else). Every NVML failure
// becomes a perseus::Error naming the call and NVML's own message. Devices are named by CUDA
// device index, mapped to NVML through CUDA_VISIBLE_DEVICES the way CUDA maps them
// (cuda_to_nvml_index), or by the UUID CUDA reports for the device.
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
// it leaves the parent's devices alone. A restore that blocks in the driver (NVML on a GPU that has
// fallen off the bus blocks its callers for good) is given up after kSignalRestoreBoundS (an
// alarm; SIGALRM's action and pending alarm are put back after a restore that returns): the
// process then ends by its signal, as it would have without Perseus (a chained handler does not
// run). If the process goes on after a chained handler (Python
// turns SIGINT into KeyboardInterrupt, which a loop may catch), the device runs at its defaults
// until the client next asks for a different clock or limit.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "perseus/client/cuda_devices.hpp"
#include "perseus/client/gpu_backend.hpp"

namespace perseus::client {

// How NVML's energy counter trails and smooths the energy it reports, its changes timed by the
// refresh clock (refresh_clock.hpp): on H100 80GB HBM3s (four GPUs, driver 580.159.04,
// observe-only), each refresh reports the energy up to 10 ms before it, averaged over 20 ms
// around that time: of the (lag, window) pairs that report no energy spent after the refresh, the
// one whose least-squares model (the `fit` attribution: a power per instruction) fitted the
// counter intervals of 34 recorded windows of 1F1B stages best (bench/gpu/counter_lag.py;
// geometric mean of each window's mean squared residual over its best pair's: 1.14, against 1.26
// for the earlier 8 ms lag alone and 1.09 for the best pair of all, 10 ms and 30 ms, which would
// report energy spent after the refresh). Only measured on H100s.
inline constexpr measure::CounterResponse kNvmlCounterResponse{0.010, 0.020};

class NvmlGpu : public GpuBackend {
 public:
  // Loads `library` (default: the driver's libnvidia-ml.so.1), initializes NVML and opens CUDA
  // device `index` (CUDA_VISIBLE_DEVICES applies, see cuda_to_nvml_index), or, where `cuda_uuid`
  // is given (the UUID CUDA reports for that device), the NVML device of that UUID
  // (uuid_to_nvml_index). Throws perseus::Error when the library or one of its symbols is
  // missing, the device does not exist, or NVML fails.
  explicit NvmlGpu(int index = 0, const std::string& library = "libnvidia-ml.so.1",
                   const std::string& cuda_uuid = "");
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
  // kNvmlCounterResponse.
  measure::CounterResponse counter_response() const override { return kNvmlCounterResponse; }
  // sm_clock_mhz(), held down when a power-limit, thermal or hardware-slowdown reason is active.
  std::optional<measure::ClockReading> read_clock() override;

  // Read-only queries; none of them changes a setting.
  std::string name() const;            // e.g. "NVIDIA H100 80GB HBM3"
  std::string uuid() const;            // "GPU-" and 32 hex digits
  std::string driver_version() const;  // e.g. "580.159.04"
  int nvml_index() const;              // the NVML index of this device
  double power_usage_w() const;        // the driver's current power reading, in watts
  // The power limit the driver enforces now (the lowest of every limiter's), and the default
  // one, in watts. A GPU that draws its enforced limit runs below the clocks it is asked for.
  double power_limit_w() const;
  double default_power_limit_w() const;
  int sm_clock_mhz() const;  // the SM clock now, in MHz
  // Why the clocks are where they are now: the names of the active clock event reasons
  // (nvmlDeviceGetCurrentClocksEventReasons, or its pre-R535 name ...ThrottleReasons), lowest
  // bit first: gpu_idle, applications_clocks_setting, sw_power_cap (the power limit holds the
  // clock down), hw_slowdown, sync_boost, sw_thermal_slowdown, hw_thermal_slowdown,
  // hw_power_brake_slowdown, display_clock_setting; a bit NVML adds later is "bit_N". Empty: none.
  std::vector<std::string> clock_event_reasons() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace perseus::client
