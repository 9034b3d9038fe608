//===- API.cpp - C entry points called by compiled graphs -----------------===//
//
// The functions a lowered graph calls (see lib/Lowering/LowerGraph.cpp).
// They run on the runner thread and find their run through a thread-local.
// Every blocking call unwinds the graph with longjmp when the run is
// cancelled: the jump leaves only frames of JIT-compiled code and of these
// functions, none of which hold objects with destructors at that point
// (the C++ work happens in helpers that have returned), and the run's
// buffers are tracked so they can all be released afterwards.
//
//===----------------------------------------------------------------------===//
#include "RuntimeInternal.h"

#include <cmath>
#include <csetjmp>
#include <cstdio>
#include <cstdlib>
#include <cstring>

using namespace terra::rt;

namespace {
thread_local RunState *current = nullptr;

/// The ranked memref descriptor MLIR's LLVM lowering uses.
struct RankedDescriptor {
  void *allocated;
  void *aligned;
  int64_t offset;
  int64_t sizesAndStrides[]; // sizes[rank], then strides[rank]
};

/// Unwinds the current graph run. Only call with no live C++ objects.
[[noreturn]] void unwind(RunState *run) {
  std::longjmp(*static_cast<std::jmp_buf *>(run->jump), 1);
}

void failRun(RunState *run, const std::string &message) {
  run->status = RunState::Status::Error;
  run->error = message;
}

/// A runtime guard failed: the run fails with the graph's message `message`.
void failCheck(RunState *run, int64_t message) {
  const std::vector<std::string> *messages = run->assertMessages;
  failRun(run, messages && message >= 0 && size_t(message) < messages->size()
                   ? (*messages)[message]
                   : "runtime check failed");
}

/// The descriptor of a rank-1 i32 memref (C interface): the check flag.
struct MemRef1D {
  int32_t *allocated;
  int32_t *aligned;
  int64_t offset;
  int64_t sizes[1];
  int64_t strides[1];
};

/// A graph wait for a host value failed: a cancellation, or the host had
/// finished the iteration without sending it (graph and validator
/// disagree; an error rather than a hang).
void waitFailed(RunState *run, const char *what, int64_t id) {
  if (!run->channels.isCancelled() && run->channels.hostFinished())
    failRun(run, std::string("the graph waits for ") + what + " " +
                     std::to_string(id) +
                     ", which the host did not send before it finished the "
                     "iteration");
  else
    run->status = RunState::Status::Cancelled;
}

/// Fills a malloc'ed descriptor for `t` (the caller frees it); with
/// `canonical`, the row-major strides of a contiguous `t`, which a memref of
/// the identity layout must carry.
void describe(const Tensor &t, UnrankedMemRef *out, bool canonical = false) {
  int64_t rank = t.sizes.size();
  auto *d = static_cast<RankedDescriptor *>(
      std::malloc(sizeof(RankedDescriptor) + 2 * rank * sizeof(int64_t)));
  d->allocated = t.data;
  d->aligned = t.data;
  d->offset = 0;
  int64_t stride = 1;
  for (int64_t i = rank; i-- > 0;) {
    d->sizesAndStrides[i] = t.sizes[i];
    d->sizesAndStrides[rank + i] = canonical ? stride : t.strides[i];
    stride *= t.sizes[i];
  }
  out->rank = rank;
  out->descriptor = d;
}

/// Views the memref `in` as a tensor without copying.
Tensor view(const UnrankedMemRef *in, DType dtype) {
  auto *d = static_cast<const RankedDescriptor *>(in->descriptor);
  Tensor t;
  t.dtype = dtype;
  t.data = static_cast<char *>(d->aligned) + d->offset * dtypeSize(dtype);
  t.sizes.assign(d->sizesAndStrides, d->sizesAndStrides + in->rank);
  t.strides.assign(d->sizesAndStrides + in->rank,
                   d->sizesAndStrides + 2 * in->rank);
  return t;
}

/// A buffer for the graph: the run's memory (RunState::memory), or host
/// memory; tracked so a cancelled run releases it. Null when device memory
/// ran out (the run has failed).
void *allocBuffer(size_t size, size_t alignment) {
  RunState *run = current;
  if (!run)
    return hostAlloc(size, alignment);
  void *p = run->memory.alloc(size ? size : 1, alignment);
  if (!p) {
    failRun(run, "cannot allocate " + std::to_string(size) +
                     " bytes of device-reachable memory for a graph buffer");
    return nullptr;
  }
  run->buffers.insert(p, true);
  return p;
}

bool checkTensor(RunState *run, const Tensor &t, DType dtype, int64_t rank,
                 const char *what, int64_t id) {
  if (t.dtype != dtype || int64_t(t.sizes.size()) != rank) {
    failRun(run, std::string(what) + " " + std::to_string(id) + ": expected " +
                     dtypeName(dtype) + " of rank " + std::to_string(rank) +
                     ", got " + dtypeName(t.dtype) + " of rank " +
                     std::to_string(t.sizes.size()));
    return false;
  }
  return true;
}

// Each *Impl returns false when the run must unwind.

/// Stages host tensor `t` into a row-major buffer of the run's memory
/// (RunState::memory: the graph's kernels cannot reach host memory),
/// released with the run's other buffers, and describes it.
bool stageInput(RunState *run, const Tensor &t, UnrankedMemRef *out) {
  std::string error;
  Tensor staged = copyIntoMemory(t, run->memory, "an input", error);
  if (!error.empty()) {
    failRun(run, error);
    return false;
  }
  run->buffers.insert(staged.data, true);
  describe(staged, out, true);
  return true;
}

/// False, with the run failed, if the device reported an error since the
/// last check. Waits for the run's stream first: the host is about to read
/// a result, and a kernel's failure shows when it is waited for.
bool deviceOk(RunState *run) {
  if (run->memory.syncStream)
    run->memory.syncStream();
  return detail::checkDevice(*run);
}

/// The lowest and highest element view `t` touches (strides may be
/// negative or zero); `t` is not empty.
std::pair<int64_t, int64_t> viewSpan(const Tensor &t) {
  int64_t lo = 0, hi = 0;
  for (size_t d = 0; d < t.sizes.size(); ++d) {
    int64_t reach = (t.sizes[d] - 1) * t.strides[d];
    (reach < 0 ? lo : hi) += reach;
  }
  return {lo, hi};
}

/// A row-major host copy of the graph's view `t`. In memory the host cannot
/// read (RunState::memory.toHost) the span the view covers is copied out,
/// then made row-major on the host. False if that copy failed.
bool hostCopy(RunState *run, const Tensor &t, Tensor &out) {
  if (!run->memory.toHost) {
    out = t.contiguousCopy();
    return true;
  }
  size_t es = dtypeSize(t.dtype);
  int64_t n = t.numel();
  if (n == 0) {
    out = Tensor::empty(t.dtype, t.sizes);
    return true;
  }
  auto [lo, hi] = viewSpan(t);
  Tensor span = Tensor::empty(t.dtype, {hi - lo + 1});
  if (!run->memory.toHost(span.data, static_cast<char *>(t.data) + lo * es,
                          size_t(hi - lo + 1) * es))
    return false;
  Tensor v = t;
  v.data = static_cast<char *>(span.data) - lo * es;
  v.owner = span.owner;
  out = v.isContiguous() && lo == 0 && hi + 1 == n ? span : v.contiguousCopy();
  out.sizes = t.sizes;
  out.strides = contiguousStrides(t.sizes);
  return true;
}

/// Whether `t`'s memory overlaps that of a state the graph writes in place
/// (-terra-commit-in-place: the module's `terra.donated_states`), other
/// than state `self`. Such an input is given to the graph as a copy, so no
/// other buffer of the graph aliases a state it writes.
bool overlapsDonated(RunState *run, const Tensor &t, int64_t self = -1) {
  if (!run->donatedStates || run->donatedStates->empty() || !t.numel())
    return false;
  auto span = [](const Tensor &v) {
    auto [lo, hi] = viewSpan(v);
    size_t es = dtypeSize(v.dtype);
    auto base = reinterpret_cast<uintptr_t>(v.data);
    return std::pair<uintptr_t, uintptr_t>{base + lo * es,
                                           base + (hi + 1) * es};
  };
  if (!run->donatedSpansBuilt) {
    run->donatedSpansBuilt = true;
    run->isDonated.assign(run->states.size(), false);
    run->overlapsDonated.assign(run->states.size(), false);
    for (int64_t id : *run->donatedStates)
      if (id >= 0 && size_t(id) < run->states.size() &&
          run->states[id].numel()) {
        run->isDonated[id] = true;
        auto [lo, hi] = span(run->states[id]);
        run->donatedSpans.push_back({lo, hi, id});
      }
    std::sort(run->donatedSpans.begin(), run->donatedSpans.end());
    // The largest end so far, and the donated states that overlap another.
    uintptr_t maxHi = 0;
    for (size_t i = 0; i < run->donatedSpans.size(); ++i) {
      RunState::DonatedSpan &d = run->donatedSpans[i];
      if (i && d.lo < maxHi) {
        run->overlapsDonated[d.state] = true;
        for (size_t j = 0; j < i; ++j)
          if (run->donatedSpans[j].hi > d.lo)
            run->overlapsDonated[run->donatedSpans[j].state] = true;
      }
      maxHi = std::max(maxHi, d.hi);
      run->donatedMaxHi.push_back(maxHi);
    }
  }
  if (self >= 0 && size_t(self) < run->isDonated.size() && run->isDonated[self])
    return run->overlapsDonated[self];
  auto [lo, hi] = span(t);
  // Some span starting before `hi` ends after `lo`.
  auto end =
      std::lower_bound(run->donatedSpans.begin(), run->donatedSpans.end(),
                       RunState::DonatedSpan{hi, 0, -1});
  size_t n = end - run->donatedSpans.begin();
  return n && run->donatedMaxHi[n - 1] > lo;
}

/// Describes a feed or state tensor `t` to the graph: staged into the run's
/// memory when the graph's kernels cannot reach host memory; otherwise,
/// with `contiguous` (the `_contiguous` entry points, identity-layout
/// memrefs) as a row-major buffer: `t` itself when it is one, else a copy
/// the run keeps alive. The graph never writes into these buffers (they are
/// read-only tensors).
bool describeInput(RunState *run, const Tensor &t, UnrankedMemRef *out,
                   bool contiguous, int64_t state = -1) {
  if (run->memory.stageInputs)
    return stageInput(run, t, out);
  if (!run->memory.inputsOnDevice && overlapsDonated(run, t, state)) {
    Tensor copy = t.contiguousCopy();
    describe(copy, out, true);
    run->keepAlive.push_back(std::move(copy));
    return true;
  }
  if (contiguous && !t.isContiguous() && run->memory.inputsOnDevice) {
    // A device tensor (a transposed CUDA parameter, an expanded feed) the
    // host cannot read: made row-major through a host copy, then staged
    // back into the run's memory. Rare, so not a kernel of its own.
    Tensor host;
    if (!run->memory.toHost || !hostCopy(run, t, host)) {
      failRun(run, "copying a strided input from the device failed");
      return false;
    }
    return stageInput(run, host, out);
  }
  if (contiguous && !t.isContiguous()) {
    Tensor copy = t.contiguousCopy();
    describe(copy, out, true);
    run->keepAlive.push_back(std::move(copy));
    return true;
  }
  describe(t, out, contiguous);
  return true;
}

bool feedImpl(RunState *run, int64_t id, DType dtype, UnrankedMemRef *out,
              int64_t expectedRank, bool contiguous) {
  Tensor t;
  if (!run->channels.receiveFeed(id, t)) {
    waitFailed(run, "feed", id);
    return false;
  }
  if (!checkTensor(run, t, dtype, expectedRank, "feed", id))
    return false;
  if (!describeInput(run, t, out, contiguous))
    return false;
  run->keepAlive.push_back(std::move(t));
  return true;
}

bool stateImpl(RunState *run, int64_t id, DType dtype, UnrankedMemRef *out,
               int64_t expectedRank, bool contiguous) {
  if (id < 0 || size_t(id) >= run->states.size()) {
    failRun(run, "state " + std::to_string(id) + " was not provided");
    return false;
  }
  const Tensor &t = run->states[id];
  if (!checkTensor(run, t, dtype, expectedRank, "state", id))
    return false;
  return describeInput(run, t, out, contiguous, id);
}

/// FNV-1a over the elements of `t` in row-major order (any strides).
uint64_t hashElements(const Tensor &t) {
  uint64_t h = 1469598103934665603ull;
  size_t es = dtypeSize(t.dtype);
  int64_t n = t.numel();
  std::vector<int64_t> idx(t.sizes.size(), 0);
  const auto *base = static_cast<const unsigned char *>(t.data);
  for (int64_t i = 0; i < n; ++i) {
    int64_t off = 0;
    for (size_t d = 0; d < idx.size(); ++d)
      off += idx[d] * t.strides[d];
    for (size_t b = 0; b < es; ++b)
      h = (h ^ base[off * es + b]) * 1099511628211ull;
    for (size_t d = idx.size(); d-- > 0;) {
      if (++idx[d] < t.sizes[d])
        break;
      idx[d] = 0;
    }
  }
  return h;
}

/// A device copy of the span view `t` covers, with `t`'s layout, owned by
/// the result (RunState::memory.inputsOnDevice). False if it failed.
bool deviceCopy(RunState *run, const Tensor &t, Tensor &out) {
  size_t es = dtypeSize(t.dtype);
  auto [lo, hi] = t.numel() ? viewSpan(t) : std::pair<int64_t, int64_t>{0, -1};
  size_t bytes = size_t(hi - lo + 1) * es;
  void *span = run->memory.alloc(bytes ? bytes : 1, 0);
  if (!span)
    return false;
  out = t;
  out.owner = std::shared_ptr<void>(span, run->memory.free);
  out.data = static_cast<char *>(span) - lo * es;
  return run->memory.onDevice(span, static_cast<const char *>(t.data) + lo * es,
                              bytes);
}

bool fetchImpl(RunState *run, int64_t id, DType dtype,
               const UnrankedMemRef *in) {
  if (!deviceOk(run))
    return false;
  auto *d = static_cast<const RankedDescriptor *>(in->descriptor);
  Tensor t = view(in, dtype);
  if (run->memory.toHost && !run->memory.inputsOnDevice) {
    // Device memory: the host gets a copy (every buffer the graph reads is
    // in it, staged inputs included).
    Tensor host;
    if (!hostCopy(run, t, host)) {
      failRun(run, "fetch " + std::to_string(id) +
                       ": copying the value from the device failed");
      return false;
    }
    run->channels.publishFetch(id, std::move(host));
    return true;
  }
  if (run->buffers.contains(d->allocated)) {
    // A buffer of this run: publish it without a copy. The graph never
    // writes into a buffer after fetching it: every lowering writes into
    // fresh destinations (tensor.empty / alloc), so one-shot bufferization
    // only writes in place into buffers it allocated for the op itself
    // (verifyFetches checks this). Its free below, or the end of the run,
    // only drops the graph's reference, so the memory is neither freed nor
    // reused while a fetched tensor holds it.
    std::shared_ptr<void> &owner = run->published[d->allocated];
    if (!owner)
      owner = std::shared_ptr<void>(d->allocated, run->memory.free);
    t.owner = owner;
    if (run->verifyFetches && !run->memory.inputsOnDevice)
      run->fetchChecks.push_back({id, t, hashElements(t)});
    run->channels.publishFetch(id, std::move(t));
    return true;
  }
  // Memory the run does not own is copied: feeds and state are host memory
  // the host may change in place later (committing state, in-place ops), a
  // host op's result belongs to the host executor, and constants live in
  // the JIT module, which may be gone before the fetched tensor.
  if (run->memory.inputsOnDevice) {
    Tensor copy;
    if (!deviceCopy(run, t, copy)) {
      failRun(run, "fetch " + std::to_string(id) +
                       ": copying the value on the device failed");
      return false;
    }
    run->channels.publishFetch(id, std::move(copy));
    return true;
  }
  run->channels.publishFetch(id, t.contiguousCopy());
  return true;
}

/// A host op's argument: a host copy of the graph's value.
bool hostArgImpl(RunState *run, DType dtype, const UnrankedMemRef *in) {
  if (!deviceOk(run))
    return false;
  Tensor host;
  if (!hostCopy(run, view(in, dtype), host)) {
    failRun(run, "copying a host op's argument from the device failed");
    return false;
  }
  run->hostArgs.push_back(std::move(host));
  return true;
}

/// A row-major host copy of the graph's value, for host code that reads
/// its elements (an index placing a slice: terra-gpu-host-kernels); kept
/// for the rest of the run.
bool toHostImpl(RunState *run, DType dtype, const UnrankedMemRef *in,
                UnrankedMemRef *out) {
  if (!deviceOk(run))
    return false;
  Tensor host;
  if (!hostCopy(run, view(in, dtype), host)) {
    failRun(run, "copying a value the graph's host code reads from the "
                 "device failed");
    return false;
  }
  describe(host, out, true);
  run->keepAlive.push_back(std::move(host));
  return true;
}

bool hostCallImpl(RunState *run, int64_t id) {
  std::vector<Tensor> inputs = std::move(run->hostArgs);
  run->hostArgs.clear();
  run->hostResults.clear();
  std::string error;
  if (!run->hostOps) {
    failRun(run, "host op " + std::to_string(id) +
                     " needs a host executor, and none was given");
    return false;
  }
  if (!run->hostOps(id, inputs, run->hostResults, error)) {
    failRun(run, "host op " + std::to_string(id) + " failed: " + error);
    return false;
  }
  return true;
}

bool hostResultImpl(RunState *run, int64_t index, DType dtype,
                    UnrankedMemRef *out) {
  if (index < 0 || size_t(index) >= run->hostResults.size()) {
    failRun(run, "host op returned too few results");
    return false;
  }
  Tensor t = run->hostResults[index];
  if (t.dtype != dtype) {
    failRun(run, "host op result " + std::to_string(index) +
                     " has dtype " + dtypeName(t.dtype) + ", expected " +
                     dtypeName(dtype));
    return false;
  }
  if (run->memory.stageInputs || run->memory.inputsOnDevice)
    return stageInput(run, t, out);
  if (!t.isContiguous() || overlapsDonated(run, t))
    t = t.contiguousCopy();
  describe(t, out);
  run->keepAlive.push_back(std::move(t));
  return true;
}

/// A fetch of a value the graph computed into state `state`'s memory
/// (-terra-commit-in-place): published as a view of that memory, without
/// a copy (the host holds the state tensor; Run.fetch copies a view
/// without an owner, Run.fetch_into skips a copy onto itself). When the
/// run did not write in place (terra_rt_commit_ready returned false) the
/// buffer is the run's own: an ordinary fetch.
bool fetchStateImpl(RunState *run, int64_t id, int64_t state, DType dtype,
                    const UnrankedMemRef *in) {
  auto *d = static_cast<const RankedDescriptor *>(in->descriptor);
  if (!run->memory.toHost && !run->memory.inputsOnDevice && state >= 0 &&
      size_t(state) < run->states.size() &&
      run->states[state].data == d->allocated &&
      run->states[state].isContiguous()) {
    if (!deviceOk(run))
      return false;
    ++run->inPlaceCommits;
    run->channels.publishFetch(id, view(in, dtype));
    return true;
  }
  return fetchImpl(run, id, dtype, in);
}
} // namespace

