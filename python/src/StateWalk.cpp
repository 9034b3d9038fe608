//===- StateWalk.cpp - the persistent-state walk, natively ----------------===//
//
// A co-executed step reads its persistent state twice (python/terra/state.py,
// StateRegistry): at its start, to hand the graph the tensors it reads, and
// at its commit, to check the slots are those the tape's end expects. Each
// time the registry walks the module tree and the optimizers to find out
// whether what its slots were built from changed; then it reads every slot's
// tensor and (at the start) the tensor's runtime spec. In Python that was
// 0.3-0.4 ms per step on a 50-parameter ResNet, on the critical path of a
// graph-bound program (the graph idles from one run's end to the next run's
// first feed).
//
// `StateWalk.same` makes the walk in C++. It records every object and key
// the Python walk's result depends on (each module met, in pre-order, with
// its parameter, buffer and child entries; each optimizer's groups and
// their parameters; each optimizer state entry with its tensor-valued keys;
// each adopted tensor) as a list of addresses, and compares the list with
// the one last accepted. Equal lists: the same objects under the same keys,
// so the slots built from them still hold. The addresses stay valid because
// the registry keeps the accepted record's objects alive in a Python list
// (`accept` returns it), where the garbage collector sees them; the walk
// itself holds no reference. Anything it does not model exactly (a dict of
// another type, a parameter group without a list) makes it answer "changed",
// and the Python walk decides.
//
// `slot_tensors` reads the slots' tensors and `tensor_specs` makes their
// specs (runio.tensor_spec) in one call each.
//
//===----------------------------------------------------------------------===//

#include "StateWalk.h"

#include <Python.h>

#include <cstdint>
#include <initializer_list>
#include <string>
#include <vector>

namespace py = pybind11;

namespace {

/// Attribute and key names, interned once.
struct Names {
  PyObject *parameters = PyUnicode_InternFromString("_parameters");
  PyObject *buffers = PyUnicode_InternFromString("_buffers");
  PyObject *modules = PyUnicode_InternFromString("_modules");
  PyObject *paramGroups = PyUnicode_InternFromString("param_groups");
  PyObject *state = PyUnicode_InternFromString("state");
  PyObject *params = PyUnicode_InternFromString("params");
  PyObject *grad = PyUnicode_InternFromString("grad");
};
const Names &names() {
  static const Names *n =
      new Names; // never freed: outlives the interpreter's use
  return *n;
}

/// Section markers in a record: addresses no object has.
PyObject *marker(uintptr_t n) { return reinterpret_cast<PyObject *>(n); }
bool isMarker(PyObject *p) { return reinterpret_cast<uintptr_t>(p) < 64; }

class StateWalk {
public:
  StateWalk(py::object tensorType, py::object orderedDict,
            py::object defaultDict)
      : tensorType(std::move(tensorType)), orderedDict(std::move(orderedDict)),
        defaultDict(std::move(defaultDict)) {}

  /// Walks the registry's modules, optimizers and adopted tensors. True
  /// when the record equals the accepted one; otherwise the record waits
  /// for `accept`.
  bool same(py::list modules, py::list optimizers, py::list held) {
    pending.clear();
    hold.clear();
    pendingValid = walk(modules.ptr(), optimizers.ptr(), held.ptr());
    if (PyErr_Occurred())
      PyErr_Clear(); // the Python walk meets (and raises) it
    return pendingValid && acceptedValid && pending == accepted;
  }

