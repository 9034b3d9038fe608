//===- CollapseDims.cpp - The terra-collapse-dims pass --------------------===//
//
// Adjacent loop dims of a linalg.generic that every operand walks
// contiguously, in order, become one loop, so that the loops LLVM
// vectorizes are long (see Passes.td).
//
//===----------------------------------------------------------------------===//
#include "terra/Passes.h"

#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Linalg/Transforms/Transforms.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/PatternMatch.h"

namespace terra {
#define GEN_PASS_DEF_TERRACOLLAPSEDIMS
#include "terra/Passes.h.inc"
} // namespace terra

using namespace mlir;

namespace {

/// Maximal runs of adjacent loop dims with one iterator type that every
/// indexing map keeps adjacent and in order (or leaves out); runs of one
/// dim are dropped.
SmallVector<ReassociationIndices> collapsibleRuns(linalg::GenericOp op) {
  SmallVector<AffineMap> maps = op.getIndexingMapsArray();
  SmallVector<utils::IteratorType> kinds = op.getIteratorTypesArray();
  SmallVector<ReassociationIndices> runs;
  unsigned n = op.getNumLoops();
  unsigned i = 0;
  while (i < n) {
    ReassociationIndices run{static_cast<int64_t>(i)};
    unsigned j = i + 1;
    for (; j < n; ++j) {
      if (kinds[j] != kinds[i])
        break;
      ReassociationIndices longer(run);
      longer.push_back(j);
      if (!linalg::areDimSequencesPreserved(maps, {longer}))
        break;
      run = std::move(longer);
    }
    if (run.size() > 1)
      runs.push_back(run);
    i = j;
  }
  return runs;
}

/// Whether `v` will be a buffer with the identity layout once bufferized,
/// so that collapsing its dims is a view: results of linalg ops and empty
/// tensors are; tensors made from buffers (the host's feeds and state,
/// strided views of any layout) only if that buffer has the identity
/// layout. Collapsing a strided buffer would copy it (YOLOv3's sliced
/// heads: its graph took 50% longer).
bool contiguousOnceBufferized(Value v) {
  // Static shapes only: collapsing dynamic dims crashes MLIR 22's
  // expand-strided-metadata on the collapsed buffer.
  if (auto t = dyn_cast<RankedTensorType>(v.getType());
      t && !t.hasStaticShape())
    return false;
  if (auto toTensor = v.getDefiningOp<bufferization::ToTensorOp>()) {
    auto type = dyn_cast<MemRefType>(toTensor.getBuffer().getType());
    return type && type.getLayout().isIdentity();
  }
  // Results of linalg ops and empty tensors get fresh buffers; slices and
  // reshapes of other values may be strided views.
  Operation *def = v.getDefiningOp();
  return def && (isa<linalg::LinalgOp>(def) || isa<tensor::EmptyOp>(def));
}

/// On buffers (on-buffers): a buffer with the identity layout and a static
/// shape, whose collapse is a view.
bool identityBuffer(Value v) {
  auto type = dyn_cast<MemRefType>(v.getType());
  return type && type.getLayout().isIdentity() && type.hasStaticShape();
}

struct TerraCollapseDimsPass
    : public terra::impl::TerraCollapseDimsBase<TerraCollapseDimsPass> {
  using TerraCollapseDimsBase::TerraCollapseDimsBase;

  void runOnOperation() override {
    SmallVector<linalg::GenericOp> ops;
    getOperation()->walk([&](linalg::GenericOp op) {
      bool operandsFit =
          onBuffers
              ? op.hasPureBufferSemantics() &&
                    llvm::all_of(op->getOperands(), identityBuffer)
              : op.hasPureTensorSemantics() &&
                    llvm::all_of(op->getOperands(), contiguousOnceBufferized);
      if (operandsFit && op.getNumLoops() > 1 &&
          op.getBody()->getOps<linalg::IndexOp>().empty() &&
          // collapseOpIterationDims needs plain dims in every map (a
          // broadcast written as a constant 0 index crashes it).
          llvm::all_of(op.getIndexingMapsArray(),
                       [](AffineMap m) { return m.isProjectedPermutation(); }))
        ops.push_back(op);
    });
    IRRewriter rewriter(&getContext());
    for (linalg::GenericOp op : ops) {
      SmallVector<ReassociationIndices> runs = collapsibleRuns(op);
      if (runs.empty())
        continue;
      rewriter.setInsertionPoint(op);
      FailureOr<linalg::CollapseResult> collapsed =
          linalg::collapseOpIterationDims(
              cast<linalg::LinalgOp>(op.getOperation()), runs, rewriter);
      if (failed(collapsed))
        continue; // left as it was
      rewriter.replaceOp(op, collapsed->results);
    }
  }
};

} // namespace