namespace terra::rt::detail {
RunState *&currentRun() { return current; }

bool checkDevice(RunState &run) {
  if (run.memory.deviceError) {
    std::string error = run.memory.deviceError();
    if (!error.empty()) {
      failRun(&run, "the device failed inside the graph: " + error);
      return false;
    }
  }
  if (run.checkFlagHost) {
    auto *flag = const_cast<volatile int32_t *>(run.checkFlagHost);
    if (int32_t code = *flag) {
      *flag = 0;
      failCheck(&run, int64_t(code) - 1);
      return false;
    }
  }
  return true;
}

void failLibraryCall(const char *message) {
  if (RunState *run = current) {
    failRun(run, message);
    unwind(run);
  }
  std::fprintf(stderr, "terra: %s\n", message);
  std::abort();
}

void verifyPublished(RunState &run, void *buffer) {
  for (const RunState::FetchCheck &c : run.fetchChecks) {
    void *owner = c.view.owner.get();
    if (buffer ? owner != buffer : !run.published.count(owner))
      continue;
    if (hashElements(c.view) != c.hash && run.status != RunState::Status::Error)
      failRun(&run, "fetch " + std::to_string(c.point) +
                        ": the graph wrote into the fetched buffer after "
                        "publishing it");
  }
}
} // namespace terra::rt::detail

