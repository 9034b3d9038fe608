//===- JsonDocument.h - A parsed JSON file with value positions -*- C++ -*-===//
//
// llvm::json::Value keeps neither source positions nor the difference
// between `2` and `2.0`. The trace importer needs both: diagnostics that
// point at the offending value, and `args` numbers that keep their literal
// kind. JsonDocument parses a buffer with llvm::json and answers those
// questions by re-scanning the (already validated) text on demand, one
// container at a time, so the extra work stays linear in practice.
//
// A JsonNode is a parsed value together with where it starts in the text and
// its path in the document (`traces[0].events[3].inputs[1]`). A node's path
// refers to its parent's, so a child must not outlive the node it was
// obtained from: keep the nodes of an enclosing scope in local variables.
//
//===----------------------------------------------------------------------===//
#ifndef TERRA_LIB_TRANSLATE_JSONDOCUMENT_H
#define TERRA_LIB_TRANSLATE_JSONDOCUMENT_H

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/Location.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/JSON.h"

#include <optional>
#include <vector>

namespace llvm {
class raw_ostream;
} // namespace llvm

namespace terra::json_import {

/// One step from the document root to a value: a member key or an element
/// index. The root has no parent and no step.
struct JsonPath {
  const JsonPath *parent = nullptr;
  llvm::StringRef key;
  size_t index = 0;
  bool isIndex = false;
};

/// Prints `traces[0].events[3]`, or `(top level)` for the root.
llvm::raw_ostream &operator<<(llvm::raw_ostream &os, const JsonPath &path);
mlir::Diagnostic &operator<<(mlir::Diagnostic &diag, const JsonPath &path);

struct JsonNode {
  const llvm::json::Value *value;
  /// Byte offset of the value's first character in the buffer.
  size_t offset;
  JsonPath path;
  /// For an object member: the offset of its key; otherwise `offset`.
  size_t keyOffset;

  const llvm::json::Object *getAsObject() const { return value->getAsObject(); }
  const llvm::json::Array *getAsArray() const { return value->getAsArray(); }
};

/// "a string", "an array", ...: the kind of `value`, for diagnostics.
llvm::StringRef describeKind(const llvm::json::Value &value);

class JsonDocument {
public:
  /// Parses `text`, the contents of file `bufferName`, which must outlive
  /// the document. On a syntax error, reports it at its position and leaves
  /// the document invalid.
  JsonDocument(llvm::StringRef text, llvm::StringRef bufferName,
               mlir::MLIRContext *context);

  bool isValid() const { return parsed.has_value(); }
  /// The root value; only for a valid document.
  JsonNode root() const;

  /// The member `key` of object `object`, or nullopt if it has none.
  std::optional<JsonNode> member(const JsonNode &object,
                                 llvm::StringRef key) const;
  /// The elements of array `array`, in order.
  llvm::SmallVector<JsonNode> elements(const JsonNode &array) const;

  /// True for a number written without fraction or exponent (`-3`, not
  /// `-3.0` or `1e3`).
  bool isIntegerLiteral(const JsonNode &number) const;

  /// For diagnostics: a scalar as it is written (`2.5`, `"f8"`, `null`), a
  /// container by its kind ("an array").
  std::string describe(const JsonNode &node) const;

  /// The location of a node: file, line and column of its first character.
  mlir::Location getLoc(const JsonNode &node) const;
  mlir::Location getLoc(size_t offset) const;

  /// Emits an error at `node`, prefixed with its path: "PATH: ".
  mlir::InFlightDiagnostic emitError(const JsonNode &node) const;
  /// As above, at the key of member `node`.
  mlir::InFlightDiagnostic emitErrorAtKey(const JsonNode &node) const;

  mlir::MLIRContext *getContext() const { return context; }

private:
  size_t skipSpace(size_t pos) const;
  size_t skipString(size_t pos) const;
  size_t skipValue(size_t pos) const;
  /// The offsets of the key and the value of member `key` of the object at
  /// `pos`, or npos.
  std::pair<size_t, size_t> findMember(size_t pos, llvm::StringRef key) const;

  mlir::MLIRContext *context;
  llvm::StringRef text;
  mlir::StringAttr bufferName;
  std::optional<llvm::json::Value> parsed;
  /// Offsets at which lines start, built on first use. (SourceMgr finds a
  /// column by scanning back to the line start, which is quadratic on the
  /// one-line files json.dump writes.)
  mutable std::vector<size_t> lineStarts;
};

} // namespace terra::json_import

#endif // TERRA_LIB_TRANSLATE_JSONDOCUMENT_H
