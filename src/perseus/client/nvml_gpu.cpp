#include "perseus/client/nvml_gpu.hpp"

#include <dlfcn.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <functional>
#include <iterator>
#include <mutex>

#include "perseus/util/error.hpp"

namespace perseus::client {

namespace {

// The few NVML types and functions used, declared here instead of including nvml.h (no CUDA
// at build time). Values and signatures follow the NVML API reference.
using nvmlReturn_t = int;
using nvmlDevice_t = struct nvmlDevice_st*;
constexpr nvmlReturn_t kNvmlSuccess = 0;

using InitFn = nvmlReturn_t (*)();
using ErrorStringFn = const char* (*)(nvmlReturn_t);
using HandleFn = nvmlReturn_t (*)(unsigned, nvmlDevice_t*);
using MemClocksFn = nvmlReturn_t (*)(nvmlDevice_t, unsigned*, unsigned*);
using GfxClocksFn = nvmlReturn_t (*)(nvmlDevice_t, unsigned, unsigned*, unsigned*);
using LockFn = nvmlReturn_t (*)(nvmlDevice_t, unsigned, unsigned);
using DeviceFn = nvmlReturn_t (*)(nvmlDevice_t);
using EnergyFn = nvmlReturn_t (*)(nvmlDevice_t, unsigned long long*);
using SetLimitFn = nvmlReturn_t (*)(nvmlDevice_t, unsigned);
using GetLimitFn = nvmlReturn_t (*)(nvmlDevice_t, unsigned*);
using PowerUsageFn = nvmlReturn_t (*)(nvmlDevice_t, unsigned*);
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
// Large enough for every string NVML returns (NVML_DEVICE_NAME_V2_BUFFER_SIZE,
// NVML_DEVICE_UUID_V2_BUFFER_SIZE and NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE are 96, 96, 80).
constexpr unsigned kNvmlTextSize = 96;

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

// Live devices of this process (a fixed array: the handler must not allocate or lock).
constexpr int kMaxLiveGpus = 64;
std::atomic<RestoreRecord*> live_gpus[kMaxLiveGpus];
constexpr int kSignals[] = {SIGINT, SIGTERM};
struct sigaction previous_actions[2];
std::once_flag handlers_installed;

void restore_all() {
  for (auto& slot : live_gpus) {
    RestoreRecord* r = slot.load();
    // A forked child (e.g. a data-loader worker) inherits the registry; the device is its
    // parent's to restore.
    if (r == nullptr || r->owner != getpid()) continue;
    if (r->clock_locked.exchange(false)) r->reset_locked_clocks(r->device);
    if (r->limit_changed.exchange(false)) {
      unsigned milliwatts = r->default_limit_mw.load();
      if (milliwatts != 0) r->set_power_limit(r->device, milliwatts);
    }
  }
}

extern "C" void restore_on_signal(int sig, siginfo_t* info, void* context) {
  const int saved_errno = errno;
  restore_all();
  const struct sigaction& previous = previous_actions[sig == SIGINT ? 0 : 1];
  if ((previous.sa_flags & SA_SIGINFO) != 0) {
    if (previous.sa_sigaction != nullptr) previous.sa_sigaction(sig, info, context);
  } else if (previous.sa_handler == SIG_DFL) {
    // Default disposition: end the process the way the signal would have. The signal is blocked
    // while this handler runs, so it is delivered again when the handler returns.
    struct sigaction dfl {};
    dfl.sa_handler = SIG_DFL;
    sigemptyset(&dfl.sa_mask);
    sigaction(sig, &dfl, nullptr);
    raise(sig);
  } else if (previous.sa_handler != SIG_IGN) {
    previous.sa_handler(sig);
  }
  errno = saved_errno;
}

void install_handlers() {
  for (int i = 0; i < 2; ++i) {
    const int sig = kSignals[i];
    struct sigaction old {};
    if (sigaction(sig, nullptr, &old) != 0) continue;
    // A signal the process ignores stays ignored: installing a handler would make it fatal.
    if ((old.sa_flags & SA_SIGINFO) == 0 && old.sa_handler == SIG_IGN) continue;
    previous_actions[i] = old;
    struct sigaction action {};
    action.sa_sigaction = restore_on_signal;
    action.sa_flags = SA_SIGINFO | SA_RESTART;
    sigemptyset(&action.sa_mask);
    sigaction(sig, &action, nullptr);
  }
}

void register_live(RestoreRecord* record) {
  std::call_once(handlers_installed, install_handlers);
  for (auto& slot : live_gpus) {
    RestoreRecord* expected = nullptr;
    if (slot.compare_exchange_strong(expected, record)) return;
  }
  // More live devices than slots: this one is still restored on normal exit.
}

void unregister_live(RestoreRecord* record) {
  for (auto& slot : live_gpus) {
    RestoreRecord* expected = record;
    if (slot.compare_exchange_strong(expected, nullptr)) return;
  }
}

}  // namespace

struct NvmlGpu::Impl {
  std::string library;
  void* handle = nullptr;
  InitFn init = nullptr, shutdown = nullptr;
  ErrorStringFn error_string = nullptr;
  HandleFn device_by_index = nullptr;
  MemClocksFn memory_clocks = nullptr;
  GfxClocksFn graphics_clocks = nullptr;
  LockFn lock_clocks = nullptr;
  DeviceFn reset_locked_clocks = nullptr;
  EnergyFn total_energy = nullptr;
  SetLimitFn set_power_limit = nullptr;
  GetLimitFn default_power_limit = nullptr;
  PowerUsageFn power_usage = nullptr;
  CountFn device_count = nullptr;
  DeviceTextFn device_name = nullptr, device_uuid = nullptr;
  SystemTextFn driver_version = nullptr;
  ClockInfoFn clock_info = nullptr;
  ReasonsFn clock_event_reasons = nullptr;
  const char* clock_event_reasons_call = nullptr;  // the name it was found under
  nvmlDevice_t device = nullptr;
  int nvml_index = 0;
  RestoreRecord restore;  // also what this process changed (clock_locked, limit_changed)

