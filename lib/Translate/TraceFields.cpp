//===- TraceFields.cpp - JSON trace fields to MLIR types and attrs --------===//
#include "TraceFields.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/StringSwitch.h"

#include <cmath>
#include <limits>

using namespace mlir;
using namespace terra::json_import;
namespace json = llvm::json;

/// The keys of `object`, sorted, so that diagnostics do not depend on the
/// hash order of llvm::json::Object.
static SmallVector<StringRef> sortedKeys(const json::Object &object) {
  SmallVector<StringRef> keys;
  for (const auto &member : object)
    keys.push_back(member.first);
  llvm::sort(keys);
  return keys;
}

LogicalResult terra::json_import::checkKnownFields(const JsonDocument &doc,
                                                   const JsonNode &object,
                                                   ArrayRef<StringRef> allowed,
                                                   StringRef what) {
  for (StringRef key : sortedKeys(*object.getAsObject())) {
    if (llvm::is_contained(allowed, key))
      continue;
    InFlightDiagnostic diag = doc.emitErrorAtKey(*doc.member(object, key));
    diag << "unknown field '" << key << "' in " << what
         << "; expected one of: ";
    llvm::interleaveComma(allowed, diag);
    return diag;
  }
  return success();
}

FailureOr<JsonNode> terra::json_import::requireField(const JsonDocument &doc,
                                                     const JsonNode &object,
                                                     StringRef key,
                                                     StringRef what) {
  if (std::optional<JsonNode> node = doc.member(object, key))
    return *node;
  return doc.emitError(object) << what << " needs field '" << key << "'";
}

FailureOr<int64_t> terra::json_import::importIndex(const JsonDocument &doc,
                                                   const JsonNode &node,
                                                   StringRef what) {
  std::optional<int64_t> value = node.value->getAsInteger();
  if (!doc.isIntegerLiteral(node) || !value || *value < 0)
    return doc.emitError(node)
           << "expected " << what << ", a non-negative integer, got "
           << doc.describe(node);
  return *value;
}

//===----------------------------------------------------------------------===//
// Tensor types
//===----------------------------------------------------------------------===//

static Type parseDtype(MLIRContext *ctx, StringRef name) {
  Builder b(ctx);
  return llvm::StringSwitch<Type>(name)
      .Case("f32", b.getF32Type())
      .Case("f64", b.getF64Type())
      .Case("f16", b.getF16Type())
      .Case("bf16", b.getBF16Type())
      .Case("i64", b.getI64Type())
      .Case("i32", b.getI32Type())
      .Case("i8", b.getI8Type())
      .Case("ui8", IntegerType::get(ctx, 8, IntegerType::Unsigned))
      .Cases({"i1", "bool"}, b.getI1Type())
      .Default(Type());
}

FailureOr<RankedTensorType>
terra::json_import::importTensorType(const JsonDocument &doc,
                                     const JsonNode &object, StringRef what) {
  FailureOr<JsonNode> dtype = requireField(doc, object, "dtype", what);
  if (failed(dtype))
    return failure();
  std::optional<StringRef> dtypeName = dtype->value->getAsString();
  if (!dtypeName)
    return doc.emitError(*dtype)
           << "expected a dtype string, got " << doc.describe(*dtype);
  Type elementType = parseDtype(doc.getContext(), *dtypeName);
  if (!elementType)
    return doc.emitError(*dtype)
           << "unknown dtype '" << *dtypeName
           << "'; expected one of f32, f64, f16, bf16, i64, i32, i8, ui8, "
              "i1, bool";

  FailureOr<JsonNode> shape = requireField(doc, object, "shape", what);
  if (failed(shape))
    return failure();
  if (!shape->getAsArray())
    return doc.emitError(*shape)
           << "expected an array of dimensions, got " << doc.describe(*shape);
  SmallVector<int64_t> dims;
  for (const JsonNode &dim : doc.elements(*shape)) {
    if (dim.value->getAsNull()) {
      dims.push_back(ShapedType::kDynamic);
      continue;
    }
    std::optional<int64_t> size = dim.value->getAsInteger();
    if (!doc.isIntegerLiteral(dim) || !size || *size < -1)
      return doc.emitError(dim)
             << "expected a dimension: a non-negative integer, or -1 or "
                "null for a dynamic one, got "
             << doc.describe(dim);
    dims.push_back(*size == -1 ? ShapedType::kDynamic : *size);
  }
  return RankedTensorType::get(dims, elementType);
}

//===----------------------------------------------------------------------===//
// Args
//===----------------------------------------------------------------------===//

static FailureOr<Attribute> importArg(const JsonDocument &doc,
                                      const JsonNode &node);

static FailureOr<DictionaryAttr> importDict(const JsonDocument &doc,
                                            const JsonNode &object) {
  SmallVector<NamedAttribute> attrs;
  for (StringRef key : sortedKeys(*object.getAsObject())) {
    JsonNode member = *doc.member(object, key);
    if (key.empty())
      return doc.emitError(member) << "argument names must not be empty";
    FailureOr<Attribute> attr = importArg(doc, member);
    if (failed(attr))
      return failure();
    attrs.push_back(
        NamedAttribute(StringAttr::get(doc.getContext(), key), *attr));
  }
  return DictionaryAttr::get(doc.getContext(), attrs);
}

