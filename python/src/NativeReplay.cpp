//===- NativeReplay.cpp - tape entries replayed in C ----------------------===//
//
// A co-executed iteration that follows its tape replays each op from the
// tape's entry (python/terra/replay.py, `TapeRecorder._replay_op`): it
// checks the call against the entry, makes the results (placeholders from
// the recipe, views of an argument, the argument itself), and keeps what a
// catch-up or the end of the iteration needs (the log, the replayed
// entries, the identities of the results, the autograd nodes). In Python
// that is ~8 us per op, as much as eager PyTorch spends on a whole small
// op. Here the same is done with the Python C API for the entries most ops
// make: a "plain" entry (replay._chain sets `Entry.plain`) is an op whose
// results come from the recipe alone (no shape inference, no fed argument,
// no host evaluation, no size forms, no real results) and whose result
// structure is one value, a list or a tuple. `DirectMode`, the handler
// torch calls for every op while the co-executor is the only dispatch
// mode, replays such an entry when the tape expects it next, and
// `DirectMode.read` replays a read by a C tensor method that the tape
// answers with a value the host has. A "pass" entry (an op the graph does
// not have, such as the profiler handle every `zero_grad` and optimizer
// `step` makes: `Entry.native`'s last field) is run here as it is. Anything
// else, and any call that does not pass the entry's checks, goes to the Python
// replay (the miss sentinel is returned before anything changed).
//
// The Python replay is the specification: each step below names the
// Python it mirrors, and the tests compare the two bit for bit
// (test/python/test_tape.py). Python helpers are called, with the loop
// hook suspended as the Python replay has it, only for the rare parts:
// argument checks other than a known tensor, a plain value, a tensor list
// or a relaxed scalar (`tape._match`), a view of a real tensor, writes
// into memory the host computed a value for, a relaxed scalar's value, a
// feed of an element type the runtime does not take (Python names it),
// the autograd nodes of a forward op with several results, and the memory
// key of a placeholder or an empty tensor.
//
//===----------------------------------------------------------------------===//
#include "NativeReplay.h"

#include <pybind11/pybind11.h>

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

namespace py = pybind11;

