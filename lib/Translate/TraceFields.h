//===- TraceFields.h - JSON trace fields to MLIR types and attrs -*- C++
//-*-===//
//
// Conversions of the leaf fields of a JSON trace (docs/trace-format.md):
// tensor types (`dtype` + `shape`), op `args` and `site` stacks. Each reports
// its errors at the offending JSON value and returns failure.
//
//===----------------------------------------------------------------------===//
#ifndef TERRA_LIB_TRANSLATE_TRACEFIELDS_H
#define TERRA_LIB_TRANSLATE_TRACEFIELDS_H

#include "JsonDocument.h"

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinTypes.h"

namespace terra::json_import {

/// Reads the `dtype` and `shape` members of `object` as a ranked tensor
/// type; `what` names the object in diagnostics ("a state event").
mlir::FailureOr<mlir::RankedTensorType>
importTensorType(const JsonDocument &doc, const JsonNode &object,
                 llvm::StringRef what);

/// Converts an `args` object to a dictionary; an empty object gives null.
mlir::FailureOr<mlir::DictionaryAttr> importArgs(const JsonDocument &doc,
                                                 const JsonNode &args);

/// Converts a `site` (frames, outermost first) to a chain of call sites.
mlir::FailureOr<mlir::Location> importSite(const JsonDocument &doc,
                                           const JsonNode &site);

/// Checks that `object` has no members but `allowed`; `what` names the
/// object in the diagnostic ("an op event").
mlir::LogicalResult checkKnownFields(const JsonDocument &doc,
                                     const JsonNode &object,
                                     llvm::ArrayRef<llvm::StringRef> allowed,
                                     llvm::StringRef what);

/// The member `key` of `object`, or an error "missing field".
mlir::FailureOr<JsonNode> requireField(const JsonDocument &doc,
                                       const JsonNode &object,
                                       llvm::StringRef key,
                                       llvm::StringRef what);

/// Reads a non-negative integer (written without fraction or exponent).
mlir::FailureOr<int64_t> importIndex(const JsonDocument &doc,
                                     const JsonNode &node,
                                     llvm::StringRef what);

} // namespace terra::json_import

#endif // TERRA_LIB_TRANSLATE_TRACEFIELDS_H
