//===- Session.h - The compiler state behind one terra.function -*- C++ -*-===//
//
// A Session owns everything the Python front end needs from the compiler
// for one step function: an MLIR context, the TypedTraceGraph that traces
// are merged into incrementally, and the generation + lowering + JIT of the
// current graph. It keeps MLIR out of the Python binding (the binding sees
// only this header), and it is what the binding's unit tests drive.
//
// Key ids. The host validates every op it issues against the TraceGraph by
// key id. `addTrace` reports the key id of every op of the merged trace, in
// order, so the host can learn the mapping from its own op descriptions to
// key ids from the traces it recorded; a description it has never seen is
// a deviation by definition.
//
//===----------------------------------------------------------------------===//
#ifndef TERRA_FRONTEND_SESSION_H
#define TERRA_FRONTEND_SESSION_H

#include "terra/Merge/TraceGraph.h"
#include "terra/Runtime/GraphRunner.h"

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace terra {

/// What merging one trace did.
struct AddTraceResult {
  /// Non-empty when the trace could not be parsed or merged; the graph is
  /// unchanged. Holds every diagnostic with its location.
  std::string error;
  bool changed = false;
  /// False when no graph can route the trace's data flow (the host should
  /// run the function eagerly).
  bool coverable = true;
  /// One entry per op of the trace body, in order: the key id of ops,
  /// feeds and state reads; -1 for fetches and loop markers.
  std::vector<int64_t> keys;
};

/// Options of graph generation and compilation.
struct CompileOptions {
  unsigned maxDuplication = 64;
  /// On-disk object cache ("" disables it).
  std::string cacheDir;
  /// Keep the IR after each stage (for terra.explain).
  bool keepStages = false;
  /// "cpu": the CPU pipeline (loops, BLAS, oneDNN). "cuda": the GPU
  /// pipeline (kernels for `gpuChip`, cuBLAS), whose runs need device
  /// memory (docs/gpu.md). "gpu-loops", for tests: the GPU pipeline's
  /// kernels as loops on the CPU (buildGPULoopsOnCPUPipeline), whose runs
  /// use host memory the way a CUDA graph's use device memory.
  std::string device = "cpu";
  std::string gpuChip = "sm_90";
};

/// The IR after each stage of one compilation, printed.
struct CompileStages {
  std::string traceGraph, graph, linalg, lowered;
};

class Session {
public:
  Session();
  ~Session();
  Session(const Session &) = delete;
  Session &operator=(const Session &) = delete;

  /// Parses `moduleText` (a module holding exactly one `terra.trace`) and
  /// merges the trace into the TraceGraph.
  AddTraceResult addTrace(const std::string &moduleText);

  /// Generates the graph of all traces merged so far (case assignment),
  /// lowers it for the CPU and JIT-compiles it. Returns null and sets
  /// `error` (with locations) on failure.
  std::unique_ptr<rt::CompiledGraph> compile(const CompileOptions &options,
                                             std::string &error,
                                             CompileStages *stages = nullptr);

  /// The merged TraceGraph (the validator runs on it). It changes only in
  /// addTrace; a Cursor over it must not be used across an addTrace.
  const TraceGraph &graph() const;
  /// The loop nodes the last compiled graph unrolled: their loop
  /// conditions are not sent.
  const std::vector<int64_t> &unrolledLoops() const { return unrolled; }
  /// The merged TraceGraph as `terra.trace_graph` text.
  std::string traceGraphText() const;
  /// The merged TraceGraph as Graphviz DOT.
  std::string traceGraphDot() const;
  /// The key of an op, feed or state read, printed (for diagnostics).
  std::string describeKey(int64_t key) const;
  /// The op name and printed args dictionary of an op key ("" without
  /// args), printed as the runtime reports host ops.
  std::pair<std::string, std::string> keyNameAndArgs(int64_t key) const;
  /// The shape of result `result` of `node` (-1: dynamic); empty for none.
  std::vector<int64_t> nodeShape(int64_t node, unsigned result) const;
  /// The source location of a node, printed ("" for none).
  std::string nodeLocation(int64_t node) const;

private:
  struct Impl;
  std::unique_ptr<Impl> impl;
  std::vector<int64_t> unrolled;
};

} // namespace terra

#endif // TERRA_FRONTEND_SESSION_H
