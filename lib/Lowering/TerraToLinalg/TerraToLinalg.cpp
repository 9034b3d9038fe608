//===- TerraToLinalg.cpp - The terra-convert-to-linalg pass ---------------===//
//
// A thin pass: one pattern dispatches each terra.op to its family's
// lowering by name (see Utils.h for the recipe every lowering follows).
//
//===----------------------------------------------------------------------===//
#include "Utils.h"
#include "terra/Lowering/TerraToLinalg.h"
#include "terra/Passes.h"

#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace terra {
#define GEN_PASS_DEF_TERRACONVERTTOLINALG
#include "terra/Passes.h.inc"
} // namespace terra

using namespace mlir;
using namespace terra;

const LoweringRegistry &terra::getLoweringRegistry() {
  static const LoweringRegistry registry = [] {
    LoweringRegistry r;
    populateElementwiseLowerings(r);
    populateLinearLowerings(r);
    populateReductionLowerings(r);
    populateLossLowerings(r);
    populateNormalizationLowerings(r);
    populateDataMovementLowerings(r);
    populateTensorConstructorsLowerings(r);
    populateOptimizerLowerings(r);
    populateRandomLowerings(r);
    populateConvolutionLowerings(r);
    populatePoolingLowerings(r);
    populateGridSampleLowerings(r);
    return r;
  }();
  return registry;
}

namespace {
struct DLOpLowering : public OpRewritePattern<DLOp> {
  DLOpLowering(MLIRContext *ctx, const LoweringRegistry &registry)
      : OpRewritePattern(ctx), registry(registry) {}

  LogicalResult matchAndRewrite(DLOp op,
                                PatternRewriter &rewriter) const override {
    LowerFn fn = registry.lookup(op.getName());
    if (!fn)
      return rewriter.notifyMatchFailure(op, "no lowering for this op");
    // The lowerings build signless arithmetic with PyTorch's signed integer
    // semantics (sitofp, signed division and comparisons); an unsigned
    // operand or result (torch.uint8) keeps the op on the host, where
    // PyTorch computes it, rather than reinterpreting 200 as -56. An empty
    // one holds no values (cuDNN batch norm's reserve space).
    auto isUnsigned = [](Type t) {
      auto i = dyn_cast<IntegerType>(getElementTypeOrSelf(t));
      return i && i.isUnsigned() && !lowering::isEmptyTensor(t);
    };
    if (llvm::any_of(op->getOperandTypes(), isUnsigned) ||
        llvm::any_of(op->getResultTypes(), isUnsigned))
      return rewriter.notifyMatchFailure(op, "unsigned integer tensor");
    // A lowering may build ops before deciding it cannot handle the op;
    // roll those back so a failure leaves the IR untouched.
    // Shape operands are read only through symbolic sizes (sizeValue).
    return lowering::lowerOrRollBack(fn, op, op.getDataInputs(), rewriter);
  }

  const LoweringRegistry &registry;
};

struct ConvertToLinalgPass
    : public terra::impl::TerraConvertToLinalgBase<ConvertToLinalgPass> {
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    patterns.add<DLOpLowering>(&getContext(), getLoweringRegistry());
    int64_t before = 0;
    getOperation()->walk([&](DLOp) { ++before; });
    GreedyRewriteConfig config;
    config.setRegionSimplificationLevel(GreedySimplifyRegionLevel::Disabled);
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns),
                                     config)))
      return signalPassFailure();
    int64_t after = 0;
    getOperation()->walk([&](DLOp) { ++after; });
    numLowered += before - after;
    numHostOps += after;
  }
};
} // namespace
