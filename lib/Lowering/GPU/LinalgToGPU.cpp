//===- LinalgToGPU.cpp - The terra-linalg-to-gpu pass ---------------------===//
//
// Every bufferized linalg op becomes one gpu.launch: its parallel
// dimensions are collapsed into one and split into blocks of `block-size`
// threads, its reduction dimensions stay sequential loops inside the thread.
// Upstream's parallel-loop-to-gpu patterns do the final conversion; this
// pass decides the loop structure and the mapping (see Passes.td).
//
//===----------------------------------------------------------------------===//
#include "HostMemory.h"

#include "terra/Passes.h"

#include "mlir/Analysis/SliceAnalysis.h"
#include "mlir/Conversion/SCFToGPU/SCFToGPU.h"
#include "mlir/Dialect/Affine/IR/AffineOps.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/GPU/Transforms/ParallelLoopMapper.h"
#include "mlir/Dialect/Linalg/Transforms/Transforms.h"
#include "mlir/Dialect/SCF/Utils/Utils.h"
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

/// `linear` split into indices of `sizes`, the last one varying fastest.
SmallVector<Value> delinearize(OpBuilder &b, Location loc, Value linear,
                               ArrayRef<Value> sizes) {
  SmallVector<Value> ivs(sizes.size());
  Value rest = linear;
  for (int64_t d = int64_t(sizes.size()) - 1; d > 0; --d) {
    ivs[d] = arith::RemUIOp::create(b, loc, rest, sizes[d]);
    rest = arith::DivUIOp::create(b, loc, rest, sizes[d]);
  }
  if (!sizes.empty())
    ivs[0] = rest;
  return ivs;
}

/// The indices of operand `operand` of `op` at loop indices `ivs`.
SmallVector<Value> operandIndices(OpBuilder &b, Location loc,
                                  linalg::LinalgOp op, OpOperand &operand,
                                  ValueRange ivs) {
  AffineMap map = op.getMatchingIndexingMap(&operand);
  SmallVector<Value> indices;
  for (AffineExpr e : map.getResults())
    indices.push_back(affine::AffineApplyOp::create(
        b, loc, AffineMap::get(map.getNumDims(), 0, e), ivs));
  return indices;
}

/// The element of operand `operand` of `op` at loop indices `ivs`.
Value loadOperand(OpBuilder &b, Location loc, linalg::LinalgOp op,
                  OpOperand &operand, ValueRange ivs) {
  return memref::LoadOp::create(b, loc, operand.get(),
                                operandIndices(b, loc, op, operand, ivs));
}

/// The sizes of `op`'s loops (parallel dimensions first), as values at the
/// insertion point: the parallel ones, the reduction ones and their product.
struct LoopSizes {
  SmallVector<Value> parallel, reduced;
  Value reducedTotal;
};
LoopSizes loopSizes(OpBuilder &b, Location loc, linalg::LinalgOp op) {
  LoopSizes sizes;
  unsigned numParallel = op.getNumParallelLoops();
  SmallVector<Range> ranges = op.createLoopRanges(b, loc);
  sizes.reducedTotal = arith::ConstantIndexOp::create(b, loc, 1);
  for (unsigned d = 0; d < ranges.size(); ++d) {
    Value size = getValueOrCreateConstantIndexOp(b, loc, ranges[d].size);
    if (d < numParallel) {
      sizes.parallel.push_back(size);
      continue;
    }
    sizes.reduced.push_back(size);
    sizes.reducedTotal =
        b.createOrFold<arith::MulIOp>(loc, sizes.reducedTotal, size);
  }
  return sizes;
}

