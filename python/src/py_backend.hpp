// The GPU backends the Python optimizer drives (python/src/bindings.cpp): a SimGpu or an NvmlGpu
// that Python also holds, or any Python object with the GpuBackend methods, whose calls take the
// GIL and whose exceptions become perseus::Error.
#pragma once

#include <pybind11/pybind11.h>

#include <memory>

#include "perseus/client/gpu_backend.hpp"

namespace perseus::python {

// The backend for the optimizer's `gpu` argument (a SimGpu, an NvmlGpu or a Python object; the
// strings "nvml" and "sim" are resolved by the perseus package before this). Throws
// perseus::Error for a string or an object that lacks a GpuBackend method.
std::unique_ptr<client::GpuBackend> make_backend(pybind11::object gpu);

}  // namespace perseus::python