  /// Makes the last walk's record the accepted one (the registry built
  /// its slots from the same state). Returns the record's objects, which
  /// the caller keeps alive for as long as the record stands.
  py::list accept() {
    py::list keep;
    // The attributes read stay held up to here: the record's addresses
    // are valid until `keep` holds its objects.
    acceptedValid = pendingValid;
    accepted.swap(pending);
    pending.clear();
    if (!acceptedValid) {
      accepted.clear();
      hold.clear();
      return keep;
    }
    for (size_t k = 0; k < heldFrom && k < accepted.size(); ++k)
      if (!isMarker(accepted[k]))
        keep.append(py::reinterpret_borrow<py::object>(accepted[k]));
    hold.clear();
    return keep;
  }

private:
  /// Calls fn(key, value) for each entry of `d` in the order its
  /// `.items()` gives. False for a mapping of a type it does not know.
  template <typename Fn> bool items(PyObject *d, Fn fn) {
    PyTypeObject *type = Py_TYPE(d);
    if (PyDict_Check(d) && PyDict_GET_SIZE(d) == 0)
      return type == &PyDict_Type ||
             type == reinterpret_cast<PyTypeObject *>(orderedDict.ptr()) ||
             type == reinterpret_cast<PyTypeObject *>(defaultDict.ptr());
    if (type == &PyDict_Type ||
        type == reinterpret_cast<PyTypeObject *>(defaultDict.ptr())) {
      Py_ssize_t pos = 0;
      PyObject *k, *v;
      while (PyDict_Next(d, &pos, &k, &v))
        if (!fn(k, v))
          return false;
      return true;
    }
    if (type != reinterpret_cast<PyTypeObject *>(orderedDict.ptr()))
      return false;
    // An OrderedDict's order is its own (move_to_end), not the dict's.
    PyObject *it = PyObject_GetIter(d);
    if (!it)
      return false;
    bool ok = true;
    while (PyObject *k = PyIter_Next(it)) {
      PyObject *v = PyDict_GetItemWithError(d, k); // borrowed; d holds k
      ok = v && fn(k, v);
      Py_DECREF(k);
      if (!ok)
        break;
    }
    Py_DECREF(it);
    return ok && !PyErr_Occurred();
  }

  /// `obj.<name>`, held until the next walk, or null.
  PyObject *attr(PyObject *obj, PyObject *name) {
    PyObject *v = PyObject_GetAttr(obj, name);
    if (v)
      hold.push_back(py::reinterpret_steal<py::object>(v));
    return v;
  }

  bool module(PyObject *mod, std::vector<PyObject *> &seen) {
    const Names &names = ::names();
    for (PyObject *s : seen)
      if (s == mod)
        return true; // met already: the Python walk skips it too
    seen.push_back(mod);
    pending.push_back(mod);
    PyObject *params = attr(mod, names.parameters);
    PyObject *buffers = params ? attr(mod, names.buffers) : nullptr;
    PyObject *children = buffers ? attr(mod, names.modules) : nullptr;
    if (!children)
      return false;
    auto entry = [&](PyObject *k, PyObject *v) {
      pending.push_back(k);
      pending.push_back(v);
      return true;
    };
    if (!items(params, entry))
      return false;
    pending.push_back(marker(1));
    if (!items(buffers, entry))
      return false;
    pending.push_back(marker(2));
    std::vector<PyObject *> kids;
    if (!items(children, [&](PyObject *k, PyObject *v) {
          pending.push_back(k);
          pending.push_back(v);
          if (v != Py_None)
            kids.push_back(v);
          return true;
        }))
      return false;
    pending.push_back(marker(3));
    for (PyObject *c : kids)
      if (!module(c, seen))
        return false;
    return true;
  }

  bool optimizer(PyObject *opt) {
    const Names &names = ::names();
    pending.push_back(opt);
    PyObject *groups = attr(opt, names.paramGroups);
    if (!groups || !PyList_Check(groups))
      return false;
    for (Py_ssize_t g = 0; g < PyList_GET_SIZE(groups); ++g) {
      PyObject *group = PyList_GET_ITEM(groups, g);
      if (!PyDict_Check(group))
        return false;
      PyObject *params = PyDict_GetItemWithError(group, names.params);
      if (!params || !PyList_Check(params))
        return false;
      pending.push_back(group);
      pending.push_back(params);
      for (Py_ssize_t k = 0; k < PyList_GET_SIZE(params); ++k)
        pending.push_back(PyList_GET_ITEM(params, k));
      pending.push_back(marker(4));
    }
    PyObject *state = attr(opt, names.state);
    if (!state)
      return false;
    pending.push_back(state);
    bool ok = items(state, [&](PyObject *p, PyObject *st) {
      pending.push_back(p);
      pending.push_back(st);
      if (!PyDict_CheckExact(st))
        return false;
      // The tensor-valued keys (what the slots name); other values (a
      // step count kept as a number) are read by nobody here.
      Py_ssize_t pos = 0;
      PyObject *k, *v;
      while (PyDict_Next(st, &pos, &k, &v)) {
        int is = PyObject_IsInstance(v, tensorType.ptr());
        if (is < 0)
          return false;
        if (is)
          pending.push_back(k);
      }
      pending.push_back(marker(5));
      return true;
    });
    pending.push_back(marker(6));
    return ok;
  }

