//===- GraphRunner.h - Compiled graphs and their runner thread --*- C++ -*-===//
//
// A CompiledGraph is a JIT-compiled `terra.graph` (after the CPU pipeline).
// A GraphRunner runs one iteration of it at a time on its own thread while
// the host thread goes on; the two talk through the run's Channels. A
// cancelled run unwinds at its next wait (feed, case select, loop
// condition) and releases every buffer it allocated. Fetches of the graph's
// own buffers are published without a copy: the fetched tensor shares
// ownership of the buffer, which outlives the run as long as it is held.
//
//===----------------------------------------------------------------------===//
#ifndef TERRA_RUNTIME_GRAPHRUNNER_H
#define TERRA_RUNTIME_GRAPHRUNNER_H

#include "terra/Runtime/Channels.h"
#include "terra/Runtime/HostAllocator.h"
#include "terra/Runtime/PointerMap.h"

#include <atomic>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <tuple>
#include <unordered_map>
#include <vector>

namespace mlir {
class ModuleOp;
class ExecutionEngine;
} // namespace mlir

namespace terra::rt {

/// Runs a framework op the graph cannot run itself (a host callback).
using HostOpFn = std::function<bool(int64_t id, const std::vector<Tensor> &in,
                                    std::vector<Tensor> &out,
                                    std::string &error)>;

/// The state of one graph run (one iteration).
class RunState {
public:
  Channels channels;
  /// Persistent state, indexed like the module's `terra.states`.
  std::vector<Tensor> states;
  HostOpFn hostOps;

  enum class Status { Pending, Ok, Cancelled, Error };
  Status status = Status::Pending;
  std::string error;
  double execSeconds = 0;

  /// Checks that the graph never writes into a buffer it published without
  /// a copy: each fetch's bytes are hashed when published and again when the
  /// graph frees the buffer and when the run ends; a difference ends the run
  /// with an error. Off unless TERRA_VERIFY_FETCHES=1 (it costs a pass over
  /// every fetched buffer).
  bool verifyFetches = defaultVerifyFetches();
  static bool defaultVerifyFetches();

  /// Where the graph's buffers live. The default is host memory from the
  /// caching host allocator. A graph whose kernels run on a GPU needs memory
  /// the device reaches (docs/gpu.md): then feeds, state and host-op results
  /// are staged into such buffers too (`stageInputs`). Managed memory is
  /// host-readable: fetched buffers are published without a copy and
  /// released with `free` when the host lets go of them. Device memory is
  /// not (`toHost` set): every value the host receives (fetches, host-op
  /// arguments) is copied out with `toHost`, and staging copies in with
  /// `toDevice`. The copy functions return false on failure (the run fails).
  ///
  /// With `inputsOnDevice` (the front end on `device="cuda"`) feeds and state
  /// are already device memory (PyTorch's CUDA tensors, by pointer) and are
  /// read in place; host-op results are still staged in. Fetches stay on
  /// the device: a buffer of the run is published as is (the host wraps it
  /// as a CUDA tensor), anything else is first copied with `onDevice`, and
  /// only host-op arguments are copied out with `toHost`.
  struct BufferMemory {
    void *(*alloc)(size_t size, size_t alignment) = hostAlloc;
    void (*free)(void *) = hostFree;
    bool stageInputs = false;
    bool (*toDevice)(void *dst, const void *src, size_t bytes) = nullptr;
    bool (*toHost)(void *dst, const void *src, size_t bytes) = nullptr;
    bool inputsOnDevice = false;
    bool (*onDevice)(void *dst, const void *src, size_t bytes) = nullptr;
    /// Takes the device's last error on this thread (terra::cuda::
    /// takeLastError): a kernel or copy that failed inside the graph's host
    /// code fails the run before it publishes anything computed after it
    /// (checked at each fetch and host-op argument and at the end).
    std::string (*deviceError)() = nullptr;
    /// One stream for the whole run (terra::cuda::beginRunStream):
    /// `beginStream` binds it to the runner thread before the graph starts,
    /// so its kernels and library calls queue without waiting;
    /// `syncStream` waits for what is queued before a fetch or a host-op
    /// argument reaches the host (a fetch waits only for work issued before
    /// it); `endStream` waits and unbinds after the graph, before its buffers
    /// are released. Null: every launch waits for itself.
    bool (*beginStream)() = nullptr;
    bool (*syncStream)() = nullptr;
    void (*endStream)() = nullptr;
    /// The check flag the guards inside the graph's kernels write
    /// (terra-gpu-device-checks; terra::cuda::runCheckFlag): a word the
    /// host reads at `host` and the kernels write at `device` (pinned,
    /// mapped host memory). False if it cannot be had. Null: the run's own
    /// host word (kernels that run on the CPU, the gpu-loops pipeline).
    bool (*checkFlag)(int32_t **host, void **device) = nullptr;
  };
  BufferMemory memory;

