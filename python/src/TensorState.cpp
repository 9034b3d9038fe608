//===- TensorState.cpp - the program's tensors read from their C++ side ---===//
//
// Every co-executed step reads the program's persistent state (parameters,
// gradients, optimizer state, buffers) at its start and commits to it at
// its end: each tensor's data pointer, sizes, strides and element type,
// whether it is a plain dense CPU tensor, its autograd version. Through
// torch's Python bindings each of those is a method call or an attribute
// read (~0.2-0.8 us per tensor on tensors a step left cold, ~570 tensors a
// step on YOLOv3); here they are read from the tensors' `at::Tensor`.
// Part of the `_terra_dispatch` module (DispatchHook.cpp), which is built
// against torch's C++ headers; the front end has a Python path for each
// where the module is not built (torch 2.x machines), which is also its
// specification.
//
//===----------------------------------------------------------------------===//
#include "TensorState.h"

#include <torch/csrc/Dtype.h>
#include <torch/csrc/DynamicTypes.h>
#include <torch/csrc/autograd/python_variable.h>
#include <torch/csrc/autograd/variable.h>

#include <cstdint>
#include <type_traits>

namespace py = pybind11;

namespace {

/// Whether `previous` (a spec from the last call) still describes `t`:
/// the same tensor object and element type, and the data pointer, sizes
/// and strides `x` has now.
bool specStands(PyObject *previous, PyObject *t, PyObject *element,
                const at::Tensor &x, uintptr_t data) {
  if (!previous || !PyTuple_Check(previous) || PyTuple_GET_SIZE(previous) != 5)
    return false;
  PyObject *const *item = &PyTuple_GET_ITEM(previous, 0);
  // An int out of range reads as -1 with an error set: cleared, a miss.
  auto is = [](PyObject *v, auto value) {
    if (!PyLong_Check(v))
      return false;
    bool equal =
        (std::is_signed_v<decltype(value)>
             ? PyLong_AsLongLong(v) == (long long)value
             : PyLong_AsUnsignedLongLong(v) == (unsigned long long)value);
    if (PyErr_Occurred()) {
      PyErr_Clear();
      return false;
    }
    return equal;
  };
  if (item[4] != t || item[1] != element || !is(item[0], data))
    return false;
  auto same = [&](PyObject *tuple, c10::IntArrayRef values) {
    if (!PyTuple_Check(tuple) ||
        PyTuple_GET_SIZE(tuple) != Py_ssize_t(values.size()))
      return false;
    for (size_t i = 0; i < values.size(); ++i)
      if (!is(PyTuple_GET_ITEM(tuple, i), values[i]))
        return false;
    return true;
  };
  return same(item[2], x.sizes()) && same(item[3], x.strides());
}

/// A tuple of Python ints.
PyObject *intTuple(c10::IntArrayRef values) {
  PyObject *tuple = PyTuple_New(Py_ssize_t(values.size()));
  if (!tuple)
    throw py::error_already_set();
  for (size_t i = 0; i < values.size(); ++i) {
    PyObject *v = PyLong_FromLongLong(values[i]);
    if (!v) {
      Py_DECREF(tuple);
      throw py::error_already_set();
    }
    PyTuple_SET_ITEM(tuple, i, v);
  }
  return tuple;
}

/// Whether `t` is a torch.Tensor or an nn.Parameter itself: a subclass
/// may override what its Python methods say (`data_ptr`, `is_complex`).
bool tensorOrParameter(PyObject *t) {
  static PyObject *parameterType = [] {
    py::object type = py::module_::import("torch.nn").attr("Parameter");
    return type.release().ptr();
  }();
  PyObject *type = reinterpret_cast<PyObject *>(Py_TYPE(t));
  return type == THPVariableClass || type == parameterType;
}

/// `t`'s C++ tensor when `t` is a torch.Tensor or an nn.Parameter itself
/// with storage and no Python dispatch; else null.
const at::Tensor *plainTensor(PyObject *t) {
  if (!tensorOrParameter(t))
    return nullptr;
  const at::Tensor *x = &THPVariable_Unpack(t);
  if (!x->has_storage() || x->unsafeGetTensorImpl()->is_python_dispatch())
    return nullptr;
  return x;
}

/// runio.tensor_spec of each tensor, read from the tensors' C++ side, with
/// the spec of the last call (`previous`, same order) returned again where
/// it still stands: the runtime then reuses what it read from it (Graph.
/// new_run, Run.fetch_into). A tensor of another type than Tensor or
/// Parameter (a subclass may override data_ptr) or without storage goes
/// through `slow` (runio.tensor_spec), as does an element type `elements`
/// does not name (it raises, naming it).
py::list tensorSpecs(py::list tensors, py::dict elements, py::object previous,
                     py::object slow) {
  PyObject *last = PyList_Check(previous.ptr()) ? previous.ptr() : nullptr;
  Py_ssize_t n = PyList_GET_SIZE(tensors.ptr());
  py::list out(n);
  for (Py_ssize_t k = 0; k < n; ++k) {
    PyObject *t = PyList_GET_ITEM(tensors.ptr(), k);
    const at::Tensor *x = plainTensor(t);
    PyObject *element = nullptr;
    if (x) {
      PyObject *dtype =
          reinterpret_cast<PyObject *>(torch::getTHPDtype(x->scalar_type()));
      element = PyDict_GetItemWithError(elements.ptr(), dtype);
      if (!element && PyErr_Occurred())
        throw py::error_already_set();
    }
    if (!element) { // not a plain tensor, or an unknown element type
      PyObject *spec = PyObject_CallOneArg(slow.ptr(), t);
      if (!spec)
        throw py::error_already_set();
      PyList_SET_ITEM(out.ptr(), k, spec);
      continue;
    }
    uintptr_t data = reinterpret_cast<uintptr_t>(x->data_ptr());
    PyObject *before =
        last && k < PyList_GET_SIZE(last) ? PyList_GET_ITEM(last, k) : nullptr;
    if (specStands(before, t, element, *x, data)) {
      PyList_SET_ITEM(out.ptr(), k, Py_NewRef(before));
      continue;
    }
    PyObject *spec = PyTuple_New(5);
    if (!spec)
      throw py::error_already_set();
    PyList_SET_ITEM(out.ptr(), k, spec); // owned by `out` from here
    PyObject *ptr = PyLong_FromUnsignedLongLong(data);
    if (!ptr)
      throw py::error_already_set();
    PyTuple_SET_ITEM(spec, 0, ptr);
    PyTuple_SET_ITEM(spec, 1, Py_NewRef(element));
    // A plain tuple (runio.tensor_spec's torch.Size is one): torch 2.x's
    // libtorch_python does not export THPSize_NewFromSizes.
    PyTuple_SET_ITEM(spec, 2, intTuple(x->sizes()));
    PyTuple_SET_ITEM(spec, 3, intTuple(x->strides()));
    PyTuple_SET_ITEM(spec, 4, Py_NewRef(t));
  }
  return out;
}

/// tracing._Recorder.state_name_of's index: each non-empty tensor's data
/// pointer -> the names of the tensors there, in order; None when one is
/// not a plain tensor with storage (a subclass may override data_ptr: the
/// caller reads them through Python then).
py::object pointerIndex(py::list names, py::list tensors) {
  Py_ssize_t n = PyList_GET_SIZE(tensors.ptr());
  if (PyList_GET_SIZE(names.ptr()) != n)
    throw py::value_error("pointer_index: as many names as tensors");
  py::dict index;
  for (Py_ssize_t k = 0; k < n; ++k) {
    PyObject *t = PyList_GET_ITEM(tensors.ptr(), k);
    const at::Tensor *x = plainTensor(t);
    if (!x)
      return py::none();
    if (x->numel() == 0)
      continue;
    py::object ptr =
        py::reinterpret_steal<py::object>(PyLong_FromUnsignedLongLong(
            reinterpret_cast<uintptr_t>(x->data_ptr())));
    if (!ptr)
      throw py::error_already_set();
    PyObject *names_at = PyDict_GetItemWithError(index.ptr(), ptr.ptr());
    if (!names_at) {
      if (PyErr_Occurred())
        throw py::error_already_set();
      py::list fresh;
      index[ptr] = fresh;
      names_at = fresh.ptr();
    }
    if (PyList_Append(names_at, PyList_GET_ITEM(names.ptr(), k)) < 0)
      throw py::error_already_set();
  }
  return index;
}

/// Whether every tensor of `tensors` is a dense (strided) CPU tensor of a
/// real element type, and so is its `.grad` where it has one: the
/// parameters for which torch 1.13's multi-tensor optimizer update equals
/// its per-parameter one (function._multi_tensor_safe), read from the
/// tensors' C++ side (~5 Python attribute reads per parameter otherwise).
/// None when one is of another type than Tensor or Parameter (its Python
/// class may say otherwise: the caller asks it).
py::object denseCpuReal(py::list tensors) {
  auto plain = [](const at::Tensor &x) {
    return x.layout() == c10::kStrided && x.device().is_cpu() &&
           !x.is_complex();
  };
  for (py::handle h : tensors)
    if (!tensorOrParameter(h.ptr()))
      return py::none();
  for (py::handle h : tensors) {
    const at::Tensor &x = THPVariable_Unpack(h.ptr());
    const at::Tensor &g = x.grad();
    if (!plain(x) || (g.defined() && g.layout() != c10::kStrided))
      return py::bool_(false);
  }
  return py::bool_(true);
}

/// replay.TapeRecorder._commit_plan's loop, natively: for each commit `c`
/// (name, fetch id, instance) and the tensor its slot holds: a plain CPU
/// Tensor or Parameter is a direct commit, whose item is (fid, inst, the
/// spec it crossed with at the start (`specs[name]`) when that is still
/// this tensor at this data pointer, else `slow(t)`); anything else is
/// left to the slots' setters. Returns (direct, items, late).
py::tuple commitPlan(py::list commits, py::list held, py::dict specs,
                     py::object slow) {
  Py_ssize_t n = PyList_GET_SIZE(commits.ptr());
  if (PyList_GET_SIZE(held.ptr()) != n)
    throw py::value_error("commit_plan: one held tensor per commit");
  py::list direct, items, late;
  for (Py_ssize_t k = 0; k < n; ++k) {
    PyObject *c = PyList_GET_ITEM(commits.ptr(), k);
    PyObject *t = PyList_GET_ITEM(held.ptr(), k);
    if (!PyTuple_Check(c) || PyTuple_GET_SIZE(c) < 3)
      throw py::value_error("commit_plan: a commit is (name, fid, inst)");
    const at::Tensor *x = t == Py_None ? nullptr : plainTensor(t);
    if (!x || !x->is_cpu()) {
      if (PyList_Append(late.ptr(), c) < 0)
        throw py::error_already_set();
      continue;
    }
    py::object pair = py::reinterpret_steal<py::object>(PyTuple_Pack(2, c, t));
    if (!pair || PyList_Append(direct.ptr(), pair.ptr()) < 0)
      throw py::error_already_set();
    PyObject *spec =
        PyDict_GetItemWithError(specs.ptr(), PyTuple_GET_ITEM(c, 0));
    if (!spec && PyErr_Occurred())
      throw py::error_already_set();
    py::object use;
    bool stands = false;
    if (spec && PyTuple_Check(spec) && PyTuple_GET_SIZE(spec) == 5 &&
        PyTuple_GET_ITEM(spec, 4) == t) {
      unsigned long long ptr =
          PyLong_AsUnsignedLongLong(PyTuple_GET_ITEM(spec, 0));
      if (PyErr_Occurred())
        PyErr_Clear();
      else
        stands = ptr == reinterpret_cast<uintptr_t>(x->data_ptr());
    }
    if (stands)
      use = py::reinterpret_borrow<py::object>(spec);
    else
      use = slow(py::handle(t));
    py::object item = py::reinterpret_steal<py::object>(PyTuple_Pack(
        3, PyTuple_GET_ITEM(c, 1), PyTuple_GET_ITEM(c, 2), use.ptr()));
    if (!item || PyList_Append(items.ptr(), item.ptr()) < 0)
      throw py::error_already_set();
  }
  return py::make_tuple(direct, items, late);
}

} // namespace