  template <typename Fn>
  void resolve(Fn& fn, const char* name) {
    fn = reinterpret_cast<Fn>(dlsym(handle, name));
    if (fn == nullptr) throw Error(library + ": NVML symbol " + name + " not found");
  }

  void check(nvmlReturn_t rc, const char* call) const {
    if (rc == kNvmlSuccess) return;
    const char* message = error_string != nullptr ? error_string(rc) : nullptr;
    throw Error(std::string("NVML ") + call +
                " failed: " + (message != nullptr ? message : "error " + std::to_string(rc)));
  }

  void load() {
    handle = dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (handle == nullptr) {
      const char* why = dlerror();
      throw Error("cannot load NVML (" + library + "): " + (why != nullptr ? why : "unknown"));
    }
    resolve(init, "nvmlInit_v2");
    resolve(shutdown, "nvmlShutdown");
    resolve(error_string, "nvmlErrorString");
    resolve(device_by_index, "nvmlDeviceGetHandleByIndex_v2");
    resolve(memory_clocks, "nvmlDeviceGetSupportedMemoryClocks");
    resolve(graphics_clocks, "nvmlDeviceGetSupportedGraphicsClocks");
    resolve(lock_clocks, "nvmlDeviceSetGpuLockedClocks");
    resolve(reset_locked_clocks, "nvmlDeviceResetGpuLockedClocks");
    resolve(total_energy, "nvmlDeviceGetTotalEnergyConsumption");
    resolve(set_power_limit, "nvmlDeviceSetPowerManagementLimit");
    resolve(default_power_limit, "nvmlDeviceGetPowerManagementDefaultLimit");
    resolve(power_usage, "nvmlDeviceGetPowerUsage");
    resolve(device_count, "nvmlDeviceGetCount_v2");
    resolve(device_name, "nvmlDeviceGetName");
    resolve(device_uuid, "nvmlDeviceGetUUID");
    resolve(driver_version, "nvmlSystemGetDriverVersion");
    resolve(clock_info, "nvmlDeviceGetClockInfo");
    // Renamed in R535; drivers before it have only the old name, later ones both.
    for (const char* name :
         {"nvmlDeviceGetCurrentClocksEventReasons", "nvmlDeviceGetCurrentClocksThrottleReasons"}) {
      clock_event_reasons_call = name;
      clock_event_reasons = reinterpret_cast<ReasonsFn>(dlsym(handle, name));
      if (clock_event_reasons != nullptr) return;
    }
    throw Error(library + ": NVML symbol nvmlDeviceGetCurrentClocksEventReasons not found");
  }

