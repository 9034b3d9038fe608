//===- RuntimeInternal.h - Shared runtime internals -------------*- C++ -*-===//
#ifndef TERRA_LIB_RUNTIME_RUNTIMEINTERNAL_H
#define TERRA_LIB_RUNTIME_RUNTIMEINTERNAL_H

#include "terra/Runtime/GraphRunner.h"
#include "terra/Runtime/HostAllocator.h"

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

namespace terra::rt {

/// MLIR's C interface for an unranked memref.
struct UnrankedMemRef {
  int64_t rank;
  void *descriptor;
};

namespace detail {
/// The run executing on this thread (null elsewhere).
RunState *&currentRun();
/// With RunState::verifyFetches: fails the run if a buffer published by a
/// zero-copy fetch changed since it was published. Checks the fetches of
/// `buffer`, or with null those of every buffer the graph still holds.
void verifyPublished(RunState &run, void *buffer);
/// Names and addresses of every entry point compiled graphs call.
std::vector<std::pair<llvm::StringRef, void *>> runtimeSymbols();
/// Adds the GEMM/convolution entry points of Library.cpp and
/// LibraryConv.cpp to `syms`.
void appendLibrarySymbols(std::vector<std::pair<llvm::StringRef, void *>> &syms);
/// Fails the graph run executing on this thread with `message` and unwinds
/// it; outside a run, prints the message and aborts. For the library entry
/// points' argument checks: call it only from an entry point's own frame,
/// before any C++ object with a destructor exists there.
[[noreturn]] void failLibraryCall(const char *message);
/// Optimizes and compiles a graph's LLVM module into object files on up to
/// `threads` threads (ParallelCompile.cpp): the loop functions spread over
/// partitions optimized at O2 and compiled at O3, the entry function
/// `entry` and its glue in one optimized at O1 and compiled at O0. Defines the packed
/// entry point `_mlir_<entry>(void **)`. `beforeOptimizing` runs on every
/// partition first (TSan instrumentation).
llvm::Expected<std::vector<std::unique_ptr<llvm::MemoryBuffer>>>
compileModuleInParallel(
    std::unique_ptr<llvm::Module> module, llvm::StringRef entry,
    unsigned threads, const llvm::orc::JITTargetMachineBuilder &tmBuilder,
    const std::function<void(llvm::Module &)> &beforeOptimizing);
} // namespace detail

} // namespace terra::rt

#endif // TERRA_LIB_RUNTIME_RUNTIMEINTERNAL_H
