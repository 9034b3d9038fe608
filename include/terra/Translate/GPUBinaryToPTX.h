//===- GPUBinaryToPTX.h - Extract the PTX of gpu.binary ops -----*- C++ -*-===//
#ifndef TERRA_TRANSLATE_GPUBINARYTOPTX_H
#define TERRA_TRANSLATE_GPUBINARYTOPTX_H

#include "mlir/IR/Operation.h"
#include "mlir/Support/LLVM.h"
#include "llvm/Support/raw_ostream.h"

namespace terra {
/// Prints the PTX text of every gpu.object (format=isa) of every gpu.binary
/// under `op`; with `outputDir`, writes each to `<outputDir>/<symbol>.ptx`
/// and prints the paths instead. Fails, with a diagnostic at the op, on an
/// object in binary form or when there is none.
mlir::LogicalResult printGPUBinaryPTX(mlir::Operation *op,
                                      llvm::raw_ostream &os,
                                      llvm::StringRef outputDir = "");
} // namespace terra

#endif // TERRA_TRANSLATE_GPUBINARYTOPTX_H
