//===- RuntimeDecl.h - Declarations of external functions --------*- C++
//-*-===//
//
// The passes that call the graph runtime or a library (terra-lower-graph,
// terra-library-calls, terra-library-convolutions, terra-commit-in-place,
// terra-gpu-host-kernels, terra-gpu-device-checks) declare each external
// function once, at the top of the module, the same way.
//
//===----------------------------------------------------------------------===//
#ifndef TERRA_LIB_LOWERING_RUNTIMEDECL_H
#define TERRA_LIB_LOWERING_RUNTIMEDECL_H

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/SymbolTable.h"

namespace terra {

/// The module's function `name`, or a private declaration of it with `type`
/// made at the module's start; with `cInterface`, called through its C
/// interface (`llvm.emit_c_interface`: memref arguments as descriptors).
/// `symbols`, when given, is the module's symbol table, kept up to date (a
/// module of thousands of symbols is looked up many times).
mlir::func::FuncOp declareFunction(mlir::ModuleOp module,
                                   mlir::SymbolTable *symbols,
                                   llvm::StringRef name,
                                   mlir::FunctionType type, bool cInterface);

} // namespace terra

#endif // TERRA_LIB_LOWERING_RUNTIMEDECL_H