/// Fills `loop`, over the linearized reduction dimensions of `op`
/// (parallel dimensions first) with one iteration argument per output,
/// with the op's body at parallel indices `pIvs`: inputs loaded at the
/// loop's indices, outputs read from the iteration arguments, and the
/// body's results yielded.
void emitFoldBody(OpBuilder &b, Location loc, linalg::LinalgOp op,
                  scf::ForOp loop, ValueRange pIvs,
                  ArrayRef<Value> reducedSizes) {
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(loop.getBody());
  SmallVector<Value> ivs(pIvs);
  llvm::append_range(ivs,
                     delinearize(b, loc, loop.getInductionVar(), reducedSizes));
  Block *body = op.getBlock();
  IRMapping map;
  for (OpOperand *in : op.getDpsInputOperands())
    map.map(body->getArgument(in->getOperandNumber()),
            isa<MemRefType>(in->get().getType())
                ? loadOperand(b, loc, op, *in, ivs)
                : in->get());
  for (auto [arg, acc] :
       llvm::zip(op.getRegionOutputArgs(), loop.getRegionIterArgs()))
    map.map(arg, acc);
  for (Operation &o : body->without_terminator()) {
    if (auto index = dyn_cast<linalg::IndexOp>(o)) {
      map.map(index.getResult(), ivs[index.getDim()]);
      continue;
    }
    b.clone(o, map);
  }
  SmallVector<Value> yielded;
  for (Value v : body->getTerminator()->getOperands())
    yielded.push_back(map.lookupOrDefault(v));
  scf::YieldOp::create(b, loc, yielded);
}