namespace {

py::object steal(PyObject *p) {
  if (!p)
    throw py::error_already_set();
  return py::reinterpret_steal<py::object>(p);
}

py::object borrow(PyObject *p) { return py::reinterpret_borrow<py::object>(p); }

py::object getAttr(PyObject *o, PyObject *name) {
  return steal(PyObject_GetAttr(o, name));
}

void setAttr(PyObject *o, PyObject *name, PyObject *value) {
  if (PyObject_SetAttr(o, name, value) < 0)
    throw py::error_already_set();
}

bool isTrue(PyObject *o) {
  int r = PyObject_IsTrue(o);
  if (r < 0)
    throw py::error_already_set();
  return r != 0;
}

/// `a == b` as Python evaluates it (with the identity shortcut).
bool equal(PyObject *a, PyObject *b) {
  int r = PyObject_RichCompareBool(a, b, Py_EQ);
  if (r < 0)
    throw py::error_already_set();
  return r == 1;
}

/// `d.get(key)` (borrowed; null when absent or `d` is not a dict).
PyObject *dictGet(PyObject *d, PyObject *key) {
  if (!PyDict_Check(d))
    return nullptr;
  PyObject *v = PyDict_GetItemWithError(d, key);
  if (!v && PyErr_Occurred())
    throw py::error_already_set();
  return v;
}

/// What `replay_configure` hands over: the classes and helpers of the
/// Python replay, and attribute names interned once.
struct Config {
  py::object placeholder, token, replayed, tensor, leafSpec, makeWrapper, match,
      viewReal, relaxedValue, symDim, miss, runHere, weakResults, device,
      wrapperKwnames, elementTypes;
  // Entry attributes.
  PyObject *spec, *outs, *structName, *ids, *written, *effects, *site, *engine,
      *needsFlat;
  // Co-executor attributes.
  PyObject *idents, *hostIdent, *forward, *pos, *currentSite, *log,
      *replayedList, *tapeKeep, *noteNodes, *emit, *loopCounter, *active, *hook,
      *suspend, *resume, *hostValues, *run, *sendCase, *sendLoop, *sent, *fast,
      *bDepth, *paused, *tape, *limit, *entries, *nativeView, *thread, *inside,
      *torchDispatch, *forgetHostValues, *relaxed, *relaxedFeeds, *forced,
      *kind, *matKind, *answer, *key, *hostReads, *forms, *formsMatch, *infer,
      *memo, *layout, *nativeForms, *shape, *operand, *dim, *numel, *feeds,
      *fedValues, *strideName, *sizeName, *deviceName, *dataPtr, *dtypeName,
      *hostEval, *hostEvalName, *name, *hostResult, *applyHostResult,
      *leaveFast;
  // _Replayed and placeholder attributes.
  PyObject *entry, *func, *args, *kwargs, *out, *value, *result, *nodes,
      *gradFn, *terraToken, *terraWhere, *terraAddr, *terraBase, *terraReal,
      *storageOffset, *elementSize;
  // Recipe kinds.
  PyObject *kNew, *kSame, *kView, *kValue, *kT, *kV, *kL, *kR, *kF, *kCase,
      *kLoop, *kFeed, *kIn, *kMat, *kKnown, *kUpdatedHost, *kViewStrides;
};

Config *config = nullptr;

/// `Entry.native` (replay._chain): what the native replay reads of an entry
/// it takes, in one tuple, so that an op costs one attribute lookup on its
/// entry instead of ~20. The order is replay._NATIVE_FIELDS'.
enum EntryField {
  fSpec,
  fForms,
  fNativeForms,
  fOuts,
  fInfer,
  fMemo,
  fNeedsFlat,
  fFeeds,
  fSite,
  fStruct,
  fEngine,
  fHostEval,
  fName,
  fWritten,
  fRelaxed,
  fIds,
  fEffects,
  fPass,
  fFieldCount
};

/// Field `f` of an entry view (borrowed).
PyObject *field(PyObject *view, EntryField f) {
  return PyTuple_GET_ITEM(view, f);
}

/// What the native replay did since the process started (tests and
/// diagnostics): entries replayed, misses, and calls of Python helpers.
struct Counts {
  uint64_t replayed = 0, misses = 0, slowChecks = 0, realViews = 0,
           realWrites = 0, noteNodes = 0, effects = 0, pythonEffects = 0,
           relaxed = 0, reads = 0, formChecks = 0, memoHits = 0, memoMisses = 0,
           pythonFormChecks = 0, hostEvals = 0, passes = 0, feeds = 0,
           passesHere = 0, profilerHere = 0;
} counts;

PyObject *intern(const char *s) {
  PyObject *o = PyUnicode_InternFromString(s);
  if (!o)
    throw py::error_already_set();
  return o; // kept for the life of the process
}

/// Whether `kind` is the interned string `name` (recipe and check kinds
/// are constants of the Python replay's code, so interned; compared by
/// value otherwise).
bool is(PyObject *kind, PyObject *name) {
  if (kind == name)
    return true;
  if (!PyUnicode_Check(kind))
    return false;
  return PyUnicode_Compare(kind, name) == 0;
}

/// A result structure of one value: None (the recorder's common form) or
/// a pytree leaf (an op that returns None, flattened by torch's pytree).
bool isSingle(PyObject *structure) {
  return structure == Py_None ||
         reinterpret_cast<PyObject *>(Py_TYPE(structure)) ==
             config->leafSpec.ptr();
}

bool isTensor(PyObject *o) {
  return PyObject_TypeCheck(
      o, reinterpret_cast<PyTypeObject *>(config->tensor.ptr()));
}

bool isPlaceholder(PyObject *o) {
  return PyObject_TypeCheck(
      o, reinterpret_cast<PyTypeObject *>(config->placeholder.ptr()));
}

/// The loop hook suspended while Python helpers run, as the Python replay
/// runs (LoopHook.cpp): only the user's code is traced. LoopCounter.suspend
/// and resume, without their Python frames.
class Suspended {
public:
  explicit Suspended(PyObject *ex) {
    py::object counter = getAttr(ex, config->loopCounter);
    if (!isTrue(getAttr(counter.ptr(), config->active).ptr()))
      return;
    hook = getAttr(counter.ptr(), config->hook);
    resume = isTrue(
        steal(PyObject_CallMethodNoArgs(hook.ptr(), config->suspend)).ptr());
  }
  /// Resumes; false with the resume's error set if it failed. An error
  /// already set (the helper's) is kept and wins over the resume's.
  bool end() {
    if (!resume)
      return true;
    resume = false;
    PyObject *type, *value, *tb;
    PyErr_Fetch(&type, &value, &tb);
    PyObject *ok = PyObject_CallMethodNoArgs(hook.ptr(), config->resume);
    Py_XDECREF(ok);
    if (!ok && !type)
      return false;
    if (!ok)
      PyErr_Clear();
    PyErr_Restore(type, value, tb);
    return true;
  }
  ~Suspended() {
    if (!end())
      PyErr_WriteUnraisable(hook.ptr());
  }

private:
  py::object hook;
  bool resume = false;
};

/// `call()`'s result, with the loop hook suspended while it runs.
template <typename Call>
py::object withLoopHookSuspended(PyObject *ex, Call call) {
  Suspended suspended(ex);
  PyObject *r = call();
  bool resumed = suspended.end();
  if (!r || !resumed) {
    Py_XDECREF(r);
    throw py::error_already_set();
  }
  return steal(r);
}

/// Calls a Python helper with the loop hook suspended.
py::object callSuspended(PyObject *ex, PyObject *callable,
                         std::initializer_list<PyObject *> argList) {
  std::vector<PyObject *> argv(argList);
  return withLoopHookSuspended(ex, [&] {
    return PyObject_Vectorcall(callable, argv.data(), argv.size(), nullptr);
  });
}

/// `idents.get(id(t))`: the identity this iteration gave a tensor.
PyObject *identOf(PyObject *idents, PyObject *t) {
  py::object key = steal(PyLong_FromVoidPtr(t));
  return dictGet(idents, key.ptr());
}

/// The common checks of tape.matches / tape._match: 1 if `v` passes check
/// `s`, 0 if not, -1 if only `tape._match` can tell (a tensor not identified
/// yet or checked with its metadata). A plain value is
/// compared as the Python does: `!=` for a positional argument, `==` for a
/// keyword or a list element.
int quickMatch(PyObject *idents, PyObject *v, PyObject *s, bool keyword) {
  PyObject *kind = PyTuple_GET_ITEM(s, 0);
  if (is(kind, config->kT) && PyTuple_GET_ITEM(s, 2) == Py_None) {
    PyObject *ident = identOf(idents, v);
    if (!ident)
      return -1;
    return equal(ident, PyTuple_GET_ITEM(s, 1)) ? 1 : 0;
  }
  if (is(kind, config->kL)) {
    // ("L", type, element checks): a list or tuple of tensors.
    PyObject *items = PyTuple_GET_ITEM(s, 2);
    if (reinterpret_cast<PyObject *>(Py_TYPE(v)) != PyTuple_GET_ITEM(s, 1) ||
        !(PyList_CheckExact(v) || PyTuple_CheckExact(v)))
      return -1; // (_match decides: the type check is all it takes)
    Py_ssize_t n = PySequence_Fast_GET_SIZE(v);
    if (n != PyTuple_GET_SIZE(items))
      return 0;
    PyObject **xs = PySequence_Fast_ITEMS(v);
    for (Py_ssize_t i = 0; i < n; ++i) {
      int r = quickMatch(idents, xs[i], PyTuple_GET_ITEM(items, i), true);
      if (r <= 0)
        return r;
    }
    return 1;
  }
  if (is(kind, config->kF)) // a symbolic size: its type (its form: _fits)
    return reinterpret_cast<PyObject *>(Py_TYPE(v)) == PyTuple_GET_ITEM(s, 1)
               ? 1
               : 0;
  if (is(kind, config->kR)) {
    // ("R", length): a relaxed scalar (or scalar list), fed to the graph.
    auto number = [](PyObject *x) {
      return PyLong_CheckExact(x) || PyFloat_CheckExact(x);
    };
    PyObject *length = PyTuple_GET_ITEM(s, 1);
    if (length == Py_None)
      return number(v) ? 1 : 0;
    if (!(PyList_CheckExact(v) || PyTuple_CheckExact(v)))
      return 0;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(v);
    if (n != PyLong_AsSsize_t(length)) {
      if (PyErr_Occurred())
        throw py::error_already_set();
      return 0;
    }
    PyObject **xs = PySequence_Fast_ITEMS(v);
    for (Py_ssize_t i = 0; i < n; ++i)
      if (!number(xs[i]))
        return 0;
    return 1;
  }
  if (is(kind, config->kV)) {
    if (reinterpret_cast<PyObject *>(Py_TYPE(v)) != PyTuple_GET_ITEM(s, 1))
      return 0;
    // No identity shortcut, as Python evaluates `v != s[2]` / `v == s[2]`.
    bool same =
        keyword
            ? isTrue(
                  steal(PyObject_RichCompare(v, PyTuple_GET_ITEM(s, 2), Py_EQ))
                      .ptr())
            : !isTrue(
                  steal(PyObject_RichCompare(v, PyTuple_GET_ITEM(s, 2), Py_NE))
                      .ptr());
    return same ? 1 : 0;
  }
  return -1;
}

/// tape.matches.
bool matches(PyObject *ex, PyObject *spec, PyObject *args, PyObject *kwargs) {
  PyObject *sa = PyTuple_GET_ITEM(spec, 0), *sk = PyTuple_GET_ITEM(spec, 1);
  if (PyTuple_GET_SIZE(args) != PyTuple_GET_SIZE(sa) ||
      PyDict_GET_SIZE(kwargs) != PyTuple_GET_SIZE(sk))
    return false;
  py::object idents = getAttr(ex, config->idents);
  py::object host;
  auto check = [&](PyObject *v, PyObject *s, bool keyword) {
    int quick = quickMatch(idents.ptr(), v, s, keyword);
    if (quick >= 0)
      return quick == 1;
    ++counts.slowChecks;
    if (!host)
      host = getAttr(ex, config->hostIdent);
    return isTrue(
        callSuspended(ex, config->match.ptr(), {v, s, idents.ptr(), host.ptr()})
            .ptr());
  };
  for (Py_ssize_t i = 0, n = PyTuple_GET_SIZE(args); i < n; ++i)
    if (!check(PyTuple_GET_ITEM(args, i), PyTuple_GET_ITEM(sa, i), false))
      return false;
  for (Py_ssize_t i = 0, n = PyTuple_GET_SIZE(sk); i < n; ++i) {
    PyObject *ks = PyTuple_GET_ITEM(sk, i);
    PyObject *v = dictGet(kwargs, PyTuple_GET_ITEM(ks, 0));
    if (!v)
      return false;
    if (!check(v, PyTuple_GET_ITEM(ks, 1), true))
      return false;
  }
  return true;
}

/// The tensors of one argument: itself, or those in a list or tuple (of
/// exactly those types with `exact`, as tape.flat_inputs checks).
void addTensors(PyObject *v, bool exact, std::vector<PyObject *> &out) {
  if (isTensor(v)) {
    out.push_back(v);
    return;
  }
  if (exact ? !(PyList_CheckExact(v) || PyTuple_CheckExact(v))
            : !(PyList_Check(v) || PyTuple_Check(v)))
    return;
  Py_ssize_t n = PySequence_Fast_GET_SIZE(v);
  PyObject **items = PySequence_Fast_ITEMS(v);
  for (Py_ssize_t i = 0; i < n; ++i)
    if (isTensor(items[i]))
      out.push_back(items[i]);
}

/// A tensor's sizes (its `shape`, a tuple).
py::object shapeOf(PyObject *t) { return getAttr(t, config->shape); }

/// tape.form_matches for one size argument: 1 if `value` is what `form`
/// gives for `tensors`, 0 if not.
int formMatches(PyObject *form, PyObject *value,
                const std::vector<PyObject *> &tensors) {
  // A SymDim(operand, dim) entry: whether that dim of that operand is `v`.
  auto dimIs = [&](PyObject *sym, PyObject *v) -> bool {
    Py_ssize_t operand = PyLong_AsSsize_t(getAttr(sym, config->operand).ptr());
    Py_ssize_t dim = PyLong_AsSsize_t(getAttr(sym, config->dim).ptr());
    if (PyErr_Occurred())
      throw py::error_already_set();
    if (operand < 0 || size_t(operand) >= tensors.size())
      return false;
    py::object shape = shapeOf(tensors[operand]);
    if (!PyTuple_Check(shape.ptr()) || dim < 0 ||
        dim >= PyTuple_GET_SIZE(shape.ptr()))
      return false;
    return equal(PyTuple_GET_ITEM(shape.ptr(), dim), v);
  };
  PyTypeObject *symDim = reinterpret_cast<PyTypeObject *>(config->symDim.ptr());
  if (Py_TYPE(form) == symDim)
    return PyLong_CheckExact(value) && dimIs(form, value) ? 1 : 0;
  if (!(PyList_CheckExact(value) || PyTuple_CheckExact(value)) ||
      !(PyList_Check(form) || PyTuple_Check(form)))
    return 0;
  py::object formSeq = steal(PySequence_Fast(form, "form"));
  Py_ssize_t n = PySequence_Fast_GET_SIZE(formSeq.ptr());
  if (PySequence_Fast_GET_SIZE(value) != n)
    return 0;
  PyObject **fs = PySequence_Fast_ITEMS(formSeq.ptr());
  PyObject **vs = PySequence_Fast_ITEMS(value);
  Py_ssize_t inferred = -1;
  py::object known = steal(PyLong_FromLong(1));
  py::object minusOne = steal(PyLong_FromLong(-1));
  for (Py_ssize_t i = 0; i < n; ++i) {
    PyObject *f = fs[i], *v = vs[i];
    if (Py_TYPE(f) == symDim) {
      if (!dimIs(f, v))
        return 0;
    } else if (equal(f, minusOne.ptr()) && !equal(v, minusOne.ptr())) {
      inferred = i; // a reshape's -1: checked against the element count
      continue;
    } else if (!equal(f, v)) {
      return 0;
    }
    if (!equal(v, minusOne.ptr()))
      known = steal(PyNumber_Multiply(known.ptr(), v));
  }
  if (inferred < 0)
    return 1;
  if (tensors.empty())
    return 0;
  py::object numel =
      steal(PyObject_CallMethodNoArgs(tensors[0], config->numel));
  py::object product = steal(PyNumber_Multiply(known.ptr(), vs[inferred]));
  return equal(product.ptr(), numel.ptr()) ? 1 : 0;
}

/// replay._view_strides(x, size) == v for a tensor `x` whose strides are
/// exactly the row-major ones of its sizes (and has elements): the view's
/// strides are then the row-major ones of `size` with its -1 inferred
/// (torch's computeStride and infer_size). 1 or 0; -1 for any other `x`
/// (the Python check decides).
int viewStridesMatch(PyObject *x, PyObject *size, PyObject *v) {
  if (!x || !isTensor(x) || !size ||
      !(PyList_Check(size) || PyTuple_Check(size)))
    return -1;
  py::object shape = shapeOf(x);
  py::object stride = steal(PyObject_CallMethodNoArgs(x, config->strideName));
  if (!PyTuple_Check(shape.ptr()) || !PyTuple_Check(stride.ptr()))
    return -1;
  Py_ssize_t rank = PyTuple_GET_SIZE(shape.ptr());
  if (rank == 0 || PyTuple_GET_SIZE(stride.ptr()) != rank)
    return -1;
  long long numel = 1;
  for (Py_ssize_t d = rank - 1; d >= 0; --d) {
    long long n = PyLong_AsLongLong(PyTuple_GET_ITEM(shape.ptr(), d));
    long long st = PyLong_AsLongLong(PyTuple_GET_ITEM(stride.ptr(), d));
    if (PyErr_Occurred())
      throw py::error_already_set();
    if (st != numel)
      return -1; // not row-major (size-1 dims with other strides included)
    numel *= n;
  }
  if (numel <= 0)
    return -1;
  // infer_size: at most one -1, the others non-negative, the same count.
  py::object sizeSeq = steal(PySequence_Fast(size, "size"));
  Py_ssize_t n = PySequence_Fast_GET_SIZE(sizeSeq.ptr());
  std::vector<long long> sizes(n);
  long long known = 1;
  Py_ssize_t inferred = -1;
  for (Py_ssize_t i = 0; i < n; ++i) {
    PyObject *item = PySequence_Fast_GET_ITEM(sizeSeq.ptr(), i);
    if (!PyLong_Check(item))
      return -1;
    sizes[i] = PyLong_AsLongLong(item);
    if (PyErr_Occurred())
      throw py::error_already_set();
    if (sizes[i] == -1) {
      if (inferred >= 0)
        return 0; // (the view raises: None, which no stride list equals)
      inferred = i;
    } else if (sizes[i] < 0) {
      return 0;
    } else {
      known *= sizes[i];
    }
  }
  if (inferred >= 0) {
    if (known == 0 || numel % known != 0)
      return 0;
    sizes[inferred] = numel / known;
  } else if (known != numel) {
    return 0;
  }
  // `v != [strides]`: only a list of the same ints is equal.
  if (!PyList_CheckExact(v) || PyList_GET_SIZE(v) != n)
    return 0;
  long long expect = 1;
  for (Py_ssize_t i = n - 1; i >= 0; --i) {
    PyObject *item = PyList_GET_ITEM(v, i);
    if (!PyLong_Check(item))
      return -1;
    long long got = PyLong_AsLongLong(item);
    if (PyErr_Occurred())
      throw py::error_already_set();
    if (got != expect)
      return 0;
    expect *= sizes[i];
  }
  return 1;
}

/// TapeRecorder._forms_match for the forms replay._chain prepared
/// (`Entry.native_forms`: (key, form) pairs and the op's schema
/// arguments): 1 or 0, or -1 when only the Python check can tell.
int formsMatch(PyObject *nativeForms, PyObject *args, PyObject *kwargs) {
  PyObject *pairs = PyTuple_GET_ITEM(nativeForms, 0);
  PyObject *schema = PyTuple_GET_ITEM(nativeForms, 1);
  // The op's tensor operands in schema order (tracing.passed_args).
  std::vector<PyObject *> tensors;
  Py_ssize_t nargs = PyTuple_GET_SIZE(args);
  for (Py_ssize_t a = 0, n = PyTuple_GET_SIZE(schema); a < n; ++a) {
    PyObject *info = PyTuple_GET_ITEM(schema, a);
    Py_ssize_t i = PyLong_AsSsize_t(PyTuple_GET_ITEM(info, 0));
    if (i == -1 && PyErr_Occurred())
      throw py::error_already_set();
    PyObject *v = nullptr;
    if (i < nargs && !isTrue(PyTuple_GET_ITEM(info, 2))) {
      v = PyTuple_GET_ITEM(args, i);
    } else {
      v = dictGet(kwargs, PyTuple_GET_ITEM(info, 1));
      if (!v)
        continue;
    }
    addTensors(v, /*exact=*/false, tensors); // (passed_args: isinstance)
  }
  for (Py_ssize_t j = 0, n = PyTuple_GET_SIZE(pairs); j < n; ++j) {
    PyObject *pair = PyTuple_GET_ITEM(pairs, j);
    PyObject *key = PyTuple_GET_ITEM(pair, 0), *value = nullptr;
    if (PyLong_CheckExact(key)) {
      Py_ssize_t k = PyLong_AsSsize_t(key);
      if (k < 0 || k >= nargs)
        return 0; // (the Python check raises: the call does not fit)
      value = PyTuple_GET_ITEM(args, k);
    } else {
      value = dictGet(kwargs, key);
      if (!value)
        value = Py_None;
    }
    PyObject *form = PyTuple_GET_ITEM(pair, 1);
    if (is(form, config->kViewStrides)) { // _reshape_alias's strides
      PyObject *size = nargs > 1 ? PyTuple_GET_ITEM(args, 1)
                                 : dictGet(kwargs, config->sizeName);
      int r = viewStridesMatch(nargs ? PyTuple_GET_ITEM(args, 0) : nullptr,
                               size, value);
      if (r <= 0)
        return r;
      continue;
    }
    if (!formMatches(form, value, tensors))
      return 0;
  }
  return 1;
}

/// tape.flat_inputs.
void flatInputs(PyObject *args, PyObject *kwargs,
                std::vector<PyObject *> &out) {
  auto add = [&](PyObject *v) { addTensors(v, /*exact=*/true, out); };
  for (Py_ssize_t i = 0, n = PyTuple_GET_SIZE(args); i < n; ++i)
    add(PyTuple_GET_ITEM(args, i));
  Py_ssize_t pos = 0;
  PyObject *key, *value;
  while (PyDict_Next(kwargs, &pos, &key, &value))
    add(value);
}

/// Placeholder.make: a placeholder without a value.
py::object makePlaceholder(PyObject *shape, PyObject *stride, PyObject *offset,
                           PyObject *dtype) {
  PyObject *argv[] = {
      nullptr, config->placeholder.ptr(), shape,   stride, offset,
      dtype,   config->device.ptr(),      Py_False};
  return steal(PyObject_Vectorcall(config->makeWrapper.ptr(), argv + 1,
                                   2 | PY_VECTORCALL_ARGUMENTS_OFFSET,
                                   config->wrapperKwnames.ptr()));
}

/// A result index out of range: the tape does not fit this call.
PyObject *flatAt(const std::vector<PyObject *> &flat, PyObject *index) {
  Py_ssize_t k = PyLong_AsSsize_t(index);
  if (k == -1 && PyErr_Occurred())
    throw py::error_already_set();
  if (k < 0 || size_t(k) >= flat.size())
    throw py::index_error("a tape recipe refers to a missing argument");
  return flat[k];
}

/// TapeRecorder._make_results (recipes "new", "same", "view", "value").
py::object makeResults(PyObject *ex, PyObject *outs, PyObject *structure,
                       const std::vector<PyObject *> &flat) {
  Py_ssize_t n = PyTuple_GET_SIZE(outs);
  py::object results = steal(PyList_New(n));
  for (Py_ssize_t j = 0; j < n; ++j) {
    PyObject *r = PyTuple_GET_ITEM(outs, j);
    PyObject *kind = PyTuple_GET_ITEM(r, 0);
    py::object o;
    if (is(kind, config->kNew)) {
      o = makePlaceholder(PyTuple_GET_ITEM(r, 1), PyTuple_GET_ITEM(r, 2),
                          PyTuple_GET_ITEM(r, 3), PyTuple_GET_ITEM(r, 4));
      py::object token = steal(PyObject_CallNoArgs(config->token.ptr()));
      setAttr(o.ptr(), config->terraToken, token.ptr());
      setAttr(o.ptr(), config->terraWhere, PyTuple_GET_ITEM(r, 5));
    } else if (is(kind, config->kSame)) {
      o = borrow(flatAt(flat, PyTuple_GET_ITEM(r, 1)));
    } else if (is(kind, config->kView)) {
      PyObject *target = flatAt(flat, PyTuple_GET_ITEM(r, 1));
      if (!isPlaceholder(target)) {
        ++counts.realViews;
        o = callSuspended(ex, config->viewReal.ptr(), {ex, r, target});
      } else {
        // placeholder.view_placeholder for a placeholder target.
        py::object token = getAttr(target, config->terraToken);
        py::object base =
            steal(PyObject_CallMethodNoArgs(target, config->storageOffset));
        py::object offset =
            steal(PyNumber_Add(base.ptr(), PyTuple_GET_ITEM(r, 4)));
        o = makePlaceholder(PyTuple_GET_ITEM(r, 2), PyTuple_GET_ITEM(r, 3),
                            offset.ptr(), PyTuple_GET_ITEM(r, 5));
        setAttr(o.ptr(), config->terraToken, token.ptr());
        py::object addr = getAttr(target, config->terraAddr);
        py::object realBase = getAttr(target, config->terraBase);
        if (realBase.ptr() != Py_None)
          setAttr(o.ptr(), config->terraBase, realBase.ptr());
        if (addr.ptr() != Py_None) {
          py::object size =
              steal(PyObject_CallMethodNoArgs(o.ptr(), config->elementSize));
          py::object bytes =
              steal(PyNumber_Multiply(PyTuple_GET_ITEM(r, 4), size.ptr()));
          py::object at = steal(PyNumber_Add(addr.ptr(), bytes.ptr()));
          setAttr(o.ptr(), config->terraAddr, at.ptr());
        }
        setAttr(o.ptr(), config->terraWhere, PyTuple_GET_ITEM(r, 6));
      }
    } else if (is(kind, config->kValue)) {
      o = borrow(PyTuple_GET_ITEM(r, 1));
    } else {
      throw py::value_error("a plain tape entry has a recipe it cannot make");
    }
    PyList_SET_ITEM(results.ptr(), j, o.release().ptr());
  }
  if (isSingle(structure)) {
    if (n != 1)
      throw py::value_error("a single-result tape entry has several recipes");
    return borrow(PyList_GET_ITEM(results.ptr(), 0));
  }
  if (structure == reinterpret_cast<PyObject *>(&PyList_Type))
    return results;
  if (structure == reinterpret_cast<PyObject *>(&PyTuple_Type))
    return steal(PyList_AsTuple(results.ptr()));
  throw py::value_error("a plain tape entry has a result structure it cannot "
                        "make");
}

/// runio.tensor_spec(value) for a feed, or null when only Python can make
/// it (an element type the runtime does not take: Python raises, naming it).
py::object feedSpec(PyObject *value) {
  if (!isTensor(value))
    return {};
  py::object dtype = getAttr(value, config->dtypeName);
  PyObject *element = dictGet(config->elementTypes.ptr(), dtype.ptr());
  if (!element)
    return {};
  py::object ptr = steal(PyObject_CallMethodNoArgs(value, config->dataPtr));
  py::object shape = getAttr(value, config->shape);
  py::object stride =
      steal(PyObject_CallMethodNoArgs(value, config->strideName));
  return steal(
      PyTuple_Pack(5, ptr.ptr(), element, shape.ptr(), stride.ptr(), value));
}

/// TapeRecorder._emit: case selections, loop conditions and feeds (the
/// value an entry's replay recorded: a fed input's, `fed_values[(q, k)]`,
/// or a relaxed scalar's, `relaxed_feeds[q]`) go to the run in order. An
/// effect list with anything else goes to the Python helper whole, before
/// anything was sent.
void emit(PyObject *ex, PyObject *effects) {
  ++counts.effects;
  py::object seq = steal(PySequence_Fast(effects, "effects"));
  Py_ssize_t n = PySequence_Fast_GET_SIZE(seq.ptr());
  PyObject **items = PySequence_Fast_ITEMS(seq.ptr());
  std::vector<py::object> specs(n);
  py::object fedValues, relaxedFeeds;
  auto feedSpecOf = [&](PyObject *src) -> py::object {
    if (!PyTuple_Check(src) || PyTuple_GET_SIZE(src) < 2)
      return {};
    PyObject *kind = PyTuple_GET_ITEM(src, 0), *value = nullptr;
    if (is(kind, config->relaxed) && PyTuple_GET_SIZE(src) == 2) {
      if (!relaxedFeeds)
        relaxedFeeds = getAttr(ex, config->relaxedFeeds);
      value = dictGet(relaxedFeeds.ptr(), PyTuple_GET_ITEM(src, 1));
    } else if (is(kind, config->kIn) && PyTuple_GET_SIZE(src) == 3) {
      if (!fedValues)
        fedValues = getAttr(ex, config->fedValues);
      py::object key = steal(PyTuple_GetSlice(src, 1, 3));
      value = dictGet(fedValues.ptr(), key.ptr());
    }
    return value ? feedSpec(value) : py::object();
  };
  for (Py_ssize_t i = 0; i < n; ++i) {
    PyObject *eff = items[i];
    bool native = PyTuple_Check(eff) && PyTuple_GET_SIZE(eff) >= 3;
    if (native && is(PyTuple_GET_ITEM(eff, 0), config->kFeed)) {
      specs[i] = feedSpecOf(PyTuple_GET_ITEM(eff, 2));
      native = bool(specs[i]);
    } else if (native) {
      native = is(PyTuple_GET_ITEM(eff, 0), config->kCase) ||
               is(PyTuple_GET_ITEM(eff, 0), config->kLoop);
    }
    if (!native) {
      ++counts.pythonEffects;
      py::object method = getAttr(ex, config->emit);
      callSuspended(ex, method.ptr(), {effects});
      return;
    }
  }
  py::object run = getAttr(ex, config->run);
  py::object sent = getAttr(ex, config->sent);
  for (Py_ssize_t i = 0; i < n; ++i) {
    PyObject *eff = items[i];
    PyObject *method, *arg;
    if (specs[i]) {
      ++counts.feeds;
      method = config->kFeed; // Run.feed
      arg = specs[i].ptr();
    } else {
      method = is(PyTuple_GET_ITEM(eff, 0), config->kCase) ? config->sendCase
                                                           : config->sendLoop;
      arg = PyTuple_GET_ITEM(eff, 2);
    }
    PyObject *argv[] = {run.ptr(), PyTuple_GET_ITEM(eff, 1), arg};
    steal(PyObject_VectorcallMethod(
        method, argv, 3 | PY_VECTORCALL_ARGUMENTS_OFFSET, nullptr));
    if (PyList_Append(sent.ptr(), eff) < 0)
      throw py::error_already_set();
  }
}

/// `t.grad_fn`, or None where torch refuses to say (sites.grad_fn_of: a
/// view made under no_grad whose memory was written in place since).
py::object gradFnOf(PyObject *t) {
  PyObject *node = PyObject_GetAttr(t, config->gradFn);
  if (!node) {
    if (!PyErr_ExceptionMatches(PyExc_RuntimeError))
      throw py::error_already_set();
    PyErr_Clear();
    return py::none();
  }
  return steal(node);
}

/// _replay_op's forward bookkeeping: the autograd nodes of the last
/// replayed forward op's results, as the next interaction finds them
/// (_note_nodes, its common case inline).
void noteForward(PyObject *ex) {
  py::object fwd = getAttr(ex, config->forward);
  if (fwd.ptr() != Py_None) {
    py::object fwdEntry = getAttr(fwd.ptr(), config->entry);
    py::object fwdStruct = getAttr(fwdEntry.ptr(), config->structName);
    py::object fwdOut = getAttr(fwd.ptr(), config->out);
    if (isSingle(fwdStruct.ptr())) {
      // One result: its node, if it is a tensor (what _note_nodes finds).
      setAttr(ex, config->forward, Py_None);
      py::object nodes = steal(PyList_New(0));
      if (isTensor(fwdOut.ptr())) {
        py::object node = gradFnOf(fwdOut.ptr());
        if (PyList_Append(nodes.ptr(), node.ptr()) < 0)
          throw py::error_already_set();
      }
      setAttr(fwd.ptr(), config->nodes, nodes.ptr());
    } else {
      ++counts.noteNodes;
      py::object method = getAttr(ex, config->noteNodes);
      callSuspended(ex, method.ptr(), {});
    }
  }
}

/// `_Recorder.key(t)` of a real, non-empty tensor (device, data pointer,
/// sizes, strides, dtype: the key of the host values Adam's step counters
/// are read from), or null for a placeholder or an empty tensor (Python's
/// key then).
py::object memoryKey(PyObject *t) {
  if (isPlaceholder(t))
    return {};
  py::object numel = steal(PyObject_CallMethodNoArgs(t, config->numel));
  long n = PyLong_AsLong(numel.ptr());
  if (n == -1 && PyErr_Occurred())
    throw py::error_already_set();
  if (n == 0)
    return {};
  py::object device = getAttr(t, config->deviceName);
  py::object ptr = steal(PyObject_CallMethodNoArgs(t, config->dataPtr));
  py::object shape = steal(PySequence_Tuple(getAttr(t, config->shape).ptr()));
  py::object stride = steal(PySequence_Tuple(
      steal(PyObject_CallMethodNoArgs(t, config->strideName)).ptr()));
  py::object dtype = getAttr(t, config->dtypeName);
  return steal(PyTuple_Pack(5, device.ptr(), ptr.ptr(), shape.ptr(),
                            stride.ptr(), dtype.ptr()));
}

/// Entry `q` is taken (_replay_op's common steps): the last forward op's
/// nodes are noted, `pos` moves past it and its site is the current one.
void advance(PyObject *ex, Py_ssize_t q, PyObject *site) {
  noteForward(ex);
  py::object next = steal(PyLong_FromSsize_t(q + 1));
  setAttr(ex, config->pos, next.ptr());
  setAttr(ex, config->currentSite, site);
}

/// _Replayed(e, func, args, kwargs, out, None, result), made without
/// running its __init__ (Python code, with the loop hook on).
py::object replayedRecord(PyObject *e, PyObject *func, PyObject *args,
                          PyObject *kwargs, PyObject *out, PyObject *result) {
  PyTypeObject *replayedType =
      reinterpret_cast<PyTypeObject *>(config->replayed.ptr());
  py::object r = steal(replayedType->tp_alloc(replayedType, 0));
  setAttr(r.ptr(), config->entry, e);
  setAttr(r.ptr(), config->func, func);
  setAttr(r.ptr(), config->args, args);
  setAttr(r.ptr(), config->kwargs, kwargs);
  setAttr(r.ptr(), config->out, out);
  setAttr(r.ptr(), config->value, Py_None);
  setAttr(r.ptr(), config->result, result);
  setAttr(r.ptr(), config->nodes, Py_None);
  return r;
}

/// TapeRecorder._name_replayed: the results' identities (`e.ids`), and
/// real results kept alive for the step (their ids stay unique).
void nameResults(PyObject *ex, PyObject *view, PyObject *outPtr) {
  py::object out = borrow(outPtr);
  py::object structure = borrow(field(view, fStruct));
  py::object ids = borrow(field(view, fIds));
  py::object idents = getAttr(ex, config->idents);
  py::object keep;
  auto name = [&](PyObject *o, PyObject *ident) {
    if (ident == Py_None || !isTensor(o))
      return;
    py::object key = steal(PyLong_FromVoidPtr(o));
    if (PyDict_SetItem(idents.ptr(), key.ptr(), ident) < 0)
      throw py::error_already_set();
    if (Py_TYPE(o) !=
        reinterpret_cast<PyTypeObject *>(config->placeholder.ptr())) {
      if (!keep)
        keep = getAttr(ex, config->tapeKeep);
      if (PyList_Append(keep.ptr(), o) < 0)
        throw py::error_already_set();
    }
  };
  if (isSingle(structure.ptr())) {
    name(out.ptr(), PyTuple_GET_ITEM(ids.ptr(), 0));
  } else {
    py::object seq = steal(PySequence_Fast(out.ptr(), "results"));
    Py_ssize_t n = std::min(PySequence_Fast_GET_SIZE(seq.ptr()),
                            PyTuple_GET_SIZE(ids.ptr()));
    for (Py_ssize_t j = 0; j < n; ++j)
      name(PySequence_Fast_GET_ITEM(seq.ptr(), j),
           PyTuple_GET_ITEM(ids.ptr(), j));
  }
}

/// The replay of a plain entry `e` (see the file comment); `miss` when the
/// call does not pass its checks, with nothing changed.
/// The view of entry `e` the native replay reads (`Entry.native`), or null
/// for an entry it does not take.
py::object entryView(PyObject *e) {
  py::object view = getAttr(e, config->nativeView);
  if (view.ptr() == Py_None)
    return {};
  if (!PyTuple_Check(view.ptr()) || PyTuple_GET_SIZE(view.ptr()) != fFieldCount)
    throw py::type_error("a tape entry's native view is a tuple of " +
                         std::to_string(int(fFieldCount)) + " fields");
  return view;
}

/// replayPlain with the entry's view already read (DirectMode::dispatch).
py::object replayPlainView(PyObject *ex, PyObject *e, PyObject *view,
                           PyObject *func, PyObject *args, PyObject *kwargs,
                           Py_ssize_t q);

py::object replayPlain(py::handle exH, py::handle eH, py::handle funcH,
                       py::handle argsH, py::handle kwargsH, Py_ssize_t q) {
  if (!config)
    throw std::runtime_error("replay_configure was not called");
  if (!PyTuple_Check(argsH.ptr()) || !PyDict_Check(kwargsH.ptr()))
    throw py::type_error("replay_plain takes an argument tuple and a dict");
  py::object view = entryView(eH.ptr());
  if (!view || isTrue(field(view.ptr(), fPass)))
    return config->miss;
  return replayPlainView(exH.ptr(), eH.ptr(), view.ptr(), funcH.ptr(),
                         argsH.ptr(), kwargsH.ptr(), q);
}

py::object replayPlainView(PyObject *ex, PyObject *e, PyObject *view,
                           PyObject *func, PyObject *args, PyObject *kwargs,
                           Py_ssize_t q) {
  py::object spec = borrow(field(view, fSpec));
  if (!PyTuple_Check(spec.ptr()) || PyTuple_GET_SIZE(spec.ptr()) != 2)
    throw py::type_error("a tape entry's spec is (args, kwargs)");
  if (!matches(ex, spec.ptr(), args, kwargs)) {
    ++counts.misses;
    return config->miss;
  }
  // Size arguments checked by their recorded form (TapeRecorder._fits).
  py::object forms = borrow(field(view, fForms));
  if (forms.ptr() != Py_None) {
    ++counts.formChecks;
    py::object prepared = borrow(field(view, fNativeForms));
    bool fits;
    int native = prepared.ptr() != Py_None
                     ? formsMatch(prepared.ptr(), args, kwargs)
                     : -1;
    if (native >= 0) {
      fits = native == 1;
    } else { // sizes of values that are not operands, an unusual view
      ++counts.pythonFormChecks;
      py::object check = getAttr(ex, config->formsMatch);
      fits =
          isTrue(callSuspended(ex, check.ptr(), {e, func, args, kwargs}).ptr());
    }
    if (!fits) {
      ++counts.misses;
      return config->miss;
    }
  }
  // The recipes: the entry's own, or for results whose shapes follow
  // data-dependent sizes those memoized for the sizes met so far
  // (TapeRecorder._memo_key; a layout not met yet is inferred in Python).
  py::object outs = borrow(field(view, fOuts));
  if (isTrue(field(view, fInfer))) {
    py::object memo = borrow(field(view, fMemo));
    py::object layout = getAttr(ex, config->layout);
    py::object key = steal(PySequence_Tuple(layout.ptr()));
    PyObject *recipes = dictGet(memo.ptr(), key.ptr());
    if (!recipes) {
      ++counts.memoMisses;
      return config->miss;
    }
    outs = borrow(recipes);
    ++counts.memoHits;
  }
  if (!PyTuple_Check(outs.ptr()))
    throw py::type_error("tape recipes are a tuple");
  for (Py_ssize_t j = 0, n = PyTuple_GET_SIZE(outs.ptr()); j < n; ++j) {
    PyObject *kind = PyTuple_GET_ITEM(PyTuple_GET_ITEM(outs.ptr(), j), 0);
    if (!(is(kind, config->kNew) || is(kind, config->kSame) ||
          is(kind, config->kView) || is(kind, config->kValue)))
      return config->miss; // (made in Python)
  }
  std::vector<PyObject *> flat;
  if (isTrue(field(view, fNeedsFlat)))
    flatInputs(args, kwargs, flat);
  // Inputs fed to the graph: their values are taken on entry. A real
  // tensor is its own value, a placeholder's is the one it has (a random
  // draw of the host); one without a value is Python's (`terra_real`).
  py::object feeds = borrow(field(view, fFeeds));
  std::vector<py::object> fed;
  for (Py_ssize_t i = 0, n = PyTuple_GET_SIZE(feeds.ptr()); i < n; ++i) {
    PyObject *t = flatAt(flat, PyTuple_GET_ITEM(feeds.ptr(), i));
    if (!isPlaceholder(t)) {
      fed.push_back(borrow(t));
      continue;
    }
    py::object value = getAttr(t, config->terraReal);
    if (value.ptr() == Py_None)
      return config->miss;
    fed.push_back(std::move(value));
  }
  ++counts.replayed;

  py::object site = borrow(field(view, fSite));
  advance(ex, q, site.ptr());
  if (PyTuple_GET_SIZE(feeds.ptr())) {
    py::object fedValues = getAttr(ex, config->fedValues);
    for (Py_ssize_t i = 0, n = PyTuple_GET_SIZE(feeds.ptr()); i < n; ++i) {
      PyObject *k = PyTuple_GET_ITEM(feeds.ptr(), i);
      py::object key = steal(Py_BuildValue("(nO)", q, k)); // (entry, input)
      if (PyObject_SetItem(fedValues.ptr(), key.ptr(), fed[i].ptr()) < 0)
        throw py::error_already_set();
    }
  }
  py::object structure = borrow(field(view, fStruct));
  py::object out = makeResults(ex, outs.ptr(), structure.ptr(), flat);

  // The log replays ops eagerly at a deviation; it holds an engine op's
  // results weakly (replay.WeakResults: torch 2.x's AccumulateGrad copies a
  // gradient something else references).
  py::object logged = out;
  if (isTrue(field(view, fEngine))) {
    logged = steal(PyObject_CallFunctionObjArgs(config->weakResults.ptr(),
                                                out.ptr(), ex, nullptr));
  }
  py::object record =
      steal(PyTuple_Pack(5, func, args, kwargs, logged.ptr(), site.ptr()));
  py::object log = getAttr(ex, config->log);
  if (PyList_Append(log.ptr(), record.ptr()) < 0)
    throw py::error_already_set();
  // A tiny op the host also computes (Adam's step counters), so that reads
  // of its value need no round trip: CoExecutor._host_eval.
  bool hostEval = isTrue(field(view, fHostEval));
  py::object host = borrow(Py_None);
  if (hostEval) {
    ++counts.hostEvals;
    py::object method = getAttr(ex, config->hostEvalName);
    host = callSuspended(ex, method.ptr(),
                         {func, field(view, fName), args, kwargs, out.ptr()});
  }

  py::object written = borrow(field(view, fWritten));
  py::object real; // written tensors that are not placeholders
  for (Py_ssize_t i = 0, n = PyTuple_GET_SIZE(written.ptr()); i < n; ++i) {
    PyObject *t = flatAt(flat, PyTuple_GET_ITEM(written.ptr(), i));
    if (Py_TYPE(t) ==
        reinterpret_cast<PyTypeObject *>(config->placeholder.ptr())) {
      setAttr(t, config->terraReal, Py_None);
    } else {
      if (!real)
        real = steal(PyList_New(0));
      if (PyList_Append(real.ptr(), t) < 0)
        throw py::error_already_set();
    }
  }
  // TapeRecorder._replay_written for real memory: a value the host
  // computed for it is stale now (without such values nothing to do).
  if (real && isTrue(getAttr(ex, config->hostValues).ptr())) {
    ++counts.realWrites;
    py::object method = getAttr(ex, config->forgetHostValues);
    callSuspended(ex, method.ptr(), {real.ptr()});
  }
  if (host.ptr() != Py_None) { // its values bound once the writes are done
    setAttr(ex, config->hostResult, host.ptr());
    py::object apply = getAttr(ex, config->applyHostResult);
    callSuspended(ex, apply.ptr(), {});
  }

  // The feed of a relaxed scalar (tape.relaxed_value).
  py::object relaxed = borrow(field(view, fRelaxed));
  if (relaxed.ptr() != Py_None) {
    ++counts.relaxed;
    py::object value =
        callSuspended(ex, config->relaxedValue.ptr(), {e, args, kwargs});
    py::object feeds = getAttr(ex, config->relaxedFeeds);
    py::object key = steal(PyLong_FromSsize_t(q));
    if (PyObject_SetItem(feeds.ptr(), key.ptr(), value.ptr()) < 0)
      throw py::error_already_set();
  }

  nameResults(ex, view, out.ptr());

  py::object r = replayedRecord(e, func, args, kwargs, out.ptr(), Py_None);
  py::object replayed = getAttr(ex, config->replayedList);
  if (PyList_Append(replayed.ptr(), r.ptr()) < 0)
    throw py::error_already_set();
  if (!isTrue(field(view, fEngine)))
    setAttr(ex, config->forward, r.ptr());

  py::object effects = borrow(field(view, fEffects));
  if (isTrue(effects.ptr()))
    emit(ex, effects.ptr());
  if (hostEval && host.ptr() == Py_None) { // the host could not compute it
    py::object leave = getAttr(ex, config->leaveFast);
    callSuspended(ex, leave.ptr(), {});
  }
  return out;
}

/// What the replay of a "pass" entry does once its op ran (`out`, its
/// results): they are named as the Python replay names them and the entry
/// is recorded as replayed, with its effects sent.
void passed(PyObject *ex, PyObject *e, PyObject *view, PyObject *func,
            PyObject *args, PyObject *kwargs, PyObject *out) {
  nameResults(ex, view, out);
  py::object r = replayedRecord(e, func, args, kwargs, out, Py_None);
  py::object replayed = getAttr(ex, config->replayedList);
  if (PyList_Append(replayed.ptr(), r.ptr()) < 0)
    throw py::error_already_set();
  py::object effects = borrow(field(view, fEffects));
  if (isTrue(effects.ptr()))
    emit(ex, effects.ptr());
}

/// The replay of a "pass" entry `e` (an op the graph does not have, run
/// on the host as it is: the profiler's `record_function` handle that
/// `zero_grad` and `step` make): TapeRecorder._replay_op for kind "pass",
/// which checks nothing but the op. Its results are real tensors, named as
/// the Python replay names them; no log entry (a deviation does not replay
/// it) and no forward record. Called with the handler off, so the op runs
/// without the co-executor; the loop hook is suspended, as the Python
/// replay suspends it, while torch's Python code runs the op.
py::object replayPass(PyObject *ex, PyObject *e, PyObject *view, PyObject *func,
                      PyObject *args, PyObject *kwargs, Py_ssize_t q) {
  ++counts.passes;
  advance(ex, q, field(view, fSite));
  py::object out = withLoopHookSuspended(ex, [&] {
    return PyObject_Call(func, args,
                         PyDict_GET_SIZE(kwargs) ? kwargs : nullptr);
  });
  passed(ex, e, view, func, args, kwargs, out.ptr());
  return out;
}

/// `o.name += by` for an int attribute; false with the error set if it
/// failed (never throws: used on the way out of RAII guards).
bool addToAttr(PyObject *o, PyObject *name, long by) {
  PyObject *now = PyObject_GetAttr(o, name);
  if (!now)
    return false;
  long n = PyLong_AsLong(now);
  Py_DECREF(now);
  if (n == -1 && PyErr_Occurred())
    return false;
  PyObject *next = PyLong_FromLong(n + by);
  bool ok = next && PyObject_SetAttr(o, name, next) == 0;
  Py_XDECREF(next);
  return ok;
}

/// The entry the co-executor's tape expects next (`tape.entries[pos]` if
/// `pos < tape.limit`), with `q` set to `pos`; null past the limit.
py::object nextEntry(PyObject *ex, Py_ssize_t &q) {
  py::object tape = getAttr(ex, config->tape);
  q = PyLong_AsSsize_t(getAttr(ex, config->pos).ptr());
  Py_ssize_t limit = PyLong_AsSsize_t(getAttr(tape.ptr(), config->limit).ptr());
  if (PyErr_Occurred())
    throw py::error_already_set();
  py::object entries = getAttr(tape.ptr(), config->entries);
  if (q < 0 || q >= limit || !PyList_Check(entries.ptr()) ||
      q >= PyList_GET_SIZE(entries.ptr()))
    return {};
  return borrow(PyList_GET_ITEM(entries.ptr(), q));
}

/// The handler torch calls for every op while a co-executor is the only
/// dispatch mode (tracing._DirectMode, whose Python frames cost ~1 us per
/// op): a plain entry the tape expects next is replayed here; everything
/// else goes to the co-executor's `__torch_dispatch__`, or to torch's
/// stack handler once the program pushed a mode of its own.
class DirectMode {
public:
  DirectMode(py::object rec, py::object stackDispatch, py::object setMode,
             py::object stackLen)
      : rec(std::move(rec)), stackDispatch(std::move(stackDispatch)),
        setMode(std::move(setMode)), stackLen(std::move(stackLen)) {}