  // Used by the runtime entry points on the runner thread.
  std::vector<Tensor> keepAlive;
  std::vector<Tensor> hostArgs, hostResults;
  /// Every live buffer the graph allocated (_mlir_memref_to_llvm_alloc);
  /// the values are unused.
  PointerMap<bool> buffers;
  /// The graph's reference to each of its buffers that a fetch published
  /// without a copy; fetched tensors share ownership. The graph's free (or
  /// the end of the run) drops this reference only, so the memory lives,
  /// and is not reused by the allocator, while the host holds a fetch.
  std::unordered_map<void *, std::shared_ptr<void>> published;
  /// With verifyFetches: (fetch point, view, hash) of each zero-copy fetch.
  struct FetchCheck {
    int64_t point;
    Tensor view;
    uint64_t hash;
  };
  std::vector<FetchCheck> fetchChecks;
  void *jump = nullptr; ///< The jmp_buf to unwind to.
  /// The graph's check messages, by index (its own: a run does not copy
  /// them, ~1000 strings a run for YOLOv3).
  const std::vector<std::string> *assertMessages = nullptr;
  /// The states the graph may write in place (`terra.donated_states`), and
  /// their memory's byte spans, sorted (built at the run's first input).
  const std::vector<int64_t> *donatedStates = nullptr;
  struct DonatedSpan {
    uintptr_t lo, hi;
    int64_t state;
    bool operator<(const DonatedSpan &o) const {
      return std::tie(lo, hi, state) < std::tie(o.lo, o.hi, o.state);
    }
  };
  std::vector<DonatedSpan> donatedSpans;
  std::vector<uintptr_t> donatedMaxHi;  ///< Largest end of spans[0..i].
  /// By state index: donated, and donated sharing memory with another.
  std::vector<bool> isDonated, overlapsDonated;
  bool donatedSpansBuilt = false;
  /// Values the graph wrote into their state's memory this run (published
  /// by terra_rt_fetch_state_* without a copy).
  size_t inPlaceCommits = 0;
  /// TERRA_COMMIT_IN_PLACE as read by the run's first terra_rt_commit_ready
  /// (-1: not read yet).
  int commitInPlace = -1;
  /// The check flag of this run (terra_rt_check_flag): 0, or the index + 1
  /// of the message of a guard that failed inside a kernel. Read after
  /// each wait for the run's stream (detail::checkDevice).
  int32_t *checkFlagHost = nullptr;
  void *checkFlagDevice = nullptr;
  int32_t ownCheckFlag = 0;
};

/// A row-major copy of host tensor `t` in a block of `memory` (`alloc`,
/// filled with `toDevice`, or memcpy when the memory is the host's), whose
/// release is the caller's (`memory.free`). Empty `error` on success, else
/// what failed, naming the copy `what` ("an input").
Tensor copyIntoMemory(const Tensor &t, const RunState::BufferMemory &memory,
                      const std::string &what, std::string &error);

struct HostOpInfo {
  std::string name;
  std::string args; ///< The args dictionary, printed.
};

class CompiledGraph {
public:
  ~CompiledGraph();
  /// JIT-compiles `module` (LLVM dialect, output of the CPU pipeline) and
  /// looks up the graph function `name`. Objects are cached on disk under
  /// `cacheDir` (if non-empty), keyed by a hash of the module.
  static std::unique_ptr<CompiledGraph> compile(mlir::ModuleOp module,
                                                const std::string &name,
                                                const std::string &cacheDir,
                                                std::string &error);

  const std::vector<std::string> &stateNames() const { return states; }
  /// The type expected at each feed point (`terra.feed_types`), for
  /// Channels::setFeedTypes.
  const std::map<int64_t, FeedType> &feedTypes() const { return feeds; }
  const std::vector<HostOpInfo> &hostOps() const { return hostOpInfo; }
  bool loadedFromCache() const { return cached; }
  double compileSeconds() const { return seconds; }

  /// Runs the graph on the calling thread (the runner thread).
  void invoke(RunState &run) const;

private:
  CompiledGraph() = default;
  std::unique_ptr<mlir::ExecutionEngine> engine;
  void (*entry)(void **) = nullptr;
  std::vector<std::string> states;
  std::vector<HostOpInfo> hostOpInfo;
  std::vector<std::string> asserts;
  std::vector<int64_t> donated;
  std::map<int64_t, FeedType> feeds;
  bool cached = false;
  double seconds = 0;
  struct ObjectJit;
  std::unique_ptr<ObjectJit> objectJit;
};

/// Runs `graph`, a graph's host function compiled ahead of time (`void
/// graph()`: the host object of a lowered `terra.graph` linked into a shared
/// library, see tools/terra-run-object), as one iteration of `run` on the
/// calling thread, like CompiledGraph::invoke. `checkMessages` are the
/// messages of the graph's runtime checks (`terra.asserts`), by index.
void runGraphFunction(void (*graph)(), RunState &run,
                      const std::vector<std::string> &checkMessages = {});

/// Runs iterations of one graph on a dedicated thread.
class GraphRunner {
public:
  explicit GraphRunner(const CompiledGraph &graph);
  ~GraphRunner();

  /// Starts `run` on the runner thread; returns at once.
  void start(std::shared_ptr<RunState> run);
  /// Waits for the started run to end and returns it.
  std::shared_ptr<RunState> wait();
  /// Cancels the started run; `wait()` still has to be called.
  void cancel();
  /// Frees an ended run on the runner thread (its buffers, its channels),
  /// off the caller's critical path. The run must not hold anything that
  /// needs the caller's thread (a Python object: clear `hostOps` first).
  void retire(std::shared_ptr<RunState> run);

private:
  void loop();
  const CompiledGraph &graph;
  std::mutex mu;
  std::condition_variable cv;
  std::shared_ptr<RunState> pending, active, finished;
  std::vector<std::shared_ptr<RunState>> retired;
  /// The last run's table of live buffers, empty and grown to its size,
  /// lent to the next run (runner thread only).
  PointerMap<bool> spareBuffers;
  bool stopping = false;
  /// Moves (under `mu`) on every change a waiter waits for; the spin phase
  /// of the runner's idle wait and of `wait()` polls it (SpinWait.h).
  std::atomic<uint64_t> events{0};
  std::thread thread;
};

} // namespace terra::rt

#endif // TERRA_RUNTIME_GRAPHRUNNER_H
