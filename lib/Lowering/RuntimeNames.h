//===- RuntimeNames.h - Names of the graph runtime's entry points -*- C++
//-*-===//
//
// Shared by the passes that call the runtime (lib/Runtime/API.cpp):
// terra-lower-graph, terra-hoist-above-receives, terra-library-calls,
// terra-protect-fetches,
// terra-gpu-host-kernels and terra-gpu-device-checks.
//
//===----------------------------------------------------------------------===//
#ifndef TERRA_LIB_LOWERING_RUNTIMENAMES_H
#define TERRA_LIB_LOWERING_RUNTIMENAMES_H

#include "mlir/IR/Types.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/raw_ostream.h"

#include <string>

namespace terra {

/// Entry points the graph calls (terra-lower-graph), by name prefix: the
/// tensor ones end in `_<dtype>` (`_contiguous_<dtype>` for row-major
/// inputs); terra-hoist-above-receives, terra-protect-fetches and
/// terra-gpu-host-kernels recognize them by these prefixes.
inline constexpr llvm::StringLiteral kRuntimeFeed = "terra_rt_feed";
inline constexpr llvm::StringLiteral kRuntimeFetch = "terra_rt_fetch";
inline constexpr llvm::StringLiteral kRuntimeState = "terra_rt_state";
inline constexpr llvm::StringLiteral kRuntimeFetchState =
    "terra_rt_fetch_state";
inline constexpr llvm::StringLiteral kRuntimeCommitReady =
    "terra_rt_commit_ready";
inline constexpr llvm::StringLiteral kRuntimeCase = "terra_rt_case";
inline constexpr llvm::StringLiteral kRuntimeLoop = "terra_rt_loop";
inline constexpr llvm::StringLiteral kRuntimeHostArg = "terra_rt_host_arg";
inline constexpr llvm::StringLiteral kRuntimeHostCall = "terra_rt_host_call";
inline constexpr llvm::StringLiteral kRuntimeHostResult =
    "terra_rt_host_result";
/// A host copy of a graph buffer (terra-gpu-host-kernels), `<prefix><dtype>`.
inline constexpr llvm::StringLiteral kRuntimeToHost = "terra_rt_to_host_";
/// A runtime guard: `terra_rt_check(i1 ok, i64 message)` ends the run with
/// message `message` of the module's `terra.asserts` when `ok` is false.
inline constexpr llvm::StringLiteral kRuntimeCheck = "terra_rt_check";
/// The run's check flag (`memref<1xi32>`, C interface) the guards inside
/// GPU kernels write (terra-gpu-device-checks).
inline constexpr llvm::StringLiteral kRuntimeCheckFlag = "terra_rt_check_flag";

/// The dtype suffix of runtime entry points: f32, f64, i64, i1, ...
inline std::string runtimeDTypeSuffix(mlir::Type t) {
  std::string s;
  llvm::raw_string_ostream os(s);
  t.print(os);
  return s;
}

} // namespace terra

#endif // TERRA_LIB_LOWERING_RUNTIMENAMES_H