  static py::object dispatch(py::object self, py::handle func, py::handle types,
                             py::handle args, py::handle kwargs) {
    auto &m = self.cast<DirectMode &>();
    py::object len = steal(PyObject_CallNoArgs(m.stackLen.ptr()));
    if (PyLong_AsLong(len.ptr()) != 1) {
      PyObject *argv[] = {func.ptr(), types.ptr(), args.ptr(), kwargs.ptr()};
      return steal(
          PyObject_Vectorcall(m.stackDispatch.ptr(), argv, 4, nullptr));
    }
    py::object kw = kwargs.is_none()
                        ? steal(PyDict_New())
                        : py::reinterpret_borrow<py::object>(kwargs);
    PyObject *rec = m.rec.ptr();
    if (PyTuple_Check(args.ptr()) && PyDict_Check(kw.ptr())) {
      py::object out = replayNext(self, func, args, kw);
      if (out.ptr() != config->miss.ptr())
        return out;
    }
    Handler handler(m, self);
    PyObject *argv[] = {rec, func.ptr(), types.ptr(), args.ptr(), kw.ptr()};
    return steal(PyObject_VectorcallMethod(config->torchDispatch, argv,
                                           5 | PY_VECTORCALL_ARGUMENTS_OFFSET,
                                           nullptr));
  }

