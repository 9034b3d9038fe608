//===- TraceIRUtil.h - MLIR helpers for the unit tests -----------*- C++ -*-===//
//
//  * IRHarness: an MLIRContext with the terra and scf dialects; turns a
//    synthetic Trace into a `terra.trace` op (op key K becomes the op
//    "p.kK" at loc("p.py":K:1), state key K the state "sK") and runs case
//    assignment.
//  * countGraph(): op counts of a generated `terra.graph`.
//  * simulateGraph(): runs a generated `terra.graph` symbolically on one
//    trace, driven by the Cursor's signals (per point, in order): every
//    terra.op and terra.feed the graph executes must be the trace's next
//    op/feed, every operand must be exactly the value the trace read, every
//    case_select / loop_cond must find a signal, and nothing may be left
//    over. This checks that case assignment and the validator agree.
//
//===----------------------------------------------------------------------===//
#ifndef TERRA_TEST_UNIT_TRACEIRUTIL_H
#define TERRA_TEST_UNIT_TRACEIRUTIL_H

#include "TraceTestUtil.h"

#include "terra/CaseAssignment/CaseAssignment.h"
#include "terra/Merge/TypedTraceGraph.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/OwningOpRef.h"

#include <functional>
#include <map>
#include <string>
#include <vector>

namespace terra::testing {

struct IRHarness {
  mlir::MLIRContext ctx;
  IRHarness();

  mlir::OwningOpRef<mlir::ModuleOp> parse(llvm::StringRef source);
  mlir::OwningOpRef<mlir::ModuleOp> newModule();
  /// Appends a terra.trace for `trace` to `module`.
  TraceOp buildTrace(mlir::ModuleOp module, const Trace &trace,
                     llvm::StringRef name);
  /// Runs case assignment, appending the terra.graph to `module`.
  mlir::FailureOr<GraphOp> assign(const TypedTraceGraph &tg,
                                  mlir::ModuleOp module,
                                  unsigned maxDuplication = 64);
  mlir::Type typeOfClass(uint32_t cls);
};

struct GraphCounts {
  unsigned switches = 0, switchCases = 0, whiles = 0, dlOps = 0, feeds = 0,
           fetches = 0, states = 0;
  /// Distinct ids of case_select / loop_cond ops, sorted.
  std::vector<int64_t> caseSelectIds, loopCondIds;
};
GraphCounts countGraph(GraphOp graph);

/// Maps a trace's op key to the line of the op's location in the graph.
struct SimNames {
  std::function<int64_t(KeyId)> lineOf;
  static SimNames generic() {
    return {[](KeyId k) { return int64_t(k); }};
  }
  /// The keys of TraceGraphTest's worked example, for the parsed IR.
  static SimNames fig3();
};

/// Returns "" on success, else the first discrepancy.
std::string simulateGraph(GraphOp graph, const Trace &trace,
                          const Replay &replay, const SimNames &names);

} // namespace terra::testing

#endif // TERRA_TEST_UNIT_TRACEIRUTIL_H
