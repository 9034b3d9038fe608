//===- LinalgToGPU.cpp - The terra-linalg-to-gpu pass ---------------------===//
//
// Every bufferized linalg op becomes one gpu.launch: its parallel
// dimensions are collapsed into one and split into blocks of `block-size`
// threads, its reduction dimensions stay sequential loops inside the thread.
// Upstream's parallel-loop-to-gpu patterns do the final conversion; this
// pass decides the loop structure and the mapping (see Passes.td).
//
//===----------------------------------------------------------------------===//
#include "terra/Passes.h"

#include "mlir/Conversion/SCFToGPU/SCFToGPU.h"
#include "mlir/Dialect/Affine/IR/AffineOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/GPU/Transforms/ParallelLoopMapper.h"
#include "mlir/Dialect/Linalg/Transforms/Transforms.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/DialectConversion.h"

namespace terra {
#define GEN_PASS_DEF_TERRALINALGTOGPU
#include "terra/Passes.h.inc"
} // namespace terra

using namespace mlir;

namespace {

/// The iterator permutation that puts every parallel dimension before every
/// reduction dimension (as interchangeGenericOp expects it), or an empty
/// vector when they already come first.
SmallVector<unsigned> parallelFirstPermutation(linalg::LinalgOp op) {
  SmallVector<utils::IteratorType> iters = op.getIteratorTypesArray();
  SmallVector<unsigned> perm;
  for (unsigned i = 0; i < iters.size(); ++i)
    if (iters[i] == utils::IteratorType::parallel)
      perm.push_back(i);
  for (unsigned i = 0; i < iters.size(); ++i)
    if (iters[i] != utils::IteratorType::parallel)
      perm.push_back(i);
  for (unsigned i = 0; i < perm.size(); ++i)
    if (perm[i] != i)
      return perm;
  return {};
}

/// `op` with its parallel dimensions outermost, so that its loop nest is one
/// scf.parallel over all of them around the reduction loops. Named ops are
/// generalized first when they need the interchange.
FailureOr<linalg::LinalgOp> parallelFirst(RewriterBase &rw,
                                          linalg::LinalgOp op) {
  SmallVector<unsigned> perm = parallelFirstPermutation(op);
  if (perm.empty())
    return op;
  rw.setInsertionPoint(op);
  auto generic = dyn_cast<linalg::GenericOp>(op.getOperation());
  if (!generic) {
    FailureOr<linalg::GenericOp> g = linalg::generalizeNamedOp(rw, op);
    if (failed(g))
      return failure();
    generic = *g;
  }
  FailureOr<linalg::GenericOp> swapped =
      linalg::interchangeGenericOp(rw, generic, perm);
  if (failed(swapped))
    return failure();
  return cast<linalg::LinalgOp>(swapped->getOperation());
}

gpu::ParallelLoopDimMappingAttr mapTo(MLIRContext *ctx, gpu::Processor p) {
  AffineMap id = AffineMap::getMultiDimIdentityMap(1, ctx);
  return gpu::ParallelLoopDimMappingAttr::get(ctx, p, id, id);
}

struct TerraLinalgToGPUPass
    : public terra::impl::TerraLinalgToGPUBase<TerraLinalgToGPUPass> {
  using TerraLinalgToGPUBase::TerraLinalgToGPUBase;

  void runOnOperation() override {
    func::FuncOp func = getOperation();
    if (blockSize < 1 || blockSize > 1024) {
      func.emitError() << "terra-linalg-to-gpu: block-size must be in "
                          "[1, 1024], got "
                       << int64_t(blockSize);
      return signalPassFailure();
    }
    IRRewriter rw(&getContext());
    auto onHost = [](Operation *op) {
      return !op->getParentOfType<gpu::LaunchOp>() &&
             !op->getParentOfType<gpu::GPUModuleOp>();
    };

    // Buffer copies become linalg.copy, hence kernels too.
    SmallVector<memref::CopyOp> copies;
    func.walk([&](memref::CopyOp c) {
      if (onHost(c) && isa<MemRefType>(c.getSource().getType()) &&
          isa<MemRefType>(c.getTarget().getType()))
        copies.push_back(c);
    });
    for (memref::CopyOp c : copies) {
      rw.setInsertionPoint(c);
      rw.replaceOpWithNewOp<linalg::CopyOp>(c, c.getSource(), c.getTarget());
    }

    SmallVector<linalg::LinalgOp> ops;
    func.walk([&](linalg::LinalgOp op) {
      if (onHost(op) && op.hasPureBufferSemantics())
        ops.push_back(op);
    });
    for (linalg::LinalgOp op : ops)
      if (failed(toKernelLoops(rw, op)))
        return signalPassFailure();

    // The mapped loops become gpu.launch; one that cannot is an error at
    // its location (illegal op), never a host loop over device memory.
    RewritePatternSet patterns(&getContext());
    populateParallelLoopToGPUPatterns(patterns);
    ConversionTarget target(getContext());
    target.markUnknownOpDynamicallyLegal([](Operation *) { return true; });
    configureParallelLoopToGPULegality(target);
    if (failed(applyPartialConversion(func, target, std::move(patterns))))
      return signalPassFailure();
    finalizeParallelLoopToGPUConversion(func);
    // The conversion's bookkeeping marker is of no use downstream.
    func.walk(
        [](gpu::LaunchOp launch) { launch->removeAttr("SCFToGPU_visited"); });
  }

  /// Replaces `op` by the two-level loop nest
  ///   scf.parallel %b (blocks) { scf.parallel %t (threads) {
  ///     %i = %b * block-size + %t
  ///     scf.if %i < total { <the op's body at delinearized %i> } } }
  LogicalResult toKernelLoops(IRRewriter &rw, linalg::LinalgOp op) {
    Location loc = op.getLoc();
    FailureOr<linalg::LinalgOp> reordered = parallelFirst(rw, op);
    if (failed(reordered))
      return op.emitError("terra-linalg-to-gpu: cannot reorder the loops of "
                          "this op to put parallel dimensions first");
    op = *reordered;
    bool serial = op.getNumParallelLoops() == 0;
    int64_t threads = serial ? 1 : int64_t(blockSize);

    rw.setInsertionPoint(op);
    Value c0 = arith::ConstantIndexOp::create(rw, loc, 0);
    Value c1 = arith::ConstantIndexOp::create(rw, loc, 1);
    Value cThreads = arith::ConstantIndexOp::create(rw, loc, threads);

    // For a serial op: the one-iteration nest first, the op's loops inside.
    scf::ParallelOp loops;
    Value total = c1;
    if (!serial) {
      FailureOr<linalg::LinalgLoops> nest =
          linalg::linalgOpToParallelLoops(rw, op);
      if (failed(nest) || nest->empty() || !isa<scf::ParallelOp>(nest->front()))
        return op.emitError("terra-linalg-to-gpu: cannot lower this op to a "
                            "parallel loop nest");
      loops = cast<scf::ParallelOp>(nest->front());
      rw.setInsertionPoint(loops);
      for (Value ub : loops.getUpperBound())
        total = rw.createOrFold<arith::MulIOp>(loc, total, ub);
    }
    Value numBlocks = rw.createOrFold<arith::CeilDivUIOp>(loc, total, cThreads);

    auto blockLoop = scf::ParallelOp::create(
        rw, loc, ValueRange{c0}, ValueRange{numBlocks}, ValueRange{c1});
    rw.setInsertionPoint(blockLoop.getBody()->getTerminator());
    auto threadLoop = scf::ParallelOp::create(
        rw, loc, ValueRange{c0}, ValueRange{cThreads}, ValueRange{c1});
    rw.setInsertionPoint(threadLoop.getBody()->getTerminator());
    Value linear = arith::MulIOp::create(
        rw, loc, blockLoop.getInductionVars()[0], cThreads);
    linear = arith::AddIOp::create(rw, loc, linear,
                                   threadLoop.getInductionVars()[0]);
    Value inRange = arith::CmpIOp::create(rw, loc, arith::CmpIPredicate::ult,
                                          linear, total);
    auto guard = scf::IfOp::create(rw, loc, inRange, /*withElseRegion=*/false);
    rw.setInsertionPoint(guard.thenBlock()->getTerminator());

    if (serial) {
      rw.moveOpBefore(op, guard.thenBlock()->getTerminator());
      if (failed(linalg::linalgOpToLoops(rw, op)))
        return op.emitError("terra-linalg-to-gpu: cannot lower this op to "
                            "loops");
      ++numSerial;
    } else {
      // Delinearize, innermost dimension fastest: consecutive threads touch
      // consecutive elements of a row-major buffer.
      ValueRange ubs = loops.getUpperBound();
      SmallVector<Value> ivs(ubs.size());
      Value rest = linear;
      for (int64_t d = int64_t(ubs.size()) - 1; d > 0; --d) {
        ivs[d] = arith::RemUIOp::create(rw, loc, rest, ubs[d]);
        rest = arith::DivUIOp::create(rw, loc, rest, ubs[d]);
      }
      ivs[0] = rest;
      Block *body = loops.getBody();
      rw.eraseOp(body->getTerminator());
      rw.inlineBlockBefore(body, guard.thenBlock()->getTerminator(), ivs);
      rw.eraseOp(loops);
    }
    rw.eraseOp(op);

    MLIRContext *ctx = &getContext();
    if (failed(gpu::setMappingAttr(blockLoop,
                                   {mapTo(ctx, gpu::Processor::BlockX)})) ||
        failed(gpu::setMappingAttr(threadLoop,
                                   {mapTo(ctx, gpu::Processor::ThreadX)})))
      return blockLoop.emitError("terra-linalg-to-gpu: invalid loop mapping");
    ++numKernels;
    return success();
  }
};

} // namespace
