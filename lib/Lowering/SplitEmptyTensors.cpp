//===- SplitEmptyTensors.cpp - The terra-split-empty-tensors pass ---------===//
//
// One tensor.empty per use, so that CSE-merged destinations do not end up
// sharing one buffer (see the pass description in Passes.td).
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
      if (!e->hasOneUse() && !e->use_empty())
        empties.push_back(e);
    });
    for (tensor::EmptyOp e : empties) {
      SmallVector<OpOperand *> uses;
      for (OpOperand &use : e->getUses())
        uses.push_back(&use);
      // The first use keeps the original; every other use gets a clone
      // placed right before its user.
      for (OpOperand *use : llvm::drop_begin(uses)) {
        OpBuilder b(use->getOwner());
        use->set(b.clone(*e)->getResult(0));
      }
    }
  }
};

} // namespace