  /// The dispatch-key hook's handler (DispatchHook.cpp): `dispatch`'s
  /// replay of the entry the tape expects next, reached before torch's
  /// Python fallback; the miss sentinel, with nothing changed, for
  /// anything `dispatch` would hand to the co-executor, and whenever this
  /// handler is not the one torch would call now (another mode on the
  /// stack, or the co-executor's own code running: `rec.inside`).
  ///
  /// Two kinds of op it asks the hook to run itself, past torch's Python
  /// key, by returning the run-here sentinel: a profiler op (the
  /// `_record_function_enter` of every `zero_grad` and optimizer `step`),
  /// which the co-executor would run as it is anyway, unrecorded; and a "pass"
  /// entry the tape expects next (the profiler handle's `zeros(1)`),
  /// replayed as `replayPass` replays it but with the op run by the hook
  /// from the dispatch key it is at (no `OpOverload` call through Python,
  /// no second dispatch from the top): the hook then hands its results to
  /// `ran`. `here`: whether the hook can run this op itself and give the
  /// program its results (DispatchHook.cpp's `runnableHere`: no view, no
  /// placeholder among its tensors); else a pass entry runs through
  /// `replayPass`.
  static py::object fast(py::object self, py::handle func, py::handle args,
                         py::handle kwargs, bool here) {
    auto &m = self.cast<DirectMode &>();
    m.pending = {};
    if (!PyTuple_Check(args.ptr()) || !PyDict_Check(kwargs.ptr()) ||
        isTrue(getAttr(m.rec.ptr(), config->inside).ptr()) ||
        PyLong_AsLong(steal(PyObject_CallNoArgs(m.stackLen.ptr())).ptr()) != 1)
      return config->miss;
    if (here && isProfiler(func.ptr())) {
      if (!m.replaying())
        return config->miss;
      ++counts.profilerHere;
      return config->runHere;
    }
    if (here) {
      Py_ssize_t q = -1;
      py::object view;
      py::object entry = m.expected(func.ptr(), q, view);
      if (entry && isTrue(field(view.ptr(), fPass))) {
        ++counts.passes;
        ++counts.passesHere;
        advance(m.rec.ptr(), q, field(view.ptr(), fSite));
        m.pending = {entry, view, py::reinterpret_borrow<py::object>(func),
                     py::reinterpret_borrow<py::object>(args),
                     py::reinterpret_borrow<py::object>(kwargs)};
        return config->runHere;
      }
    }
    return replayNext(self, func, args, kwargs);
  }

