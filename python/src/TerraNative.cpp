//===- TerraNative.cpp - pybind11 binding of the Terra runtime ------------===//
//
// The `_terra_native` extension module: the compiler Session (merge,
// generate, compile), the validator Cursor, and graph runs with their
// channels. Tensors cross as (data pointer, dtype, sizes, strides, owner):
// no copy is made, and the owner (a Python object) is kept alive for as
// long as the runtime holds the tensor. Every blocking call releases the
// GIL, so the runner thread's host callbacks can run Python.
//
//===----------------------------------------------------------------------===//
#include "CrashTrace.h"
#include "HostRng.h"
#include "LoopHook.h"
#include "NativeReplay.h"
#include "StateWalk.h"
#include "terra/Frontend/Session.h"
#include "terra/Runtime/GraphRunner.h"
#include "terra/Runtime/HostAllocator.h"
#ifdef TERRA_ENABLE_CUDA
#include "terra/Runtime/Cuda.h"
#endif

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstdlib>
#include <cstring>
#include <deque>
#include <mutex>
#include <thread>
#include <vector>

namespace py = pybind11;
using namespace terra;
using namespace terra::rt;

namespace {

/// References dropped by threads without the GIL (the runner thread
/// freeing a run), released by the host at its next `drainReleased`.
std::mutex releasedMu;
std::vector<py::object *> released;

/// Drops the references other threads left; the caller holds the GIL.
void drainReleased() {
  std::vector<py::object *> drop;
  {
    std::lock_guard<std::mutex> lock(releasedMu);
    drop.swap(released);
  }
  for (py::object *p : drop)
    delete p;
}

/// Keeps a Python object alive from C++; safe to release on any thread. A
/// thread without the GIL does not take it (the runner thread would wait
/// for the host's switch interval, and at interpreter exit a thread that
/// asks for the GIL is ended): it leaves the reference to the host.
std::shared_ptr<void> pyOwner(py::object obj) {
  auto *held = new py::object(std::move(obj));
  return std::shared_ptr<void>(held, [](void *p) {
    if (!Py_IsInitialized())
      return; // interpreter gone: leak rather than crash
    if (PyGILState_Check()) {
      delete static_cast<py::object *>(p);
      return;
    }
    std::lock_guard<std::mutex> lock(releasedMu);
    released.push_back(static_cast<py::object *>(p));
  });
}

DType dtypeOf(const std::string &name) {
  DType d;
  if (!parseDType(name, d))
    throw py::value_error("unsupported dtype '" + name + "'");
  return d;
}

/// Checks that the tensor behind a spec (its owner) lives where a graph of
/// `graphDevice` can read it: the host's memory, or for a CUDA graph also
/// CUDA memory. Anything else (a meta tensor, another device) would hand
/// the graph a pointer it cannot read: a clear error instead of a crash.
/// Returns whether the tensor is in CUDA memory.
bool checkReadable(py::handle owner, const std::string &graphDevice,
                   const char *what, int64_t id) {
  py::object device = py::getattr(owner, "device", py::none());
  if (device.is_none())
    return false; // not a torch tensor (the runtime's own tests)
  std::string type = py::str(device.attr("type"));
  if (type == "cpu")
    return false;
  if (type == "cuda" && graphDevice == "cuda")
    return true;
  throw py::value_error(std::string(what) + " " + std::to_string(id) +
                        ": a tensor on " + std::string(py::str(device)) +
                        " cannot be read by a graph that runs on " +
                        (graphDevice == "cuda" ? "cuda" : "cpu"));
}

/// A Python int as int64 (sizes, strides, ids) through the C API: pybind's
/// caster costs a temporary object per element, and a step crosses
/// thousands (every state tensor at its start and its commit, every feed).
int64_t asInt64(PyObject *o) {
  if (!PyLong_Check(o))
    return py::reinterpret_borrow<py::object>(o).cast<int64_t>();
  long long v = PyLong_AsLongLong(o);
  if (v == -1 && PyErr_Occurred())
    throw py::error_already_set();
  return v;
}

/// Sizes or strides: a tuple (torch.Size is one) read in place, any other
/// sequence through pybind's caster.
std::vector<int64_t> asInt64s(PyObject *o) {
  if (!PyTuple_Check(o))
    return py::reinterpret_borrow<py::object>(o).cast<std::vector<int64_t>>();
  Py_ssize_t n = PyTuple_GET_SIZE(o);
  std::vector<int64_t> out(static_cast<size_t>(n));
  for (Py_ssize_t i = 0; i < n; ++i)
    out[i] = asInt64(PyTuple_GET_ITEM(o, i));
  return out;
}

/// An element type name ("f32", ...) as a DType; the name's UTF-8 is read
/// in place.
DType dtypeOf(PyObject *name) {
  Py_ssize_t n = 0;
  const char *text =
      PyUnicode_Check(name) ? PyUnicode_AsUTF8AndSize(name, &n) : nullptr;
  if (!text)
    return dtypeOf(
        py::reinterpret_borrow<py::object>(name).cast<std::string>());
  return dtypeOf(std::string(text, static_cast<size_t>(n)));
}

/// (data_ptr, dtype, sizes, strides, owner) -> Tensor, without a
/// reference to the owner: valid while the caller holds `spec`.
Tensor toTensorView(py::tuple spec) {
  if (spec.size() != 5)
    throw py::value_error("a tensor spec is (ptr, dtype, sizes, strides, owner)");
  PyObject *const *item = &PyTuple_GET_ITEM(spec.ptr(), 0);
  Tensor t;
  PyObject *ptr = item[0];
  t.data = reinterpret_cast<void *>(
      PyLong_Check(ptr)
          ? uintptr_t(PyLong_AsUnsignedLongLong(ptr))
          : py::reinterpret_borrow<py::object>(ptr).cast<uintptr_t>());
  if (PyErr_Occurred())
    throw py::error_already_set();
  t.dtype = dtypeOf(item[1]);
  t.sizes = asInt64s(item[2]);
  t.strides = asInt64s(item[3]);
  if (t.sizes.size() != t.strides.size())
    throw py::value_error("sizes and strides differ in rank");
  return t;
}

/// (data_ptr, dtype, sizes, strides, owner) -> Tensor, keeping the owner
/// alive.
Tensor toTensor(py::tuple spec) {
  Tensor t = toTensorView(spec);
  t.owner = pyOwner(spec[4]);
  return t;
}

py::dtype numpyDtype(DType d) {
  switch (d) {
  case DType::F32: return py::dtype("float32");
  case DType::F64: return py::dtype("float64");
  case DType::F16: return py::dtype("float16");
  case DType::I64: return py::dtype("int64");
  case DType::I32: return py::dtype("int32");
  case DType::I16: return py::dtype("int16");
  case DType::I8: return py::dtype("int8");
  case DType::I1: return py::dtype("bool");
  case DType::U8:
    return py::dtype("uint8");
  case DType::BF16:
    return py::dtype("int16"); // numpy has no bfloat16: its bits (toArray)
  }
  throw py::type_error("unknown element type");
}

/// A numpy array viewing `t` (no copy); it keeps `t`'s memory alive. A
/// bfloat16 tensor, which numpy cannot hold, crosses as (its bits as
/// int16, "bfloat16"): the front end views them as bfloat16 again
/// (runio.to_torch).
py::object toArray(const Tensor &t) {
  std::vector<py::ssize_t> shape(t.sizes.begin(), t.sizes.end());
  std::vector<py::ssize_t> strides;
  size_t elem = dtypeSize(t.dtype);
  for (int64_t s : t.strides)
    strides.push_back(py::ssize_t(s * elem));
  auto *keep = new Tensor(t);
  py::capsule base(keep, [](void *p) { delete static_cast<Tensor *>(p); });
  py::array array(numpyDtype(t.dtype), shape, strides, t.data, base);
  if (t.dtype == DType::BF16)
    return py::make_tuple(array, "bfloat16");
  return std::move(array);
}

// DLPack's ABI (dlpack.h v0.8; the "dltensor" capsule every PyTorch
// accepts in torch.utils.dlpack.from_dlpack): how fetched device buffers
// become CUDA tensors without a copy.
struct DLDevice {
  int32_t deviceType; // kDLCPU = 1, kDLCUDA = 2
  int32_t deviceId;
};
struct DLDataType {
  uint8_t code; // kDLInt = 0, kDLUInt = 1, kDLFloat = 2, kDLBfloat = 4
  uint8_t bits;
  uint16_t lanes;
};
struct DLTensor {
  void *data;
  DLDevice device;
  int32_t ndim;
  DLDataType dtype;
  int64_t *shape, *strides;
  uint64_t byteOffset;
};
struct DLManagedTensor {
  DLTensor tensor;
  void *managerCtx;
  void (*deleter)(DLManagedTensor *self);
};
constexpr int32_t kDLCPU = 1, kDLCUDA = 2;

DLDataType dlDataType(DType d) {
  switch (d) {
  case DType::F32:
    return {2, 32, 1};
  case DType::F64:
    return {2, 64, 1};
  case DType::F16:
    return {2, 16, 1};
  case DType::BF16:
    return {4, 16, 1};
  case DType::I64:
    return {0, 64, 1};
  case DType::I32:
    return {0, 32, 1};
  case DType::I16:
    return {0, 16, 1};
  case DType::I8:
    return {0, 8, 1};
  case DType::I1:
    return {1, 8, 1}; // as uint8: see Run::fetch
  case DType::U8:
    return {1, 8, 1};
  }
  return {2, 32, 1};
}

/// A "dltensor" capsule viewing `t` on `deviceType` (device 0: the CUDA
/// runtime's context is device 0's primary context); it keeps `t`'s memory
/// alive until the consumer's tensor or the unconsumed capsule is freed.
/// A CUDA buffer goes back to the caching allocator, which may hand it to
/// the next run, only after the kernels PyTorch queued on it are done.
py::object toDLPack(const Tensor &t, int32_t deviceType) {
  struct Holder {
    Tensor tensor;
    std::vector<int64_t> shape, strides;
    DLManagedTensor managed;
    bool device;
    ~Holder() {
#ifdef TERRA_ENABLE_CUDA
      if (device)
        terra::cuda::synchronize();
#endif
    }
  };
  auto *h = new Holder{t, t.sizes, t.strides, {}, deviceType == kDLCUDA};
  DLTensor &d = h->managed.tensor;
  d.data = t.data;
  d.device = {deviceType, 0};
  d.ndim = int32_t(t.sizes.size());
  d.dtype = dlDataType(t.dtype);
  d.shape = h->shape.data();
  d.strides = h->strides.data();
  d.byteOffset = 0;
  h->managed.managerCtx = h;
  h->managed.deleter = [](DLManagedTensor *m) {
    delete static_cast<Holder *>(m->managerCtx);
  };
  // A consumer renames the capsule "used_dltensor" and calls the deleter
  // itself; an unconsumed capsule deletes on destruction.
  PyObject *capsule = PyCapsule_New(&h->managed, "dltensor", [](PyObject *cap) {
    if (!PyCapsule_IsValid(cap, "dltensor"))
      return;
    auto *m =
        static_cast<DLManagedTensor *>(PyCapsule_GetPointer(cap, "dltensor"));
    m->deleter(m);
  });
  if (!capsule) {
    delete h;
    throw py::error_already_set();
  }
  return py::reinterpret_steal<py::object>(capsule);
}

/// The memory of runs of a graph compiled for `device="cuda"`: device
/// buffers, feeds and state read in place from PyTorch's CUDA tensors,
/// fetches left on the device (RunState::BufferMemory::inputsOnDevice).
RunState::BufferMemory cudaMemory() {
#ifdef TERRA_ENABLE_CUDA
  RunState::BufferMemory m;
  m.alloc = [](size_t n, size_t) { return terra::cuda::allocDevice(n); };
  m.free = terra::cuda::freeDevice;
  m.stageInputs = false;
  m.toDevice = terra::cuda::copyToDevice;
  m.toHost = terra::cuda::copyToHost;
  m.inputsOnDevice = true;
  m.onDevice = terra::cuda::copyOnDevice;
  m.deviceError = terra::cuda::takeLastError;
  m.beginStream = terra::cuda::beginRunStream;
  m.syncStream = terra::cuda::syncRunStream;
  m.endStream = terra::cuda::endRunStream;
  m.checkFlag = terra::cuda::runCheckFlag;
  return m;
#else
  throw std::runtime_error("this build of terra has no CUDA runtime (the "
                           "CUDA toolkit was not found when it was built)");
#endif
}

/// Waits for the work PyTorch queued on its current CUDA stream: the graph's
/// kernels run on streams of their own, and must not read a tensor before
/// the kernel or copy that writes it is done.
void syncTorchStream() {
  static py::object currentStream =
      py::module_::import("torch.cuda").attr("current_stream");
  currentStream().attr("synchronize")();
}

/// The memory of runs of a graph compiled for "gpu-loops" (tests): host
/// memory used the way a CUDA graph uses device memory (inputs read in
/// place, fetches handed over by DLPack, copies "on the device"), so the
/// front end's device="cuda" paths run on the CPU.
bool hostMemcpy(void *dst, const void *src, size_t bytes) {
  std::memcpy(dst, src, bytes);
  return true;
}
RunState::BufferMemory fakeDeviceMemory() {
  RunState::BufferMemory m;
  m.toDevice = m.toHost = m.onDevice = hostMemcpy;
  m.inputsOnDevice = true;
  return m;
}

/// `spec` as a tensor in device memory: as it is when it already is there
/// (`inDeviceMemory`: a PyTorch CUDA tensor, or any tensor of a gpu-loops
/// graph, whose device is the host), else (a Python scalar fed as a 0-dim
/// tensor, a CPU input of a CUDA program) copied into a buffer of `memory`.
Tensor toDeviceTensor(py::tuple spec, const RunState::BufferMemory &memory,
                      bool inDeviceMemory) {
  Tensor t = toTensor(spec);
  if (inDeviceMemory)
    return t;
  std::string error;
  Tensor dev = copyIntoMemory(t, memory, "a graph input", error);
  if (!error.empty())
    throw std::runtime_error(error);
  dev.owner = std::shared_ptr<void>(dev.data, memory.free);
  return dev;
}

/// Where a graph's runs keep values: "cpu" (host memory), "cuda" (device
/// memory, inputs read in place) or "gpu-loops" (tests: host memory used
/// the way a CUDA graph uses device memory).
struct GraphDevice {
  explicit GraphDevice(std::string name)
      : name(std::move(name)), fake(this->name == "gpu-loops"),
        onDevice(this->name == "cuda" || fake) {}
  std::string name;
  bool fake, onDevice;
};

/// The state specs of a graph's latest run and what the runtime read from
/// them. runio.tensor_specs returns a state tensor's spec object again
/// while it still describes the tensor, so a spec seen before is not read
/// again: Graph.new_run reuses its Tensor, and Run.fetch_into its view for
/// a commit's destination (a step crossed ~1 us per state tensor each
/// time, mostly cache misses on the spec's Python objects).
struct SpecCache {
  std::vector<py::object> specs; ///< Strong: an address is never reused.
  std::vector<Tensor> tensors;   ///< specs[i] as read, its owner kept.
  /// Spec -> index, built at the first lookup after a run's creation.
  std::unordered_map<PyObject *, size_t> index;
  uint64_t generation = 0; ///< Moves with every run created.

