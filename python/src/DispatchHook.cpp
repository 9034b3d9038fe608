//===- DispatchHook.cpp - the tape replay reached below autograd, in C++
//---===//
//
// A co-executed iteration replays its ops from a tape (python/terra/
// replay.py, NativeReplay.cpp). Torch hands each op to the co-executor
// through its Python dispatch key: the dispatcher's Python fallback turns
// the op's stack of IValues into Python arguments, finds the dispatch mode,
// calls its `__torch_dispatch__` with the mode stashed, and turns the
// Python result back into IValues. That round trip alone costs ~5 us per op
// on torch 1.13 (measured with a mode written in C), twice what eager
// PyTorch spends on a small op.
//
// This module registers a boxed fallback on the `Fake` dispatch key, which
// torch itself leaves free (it belongs to torchdistx's out-of-core fake
// tensors) and which sits right above `Python`: below autograd and
// ADInplaceOrView, so autograd records the op as always, and above the
// Python key, so the fallback sees every op before the Python fallback
// does. While a co-executor replays, its thread includes `Fake` in its
// local dispatch keys (`enable`); the fallback converts the op's arguments
// to Python as torch's Python fallback would (positional arguments up to
// the first keyword-only one, trailing defaults left out, dtypes, layouts
// and memory formats as torch's objects) and calls the armed handler
// (`arm`: NativeReplay's `DirectMode.fast`) with the op's `OpOverload`.
// The handler replays the op if the tape expects it next and returns its
// results, which are pushed as the op's returns; otherwise it returns the
// miss sentinel, having changed nothing, and the op is redispatched past
// `Fake` to the Python key and the co-executor's usual path. The handler,
// and the rest of a missed op's dispatch, run with `Fake` off on this
// thread, so ops they run go to torch (as a mode's handler runs with the
// mode stashed).
//
// The module is built against one torch's C++ ABI (Debian's 1.13); the
// loader (python/terra/native.py) imports it only under that torch.
//
//===----------------------------------------------------------------------===//
#include <ATen/core/dispatch/Dispatcher.h>
#include <c10/core/impl/LocalDispatchKeySet.h>
#include <torch/csrc/Dtype.h>
#include <torch/csrc/DynamicTypes.h>
#include <torch/csrc/Exceptions.h>
#include <torch/csrc/Layout.h>
#include <torch/csrc/autograd/python_variable.h>
#include <torch/csrc/autograd/variable.h>
#include <torch/csrc/jit/python/pybind_utils.h>
#include <torch/csrc/utils/tensor_memoryformats.h>
#include <torch/library.h>

#include <pybind11/pybind11.h>

#include "TensorState.h"

#include <unordered_map>

namespace py = pybind11;