  /// The hook ran the op `fast` asked it to run (`out`: its results, one
  /// value or a tuple): a pass entry's replay ends here (`passed`, with
  /// the handler off as in `replayPass`).
  static void ran(py::object self, py::handle out) {
    auto &m = self.cast<DirectMode &>();
    Pending p = std::move(m.pending);
    m.pending = {};
    if (!p.entry)
      return;
    Handler handler(m, self);
    passed(m.rec.ptr(), p.entry.ptr(), p.view.ptr(), p.func.ptr(), p.args.ptr(),
           p.kwargs.ptr(), out.ptr());
  }

  /// A read by a tensor method (`item`, `tolist`, ...: `orig`, a C
  /// function) that the tape's next entry answers with a value the host
  /// has: the placeholder's own ("known") or one the host computed
  /// ("updated-host", Adam's step counters). TapeRecorder._replay_read and
  /// _replay_answer; the miss sentinel, with nothing changed, for anything
  /// else (fetches wait for the graph anyway).
  static py::object read(py::object self, py::handle tH, py::handle kind,
                         py::handle orig, py::handle args, py::handle kwargs) {
    auto &m = self.cast<DirectMode &>();
    PyObject *ex = m.rec.ptr(), *t = tH.ptr();
    if (!PyTuple_Check(args.ptr()) || !PyDict_Check(kwargs.ptr()))
      throw py::type_error("read takes an argument tuple and a dict");
    if (getAttr(ex, config->forced).ptr() != Py_None ||
        !isTrue(getAttr(ex, config->fast).ptr()) ||
        isTrue(getAttr(ex, config->paused).ptr()) ||
        PyLong_AsLong(steal(PyObject_CallNoArgs(m.stackLen.ptr())).ptr()) != 1)
      return config->miss;
    Py_ssize_t q;
    py::object entry = nextEntry(ex, q);
    PyObject *e = entry.ptr();
    if (!e || !is(getAttr(e, config->kind).ptr(), config->kMat) ||
        getAttr(e, config->func).ptr() != Py_None ||
        !equal(getAttr(e, config->matKind).ptr(), kind.ptr()))
      return config->miss;
    // _ident(t): an identity this iteration gave it (else Python decides).
    py::object idents = getAttr(ex, config->idents);
    PyObject *ident = identOf(idents.ptr(), t);
    if (!ident || !equal(ident, getAttr(e, config->spec).ptr()))
      return config->miss;
    py::object answer = getAttr(e, config->answer);
    PyObject *what =
        PyTuple_Check(answer.ptr()) && PyTuple_GET_SIZE(answer.ptr())
            ? PyTuple_GET_ITEM(answer.ptr(), 0)
            : Py_None;
    py::object value;
    bool host = false;
    if (is(what, config->kKnown)) {
      if (!isPlaceholder(t))
        return config->miss;
      value = getAttr(t, config->terraReal);
      if (value.ptr() == Py_None)
        return config->miss;
    } else if (is(what, config->kUpdatedHost)) {
      py::object k = memoryKey(t);
      if (!k) { // a placeholder or an empty tensor: Python's key
        py::object keyOf = getAttr(ex, config->key);
        k = callSuspended(ex, keyOf.ptr(), {t});
      }
      py::object values = getAttr(ex, config->hostValues);
      PyObject *v = dictGet(values.ptr(), k.ptr());
      if (!v)
        return config->miss;
      value = borrow(v);
      host = true;
    } else {
      return config->miss;
    }
    ++counts.reads;

    advance(ex, q, getAttr(e, config->site).ptr());
    py::object effects = getAttr(e, config->effects);
    if (isTrue(effects.ptr()))
      emit(ex, effects.ptr());
    if (host) {
      py::object reads = getAttr(ex, config->hostReads);
      py::object more = steal(PyNumber_Add(reads.ptr(), one().ptr()));
      setAttr(ex, config->hostReads, more.ptr());
    }
    // call(value): the method on the value. The Python replay raises
    // `paused` so that the method's ops pass the co-executor; here they
    // also run without the handler.
    py::object result;
    {
      Paused paused(ex);
      Handler handler(m, self);
      Py_ssize_t n = PyTuple_GET_SIZE(args.ptr());
      py::object callArgs = steal(PyTuple_New(n + 1));
      PyTuple_SET_ITEM(callArgs.ptr(), 0, value.inc_ref().ptr());
      for (Py_ssize_t i = 0; i < n; ++i)
        PyTuple_SET_ITEM(
            callArgs.ptr(), i + 1,
            borrow(PyTuple_GET_ITEM(args.ptr(), i)).release().ptr());
      result = steal(PyObject_Call(orig.ptr(), callArgs.ptr(),
                                   PyDict_GET_SIZE(kwargs.ptr()) ? kwargs.ptr()
                                                                 : nullptr));
    }
    if (isTrue(getAttr(ex, config->fast).ptr())) {
      py::object readArgs = steal(PyTuple_Pack(1, t));
      py::object readKwargs = steal(PyDict_New());
      if (PyDict_SetItem(readKwargs.ptr(), config->kind, kind.ptr()) < 0)
        throw py::error_already_set();
      py::object r = replayedRecord(e, Py_None, readArgs.ptr(),
                                    readKwargs.ptr(), Py_None, result.ptr());
      py::object replayed = getAttr(ex, config->replayedList);
      if (PyList_Append(replayed.ptr(), r.ptr()) < 0)
        throw py::error_already_set();
    }
    return result;
  }

private:
  static py::object one() { return steal(PyLong_FromLong(1)); }

