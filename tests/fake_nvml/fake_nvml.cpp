// A fake libnvidia-ml.so.1 for tests: the NVML functions Perseus uses, loaded through the same
// dlopen path as the driver's library, modelling the measured behaviour of a real H100
// (shared/data/gpu/h100-nvml.md).
//
// It is configured by environment variables, read at each nvmlInit_v2 (nvmlInitWithFlags), never
// at a device call: a driver reads its environment when it is initialized, and a getenv on the
// client's threads would race with a setenv in the process's others (fake_device.hpp, Settings).
// Set a variable before the NvmlGpu (or Zeus's client) that should see it is made.
//
// Every call, reads included, is appended to the file named by $FAKE_NVML_LOG (if set), one line
// each, the call name first, so tests can check what was (and was not) asked of the driver.
// $FAKE_NVML_NO_POWER_LIMIT and $FAKE_NVML_NO_CLOCK_REASONS fail nvmlDeviceGetEnforcedPowerLimit
// and the clock event reasons with NVML_ERROR_NOT_SUPPORTED, as devices without power management
// and some virtual GPUs do; $FAKE_NVML_NO_ENERGY_COUNTER fails
// nvmlDeviceGetTotalEnergyConsumption so, as GPUs before Volta do.
// $FAKE_NVML_CLOCKS, "top:bottom:step" in MHz, gives the supported SM clocks at the highest memory
// clock (default: 1005, 1410, 1395, 1380, unsorted as NVML may list them).
// $FAKE_NVML_DENY_LOCK fails nvmlDeviceSetGpuLockedClocks with NVML_ERROR_NO_PERMISSION.
// $FAKE_NVML_NAMES names devices 0, 1, ... (comma-separated), as on a machine of mixed GPUs; the
// devices it does not name keep the default name.
// $FAKE_NVML_LOST_DEVICE is the index of one device every query of which fails with
// NVML_ERROR_GPU_IS_LOST, as one GPU of a machine that has fallen off the bus.
// While the file that $FAKE_NVML_HANG_FILE names exists, every device query and setting blocks
// (polling the file every 10 ms), as the driver of a GPU that has fallen off the bus can block its
// callers for good.
// Read when a session starts (the first nvmlInit_v2, or the first after the last nvmlShutdown):
//   FAKE_NVML_DEVICES     number of devices (default 1, at most 16), all alike
//   FAKE_NVML_LOST_AFTER_MS  from this many milliseconds into the session on, every device query
//                         and setting fails with NVML_ERROR_GPU_IS_LOST, as when a GPU has fallen
//                         off the bus (unset: never)
//   FAKE_NVML_MANUAL_CLOCK   (set: any value) the fake's time stands still but for what the test
//                         adds through fakeNvmlAdvanceClockNs(ns), which it finds with dlsym in
//                         the library the client loaded: the counter then reads what the test
//                         says has passed, however long the machine took (reads still block)
// Applied at every nvmlInit_v2 (a change while a session is open carries each counter on from its
// current value, so counters never go back):
//   FAKE_NVML_POWER_W     the constant power draw of every device in watts (default 300)
//   FAKE_NVML_REFRESH_MS  the energy counter is refreshed every this many milliseconds of steady
//                         time since the session started (default 100; 0: at every read); a read
//                         in between returns the value of the last refresh
//   FAKE_NVML_READ_MS     how long one nvmlDeviceGetTotalEnergyConsumption call blocks its caller
//                         (default 4; 0 allowed); it returns the counter as of the call's end
// The SM clock is the locked one while a lock is set, else the highest supported (1410 MHz). The
// clock event reasons are sw_power_cap while the power draw is at or above the power limit (the
// default limit is 400 W), else none; meanwhile the SM clock is at most $FAKE_NVML_CAPPED_MHZ
// (unset: no limit), as a GPU whose power limit holds it below a locked clock. Built
// with FAKE_NVML_BEFORE_R535 the library exports them only under their old name,
// nvmlDeviceGetCurrentClocksThrottleReasons, as drivers before R535 did; otherwise under both
// names, as later drivers do. Device N has the UUID GPU-0000000N-fa4e-4000-8000-00000000000N (N in
// hex), the name "Fake NVIDIA H100 80GB HBM3" and driver "580.159.04"; its counter starts at (N +
// 1) x 1000 J when a session starts. Device queries outside a session fail with
// NVML_ERROR_UNINITIALIZED, as the real library's do.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>