extern "C" {

#define TERRA_RT_DTYPE_ENTRY_POINTS(SUFFIX, DTYPE)                             \
  void _mlir_ciface_terra_rt_feed_##SUFFIX(UnrankedMemRef *out, int64_t id,    \
                                           int64_t rank) {                     \
    if (!feedImpl(current, id, DTYPE, out, rank, false))                       \
      unwind(current);                                                         \
  }                                                                            \
  void _mlir_ciface_terra_rt_feed_contiguous_##SUFFIX(                         \
      UnrankedMemRef *out, int64_t id, int64_t rank) {                         \
    if (!feedImpl(current, id, DTYPE, out, rank, true))                        \
      unwind(current);                                                         \
  }                                                                            \
  void _mlir_ciface_terra_rt_state_##SUFFIX(UnrankedMemRef *out, int64_t id,   \
                                            int64_t rank) {                    \
    if (!stateImpl(current, id, DTYPE, out, rank, false))                      \
      unwind(current);                                                         \
  }                                                                            \
  void _mlir_ciface_terra_rt_state_contiguous_##SUFFIX(                        \
      UnrankedMemRef *out, int64_t id, int64_t rank) {                         \
    if (!stateImpl(current, id, DTYPE, out, rank, true))                       \
      unwind(current);                                                         \
  }                                                                            \
  void _mlir_ciface_terra_rt_fetch_##SUFFIX(int64_t id, UnrankedMemRef *in) {  \
    if (!fetchImpl(current, id, DTYPE, in))                                    \
      unwind(current);                                                         \
  }                                                                            \
  void _mlir_ciface_terra_rt_fetch_state_##SUFFIX(int64_t id, int64_t state,   \
                                                  UnrankedMemRef *in) {        \
    if (!fetchStateImpl(current, id, state, DTYPE, in))                        \
      unwind(current);                                                         \
  }                                                                            \
  void _mlir_ciface_terra_rt_host_arg_##SUFFIX(UnrankedMemRef *in) {           \
    if (!hostArgImpl(current, DTYPE, in))                                      \
      unwind(current);                                                         \
  }                                                                            \
  void _mlir_ciface_terra_rt_host_result_##SUFFIX(UnrankedMemRef *out,         \
                                                  int64_t index) {             \
    if (!hostResultImpl(current, index, DTYPE, out))                           \
      unwind(current);                                                         \
  }                                                                            \
  void _mlir_ciface_terra_rt_to_host_##SUFFIX(UnrankedMemRef *out,             \
                                              UnrankedMemRef *in) {            \
    if (!toHostImpl(current, DTYPE, in, out))                                  \
      unwind(current);                                                         \
  }