  /// The native replay of the entry the tape expects next (a plain or a
  /// pass one, `expected`), with the handler off while it runs; the miss
  /// sentinel, with nothing changed, otherwise.
  static py::object replayNext(py::object self, py::handle func,
                               py::handle args, py::handle kwargs) {
    auto &m = self.cast<DirectMode &>();
    Py_ssize_t q = -1;
    py::object view;
    py::object entry = m.expected(func.ptr(), q, view);
    if (!entry)
      return config->miss;
    Handler handler(m, self);
    PyObject *rec = m.rec.ptr();
    if (isTrue(field(view.ptr(), fPass)))
      return replayPass(rec, entry.ptr(), view.ptr(), func.ptr(), args.ptr(),
                        kwargs.ptr(), q);
    return replayPlainView(rec, entry.ptr(), view.ptr(), func.ptr(), args.ptr(),
                           kwargs.ptr(), q);
  }

  /// `rec.paused` raised for its lifetime (never throws on the way out).
  class Paused {
  public:
    explicit Paused(PyObject *ex) : ex(ex) {
      if (!add(1))
        throw py::error_already_set();
    }
    ~Paused() {
      PyObject *type, *value, *tb;
      PyErr_Fetch(&type, &value, &tb);
      if (!add(-1))
        PyErr_WriteUnraisable(ex);
      PyErr_Restore(type, value, tb);
    }

