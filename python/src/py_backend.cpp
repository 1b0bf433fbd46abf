#include "py_backend.hpp"

#include <pybind11/stl.h>

#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "perseus/client/energy_sampler.hpp"
#include "perseus/client/nvml_gpu.hpp"
#include "perseus/client/sim_gpu.hpp"
#include "perseus/util/error.hpp"

namespace perseus::python {

namespace {

namespace py = pybind11;
using client::GpuBackend;
using client::NvmlGpu;
using client::SimGpu;

// Forwards to a backend that Python also holds (a SimGpu or an NvmlGpu created in Python).
class SharedBackend : public GpuBackend {
 public:
  explicit SharedBackend(std::shared_ptr<GpuBackend> gpu) : gpu_(std::move(gpu)) {}
  std::vector<int> supported_clocks() const override { return gpu_->supported_clocks(); }
  void lock_clock(int mhz) override { gpu_->lock_clock(mhz); }
  void reset_clock() override { gpu_->reset_clock(); }
  void set_power_limit(double watts) override { gpu_->set_power_limit(watts); }
  void reset_power_limit() override { gpu_->reset_power_limit(); }
  double now_s() override { return gpu_->now_s(); }
  double total_energy_j() override { return gpu_->total_energy_j(); }
  std::optional<measure::ClockReading> read_clock() override { return gpu_->read_clock(); }
  void instruction_begin(const std::string& name) override { gpu_->instruction_begin(name); }
  void instruction_end(const std::string& name) override { gpu_->instruction_end(name); }
  bool synchronous_clocks() const override { return gpu_->synchronous_clocks(); }
  bool simulated() const override { return gpu_->simulated(); }
  perseus::measure::CounterResponse counter_response() const override {
    return gpu_->counter_response();
  }
  std::unique_ptr<perseus::client::EnergySampler> start_energy_sampler(
      const perseus::client::SamplerOptions& options,
      std::function<void(const std::string&)> on_error) override {
    return gpu_->start_energy_sampler(options, std::move(on_error));
  }

 private:
  std::shared_ptr<GpuBackend> gpu_;
};

// A Python exception raised by a backend's `method` as the client's error: perseus.NoEnergyCounter
// (a GPU without one) as client::NoEnergyCounter, anything else as perseus::Error.
[[noreturn]] void rethrow(const char* method, py::error_already_set& e) {
  const std::string message = std::string("gpu backend ") + method + ": ";
  if (e.matches(py::module_::import("perseus._perseus").attr("NoEnergyCounter"))) {
    throw client::NoEnergyCounter(message + py::str(e.value()).cast<std::string>());
  }
  throw perseus::Error(message + e.what());
}

// Any Python object with the GpuBackend methods (supported_clocks, lock_clock, reset_clock,
// set_power_limit, reset_power_limit, now_s, total_energy_j; optionally instruction_begin,
// instruction_end, synchronous_clocks). Python exceptions become perseus::Error (rethrow).
class PyBackend : public GpuBackend {
 public:
  explicit PyBackend(py::object obj) : obj_(std::move(obj)) {
    for (const char* name : {"supported_clocks", "lock_clock", "reset_clock", "set_power_limit",
                             "reset_power_limit", "now_s", "total_energy_j"}) {
      if (!py::hasattr(obj_, name))
        throw perseus::Error(std::string("gpu backend object has no method '") + name +
                             "' (expected \"nvml\", \"sim\", a SimGpu, an NvmlGpu or an object "
                             "with the GpuBackend methods)");
    }
    synchronous_ = py::hasattr(obj_, "synchronous_clocks") && call_bool("synchronous_clocks");
  }
  ~PyBackend() override {
    py::gil_scoped_acquire gil;
    obj_ = py::object();
  }

  std::vector<int> supported_clocks() const override {
    return call<std::vector<int>>("supported_clocks");
  }
  void lock_clock(int mhz) override { call_void("lock_clock", mhz); }
  void reset_clock() override { call_void("reset_clock"); }
  void set_power_limit(double watts) override { call_void("set_power_limit", watts); }
  void reset_power_limit() override { call_void("reset_power_limit"); }
  double now_s() override { return call<double>("now_s"); }
  double total_energy_j() override { return call<double>("total_energy_j"); }
  void instruction_begin(const std::string& name) override {
    call_optional("instruction_begin", name);
  }
  void instruction_end(const std::string& name) override { call_optional("instruction_end", name); }
  bool synchronous_clocks() const override { return synchronous_; }

 private:
  template <class T, class... Args>
  T call(const char* method, Args&&... args) const {
    py::gil_scoped_acquire gil;
    try {
      return obj_.attr(method)(std::forward<Args>(args)...).template cast<T>();
    } catch (py::error_already_set& e) {
      rethrow(method, e);
    } catch (py::cast_error& e) {
      throw perseus::Error(std::string("gpu backend ") + method +
                           ": bad return value: " + e.what());
    }
  }
  template <class... Args>
  void call_void(const char* method, Args&&... args) const {
    py::gil_scoped_acquire gil;
    try {
      obj_.attr(method)(std::forward<Args>(args)...);
    } catch (py::error_already_set& e) {
      rethrow(method, e);
    }
  }
  void call_optional(const char* method, const std::string& name) const {
    py::gil_scoped_acquire gil;
    if (!py::hasattr(obj_, method)) return;
    try {
      obj_.attr(method)(name);
    } catch (py::error_already_set& e) {
      rethrow(method, e);
    }
  }
  bool call_bool(const char* method) const {
    py::object attr = obj_.attr(method);
    return py::bool_(PyCallable_Check(attr.ptr()) ? attr() : attr);
  }

  py::object obj_;
  bool synchronous_ = false;
};

}  // namespace

std::unique_ptr<GpuBackend> make_backend(py::object gpu) {
  if (py::isinstance<SimGpu>(gpu)) {
    return std::make_unique<SharedBackend>(gpu.cast<std::shared_ptr<SimGpu>>());
  }
  if (py::isinstance<NvmlGpu>(gpu)) {
    return std::make_unique<SharedBackend>(gpu.cast<std::shared_ptr<NvmlGpu>>());
  }
  if (py::isinstance<py::str>(gpu)) {
    throw perseus::Error(
        "gpu: pass \"nvml\" and \"sim\" through perseus.PipelineFrequencyOptimizer");
  }
  return std::make_unique<PyBackend>(std::move(gpu));
}

}  // namespace perseus::python
