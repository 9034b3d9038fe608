//===- FuseElementwise.cpp - The terra-fuse-elementwise pass --------------===//
//
// Upstream elementwise fusion and reshape propagation, except into or out of
// contractions and convolutions: those stay named ops so that
// `terra-library-calls` can hand them to BLAS. Upstream's
// `linalg-fuse-elementwise-ops` turned 24 of the 30 matmuls and all 12
// batch matmuls of the BERT program into generic loops (an `expand_shape`
// of the result pushed through the matmul, or a transpose of an operand
// folded into its indexing maps), which ran as scalar loops 5-10x slower
// than BLAS.
//
//===----------------------------------------------------------------------===//
#include "terra/Passes.h"

#include "mlir/Dialect/Affine/IR/AffineOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Linalg/IR/LinalgInterfaces.h"
#include "mlir/Dialect/Linalg/Transforms/Transforms.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Dialect/Tensor/Transforms/Transforms.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace terra {
#define GEN_PASS_DEF_TERRAFUSEELEMENTWISE
#include "terra/Passes.h.inc"
} // namespace terra

using namespace mlir;

namespace {

/// A matmul-like or convolution-like linalg op: a library call's job.
bool isLibraryOp(Operation *op) {
  auto linalgOp = dyn_cast_or_null<linalg::LinalgOp>(op);
  if (!linalgOp)
    return false;
  return linalg::isaContractionOpInterface(linalgOp) ||
         linalg::isaConvolutionOpInterface(linalgOp);
}

/// Fuse (or move a reshape across) the edge `fusedOperand` only when the
/// producer has no other use and neither end is a library op.
bool allowFusion(OpOperand *fusedOperand) {
  Operation *producer = fusedOperand->get().getDefiningOp();
  if (!producer || !producer->hasOneUse())
    return false;
  return !isLibraryOp(producer) && !isLibraryOp(fusedOperand->getOwner());
}

struct TerraFuseElementwisePass
    : public terra::impl::TerraFuseElementwiseBase<TerraFuseElementwisePass> {
  void runOnOperation() override {
    MLIRContext *context = &getContext();
    RewritePatternSet patterns(context);
    linalg::populateElementwiseOpsFusionPatterns(patterns, allowFusion);
    linalg::populateFoldReshapeOpsByExpansionPatterns(patterns, allowFusion);
    linalg::populateConstantFoldLinalgOperations(patterns, allowFusion);
    affine::AffineApplyOp::getCanonicalizationPatterns(patterns, context);
    linalg::GenericOp::getCanonicalizationPatterns(patterns, context);
    tensor::ExpandShapeOp::getCanonicalizationPatterns(patterns, context);
    tensor::CollapseShapeOp::getCanonicalizationPatterns(patterns, context);
    context->getLoadedDialect<linalg::LinalgDialect>()
        ->getCanonicalizationPatterns(patterns);
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns))))
      signalPassFailure();
  }
};

} // namespace