  /// The Tensor read from `spec` for run `generation`, or null.
  const Tensor *find(uint64_t runGeneration, PyObject *spec) {
    if (runGeneration != generation)
      return nullptr;
    if (index.empty())
      for (size_t i = 0; i < specs.size(); ++i)
        index.emplace(specs[i].ptr(), i);
    auto it = index.find(spec);
    return it == index.end() ? nullptr : &tensors[it->second];
  }
};

/// One iteration of a graph on its runner: the host's end of the channels.
class Run {
public:
  Run(std::shared_ptr<GraphRunner> runner, std::shared_ptr<RunState> state,
      GraphDevice device, std::shared_ptr<SpecCache> specCache = nullptr,
      uint64_t generation = 0)
      : runner(std::move(runner)), state(std::move(state)),
        device(std::move(device)), specCache(std::move(specCache)),
        generation(generation) {}

  void start() {
    if (started)
      return;
    started = true;
    runner->start(state);
  }
  void feed(int64_t point, py::tuple spec) {
    bool cuda = checkReadable(spec[4], device.name, "feed", point);
    if (!device.onDevice) {
      live().channels.sendFeed(point, toTensor(spec));
      return;
    }
    if (cuda)
      syncTorchStream();
    live().channels.sendFeed(
        point, toDeviceTensor(spec, live().memory, cuda || device.fake));
  }
  void sendCase(int64_t point, uint32_t index) {
    live().channels.sendCase(point, index);
  }
  void sendLoop(int64_t point, bool next) {
    live().channels.sendLoop(point, next);
  }
  /// The host validated the iteration's end and sent every signal.
  void finishHost() { live().channels.finishHost(); }
  /// The `instance`-th value of fetch point `point`, or None when the run
  /// was cancelled or ended without publishing it. No copy: the array views
  /// the graph's buffer (the runtime copies only values aliasing host
  /// memory or constants) and its capsule shares ownership of the buffer,
  /// which stays valid after the run ends or is cancelled. The graph may
  /// still read the buffer until its run ends: the host must not write into
  /// a fetched array before then.
  /// On a CUDA graph the value stays on the device: a DLPack capsule
  /// (torch.utils.dlpack.from_dlpack) instead of an array; a bool value is
  /// (capsule of uint8, "bool").
  py::object fetch(int64_t point, uint64_t instance) {
    Tensor t;
    bool ok;
    Channels &channels = live().channels; // raises, GIL held, once retired
    {
      py::gil_scoped_release release;
      ok = channels.waitFetch(point, instance, t);
    }
    if (!ok)
      return py::none();
    // A value the graph computed into a state's memory (-terra-commit-in-
    // place) is published without an owner: the host's state tensor holds
    // that memory, and changes it later, so the host gets a copy.
    if (!t.owner && !device.onDevice)
      t = t.contiguousCopy();
    if (device.onDevice) {
      py::object capsule = toDLPack(t, device.fake ? kDLCPU : kDLCUDA);
      // torch 1.13 has no kDLBool: a bool tensor crosses as uint8, and the
      // front end views it as bool again (runio.to_torch).
      if (t.dtype == DType::I1)
        return py::make_tuple(capsule, "bool");
      return capsule;
    }
    return toArray(t);
  }
  /// Whether `fetch(point, instance)` would return without blocking (the
  /// value is published, or the run ended or was cancelled).
  bool ready(int64_t point, uint64_t instance) const {
    return live().channels.fetchReady(point, instance);
  }
  /// One value fetchInto copies.
  struct Copy {
    void *dst;
    const void *src;
    size_t bytes;
  };
  /// Runs `copies` (`total` bytes), on two threads when there is enough to
  /// copy for a second thread to pay off (a committed YOLOv3 step writes
  /// ~25 MB of state: one thread copied it at ~3.5 GB/s on a 2-core VM) and
  /// the machine has a second core. The run has ended, so the runner's
  /// core is free.
  void copyAll(const std::vector<Copy> &copies, size_t total) {
    if (device.onDevice) {
      // Device to device (the destinations are PyTorch's CUDA tensors).
      for (const Copy &c : copies)
        if (!live().memory.onDevice(c.dst, c.src, c.bytes))
          throw std::runtime_error("committing state: a copy on the device "
                                   "failed");
      return;
    }
    constexpr size_t kParallelBytes = size_t(2) << 20;
    auto run = [&](size_t begin, size_t end) {
      for (size_t i = begin; i < end; ++i)
        std::memmove(copies[i].dst, copies[i].src, copies[i].bytes);
    };
    if (total < kParallelBytes || std::thread::hardware_concurrency() < 2) {
      run(0, copies.size());
      return;
    }
    // The first half of the bytes on a helper thread, the rest here.
    size_t split = 0;
    for (size_t acc = 0; split < copies.size() && acc < total / 2; ++split)
      acc += copies[split].bytes;
    std::thread helper(run, size_t(0), split);
    run(split, copies.size());
    helper.join();
  }