static FailureOr<Attribute> importArg(const JsonDocument &doc,
                                      const JsonNode &node) {
  Builder b(doc.getContext());
  const json::Value &value = *node.value;
  switch (value.kind()) {
  case json::Value::Null:
    return Attribute(b.getUnitAttr());
  case json::Value::Boolean:
    return Attribute(b.getBoolAttr(*value.getAsBoolean()));
  case json::Value::Number:
    if (!doc.isIntegerLiteral(node)) {
      double number = *value.getAsNumber();
      if (!std::isfinite(number))
        return doc.emitError(node) << "number " << doc.describe(node)
                                   << " is out of the range of f64";
      return Attribute(b.getF64FloatAttr(number));
    }
    if (std::optional<int64_t> i = value.getAsInteger())
      return Attribute(b.getI64IntegerAttr(*i));
    return doc.emitError(node)
           << "integer " << doc.describe(node) << " does not fit in 64 bits";
  case json::Value::String:
    return Attribute(b.getStringAttr(*value.getAsString()));
  case json::Value::Array: {
    SmallVector<Attribute> elements;
    for (const JsonNode &element : doc.elements(node)) {
      FailureOr<Attribute> attr = importArg(doc, element);
      if (failed(attr))
        return failure();
      elements.push_back(*attr);
    }
    return Attribute(b.getArrayAttr(elements));
  }
  case json::Value::Object: {
    FailureOr<DictionaryAttr> dict = importDict(doc, node);
    if (failed(dict))
      return failure();
    return Attribute(*dict);
  }
  }
  llvm_unreachable("unknown JSON kind");
}

FailureOr<DictionaryAttr>
terra::json_import::importArgs(const JsonDocument &doc, const JsonNode &args) {
  if (!args.getAsObject())
    return doc.emitError(args)
           << "expected an object, got " << doc.describe(args);
  FailureOr<DictionaryAttr> dict = importDict(doc, args);
  if (failed(dict))
    return failure();
  // No args and empty args are the same op key: keep a single form.
  return dict->empty() ? DictionaryAttr() : *dict;
}

//===----------------------------------------------------------------------===//
// Sites
//===----------------------------------------------------------------------===//

/// Reads a line or bytecode offset: a non-negative integer that fits a
/// location column (or, for a line, null).
static FailureOr<unsigned> importPosition(const JsonDocument &doc,
                                          const JsonNode &node, StringRef what,
                                          bool nullable) {
  if (nullable && node.value->getAsNull())
    return 0u;
  std::optional<int64_t> value = node.value->getAsInteger();
  if (!doc.isIntegerLiteral(node) || !value || *value < 0 ||
      *value > std::numeric_limits<unsigned>::max())
    return doc.emitError(node)
           << "expected " << what << ", a non-negative 32-bit integer"
           << (nullable ? " or null" : "") << ", got " << doc.describe(node);
  return unsigned(*value);
}

static FailureOr<Location> importFrame(const JsonDocument &doc,
                                       const JsonNode &frame) {
  const json::Array *fields = frame.getAsArray();
  if (!fields || fields->size() != 4)
    return doc.emitError(frame)
           << "expected a frame [file, function, line, bytecode offset], "
              "got "
           << (fields ? std::to_string(fields->size()) + " elements"
                      : doc.describe(frame));
  SmallVector<JsonNode> parts = doc.elements(frame);
  std::optional<StringRef> file = parts[0].value->getAsString();
  if (!file)
    return doc.emitError(parts[0]) << "expected the file name, a string, got "
                                   << doc.describe(parts[0]);
  std::optional<StringRef> function = parts[1].value->getAsString();
  if (!function)
    return doc.emitError(parts[1])
           << "expected the function name, a string, got "
           << doc.describe(parts[1]);
  FailureOr<unsigned> line = importPosition(doc, parts[2], "a line", true);
  if (failed(line))
    return failure();
  FailureOr<unsigned> offset =
      importPosition(doc, parts[3], "a bytecode offset", false);
  if (failed(offset))
    return failure();

  MLIRContext *ctx = doc.getContext();
  Location loc = FileLineColLoc::get(ctx, *file, *line, *offset);
  if (!function->empty())
    loc = NameLoc::get(StringAttr::get(ctx, *function), loc);
  return loc;
}

FailureOr<Location> terra::json_import::importSite(const JsonDocument &doc,
                                                   const JsonNode &site) {
  const json::Array *frames = site.getAsArray();
  if (!frames || frames->empty())
    return doc.emitError(site)
           << "expected a non-empty array of frames, outermost first, got "
           << (frames ? "an empty array" : doc.describe(site));
  std::optional<Location> loc;
  for (const JsonNode &frame : doc.elements(site)) {
    FailureOr<Location> frameLoc = importFrame(doc, frame);
    if (failed(frameLoc))
      return failure();
    // The innermost frame is the callee of everything outside it.
    loc = loc ? Location(CallSiteLoc::get(*frameLoc, *loc)) : *frameLoc;
  }
  return *loc;
}
