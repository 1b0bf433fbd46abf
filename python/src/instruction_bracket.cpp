#include "instruction_bracket.hpp"

#include <structmember.h>

#include <chrono>
#include <string>
#include <vector>

namespace py = pybind11;

namespace perseus::python {

namespace {

using Clock = std::chrono::steady_clock;

struct Label {
  int stage;
  char letter;
  long chunk;  // the microbatch; in BracketState::counts_, the next count
};

// What one attachment's brackets share: whether an iteration runs, the labels of the one running
// and of the last, each (stage, kind)'s calls so far, and the time spent in the hooks.
class BracketState {
 public:
  bool in_step() const { return in_step_; }
  double hook_seconds = 0.0;

  void begin_iteration() {
    current_.clear();
    counts_.clear();
    in_step_ = true;
  }
  void end_iteration() {
    in_step_ = false;
    last_.swap(current_);
    current_.clear();
  }
  // The call's number among its (stage, kind)'s calls in this iteration (0, 1, ...).
  long count(int stage, char letter) {
    for (Label& c : counts_) {
      if (c.stage == stage && c.letter == letter) return c.chunk++;
    }
    counts_.push_back({stage, letter, 1});
    return 0;
  }
  void record(int stage, char letter, long chunk) { current_.push_back({stage, letter, chunk}); }

  py::list last_iteration() const {
    py::list out;
    for (const Label& l : last_) {
      out.append(std::to_string(l.stage) + l.letter + std::to_string(l.chunk));
    }
    return out;
  }

