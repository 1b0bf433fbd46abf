// pybind11 module `perseus._perseus`: the training-side client library (architecture section 7) for
// Python. The user-facing API lives in the pure-Python package (perseus/optimizer.py); this
// module exposes:
//   PerseusError    perseus::Error (a RuntimeError subclass)
//   NoEnergyCounter client::NoEnergyCounter (a PerseusError subclass)
//   SimGpu          the simulated GPU (profile CSV + stage), drivable from Python
//   NvmlGpu         the NVML backend (device index, optional library path)
//   _OptimizerOptions  OptimizerOptions, filled by perseus/optimizer.py
//   _Optimizer      PipelineFrequencyOptimizer over a SimGpu, an NvmlGpu or any Python object
//                   with the GpuBackend methods; _instruction_hooks() gives its instruction
//                   hooks as plain callables (instruction_hooks.hpp)
//   _bracket, _BracketState  the adapters' wrapper around a compute function
//                   (instruction_bracket.hpp)
//   _read_profile, _plan, _evaluate, _load_frontier, _Profile, _Frontier  planning
//                   (planning_bindings.hpp; perseus/planning.py is the user-facing API)
// Every call that may block (HTTP, the schedule barrier, real-time simulated instructions,
// waiting for the clock thread) runs with the GIL released; callbacks into Python (log,
// share_job_id, Python backends) take it back.
#include <pybind11/functional.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "instruction_bracket.hpp"
#include "instruction_hooks.hpp"
#include "perseus/client/gpu_backend.hpp"
#include "perseus/client/gpu_probe.hpp"
#include "perseus/client/nvml_gpu.hpp"
#include "perseus/client/optimizer.hpp"
#include "perseus/client/sim_gpu.hpp"
#include "perseus/measure/attribution_trace.hpp"
#include "perseus/profile/csv.hpp"
#include "perseus/util/error.hpp"
#include "perseus/wire/protocol.hpp"
#include "planning_bindings.hpp"
#include "py_backend.hpp"
#include "py_convert.hpp"

namespace py = pybind11;
using perseus::client::GpuBackend;
using perseus::client::IterationMeasurement;
using perseus::client::NvmlGpu;
using perseus::client::OptimizerOptions;
using perseus::client::PipelineFrequencyOptimizer;
using perseus::client::SimGpu;
using perseus::client::SimGpuOptions;

namespace {

// The Python-facing optimizer. close() (also run by the destructor) restores the GPU's default
// clocks; it releases the GIL so that the clock thread can finish Python backend calls.
class Optimizer {
 public:
  Optimizer(OptimizerOptions options, std::unique_ptr<GpuBackend> gpu) {
    py::gil_scoped_release nogil;
    opt_ = std::make_unique<PipelineFrequencyOptimizer>(std::move(options), std::move(gpu));
  }
  ~Optimizer() {
    if (!opt_) return;
    if (Py_IsInitialized() && PyGILState_Check()) {
      py::gil_scoped_release nogil;
      opt_.reset();
    } else {
      opt_.reset();
    }
  }
  void close() {
    std::unique_ptr<PipelineFrequencyOptimizer> opt = std::move(opt_);
    py::gil_scoped_release nogil;
    opt.reset();
  }
  bool closed() const { return !opt_; }

  PipelineFrequencyOptimizer& get() {
    if (!opt_) throw perseus::Error("the frequency optimizer was closed");
    return *opt_;
  }

