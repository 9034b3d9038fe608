//===- CompileInternal.h - Internals of the graph JIT -----------*- C++ -*-===//
//
// What CompiledGraph (the JIT) shares with ParallelCompile and the library
// entry points. Unlike RuntimeInternal.h, these depend on LLVM.
//
//===----------------------------------------------------------------------===//
#ifndef TERRA_LIB_RUNTIME_COMPILEINTERNAL_H
#define TERRA_LIB_RUNTIME_COMPILEINTERNAL_H

#include "RuntimeInternal.h"

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <functional>
#include <memory>
#include <utility>
#include <vector>

namespace llvm {
class MemoryBuffer;
class Module;
namespace orc {
class JITTargetMachineBuilder;
} // namespace orc
} // namespace llvm

namespace terra::rt::detail {
/// Adds the GEMM/convolution entry points of Library.cpp and
/// LibraryConv.cpp to `syms`.
void appendLibrarySymbols(std::vector<std::pair<const char *, void *>> &syms);
/// Optimizes and compiles a graph's LLVM module into object files on up to
/// `threads` threads (ParallelCompile.cpp): the loop functions spread over
/// partitions optimized at O2 and compiled at O3, the entry function
/// `entry` and its glue in one optimized at O1 and compiled at O0. Defines the
/// packed entry point `_mlir_<entry>(void **)`. `beforeOptimizing` runs on
/// every partition first (TSan instrumentation).
llvm::Expected<std::vector<std::unique_ptr<llvm::MemoryBuffer>>>
compileModuleInParallel(
    std::unique_ptr<llvm::Module> module, llvm::StringRef entry,
    unsigned threads, const llvm::orc::JITTargetMachineBuilder &tmBuilder,
    const std::function<void(llvm::Module &)> &beforeOptimizing);
} // namespace terra::rt::detail

#endif // TERRA_LIB_RUNTIME_COMPILEINTERNAL_H
