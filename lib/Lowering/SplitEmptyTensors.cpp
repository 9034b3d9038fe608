//===- SplitEmptyTensors.cpp - The terra-split-empty-tensors pass ---------===//
//
// One tensor.empty per use, placed in its user's block, so that CSE-merged
// destinations do not end up sharing one buffer (see the pass description
// in Passes.td).
//
//===----------------------------------------------------------------------===//
#include "terra/Passes.h"

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
};

} // namespace