void terra::bindTensorState(py::module_ &m) {
  m.def(
      "bump_versions",
      [](py::list tensors) {
        // A commit writes state tensors in place outside torch (Run.
        // fetch_into): their autograd versions go up as an in-place op's
        // would, without dispatching a no-op copy per tensor.
        for (py::handle h : tensors) {
          if (!THPVariable_Check(h.ptr()))
            throw py::type_error("bump_versions takes tensors");
          torch::autograd::impl::bump_version(THPVariable_Unpack(h.ptr()));
        }
      },
      py::arg("tensors"),
      "Bumps each tensor's autograd version counter, as an in-place op "
      "does.");
  m.def("tensor_specs", &tensorSpecs, py::arg("tensors"), py::arg("elements"),
        py::arg("previous"), py::arg("slow"),
        "runio.tensor_spec of each tensor; a spec of `previous` (the last "
        "call's list) that still stands is returned again.");
  m.def("dense_cpu_real", &denseCpuReal, py::arg("tensors"),
        "Whether every tensor (and its .grad) is a dense CPU tensor of a "
        "real element type; None if one is not a Tensor or Parameter.");
  m.def("commit_plan", &commitPlan, py::arg("commits"), py::arg("held"),
        py::arg("specs"), py::arg("slow"),
        "(direct, items, late) of a replay's commit (replay._commit_plan).");
  m.def("pointer_index", &pointerIndex, py::arg("names"), py::arg("tensors"),
        "Data pointer -> the names of the non-empty tensors there (None if "
        "one is not a plain tensor with storage).");
}
