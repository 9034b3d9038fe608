//===- ImportTrace.cpp - JSON trace files to terra.trace ops --------------===//
//
// Walks the trace file of docs/trace-format.md and builds one `terra.trace`
// per recorded iteration. Leaf fields (tensor types, args, sites) are
// converted in TraceFields.cpp. Every op is verified as soon as it is built,
// so a verifier error carries a note naming the event it came from.
//
//===----------------------------------------------------------------------===//
#include "terra/Translate/ImportTrace.h"

#include "JsonDocument.h"
#include "TraceFields.h"

#include "terra/Dialect/TerraOps.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/Verifier.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/Support/SourceMgr.h"

using namespace mlir;
using namespace terra;
using namespace terra::json_import;
namespace json = llvm::json;

namespace {

enum class EventKind { Op, Feed, State, Fetch, LoopBegin, LoopIter, LoopEnd };

/// What distinguishes the kinds of event: the member naming the kind, the
/// members the event may have, and whether it must give its site (the site
/// is part of the identity of ops, feeds and loops).
struct EventSpec {
  EventKind kind;
  StringRef field;
  StringRef description;
  bool needsSite;
  ArrayRef<StringRef> fields;
};

const StringRef kOpFields[] = {"id", "op", "inputs", "args", "results", "site"};
const StringRef kFeedFields[] = {"id", "feed", "site"};
const StringRef kStateFields[] = {"id", "state", "dtype", "shape", "site"};
const StringRef kFetchFields[] = {"id", "fetch", "site"};
const StringRef kLoopBeginFields[] = {"id", "loop_begin", "site"};
const StringRef kLoopIterFields[] = {"id", "loop_iter", "site"};
const StringRef kLoopEndFields[] = {"id", "loop_end", "site"};
const StringRef kTensorTypeFields[] = {"dtype", "shape"};

const EventSpec kEventSpecs[] = {
    {EventKind::Op, "op", "an op event", true, kOpFields},
    {EventKind::Feed, "feed", "a feed event", true, kFeedFields},
    {EventKind::State, "state", "a state event", false, kStateFields},
    {EventKind::Fetch, "fetch", "a fetch event", false, kFetchFields},
    {EventKind::LoopBegin, "loop_begin", "a loop_begin event", true,
     kLoopBeginFields},
    {EventKind::LoopIter, "loop_iter", "a loop_iter event", false,
     kLoopIterFields},
    {EventKind::LoopEnd, "loop_end", "a loop_end event", false, kLoopEndFields},
};

/// The events of the trace being imported, as far as they have been read.
struct TraceScope {
  size_t numEvents;
  SmallVector<std::pair<const EventSpec *, Operation *>> events;
  /// The latest state event of each name.
  llvm::StringMap<Value> states;
};

class TraceImporter {
public:
  explicit TraceImporter(const JsonDocument &doc)
      : doc(doc), builder(doc.getContext()) {}

  OwningOpRef<ModuleOp> importModule();

private:
  LogicalResult importTrace(const JsonNode &trace, size_t index,
                            llvm::StringMap<size_t> &names);
  LogicalResult importEvent(const JsonNode &event, TraceScope &scope);
  FailureOr<Operation *> buildEvent(const EventSpec &spec,
                                    const JsonNode &event, Location loc,
                                    TraceScope &scope);
  FailureOr<Operation *> buildOp(const JsonNode &event, Location loc,
                                 const TraceScope &scope);
  FailureOr<RankedTensorType> importTypeObject(const JsonNode &node);
  FailureOr<Value> importValueRef(const JsonNode &ref, const TraceScope &scope);
  LogicalResult verifyImported(Operation *op, const JsonNode &from);

  const JsonDocument &doc;
  OpBuilder builder;
};

} // namespace

//===----------------------------------------------------------------------===//
// File and traces
//===----------------------------------------------------------------------===//

