#include "instruction_hooks.hpp"

#include <structmember.h>

#include <cstddef>
#include <exception>
#include <limits>
#include <string>

#include "perseus/util/error.hpp"
#include "py_convert.hpp"

namespace py = pybind11;

namespace perseus::python {

namespace {

PyTypeObject* hook_type = nullptr;
PyObject* error_type = nullptr;  // PerseusError

struct Hook {
  PyObject_HEAD vectorcallfunc vectorcall;
  PyObject* owner;  // the Python optimizer, kept alive
  std::function<client::PipelineFrequencyOptimizer&()>* client;
  bool begin;
};

// The stage argument as stage_index takes it: None -> -1; a negative index is refused, and one
// past an int overflows (as pybind11's int conversion says).
bool stage_of(PyObject* arg, int& stage) {
  stage = -1;
  if (arg == Py_None) return true;
  const long value = PyLong_AsLong(arg);
  if (value == -1 && PyErr_Occurred()) return false;
  const std::string refusal = stage_refusal(value);
  if (!refusal.empty()) {
    PyErr_SetString(PyExc_ValueError, refusal.c_str());
    return false;
  }
  if (value > std::numeric_limits<int>::max()) {
    PyErr_SetString(PyExc_OverflowError, "stage does not fit in an int");
    return false;
  }
  stage = static_cast<int>(value);
  return true;
}

PyObject* call(PyObject* self, PyObject* const* args, size_t nargsf, PyObject* kwnames) {
  auto* hook = reinterpret_cast<Hook*>(self);
  if (kwnames != nullptr || PyVectorcall_NARGS(nargsf) != 2) {
    PyErr_SetString(PyExc_TypeError, "an instruction hook takes (kind, stage)");
    return nullptr;
  }
  Py_ssize_t size = 0;
  const char* kind = PyUnicode_AsUTF8AndSize(args[0], &size);
  int stage = -1;
  if (kind == nullptr || !stage_of(args[1], stage)) return nullptr;
  const std::string name(kind, static_cast<std::size_t>(size));
  std::string error;
  PyObject* type = error_type;
  PyThreadState* state = PyEval_SaveThread();
  try {
    client::PipelineFrequencyOptimizer& c = (*hook->client)();
    if (hook->begin) {
      c.on_instruction_begin(name, stage);
    } else {
      c.on_instruction_end(name, stage);
    }
  } catch (const Error& e) {
    error = e.what();
  } catch (const std::exception& e) {
    error = e.what();
    type = PyExc_RuntimeError;
  }
  PyEval_RestoreThread(state);
  if (!error.empty()) {
    PyErr_SetString(type, error.c_str());
    return nullptr;
  }
  Py_RETURN_NONE;
}

void dealloc(PyObject* self) {
  auto* hook = reinterpret_cast<Hook*>(self);
  PyTypeObject* type = Py_TYPE(self);
  delete hook->client;
  Py_XDECREF(hook->owner);
  type->tp_free(self);
  Py_DECREF(type);
}

PyMemberDef members[] = {
    {"__vectorcalloffset__", T_PYSSIZET, offsetof(Hook, vectorcall), READONLY, nullptr},
    {nullptr, 0, 0, 0, nullptr}};

PyType_Slot slots[] = {{Py_tp_dealloc, reinterpret_cast<void*>(dealloc)},
                       {Py_tp_call, reinterpret_cast<void*>(PyVectorcall_Call)},
                       {Py_tp_members, members},
                       {Py_tp_doc, const_cast<char*>("An instruction hook: hook(kind, stage).")},
                       {0, nullptr}};

PyType_Spec spec = {"perseus._perseus._InstructionHook", sizeof(Hook), 0,
                    Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_VECTORCALL, slots};

py::object make_hook(const py::object& owner,
                     const std::function<client::PipelineFrequencyOptimizer&()>& client,
                     bool begin) {
  PyObject* self = hook_type->tp_alloc(hook_type, 0);
  if (self == nullptr) throw py::error_already_set();
  auto* hook = reinterpret_cast<Hook*>(self);
  hook->vectorcall = call;
  hook->owner = owner.inc_ref().ptr();
  hook->client = new std::function<client::PipelineFrequencyOptimizer&()>(client);
  hook->begin = begin;
  return py::reinterpret_steal<py::object>(self);
}

}  // namespace

void add_instruction_hook_type(py::module_& m, py::handle perseus_error) {
  hook_type = reinterpret_cast<PyTypeObject*>(PyType_FromSpec(&spec));
  if (hook_type == nullptr) throw py::error_already_set();
  error_type = perseus_error.inc_ref().ptr();
  m.attr("_InstructionHook") = py::handle(reinterpret_cast<PyObject*>(hook_type));
}

py::tuple instruction_hooks(py::object owner,
                            std::function<client::PipelineFrequencyOptimizer&()> client) {
  return py::make_tuple(make_hook(owner, client, true), make_hook(owner, client, false));
}

}  // namespace perseus::python
