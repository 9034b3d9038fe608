//===- ReassociateReductions.cpp - The terra-reassociate-reductions pass --===//
//
// Float sums in linalg reductions get `reassoc`, so that LLVM vectorizes
// them (one partial sum per lane) instead of adding one element at a time.
//
//===----------------------------------------------------------------------===//
#include "terra/Passes.h"

namespace terra {
#define GEN_PASS_DEF_TERRAREASSOCIATEREDUCTIONS
#include "terra/Passes.h.inc"
} // namespace terra

using namespace mlir;

namespace {

struct TerraReassociateReductionsPass
    : public terra::impl::TerraReassociateReductionsBase<
          TerraReassociateReductionsPass> {
  void runOnOperation() override {
    getOperation()->walk([](linalg::GenericOp g) {
      if (g.getNumReductionLoops() == 0)
        return;
      Block &body = g.getRegion().front();
      auto yield = cast<linalg::YieldOp>(body.getTerminator());
      for (OpOperand &init : g.getDpsInitsMutable()) {
        BlockArgument acc = g.getMatchingBlockArgument(&init);
        unsigned result = init.getOperandNumber() - g.getNumDpsInputs();
        auto add = yield.getOperand(result).getDefiningOp<arith::AddFOp>();
        if (!add || (add.getLhs() != acc && add.getRhs() != acc))
          continue;
        add.setFastmath(add.getFastmath() | arith::FastMathFlags::reassoc);
      }
    });
  }
};

} // namespace