namespace {

/// What the fallback calls: set by `arm`, cleared by `disarm` (the GIL
/// guards both, and every use).
struct Armed {
  py::object handler; // handler(func, args, kwargs[, here]) -> results, miss
                      // or run
  py::object miss;
  py::object lookup; // lookup(qualified name, overload) -> OpOverload
  py::object run;    // "run it yourself, past the Python key" (or None)
  py::object ran;    // ran(results) after such a run (or None)
};
Armed *armed = nullptr;

/// OpOverload of each operator met, by its schema (operator entries live
/// as long as the process; registrations never move them).
std::unordered_map<const c10::FunctionSchema *, py::object> *overloads =
    nullptr;

struct Counts {
  long hits = 0, misses = 0, ranHere = 0;
} counts;

constexpr c10::DispatchKey kHookKey = c10::DispatchKey::Fake;

py::object overloadOf(const c10::OperatorHandle &op) {
  const c10::FunctionSchema &schema = op.schema();
  auto it = overloads->find(&schema);
  if (it != overloads->end())
    return it->second;
  const std::string &overload = schema.overload_name();
  py::object func =
      armed->lookup(schema.name(), overload.empty() ? "default" : overload);
  overloads->emplace(&schema, func);
  return func;
}

bool isDefault(const c10::Argument &arg, const c10::IValue &v) {
  return arg.default_value().has_value() && *arg.default_value() == v;
}

bool kindIs(const c10::Argument &arg, c10::TypeKind kind) {
  const c10::TypePtr &t = arg.real_type();
  if (t->kind() == kind)
    return true;
  auto opt = t->cast<c10::OptionalType>();
  return opt && opt->getElementType()->kind() == kind;
}

py::object toPython(const c10::Argument &arg, const c10::IValue &v) {
  if (v.isNone())
    return py::none();
  if (kindIs(arg, c10::TypeKind::ScalarTypeType))
    return py::reinterpret_borrow<py::object>(reinterpret_cast<PyObject *>(
        torch::getTHPDtype(static_cast<c10::ScalarType>(v.toInt()))));
  if (kindIs(arg, c10::TypeKind::LayoutType))
    return py::reinterpret_borrow<py::object>(reinterpret_cast<PyObject *>(
        torch::getTHPLayout(static_cast<c10::Layout>(v.toInt()))));
  if (kindIs(arg, c10::TypeKind::MemoryFormatType))
    return py::reinterpret_borrow<py::object>(torch::utils::getTHPMemoryFormat(
        static_cast<c10::MemoryFormat>(v.toInt())));
  if (v.isTensor() && !v.toTensor().unsafeGetTensorImpl()->is_wrapped_number())
    return py::reinterpret_steal<py::object>(THPVariable_Wrap(v.toTensor()));
  if (v.isDouble())
    return py::reinterpret_steal<py::object>(PyFloat_FromDouble(v.toDouble()));
  if (v.isInt())
    return py::reinterpret_steal<py::object>(PyLong_FromLongLong(v.toInt()));
  if (v.isBool())
    return py::bool_(v.toBool());
  return torch::jit::toPyObject(v); // wrapped numbers as Python scalars, ...
}

/// The op's arguments (the last `n` values of the stack) as torch's Python
/// fallback passes them to `__torch_dispatch__`.
std::pair<py::tuple, py::dict>
pythonArguments(const c10::FunctionSchema &schema,
                const torch::jit::Stack &stack, size_t n) {
  const auto &params = schema.arguments();
  const c10::IValue *values = stack.data() + (stack.size() - n);
  size_t kwargStart = n;
  while (kwargStart > 0 && params[kwargStart - 1].kwarg_only())
    --kwargStart;
  size_t positional = kwargStart;
  while (positional > 0 &&
         isDefault(params[positional - 1], values[positional - 1]))
    --positional;
  py::tuple args(positional);
  for (size_t i = 0; i < positional; ++i)
    args[i] = toPython(params[i], values[i]);
  py::dict kwargs;
  for (size_t i = kwargStart; i < n; ++i)
    if (!isDefault(params[i], values[i]))
      kwargs[py::str(params[i].name())] = toPython(params[i], values[i]);
  return {std::move(args), std::move(kwargs)};
}

/// Pushes the handler's results as the op's returns (one value, or a tuple
/// or list of them for several).
void pushResults(const c10::FunctionSchema &schema, torch::jit::Stack &stack,
                 const py::object &out) {
  const auto &returns = schema.returns();
  if (returns.empty())
    return; // an op returning nothing (`_foreach_add_`): its replay, None
  if (returns.size() == 1) {
    stack.push_back(torch::jit::toIValue(out, returns[0].real_type()));
    return;
  }
  if (!PyTuple_Check(out.ptr()) && !PyList_Check(out.ptr()))
    throw std::runtime_error("terra: the replay of " + schema.name() +
                             " returned one value for " +
                             std::to_string(returns.size()) + " results");
  py::sequence seq = py::reinterpret_borrow<py::sequence>(out);
  if (seq.size() != returns.size())
    throw std::runtime_error("terra: the replay of " + schema.name() +
                             " returned " + std::to_string(seq.size()) +
                             " values for " + std::to_string(returns.size()) +
                             " results");
  for (size_t i = 0; i < returns.size(); ++i)
    stack.push_back(torch::jit::toIValue(seq[i], returns[i].real_type()));
}

/// `Fake` off on this thread while the handler runs; back on after.
class HookOff {
public:
  HookOff() { c10::impl::tls_set_dispatch_key_included(kHookKey, false); }
  ~HookOff() { c10::impl::tls_set_dispatch_key_included(kHookKey, true); }
};

void redispatch(const c10::OperatorHandle &op, c10::DispatchKeySet keys,
                torch::jit::Stack *stack) {
  op.redispatchBoxed(
      keys & c10::DispatchKeySet(c10::DispatchKeySet::FULL_AFTER, kHookKey),
      stack);
}

/// Whether the hook can run the op itself and give the program what it
/// computed: none of its results aliases an argument (a view's result is
/// remade above the hook by ADInplaceOrView, so the one the hook saw would
/// not be the program's) and no tensor among its arguments (the last `n`
/// values of the stack, lists included) is a Python subclass, such as a
/// placeholder, which needs the Python key.
bool runnableHere(const c10::FunctionSchema &schema,
                  const torch::jit::Stack &stack, size_t n) {
  for (const c10::Argument &r : schema.returns())
    if (r.alias_info())
      return false;
  auto python = [](const c10::IValue &v) {
    return v.isTensor() && v.toTensor().defined() &&
           v.toTensor().key_set().has(c10::DispatchKey::Python);
  };
  for (size_t i = stack.size() - n; i < stack.size(); ++i) {
    const c10::IValue &v = stack[i];
    if (python(v))
      return false;
    if (v.isList())
      for (const c10::IValue &x : v.toListRef())
        if (python(x))
          return false;
  }
  return true;
}

/// The op's returns (the last values of the stack) as Python sees them:
/// None, one value, or a tuple.
py::object returnsToPython(const c10::FunctionSchema &schema,
                           const torch::jit::Stack &stack) {
  size_t r = schema.returns().size();
  if (r == 0)
    return py::none();
  if (r == 1)
    return torch::jit::toPyObject(stack.back());
  py::tuple out(r);
  for (size_t i = 0; i < r; ++i)
    out[i] = torch::jit::toPyObject(stack[stack.size() - r + i]);
  return std::move(out);
}

/// Whether the armed handler replayed the op (its results then replace its
/// arguments on the stack), or had the hook run it: the handler may answer
/// `run` for an op the hook can run (`runnableHere`), which is
/// then redispatched from here past that key, with the Python key
/// excluded for the ops its kernel calls (as a dispatch mode's handler
/// runs an op with the mode stashed), and its results are handed to `ran`.
/// A Python error is rethrown as torch's `python_error`, which torch's
/// bindings raise as the error itself.
bool replayed(const c10::OperatorHandle &op, c10::DispatchKeySet keys,
              torch::jit::Stack *stack) {
  py::gil_scoped_acquire gil;
  if (!armed)
    return false;
  try {
    const c10::FunctionSchema &schema = op.schema();
    size_t n = schema.arguments().size();
    py::object func = overloadOf(op);
    auto [args, kwargs] = pythonArguments(schema, *stack, n);
    // (The handler may disarm the hook: what follows uses copies.)
    py::object miss = armed->miss, run = armed->run, ran = armed->ran;
    bool canRun = !run.is_none();
    bool here = canRun && runnableHere(schema, *stack, n);
    py::object out;
    {
      HookOff off;
      out = canRun ? armed->handler(func, args, kwargs, here)
                   : armed->handler(func, args, kwargs);
    }
    if (out.is(miss)) {
      ++counts.misses;
      return false;
    }
    if (canRun && out.is(run)) {
      if (!here)
        throw std::runtime_error("terra: the dispatch hook's handler asked "
                                 "to run " +
                                 schema.name() + " past the Python key");
      {
        HookOff off;
        c10::impl::ExcludeDispatchKeyGuard noPython(c10::DispatchKeySet(
            {c10::DispatchKey::Python, c10::DispatchKey::PythonTLSSnapshot}));
        op.redispatchBoxed(
            keys & c10::DispatchKeySet(c10::DispatchKeySet::FULL_AFTER,
                                       c10::DispatchKey::Python),
            stack);
      }
      ++counts.ranHere;
      if (!ran.is_none()) {
        py::object results = returnsToPython(schema, *stack);
        HookOff off;
        ran(results);
      }
      return true;
    }
    torch::jit::drop(*stack, n);
    pushResults(schema, *stack, out);
    ++counts.hits;
    return true;
  } catch (py::error_already_set &e) {
    e.restore();
    python_error error; // torch/csrc/Exceptions.h (global namespace)
    error.persist();
    throw error;
  }
}

/// Runs `func` (an OpOverload) on `args` and `kwargs` from past the Python
/// key, with autograd live: a dispatch mode's handler runs with every key
/// above Python excluded, but eagerly an op with no autograd kernel of its
/// own (autograd falls through it) runs its kernel with autograd and
/// ADInplaceOrView live, which record the ops the kernel calls. The rest of
/// this thread's local keys are kept, and all of them come back as they
/// were.
py::object runThrough(py::object func, py::tuple args, py::dict kwargs) {
  HANDLE_TH_ERRORS
  py::object schemaObject = func.attr("_schema");
  std::string name = py::str(schemaObject.attr("name"));
  std::string overload = py::str(schemaObject.attr("overload_name"));
  c10::OperatorHandle op = c10::Dispatcher::singleton().findSchemaOrThrow(
      name.c_str(), overload.c_str());
  const c10::FunctionSchema &schema = op.schema();
  torch::jit::Stack stack = torch::jit::createStackForSchema(
      schema, torch::jit::tuple_slice(std::move(args)),
      py::reinterpret_borrow<py::kwargs>(kwargs), c10::nullopt);
  c10::DispatchKeySet keys;
  auto add = [&](const c10::IValue &v) {
    if (v.isTensor() && v.toTensor().defined())
      keys = keys | v.toTensor().key_set();
  };
  for (const c10::IValue &v : stack) {
    add(v);
    if (v.isList())
      for (const c10::IValue &x : v.toListRef())
        add(x);
  }
  c10::impl::LocalDispatchKeySet local =
      c10::impl::tls_local_dispatch_key_set();
  local.excluded_ =
      local.excluded_ - c10::autograd_dispatch_keyset_with_ADInplaceOrView;
  {
    c10::impl::ForceDispatchKeyGuard guard(local);
    op.redispatchBoxed(keys &
                           c10::DispatchKeySet(c10::DispatchKeySet::FULL_AFTER,
                                               c10::DispatchKey::Python),
                       &stack);
  }
  return returnsToPython(schema, stack);
  END_HANDLE_TH_ERRORS_PYBIND
}

void fallback(const c10::OperatorHandle &op, c10::DispatchKeySet keys,
              torch::jit::Stack *stack) {
  if (replayed(op, keys, stack))
    return;
  // The rest of the op's dispatch (the Python key's handler, or a kernel
  // and the ops it calls) runs with the hook off, as a dispatch mode's
  // handler runs with the mode stashed.
  HookOff off;
  redispatch(op, keys, stack);
}

} // namespace

