// A fake libnvidia-ml.so.1 for tests: the NVML functions the client uses, loaded through the
// same dlopen path as the real driver library. It records every call, one line each, in the
// file named by $FAKE_NVML_LOG (if set), simulates one device whose energy counter advances
// 1.5 J per query, and fails nvmlDeviceSetGpuLockedClocks with NVML_ERROR_NO_PERMISSION when
// $FAKE_NVML_DENY_LOCK is set.
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace {

struct Device {
  unsigned long long energy_mj = 1000000;
  unsigned power_limit_mw = 400000;
};
Device device;

void record(const char* format, unsigned a = 0, unsigned b = 0) {
  const char* path = std::getenv("FAKE_NVML_LOG");
  if (path == nullptr) return;
  std::FILE* log = std::fopen(path, "a");
  if (log == nullptr) return;
  std::fprintf(log, format, a, b);
  std::fputc('\n', log);
  std::fclose(log);
}

// Copies `n` values into `out` if it has room; the NVML "count then fill" protocol.
int fill(const unsigned* values, unsigned n, unsigned* count, unsigned* out) {
  bool room = out != nullptr && *count >= n;
  if (room) std::memcpy(out, values, n * sizeof(unsigned));
  *count = n;
  return room ? 0 : 7;  // NVML_SUCCESS or NVML_ERROR_INSUFFICIENT_SIZE
}

}  // namespace

extern "C" {

struct nvmlDevice_st;
using nvmlDevice_t = nvmlDevice_st*;

int nvmlInit_v2() {
  record("nvmlInit_v2");
  return 0;
}

int nvmlShutdown() {
  record("nvmlShutdown");
  return 0;
}

const char* nvmlErrorString(int rc) {
  return rc == 4 ? "Insufficient Permissions" : "Unknown Error";
}

int nvmlDeviceGetHandleByIndex_v2(unsigned index, nvmlDevice_t* out) {
  record("nvmlDeviceGetHandleByIndex_v2 %u", index);
  if (index != 0) return 2;  // NVML_ERROR_INVALID_ARGUMENT
  *out = reinterpret_cast<nvmlDevice_t>(&device);
  return 0;
}

int nvmlDeviceGetSupportedMemoryClocks(nvmlDevice_t, unsigned* count, unsigned* out) {
  static const unsigned clocks[] = {405, 1215};
  return fill(clocks, 2, count, out);
}

int nvmlDeviceGetSupportedGraphicsClocks(nvmlDevice_t, unsigned memory, unsigned* count,
                                         unsigned* out) {
  static const unsigned high[] = {1005, 1410, 1395, 1380};
  static const unsigned low[] = {600};
  return memory == 1215 ? fill(high, 4, count, out) : fill(low, 1, count, out);
}

int nvmlDeviceSetGpuLockedClocks(nvmlDevice_t, unsigned min_mhz, unsigned max_mhz) {
  record("nvmlDeviceSetGpuLockedClocks %u %u", min_mhz, max_mhz);
  return std::getenv("FAKE_NVML_DENY_LOCK") != nullptr ? 4 : 0;
}

int nvmlDeviceResetGpuLockedClocks(nvmlDevice_t) {
  record("nvmlDeviceResetGpuLockedClocks");
  return 0;
}

int nvmlDeviceGetTotalEnergyConsumption(nvmlDevice_t, unsigned long long* energy_mj) {
  device.energy_mj += 1500;
  *energy_mj = device.energy_mj;
  return 0;
}

int nvmlDeviceSetPowerManagementLimit(nvmlDevice_t, unsigned milliwatts) {
  record("nvmlDeviceSetPowerManagementLimit %u", milliwatts);
  device.power_limit_mw = milliwatts;
  return 0;
}

int nvmlDeviceGetPowerManagementDefaultLimit(nvmlDevice_t, unsigned* milliwatts) {
  *milliwatts = 400000;
  return 0;
}

}  // extern "C"