  bool walk(PyObject *modules, PyObject *optimizers, PyObject *held) {
    for (Py_ssize_t m = 0; m < PyList_GET_SIZE(modules); ++m) {
      std::vector<PyObject *> seen;
      pending.push_back(marker(7));
      if (!module(PyList_GET_ITEM(modules, m), seen))
        return false;
    }
    pending.push_back(marker(8));
    for (Py_ssize_t o = 0; o < PyList_GET_SIZE(optimizers); ++o)
      if (!optimizer(PyList_GET_ITEM(optimizers, o)))
        return false;
    pending.push_back(marker(9));
    // Adopted tensors are held weakly: their addresses are compared (as
    // the Python walk compares their ids), not kept alive.
    heldFrom = pending.size();
    for (Py_ssize_t k = 0; k < PyList_GET_SIZE(held); ++k) {
      PyObject *ref = PyList_GET_ITEM(held, k);
      if (!PyWeakref_Check(ref))
        return false;
      pending.push_back(PyWeakref_GetObject(ref));
    }
    return true;
  }

  py::object tensorType, orderedDict, defaultDict;
  std::vector<PyObject *> pending, accepted;
  // Attributes read by the last walk (up to its `accept`).
  std::vector<py::object> hold;
  size_t heldFrom = 0;
  bool pendingValid = false, acceptedValid = false;
};

/// Slot kinds (state.py, StateSlot.kind).
enum SlotKind : int { kParam = 0, kGrad, kDictEntry, kBuffer, kHeld };

/// The tensor in one slot (a new reference), Py_None when it holds none,
/// or null with a Python error set.
PyObject *slotTensor(int kind, PyObject *obj, PyObject *key) {
  switch (kind) {
  case kParam:
    Py_INCREF(obj);
    return obj;
  case kGrad:
    return PyObject_GetAttr(obj, names().grad);
  case kDictEntry: { // st.get(key)
    PyObject *v = PyDict_GetItemWithError(obj, key);
    if (!v && PyErr_Occurred())
      return nullptr;
    v = v ? v : Py_None;
    Py_INCREF(v);
    return v;
  }
  case kBuffer: { // getattr(mod, attr): a registered buffer is in _buffers
    PyObject *buffers = PyObject_GetAttr(obj, names().buffers);
    if (!buffers)
      PyErr_Clear();
    PyObject *v = buffers && PyDict_Check(buffers)
                      ? PyDict_GetItemWithError(buffers, key)
                      : nullptr;
    Py_XDECREF(buffers); // the module holds the dict, the dict the buffer
    if (v) {
      Py_INCREF(v);
      return v;
    }
    if (PyErr_Occurred())
      return nullptr;
    return PyObject_GetAttr(obj, key);
  }
  case kHeld: {
    PyObject *v = PyWeakref_GetObject(obj);
    if (!v)
      return nullptr;
    Py_INCREF(v);
    return v;
  }
  default:
    PyErr_Format(PyExc_ValueError, "unknown state slot kind %d", kind);
    return nullptr;
  }
}

/// The tensor in slot `k` of the parallel lists (a new reference, Py_None
/// when it holds none); throws with the Python error set.
PyObject *slotAt(py::list &kinds, py::list &objs, py::list &keys,
                 Py_ssize_t k) {
  long kind = PyLong_AsLong(PyList_GET_ITEM(kinds.ptr(), k));
  if (kind == -1 && PyErr_Occurred())
    throw py::error_already_set();
  PyObject *t = slotTensor(static_cast<int>(kind),
                           PyList_GET_ITEM(objs.ptr(), k),
                           PyList_GET_ITEM(keys.ptr(), k));
  if (!t)
    throw py::error_already_set();
  return t;
}

/// The number of slots, when every list has one entry per slot.
Py_ssize_t slotCount(const char *what, std::initializer_list<py::list *> lists) {
  Py_ssize_t n = PyList_GET_SIZE((*lists.begin())->ptr());
  for (py::list *l : lists)
    if (PyList_GET_SIZE(l->ptr()) != n)
      throw py::value_error(std::string(what) +
                            ": the slot lists differ in length");
  return n;
}

/// name -> tensor for every slot holding one (StateRegistry.tensors).
py::dict slotTensors(py::list names, py::list kinds, py::list objs,
                     py::list keys) {
  Py_ssize_t n = slotCount("slot_tensors", {&names, &kinds, &objs, &keys});
  py::dict out;
  for (Py_ssize_t k = 0; k < n; ++k) {
    PyObject *t = slotAt(kinds, objs, keys, k);
    int failed =
        t == Py_None
            ? 0
            : PyDict_SetItem(out.ptr(), PyList_GET_ITEM(names.ptr(), k), t);
    Py_DECREF(t);
    if (failed)
      throw py::error_already_set();
  }
  return out;
}

/// [s.get() for s in slots] (StateRegistry.slot_values): each slot's
/// tensor, or None.
py::list slotList(py::list kinds, py::list objs, py::list keys) {
  Py_ssize_t n = slotCount("slot_list", {&kinds, &objs, &keys});
  py::list out(n);
  for (Py_ssize_t k = 0; k < n; ++k)
    PyList_SET_ITEM(out.ptr(), k, slotAt(kinds, objs, keys, k)); // (stolen)
  return out;
}

/// [runio.tensor_spec(t) for t in tensors]: (data pointer, element type,
/// shape, strides, t) each. A dtype `elements` does not name gives None
/// in its place (the caller raises, naming it).
py::list tensorSpecs(py::list tensors, py::dict elements) {
  static PyObject *dataPtr = PyUnicode_InternFromString("data_ptr");
  static PyObject *stride = PyUnicode_InternFromString("stride");
  static PyObject *shape = PyUnicode_InternFromString("shape");
  static PyObject *dtype = PyUnicode_InternFromString("dtype");
  Py_ssize_t n = PyList_GET_SIZE(tensors.ptr());
  py::list out(n);
  for (Py_ssize_t k = 0; k < n; ++k) {
    PyObject *t = PyList_GET_ITEM(tensors.ptr(), k);
    py::object type =
        py::reinterpret_steal<py::object>(PyObject_GetAttr(t, dtype));
    if (!type)
      throw py::error_already_set();
    PyObject *element = PyDict_GetItemWithError(elements.ptr(), type.ptr());
    if (!element) {
      if (PyErr_Occurred())
        throw py::error_already_set();
      PyList_SET_ITEM(out.ptr(), k, Py_NewRef(Py_None));
      continue;
    }
    PyObject *parts[5] = {PyObject_CallMethodNoArgs(t, dataPtr),
                          Py_NewRef(element), PyObject_GetAttr(t, shape),
                          PyObject_CallMethodNoArgs(t, stride), Py_NewRef(t)};
    if (!parts[0] || !parts[2] || !parts[3]) {
      for (PyObject *p : parts)
        Py_XDECREF(p);
      throw py::error_already_set();
    }
    PyObject *spec = PyTuple_New(5);
    if (!spec) {
      for (PyObject *p : parts)
        Py_DECREF(p);
      throw py::error_already_set();
    }
    for (int j = 0; j < 5; ++j)
      PyTuple_SET_ITEM(spec, j, parts[j]);
    PyList_SET_ITEM(out.ptr(), k, spec);
  }
  return out;
}

} // namespace

void terra::bindStateWalk(py::module_ &m) {
  py::class_<StateWalk>(m, "StateWalk",
                        "The persistent-state walk of StateRegistry.slots, "
                        "natively (python/src/StateWalk.cpp).")
      .def(py::init<py::object, py::object, py::object>(),
           py::arg("tensor_type"), py::arg("ordered_dict"),
           py::arg("default_dict"))
      .def("same", &StateWalk::same, py::arg("modules"), py::arg("optimizers"),
           py::arg("held"),
           "Walks the state; True when it met exactly the objects and keys "
           "of the accepted walk.")
      .def("accept", &StateWalk::accept,
           "Accepts the last walk; returns the objects to keep alive with "
           "it.");
  m.def("slot_tensors", &slotTensors, py::arg("names"), py::arg("kinds"),
        py::arg("objs"), py::arg("keys"),
        "name -> tensor of every state slot that holds one.");
  m.def("slot_list", &slotList, py::arg("kinds"), py::arg("objs"),
        py::arg("keys"), "Each state slot's tensor, or None, in order.");
  m.def("tensor_specs", &tensorSpecs, py::arg("tensors"), py::arg("elements"),
        "runio.tensor_spec of each tensor (None for an unknown dtype).");
}
