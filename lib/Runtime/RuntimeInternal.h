//===- RuntimeInternal.h - Shared runtime internals -------------*- C++ -*-===//
#ifndef TERRA_LIB_RUNTIME_RUNTIMEINTERNAL_H
#define TERRA_LIB_RUNTIME_RUNTIMEINTERNAL_H

#include "terra/Runtime/GraphRunner.h"
#include "terra/Runtime/HostAllocator.h"

#include <utility>
#include <vector>

// The runtime core (this header's users: API, Channels, GraphRunner, the
// allocator, tensors) has no MLIR or LLVM dependency, so ahead-of-time
// compiled graphs run without them (tools/terra-run-object). What the JIT
// needs is in CompileInternal.h.

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
/// Whether the device reported no error since the last check
/// (RunState::memory.deviceError); else fails `run` with it.
bool checkDevice(RunState &run);
/// Names and addresses of the core's entry points (API.cpp: feeds, fetches,
/// control, buffers).
std::vector<std::pair<const char *, void *>> runtimeSymbols();
/// Fails the graph run executing on this thread with `message` and unwinds
/// it; outside a run, prints the message and aborts. For the library entry
/// points' argument checks: call it only from an entry point's own frame,
/// before any C++ object with a destructor exists there.
[[noreturn]] void failLibraryCall(const char *message);
} // namespace detail

} // namespace terra::rt

#endif // TERRA_LIB_RUNTIME_RUNTIMEINTERNAL_H
