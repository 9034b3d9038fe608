//===- AssignCases.cpp - The terra-assign-cases pass ----------------------===//
#include "terra/CaseAssignment/CaseAssignment.h"
#include "terra/Passes.h"

namespace terra {
#define GEN_PASS_DEF_TERRAASSIGNCASES
#include "terra/Passes.h.inc"
} // namespace terra

using namespace mlir;
using namespace terra;

namespace {
struct AssignCasesPass
    : public terra::impl::TerraAssignCasesBase<AssignCasesPass> {
  using TerraAssignCasesBase::TerraAssignCasesBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    for (TraceGraphOp tgOp : llvm::to_vector(module.getOps<TraceGraphOp>())) {
      FailureOr<std::unique_ptr<TypedTraceGraph>> graph =
          TypedTraceGraph::fromIR(tgOp);
      if (failed(graph))
        return signalPassFailure();
      OpBuilder b(tgOp);
      CaseAssignmentOptions options;
      options.maxDuplication = maxDuplication;
      if (failed(assignCases(**graph, b, tgOp.getLoc(), tgOp.getSymName(),
                             options)))
        return signalPassFailure();
      tgOp.erase();
    }
  }
};
} // namespace