OwningOpRef<ModuleOp> TraceImporter::importModule() {
  JsonNode root = doc.root();
  if (!root.getAsObject()) {
    doc.emitError(root) << "expected an object with 'version' and 'traces', "
                           "got "
                        << doc.describe(root);
    return nullptr;
  }
  static const StringRef fields[] = {"version", "traces", "metadata"};
  if (failed(checkKnownFields(doc, root, fields, "the trace file")))
    return nullptr;
  FailureOr<JsonNode> version =
      requireField(doc, root, "version", "the trace file");
  if (failed(version))
    return nullptr;
  std::optional<int64_t> versionNumber = version->value->getAsInteger();
  if (!doc.isIntegerLiteral(*version) || versionNumber != 1) {
    doc.emitError(*version)
        << "unsupported trace format version " << doc.describe(*version)
        << "; this importer reads version 1";
    return nullptr;
  }
  FailureOr<JsonNode> traces =
      requireField(doc, root, "traces", "the trace file");
  if (failed(traces))
    return nullptr;
  if (!traces->getAsArray()) {
    doc.emitError(*traces) << "expected an array of traces, got "
                           << doc.describe(*traces);
    return nullptr;
  }

  OwningOpRef<ModuleOp> module = ModuleOp::create(doc.getLoc(root));
  builder.setInsertionPointToEnd(module->getBody());
  llvm::StringMap<size_t> names;
  for (auto [index, trace] : llvm::enumerate(doc.elements(*traces)))
    if (failed(importTrace(trace, index, names)))
      return nullptr;
  if (failed(verify(*module)))
    return nullptr;
  return module;
}

LogicalResult TraceImporter::importTrace(const JsonNode &trace, size_t index,
                                         llvm::StringMap<size_t> &names) {
  if (!trace.getAsObject())
    return doc.emitError(trace)
           << "expected a trace, an object with 'events', got "
           << doc.describe(trace);
  static const StringRef fields[] = {"name", "events"};
  if (failed(checkKnownFields(doc, trace, fields, "a trace")))
    return failure();

  std::string name = "iter" + std::to_string(index);
  const JsonNode *nameAt = &trace;
  std::optional<JsonNode> nameNode = doc.member(trace, "name");
  if (nameNode) {
    std::optional<StringRef> given = nameNode->value->getAsString();
    if (!given || given->empty())
      return doc.emitError(*nameNode)
             << "expected a non-empty string, got " << doc.describe(*nameNode);
    name = given->str();
    nameAt = &*nameNode;
  }
  auto [it, inserted] = names.try_emplace(name, index);
  if (!inserted)
    return doc.emitError(*nameAt)
           << "trace name '" << name << "' is already used by traces["
           << it->second << "]";

  FailureOr<JsonNode> events = requireField(doc, trace, "events", "a trace");
  if (failed(events))
    return failure();
  if (!events->getAsArray())
    return doc.emitError(*events)
           << "expected an array of events, got " << doc.describe(*events);

  auto traceOp = TraceOp::create(builder, doc.getLoc(trace), name);
  OpBuilder::InsertionGuard guard(builder);
  builder.setInsertionPointToEnd(&traceOp.getBody().front());
  SmallVector<JsonNode> eventNodes = doc.elements(*events);
  TraceScope scope{eventNodes.size(), {}, {}};
  for (const JsonNode &event : eventNodes)
    if (failed(importEvent(event, scope)))
      return failure();
  return verifyImported(traceOp, trace);
}

//===----------------------------------------------------------------------===//
// Events
//===----------------------------------------------------------------------===//

LogicalResult TraceImporter::importEvent(const JsonNode &event,
                                         TraceScope &scope) {
  size_t index = scope.events.size();
  const json::Object *object = event.getAsObject();
  if (!object)
    return doc.emitError(event)
           << "expected an event, an object, got " << doc.describe(event);

  const EventSpec *spec = nullptr;
  for (const EventSpec &candidate : kEventSpecs) {
    if (!object->get(candidate.field))
      continue;
    if (spec)
      return doc.emitError(event)
             << "an event has exactly one kind field, this one has both '"
             << spec->field << "' and '" << candidate.field << "'";
    spec = &candidate;
  }
  if (!spec)
    return doc.emitError(event)
           << "an event needs one kind field: op, feed, state, fetch, "
              "loop_begin, loop_iter or loop_end";
  if (failed(checkKnownFields(doc, event, spec->fields, spec->description)))
    return failure();

  if (std::optional<JsonNode> id = doc.member(event, "id")) {
    FailureOr<int64_t> value = importIndex(doc, *id, "the event's index");
    if (failed(value))
      return failure();
    if (size_t(*value) != index)
      return doc.emitError(*id)
             << "id " << *value << " does not match the event's index " << index
             << "; ids, when given, must equal the index";
  }

  // Events without a site keep their position in the trace file, which
  // is what their verifier diagnostics then point at.
  Location loc = doc.getLoc(event);
  if (std::optional<JsonNode> site = doc.member(event, "site")) {
    FailureOr<Location> siteLoc = importSite(doc, *site);
    if (failed(siteLoc))
      return failure();
    loc = *siteLoc;
  } else if (spec->needsSite) {
    return doc.emitError(event) << spec->description << " needs field 'site'";
  }

  FailureOr<Operation *> op = buildEvent(*spec, event, loc, scope);
  if (failed(op) || failed(verifyImported(*op, event)))
    return failure();
  scope.events.push_back({spec, *op});
  return success();
}

