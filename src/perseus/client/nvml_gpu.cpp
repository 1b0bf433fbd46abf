#include "perseus/client/nvml_gpu.hpp"

#include <dlfcn.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <functional>
#include <iterator>

#include "perseus/client/nvml_api.hpp"
#include "perseus/client/nvml_restore.hpp"
#include "perseus/util/error.hpp"

namespace perseus::client {

using namespace nvml;  // NVML's declarations (nvml_api.hpp) and the restore registry

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
  MilliwattsFn default_power_limit = nullptr, enforced_power_limit = nullptr, power_usage = nullptr;
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
    resolve(enforced_power_limit, "nvmlDeviceGetEnforcedPowerLimit");
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

  // The active clock event reasons, a bit mask.
  unsigned long long reasons() const {
    unsigned long long mask = 0;
    check(clock_event_reasons(device, &mask), clock_event_reasons_call);
    return mask;
  }

  // Calls an NVML query that answers milliwatts (the power reading, a power limit).
  unsigned milliwatts(MilliwattsFn query, const char* call) const {
    unsigned mw = 0;
    check(query(device, &mw), call);
    return mw;
  }

  unsigned default_limit_mw() const {
    return milliwatts(default_power_limit, "nvmlDeviceGetPowerManagementDefaultLimit");
  }

  // Calls an NVML query that fills a string buffer.
  std::string text(const std::function<nvmlReturn_t(char*, unsigned)>& query,
                   const char* call) const {
    char buffer[kNvmlTextSize] = {};
    check(query(buffer, kNvmlTextSize), call);
    buffer[kNvmlTextSize - 1] = '\0';
    return buffer;
  }

  // A text query of device `d` (nvmlDeviceGetUUID, nvmlDeviceGetName).
  std::string device_text(DeviceTextFn query, nvmlDevice_t d, const char* call) const {
    return text([&](char* t, unsigned n) { return query(d, t, n); }, call);
  }

  // A text query of every NVML device, in index order; "" for a device NVML cannot query (one
  // fallen off the bus), so another GPU's fault never keeps this one from opening.
  std::vector<std::string> of_every_device(DeviceTextFn query) const {
    unsigned count = 0;
    check(device_count(&count), "nvmlDeviceGetCount_v2");
    std::vector<std::string> texts;
    for (unsigned i = 0; i < count; ++i) {
      nvmlDevice_t d = nullptr;
      char buffer[kNvmlTextSize] = {};
      const bool ok =
          device_by_index(i, &d) == kNvmlSuccess && query(d, buffer, kNvmlTextSize) == kNvmlSuccess;
      buffer[kNvmlTextSize - 1] = '\0';
      texts.emplace_back(ok ? buffer : "");
    }
    return texts;
  }

  // Opens CUDA device `cuda_index`: the NVML device of `cuda_uuid` where given, else as
  // CUDA_VISIBLE_DEVICES maps it, where CUDA and NVML number the GPUs alike.
  void open_device(int cuda_index, const std::string& cuda_uuid) {
    const char* visible = std::getenv("CUDA_VISIBLE_DEVICES");
    auto uuids = [this] { return of_every_device(device_uuid); };
    if (cuda_uuid.empty() && !names_devices_by_uuid(visible)) {
      check_cuda_device_order(std::getenv("CUDA_DEVICE_ORDER"), of_every_device(device_name));
    }
    nvml_index = cuda_uuid.empty() ? cuda_to_nvml_index(cuda_index, visible, uuids)
                                   : uuid_to_nvml_index(cuda_index, cuda_uuid, uuids);
    nvmlReturn_t rc = device_by_index(static_cast<unsigned>(nvml_index), &device);
    if (rc == kNvmlSuccess) return;
    std::string where;
    if (visible != nullptr && *visible != '\0') {
      where = " (CUDA device " + std::to_string(cuda_index) +
              " under CUDA_VISIBLE_DEVICES=" + visible + ")";
    }
    throw Error("NVML device " + std::to_string(nvml_index) + where + ": " + why_not_opened(rc));
  }

