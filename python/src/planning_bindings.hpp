// Planning from Python (perseus/planning.py wraps it): `_read_profile`, `_plan` (one planning run,
// plan::plan_frontier, with the GIL released), `_load_frontier` (a directory `perseus plan`
// wrote) and `_Frontier`, whose rows are chosen through plan::FrontierQuery and exported through
// plan::write_plan_file exactly as the CLI's `plan export`; nothing here plans or chooses on its
// own.
#pragma once

#include <pybind11/pybind11.h>

namespace perseus::python {

void add_planning(pybind11::module_& m);

}  // namespace perseus::python