FailureOr<Operation *> TraceImporter::buildEvent(const EventSpec &spec,
                                                 const JsonNode &event,
                                                 Location loc,
                                                 TraceScope &scope) {
  JsonNode kindNode = *doc.member(event, spec.field);
  switch (spec.kind) {
  case EventKind::Op:
    return buildOp(event, loc, scope);
  case EventKind::Feed: {
    FailureOr<RankedTensorType> type = importTypeObject(kindNode);
    if (failed(type))
      return failure();
    return FeedOp::create(builder, loc, *type, IntegerAttr()).getOperation();
  }
  case EventKind::State: {
    std::optional<StringRef> name = kindNode.value->getAsString();
    if (!name || name->empty())
      return doc.emitError(kindNode)
             << "expected the state's name, a non-empty string, got "
             << doc.describe(kindNode);
    FailureOr<RankedTensorType> type =
        importTensorType(doc, event, spec.description);
    if (failed(type))
      return failure();
    auto state = StateOp::create(builder, loc, *type, *name);
    scope.states[*name] = state.getResult();
    return state.getOperation();
  }
  case EventKind::Fetch: {
    FailureOr<Value> value = importValueRef(kindNode, scope);
    if (failed(value))
      return failure();
    return FetchOp::create(builder, loc, IntegerAttr(), *value).getOperation();
  }
  case EventKind::LoopBegin:
  case EventKind::LoopIter:
  case EventKind::LoopEnd:
    break;
  }
  if (kindNode.value->getAsBoolean() != std::optional<bool>(true))
    return doc.emitError(kindNode)
           << "expected true, got " << doc.describe(kindNode);
  if (spec.kind == EventKind::LoopBegin)
    return LoopBeginOp::create(builder, loc).getOperation();
  if (spec.kind == EventKind::LoopIter)
    return LoopIterOp::create(builder, loc).getOperation();
  return LoopEndOp::create(builder, loc).getOperation();
}

FailureOr<Operation *> TraceImporter::buildOp(const JsonNode &event,
                                              Location loc,
                                              const TraceScope &scope) {
  JsonNode nameNode = *doc.member(event, "op");
  std::optional<StringRef> name = nameNode.value->getAsString();
  if (!name || name->empty())
    return doc.emitError(nameNode)
           << "expected the op's name, a string such as \"aten.add\", got "
           << doc.describe(nameNode);

  FailureOr<JsonNode> inputs =
      requireField(doc, event, "inputs", "an op event");
  if (failed(inputs))
    return failure();
  if (!inputs->getAsArray())
    return doc.emitError(*inputs)
           << "expected an array of value references, got "
           << doc.describe(*inputs);
  SmallVector<Value> operands;
  for (const JsonNode &ref : doc.elements(*inputs)) {
    FailureOr<Value> value = importValueRef(ref, scope);
    if (failed(value))
      return failure();
    operands.push_back(*value);
  }

  DictionaryAttr args;
  if (std::optional<JsonNode> argsNode = doc.member(event, "args")) {
    FailureOr<DictionaryAttr> dict = importArgs(doc, *argsNode);
    if (failed(dict))
      return failure();
    args = *dict;
  }

  FailureOr<JsonNode> results =
      requireField(doc, event, "results", "an op event");
  if (failed(results))
    return failure();
  if (!results->getAsArray())
    return doc.emitError(*results) << "expected an array of tensor types, got "
                                   << doc.describe(*results);
  SmallVector<Type> resultTypes;
  for (const JsonNode &result : doc.elements(*results)) {
    FailureOr<RankedTensorType> type = importTypeObject(result);
    if (failed(type))
      return failure();
    resultTypes.push_back(*type);
  }
  return DLOp::create(builder, loc, resultTypes, *name, args, operands)
      .getOperation();
}

/// Reads a tensor type object, `{"dtype": ..., "shape": [...]}`.
FailureOr<RankedTensorType>
TraceImporter::importTypeObject(const JsonNode &node) {
  if (!node.getAsObject())
    return doc.emitError(node)
           << "expected a tensor type {\"dtype\": ..., \"shape\": [...]}, "
              "got "
           << doc.describe(node);
  if (failed(checkKnownFields(doc, node, kTensorTypeFields, "a tensor type")))
    return failure();
  return importTensorType(doc, node, "a tensor type");
}

//===----------------------------------------------------------------------===//
// Value references
//===----------------------------------------------------------------------===//

