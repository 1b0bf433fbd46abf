// The framework adapters' wrapper around one compute function, as a plain CPython callable
// (`perseus._perseus._bracket`): while a training iteration runs it records the instruction's
// label ("0F3": stage, kind letter, microbatch), calls the begin hook, the function, then the end
// hook (also when the function raises), and counts the time spent in the hooks; outside an
// iteration it only calls the function. In a training step the caches are cold, and a Python
// wrapper's frames, closures and dict updates cost about as much as the hooks themselves; this
// one touches a few C++ fields. O(1) per call besides the hooks (the (stage, kind) counters are a
// short list searched linearly).
//
// Python side:
//   state = _BracketState()        shared by one attachment's brackets: in_step, hook_seconds,
//                                  begin_iteration(), end_iteration(), last_iteration
//   _bracket(function, begin, end, state, kind, stage, microbatch=None)
//     kind        "forward", "backward", "backward_input" or "backward_weight"; or a choice
//                 (if_set, otherwise, position, keyword, default): if_set when the call's argument
//                 at `position` (or `keyword`) is truthy, `default` when the call has neither
//     microbatch  None: each (stage, kind)'s calls numbered in the order they run; or
//                 (position, keyword): the call's int argument there (position -1: keyword only),
//                 numbered as None where the call has neither or passes None
//   begin and end are called as hook(kind, stage) (the client's _InstructionHook, or any callable).
#pragma once

#include <pybind11/pybind11.h>

namespace perseus::python {

// Adds _BracketState and _bracket to `m` (once, at import).
void add_instruction_bracket(pybind11::module_& m);

}  // namespace perseus::python
