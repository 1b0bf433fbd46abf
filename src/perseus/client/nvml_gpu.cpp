#include "perseus/client/nvml_gpu.hpp"

#include <dlfcn.h>

#include <algorithm>
#include <cmath>
#include <functional>

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
  nvmlDevice_t device = nullptr;
  bool clock_locked = false, limit_changed = false;

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
  nvmlReturn_t rc = impl_->device_by_index(static_cast<unsigned>(index), &impl_->device);
  if (rc != kNvmlSuccess) {
    std::string why = impl_->error_string(rc);
    impl_->shutdown();
    dlclose(impl_->handle);
    throw Error("NVML device " + std::to_string(index) + ": " + why);
  }
}

NvmlGpu::~NvmlGpu() {
  // Restore what this process changed; never throw from here.
  if (impl_->clock_locked) impl_->reset_locked_clocks(impl_->device);
  if (impl_->limit_changed) {
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
  impl_->check(impl_->lock_clocks(impl_->device, m, m), "nvmlDeviceSetGpuLockedClocks");
  impl_->clock_locked = true;
}

void NvmlGpu::reset_clock() {
  impl_->check(impl_->reset_locked_clocks(impl_->device), "nvmlDeviceResetGpuLockedClocks");
  impl_->clock_locked = false;
}

double NvmlGpu::total_energy_j() const {
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
  impl_->check(impl_->set_power_limit(impl_->device, milliwatts),
               "nvmlDeviceSetPowerManagementLimit");
  impl_->limit_changed = true;
}

void NvmlGpu::reset_power_limit() {
  unsigned milliwatts = 0;
  impl_->check(impl_->default_power_limit(impl_->device, &milliwatts),
               "nvmlDeviceGetPowerManagementDefaultLimit");
  impl_->check(impl_->set_power_limit(impl_->device, milliwatts),
               "nvmlDeviceSetPowerManagementLimit");
  impl_->limit_changed = false;
}

}  // namespace perseus::client
