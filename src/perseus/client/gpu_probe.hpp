// `perseus gpu probe` (architecture section 9): what one GPU's NVML offers energy measurement,
// found with read-only calls (nothing on the GPU is changed): identity, supported SM clocks, how
// often the total-energy counter is refreshed and what one read of it costs, the power limits
// (enforced and default), and the power it draws and the SM clock it runs at while probed (idle
// unless something else runs on it), with the reasons the driver gives for that clock.
#pragma once

#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace perseus::client {

struct ProbeOptions {
  int device = 0;  // CUDA device index (CUDA_VISIBLE_DEVICES applies, as in NvmlGpu)
  std::string library = "libnvidia-ml.so.1";
  double duration_s = 1.5;  // how long to poll the energy counter, in (0, 600]
  // How long after `duration_s` the probe waits for the driver before giving up (> 0): NVML
  // blocks its callers for good on a GPU that has fallen off the bus, as nvidia-smi does there.
  double timeout_s = 10.0;
  // Called on the caller's thread while polling, with the fraction of `duration_s` done
  // (optional).
  std::function<void(double)> progress;
};

struct GpuProbe {
  std::string name, driver, uuid;
  int nvml_index = 0, cuda_index = 0;
  std::vector<int> clocks_mhz;  // supported SM clocks, highest first
  double duration_s = 0.0;      // how long the counter was polled
  int counter_reads = 0;        // energy-counter reads while polling
  // Why there were none: the device has no energy counter (NoEnergyCounter); the probe goes on
  // without it.
  std::string counter_error;
  int counter_changes = 0;  // reads that returned a new value
  // Seconds between consecutive observed counter changes (empty with fewer than two changes).
  struct Intervals {
    double mean_s = 0.0, min_s = 0.0, max_s = 0.0;
  };
  std::optional<Intervals> refresh;
  double read_mean_s = 0.0, read_max_s = 0.0;  // time one nvmlDeviceGetTotalEnergyConsumption took
  int power_readings = 0;
  double power_mean_w = 0.0;  // mean of the nvmlDeviceGetPowerUsage readings
  // The power limit enforced now and the default one; empty when the device does not report
  // them (no power management, some virtual GPUs), with NVML's error in power_limit_error.
  std::optional<double> power_limit_w, default_power_limit_w;
  std::string power_limit_error;
  // Energy between the first and the last observed change over the time between them (empty with
  // fewer than two changes).
  std::optional<double> counter_power_w;
  // The SM clock, read at every poll, and every clock event reason active at some poll
  // (NvmlGpu's names). A device that does not answer one of these queries leaves it empty, with
  // NVML's error in clock_error or reasons_error; the probe goes on without it.
  std::optional<double> sm_clock_mean_mhz;
  int sm_clock_min_mhz = 0, sm_clock_max_mhz = 0;
  std::optional<std::set<std::string>> clock_event_reasons;
  std::string clock_error, reasons_error;
};

// Opens the device read-only and polls its energy counter for `options.duration_s`. Throws
// perseus::Error (one line) for bad options, a missing library or device, a failed NVML call, or
// a driver that has not answered `timeout_s` after `duration_s`. The NVML calls run on a thread of
// their own; one that does not return is left behind, blocked, for the rest of the process.
GpuProbe probe_gpu(const ProbeOptions& options);

// {"name", "driver", "uuid", "nvml_index", "cuda_index", "sm_clocks_mhz": [...], "duration_s",
//  "counter_reads", "counter_changes", "refresh_period_s": {"mean", "min", "max"} or null,
//  "read_cost_s": {"mean", "max"} (null without reads), "counter_error" (null, or why the device
//  has no counter), "power_w": {"readings", "mean", "counter_slope" (or null)},
//  "power_limit_w": {"enforced", "default"} (each null when unknown),
//  "sm_clock_mhz": {"mean", "min", "max"} or null, "clock_event_reasons": [...] or null}
nlohmann::json to_json(const GpuProbe& probe);

}  // namespace perseus::client
