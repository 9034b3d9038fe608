//===- HostScratch.cpp - The terra-gpu-host-scratch pass ------------------===//
//
// Host-only scratch buffers of a GPU graph (the dealloc helper's arrays)
// move to the stack, since the run's allocator hands out device memory
// (see the pass description in Passes.td).
//
//===----------------------------------------------------------------------===//
#include "HostMemory.h"

#include "terra/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"

namespace terra {
#define GEN_PASS_DEF_TERRAGPUHOSTSCRATCH
#include "terra/Passes.h.inc"
} // namespace terra

using namespace mlir;

bool terra::gpu::onlyHostScratchUses(Value v,
                                     SmallVectorImpl<Operation *> &deallocs) {
  for (OpOperand &use : v.getUses()) {
    Operation *user = use.getOwner();
    if (isa<memref::LoadOp>(user))
      continue;
    if (auto store = dyn_cast<memref::StoreOp>(user)) {
      if (store.getMemRef() != v)
        return false; // the buffer itself stored somewhere
      continue;
    }
    if (isa<memref::ExtractAlignedPointerAsIndexOp>(user))
      continue; // the dealloc helper's alias check of its address
    if (auto reshape = dyn_cast<memref::ReshapeOp>(user);
        reshape && reshape.getShape() == v)
      continue; // its shape: read by the host to build the descriptor
    if (isa<memref::DeallocOp>(user)) {
      deallocs.push_back(user);
      continue;
    }
    if (auto cast = dyn_cast<memref::CastOp>(user)) {
      if (!onlyHostScratchUses(cast.getResult(), deallocs))
        return false;
      continue;
    }
    if (auto call = dyn_cast<func::CallOp>(user)) {
      auto callee = SymbolTable::lookupNearestSymbolFrom<func::FuncOp>(
          call, call.getCalleeAttr());
      // A generated helper with a body (not a runtime entry point).
      if (callee && !callee.isExternal())
        continue;
    }
    return false;
  }
  return true;
}

/// Whether `v` or a cast of it is read by host code as a whole: passed to
/// a call, or the shape of a memref.reshape.
static bool readByHostCode(Value v) {
  return llvm::any_of(v.getUses(), [](OpOperand &use) {
    Operation *user = use.getOwner();
    if (auto cast = dyn_cast<memref::CastOp>(user))
      return readByHostCode(cast.getResult());
    if (auto reshape = dyn_cast<memref::ReshapeOp>(user))
      return reshape.getShape() == use.get();
    return isa<func::CallOp>(user);
  });
}

bool terra::gpu::isHostScratch(memref::AllocOp alloc) {
  SmallVector<Operation *> deallocs;
  return onlyHostScratchUses(alloc.getResult(), deallocs) &&
         readByHostCode(alloc.getResult());
}

namespace {

struct TerraGPUHostScratchPass
    : public terra::impl::TerraGPUHostScratchBase<TerraGPUHostScratchPass> {
  void runOnOperation() override {
    bool failed = false;
    for (auto func : getOperation().getOps<func::FuncOp>()) {
      if (func.isExternal())
        continue;
      SmallVector<memref::AllocOp> allocs;
      func.walk([&](memref::AllocOp a) { allocs.push_back(a); });
      Block &entry = func.getBody().front();
      for (memref::AllocOp alloc : allocs) {
        SmallVector<Operation *> deallocs;
        if (!terra::gpu::onlyHostScratchUses(alloc.getResult(), deallocs))
          continue;
        if (!alloc.getType().hasStaticShape()) {
          alloc.emitError("a host-only buffer of dynamic size in a GPU "
                          "graph: the host would write into device memory");
          failed = true;
          continue;
        }
        OpBuilder b(&entry, entry.begin());
        auto alloca =
            memref::AllocaOp::create(b, alloc.getLoc(), alloc.getType(),
                                     ValueRange{}, alloc.getAlignmentAttr());
        for (Operation *d : deallocs)
          d->erase();
        alloc.replaceAllUsesWith(alloca.getResult());
        alloc.erase();
        ++numScratch;
      }
    }
    if (failed)
      signalPassFailure();
  }
};

} // namespace
