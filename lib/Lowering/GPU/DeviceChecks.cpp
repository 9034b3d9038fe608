//===- DeviceChecks.cpp - The terra-gpu-device-checks pass ----------------===//
//
// The runtime guards inside a GPU graph's kernels (an index checked per
// element) report through the run's check flag instead of calling the
// host, and guard the ops after them (see the pass description in
// Passes.td).
//
//===----------------------------------------------------------------------===//
#include "../RuntimeDecl.h"
#include "../RuntimeNames.h"

#include "terra/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/GPU/Transforms/ParallelLoopMapper.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/SymbolTable.h"

namespace terra {
#define GEN_PASS_DEF_TERRAGPUDEVICECHECKS
#include "terra/Passes.h.inc"
} // namespace terra

using namespace mlir;

namespace {

/// The kernel `op` is in: a gpu.launch, or a block-mapped scf.parallel
/// (terra-linalg-to-gpu{kernels=false}); null in host code.
Operation *enclosingKernel(Operation *op) {
  for (Operation *p = op->getParentOp(); p; p = p->getParentOp()) {
    if (isa<gpu::LaunchOp>(p))
      return p;
    if (auto loop = dyn_cast<scf::ParallelOp>(p);
        loop && loop->hasAttr(gpu::getMappingAttrName()))
      return p;
    if (isa<func::FuncOp>(p))
      return nullptr;
  }
  return nullptr;
}

/// What a guard `call` replaces: the `scf.if` that calls it only when the
/// check fails (terra-lower-graph inside a linalg body), else the call.
Operation *guardAnchor(func::CallOp call) {
  auto ifOp = dyn_cast<scf::IfOp>(call->getParentOp());
  if (ifOp && ifOp.getNumResults() == 0 && ifOp.getElseRegion().empty() &&
      &ifOp.thenBlock()->front() == call.getOperation() &&
      call->getNextNode() == ifOp.thenBlock()->getTerminator())
    return ifOp;
  return call;
}

struct TerraGPUDeviceChecksPass
    : public terra::impl::TerraGPUDeviceChecksBase<TerraGPUDeviceChecksPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    SymbolTable symbols(module);
    func::FuncOp flagFn;
    for (auto func : module.getOps<func::FuncOp>()) {
      SmallVector<func::CallOp> guards;
      func.walk([&](func::CallOp call) {
        if (call.getCallee() == terra::kRuntimeCheck && enclosingKernel(call))
          guards.push_back(call);
      });
      if (guards.empty())
        continue;
      if (!flagFn)
        flagFn = declareFlag(module, symbols);
      OpBuilder b(&func.getBody().front(), func.getBody().front().begin());
      Value flag = func::CallOp::create(b, func.getLoc(), flagFn, ValueRange{})
                       .getResult(0);
      for (func::CallOp call : guards)
        if (failed(rewrite(call, flag)))
          return signalPassFailure();
    }
  }

  /// `func.func private @terra_rt_check_flag() -> memref<1xi32>`.
  func::FuncOp declareFlag(ModuleOp module, SymbolTable &symbols) {
    Builder b(module.getContext());
    auto type = MemRefType::get({1}, b.getI32Type());
    return terra::declareFunction(module, &symbols, terra::kRuntimeCheckFlag,
                                  b.getFunctionType({}, type), true);
  }

  /// Replaces guard `call` (in a kernel) by a store of its message index
  /// + 1 into `flag` when it fails, and runs the rest of its block only
  /// when it holds.
  LogicalResult rewrite(func::CallOp call, Value flag) {
    Location loc = call.getLoc();
    Value ok = call.getOperand(0);
    Value message = call.getOperand(1);
    Operation *anchor = guardAnchor(call);
    OpBuilder b(anchor);
    Value failed;
    if (auto ifOp = dyn_cast<scf::IfOp>(anchor))
      failed = ifOp.getCondition();
    else
      failed = arith::XOrIOp::create(
          b, loc, ok, arith::ConstantOp::create(b, loc, b.getBoolAttr(true)));
    scf::IfOp::create(b, loc, failed, [&](OpBuilder &nb, Location l) {
      Value code = arith::AddIOp::create(
          nb, l,
          arith::TruncIOp::create(nb, l, nb.getI32Type(), message).getResult(),
          arith::ConstantOp::create(nb, l, nb.getI32IntegerAttr(1)));
      memref::StoreOp::create(
          nb, l, code, flag,
          arith::ConstantIndexOp::create(nb, l, 0).getResult());
      scf::YieldOp::create(nb, l);
    });
    Block *block = anchor->getBlock();
    Operation *terminator = block->getTerminator();
    Operation *first = anchor->getNextNode();
    anchor->erase();
    ++numChecks;
    if (first == terminator)
      return success();

    // The rest of the block, up to its terminator, runs only when `ok`.
    SmallVector<Operation *> rest;
    llvm::SmallPtrSet<Operation *, 16> inRest;
    for (Operation *op = first; op != terminator; op = op->getNextNode()) {
      rest.push_back(op);
      inRest.insert(op);
    }
    for (Operation *op : rest) {
      WalkResult barrier =
          op->walk([](gpu::BarrierOp) { return WalkResult::interrupt(); });
      if (barrier.wasInterrupted())
        return emitError(loc, "a runtime check inside a kernel is followed "
                              "by a gpu.barrier: threads whose check fails "
                              "cannot skip it");
    }
    SmallVector<Value> yielded(terminator->getOperands());
    b.setInsertionPoint(terminator);
    auto guarded = scf::IfOp::create(b, loc, TypeRange(ValueRange(yielded)), ok,
                                     /*withElseRegion=*/!yielded.empty());
    Block *thenBlock = guarded.thenBlock();
    if (yielded.empty()) // the builder gave it its scf.yield
      thenBlock->back().erase();
    for (Operation *op : rest)
      op->moveBefore(thenBlock, thenBlock->end());
    OpBuilder tb = OpBuilder::atBlockEnd(thenBlock);
    scf::YieldOp::create(tb, loc, yielded);
    if (yielded.empty())
      return success();
    // A failed check's values are never used (the run fails): zeros.
    OpBuilder eb = OpBuilder::atBlockEnd(guarded.elseBlock());
    SmallVector<Value> instead;
    for (Value v : yielded) {
      if (!inRest.contains(v.getDefiningOp())) {
        instead.push_back(v);
        continue;
      }
      Type t = v.getType();
      if (!t.isIntOrIndexOrFloat() && !isa<VectorType>(t))
        return emitError(loc, "a runtime check inside a kernel guards a "
                              "value of type ")
               << t << " the block yields";
      instead.push_back(
          arith::ConstantOp::create(eb, loc, cast<TypedAttr>(eb.getZeroAttr(t)))
              .getResult());
    }
    scf::YieldOp::create(eb, loc, instead);
    for (auto [i, v] : llvm::enumerate(guarded.getResults()))
      terminator->setOperand(i, v);
    return success();
  }
};

} // namespace
