//===- TerraNodeOps.cpp - TraceGraph node ops -----------------------------===//
//
// The textual form of the merged TraceGraph: `terra.trace_graph`,
// `terra.node` and `terra.loop_node`.
//
//===----------------------------------------------------------------------===//
#include "terra/Dialect/TerraOps.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/OpImplementation.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/StringExtras.h"

using namespace mlir;
using namespace terra;

//===----------------------------------------------------------------------===//
// Region kinds: TraceGraph levels are graph regions (edges are attributes).
//===----------------------------------------------------------------------===//

RegionKind TraceGraphOp::getRegionKind(unsigned) { return RegionKind::Graph; }
RegionKind LoopNodeOp::getRegionKind(unsigned) { return RegionKind::Graph; }

//===----------------------------------------------------------------------===//
// NodeOp custom assembly
//
//   terra.node ID KIND ["NAME"] [(SOURCES)] [args {..}] [-> (TYPES)]
//              [succ [IDS]] [fetch [IDS]]
//   SOURCES ::= slot (`,` slot)*     slot ::= src (`|` src)*
//   src     ::= node `:` result [`:` age]
//===----------------------------------------------------------------------===//

static void printIds(OpAsmPrinter &p, ArrayRef<int64_t> ids) {
  p << '[';
  llvm::interleaveComma(ids, p);
  p << ']';
}

void NodeOp::print(OpAsmPrinter &p) {
  p << ' ' << getId() << ' ' << stringifyNodeKind(getKind());
  if (auto name = getName()) {
    p << " \"";
    llvm::printEscapedString(*name, p.getStream());
    p << '"';
  }
  if (getKind() == NodeKind::Op) {
    p << '(';
    llvm::interleaveComma(getSources(), p, [&](Attribute slot) {
      ArrayRef<int64_t> flat = cast<DenseI64ArrayAttr>(slot).asArrayRef();
      for (size_t i = 0; i + 2 < flat.size(); i += 3) {
        if (i)
          p << " | ";
        p << flat[i] << ':' << flat[i + 1];
        if (flat[i + 2])
          p << ':' << flat[i + 2];
      }
    });
    p << ')';
  }
  if (auto args = getArgs()) {
    p << " args ";
    p.printAttributeWithoutType(*args);
  }
  if (!getResultTypes().empty()) {
    p << " -> (";
    llvm::interleaveComma(getResultTypes(), p, [&](Attribute type) {
      p.printType(cast<TypeAttr>(type).getValue());
    });
    p << ')';
  }
  if (!getSucc().empty()) {
    p << " succ ";
    printIds(p, getSucc());
  }
  if (llvm::any_of(getFetchIds(), [](int64_t id) { return id >= 0; })) {
    p << " fetch ";
    printIds(p, getFetchIds());
  }
  p.printOptionalAttrDict(
      (*this)->getAttrs(),
      {getIdAttrName(), getKindAttrName(), getNameAttrName(),
       getArgsAttrName(), getResultTypesAttrName(), getSourcesAttrName(),
       getSuccAttrName(), getFetchIdsAttrName()});
}

static ParseResult parseIdList(OpAsmParser &parser,
                               SmallVectorImpl<int64_t> &ids) {
  return parser.parseCommaSeparatedList(
      OpAsmParser::Delimiter::Square,
      [&]() { return parser.parseInteger(ids.emplace_back()); });
}