TERRA_RT_DTYPE_ENTRY_POINTS(f32, DType::F32)
TERRA_RT_DTYPE_ENTRY_POINTS(f64, DType::F64)
TERRA_RT_DTYPE_ENTRY_POINTS(f16, DType::F16)
TERRA_RT_DTYPE_ENTRY_POINTS(bf16, DType::BF16)
TERRA_RT_DTYPE_ENTRY_POINTS(i64, DType::I64)
TERRA_RT_DTYPE_ENTRY_POINTS(i32, DType::I32)
TERRA_RT_DTYPE_ENTRY_POINTS(i16, DType::I16)
TERRA_RT_DTYPE_ENTRY_POINTS(i8, DType::I8)
TERRA_RT_DTYPE_ENTRY_POINTS(i1, DType::I1)
TERRA_RT_DTYPE_ENTRY_POINTS(ui8, DType::U8)
#undef TERRA_RT_DTYPE_ENTRY_POINTS

int64_t terra_rt_case(int64_t id, int64_t numCases) {
  uint32_t index = 0;
  bool ok = current->channels.receiveCase(id, index);
  if (!ok) {
    waitFailed(current, "case select", id);
    unwind(current);
  }
  if (int64_t(index) >= numCases) {
    failRun(current, "case select " + std::to_string(id) + ": index " +
                         std::to_string(index) + " out of range");
    unwind(current);
  }
  return index;
}