  // Calls an NVML query that fills a string buffer.
  std::string text(const std::function<nvmlReturn_t(char*, unsigned)>& query,
                   const char* call) const {
    char buffer[kNvmlTextSize] = {};
    check(query(buffer, kNvmlTextSize), call);
    buffer[kNvmlTextSize - 1] = '\0';
    return buffer;
  }

  std::string uuid_of(nvmlDevice_t d) const {
    return text([&](char* t, unsigned n) { return device_uuid(d, t, n); }, "nvmlDeviceGetUUID");
  }

  // The UUIDs of all NVML devices, in index order.
  std::vector<std::string> all_uuids() const {
    unsigned count = 0;
    check(device_count(&count), "nvmlDeviceGetCount_v2");
    std::vector<std::string> uuids;
    for (unsigned i = 0; i < count; ++i) {
      nvmlDevice_t d = nullptr;
      check(device_by_index(i, &d), "nvmlDeviceGetHandleByIndex_v2");
      uuids.push_back(uuid_of(d));
    }
    return uuids;
  }

  // Opens CUDA device `cuda_index` (CUDA_VISIBLE_DEVICES applies).
  void open_device(int cuda_index) {
    const char* visible = std::getenv("CUDA_VISIBLE_DEVICES");
    nvml_index = cuda_to_nvml_index(cuda_index, visible, [this] { return all_uuids(); });
    nvmlReturn_t rc = device_by_index(static_cast<unsigned>(nvml_index), &device);
    if (rc == kNvmlSuccess) return;
    std::string where;
    if (visible != nullptr && *visible != '\0') {
      where = " (CUDA device " + std::to_string(cuda_index) +
              " under CUDA_VISIBLE_DEVICES=" + visible + ")";
    }
    throw Error("NVML device " + std::to_string(nvml_index) + where + ": " + error_string(rc));
  }