  private:
    bool add(long by) { return addToAttr(ex, config->paused, by); }
    PyObject *ex;
  };

  /// _DirectMode's switch: no handler and `rec.inside` raised while the
  /// co-executor runs, restored on the way out.
  class Handler {
  public:
    Handler(DirectMode &m, py::object self) : m(m), self(std::move(self)) {
      if (!setHandler(Py_None) || !bump(1)) {
        setHandler(this->self.ptr());
        throw py::error_already_set();
      }
    }
    /// Never throws: an error restoring the state is reported as
    /// unraisable, after the error in flight (if any) is put back.
    ~Handler() {
      PyObject *type, *value, *tb;
      PyErr_Fetch(&type, &value, &tb);
      if (!bump(-1))
        PyErr_WriteUnraisable(m.rec.ptr());
      if (!setHandler(self.ptr()))
        PyErr_WriteUnraisable(m.rec.ptr());
      PyErr_Restore(type, value, tb);
    }

  private:
    bool setHandler(PyObject *mode) {
      PyObject *argv[] = {mode};
      PyObject *r = PyObject_Vectorcall(m.setMode.ptr(), argv, 1, nullptr);
      Py_XDECREF(r);
      return r != nullptr;
    }
    bool bump(long by) { return addToAttr(m.rec.ptr(), config->inside, by); }
    DirectMode &m;
    py::object self;
  };

  /// CoExecutor.__torch_dispatch__'s test for the native replay: replaying,
  /// not inside an interaction being recorded, not paused, on the
  /// program's thread, and the tape's next entry is one of `func` that the
  /// native replay takes (a plain or a native pass one: `Entry.native`,
  /// returned in `view`).
  py::object expected(PyObject *func, Py_ssize_t &q, py::object &view) {
    PyObject *r = rec.ptr();
    if (!isTrue(getAttr(r, config->fast).ptr()) ||
        isTrue(getAttr(r, config->bDepth).ptr()) ||
        isTrue(getAttr(r, config->paused).ptr()))
      return {};
    py::object e = nextEntry(r, q);
    if (!e || getAttr(e.ptr(), config->func).ptr() != func)
      return {};
    view = entryView(e.ptr());
    if (!view || !onThread())
      return {};
    return e;
  }

  /// Replaying (the first checks of `expected`, without an entry): what
  /// the co-executor does with a profiler op then is to run it as it is,
  /// unrecorded.
  bool replaying() {
    PyObject *r = rec.ptr();
    return isTrue(getAttr(r, config->fast).ptr()) &&
           !isTrue(getAttr(r, config->bDepth).ptr()) &&
           !isTrue(getAttr(r, config->paused).ptr()) && onThread();
  }

  /// Whether this is the co-executed program's thread.
  bool onThread() {
    py::object thread = getAttr(rec.ptr(), config->thread);
    if (PyLong_AsUnsignedLong(thread.ptr()) != PyThread_get_thread_ident()) {
      PyErr_Clear();
      return false;
    }
    return true;
  }

  /// Whether `func` is one of the profiler's ops (kept per OpOverload,
  /// which torch keeps for the process's life).
  static bool isProfiler(PyObject *func) {
    static auto *known = new std::unordered_map<PyObject *, bool>();
    auto it = known->find(func);
    if (it != known->end())
      return it->second;
    std::string name = py::str(
        py::reinterpret_borrow<py::object>(func).attr("_schema").attr("name"));
    bool profiler = name.rfind("profiler::", 0) == 0;
    Py_INCREF(func); // (kept as the map's key)
    known->emplace(func, profiler);
    return profiler;
  }