ParseResult NodeOp::parse(OpAsmParser &parser, OperationState &result) {
  Builder &b = parser.getBuilder();
  int64_t id;
  StringRef kindName;
  SMLoc kindLoc;
  if (parser.parseInteger(id) || parser.getCurrentLocation(&kindLoc) ||
      parser.parseKeyword(&kindName))
    return failure();
  std::optional<NodeKind> kind = symbolizeNodeKind(kindName);
  if (!kind)
    return parser.emitError(kindLoc, "unknown node kind '")
           << kindName << "'; expected start, end, op, feed or state";
  result.addAttribute("id", b.getI64IntegerAttr(id));
  result.addAttribute("kind", NodeKindAttr::get(b.getContext(), *kind));

  std::string name;
  if (succeeded(parser.parseOptionalString(&name)))
    result.addAttribute("name", b.getStringAttr(name));

  SmallVector<Attribute> sources;
  if (*kind == NodeKind::Op) {
    auto parseSlot = [&]() -> ParseResult {
      SmallVector<int64_t> flat;
      do {
        int64_t node, res, age = 0;
        if (parser.parseInteger(node) || parser.parseColon() ||
            parser.parseInteger(res))
          return failure();
        if (succeeded(parser.parseOptionalColon()) &&
            parser.parseInteger(age))
          return failure();
        flat.append({node, res, age});
      } while (succeeded(parser.parseOptionalVerticalBar()));
      sources.push_back(b.getDenseI64ArrayAttr(flat));
      return success();
    };
    if (parser.parseCommaSeparatedList(OpAsmParser::Delimiter::Paren,
                                       parseSlot))
      return failure();
  }
  result.addAttribute("sources", b.getArrayAttr(sources));

  if (succeeded(parser.parseOptionalKeyword("args"))) {
    DictionaryAttr args;
    if (parser.parseAttribute(args))
      return failure();
    result.addAttribute("args", args);
  }
  SmallVector<Attribute> types;
  if (succeeded(parser.parseOptionalArrow())) {
    if (parser.parseCommaSeparatedList(OpAsmParser::Delimiter::Paren, [&]() {
          Type type;
          if (parser.parseType(type))
            return failure();
          types.push_back(TypeAttr::get(type));
          return success();
        }))
      return failure();
  }
  result.addAttribute("result_types", b.getArrayAttr(types));
  SmallVector<int64_t> succ, fetch;
  if (succeeded(parser.parseOptionalKeyword("succ")) &&
      parseIdList(parser, succ))
    return failure();
  result.addAttribute("succ", b.getDenseI64ArrayAttr(succ));
  if (succeeded(parser.parseOptionalKeyword("fetch"))) {
    if (parseIdList(parser, fetch))
      return failure();
  } else {
    fetch.assign(types.size(), -1);
  }
  result.addAttribute("fetch_ids", b.getDenseI64ArrayAttr(fetch));
  return parser.parseOptionalAttrDict(result.attributes);
}

//===----------------------------------------------------------------------===//
// Verifiers
//===----------------------------------------------------------------------===//

LogicalResult NodeOp::verify() {
  if (!isa<TraceGraphOp, LoopNodeOp>((*this)->getParentOp()))
    return emitOpError("must be inside a terra.trace_graph or terra.loop_node");
  // I64Attr accessors return uint64_t: compare the signed value.
  if (getIdAttr().getInt() < 0)
    return emitOpError("node id must be non-negative, got ")
           << getIdAttr().getInt();
  NodeKind kind = getKind();
  if (kind == NodeKind::Loop)
    return emitOpError("of kind 'loop' must be written as a terra.loop_node");
  bool named = kind == NodeKind::Op || kind == NodeKind::State;
  if (named != getName().has_value())
    return emitOpError(named ? "of kind '" : "of kind '")
           << stringifyNodeKind(kind)
           << (named ? "' needs a name" : "' takes no name");
  if (getArgs() && kind != NodeKind::Op)
    return emitOpError("only op nodes take args");
  if (kind != NodeKind::Op && !getSources().empty())
    return emitOpError("only op nodes have input sources");
  bool typed = kind == NodeKind::Op || kind == NodeKind::Feed ||
               kind == NodeKind::State;
  if (!typed && !getResultTypes().empty())
    return emitOpError("of kind '")
           << stringifyNodeKind(kind) << "' has no results";
  if ((kind == NodeKind::Feed || kind == NodeKind::State) &&
      getResultTypes().size() != 1)
    return emitOpError("of kind '")
           << stringifyNodeKind(kind) << "' needs exactly one result type";
  for (Attribute type : getResultTypes())
    if (!isa<RankedTensorType>(cast<TypeAttr>(type).getValue()))
      return emitOpError("result types must be ranked tensors, got ")
             << type;
  if (getFetchIds().size() != getResultTypes().size())
    return emitOpError("has ")
           << getFetchIds().size() << " fetch ids for "
           << getResultTypes().size() << " results";
  if (llvm::any_of(getFetchIds(), [](int64_t id) { return id < -1; }))
    return emitOpError("fetch ids must be non-negative, or -1 for a result "
                       "that is not fetched");
  for (Attribute slot : getSources()) {
    auto dense = dyn_cast<DenseI64ArrayAttr>(slot);
    if (!dense)
      return emitOpError("input slot must be an array<i64> of "
                         "node:result:age triples, got ")
             << slot;
    ArrayRef<int64_t> flat = dense.asArrayRef();
    if (flat.empty() || flat.size() % 3)
      return emitOpError("input slot needs at least one node:result source");
    for (int64_t v : flat)
      if (v < 0)
        return emitOpError("source fields must be non-negative");
  }
  // A start node may have no successor: the body of a loop that only ever
  // ran zero iterations.
  bool needsSucc = kind != NodeKind::End && kind != NodeKind::State &&
                   kind != NodeKind::Start;
  bool noSucc = kind == NodeKind::End || kind == NodeKind::State;
  if (needsSucc && getSucc().empty())
    return emitOpError("of kind '")
           << stringifyNodeKind(kind) << "' needs at least one successor";
  if (noSucc && !getSucc().empty())
    return emitOpError("of kind '")
           << stringifyNodeKind(kind) << "' has no successors";
  return success();
}

