//===- RefineBranchLayouts.cpp - The terra-refine-branch-layouts pass -----===//
//
// After one-shot bufferization: an scf.if result of a fully dynamic layout
// whose branches all yield the same identity-layout buffer type (seen
// through memref.cast) gets that type (see Passes.td).
//
//===----------------------------------------------------------------------===//
#include "terra/Passes.h"

#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/Builders.h"

namespace terra {
#define GEN_PASS_DEF_TERRAREFINEBRANCHLAYOUTS
#include "terra/Passes.h.inc"
} // namespace terra

using namespace mlir;

namespace {

/// `v` with the memref.casts between ranked types that produced it
/// stripped (a cast from an unranked memref, the runtime's state and feeds,
/// is where the ranked type comes from).
Value throughCasts(Value v) {
  while (auto cast = v.getDefiningOp<memref::CastOp>()) {
    if (!isa<MemRefType>(cast.getSource().getType()))
      break;
    v = cast.getSource();
  }
  return v;
}

/// Refines result `i` of `op` when every branch yields a buffer of its
/// shape with the identity layout; returns the cast that now feeds the
/// result's old uses, or null.
memref::CastOp refineResult(scf::IfOp op, unsigned i) {
  auto type = dyn_cast<MemRefType>(op.getResult(i).getType());
  if (!type || type.getLayout().isIdentity() || op.getElseRegion().empty())
    return {};
  auto identity =
      MemRefType::get(type.getShape(), type.getElementType(),
                      MemRefLayoutAttrInterface(), type.getMemorySpace());
  SmallVector<scf::YieldOp, 2> yields = {op.thenYield(), op.elseYield()};
  for (scf::YieldOp yield : yields)
    if (throughCasts(yield.getOperand(i)).getType() != identity)
      return {};
  for (scf::YieldOp yield : yields)
    yield.setOperand(i, throughCasts(yield.getOperand(i)));
  Value result = op.getResult(i);
  result.setType(identity);
  OpBuilder b(op.getContext());
  b.setInsertionPointAfter(op);
  auto cast = memref::CastOp::create(b, op.getLoc(), type, result);
  result.replaceAllUsesExcept(cast.getResult(), cast);
  return cast;
}

struct TerraRefineBranchLayoutsPass
    : public terra::impl::TerraRefineBranchLayoutsBase<
          TerraRefineBranchLayoutsPass> {
  void runOnOperation() override {
    SmallVector<memref::CastOp> casts;
    // Post-order: inner ifs first, so an outer if sees their refined types.
    getOperation()->walk([&](scf::IfOp op) {
      for (unsigned i = 0, e = op.getNumResults(); i < e; ++i)
        if (memref::CastOp cast = refineResult(op, i))
          casts.push_back(cast);
    });
    // linalg ops read the refined buffers directly (what their folder does
    // with a cast that only erases layout information; a full
    // canonicalization of a graph with switches of hundreds of results
    // took seconds). Casts left without uses go.
    for (memref::CastOp cast : casts) {
      for (Operation *user : llvm::to_vector(cast->getUsers()))
        if (isa<linalg::LinalgOp>(user))
          (void)memref::foldMemRefCast(user);
      if (cast->use_empty())
        cast->erase();
    }
  }
};

} // namespace