/// How a reduction is split across threads (see splitReduction).
struct ReductionSplit {
  int64_t parallel = 1; ///< P: output elements
  int64_t reduced = 1;  ///< K: elements each output reduces (static part)
  bool dynamic = false; ///< whether K is only known at run time
  int64_t splits = 1;   ///< S: threads per output element
  Operation *combiner = nullptr;
  TypedAttr neutral;
};

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

    if (!kernels)
      return; // tests run the mapped loops on the CPU
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

  /// The kernel loop nest over `total` threads (see toKernelLoops), with
  /// the insertion point inside its bounds guard; returns the thread's
  /// linear index.
  FailureOr<Value> kernelLoops(IRRewriter &rw, Location loc, Value total,
                               int64_t threads) {
    Value c0 = arith::ConstantIndexOp::create(rw, loc, 0);
    Value c1 = arith::ConstantIndexOp::create(rw, loc, 1);
    Value cThreads = arith::ConstantIndexOp::create(rw, loc, threads);
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
    MLIRContext *ctx = &getContext();
    if (failed(gpu::setMappingAttr(blockLoop,
                                   {mapTo(ctx, gpu::Processor::BlockX)})) ||
        failed(gpu::setMappingAttr(threadLoop,
                                   {mapTo(ctx, gpu::Processor::ThreadX)})))
      return failure();
    ++numKernels;
    return linear;
  }

  /// Whether `op` (parallel dimensions first) is a reduction worth splitting
  /// across threads, and how: one output, static loop ranges, a body that
  /// folds each element into the output with one combiner that has a
  /// neutral element (upstream's matchReduction, arith::getNeutralElement),
  /// at least `split-min-elements` elements reduced per output and fewer
  /// outputs than `split-max-outputs` (with more, one thread per output
  /// fills the device).
  std::optional<ReductionSplit> planSplit(linalg::LinalgOp op) {
    if (!splitReductions || op.getNumReductionLoops() == 0 ||
        op.getNumDpsInits() != 1 || op->getNumResults() != 0 ||
        op.getBlock()->getNumArguments() != op->getNumOperands())
      return std::nullopt;
    ReductionSplit plan;
    SmallVector<int64_t> ranges = op.getStaticLoopRanges();
    unsigned numParallel = op.getNumParallelLoops();
    for (unsigned d = 0; d < ranges.size(); ++d) {
      if (!ShapedType::isDynamic(ranges[d]))
        (d < numParallel ? plan.parallel : plan.reduced) *= ranges[d];
      else if (d < numParallel)
        return std::nullopt; // many outputs, most likely (a batch)
      else
        plan.dynamic = true;
    }
    if ((!plan.dynamic && plan.reduced < splitMinElements) ||
        plan.parallel >= splitMaxOutputs)
      return std::nullopt;
    // The output is indexed by parallel dimensions only.
    AffineMap outMap = op.getMatchingIndexingMap(op.getDpsInitOperand(0));
    for (unsigned d = numParallel; d < ranges.size(); ++d)
      if (outMap.isFunctionOfDim(d))
        return std::nullopt;
    SmallVector<Operation *> combiners;
    BlockArgument out = op.getRegionOutputArgs()[0];
    if (!matchReduction({out}, 0, combiners) || combiners.size() != 1 ||
        combiners[0]->getNumOperands() != 2)
      return std::nullopt;
    std::optional<TypedAttr> neutral = arith::getNeutralElement(combiners[0]);
    if (!neutral)
      return std::nullopt;
    plan.combiner = combiners[0];
    plan.neutral = *neutral;
    // Enough threads per output for the outputs to fill ~splitMaxOutputs
    // threads, each folding at least 32 elements.
    // A size known only at run time: at most 1024 per output (the run-time
    // check of toKernelLoops keeps small reductions on one thread).
    plan.splits =
        std::min(llvm::divideCeil(splitMaxOutputs, plan.parallel),
                 plan.dynamic ? int64_t(1024)
                              : llvm::divideCeil(plan.reduced, int64_t(32)));
    if (plan.splits < 2)
      return std::nullopt;
    return plan;
  }

  /// Replaces reduction `op` by two kernels (planSplit says when): S
  /// threads per output element each fold every S-th element of its
  /// reduction (consecutive threads read consecutive elements) from the
  /// combiner's neutral element into a partial result, then one thread per
  /// output element folds its S partials into the output. Reassociates the
  /// reduction, as every parallel reduction does (PyTorch's CUDA sums
  /// included).
  LogicalResult splitReduction(IRRewriter &rw, linalg::LinalgOp op,
                               const ReductionSplit &plan) {
    Location loc = op.getLoc();
    rw.setInsertionPoint(op);
    SmallVector<int64_t> ranges = op.getStaticLoopRanges();
    unsigned numParallel = op.getNumParallelLoops();
    auto cst = [&](int64_t v) -> Value {
      return arith::ConstantIndexOp::create(rw, loc, v);
    };
    LoopSizes sizes = loopSizes(rw, loc, op);
    Type elem = plan.neutral.getType();
    SmallVector<int64_t> partialShape(ranges.begin(),
                                      ranges.begin() + numParallel);
    partialShape.push_back(plan.splits);
    auto partialType = MemRefType::get(partialShape, elem);
    Value partial = memref::AllocOp::create(rw, loc, partialType);
    Value cSplits = cst(plan.splits);
    BlockArgument outArg = op.getRegionOutputArgs()[0];

    // Kernel 1: thread (p, s) folds elements s, s + S, ... of output p.
    FailureOr<Value> linear =
        kernelLoops(rw, loc, cst(plan.parallel * plan.splits), blockSize);
    if (failed(linear))
      return failure();
    Value split = arith::RemUIOp::create(rw, loc, *linear, cSplits);
    Value outIndex = arith::DivUIOp::create(rw, loc, *linear, cSplits);
    SmallVector<Value> pIvs = delinearize(rw, loc, outIndex, sizes.parallel);
    Value init = arith::ConstantOp::create(rw, loc, plan.neutral);
    auto loop = scf::ForOp::create(rw, loc, split, sizes.reducedTotal, cSplits,
                                   ValueRange{init});
    emitFoldBody(rw, loc, op, loop, pIvs, sizes.reduced);
    SmallVector<Value> partialIdx(pIvs);
    partialIdx.push_back(split);
    memref::StoreOp::create(rw, loc, loop.getResult(0), partial, partialIdx);
    // A thread's fold, unrolled: its loads do not depend on the
    // accumulator, so the unrolled ones are all in flight at once (one
    // load at a time left the kernel waiting on memory latency: ResNet-50's
    // batch-norm statistics, 1568 elements a thread). Same order of
    // combining, so the same result.
    if (foldUnroll > 1)
      (void)loopUnrollByFactor(loop, foldUnroll);

    // Then the partials are folded into the output: a reduction of S
    // elements per output, lowered like any other (split again when S is
    // large).
    rw.setInsertionPoint(op);
    OpOperand *init0 = op.getDpsInitOperand(0);
    AffineMap outMap = op.getMatchingIndexingMap(init0);
    unsigned foldDims = numParallel + 1;
    SmallVector<AffineMap> maps = {
        AffineMap::getMultiDimIdentityMap(foldDims, rw.getContext()),
        AffineMap::get(foldDims, 0, outMap.getResults(), rw.getContext())};
    SmallVector<utils::IteratorType> iters(numParallel,
                                           utils::IteratorType::parallel);
    iters.push_back(utils::IteratorType::reduction);
    unsigned accOperand = plan.combiner->getOperand(0) == outArg ? 0 : 1;
    auto fold = linalg::GenericOp::create(
        rw, loc, TypeRange{}, ValueRange{partial}, ValueRange{init0->get()},
        maps, iters, [&](OpBuilder &b, Location l, ValueRange args) {
          IRMapping map;
          map.map(plan.combiner->getOperand(accOperand), args[1]);
          map.map(plan.combiner->getOperand(1 - accOperand), args[0]);
          Operation *combined = b.clone(*plan.combiner, map);
          linalg::YieldOp::create(b, l, combined->getResult(0));
        });
    rw.setInsertionPointAfter(fold);
    memref::DeallocOp::create(rw, loc, partial);
    rw.eraseOp(op);
    ++numSplit;
    return toKernelLoops(rw, fold);
  }

  /// Whether reduction `op` (parallel dimensions first) can keep each
  /// output element in a register over its reduction loop: its outputs are
  /// indexed by parallel dimensions only, and no input is a view of an
  /// output's buffer (whose elements the loop would then read while their
  /// new values are still in registers).
  bool foldsInRegisters(linalg::LinalgOp op) {
    if (op.getNumReductionLoops() == 0 || op->getNumResults() != 0 ||
        op.getBlock()->getNumArguments() != op->getNumOperands())
      return false;
    unsigned numParallel = op.getNumParallelLoops();
    unsigned numLoops = op.getNumLoops();
    for (OpOperand &init : op.getDpsInitsMutable()) {
      AffineMap map = op.getMatchingIndexingMap(&init);
      for (unsigned d = numParallel; d < numLoops; ++d)
        if (map.isFunctionOfDim(d))
          return false;
      Value root = terra::gpu::bufferOf(init.get());
      for (OpOperand *in : op.getDpsInputOperands())
        if (isa<MemRefType>(in->get().getType()) &&
            terra::gpu::bufferOf(in->get()) == root)
          return false;
    }
    return true;
  }

  /// Replaces reduction `op` (foldsInRegisters) by one thread per output
  /// element that loads the element, folds the reduction into it in
  /// registers (`scf.for` with the elements as iteration arguments,
  /// unrolled `fold-unroll` times) and stores it once. The order of
  /// combining is the op's own. Linalg's loops would load and store the
  /// output element on every iteration instead: each iteration waits for
  /// the previous one's store, and no two loads overlap.
  LogicalResult foldPerThread(IRRewriter &rw, linalg::LinalgOp op) {
    Location loc = op.getLoc();
    rw.setInsertionPoint(op);
    LoopSizes sizes = loopSizes(rw, loc, op);
    Value total = arith::ConstantIndexOp::create(rw, loc, 1);
    for (Value size : sizes.parallel)
      total = rw.createOrFold<arith::MulIOp>(loc, total, size);
    FailureOr<Value> linear = kernelLoops(rw, loc, total, blockSize);
    if (failed(linear))
      return op.emitError("terra-linalg-to-gpu: invalid loop mapping");
    SmallVector<Value> pIvs = delinearize(rw, loc, *linear, sizes.parallel);
    Value c0 = arith::ConstantIndexOp::create(rw, loc, 0);
    Value c1 = arith::ConstantIndexOp::create(rw, loc, 1);
    SmallVector<Value> outIvs(pIvs);
    outIvs.append(sizes.reduced.size(), c0);
    SmallVector<Value> inits;
    for (OpOperand &init : op.getDpsInitsMutable())
      inits.push_back(loadOperand(rw, loc, op, init, outIvs));
    auto loop = scf::ForOp::create(rw, loc, c0, sizes.reducedTotal, c1, inits);
    emitFoldBody(rw, loc, op, loop, pIvs, sizes.reduced);
    for (auto [init, result] :
         llvm::zip(op.getDpsInitsMutable(), loop.getResults()))
      memref::StoreOp::create(rw, loc, result, init.get(),
                              operandIndices(rw, loc, op, init, outIvs));
    // Unrolled unless short: a few elements per output (a 3x3 window, a
    // class dim) gain nothing and only grow the kernel.
    std::optional<int64_t> trips = getConstantIntValue(sizes.reducedTotal);
    if (foldUnroll > 1 && (!trips || *trips >= 4 * foldUnroll))
      (void)loopUnrollByFactor(loop, foldUnroll);
    rw.eraseOp(op);
    ++numRegisterFolds;
    return success();
  }

  /// Replaces `op` by the two-level loop nest
  ///   scf.parallel %b (blocks) { scf.parallel %t (threads) {
  ///     %i = %b * block-size + %t
  ///     scf.if %i < total { <the op's body at delinearized %i> } } }
  LogicalResult toKernelLoops(IRRewriter &rw, linalg::LinalgOp op,
                              bool allowSplit = true) {
    Location loc = op.getLoc();
    FailureOr<linalg::LinalgOp> reordered = parallelFirst(rw, op);
    if (failed(reordered))
      return op.emitError("terra-linalg-to-gpu: cannot reorder the loops of "
                          "this op to put parallel dimensions first");
    op = *reordered;
    if (std::optional<ReductionSplit> plan =
            allowSplit ? planSplit(op) : std::nullopt) {
      if (!plan->dynamic)
        return splitReduction(rw, op, *plan);
      // The reduced size is known at run time: split when it is large,
      // else one thread per output.
      rw.setInsertionPoint(op);
      Value large = arith::CmpIOp::create(
          rw, loc, arith::CmpIPredicate::uge,
          loopSizes(rw, loc, op).reducedTotal,
          arith::ConstantIndexOp::create(rw, loc, splitMinElements));
      auto branch = scf::IfOp::create(rw, loc, large, /*withElseRegion=*/true);
      rw.setInsertionPoint(branch.thenBlock()->getTerminator());
      auto split = cast<linalg::LinalgOp>(rw.clone(*op));
      rw.setInsertionPoint(branch.elseBlock()->getTerminator());
      auto single = cast<linalg::LinalgOp>(rw.clone(*op));
      rw.eraseOp(op);
      // The plan names the combiner of the op it was made for.
      std::optional<ReductionSplit> splitPlan = planSplit(split);
      if (!splitPlan || failed(splitReduction(rw, split, *splitPlan)))
        return failure();
      return toKernelLoops(rw, single, /*allowSplit=*/false);
    }
    if (op.getNumParallelLoops() > 0 && foldsInRegisters(op))
      return foldPerThread(rw, op);
    bool serial = op.getNumParallelLoops() == 0;
    int64_t threads = serial ? 1 : int64_t(blockSize);

    // For a serial op: the one-iteration nest first, the op's loops inside.
    rw.setInsertionPoint(op);
    scf::ParallelOp loops;
    Value total = arith::ConstantIndexOp::create(rw, loc, 1);
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
    FailureOr<Value> linear = kernelLoops(rw, loc, total, threads);
    if (failed(linear))
      return op.emitError("terra-linalg-to-gpu: invalid loop mapping");
    Operation *guardEnd = rw.getInsertionBlock()->getTerminator();

    if (serial) {
      rw.moveOpBefore(op, guardEnd);
      if (failed(linalg::linalgOpToLoops(rw, op)))
        return op.emitError("terra-linalg-to-gpu: cannot lower this op to "
                            "loops");
      ++numSerial;
    } else {
      // Innermost dimension fastest: consecutive threads touch consecutive
      // elements of a row-major buffer.
      SmallVector<Value> ivs =
          delinearize(rw, loc, *linear, llvm::to_vector(loops.getUpperBound()));
      Block *body = loops.getBody();
      rw.eraseOp(body->getTerminator());
      rw.inlineBlockBefore(body, guardEnd, ivs);
      rw.eraseOp(loops);
    }
    rw.eraseOp(op);
    return success();
  }
};

} // namespace
