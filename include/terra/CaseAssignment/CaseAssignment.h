//===- CaseAssignment.h - TraceGraph to terra.graph -------------*- C++ -*-===//
#ifndef TERRA_CASEASSIGNMENT_CASEASSIGNMENT_H
#define TERRA_CASEASSIGNMENT_CASEASSIGNMENT_H

#include "terra/Merge/TypedTraceGraph.h"

namespace terra {

struct CaseAssignmentOptions {
  /// Upper bound on emitted node copies, as a multiple of the node count.
  unsigned maxDuplication = 64;
};

/// Generates the single symbolic graph of `graph` (spec section 2.9 and
/// section 3) at the builder's insertion point. Reports an error at `loc`
/// if duplication would exceed the bound.
mlir::FailureOr<GraphOp> assignCases(const TypedTraceGraph &graph,
                                     mlir::OpBuilder &b, mlir::Location loc,
                                     llvm::StringRef name,
                                     const CaseAssignmentOptions &options = {});

} // namespace terra

#endif // TERRA_CASEASSIGNMENT_CASEASSIGNMENT_H