  /// A pass entry `fast` replays while the hook runs its op.
  struct Pending {
    py::object entry, view, func, args, kwargs;
  };

  py::object rec, stackDispatch, setMode, stackLen;
  Pending pending;
};

void configure(py::dict c) {
  auto *cfg = new Config();
  auto get = [&](const char *key) -> py::object {
    if (!c.contains(key))
      throw py::key_error(std::string("replay_configure needs ") + key);
    return c[key];
  };
  cfg->placeholder = get("Placeholder");
  cfg->token = get("Token");
  cfg->replayed = get("Replayed");
  cfg->tensor = get("Tensor");
  cfg->leafSpec = get("LeafSpec");
  cfg->makeWrapper = get("make_wrapper");
  cfg->match = get("match");
  cfg->viewReal = get("view_real");
  cfg->relaxedValue = get("relaxed_value");
  cfg->symDim = get("SymDim");
  cfg->miss = get("miss");
  cfg->runHere = get("run_here");
  cfg->weakResults = get("WeakResults");
  cfg->elementTypes = get("element_types");
  cfg->device = config && config->device ? config->device : py::str("cpu");
  for (py::handle t :
       {cfg->placeholder, cfg->replayed, cfg->tensor, cfg->leafSpec})
    if (!PyType_Check(t.ptr()))
      throw py::type_error("replay_configure: a class is not a type");
  cfg->wrapperKwnames = py::make_tuple("strides", "storage_offset", "dtype",
                                       "device", "requires_grad");
  cfg->spec = intern("spec");
  cfg->outs = intern("outs");
  cfg->structName = intern("struct");
  cfg->ids = intern("ids");
  cfg->written = intern("written");
  cfg->effects = intern("effects");
  cfg->site = intern("site");
  cfg->engine = intern("engine");
  cfg->needsFlat = intern("needs_flat");
  cfg->idents = intern("idents");
  cfg->hostIdent = intern("_host_ident");
  cfg->forward = intern("_forward");
  cfg->pos = intern("pos");
  cfg->currentSite = intern("current_site");
  cfg->log = intern("log");
  cfg->replayedList = intern("replayed");
  cfg->tapeKeep = intern("tape_keep");
  cfg->noteNodes = intern("_note_nodes");
  cfg->emit = intern("_emit");
  cfg->loopCounter = intern("loop_counter");
  cfg->active = intern("active");
  cfg->hook = intern("_hook");
  cfg->hostValues = intern("host_values");
  cfg->run = intern("run");
  cfg->sendCase = intern("send_case");
  cfg->sendLoop = intern("send_loop");
  cfg->sent = intern("sent");
  cfg->forgetHostValues = intern("_forget_host_values");
  cfg->relaxed = intern("relaxed");
  cfg->relaxedFeeds = intern("relaxed_feeds");
  cfg->fast = intern("fast");
  cfg->bDepth = intern("b_depth");
  cfg->paused = intern("paused");
  cfg->tape = intern("tape");
  cfg->limit = intern("limit");
  cfg->entries = intern("entries");
  cfg->nativeView = intern("native");
  cfg->thread = intern("thread");
  cfg->inside = intern("inside");
  cfg->torchDispatch = intern("__torch_dispatch__");
  cfg->suspend = intern("suspend");
  cfg->resume = intern("resume");
  cfg->entry = intern("entry");
  cfg->func = intern("func");
  cfg->args = intern("args");
  cfg->kwargs = intern("kwargs");
  cfg->out = intern("out");
  cfg->value = intern("value");
  cfg->result = intern("result");
  cfg->nodes = intern("nodes");
  cfg->gradFn = intern("grad_fn");
  cfg->terraToken = intern("_terra_token");
  cfg->terraWhere = intern("_terra_where");
  cfg->terraAddr = intern("_terra_addr");
  cfg->terraBase = intern("_terra_base");
  cfg->terraReal = intern("_terra_real");
  cfg->storageOffset = intern("storage_offset");
  cfg->elementSize = intern("element_size");
  cfg->kNew = intern("new");
  cfg->kSame = intern("same");
  cfg->kView = intern("view");
  cfg->kValue = intern("value");
  cfg->kT = intern("T");
  cfg->kV = intern("V");
  cfg->kL = intern("L");
  cfg->kR = intern("R");
  cfg->kF = intern("F");
  cfg->kMat = intern("mat");
  cfg->kKnown = intern("known");
  cfg->kUpdatedHost = intern("updated-host");
  cfg->kViewStrides = intern("view-strides");
  cfg->forced = intern("_forced");
  cfg->kind = intern("kind");
  cfg->matKind = intern("mat_kind");
  cfg->answer = intern("answer");
  cfg->key = intern("key");
  cfg->hostReads = intern("host_reads");
  cfg->forms = intern("forms");
  cfg->formsMatch = intern("_forms_match");
  cfg->infer = intern("infer");
  cfg->memo = intern("memo");
  cfg->layout = intern("layout");
  cfg->nativeForms = intern("native_forms");
  cfg->shape = intern("shape");
  cfg->operand = intern("operand");
  cfg->dim = intern("dim");
  cfg->numel = intern("numel");
  cfg->feeds = intern("feeds");
  cfg->fedValues = intern("fed_values");
  cfg->strideName = intern("stride");
  cfg->deviceName = intern("device");
  cfg->dataPtr = intern("data_ptr");
  cfg->dtypeName = intern("dtype");
  cfg->sizeName = intern("size");
  cfg->hostEval = intern("host_eval");
  cfg->hostEvalName = intern("_host_eval");
  cfg->name = intern("name");
  cfg->hostResult = intern("_host_result");
  cfg->applyHostResult = intern("_apply_host_result");
  cfg->leaveFast = intern("_leave_fast");
  cfg->kCase = intern("case");
  cfg->kLoop = intern("loop");
  cfg->kFeed = intern("feed");
  cfg->kIn = intern("in");
  delete config; // a second configuration replaces the first
  config = cfg;
}

} // namespace

void terra::bindNativeReplay(py::module_ &m) {
  m.def("replay_configure", &configure, py::arg("config"),
        "Hands the Python replay's classes and helpers to replay_plain.");
  m.def(
      "replay_set_device",
      [](py::object device) {
        if (!config)
          throw std::runtime_error("replay_set_device before replay_configure");
        config->device = std::move(device);
      },
      py::arg("device"),
      "The device of the placeholders replay_plain makes (the co-executed "
      "function's: placeholder.set_device).");
  m.def(
      "replay_counts",
      [] {
        py::dict d;
        d["replayed"] = counts.replayed;
        d["misses"] = counts.misses;
        d["slow_checks"] = counts.slowChecks;
        d["real_views"] = counts.realViews;
        d["real_writes"] = counts.realWrites;
        d["note_nodes"] = counts.noteNodes;
        d["effects"] = counts.effects;
        d["python_effects"] = counts.pythonEffects;
        d["relaxed"] = counts.relaxed;
        d["reads"] = counts.reads;
        d["form_checks"] = counts.formChecks;
        d["memo_hits"] = counts.memoHits;
        d["memo_misses"] = counts.memoMisses;
        d["python_form_checks"] = counts.pythonFormChecks;
        d["host_evals"] = counts.hostEvals;
        d["passes"] = counts.passes;
        d["passes_here"] = counts.passesHere;
        d["profiler_here"] = counts.profilerHere;
        d["feeds"] = counts.feeds;
        return d;
      },
      "What replay_plain did since the process started.");
  py::class_<DirectMode>(m, "DirectMode",
                         "tracing._DirectMode for a co-executor, with the "
                         "native replay of plain entries.")
      .def(py::init<py::object, py::object, py::object, py::object>(),
           py::arg("rec"), py::arg("stack_dispatch"), py::arg("set_mode"),
           py::arg("stack_len"))
      .def("__torch_dispatch__", &DirectMode::dispatch, py::arg("func"),
           py::arg("types"), py::arg("args") = py::tuple(),
           py::arg("kwargs") = py::none())
      .def("fast", &DirectMode::fast, py::arg("func"), py::arg("args"),
           py::arg("kwargs"), py::arg("here") = false,
           "Replays the op if the tape expects it next (the dispatch-key "
           "hook's handler); the run-here sentinel for an op the hook is to "
           "run itself (then `ran`); the miss sentinel otherwise.")
      .def("ran", &DirectMode::ran, py::arg("out"),
           "The results of the op the hook ran for `fast`.")
      .def("read", &DirectMode::read, py::arg("t"), py::arg("kind"),
           py::arg("orig"), py::arg("args"), py::arg("kwargs"),
           "Replays a read the tape answers with a value the host has; the "
           "miss sentinel otherwise.");
  m.def(
      "replay_view_strides_match",
      [](py::handle x, py::handle size, py::handle v) {
        if (!config)
          throw std::runtime_error("replay_configure was not called");
        return viewStridesMatch(x.ptr(), size.ptr(), v.ptr());
      },
      "The native check of _reshape_alias's strides (tests): 1, 0, or -1 "
      "when only the Python check can tell.");
  m.def("replay_plain", &replayPlain, py::arg("ex"), py::arg("entry"),
        py::arg("func"), py::arg("args"), py::arg("kwargs"), py::arg("q"),
        "Replays plain tape entry `entry` (index `q`) for a call of `func`; "
        "returns its results, or the configured miss sentinel when the call "
        "does not pass the entry's checks (then nothing changed).");
}