 private:
  std::unique_ptr<PipelineFrequencyOptimizer> opt_;
};

// Calls that block (device reads, simulated waits) let other Python threads run meanwhile.
const auto nogil = py::call_guard<py::gil_scoped_release>();

void bind_sim_gpu(py::module_& m) {
  py::class_<SimGpu, std::shared_ptr<SimGpu>>(
      m, "SimGpu",
      "A simulated GPU whose instruction time and energy follow one stage of a profile CSV, or\n"
      "several (stage=[0, 2]: interleaved and V-shaped schedules, instructions 'forward@2').\n"
      "Virtual mode (default): time advances only by instructions and wait_until().\n"
      "Real-time mode: instruction_end() sleeps until the profiled duration times time_scale\n"
      "has passed since instruction_begin(); now() is wall time divided by time_scale.")
      .def(py::init([](const std::string& profile, std::variant<int, std::vector<int>> stage,
                       double blocking_power, bool real_time, double time_scale,
                       const std::string& counter, py::dict counter_options) {
             SimGpuOptions o;
             if (const int* one = std::get_if<int>(&stage)) {
               o.stages = {*one};
             } else {
               o.stages = std::get<std::vector<int>>(stage);
             }
             o.blocking_power_w = blocking_power;
             o.real_time = real_time;
             o.time_scale = time_scale;
             o.counter = perseus::python::counter_from(counter, counter_options);
             return std::make_shared<SimGpu>(perseus::profile::read_profile_csv(profile), o);
           }),
           py::arg("profile"), py::arg("stage") = 0, py::arg("blocking_power") = 0.0,
           py::arg("real_time") = false, py::arg("time_scale") = 1.0,
           py::arg("counter") = "realistic", py::arg("counter_options") = py::dict())
      .def("true_energy", &SimGpu::true_energy_j,
           "Exact energy consumed so far in joules (what the counter would read if ideal).")
      .def("supported_clocks", &SimGpu::supported_clocks,
           "Profiled SM clocks (MHz), highest first.")
      .def("lock_clock", &SimGpu::lock_clock, py::arg("mhz"))
      .def("reset_clock", &SimGpu::reset_clock)
      .def("set_power_limit", &SimGpu::set_power_limit, py::arg("watts"))
      .def("reset_power_limit", &SimGpu::reset_power_limit)
      .def("now", &SimGpu::now_s, "Simulated time in seconds.")
      .def("now_s", &SimGpu::now_s)
      .def("total_energy", &SimGpu::total_energy_j,
           "Energy counter in joules (real-time mode: blocks like a real read).", nogil)
      .def("total_energy_j", &SimGpu::total_energy_j, nogil)
      .def("instruction_begin", &SimGpu::instruction_begin, py::arg("name"), nogil)
      .def("instruction_end", &SimGpu::instruction_end, py::arg("name"), nogil)
      .def(
          "runs",
          [](SimGpu& g) {
            py::list out;
            for (const auto& run : g.runs()) out.append(py::make_tuple(run.instruction, run.mhz));
            return out;
          },
          "Every instruction run so far, oldest first, as (name, MHz it ran at); the latest "
          "65536.")
      .def("wait_until", &SimGpu::wait_until, py::arg("t"),
           "Virtual mode: block at blocking power until simulated time t (no-op if t <= now).",
           nogil)
      .def("current_clock", &SimGpu::current_clock, py::arg("instruction"))
      .def_property_readonly("synchronous_clocks", &SimGpu::synchronous_clocks);
}

void bind_nvml_gpu(py::module_& m) {
  py::class_<NvmlGpu, std::shared_ptr<NvmlGpu>>(
      m, "NvmlGpu", "A real GPU through NVML (libnvidia-ml loaded at run time).")
      .def(py::init<int, const std::string&, const std::string&>(), py::arg("index") = 0,
           py::arg("library") = "libnvidia-ml.so.1", py::arg("cuda_uuid") = "",
           "CUDA device `index` (CUDA_VISIBLE_DEVICES applies), or, given `cuda_uuid` (the UUID "
           "CUDA reports for it, e.g. torch.cuda.get_device_properties(index).uuid), the NVML "
           "device of that UUID.")
      .def("uuid", &NvmlGpu::uuid, "The device's UUID as NVML writes it ('GPU-...').")
      .def("nvml_index", &NvmlGpu::nvml_index, "The device's NVML index.")
      .def("supported_clocks", &NvmlGpu::supported_clocks, nogil)
      .def("lock_clock", &NvmlGpu::lock_clock, py::arg("mhz"), nogil)
      .def("reset_clock", &NvmlGpu::reset_clock, nogil)
      .def("set_power_limit", &NvmlGpu::set_power_limit, py::arg("watts"), nogil)
      .def("reset_power_limit", &NvmlGpu::reset_power_limit, nogil)
      .def("total_energy", &NvmlGpu::total_energy_j,
           "Energy counter in joules. A real H100 blocks the caller ~4 ms per read; the GIL is "
           "released meanwhile, so a Python thread can poll it beside the training loop.",
           nogil)
      .def("total_energy_j", &NvmlGpu::total_energy_j, nogil)
      .def("power_usage_w", &NvmlGpu::power_usage_w, "The driver's power reading, in watts.", nogil)
      .def("power_limit_w", &NvmlGpu::power_limit_w,
           "The power limit the driver enforces now, in watts.", nogil)
      .def("default_power_limit_w", &NvmlGpu::default_power_limit_w,
           "The GPU's default power limit, in watts.", nogil)
      .def("sm_clock_mhz", &NvmlGpu::sm_clock_mhz, "The SM clock now, in MHz.", nogil)
      .def("clock_event_reasons", &NvmlGpu::clock_event_reasons,
           "Why the clocks are where they are now: names such as 'sw_power_cap' (the power "
           "limit holds the SM clock down) or 'gpu_idle'; empty when none applies.",
           nogil);
}

// Optimizer.last_window: the last reporting window's measurements as a dict.
py::dict window_dict(const perseus::client::WindowMeasurements& w) {
  py::dict d;
  d["iter_time"] = w.iter_time;
  d["iter_energy"] = w.iter_energy;
  d["time_breakdown"] = w.time_breakdown;
  d["energy_breakdown"] = w.energy_breakdown;
  d["energy_stderr"] = w.energy_stderr_j;
  d["energy_pooling_error"] = w.energy_pooling_error_j;
  d["attribution"] = perseus::measure::to_string(w.method);
  d["measured"] = w.measured;
  py::dict clocks;
  for (const auto& [name, c] : w.clocks) {
    py::dict one;
    one["samples"] = c.samples;
    one["mean_mhz"] = c.mean_mhz;
    one["held_down_share"] = c.held_down_share;
    one["locked_mhz"] = c.locked_mhz;
    clocks[py::str(name)] = one;
  }
  d["clocks"] = clocks;
  return d;
}

using OptimizerClass = py::class_<Optimizer>;

// _OptimizerOptions: OptimizerOptions as perseus/optimizer.py fills it, field by field under its
// C++ name; `attribution` by name, `scheduler_args` a dict, `log` and `share_job_id` callables.
void add_optimizer_options(py::module_& m) {
  using O = OptimizerOptions;
  py::class_<O>(m, "_OptimizerOptions")
      .def(py::init<>())
      .def_readwrite("server_url", &O::server_url)
      .def_readwrite("rank", &O::rank)
      .def_readwrite("dp_rank", &O::dp_rank)
      .def_readwrite("pp_rank", &O::pp_rank)
      .def_readwrite("tp_rank", &O::tp_rank)
      .def_readwrite("dp_degree", &O::dp_degree)
      .def_readwrite("pp_degree", &O::pp_degree)
      .def_readwrite("tp_degree", &O::tp_degree)
      .def_readwrite("world_size", &O::world_size)
      .def_readwrite("job_id", &O::job_id)
      .def_readwrite("job_metadata", &O::job_metadata)
      .def_readwrite("token", &O::token)
      .def_readwrite("ca_file", &O::ca_file)
      .def_readwrite("scheduler", &O::scheduler)
      .def_readwrite("report_every", &O::report_every)
      .def_readwrite("request_timeout_s", &O::request_timeout_s)
      .def_readwrite("barrier_timeout_s", &O::barrier_timeout_s)
      .def_readwrite("retries", &O::retries)
      .def_readwrite("backoff_s", &O::backoff_s)
      .def_readwrite("stall_bound_s", &O::stall_bound_s)
      .def_readwrite("shutdown_bound_s", &O::shutdown_bound_s)
      .def_readwrite("max_skipped_windows", &O::max_skipped_windows)
      .def_readwrite("strict", &O::strict)
      .def_readwrite("observe", &O::observe)
      .def_readwrite("sampler_period_s", &O::sampler_period_s)
      .def_property(
          "attribution", [](const O& o) { return perseus::measure::to_string(o.attribution); },
          [](O& o, const std::string& name) {
            o.attribution = perseus::measure::parse_attribution(name);
          })
      .def_property(
          "scheduler_args", [](const O& o) { return o.scheduler_args.dump(); },
          [](O& o, const py::dict& args) { o.scheduler_args = perseus::python::to_json(args); })
      .def_property(
          "pipeline_order",
          [](const O& o) { return o.pipeline_order ? o.pipeline_order->dump() : std::string(); },
          [](O& o, const py::object& order) {
            if (order.is_none()) {
              o.pipeline_order.reset();
            } else {
              o.pipeline_order = perseus::python::to_json(order);
            }
          })
      .def_property("log", py::cpp_function(),
                    [](O& o, py::object log) { o.log = perseus::python::make_log(std::move(log)); })
      .def_property("share_job_id", py::cpp_function(), [](O& o, py::object share) {
        o.share_job_id = perseus::python::make_share(std::move(share));
      });
}

// _Optimizer(gpu, options): the backend as perseus::python::make_backend takes it.
void add_optimizer_init(OptimizerClass& cls) {
  cls.def(py::init([](py::object gpu, OptimizerOptions options) {
            std::unique_ptr<GpuBackend> backend = perseus::python::make_backend(std::move(gpu));
            return std::make_unique<Optimizer>(std::move(options), std::move(backend));
          }),
          py::arg("gpu"), py::arg("options"));
}

// The training loop's hooks; each releases the GIL (the barrier may wait for the server).
void add_optimizer_hooks(OptimizerClass& cls) {
  cls.def("on_step_begin",
          [](Optimizer& o) {
            py::gil_scoped_release nogil;
            o.get().on_step_begin();
          })
      .def("on_step_end",
           [](Optimizer& o) {
             py::gil_scoped_release nogil;
             o.get().on_step_end();
           })
      .def(
          "on_instruction_begin",
          [](Optimizer& o, const std::string& name, std::optional<int> stage) {
            py::gil_scoped_release nogil;
            o.get().on_instruction_begin(name, perseus::python::stage_index(stage));
          },
          py::arg("name"), py::arg("stage") = py::none())
      .def(
          "on_instruction_end",
          [](Optimizer& o, const std::string& name, std::optional<int> stage) {
            py::gil_scoped_release nogil;
            o.get().on_instruction_end(name, perseus::python::stage_index(stage));
          },
          py::arg("name"), py::arg("stage") = py::none())
      .def("_instruction_hooks", [](py::object self) {
        Optimizer* o = self.cast<Optimizer*>();
        return perseus::python::instruction_hooks(
            self, [o]() -> PipelineFrequencyOptimizer& { return o->get(); });
      });
}

// What the optimizer knows: its job, round and state, the measured iterations and last window.
void add_optimizer_state(OptimizerClass& cls) {
  cls.def("close", &Optimizer::close)
      .def_property_readonly("closed", &Optimizer::closed)
      .def_property_readonly("job_id", [](Optimizer& o) { return o.get().job_id(); })
      .def_property_readonly("mismatched_iterations",
                             [](Optimizer& o) { return o.get().mismatched_iterations(); })
      .def_property_readonly("job_credential",
                             [](Optimizer& o) { return o.get().job_credential(); })
      .def_property_readonly("round", [](Optimizer& o) { return o.get().round(); })
      .def_property_readonly("done", [](Optimizer& o) { return o.get().done(); })
      .def_property_readonly("job_failed", [](Optimizer& o) { return o.get().job_failed(); })
      .def_property_readonly("planned_clocks",
                             [](Optimizer& o) { return o.get().planned_clocks(); })
      .def_property_readonly("degraded", [](Optimizer& o) { return o.get().degraded(); })
      .def_property_readonly("iterations",
                             [](Optimizer& o) {
                               std::vector<std::pair<double, double>> out;
                               for (const IterationMeasurement& it : o.get().iterations())
                                 out.emplace_back(it.time_s, it.energy_j);
                               return out;
                             })
      .def_property_readonly("last_window",
                             [](Optimizer& o) { return window_dict(o.get().last_window()); })
      .def("_last_window_trace",
           [](Optimizer& o) {
             return perseus::measure::to_json(o.get().last_window().trace).dump();
           })
      .def("gpu_now", [](Optimizer& o) { return o.get().gpu().now_s(); })
      .def("gpu_total_energy", [](Optimizer& o) { return o.get().gpu().total_energy_j(); });
}

// Module functions for tools beside the training loop.
void bind_tools(py::module_& m) {
  // `perseus gpu probe` from Python: the probe's JSON text (perseus.gpu_probe parses it). Reads
  // only; the GIL is released while the counter is polled.
  m.def(
      "_gpu_probe",
      [](int device, const std::string& library, double duration, double timeout) {
        perseus::client::ProbeOptions options;
        options.device = device;
        options.library = library;
        options.duration_s = duration;
        options.timeout_s = timeout;
        perseus::client::GpuProbe probe;
        {
          py::gil_scoped_release nogil;
          probe = perseus::client::probe_gpu(options);
        }
        return perseus::client::to_json(probe).dump();
      },
      py::arg("device"), py::arg("library"), py::arg("duration"), py::arg("timeout"));

  // Attributing a recorded window again (perseus.attribute): trace JSON text in, attribution
  // JSON text out; a malformed trace raises PerseusError naming the field.
  m.def(
      "_attribute",
      [](const std::string& trace_text, const std::string& method, bool refresh_clock) {
        auto trace =
            perseus::measure::parse_attribution_trace(perseus::wire::parse_json(trace_text));
        const auto parsed = perseus::measure::parse_attribution(method);
        trace.input.time_by_refresh_clock = refresh_clock;
        perseus::measure::Attribution a;
        {
          py::gil_scoped_release nogil;
          a = perseus::measure::attribute(trace.input, parsed);
        }
        return perseus::measure::to_json(a, trace).dump();
      },
      py::arg("trace"), py::arg("method") = "busy-overlap", py::arg("refresh_clock") = true);
}

}  // namespace

