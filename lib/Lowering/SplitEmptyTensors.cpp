//===- SplitEmptyTensors.cpp - The terra-split-empty-tensors pass ---------===//
//
// One tensor.empty per use, placed in its user's block, so that CSE-merged
// destinations do not end up sharing one buffer; likewise one fill of an
// empty tensor per destination it initializes (see the pass description in
// Passes.td).
//
//===----------------------------------------------------------------------===//
#include "terra/Passes.h"

#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Interfaces/DestinationStyleOpInterface.h"

namespace terra {
#define GEN_PASS_DEF_TERRASPLITEMPTYTENSORS
#include "terra/Passes.h.inc"
} // namespace terra

using namespace mlir;

namespace {

struct TerraSplitEmptyTensorsPass
    : public terra::impl::TerraSplitEmptyTensorsBase<
          TerraSplitEmptyTensorsPass> {
  void runOnOperation() override {
    splitFills();
    SmallVector<tensor::EmptyOp> empties;
    getOperation()->walk([&](tensor::EmptyOp e) {
      if (e->use_empty())
        return;
      bool nested = llvm::any_of(e->getUsers(), [&](Operation *user) {
        return user->getBlock() != e->getBlock();
      });
      if (nested || !e->hasOneUse())
        empties.push_back(e);
    });
    for (tensor::EmptyOp e : empties) {
      // The first use in the empty's own block keeps the original; every
      // other use, and every use in a nested region (a loop body CSE
      // merged the empty out of), gets a clone placed right before its
      // user.
      OpOperand *kept = nullptr;
      SmallVector<OpOperand *> moved;
      for (OpOperand &use : e->getUses()) {
        if (!kept && use.getOwner()->getBlock() == e->getBlock())
          kept = &use;
        else
          moved.push_back(&use);
      }
      for (OpOperand *use : moved) {
        OpBuilder b(use->getOwner());
        use->set(b.clone(*e)->getResult(0));
      }
      if (!kept)
        e.erase();
    }
  }

  /// A `linalg.fill` of a `tensor.empty` (CSE merged the zero
  /// initializations of several GEMM and reduction outputs into one) that is
  /// the destination of several ops: every destination use but the first in
  /// its block gets its own empty tensor and fill, right before its user
  /// (every one, when the filled tensor is also read).
  /// One-shot bufferization would otherwise fill one buffer and copy it
  /// into a new buffer per destination (a memset and a memcpy of each
  /// output), and the library calls would not see the zero fill right
  /// before a GEMM that lets BLAS overwrite its output (beta = 0).
  void splitFills() {
    SmallVector<linalg::FillOp> fills;
    getOperation()->walk([&](linalg::FillOp f) {
      if (f.hasPureTensorSemantics() &&
          f.getOutputs()[0].getDefiningOp<tensor::EmptyOp>() &&
          !f->getResult(0).hasOneUse())
        fills.push_back(f);
    });
    for (linalg::FillOp f : fills) {
      // Destination uses, and whether the filled tensor is also read (then
      // no destination keeps it: its writer would need a copy).
      SmallVector<OpOperand *> moved;
      bool read = false;
      for (OpOperand &use : f->getResult(0).getUses()) {
        auto dps = dyn_cast<DestinationStyleOpInterface>(use.getOwner());
        if (dps && dps.isDpsInit(&use))
          moved.push_back(&use);
        else
          read = true;
      }
      // Else the first destination in the fill's block keeps it.
      OpOperand *kept = nullptr;
      for (OpOperand *use : moved)
        if (!read && use->getOwner()->getBlock() == f->getBlock() &&
            (!kept || use->getOwner()->isBeforeInBlock(kept->getOwner())))
          kept = use;
      llvm::erase(moved, kept);
      auto empty = f.getOutputs()[0].getDefiningOp<tensor::EmptyOp>();
      for (OpOperand *use : moved) {
        OpBuilder b(use->getOwner());
        Operation *e = b.clone(*empty);
        IRMapping map;
        map.map(empty->getResult(0), e->getResult(0));
        use->set(b.clone(*f, map)->getResult(0));
      }
      if (f->use_empty())
        f.erase();
    }
  }
};

} // namespace