FailureOr<Value> TraceImporter::importValueRef(const JsonNode &ref,
                                               const TraceScope &scope) {
  const json::Array *parts = ref.getAsArray();
  std::optional<StringRef> tag =
      parts && !parts->empty() ? (*parts)[0].getAsString() : std::nullopt;
  if (!tag)
    return doc.emitError(ref)
           << "expected a value reference [\"v\", event, result] or "
              "[\"state\", name], got "
           << doc.describe(ref);
  SmallVector<JsonNode> elements = doc.elements(ref);

  if (*tag == "state") {
    std::optional<StringRef> name =
        parts->size() == 2 ? (*parts)[1].getAsString() : std::nullopt;
    if (!name)
      return doc.emitError(ref) << "a state reference is [\"state\", name]";
    auto it = scope.states.find(*name);
    if (it == scope.states.end())
      return doc.emitError(ref) << "refers to state '" << *name
                                << "', which no earlier state event of this "
                                   "trace declares";
    return it->second;
  }
  if (*tag != "v")
    return doc.emitError(elements[0])
           << "unknown reference kind '" << *tag
           << "'; expected \"v\" (an event's result) or \"state\"";
  if (parts->size() != 2 && parts->size() != 3)
    return doc.emitError(ref) << "a value reference is [\"v\", event] or "
                                 "[\"v\", event, result]";

  FailureOr<int64_t> event = importIndex(doc, elements[1], "an event index");
  if (failed(event))
    return failure();
  int64_t result = 0;
  if (parts->size() == 3) {
    FailureOr<int64_t> index = importIndex(doc, elements[2], "a result index");
    if (failed(index))
      return failure();
    result = *index;
  }

  size_t current = scope.events.size();
  if (size_t(*event) == current)
    return doc.emitError(ref)
           << "refers to event " << *event << ", the event that uses it";
  if (size_t(*event) > current && size_t(*event) < scope.numEvents)
    return doc.emitError(ref)
           << "refers to event " << *event
           << ", which comes later; a value must be produced before it is "
              "used";
  if (size_t(*event) >= scope.numEvents)
    return doc.emitError(ref)
           << "refers to event " << *event << ", but the trace has only "
           << scope.numEvents << " events";

  auto [spec, op] = scope.events[*event];
  if (op->getNumResults() == 0)
    return doc.emitError(ref)
           << "refers to event " << *event << ", " << spec->description
           << ", which produces no values";
  if (size_t(result) >= op->getNumResults()) {
    InFlightDiagnostic diag = doc.emitError(ref);
    diag << "refers to result " << result << " of event " << *event
         << ", but that " << spec->description.split(' ').second;
    if (auto dl = dyn_cast<DLOp>(op))
      diag << " (" << dl.getName() << ")";
    diag << " has " << op->getNumResults()
         << (op->getNumResults() == 1 ? " result" : " results");
    return diag;
  }
  return op->getResult(result);
}

//===----------------------------------------------------------------------===//
// Verification
//===----------------------------------------------------------------------===//

LogicalResult TraceImporter::verifyImported(Operation *op,
                                            const JsonNode &from) {
  // Let the verifier's errors through, with a note naming the JSON value
  // instead of a dump of the op in generic form.
  MLIRContext *context = op->getContext();
  ScopedDiagnosticHandler handler(context, [&](Diagnostic &diag) {
    if (diag.getSeverity() == DiagnosticSeverity::Error)
      diag.attachNote(doc.getLoc(from)) << "imported from " << from.path;
    return failure();
  });
  bool printOp = context->shouldPrintOpOnDiagnostic();
  context->printOpOnDiagnostic(false);
  LogicalResult result = verify(op);
  context->printOpOnDiagnostic(printOp);
  return result;
}

//===----------------------------------------------------------------------===//
// Entry points
//===----------------------------------------------------------------------===//

OwningOpRef<ModuleOp> terra::importTraceFile(StringRef json,
                                             StringRef bufferName,
                                             MLIRContext *context) {
  context->loadDialect<TerraDialect>();
  JsonDocument doc(json, bufferName, context);
  if (!doc.isValid())
    return nullptr;
  return TraceImporter(doc).importModule();
}

OwningOpRef<ModuleOp> terra::importTraceFile(llvm::SourceMgr &sourceMgr,
                                             MLIRContext *context) {
  const llvm::MemoryBuffer *buffer =
      sourceMgr.getMemoryBuffer(sourceMgr.getMainFileID());
  return importTraceFile(buffer->getBuffer(), buffer->getBufferIdentifier(),
                         context);
}