  // Why nvmlDeviceGetHandleByIndex_v2 failed: an index past the devices NVML lists says how many
  // it lists (the driver itself only says "Invalid Argument").
  std::string why_not_opened(nvmlReturn_t rc) const {
    unsigned count = 0;
    if (device_count(&count) == kNvmlSuccess && static_cast<unsigned>(nvml_index) >= count) {
      return "no such device: NVML lists " + std::to_string(count) + " device(s)" +
             (count > 0 ? " (0.." + std::to_string(count - 1) + ")" : "");
    }
    return error_string(rc);
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

NvmlGpu::NvmlGpu(int index, const std::string& library, const std::string& cuda_uuid)
    : impl_(std::make_unique<Impl>()) {
  impl_->library = library;
  try {
    impl_->load();
    impl_->check(impl_->init(), "nvmlInit_v2");
  } catch (...) {
    if (impl_->handle != nullptr) dlclose(impl_->handle);
    throw;
  }
  try {
    impl_->open_device(index, cuda_uuid);
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
  const nvmlReturn_t rc = impl_->total_energy(impl_->device, &millijoules);
  if (rc == kNvmlErrorNotSupported) {
    throw NoEnergyCounter(
        "this GPU has no energy counter (NVML nvmlDeviceGetTotalEnergyConsumption: Not "
        "Supported, as on GPUs before Volta and some virtual GPUs)");
  }
  impl_->check(rc, "nvmlDeviceGetTotalEnergyConsumption");
  return static_cast<double>(millijoules) / 1000.0;
}

void NvmlGpu::set_power_limit(double watts) {
  if (!(watts > 0.0) || !std::isfinite(watts)) {
    throw Error("power limit must be a positive number of watts, got " + std::to_string(watts));
  }
  auto milliwatts = static_cast<unsigned>(std::lround(watts * 1000.0));
  // The signal handler restores the default limit without asking NVML for it.
  if (impl_->restore.default_limit_mw.load() == 0) {
    impl_->restore.default_limit_mw = impl_->default_limit_mw();
  }
  impl_->restore.limit_changed = true;
  impl_->check(impl_->set_power_limit(impl_->device, milliwatts),
               "nvmlDeviceSetPowerManagementLimit");
}

void NvmlGpu::reset_power_limit() {
  impl_->check(impl_->set_power_limit(impl_->device, impl_->default_limit_mw()),
               "nvmlDeviceSetPowerManagementLimit");
  impl_->restore.limit_changed = false;
}

double NvmlGpu::now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

std::string NvmlGpu::name() const {
  return impl_->device_text(impl_->device_name, impl_->device, "nvmlDeviceGetName");
}

std::string NvmlGpu::uuid() const {
  return impl_->device_text(impl_->device_uuid, impl_->device, "nvmlDeviceGetUUID");
}

std::string NvmlGpu::driver_version() const {
  return impl_->text(impl_->driver_version, "nvmlSystemGetDriverVersion");
}

int NvmlGpu::nvml_index() const {
  return impl_->nvml_index;
}

double NvmlGpu::power_usage_w() const {
  return impl_->milliwatts(impl_->power_usage, "nvmlDeviceGetPowerUsage") / 1000.0;
}

std::optional<measure::ClockReading> NvmlGpu::read_clock() {
  return measure::ClockReading{sm_clock_mhz(), (impl_->reasons() & kClocksHeldDown) != 0};
}

double NvmlGpu::power_limit_w() const {
  return impl_->milliwatts(impl_->enforced_power_limit, "nvmlDeviceGetEnforcedPowerLimit") / 1000.0;
}

double NvmlGpu::default_power_limit_w() const {
  return impl_->default_limit_mw() / 1000.0;
}

int NvmlGpu::sm_clock_mhz() const {
  unsigned mhz = 0;
  impl_->check(impl_->clock_info(impl_->device, kNvmlClockSm, &mhz), "nvmlDeviceGetClockInfo");
  return static_cast<int>(mhz);
}

std::vector<std::string> NvmlGpu::clock_event_reasons() const {
  const unsigned long long mask = impl_->reasons();
  std::vector<std::string> names;
  for (std::size_t bit = 0; bit < 64; ++bit) {
    if ((mask >> bit & 1ULL) == 0) continue;
    names.push_back(bit < std::size(kClockEventReasons) ? kClockEventReasons[bit]
                                                        : "bit_" + std::to_string(bit));
  }
  return names;
}

}  // namespace perseus::client
