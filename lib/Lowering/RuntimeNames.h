//===- RuntimeNames.h - Names of the graph runtime's entry points -*- C++
//-*-===//
//
// Shared by the passes that call the runtime (lib/Runtime/API.cpp):
// terra-lower-graph and terra-gpu-host-kernels.
//
//===----------------------------------------------------------------------===//
#ifndef TERRA_LIB_LOWERING_RUNTIMENAMES_H
#define TERRA_LIB_LOWERING_RUNTIMENAMES_H

#include "mlir/IR/Types.h"
#include "llvm/Support/raw_ostream.h"

#include <string>

namespace terra {

/// The dtype suffix of runtime entry points: f32, f64, i64, i1, ...
inline std::string runtimeDTypeSuffix(mlir::Type t) {
  std::string s;
  llvm::raw_string_ostream os(s);
  t.print(os);
  return s;
}

} // namespace terra

#endif // TERRA_LIB_LOWERING_RUNTIMENAMES_H
