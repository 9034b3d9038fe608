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

#include <csetjmp>
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

/// Fills a malloc'ed descriptor for `t` (the caller frees it).
void describe(const Tensor &t, UnrankedMemRef *out) {
  int64_t rank = t.sizes.size();
  auto *d = static_cast<RankedDescriptor *>(
      std::malloc(sizeof(RankedDescriptor) + 2 * rank * sizeof(int64_t)));
  d->allocated = t.data;
  d->aligned = t.data;
  d->offset = 0;
  for (int64_t i = 0; i < rank; ++i) {
    d->sizesAndStrides[i] = t.sizes[i];
    d->sizesAndStrides[rank + i] = t.strides[i];
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

bool feedImpl(RunState *run, int64_t id, DType dtype, UnrankedMemRef *out,
              int64_t expectedRank) {
  Tensor t;
  if (!run->channels.receiveFeed(id, t)) {
    run->status = RunState::Status::Cancelled;
    return false;
  }
  if (!checkTensor(run, t, dtype, expectedRank, "feed", id))
    return false;
  describe(t, out);
  run->keepAlive.push_back(std::move(t));
  return true;
}

bool stateImpl(RunState *run, int64_t id, DType dtype, UnrankedMemRef *out) {
  if (id < 0 || size_t(id) >= run->states.size()) {
    failRun(run, "state " + std::to_string(id) + " was not provided");
    return false;
  }
  const Tensor &t = run->states[id];
  if (t.dtype != dtype) {
    failRun(run, "state " + std::to_string(id) + ": dtype mismatch");
    return false;
  }
  describe(t, out);
  return true;
}

void fetchImpl(RunState *run, int64_t id, DType dtype,
               const UnrankedMemRef *in) {
  // The graph may reuse the buffer after this call: publish a copy.
  run->channels.publishFetch(id, view(in, dtype).contiguousCopy());
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
  if (!t.isContiguous())
    t = t.contiguousCopy();
  describe(t, out);
  run->keepAlive.push_back(std::move(t));
  return true;
}
} // namespace

namespace terra::rt::detail {
RunState *&currentRun() { return current; }
} // namespace terra::rt::detail

extern "C" {

#define TERRA_RT_DTYPE_ENTRY_POINTS(SUFFIX, DTYPE)                             \
  void _mlir_ciface_terra_rt_feed_##SUFFIX(UnrankedMemRef *out, int64_t id,   \
                                            int64_t rank) {                    \
    if (!feedImpl(current, id, DTYPE, out, rank))                              \
      unwind(current);                                                         \
  }                                                                            \
  void _mlir_ciface_terra_rt_state_##SUFFIX(UnrankedMemRef *out, int64_t id) { \
    if (!stateImpl(current, id, DTYPE, out))                                   \
      unwind(current);                                                         \
  }                                                                            \
  void _mlir_ciface_terra_rt_fetch_##SUFFIX(int64_t id, UnrankedMemRef *in) {  \
    fetchImpl(current, id, DTYPE, in);                                         \
  }                                                                            \
  void _mlir_ciface_terra_rt_host_arg_##SUFFIX(UnrankedMemRef *in) {           \
    current->hostArgs.push_back(view(in, DTYPE).contiguousCopy());             \
  }                                                                            \
  void _mlir_ciface_terra_rt_host_result_##SUFFIX(UnrankedMemRef *out,         \
                                                  int64_t index) {             \
    if (!hostResultImpl(current, index, DTYPE, out))                           \
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
#undef TERRA_RT_DTYPE_ENTRY_POINTS

int64_t terra_rt_case(int64_t id, int64_t numCases) {
  uint32_t index = 0;
  bool ok = current->channels.receiveCase(id, index);
  if (!ok) {
    current->status = RunState::Status::Cancelled;
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
    current->status = RunState::Status::Cancelled;
    unwind(current);
  }
  return next;
}

void terra_rt_host_call(int64_t id) {
  if (!hostCallImpl(current, id))
    unwind(current);
}

void terra_rt_check(bool ok, int64_t message) {
  if (ok)
    return;
  const std::vector<std::string> &messages = current->assertMessages;
  failRun(current, message >= 0 && size_t(message) < messages.size()
                       ? messages[message]
                       : "runtime check failed");
  unwind(current);
}

/// Buffer allocation for compiled graphs (use-generic-functions): every
/// buffer of a run is tracked so a cancelled run can release them all.
void *_mlir_memref_to_llvm_alloc(size_t size) {
  void *p = std::malloc(size ? size : 1);
  if (current)
    current->buffers.insert(p);
  return p;
}

void *_mlir_memref_to_llvm_aligned_alloc(size_t alignment, size_t size) {
  size = (size + alignment - 1) / alignment * alignment;
  void *p = std::aligned_alloc(alignment, size ? size : alignment);
  if (current)
    current->buffers.insert(p);
  return p;
}

void _mlir_memref_to_llvm_free(void *p) {
  // Buffers the run did not allocate (host memory behind feeds and state)
  // are never freed by the graph.
  if (current && current->buffers.erase(p))
    std::free(p);
}

} // extern "C"

extern "C" void memrefCopy(int64_t, void *, void *);

std::vector<std::pair<llvm::StringRef, void *>>
terra::rt::detail::runtimeSymbols() {
  std::vector<std::pair<llvm::StringRef, void *>> syms;
#define TERRA_RT_SYMBOL(NAME) syms.push_back({#NAME, (void *)&NAME});
#define TERRA_RT_DTYPE_SYMBOLS(SUFFIX)                                         \
  TERRA_RT_SYMBOL(_mlir_ciface_terra_rt_feed_##SUFFIX)                         \
  TERRA_RT_SYMBOL(_mlir_ciface_terra_rt_state_##SUFFIX)                        \
  TERRA_RT_SYMBOL(_mlir_ciface_terra_rt_fetch_##SUFFIX)                        \
  TERRA_RT_SYMBOL(_mlir_ciface_terra_rt_host_arg_##SUFFIX)                     \
  TERRA_RT_SYMBOL(_mlir_ciface_terra_rt_host_result_##SUFFIX)
  TERRA_RT_DTYPE_SYMBOLS(f32)
  TERRA_RT_DTYPE_SYMBOLS(f64)
  TERRA_RT_DTYPE_SYMBOLS(f16)
  TERRA_RT_DTYPE_SYMBOLS(bf16)
  TERRA_RT_DTYPE_SYMBOLS(i64)
  TERRA_RT_DTYPE_SYMBOLS(i32)
  TERRA_RT_DTYPE_SYMBOLS(i16)
  TERRA_RT_DTYPE_SYMBOLS(i8)
  TERRA_RT_DTYPE_SYMBOLS(i1)
  TERRA_RT_SYMBOL(terra_rt_case)
  TERRA_RT_SYMBOL(terra_rt_loop)
  TERRA_RT_SYMBOL(terra_rt_host_call)
  TERRA_RT_SYMBOL(terra_rt_check)
  TERRA_RT_SYMBOL(_mlir_memref_to_llvm_alloc)
  TERRA_RT_SYMBOL(_mlir_memref_to_llvm_aligned_alloc)
  TERRA_RT_SYMBOL(_mlir_memref_to_llvm_free)
  TERRA_RT_SYMBOL(memrefCopy)
#undef TERRA_RT_DTYPE_SYMBOLS
#undef TERRA_RT_SYMBOL
  appendLibrarySymbols(syms);
  return syms;
}
