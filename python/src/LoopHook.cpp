//===- LoopHook.cpp - loop iteration counting as a C trace function -------===//
//
// The front end identifies program loops from bytecode (python/terra/
// loops.py) and counts their iterations while a step runs. Counting needs a
// trace hook; a Python-level `sys.settrace` function costs one Python call
// per Python call and per traced line, and it slowed the whole co-execution
// host side 3-4x. This hook is a C `Py_tracefunc` instead: a call event
// looks the code object up in a table (its loop starts and entry offset,
// computed once by Python), a line event at a loop's first instruction
// bumps that loop's count for the frame's activation. Everything else
// returns at once.
//
// The tracer suspends the hook while its own code runs (`suspend` /
// `resume` around each intercepted op), so the interpreter leaves tracing
// mode there: only the user's code and torch's Python layers run traced.
//
//===----------------------------------------------------------------------===//
#include "LoopHook.h"

#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <frameobject.h>

#include <algorithm>
#include <cstdint>
#include <unordered_map>
#include <vector>

namespace py = pybind11;

namespace {

struct CodeInfo {
  py::object code; // keeps the code object (and its address) alive
  bool hasLoops = false;
  int entry = 0;
  std::vector<int> starts; // sorted first offsets of the code's loops
};

struct PairHash {
  size_t operator()(const std::pair<uint64_t, int> &k) const {
    return std::hash<uint64_t>()(k.first * 1000003u) ^
           std::hash<int>()(k.second);
  }
};

/// The counter of one step (see the file comment). Frames are identified
/// by address and never referenced, like the Python version did with id():
/// a frame freed and its address reused by a later call is told apart by
/// the new activation that call's event issues.
class LoopHook {
public:
  explicit LoopHook(py::object codeInfo) : codeInfo(std::move(codeInfo)) {}
  ~LoopHook() { clear(); }

  /// Installs the hook. `late`: the step is already running (a replay left
  /// its tape, python/terra/loops.py `start_late`): a generator or coroutine
  /// resumed from then on that the hook has not seen started before it, so
  /// its loops' iterations so far are unknown (`unknownResume`).
  void start(bool late) {
    if (installed)
      throw py::value_error("the loop hook is already installed");
    capsule = py::capsule(this);
    PyEval_SetTrace(&LoopHook::trace, capsule.ptr());
    installed = true;
    suspended = false;
    startedLate = late;
    unknownResume = false;
  }

  bool sawUnknownResume() const { return unknownResume; }

  /// Gives `frame` activation `activation` and its loops starting at the
  /// given offsets these counts (a late start continuing the numbering of
  /// the tape a replay followed); later activations are numbered above.
  void seed(py::handle frame, uint64_t activation,
            const std::vector<std::pair<int, int>> &loopCounts) {
    auto *f = reinterpret_cast<PyFrameObject *>(frame.ptr());
    activations[f] = activation;
    for (const auto &[start, n] : loopCounts)
      counts[{activation, start}] = n;
    issued = std::max(issued, activation);
  }

  /// Numbers later activations above `n`.
  void reserve(uint64_t n) { issued = std::max(issued, n); }

  void stop() {
    if (installed && !suspended)
      PyEval_SetTrace(nullptr, nullptr);
    installed = false;
    suspended = false;
    capsule = py::object();
  }

  /// Leaves tracing mode while the tracer's own code runs; true if it did
  /// (the caller then resumes).
  bool suspend() {
    if (!installed || suspended)
      return false;
    PyEval_SetTrace(nullptr, nullptr);
    suspended = true;
    return true;
  }

  void resume() {
    if (!installed || !suspended)
      return;
    PyEval_SetTrace(&LoopHook::trace, capsule.ptr());
    suspended = false;
  }

  /// The activation of a frame running a code object with loops; a frame
  /// the hook has not seen (it started before the hook) gets a new one.
  uint64_t activation(py::handle frame) {
    auto *f = reinterpret_cast<PyFrameObject *>(frame.ptr());
    auto it = activations.find(f);
    if (it != activations.end())
      return it->second;
    return activate(f);
  }

  int count(uint64_t activation, int start) const {
    auto it = counts.find({activation, start});
    return it == counts.end() ? 0 : it->second;
  }