  /// Copies published values straight into host memory, for a committed
  /// iteration's state: `items` are (point, instance, tensor spec of the
  /// destination). An item is copied when the value has the destination's
  /// dtype and sizes and both are contiguous; returns, per item, whether it
  /// was, or None (nothing copied) when a value was never published (the
  /// run failed or was cancelled). One call, the GIL released once, and a
  /// memcpy per value, instead of a fetch, a numpy array and a torch copy
  /// each.
  py::object fetchInto(const py::list &items) {
    std::vector<std::pair<int64_t, uint64_t>> points;
    // Each destination: the view the run's SpecCache read from a state
    // spec, else one read here (`parsed`). `items` holds the destinations
    // for the call: no owner needed.
    std::vector<const Tensor *> dsts;
    std::deque<Tensor> parsed;
    points.reserve(items.size());
    dsts.reserve(items.size());
    for (py::handle h : items) {
      PyObject *t = h.ptr();
      if (!PyTuple_Check(t) || PyTuple_GET_SIZE(t) != 3 ||
          !PyTuple_Check(PyTuple_GET_ITEM(t, 2)))
        throw py::value_error("an item is (point, instance, tensor spec)");
      int64_t instance = asInt64(PyTuple_GET_ITEM(t, 1));
      if (instance < 0)
        throw py::value_error("an item's instance is negative");
      points.push_back({asInt64(PyTuple_GET_ITEM(t, 0)), uint64_t(instance)});
      PyObject *spec = PyTuple_GET_ITEM(t, 2);
      const Tensor *seen =
          specCache ? specCache->find(generation, spec) : nullptr;
      if (!seen)
        seen = &parsed.emplace_back(
            toTensorView(py::reinterpret_borrow<py::tuple>(spec)));
      dsts.push_back(seen);
    }
    std::vector<bool> copied(dsts.size(), false);
    Channels &channels = live().channels;
    std::vector<Copy> copies;
    size_t total = 0;
    bool published;
    {
      py::gil_scoped_release release;
      // All values first: the state is written all or not at all.
      published =
          channels.visitFetches(points, [&](size_t i, const Tensor &src) {
            const Tensor &dst = *dsts[i];
            if (src.dtype != dst.dtype || src.sizes != dst.sizes ||
                !src.isContiguous() || !dst.isContiguous())
              return;
            size_t bytes = size_t(src.numel()) * dtypeSize(src.dtype);
            if (src.data != dst.data && bytes) {
              copies.push_back({dst.data, src.data, bytes});
              total += bytes;
            }
            copied[i] = true;
          });
      if (published)
        copyAll(copies, total);
    }
    if (!published)
      return py::none();
    return py::cast(copied);
  }
  /// Waits until the graph needs more input from the host or has ended.
  void waitIdle() {
    Channels &channels = live().channels;
    py::gil_scoped_release release;
    channels.waitGraphIdle();
  }
  void cancel() {
    live().channels.cancel();
    if (started)
      runner->cancel();
  }
  /// Waits for the run to end: (status, error, exec_s, graph_stall_s,
  /// host_stall_s). Status is "ok", "cancelled" or "error".
  py::tuple wait() {
    if (!finished) {
      if (!started) {
        live().channels.cancel();
        live().status = RunState::Status::Cancelled;
      } else {
        py::gil_scoped_release release;
        runner->wait();
      }
      finished = true;
    }
    const char *status = "pending";
    switch (live().status) {
    case RunState::Status::Ok: status = "ok"; break;
    case RunState::Status::Cancelled: status = "cancelled"; break;
    case RunState::Status::Error: status = "error"; break;
    case RunState::Status::Pending: break;
    }
    return py::make_tuple(status, live().error, live().execSeconds,
                          live().channels.graphStallSeconds(),
                          live().channels.hostStallSeconds());
  }
  /// How many values the graph wrote straight into their state's memory
  /// (-terra-commit-in-place) instead of leaving them to the host's copy.
  size_t inPlaceCommits() { return live().inPlaceCommits; }
  /// Hands the ended run's buffers to the runner thread, which frees them
  /// while the host goes on (a graph-bound program's graph idles until the
  /// host's next feed: freeing a run's buffers there cost ~0.25 ms per
  /// step); the Python objects the run held (state and feed tensors) are
  /// released by the host at the next run's start (pyOwner). A run that
  /// has not ended is left to the destructor, which cancels it. The run
  /// cannot be used afterwards.
  void retire() {
    if (!state || (started && !finished))
      return;
    live().hostOps = nullptr; // holds a Python object: dropped under the GIL
    runner->retire(std::move(state));
  }
  ~Run() {
    if (state && started && !finished) {
      py::gil_scoped_release release;
      state->channels.cancel();
      runner->cancel();
      runner->wait();
    }
    drainReleased(); // Python objects only (Python deallocates a Run)
  }

private:
  RunState &live() const {
    if (!state)
      throw py::value_error("the run was retired: its values are gone");
    return *state;
  }
  std::shared_ptr<GraphRunner> runner;
  std::shared_ptr<RunState> state;
  GraphDevice device;
  std::shared_ptr<SpecCache> specCache; ///< Its graph's (CPU graphs).
  uint64_t generation = 0;              ///< specCache's when made.
  bool started = false, finished = false;
};

/// A compiled graph and its runner thread.
class Graph {
public:
  Graph(std::unique_ptr<CompiledGraph> g, std::string device)
      : graph(std::move(g)), device(std::move(device)) {
    runner = std::make_shared<GraphRunner>(*graph);
  }
  ~Graph() {
    py::gil_scoped_release release;
    runner.reset();
  }
  std::unique_ptr<Run> newRun(std::vector<py::tuple> states,
                              py::object hostExecutor) {
    drainReleased();
    if (states.size() != graph->stateNames().size())
      throw py::value_error("the graph reads " +
                            std::to_string(graph->stateNames().size()) +
                            " states, " + std::to_string(states.size()) +
                            " given");
    auto state = std::make_shared<RunState>();
    state->channels.setFeedTypes(&graph->feedTypes());
    if (device.fake)
      state->memory = fakeDeviceMemory();
    else if (device.onDevice)
      state->memory = cudaMemory();
    if (device.onDevice && !device.fake && !states.empty())
      syncTorchStream(); // once for all the state
    // A state tensor's device is looked up when the tensor is new here: its
    // object or data pointer differs from the last run's (the same ones
    // cannot have moved to another device). Most runs look up none.
    checkedStates.resize(states.size());
    // A CPU graph reads the state where it is: a spec seen by the last run
    // (the same object) gives the same Tensor (SpecCache).
    bool reuse = !device.onDevice;
    if (reuse) {
      ++specCache->generation;
      specCache->index.clear();
      specCache->specs.resize(states.size());
      specCache->tensors.resize(states.size());
    }
    for (size_t i = 0; i < states.size(); ++i) {
      if (reuse && specCache->specs[i].ptr() == states[i].ptr()) {
        state->states.push_back(specCache->tensors[i]);
        continue;
      }
      CheckedState seen{states[i][4].ptr(), states[i][0].cast<uintptr_t>()};
      CheckedState &last = checkedStates[i];
      if (last.owner != seen.owner || last.data != seen.data) {
        seen.cuda =
            checkReadable(states[i][4], device.name, "state", int64_t(i));
        last = seen;
      }
      state->states.push_back(device.onDevice
                                  ? toDeviceTensor(states[i], state->memory,
                                                   last.cuda || device.fake)
                                  : toTensor(states[i]));
      if (reuse) {
        specCache->specs[i] = states[i];
        specCache->tensors[i] = state->states.back();
      }
    }
    if (!hostExecutor.is_none()) {
      // Held through pyOwner: the run may be released on the runner thread,
      // and dropping the reference there needs the GIL.
      std::shared_ptr<void> owner = pyOwner(hostExecutor);
      state->hostOps = [owner](int64_t id, const std::vector<Tensor> &in,
                               std::vector<Tensor> &out, std::string &error) {
        py::gil_scoped_acquire gil;
        try {
          py::list args;
          for (const Tensor &t : in)
            args.append(toArray(t));
          py::object result = (*static_cast<py::object *>(owner.get()))(id, args);
          for (py::handle h : result)
            out.push_back(toTensor(py::reinterpret_borrow<py::tuple>(h)));
          return true;
        } catch (py::error_already_set &e) {
          error = e.what();
          return false;
        } catch (std::exception &e) {
          error = e.what();
          return false;
        }
      };
    }
    return std::make_unique<Run>(runner, std::move(state), device,
                                 reuse ? specCache : nullptr,
                                 specCache->generation);
  }
  std::unique_ptr<CompiledGraph> graph;
  GraphDevice device;
  std::shared_ptr<SpecCache> specCache = std::make_shared<SpecCache>();
  /// Each state tensor checkReadable accepted: its owner, its data pointer
  /// and whether it is in CUDA memory.
  struct CheckedState {
    PyObject *owner = nullptr;
    uintptr_t data = 0;
    bool cuda = false;
  };
  std::vector<CheckedState> checkedStates;
  std::shared_ptr<GraphRunner> runner;
};

/// The validator over a Session's TraceGraph.
class PyCursor {
public:
  explicit PyCursor(const TraceGraph &g) : graph(g), cursor(g) {}
  void reset() { cursor.reset(); }
  /// Validates an op; inputs are flat (node, result, instance) triples.
  /// Returns (node, instance) or None.
  py::object op(int64_t key, const std::vector<uint32_t> &flat) {
    handles.clear();
    for (size_t i = 0; i + 2 < flat.size(); i += 3)
      handles.push_back(Handle{flat[i], flat[i + 1], flat[i + 2]});
    NodeId node;
    uint32_t instance;
    if (!cursor.op(KeyId(key), handles, node, instance))
      return py::none();
    return py::make_tuple(node, instance);
  }
  py::object feed(int64_t key) {
    NodeId node;
    uint32_t instance;
    if (!cursor.feed(KeyId(key), node, instance))
      return py::none();
    return py::make_tuple(node, instance);
  }
  py::object state(int64_t key) {
    Handle h;
    if (!cursor.state(KeyId(key), h))
      return py::none();
    return py::make_tuple(h.node, h.result, h.instance);
  }
  bool loopBegin(int64_t key) { return cursor.loopBegin(KeyId(key)); }
  bool loopIter() { return cursor.loopIter(); }
  bool loopEnd() { return cursor.loopEnd(); }
  bool finish() { return cursor.finish(); }
  /// The fetch point publishing result `result` of `node`, or -1.
  int64_t fetchId(uint32_t node, uint32_t result) const {
    const Node &n = graph.node(node);
    return result < n.fetchIds.size() ? n.fetchIds[result] : -1;
  }
  /// Signals decided since the last call: (is_case, point, value).
  std::vector<std::tuple<bool, int64_t, uint32_t>> takeSignals() {
    std::vector<std::tuple<bool, int64_t, uint32_t>> out;
    for (const Signal &s : cursor.signals())
      out.emplace_back(s.kind == Signal::Case, int64_t(s.point), s.value);
    cursor.clearSignals();
    return out;
  }

private:
  const TraceGraph &graph;
  Cursor cursor;
  std::vector<Handle> handles;
};

} // namespace

