// Python values turned into what the client library takes: counter options, the hooks' stage
// index, callbacks (log, share_job_id) that run Python under the GIL from any thread, and JSON
// (scheduler_args). Each bad value raises PerseusError or ValueError naming the argument.
#pragma once

#include <pybind11/pybind11.h>

#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "perseus/measure/energy_counter.hpp"

namespace perseus::python {

// A simulated GPU's energy counter: "realistic" or "ideal", then the fields given in `options`
// (refresh_period_s, refresh_jitter_s, refresh_phase_s, read_latency_s, sampled_fraction, lag_s,
// noise, seed).
measure::CounterOptions counter_from(const std::string& name, const pybind11::dict& options);

// A hook's stage argument: None is "not given" (-1); a negative index raises ValueError with
// stage_refusal's message.
int stage_index(std::optional<int> stage);
// Why `stage` is no stage index (a negative one), or "" when it is one.
std::string stage_refusal(long stage);

// The optimizer's log callback; a Python exception in it is reported as unraisable, never raised
// into training. None: no callback.
std::function<void(const std::string&)> make_log(pybind11::object log);

// The share_job_id callback; its failure (or a non-str result) is a perseus::Error. None: none.
std::function<std::string(const std::string&)> make_share(pybind11::object share);

// dict/list/tuple/str/int/float/bool/None as JSON (scheduler_args).
nlohmann::json to_json(const pybind11::handle& obj);

}  // namespace perseus::python
