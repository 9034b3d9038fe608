//===- MergeTraces.cpp - The terra-merge-traces pass ----------------------===//
#include "terra/Merge/TypedTraceGraph.h"
#include "terra/Passes.h"

namespace terra {
#define GEN_PASS_DEF_TERRAMERGETRACES
#include "terra/Passes.h.inc"
} // namespace terra

using namespace mlir;
using namespace terra;

namespace {
struct MergeTracesPass
    : public terra::impl::TerraMergeTracesBase<MergeTracesPass> {
  using TerraMergeTracesBase::TerraMergeTracesBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    SmallVector<TraceOp> traces(module.getOps<TraceOp>());
    if (traces.empty())
      return;
    TypedTraceGraph graph(&getContext());
    for (TraceOp trace : traces)
      if (failed(graph.addTrace(trace)))
        return signalPassFailure();
    OpBuilder b(module.getBodyRegion());
    b.setInsertionPointAfter(traces.back());
    graph.emit(b, traces.front().getLoc(), graphName);
    if (!keepTraces)
      for (TraceOp trace : traces)
        trace.erase();
  }
};
} // namespace
