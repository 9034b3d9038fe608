//===- TerraToDot.h - Render TraceGraphs as Graphviz DOT --------*- C++ -*-===//
//
// The exporter behind `terra-translate --terra-to-dot`: every
// `terra.trace_graph` becomes one Graphviz digraph. Nodes are the
// `terra.node` ops, each loop node a `cluster_<id>` subgraph holding its
// body level; solid edges are execution order (`succ`), dashed edges data
// flow (`sources`).
//
//===----------------------------------------------------------------------===//
#ifndef TERRA_TRANSLATE_TERRATODOT_H
#define TERRA_TRANSLATE_TERRATODOT_H

#include "terra/Dialect/TerraOps.h"

namespace llvm {
class raw_ostream;
} // namespace llvm

namespace terra {

struct DotOptions {
  /// Also draw the data-flow edges of every input slot.
  bool dataFlow = true;
};

/// Prints one TraceGraph as a digraph.
void printTraceGraphAsDot(TraceGraphOp graph, llvm::raw_ostream &os,
                          const DotOptions &options = {});

/// Prints every terra.trace_graph nested in `op`, in order. Fails, with an
/// error at `op`, when there is none.
mlir::LogicalResult exportTraceGraphsToDot(mlir::Operation *op,
                                           llvm::raw_ostream &os,
                                           const DotOptions &options = {});

} // namespace terra

#endif // TERRA_TRANSLATE_TERRATODOT_H