  /// Forgets the step's frames. Activations restart from 1, so two steps
  /// making the same calls number them alike (a co-executor catching up
  /// on a tape uses the numbers of the step the tape was made from).
  void clear() {
    activations.clear();
    counts.clear();
    issued = 0;
  }

private:
  static int trace(PyObject *obj, PyFrameObject *frame, int what, PyObject *) {
    if (what != PyTrace_CALL && what != PyTrace_LINE)
      return 0;
    auto *self = static_cast<LoopHook *>(PyCapsule_GetPointer(obj, nullptr));
    if (!self) {
      PyErr_Clear();
      return 0;
    }
    PyCodeObject *code = PyFrame_GetCode(frame);
    const CodeInfo *info = self->lookup(code);
    Py_DECREF(code);
    if (!info || !info->hasLoops)
      return 0;
    int lasti = PyFrame_GetLasti(frame);
    if (what == PyTrace_CALL) {
      if (self->startedLate && lasti > info->entry &&
          !self->activations.count(frame))
        self->unknownResume = true;
      if (lasti <= info->entry || !self->activations.count(frame))
        self->activate(frame);
      return 0;
    }
    if (!std::binary_search(info->starts.begin(), info->starts.end(), lasti))
      return 0;
    auto it = self->activations.find(frame);
    uint64_t act = it == self->activations.end() ? 0 : it->second;
    ++self->counts[{act, lasti}];
    return 0;
  }

  uint64_t activate(PyFrameObject *frame) {
    activations[frame] = ++issued;
    return issued;
  }

  const CodeInfo *lookup(PyCodeObject *code) {
    auto it = codes.find(code);
    if (it != codes.end())
      return &it->second;
    CodeInfo info;
    info.code =
        py::reinterpret_borrow<py::object>(reinterpret_cast<PyObject *>(code));
    // Python computes the loops of a code object once (loops.loop_ranges);
    // a failure there leaves the code uncounted rather than breaking the
    // user's program.
    PyObject *found =
        PyObject_CallOneArg(codeInfo.ptr(), reinterpret_cast<PyObject *>(code));
    if (!found) {
      PyErr_Clear();
    } else {
      try {
        auto pair = py::reinterpret_steal<py::object>(found);
        if (!pair.is_none()) {
          auto tup = pair.cast<py::tuple>();
          info.entry = tup[0].cast<int>();
          for (auto s : tup[1])
            info.starts.push_back(s.cast<int>());
          std::sort(info.starts.begin(), info.starts.end());
          info.hasLoops = !info.starts.empty();
        }
      } catch (py::error_already_set &) {
        PyErr_Clear();
      } catch (py::cast_error &) {
      }
    }
    return &codes.emplace(code, std::move(info)).first->second;
  }

  py::object codeInfo;
  py::object capsule;
  bool installed = false;
  bool suspended = false;
  bool startedLate = false;
  bool unknownResume = false;
  uint64_t issued = 0;
  std::unordered_map<PyCodeObject *, CodeInfo> codes;
  std::unordered_map<PyFrameObject *, uint64_t> activations;
  std::unordered_map<std::pair<uint64_t, int>, int, PairHash> counts;
};

} // namespace

void terra::bindLoopHook(py::module_ &m) {
  py::class_<LoopHook>(m, "LoopHook", R"doc(
Counts loop iterations while a step runs, as a C trace function (see
python/terra/loops.py). `code_info(code)` returns (entry offset, loop start
offsets) for a code object with loops, or None.)doc")
      .def(py::init<py::object>(), py::arg("code_info"))
      .def("start", &LoopHook::start, py::arg("late") = false,
           "Installs the hook on the calling thread (`late`: mid-step).")
      .def("seed", &LoopHook::seed, py::arg("frame"), py::arg("activation"),
           py::arg("loop_counts"))
      .def("reserve", &LoopHook::reserve, py::arg("n"))
      .def("unknown_resume", &LoopHook::sawUnknownResume,
           "Whether, since a late start, a generator or coroutine with loops "
           "that started before the hook was resumed.")
      .def("stop", &LoopHook::stop, "Removes the hook.")
      .def("suspend", &LoopHook::suspend,
           "Leaves tracing mode; True if the caller must resume.")
      .def("resume", &LoopHook::resume)
      .def("activation", &LoopHook::activation, py::arg("frame"))
      .def("count", &LoopHook::count, py::arg("activation"), py::arg("start"))
      .def("clear", &LoopHook::clear);
}