TORCH_LIBRARY_IMPL(_, Fake, m) {
  m.fallback(torch::CppFunction::makeFromBoxedFunction<&fallback>());
}

PYBIND11_MODULE(_terra_dispatch, m) {
  m.doc() = "The co-executor's tape replay reached from a dispatch key "
            "below autograd (DispatchHook.cpp).";
  overloads = new std::unordered_map<const c10::FunctionSchema *, py::object>;
  m.def(
      "arm",
      [](py::object handler, py::object miss, py::object lookup, py::object run,
         py::object ran) {
        delete armed;
        armed = new Armed{std::move(handler), std::move(miss),
                          std::move(lookup), std::move(run), std::move(ran)};
      },
      py::arg("handler"), py::arg("miss"), py::arg("lookup"),
      py::arg("run") = py::none(), py::arg("ran") = py::none(),
      "Sets the handler the hook calls, handler(func, args, kwargs) -> the "
      "op's results or `miss`; lookup(name, overload) -> the OpOverload. "
      "With `run`, the handler is called with a fourth argument, `here` "
      "(no result aliases an argument and no tensor argument needs the "
      "Python key), and may return `run` "
      "when `here`: the hook then runs the op itself, past the Python key, "
      "and calls ran(results) (if given).");
  m.def(
      "disarm",
      [] {
        delete armed;
        armed = nullptr;
      },
      "Clears the handler: every op passes the hook.");
  m.def(
      "enable",
      [](bool on) {
        bool was = c10::impl::tls_is_dispatch_key_included(kHookKey);
        c10::impl::tls_set_dispatch_key_included(kHookKey, on);
        return was;
      },
      py::arg("on"),
      "Includes the hook's dispatch key in this thread's local keys (or "
      "not); returns whether it was included.");
  m.def("run_through", &runThrough, py::arg("func"), py::arg("args"),
        py::arg("kwargs"),
        "Runs OpOverload `func`'s kernel past the Python key with "
        "autograd's dispatch keys (and ADInplaceOrView) no longer excluded "
        "on this thread, as eager runs an op autograd falls through; the "
        "thread's local keys are restored after.");
  terra::bindTensorState(m);
  m.def(
      "counts",
      [] {
        py::dict d;
        d["hits"] = counts.hits;
        d["misses"] = counts.misses;
        d["ran_here"] = counts.ranHere;
        return d;
      },
      "Ops the handler replayed and ops it passed, since the process "
      "started.");
}