bool terra_rt_loop(int64_t id) {
  bool next = false;
  if (!current->channels.receiveLoop(id, next)) {
    waitFailed(current, "loop condition", id);
    unwind(current);
  }
  return next;
}

bool terra_rt_commit_ready() {
  // TERRA_COMMIT_IN_PLACE=0: never in place (the host copies the state, as
  // without -terra-commit-in-place); read each run, for A/B measurements.
  if (current->commitInPlace < 0) { // asked once per run, not per value
    const char *env = std::getenv("TERRA_COMMIT_IN_PLACE");
    current->commitInPlace = !(env && std::strcmp(env, "0") == 0);
  }
  if (!current->commitInPlace)
    return false;
  int decision = current->channels.commitDecision();
  if (decision < 0) {
    current->status = RunState::Status::Cancelled;
    unwind(current);
  }
  return decision > 0;
}

void terra_rt_host_call(int64_t id) {
  if (!hostCallImpl(current, id))
    unwind(current);
}

void terra_rt_check(bool ok, int64_t message) {
  if (ok)
    return;
  failCheck(current, message);
  unwind(current);
}

/// memref<1xi32>: the run's check flag, for the guards inside its kernels
/// (terra-gpu-device-checks). Zeroed by a run's first call, before any of
/// its kernels is queued.
void _mlir_ciface_terra_rt_check_flag(MemRef1D *out) {
  RunState *run = current;
  if (!run->checkFlagHost) {
    int32_t *host = &run->ownCheckFlag;
    void *device = host;
    if (run->memory.checkFlag && !run->memory.checkFlag(&host, &device)) {
      failRun(run, "cannot allocate the run's check flag");
      unwind(run);
    }
    *const_cast<volatile int32_t *>(host) = 0;
    run->checkFlagHost = host;
    run->checkFlagDevice = device;
  }
  auto *device = static_cast<int32_t *>(run->checkFlagDevice);
  *out = {device, device, 0, {1}, {1}};
}

