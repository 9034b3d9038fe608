//===- HostMemory.h - Host-owned buffers of a GPU graph ---------*- C++ -*-===//
//
// Shared by the GPU passes: host scratch arrays and the buffer a view is of.
//
//===----------------------------------------------------------------------===//
#ifndef TERRA_LIB_LOWERING_GPU_HOSTMEMORY_H
#define TERRA_LIB_LOWERING_GPU_HOSTMEMORY_H

#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Interfaces/ViewLikeInterface.h"

namespace terra::gpu {

/// Whether every use of `v` is host code reading or writing it as a plain
/// array: loads, stores into it, casts of it (followed), its deallocs,
/// calls to functions of the module, the shape operand of a
/// memref.reshape, and reading its address. `deallocs` gets the deallocs.
bool onlyHostScratchUses(mlir::Value v,
                         llvm::SmallVectorImpl<mlir::Operation *> &deallocs);

/// Whether `alloc` is a host scratch array: only host-scratch uses (above),
/// one of them host code reading it whole (a call to the dealloc helper,
/// a dynamic reshape's shape). terra-gpu-host-scratch moves these to the
/// stack.
bool isHostScratch(mlir::memref::AllocOp alloc);

/// The buffer memref `v` is a view of (through view-like ops and casts).
inline mlir::Value bufferOf(mlir::Value v) {
  while (mlir::Operation *def = v.getDefiningOp()) {
    auto view = llvm::dyn_cast<mlir::ViewLikeOpInterface>(def);
    if (!view)
      break;
    v = view.getViewSource();
  }
  return v;
}

} // namespace terra::gpu

#endif // TERRA_LIB_LOWERING_GPU_HOSTMEMORY_H