  // Calls an NVML "count then fill" query.
  std::vector<unsigned> list(const std::function<nvmlReturn_t(unsigned*, unsigned*)>& query,
                             const char* call) const {
    unsigned count = 0;
    query(&count, nullptr);  // reports the size (NVML_ERROR_INSUFFICIENT_SIZE is expected)
    std::vector<unsigned> values(count);
    check(query(&count, values.data()), call);
    values.resize(count);
    return values;
  }
};

NvmlGpu::NvmlGpu(int index, const std::string& library) : impl_(std::make_unique<Impl>()) {
  impl_->library = library;
  try {
    impl_->load();
    impl_->check(impl_->init(), "nvmlInit_v2");
  } catch (...) {
    if (impl_->handle != nullptr) dlclose(impl_->handle);
    throw;
  }
  try {
    impl_->open_device(index);
  } catch (...) {
    impl_->shutdown();
    dlclose(impl_->handle);
    throw;
  }
  impl_->restore.reset_locked_clocks = impl_->reset_locked_clocks;
  impl_->restore.set_power_limit = impl_->set_power_limit;
  impl_->restore.device = impl_->device;
  impl_->restore.owner = getpid();
  register_live(&impl_->restore);
}

NvmlGpu::~NvmlGpu() {
  // Restore what this process changed; never throw from here.
  unregister_live(&impl_->restore);
  if (impl_->restore.clock_locked.exchange(false)) impl_->reset_locked_clocks(impl_->device);
  if (impl_->restore.limit_changed.exchange(false)) {
    unsigned milliwatts = 0;
    if (impl_->default_power_limit(impl_->device, &milliwatts) == kNvmlSuccess) {
      impl_->set_power_limit(impl_->device, milliwatts);
    }
  }
  impl_->shutdown();
  dlclose(impl_->handle);
}

std::vector<int> NvmlGpu::supported_clocks() const {
  const Impl& n = *impl_;
  auto memory = n.list([&](unsigned* c, unsigned* v) { return n.memory_clocks(n.device, c, v); },
                       "nvmlDeviceGetSupportedMemoryClocks");
  if (memory.empty()) throw Error("NVML reports no memory clocks");
  unsigned top = *std::max_element(memory.begin(), memory.end());
  auto clocks =
      n.list([&](unsigned* c, unsigned* v) { return n.graphics_clocks(n.device, top, c, v); },
             "nvmlDeviceGetSupportedGraphicsClocks");
  std::vector<int> out(clocks.begin(), clocks.end());
  std::sort(out.rbegin(), out.rend());
  return out;
}

void NvmlGpu::lock_clock(int mhz) {
  if (mhz <= 0) throw Error("cannot lock the SM clock to " + std::to_string(mhz) + " MHz");
  auto m = static_cast<unsigned>(mhz);
  // Marked before the call: a signal arriving during it must restore too.
  impl_->restore.clock_locked = true;
  impl_->check(impl_->lock_clocks(impl_->device, m, m), "nvmlDeviceSetGpuLockedClocks");
}

void NvmlGpu::reset_clock() {
  impl_->check(impl_->reset_locked_clocks(impl_->device), "nvmlDeviceResetGpuLockedClocks");
  impl_->restore.clock_locked = false;
}

double NvmlGpu::total_energy_j() {
  unsigned long long millijoules = 0;
  impl_->check(impl_->total_energy(impl_->device, &millijoules),
               "nvmlDeviceGetTotalEnergyConsumption");
  return static_cast<double>(millijoules) / 1000.0;
}

void NvmlGpu::set_power_limit(double watts) {
  if (!(watts > 0.0) || !std::isfinite(watts)) {
    throw Error("power limit must be a positive number of watts, got " + std::to_string(watts));
  }
  auto milliwatts = static_cast<unsigned>(std::lround(watts * 1000.0));
  // The signal handler restores the default limit without asking NVML for it.
  if (impl_->restore.default_limit_mw.load() == 0) {
    unsigned default_mw = 0;
    impl_->check(impl_->default_power_limit(impl_->device, &default_mw),
                 "nvmlDeviceGetPowerManagementDefaultLimit");
    impl_->restore.default_limit_mw = default_mw;
  }
  impl_->restore.limit_changed = true;
  impl_->check(impl_->set_power_limit(impl_->device, milliwatts),
               "nvmlDeviceSetPowerManagementLimit");
}

void NvmlGpu::reset_power_limit() {
  unsigned milliwatts = 0;
  impl_->check(impl_->default_power_limit(impl_->device, &milliwatts),
               "nvmlDeviceGetPowerManagementDefaultLimit");
  impl_->check(impl_->set_power_limit(impl_->device, milliwatts),
               "nvmlDeviceSetPowerManagementLimit");
  impl_->restore.limit_changed = false;
}

double NvmlGpu::now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

std::string NvmlGpu::name() const {
  const Impl& n = *impl_;
  return n.text([&](char* t, unsigned size) { return n.device_name(n.device, t, size); },
                "nvmlDeviceGetName");
}

std::string NvmlGpu::uuid() const {
  return impl_->uuid_of(impl_->device);
}

std::string NvmlGpu::driver_version() const {
  return impl_->text(impl_->driver_version, "nvmlSystemGetDriverVersion");
}

int NvmlGpu::nvml_index() const {
  return impl_->nvml_index;
}

double NvmlGpu::power_usage_w() const {
  unsigned milliwatts = 0;
  impl_->check(impl_->power_usage(impl_->device, &milliwatts), "nvmlDeviceGetPowerUsage");
  return static_cast<double>(milliwatts) / 1000.0;
}

int NvmlGpu::sm_clock_mhz() const {
  unsigned mhz = 0;
  impl_->check(impl_->clock_info(impl_->device, kNvmlClockSm, &mhz), "nvmlDeviceGetClockInfo");
  return static_cast<int>(mhz);
}

std::vector<std::string> NvmlGpu::clock_event_reasons() const {
  unsigned long long mask = 0;
  impl_->check(impl_->clock_event_reasons(impl_->device, &mask), impl_->clock_event_reasons_call);
  std::vector<std::string> names;
  for (std::size_t bit = 0; bit < 64; ++bit) {
    if ((mask >> bit & 1ULL) == 0) continue;
    names.push_back(bit < std::size(kClockEventReasons) ? kClockEventReasons[bit]
                                                        : "bit_" + std::to_string(bit));
  }
  return names;
}

}  // namespace perseus::client