LogicalResult LoopNodeOp::verify() {
  if (!isa<TraceGraphOp, LoopNodeOp>((*this)->getParentOp()))
    return emitOpError("must be inside a terra.trace_graph or terra.loop_node");
  if (getIdAttr().getInt() < 0)
    return emitOpError("node id must be non-negative, got ")
           << getIdAttr().getInt();
  if (getTrips().empty())
    return emitOpError("needs at least one observed trip count");
  if (llvm::any_of(getTrips(), [](int64_t t) { return t < 0; }))
    return emitOpError("trip counts must be non-negative");
  if (getSucc().empty())
    return emitOpError("needs at least one successor");
  return success();
}

/// Checks one level of a TraceGraph: one start and one end node, unique ids,
/// successors inside the level. `ids` collects the ids of all levels.
static LogicalResult verifyLevel(Operation *owner, Block &block,
                                 llvm::DenseSet<int64_t> &ids) {
  llvm::DenseSet<int64_t> local;
  int starts = 0, ends = 0;
  for (Operation &op : block) {
    int64_t id;
    if (auto node = dyn_cast<NodeOp>(op)) {
      id = node.getId();
      starts += node.getKind() == NodeKind::Start;
      ends += node.getKind() == NodeKind::End;
    } else if (auto loop = dyn_cast<LoopNodeOp>(op)) {
      id = loop.getId();
      if (failed(verifyLevel(loop, loop.getBody().front(), ids)))
        return failure();
    } else {
      return op.emitOpError("may not appear in a TraceGraph level");
    }
    if (!ids.insert(id).second)
      return op.emitOpError("reuses node id ") << id;
    local.insert(id);
  }
  if (starts != 1 || ends != 1)
    return owner->emitOpError("level needs exactly one start and one end "
                              "node, found ")
           << starts << " and " << ends;
  for (Operation &op : block) {
    ArrayRef<int64_t> succ = isa<NodeOp>(op) ? cast<NodeOp>(op).getSucc()
                                             : cast<LoopNodeOp>(op).getSucc();
    for (int64_t s : succ)
      if (!local.contains(s))
        return op.emitOpError("successor ")
               << s << " is not a node of the same level";
  }
  return success();
}

LogicalResult TraceGraphOp::verifyRegions() {
  if (getNumTracesAttr().getInt() < 0)
    return emitOpError("trace count must be non-negative, got ")
           << getNumTracesAttr().getInt();
  llvm::DenseSet<int64_t> ids;
  if (failed(verifyLevel(*this, getBody().front(), ids)))
    return failure();
  LogicalResult result = success();
  walk([&](NodeOp node) {
    for (Attribute slot : node.getSources()) {
      ArrayRef<int64_t> flat = cast<DenseI64ArrayAttr>(slot).asArrayRef();
      for (size_t i = 0; i + 2 < flat.size(); i += 3)
        if (!ids.contains(flat[i])) {
          node.emitOpError("input source refers to unknown node ") << flat[i];
          result = failure();
        }
    }
  });
  return result;
}