/// Buffer allocation for compiled graphs (use-generic-functions), from the
/// caching host allocator (HostAllocator.h): every buffer of a run is
/// tracked so a cancelled run can release them all.
void *_mlir_memref_to_llvm_alloc(size_t size) {
  void *p = allocBuffer(size, 0);
  if (!p)
    unwind(current);
  return p;
}

void *_mlir_memref_to_llvm_aligned_alloc(size_t alignment, size_t size) {
  void *p = allocBuffer(size, alignment);
  if (!p)
    unwind(current);
  return p;
}

void _mlir_memref_to_llvm_free(void *p) {
  // Buffers the run did not allocate (host memory behind feeds and state)
  // are never freed by the graph.
  if (!current || !current->buffers.erase(p))
    return;
  auto it = current->published.find(p);
  if (it == current->published.end()) {
    current->memory.free(p);
    return;
  }
  // Published by a fetch: the fetched tensors keep it alive.
  if (current->verifyFetches)
    detail::verifyPublished(*current, p);
  current->published.erase(it);
}

} // extern "C"

// memref.copy between layouts (MemrefCopy.cpp).
extern "C" void memrefCopy(int64_t, const int64_t *, const int64_t *);

namespace {
/// The bfloat16 bits of `x`, rounded to nearest even; NaN stays a (quiet)
/// NaN.
uint16_t toBF16Bits(float x) {
  uint32_t u;
  std::memcpy(&u, &x, sizeof u);
  if ((u & 0x7fffffffu) > 0x7f800000u)
    return uint16_t((u >> 16) | 0x40u);
  u += 0x7fffu + ((u >> 16) & 1u);
  return uint16_t(u >> 16);
}

/// A bfloat16 value as the x86-64 ABI returns one: in the low 16 bits of
/// xmm0, like _Float16.
_Float16 asBF16Return(uint16_t bits) {
  _Float16 h;
  std::memcpy(&h, &bits, sizeof h);
  return h;
}
} // namespace

