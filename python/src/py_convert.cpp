#include "py_convert.hpp"

#include <pybind11/stl.h>

#include "perseus/util/error.hpp"

namespace perseus::python {

namespace py = pybind11;

measure::CounterOptions counter_from(const std::string& name, const py::dict& options) {
  auto c = measure::CounterOptions::named(name);
  for (const auto& [key, value] : options) {
    const auto field = key.cast<std::string>();
    if (field == "refresh_period_s") {
      c.refresh_period_s = value.cast<double>();
    } else if (field == "refresh_jitter_s") {
      c.refresh_jitter_s = value.cast<double>();
    } else if (field == "refresh_phase_s") {
      c.refresh_phase_s = value.cast<double>();
    } else if (field == "read_latency_s") {
      c.read_latency_s = value.cast<double>();
    } else if (field == "sampled_fraction") {
      c.sampled_fraction = value.cast<double>();
    } else if (field == "lag_s") {
      c.lag_s = value.cast<double>();
    } else if (field == "window_s") {
      c.window_s = value.cast<double>();
    } else if (field == "time_constant_s") {
      c.time_constant_s = value.cast<double>();
    } else if (field == "noise") {
      c.noise = value.cast<double>();
    } else if (field == "seed") {
      c.seed = value.cast<std::uint64_t>();
    } else {
      throw Error(
          "counter_options: unknown field '" + field +
          "' (expected refresh_period_s, refresh_jitter_s, refresh_phase_s, read_latency_s, "
          "sampled_fraction, lag_s, window_s, time_constant_s, noise or seed)");
    }
  }
  c.validate();
  return c;
}

namespace {

// Holds a Python callable so that copies and the final release happen under the GIL (the
// optimizer may drop its std::function on a thread that does not hold it).
struct PyCallable {
  std::shared_ptr<py::object> fn;
  explicit PyCallable(py::object f)
      : fn(new py::object(std::move(f)), [](py::object* p) {
          py::gil_scoped_acquire gil;
          delete p;
        }) {}
};

}  // namespace

int stage_index(std::optional<int> stage) {
  if (!stage) return -1;
  const std::string refusal = stage_refusal(*stage);
  if (!refusal.empty()) throw py::value_error(refusal);
  return *stage;
}

std::string stage_refusal(long stage) {
  if (stage >= 0) return {};
  return "stage must be a pipeline stage index >= 0 or None, got " + std::to_string(stage);
}

std::function<void(const std::string&)> make_log(py::object log) {
  if (log.is_none()) return {};
  PyCallable c(std::move(log));
  return [c](const std::string& message) {
    py::gil_scoped_acquire gil;
    try {
      (*c.fn)(message);
    } catch (py::error_already_set& e) {
      // A broken logger must not break training: report it through Python's unraisable hook.
      e.discard_as_unraisable("perseus log callback");
    }
  };
}

std::function<std::string(const std::string&)> make_share(py::object share) {
  if (share.is_none()) return {};
  PyCallable c(std::move(share));
  return [c](const std::string& id) -> std::string {
    py::gil_scoped_acquire gil;
    try {
      return (*c.fn)(id).cast<std::string>();
    } catch (py::error_already_set& e) {
      throw Error(std::string("share_job_id callback failed: ") + e.what());
    } catch (py::cast_error& e) {
      throw Error(std::string("share_job_id callback must return a str: ") + e.what());
    }
  };
}

nlohmann::json to_json(const py::handle& obj) {
  if (obj.is_none()) return nullptr;
  if (py::isinstance<py::bool_>(obj)) return obj.cast<bool>();
  if (py::isinstance<py::int_>(obj)) return obj.cast<long long>();
  if (py::isinstance<py::float_>(obj)) return obj.cast<double>();
  if (py::isinstance<py::str>(obj)) return obj.cast<std::string>();
  if (py::isinstance<py::dict>(obj)) {
    nlohmann::json out = nlohmann::json::object();
    for (auto item : obj.cast<py::dict>()) {
      if (!py::isinstance<py::str>(item.first)) throw Error("scheduler_args: keys must be strings");
      out[item.first.cast<std::string>()] = to_json(item.second);
    }
    return out;
  }
  if (py::isinstance<py::list>(obj) || py::isinstance<py::tuple>(obj)) {
    nlohmann::json out = nlohmann::json::array();
    for (auto item : obj) out.push_back(to_json(item));
    return out;
  }
  throw Error("scheduler_args: unsupported value of type " +
              py::str(py::type::of(obj).attr("__name__")).cast<std::string>() +
              " (use dict, list, str, int, float, bool or None)");
}

}  // namespace perseus::python