PYBIND11_MODULE(_perseus, m) {
  m.doc() = "Perseus training-side client (C++ extension); use the `perseus` package.";
  m.attr("__version__") = PERSEUS_VERSION;  // the project's version, as `perseus --version`
  // How long NVML's energy counter trails the energy it reports and over how long it averages it
  // (measured on H100s); the NVML client records both in each window's trace (counter_lag_s,
  // counter_window_s).
  m.attr("NVML_COUNTER_LAG_S") = perseus::client::kNvmlCounterResponse.lag_s;
  m.attr("NVML_COUNTER_WINDOW_S") = perseus::client::kNvmlCounterResponse.window_s;

  py::register_exception<perseus::Error>(m, "PerseusError", PyExc_RuntimeError);
  m.attr("PerseusError").attr("__doc__") =
      "An error from the Perseus client library: bad input, unusable arguments, or (strict "
      "mode) a failed server request.";
  // After PerseusError: pybind11 tries the translator registered last first.
  py::register_exception<perseus::client::NoEnergyCounter>(m, "NoEnergyCounter",
                                                           m.attr("PerseusError"));
  m.attr("NoEnergyCounter").attr("__doc__") =
      "The GPU has no energy counter (NVML: Not Supported, as before Volta). NvmlGpu's "
      "total_energy_j raises it; a Python GPU backend raises it from total_energy_j so that the "
      "client says so once and stops reading, instead of retrying a failed read.";

  perseus::python::add_instruction_hook_type(m, m.attr("PerseusError"));
  perseus::python::add_instruction_bracket(m);
  bind_sim_gpu(m);
  bind_nvml_gpu(m);
  add_optimizer_options(m);
  OptimizerClass optimizer(m, "_Optimizer");
  add_optimizer_init(optimizer);
  add_optimizer_hooks(optimizer);
  add_optimizer_state(optimizer);
  bind_tools(m);
  perseus::python::add_planning(m);
}