// OpenBLAS's thread count (the graphs' GEMM library; the runtime links it).
extern "C" void openblas_set_num_threads(int);
extern "C" int openblas_get_num_threads(void);

PYBIND11_MODULE(_terra_native, m) {
  if (const char *v = std::getenv("TERRA_NATIVE_BACKTRACE");
      v && *v && std::strcmp(v, "0") != 0)
    terra::installCrashBacktrace(v);
  m.def(
      "set_graph_threads",
      [](int n) {
        if (n < 1)
          throw py::value_error("graph threads must be at least 1");
        openblas_set_num_threads(n);
      },
      "Threads the graphs' library calls (GEMM) may use.");
  m.def("graph_threads", [] { return openblas_get_num_threads(); });
  m.def(
      "set_wait_spin_us",
      [](double us) {
        if (!(us >= 0))
          throw py::value_error("the wait spin must be >= 0 microseconds");
        terra::rt::Channels::setSpin(std::chrono::nanoseconds(
            static_cast<int64_t>(us * 1000.0)));
      },
      "How long host and graph waits spin before they block (Channels::"
      "setSpin).");
  m.def("wait_spin_us", [] {
    return static_cast<double>(terra::rt::Channels::spin().count()) / 1000.0;
  });

  m.def(
      "set_host_cache_mb",
      [](double mb) {
        if (!(mb >= 0))
          throw py::value_error("the host buffer cache limit must be >= 0 MiB");
        terra::rt::setHostCacheLimit(static_cast<size_t>(mb * 1048576.0));
      },
      "The most MiB of freed graph buffers the caching host allocator keeps "
      "(HostAllocator.h); 0 caches nothing.");
  m.def("host_cache_stats", [] {
    terra::rt::HostCacheStats s = terra::rt::hostCacheStats();
    py::dict d;
    d["cached_bytes"] = s.cachedBytes;
    d["limit_bytes"] = s.limitBytes;
    d["hits"] = s.hits;
    d["misses"] = s.misses;
    return d;
  });
  m.def("host_cache_release", &terra::rt::hostCacheRelease,
        "Gives every cached graph buffer back to the system.");

  m.doc() = "Terra-MLIR native runtime: compiler session, validator, runner";
  terra::bindLoopHook(m);
  terra::bindNativeReplay(m);
  terra::bindHostRng(m);
  terra::bindStateWalk(m);

  py::class_<Session>(m, "Session")
      .def(py::init<>())
      .def("add_trace",
           [](Session &s, const std::string &text) {
             AddTraceResult r;
             {
               // It waits for a compile running on another thread.
               py::gil_scoped_release release;
               r = s.addTrace(text);
             }
             py::dict d;
             d["error"] = r.error;
             d["changed"] = r.changed;
             d["coverable"] = r.coverable;
             d["keys"] = r.keys;
             return d;
           })
      .def(
          "compile",
          [](Session &s, const std::string &cacheDir, unsigned maxDup,
             bool keepStages, const std::string &device,
             const std::string &gpuChip) {
            CompileOptions options;
            options.cacheDir = cacheDir;
            options.maxDuplication = maxDup;
            options.keepStages = keepStages;
            options.device = device;
            options.gpuChip = gpuChip;
            CompileStages stages;
            std::string error;
            std::unique_ptr<CompiledGraph> g;
            {
              py::gil_scoped_release release;
#ifdef TERRA_ENABLE_CUDA
              // Loading the graph's kernels (its constructors, on this
              // thread) reports errors here: an earlier one is not its own.
              if (device == "cuda")
                terra::cuda::takeLastError();
#endif
              g = s.compile(options, error, &stages);
#ifdef TERRA_ENABLE_CUDA
              // A kernel image the device would not load (a PTX JIT error)
              // fails the compile: every run would fail at its launches.
              // Without a device (compiled to check it) nothing loads.
              if (g && device == "cuda" && terra::cuda::available()) {
                std::string load = terra::cuda::takeLastError();
                if (!load.empty()) {
                  g.reset();
                  error = "the graph's kernels did not load: " + load;
                }
              }
#endif
            }
            if (!g)
              throw std::runtime_error(error);
            py::dict st;
            st["trace_graph"] = stages.traceGraph;
            st["graph"] = stages.graph;
            st["linalg"] = stages.linalg;
            st["lowered"] = stages.lowered;
            return py::make_tuple(std::make_unique<Graph>(std::move(g), device),
                                  st);
          },
          py::arg("cache_dir") = "", py::arg("max_duplication") = 64,
          py::arg("keep_stages") = false, py::arg("device") = "cpu",
          py::arg("gpu_chip") = "sm_90")
      .def(
          "cursor",
          [](Session &s) { return std::make_unique<PyCursor>(s.graph()); },
          py::keep_alive<0, 1>())
      .def_property_readonly("unrolled_loops", &Session::unrolledLoops)
      .def("trace_graph_text", &Session::traceGraphText,
           py::call_guard<py::gil_scoped_release>())
      .def("trace_graph_dot", &Session::traceGraphDot,
           py::call_guard<py::gil_scoped_release>())
      .def("describe_key", &Session::describeKey,
           py::call_guard<py::gil_scoped_release>())
      .def("node_location", &Session::nodeLocation,
           py::call_guard<py::gil_scoped_release>())
      .def("key_name_and_args", &Session::keyNameAndArgs,
           py::call_guard<py::gil_scoped_release>())
      .def("node_shape", &Session::nodeShape,
           py::call_guard<py::gil_scoped_release>())
      .def_property_readonly("num_nodes",
                             [](Session &s) { return s.graph().size(); });

  py::class_<PyCursor>(m, "Cursor")
      .def("reset", &PyCursor::reset)
      .def("op", &PyCursor::op)
      .def("feed", &PyCursor::feed)
      .def("state", &PyCursor::state)
      .def("loop_begin", &PyCursor::loopBegin)
      .def("loop_iter", &PyCursor::loopIter)
      .def("loop_end", &PyCursor::loopEnd)
      .def("finish", &PyCursor::finish)
      .def("fetch_id", &PyCursor::fetchId)
      .def("take_signals", &PyCursor::takeSignals);

  py::class_<Graph>(m, "Graph")
      .def_property_readonly("state_names",
                             [](Graph &g) { return g.graph->stateNames(); })
      .def_property_readonly("host_ops",
                             [](Graph &g) {
                               std::vector<std::pair<std::string, std::string>>
                                   out;
                               for (const HostOpInfo &h : g.graph->hostOps())
                                 out.emplace_back(h.name, h.args);
                               return out;
                             })
      .def_property_readonly("compile_seconds",
                             [](Graph &g) { return g.graph->compileSeconds(); })
      .def_property_readonly(
          "loaded_from_cache",
          [](Graph &g) { return g.graph->loadedFromCache(); })
      .def_property_readonly("device", [](Graph &g) { return g.device.name; })
      .def("new_run", &Graph::newRun, py::arg("states"),
           py::arg("host_executor") = py::none(), py::keep_alive<0, 1>());

  py::class_<Run>(m, "Run")
      .def("start", &Run::start)
      .def("feed", &Run::feed)
      .def("send_case", &Run::sendCase)
      .def("send_loop", &Run::sendLoop)
      .def("finish_host", &Run::finishHost)
      .def("fetch", &Run::fetch)
      .def("ready", &Run::ready)
      .def("fetch_into", &Run::fetchInto, py::arg("items"))
      .def("wait_idle", &Run::waitIdle)
      .def("cancel", &Run::cancel)
      .def("wait", &Run::wait)
      .def("in_place_commits", &Run::inPlaceCommits)
      .def("retire", &Run::retire);
}
