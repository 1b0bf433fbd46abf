// The NVML types, functions and constants NvmlGpu uses, declared here instead of including nvml.h
// (no CUDA at build time). Internal to the NVML backend (nvml_gpu.cpp, nvml_restore.cpp).
#pragma once

namespace perseus::client::nvml {

// Values and signatures follow the NVML API reference.
using nvmlReturn_t = int;
using nvmlDevice_t = struct nvmlDevice_st*;
constexpr nvmlReturn_t kNvmlSuccess = 0;
constexpr nvmlReturn_t kNvmlErrorNotSupported = 3;  // NVML_ERROR_NOT_SUPPORTED

using InitFn = nvmlReturn_t (*)();
using ErrorStringFn = const char* (*)(nvmlReturn_t);
using HandleFn = nvmlReturn_t (*)(unsigned, nvmlDevice_t*);
using MemClocksFn = nvmlReturn_t (*)(nvmlDevice_t, unsigned*, unsigned*);
using GfxClocksFn = nvmlReturn_t (*)(nvmlDevice_t, unsigned, unsigned*, unsigned*);
using LockFn = nvmlReturn_t (*)(nvmlDevice_t, unsigned, unsigned);
using DeviceFn = nvmlReturn_t (*)(nvmlDevice_t);
using EnergyFn = nvmlReturn_t (*)(nvmlDevice_t, unsigned long long*);
using SetLimitFn = nvmlReturn_t (*)(nvmlDevice_t, unsigned);
using MilliwattsFn = nvmlReturn_t (*)(nvmlDevice_t, unsigned*);  // power reading and limits
using CountFn = nvmlReturn_t (*)(unsigned*);
using DeviceTextFn = nvmlReturn_t (*)(nvmlDevice_t, char*, unsigned);
using SystemTextFn = nvmlReturn_t (*)(char*, unsigned);
using ClockInfoFn = nvmlReturn_t (*)(nvmlDevice_t, int, unsigned*);
using ReasonsFn = nvmlReturn_t (*)(nvmlDevice_t, unsigned long long*);
constexpr int kNvmlClockSm = 1;  // nvmlClockType_t NVML_CLOCK_SM
// The clock event reasons (nvmlClocksEventReason*, formerly nvmlClocksThrottleReason*), by bit.
constexpr const char* kClockEventReasons[] = {"gpu_idle",
                                              "applications_clocks_setting",
                                              "sw_power_cap",
                                              "hw_slowdown",
                                              "sync_boost",
                                              "sw_thermal_slowdown",
                                              "hw_thermal_slowdown",
                                              "hw_power_brake_slowdown",
                                              "display_clock_setting"};
// The reasons that hold the clock below what it would otherwise run at: sw_power_cap,
// hw_slowdown, sw_thermal_slowdown, hw_thermal_slowdown, hw_power_brake_slowdown.
constexpr unsigned long long kClocksHeldDown = 0x4 | 0x8 | 0x20 | 0x40 | 0x80;
// Large enough for every string NVML returns (NVML_DEVICE_NAME_V2_BUFFER_SIZE,
// NVML_DEVICE_UUID_V2_BUFFER_SIZE and NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE are 96, 96, 80).
constexpr unsigned kNvmlTextSize = 96;

}  // namespace perseus::client::nvml
