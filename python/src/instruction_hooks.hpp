// The instruction hooks as plain CPython callables: `begin(kind, stage)` and `end(kind, stage)`
// call PipelineFrequencyOptimizer::on_instruction_begin / _end without pybind11's dispatcher. In a
// training step the hooks run with the caches cold (the step's tensors passed through them), and
// there the dispatcher's type registry and function records are most of what a hook costs: a
// trivial pybind11 call took 23 us cold against 7 us for a Python function (on a CPU job's CPU).
// Same semantics as the bound methods: the GIL is released around the call; a closed optimizer
// or a strict-mode problem raises PerseusError, a negative stage ValueError, wrong arguments
// TypeError.
#pragma once

#include <pybind11/pybind11.h>

#include <functional>

#include "perseus/client/optimizer.hpp"

namespace perseus::python {

// Adds the hook type to `m` (once, at import). `perseus_error` is the module's PerseusError.
void add_instruction_hook_type(pybind11::module_& m, pybind11::handle perseus_error);

// (begin, end) for the optimizer `owner` (kept alive by both); `client` returns its client, or
// throws perseus::Error when it was closed.
pybind11::tuple instruction_hooks(pybind11::object owner,
                                  std::function<client::PipelineFrequencyOptimizer&()> client);

}  // namespace perseus::python
