//===- ImportTrace.h - JSON trace files to terra.trace ops ------*- C++ -*-===//
//
// The importer behind `terra-translate --import-trace`. A trace file
// (docs/trace-format.md) holds the iterations a tracer recorded; each
// becomes one `terra.trace` op of the returned module.
//
//===----------------------------------------------------------------------===//
#ifndef TERRA_TRANSLATE_IMPORTTRACE_H
#define TERRA_TRANSLATE_IMPORTTRACE_H

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"

namespace llvm {
class SourceMgr;
} // namespace llvm

namespace terra {

/// Imports the trace file held in the main buffer of `sourceMgr`. Errors are
/// emitted through `context` at their position in the file, prefixed with
/// their JSON path; on any error (including a module that does not verify)
/// the result is null. Loads the terra dialect.
mlir::OwningOpRef<mlir::ModuleOp> importTraceFile(llvm::SourceMgr &sourceMgr,
                                                  mlir::MLIRContext *context);

/// As above, for a trace file held in a string; `bufferName` is the file
/// name diagnostics and locations use.
mlir::OwningOpRef<mlir::ModuleOp> importTraceFile(llvm::StringRef json,
                                                  llvm::StringRef bufferName,
                                                  mlir::MLIRContext *context);

} // namespace terra

#endif // TERRA_TRANSLATE_IMPORTTRACE_H