#include "fake_device.hpp"

using namespace fake_nvml;

namespace {

constexpr const char* kName = "Fake NVIDIA H100 80GB HBM3";
constexpr const char* kDriver = "580.159.04";

void uuid_of(unsigned index, char* out, size_t size) {
  std::snprintf(out, size, "GPU-%08x-fa4e-4000-8000-%012x", index, index);
}

int copy_string(const char* text, char* out, unsigned length) {
  if (out == nullptr) return kInvalidArgument;
  if (std::strlen(text) >= length) return kInsufficientSize;
  std::strcpy(out, text);
  return kSuccess;
}

// Copies `n` values into `out` if it has room; the NVML "count then fill" protocol.
int fill(const unsigned* values, unsigned n, unsigned* count, unsigned* out) {
  bool room = out != nullptr && *count >= n;
  if (room) std::memcpy(out, values, n * sizeof(unsigned));
  *count = n;
  return room ? kSuccess : kInsufficientSize;
}

}  // namespace

extern "C" {

struct nvmlDevice_st;
using nvmlDevice_t = nvmlDevice_st*;

// The fake's own control, not NVML's: moves a manual clock on (FAKE_NVML_MANUAL_CLOCK).
void fakeNvmlAdvanceClockNs(long long ns) {
  fake_nvml::advance_clock(ns);
}

int nvmlInit_v2() {
  const int rc = open_session();
  record("nvmlInit_v2");
  return rc;
}

// What the NVML Python bindings (nvidia-ml-py, under Zeus) call instead of nvmlInit_v2.
int nvmlInitWithFlags(unsigned flags) {
  const int rc = open_session();
  record("nvmlInitWithFlags %u", flags);
  return rc;
}

int nvmlShutdown() {
  record("nvmlShutdown");
  return close_session();
}

const char* nvmlErrorString(int rc) {
  record("nvmlErrorString %d", rc);
  switch (rc) {
    case kSuccess:
      return "Success";
    case kUninitialized:
      return "Uninitialized";
    case kInvalidArgument:
      return "Invalid Argument";
    case kNotSupported:
      return "Not Supported";
    case kNoPermission:
      return "Insufficient Permissions";
    case kNotFound:
      return "Not Found";
    case kInsufficientSize:
      return "Insufficient Size";
    case kGpuIsLost:
      return "GPU is lost";
    default:
      return "Unknown Error";
  }
}

int nvmlSystemGetDriverVersion(char* version, unsigned length) {
  record("nvmlSystemGetDriverVersion");
  if (!in_session()) return kUninitialized;
  return copy_string(kDriver, version, length);
}

int nvmlDeviceGetCount_v2(unsigned* count) {
  record("nvmlDeviceGetCount_v2");
  if (!in_session()) return kUninitialized;
  if (count == nullptr) return kInvalidArgument;
  *count = device_count();
  return kSuccess;
}

int nvmlDeviceGetHandleByIndex_v2(unsigned index, nvmlDevice_t* out) {
  record("nvmlDeviceGetHandleByIndex_v2 %u", index);
  if (!in_session()) return kUninitialized;
  if (index >= device_count() || out == nullptr) return kInvalidArgument;
  *out = reinterpret_cast<nvmlDevice_t>(device_at(index));
  return kSuccess;
}

int nvmlDeviceGetHandleByUUID(const char* uuid, nvmlDevice_t* out) {
  record("nvmlDeviceGetHandleByUUID %s", uuid != nullptr ? uuid : "(null)");
  if (!in_session()) return kUninitialized;
  if (uuid == nullptr || out == nullptr) return kInvalidArgument;
  char text[64];
  for (unsigned i = 0; i < device_count(); ++i) {
    uuid_of(i, text, sizeof(text));
    if (std::strcmp(uuid, text) == 0) {
      *out = reinterpret_cast<nvmlDevice_t>(device_at(i));
      return kSuccess;
    }
  }
  return kNotFound;
}

int nvmlDeviceGetIndex(nvmlDevice_t device, unsigned* index) {
  record("nvmlDeviceGetIndex");
  if (int rc = check_device(device); rc != kSuccess) return rc;
  if (index == nullptr) return kInvalidArgument;
  *index = index_of(device_of(device));
  return kSuccess;
}

int nvmlDeviceGetUUID(nvmlDevice_t device, char* uuid, unsigned length) {
  record("nvmlDeviceGetUUID");
  if (int rc = check_device(device); rc != kSuccess) return rc;
  char text[64];
  uuid_of(index_of(device_of(device)), text, sizeof(text));
  return copy_string(text, uuid, length);
}

// Device `index`'s name: its entry of $FAKE_NVML_NAMES, else kName.
std::string name_of(unsigned index) {
  std::string_view list = settings().names;
  for (unsigned i = 0; i < index && !list.empty(); ++i) {
    const std::size_t comma = list.find(',');
    list = comma == std::string_view::npos ? std::string_view{} : list.substr(comma + 1);
  }
  const std::string_view entry = list.substr(0, list.find(','));
  return entry.empty() ? kName : std::string(entry);
}

int nvmlDeviceGetName(nvmlDevice_t device, char* name, unsigned length) {
  record("nvmlDeviceGetName");
  if (int rc = check_device(device); rc != kSuccess) return rc;
  return copy_string(name_of(index_of(device_of(device))).c_str(), name, length);
}

int nvmlDeviceGetSupportedMemoryClocks(nvmlDevice_t device, unsigned* count, unsigned* out) {
  record("nvmlDeviceGetSupportedMemoryClocks");
  if (int rc = check_device(device); rc != kSuccess) return rc;
  static const unsigned clocks[] = {405, 1215};
  return fill(clocks, 2, count, out);
}

int nvmlDeviceGetSupportedGraphicsClocks(nvmlDevice_t device, unsigned memory, unsigned* count,
                                         unsigned* out) {
  record("nvmlDeviceGetSupportedGraphicsClocks %u", memory);
  if (int rc = check_device(device); rc != kSuccess) return rc;
  static const unsigned high[] = {1005, 1410, 1395, 1380};
  static const unsigned low[] = {600};
  if (memory != 1215) return fill(low, 1, count, out);
  if (const std::string& range = settings().clocks; !range.empty()) {
    unsigned top = 0, bottom = 0, step = 0, clocks[256];
    unsigned n = 0;
    if (std::sscanf(range.c_str(), "%u:%u:%u", &top, &bottom, &step) == 3 && step > 0 &&
        bottom <= top) {
      for (unsigned mhz = top; mhz >= bottom && n < 256; mhz -= step) clocks[n++] = mhz;
      return fill(clocks, n, count, out);
    }
  }
  return fill(high, 4, count, out);
}

int nvmlDeviceSetGpuLockedClocks(nvmlDevice_t device, unsigned min_mhz, unsigned max_mhz) {
  record("nvmlDeviceSetGpuLockedClocks %u %u", min_mhz, max_mhz);
  if (int rc = check_device(device); rc != kSuccess) return rc;
  if (settings().deny_lock) return kNoPermission;
  device_of(device)->locked_mhz = max_mhz;
  return kSuccess;
}

int nvmlDeviceResetGpuLockedClocks(nvmlDevice_t device) {
  record("nvmlDeviceResetGpuLockedClocks");
  if (int rc = check_device(device); rc != kSuccess) return rc;
  device_of(device)->locked_mhz = 0;
  return kSuccess;
}

// Memory clock locks (Zeus's client locks the highest memory clock): accepted and logged; the fake
// has one memory clock.
int nvmlDeviceSetMemoryLockedClocks(nvmlDevice_t device, unsigned min_mhz, unsigned max_mhz) {
  record("nvmlDeviceSetMemoryLockedClocks %u %u", min_mhz, max_mhz);
  return check_device(device);
}

int nvmlDeviceResetMemoryLockedClocks(nvmlDevice_t device) {
  record("nvmlDeviceResetMemoryLockedClocks");
  return check_device(device);
}

// Not a Grace Hopper superchip (no C2C link): Not Supported, as on an H100 SXM.
int nvmlDeviceGetC2cModeInfoV(nvmlDevice_t device, void* info) {
  record("nvmlDeviceGetC2cModeInfoV");
  if (int rc = check_device(device); rc != kSuccess) return rc;
  return info == nullptr ? kInvalidArgument : kNotSupported;
}

int nvmlDeviceGetClockInfo(nvmlDevice_t device, int type, unsigned* mhz) {
  record("nvmlDeviceGetClockInfo %d", type);
  if (int rc = check_device(device); rc != kSuccess) return rc;
  if (mhz == nullptr || type < 0 || type > 3) return kInvalidArgument;
  constexpr int kMemory = 2;
  const Device& d = *device_of(device);
  const unsigned locked = d.locked_mhz;
  *mhz = type == kMemory ? 1215 : (locked != 0 ? locked : 1410);
  if (const double capped = settings().capped_mhz;
      type != kMemory && capped > 0 && power_capped(d)) {
    *mhz = std::min(*mhz, static_cast<unsigned>(capped));
  }
  return kSuccess;
}

// The clock event reasons under either name (see the top of this file).
static int clock_event_reasons(const char* call, nvmlDevice_t device, unsigned long long* reasons) {
  record("%s", call);
  if (int rc = check_device(device); rc != kSuccess) return rc;
  if (reasons == nullptr) return kInvalidArgument;
  if (settings().no_clock_reasons) return kNotSupported;
  constexpr unsigned long long kSwPowerCap = 0x4;
  *reasons = power_capped(*device_of(device)) ? kSwPowerCap : 0;
  return kSuccess;
}

int nvmlDeviceGetCurrentClocksThrottleReasons(nvmlDevice_t device, unsigned long long* reasons) {
  return clock_event_reasons("nvmlDeviceGetCurrentClocksThrottleReasons", device, reasons);
}

#ifndef FAKE_NVML_BEFORE_R535
int nvmlDeviceGetCurrentClocksEventReasons(nvmlDevice_t device, unsigned long long* reasons) {
  return clock_event_reasons("nvmlDeviceGetCurrentClocksEventReasons", device, reasons);
}
#endif

int nvmlDeviceGetTotalEnergyConsumption(nvmlDevice_t device, unsigned long long* energy_mj_out) {
  record("nvmlDeviceGetTotalEnergyConsumption");
  if (int rc = check_device(device); rc != kSuccess) return rc;
  if (settings().no_energy_counter) return kNotSupported;
  if (energy_mj_out == nullptr) return kInvalidArgument;
  return read_energy_mj(device, energy_mj_out);
}

int nvmlDeviceGetPowerUsage(nvmlDevice_t device, unsigned* milliwatts) {
  record("nvmlDeviceGetPowerUsage");
  if (int rc = check_device(device); rc != kSuccess) return rc;
  if (milliwatts == nullptr) return kInvalidArgument;
  *milliwatts = power_mw();
  return kSuccess;
}

int nvmlDeviceSetPowerManagementLimit(nvmlDevice_t device, unsigned milliwatts) {
  record("nvmlDeviceSetPowerManagementLimit %u", milliwatts);
  if (int rc = check_device(device); rc != kSuccess) return rc;
  device_of(device)->power_limit_mw = milliwatts;
  return kSuccess;
}

int nvmlDeviceGetEnforcedPowerLimit(nvmlDevice_t device, unsigned* milliwatts) {
  record("nvmlDeviceGetEnforcedPowerLimit");
  if (int rc = check_device(device); rc != kSuccess) return rc;
  if (settings().no_power_limit) return kNotSupported;
  if (milliwatts == nullptr) return kInvalidArgument;
  *milliwatts = device_of(device)->power_limit_mw;
  return kSuccess;
}

// The limit set (what Zeus reads); the same as the enforced one on a GPU with one limit.
int nvmlDeviceGetPowerManagementLimit(nvmlDevice_t device, unsigned* milliwatts) {
  record("nvmlDeviceGetPowerManagementLimit");
  if (int rc = check_device(device); rc != kSuccess) return rc;
  if (milliwatts == nullptr) return kInvalidArgument;
  *milliwatts = device_of(device)->power_limit_mw;
  return kSuccess;
}

int nvmlDeviceGetPowerManagementDefaultLimit(nvmlDevice_t device, unsigned* milliwatts) {
  record("nvmlDeviceGetPowerManagementDefaultLimit");
  if (int rc = check_device(device); rc != kSuccess) return rc;
  if (milliwatts == nullptr) return kInvalidArgument;
  *milliwatts = kDefaultLimitMw;
  return kSuccess;
}

}  // extern "C"