 private:
  bool in_step_ = false;
  std::vector<Label> current_, last_, counts_;
};

PyTypeObject* bracket_type = nullptr;

struct Bracket {
  PyObject_HEAD vectorcallfunc vectorcall;
  PyObject* function;
  PyObject* begin;
  PyObject* end;
  PyObject* state_object;  // the BracketState's Python object, kept alive
  BracketState* state;
  PyObject* stage;               // the stage index as a Python int, passed to the hooks
  PyObject* kind;                // the kind (a choice's if_set kind)
  PyObject* other_kind;          // a choice's otherwise kind, or nullptr
  PyObject* kind_keyword;        // a choice's keyword, or nullptr
  PyObject* microbatch_keyword;  // or nullptr
  Py_ssize_t kind_position;
  Py_ssize_t microbatch_position;  // -1: keyword only
  int stage_index;
  char letter, other_letter;
  bool kind_default;
  bool has_microbatch;
};

// The call's argument at `position` (-1: none) or named `keyword` (nullptr: none); nullptr when
// it has neither.
PyObject* argument(PyObject* const* args, Py_ssize_t nargs, PyObject* kwnames, Py_ssize_t position,
                   PyObject* keyword) {
  if (position >= 0 && position < nargs) return args[position];
  if (keyword == nullptr || kwnames == nullptr) return nullptr;
  const Py_ssize_t n = PyTuple_GET_SIZE(kwnames);
  for (Py_ssize_t i = 0; i < n; ++i) {
    PyObject* name = PyTuple_GET_ITEM(kwnames, i);
    if (name == keyword || PyUnicode_Compare(name, keyword) == 0) return args[nargs + i];
  }
  return nullptr;
}

double seconds(Clock::duration d) {
  return std::chrono::duration<double>(d).count();
}

PyObject* call(PyObject* self, PyObject* const* args, size_t nargsf, PyObject* kwnames) {
  auto* b = reinterpret_cast<Bracket*>(self);
  if (b->function == nullptr) {
    PyErr_SetString(PyExc_RuntimeError, "perseus: this instruction bracket was cleared");
    return nullptr;
  }
  if (!b->state->in_step()) return PyObject_Vectorcall(b->function, args, nargsf, kwnames);
  const Clock::time_point t0 = Clock::now();
  const Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
  PyObject* kind = b->kind;
  char letter = b->letter;
  if (b->other_kind != nullptr) {
    PyObject* flag = argument(args, nargs, kwnames, b->kind_position, b->kind_keyword);
    const int set = flag == nullptr ? b->kind_default : PyObject_IsTrue(flag);
    if (set < 0) return nullptr;
    if (!set) {
      kind = b->other_kind;
      letter = b->other_letter;
    }
  }
  long chunk = b->state->count(b->stage_index, letter);
  if (b->has_microbatch) {
    PyObject* given = argument(args, nargs, kwnames, b->microbatch_position, b->microbatch_keyword);
    if (given != nullptr && given != Py_None) {
      const long value = PyLong_AsLong(given);
      if (value == -1 && PyErr_Occurred()) {
        PyErr_Clear();  // not an int: numbered in run order, as when it is missing
      } else {
        chunk = value;
      }
    }
  }
  b->state->record(b->stage_index, letter, chunk);
  PyObject* hook_args[2] = {kind, b->stage};
  PyObject* began = PyObject_Vectorcall(b->begin, hook_args, 2, nullptr);
  const Clock::time_point t1 = Clock::now();
  b->state->hook_seconds += seconds(t1 - t0);
  if (began == nullptr) return nullptr;
  Py_DECREF(began);
  PyObject* result = PyObject_Vectorcall(b->function, args, nargsf, kwnames);
  PyObject *type = nullptr, *value = nullptr, *traceback = nullptr;
  if (result == nullptr) PyErr_Fetch(&type, &value, &traceback);
  const Clock::time_point t2 = Clock::now();
  PyObject* ended = PyObject_Vectorcall(b->end, hook_args, 2, nullptr);
  b->state->hook_seconds += seconds(Clock::now() - t2);
  if (ended != nullptr) {
    Py_DECREF(ended);
    if (result == nullptr) PyErr_Restore(type, value, traceback);
    return result;
  }
  // The end hook raised: its error, with the function's (if any) as its context, as a Python
  // `finally` would.
  if (result == nullptr) {
    _PyErr_ChainExceptions(type, value, traceback);
  } else {
    Py_DECREF(result);
  }
  return nullptr;
}

int traverse(PyObject* self, visitproc visit, void* arg) {
  auto* b = reinterpret_cast<Bracket*>(self);
  Py_VISIT(Py_TYPE(self));
  Py_VISIT(b->function);
  Py_VISIT(b->begin);
  Py_VISIT(b->end);
  Py_VISIT(b->state_object);
  return 0;
}

int clear(PyObject* self) {
  auto* b = reinterpret_cast<Bracket*>(self);
  Py_CLEAR(b->function);
  Py_CLEAR(b->begin);
  Py_CLEAR(b->end);
  Py_CLEAR(b->state_object);
  Py_CLEAR(b->stage);
  Py_CLEAR(b->kind);
  Py_CLEAR(b->other_kind);
  Py_CLEAR(b->kind_keyword);
  Py_CLEAR(b->microbatch_keyword);
  return 0;
}

void dealloc(PyObject* self) {
  PyTypeObject* type = Py_TYPE(self);
  PyObject_GC_UnTrack(self);
  clear(self);
  type->tp_free(self);
  Py_DECREF(type);
}

PyObject* repr(PyObject* self) {
  auto* b = reinterpret_cast<Bracket*>(self);
  if (b->function == nullptr) return PyUnicode_FromString("<perseus instruction bracket, cleared>");
  return PyUnicode_FromFormat("<perseus instruction bracket: %S of stage %d around %R>", b->kind,
                              b->stage_index, b->function);
}

PyMemberDef members[] = {
    {"__vectorcalloffset__", T_PYSSIZET, offsetof(Bracket, vectorcall), READONLY, nullptr},
    {"__wrapped__", T_OBJECT, offsetof(Bracket, function), READONLY, nullptr},
    {nullptr, 0, 0, 0, nullptr}};

PyType_Slot slots[] = {
    {Py_tp_dealloc, reinterpret_cast<void*>(dealloc)},
    {Py_tp_traverse, reinterpret_cast<void*>(traverse)},
    {Py_tp_clear, reinterpret_cast<void*>(clear)},
    {Py_tp_call, reinterpret_cast<void*>(PyVectorcall_Call)},
    {Py_tp_repr, reinterpret_cast<void*>(repr)},
    {Py_tp_members, members},
    {Py_tp_doc, const_cast<char*>("A compute function bracketed as one instruction.")},
    {0, nullptr}};

PyType_Spec spec = {"perseus._perseus._InstructionBracket", sizeof(Bracket), 0,
                    Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_VECTORCALL | Py_TPFLAGS_HAVE_GC, slots};

// The letter of an instruction kind; ValueError for another name.
char letter_of(const py::handle& kind) {
  const std::string name = py::cast<std::string>(kind);
  if (name == "forward") return 'F';
  if (name == "backward") return 'B';
  if (name == "backward_input") return 'I';
  if (name == "backward_weight") return 'W';
  throw py::value_error("perseus: instruction kind '" + name +
                        "' (expected forward, backward, backward_input or backward_weight)");
}

// An interned str, or nullptr for None.
PyObject* keyword_of(const py::handle& keyword) {
  if (keyword.is_none()) return nullptr;
  PyObject* name = py::str(keyword).release().ptr();
  PyUnicode_InternInPlace(&name);
  return name;
}

py::object make_bracket(py::object function, py::object begin, py::object end, py::object state,
                        py::object kind, int stage, py::object microbatch) {
  if (stage < 0) throw py::value_error("perseus: a bracket's stage must be >= 0");
  for (const py::object* f : {&function, &begin, &end}) {
    if (!PyCallable_Check(f->ptr())) throw py::type_error("perseus: _bracket takes callables");
  }
  auto* shared = state.cast<BracketState*>();
  PyObject* self = bracket_type->tp_alloc(bracket_type, 0);
  if (self == nullptr) throw py::error_already_set();
  auto object = py::reinterpret_steal<py::object>(self);
  auto* b = reinterpret_cast<Bracket*>(self);
  b->vectorcall = call;
  b->state = shared;
  b->state_object = state.inc_ref().ptr();
  b->stage_index = stage;
  b->stage = py::int_(stage).release().ptr();
  b->kind_position = -1;
  b->microbatch_position = -1;
  if (py::isinstance<py::tuple>(kind)) {
    auto choice = kind.cast<py::tuple>();
    if (choice.size() != 5) {
      throw py::value_error(
          "perseus: a kind choice is (if_set, otherwise, position, keyword, default)");
    }
    b->letter = letter_of(choice[0]);
    b->other_letter = letter_of(choice[1]);
    b->kind = py::str(choice[0]).release().ptr();
    b->other_kind = py::str(choice[1]).release().ptr();
    b->kind_position = choice[2].cast<Py_ssize_t>();
    b->kind_keyword = keyword_of(choice[3]);
    b->kind_default = choice[4].cast<bool>();
  } else {
    b->letter = letter_of(kind);
    b->kind = py::str(kind).release().ptr();
  }
  if (!microbatch.is_none()) {
    auto where = microbatch.cast<py::tuple>();
    if (where.size() != 2) throw py::value_error("perseus: microbatch is (position, keyword)");
    b->has_microbatch = true;
    b->microbatch_position = where[0].cast<Py_ssize_t>();
    b->microbatch_keyword = keyword_of(where[1]);
  }
  b->function = function.inc_ref().ptr();
  b->begin = begin.inc_ref().ptr();
  b->end = end.inc_ref().ptr();
  return object;
}

}  // namespace

void add_instruction_bracket(py::module_& m) {
  py::class_<BracketState>(m, "_BracketState")
      .def(py::init<>())
      .def_property_readonly("in_step", &BracketState::in_step)
      .def_readwrite("hook_seconds", &BracketState::hook_seconds)
      .def("begin_iteration", &BracketState::begin_iteration)
      .def("end_iteration", &BracketState::end_iteration)
      .def_property_readonly("last_iteration", &BracketState::last_iteration);
  bracket_type = reinterpret_cast<PyTypeObject*>(PyType_FromSpec(&spec));
  if (bracket_type == nullptr) throw py::error_already_set();
  m.attr("_InstructionBracket") = py::handle(reinterpret_cast<PyObject*>(bracket_type));
  m.def("_bracket", &make_bracket, py::arg("function"), py::arg("begin"), py::arg("end"),
        py::arg("state"), py::arg("kind"), py::arg("stage"), py::arg("microbatch") = py::none());
}

}  // namespace perseus::python