// The compiler-rt / libgcc conversions LLVM calls for `arith.truncf` to
// bf16 on CPUs without AVX512-BF16: Debian 12's libgcc (GCC 12) has none,
// so a JIT-compiled bf16 graph failed to link on an AVX2-only machine.
extern "C" _Float16 terra_truncsfbf2(float x) {
  return asBF16Return(toBF16Bits(x));
}
extern "C" _Float16 terra_truncdfbf2(double x) {
  // Through float would round twice; round the double to 8 significant bits
  // directly via its float neighbours: truncating to float first is exact
  // for ties only when the dropped bits are zero, so fall back to sticky
  // rounding by nudging the float away from a tie.
  float f = float(x);
  if (double(f) != x && !std::isnan(x)) {
    uint32_t u;
    std::memcpy(&u, &f, sizeof u);
    if ((u & 0xffffu) == 0x8000u) // a tie created by the first rounding
      u += (double(f) < x) == (x > 0) ? 1 : -1;
    std::memcpy(&f, &u, sizeof u);
  }
  return asBF16Return(toBF16Bits(f));
}

std::vector<std::pair<const char *, void *>>
terra::rt::detail::runtimeSymbols() {
  std::vector<std::pair<const char *, void *>> syms;
#define TERRA_RT_SYMBOL(NAME) syms.push_back({#NAME, (void *)&NAME});
#define TERRA_RT_DTYPE_SYMBOLS(SUFFIX)                                         \
  TERRA_RT_SYMBOL(_mlir_ciface_terra_rt_feed_##SUFFIX)                         \
  TERRA_RT_SYMBOL(_mlir_ciface_terra_rt_feed_contiguous_##SUFFIX)              \
  TERRA_RT_SYMBOL(_mlir_ciface_terra_rt_state_##SUFFIX)                        \
  TERRA_RT_SYMBOL(_mlir_ciface_terra_rt_state_contiguous_##SUFFIX)             \
  TERRA_RT_SYMBOL(_mlir_ciface_terra_rt_fetch_##SUFFIX)                        \
  TERRA_RT_SYMBOL(_mlir_ciface_terra_rt_fetch_state_##SUFFIX)                  \
  TERRA_RT_SYMBOL(_mlir_ciface_terra_rt_host_arg_##SUFFIX)                     \
  TERRA_RT_SYMBOL(_mlir_ciface_terra_rt_host_result_##SUFFIX)                  \
  TERRA_RT_SYMBOL(_mlir_ciface_terra_rt_to_host_##SUFFIX)
  TERRA_RT_DTYPE_SYMBOLS(f32)
  TERRA_RT_DTYPE_SYMBOLS(f64)
  TERRA_RT_DTYPE_SYMBOLS(f16)
  TERRA_RT_DTYPE_SYMBOLS(bf16)
  TERRA_RT_DTYPE_SYMBOLS(i64)
  TERRA_RT_DTYPE_SYMBOLS(i32)
  TERRA_RT_DTYPE_SYMBOLS(i16)
  TERRA_RT_DTYPE_SYMBOLS(i8)
  TERRA_RT_DTYPE_SYMBOLS(i1)
  TERRA_RT_DTYPE_SYMBOLS(ui8)
  TERRA_RT_SYMBOL(terra_rt_case)
  TERRA_RT_SYMBOL(terra_rt_loop)
  TERRA_RT_SYMBOL(terra_rt_commit_ready)
  TERRA_RT_SYMBOL(terra_rt_host_call)
  TERRA_RT_SYMBOL(terra_rt_check)
  TERRA_RT_SYMBOL(_mlir_ciface_terra_rt_check_flag)
  TERRA_RT_SYMBOL(_mlir_memref_to_llvm_alloc)
  TERRA_RT_SYMBOL(_mlir_memref_to_llvm_aligned_alloc)
  TERRA_RT_SYMBOL(_mlir_memref_to_llvm_free)
  TERRA_RT_SYMBOL(memrefCopy)
  syms.push_back({"__truncsfbf2", (void *)&terra_truncsfbf2});
  syms.push_back({"__truncdfbf2", (void *)&terra_truncdfbf2});
#undef TERRA_RT_DTYPE_SYMBOLS
#undef TERRA_RT_SYMBOL
  return syms;
}

Tensor terra::rt::copyIntoMemory(const Tensor &t,
                                 const RunState::BufferMemory &memory,
                                 const std::string &what, std::string &error) {
  Tensor src = t.isContiguous() ? t : t.contiguousCopy();
  size_t bytes = size_t(src.numel()) * dtypeSize(src.dtype);
  Tensor copy;
  copy.dtype = src.dtype;
  copy.sizes = src.sizes;
  copy.strides = contiguousStrides(src.sizes);
  copy.data = memory.alloc(bytes ? bytes : 1, 0);
  if (!copy.data) {
    error = "cannot allocate " + std::to_string(bytes) +
            " bytes of device-reachable memory for " + what;
    return copy;
  }
  if (!memory.toDevice) {
    std::memcpy(copy.data, src.data, bytes);
  } else if (!memory.toDevice(copy.data, src.data, bytes)) {
    memory.free(copy.data);
    copy.data = nullptr;
    error = "copying " + what + " of " + std::to_string(bytes) +
            " bytes to the device failed";
  }
  return copy;
}
