//===- TerraOps.cpp - Trace and graph ops of the terra dialect ------------===//
//
// Verifiers for the trace ops (stage 1) and the generated-graph ops
// (stage 3). The TraceGraph node ops live in TerraNodeOps.cpp.
//
//===----------------------------------------------------------------------===//
#include "terra/Dialect/TerraOps.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/OpImplementation.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace terra;

#include "terra/Dialect/TerraEnums.cpp.inc"

//===----------------------------------------------------------------------===//
// TraceOp
//===----------------------------------------------------------------------===//

void TraceOp::build(OpBuilder &builder, OperationState &state, StringRef name) {
  state.addAttribute(SymbolTable::getSymbolAttrName(),
                     builder.getStringAttr(name));
  Region *body = state.addRegion();
  body->push_back(new Block());
}

LogicalResult TraceOp::verifyRegions() {
  // Loop markers must nest properly and every op inside a loop must belong
  // to one of its iterations.
  struct OpenLoop {
    LoopBeginOp begin;
    bool inIteration;
  };
  SmallVector<OpenLoop> open;
  for (Operation &op : getBody().front()) {
    if (auto begin = dyn_cast<LoopBeginOp>(op)) {
      if (!open.empty() && !open.back().inIteration)
        return begin.emitOpError(
            "enters a nested loop before the first terra.loop_iter of the "
            "enclosing loop");
      open.push_back({begin, false});
      continue;
    }
    if (isa<LoopIterOp>(op)) {
      if (open.empty())
        return op.emitOpError("is outside of any loop of the trace");
      open.back().inIteration = true;
      continue;
    }
    if (isa<LoopEndOp>(op)) {
      if (open.empty())
        return op.emitOpError("closes a loop that was never opened");
      open.pop_back();
      continue;
    }
    if (!isa<DLOp, FeedOp, FetchOp, StateOp>(op))
      return op.emitOpError("is not allowed in a terra.trace; a trace holds "
                            "only terra.op, terra.feed, terra.fetch, "
                            "terra.state and loop markers");
    if (!open.empty() && !open.back().inIteration && !isa<StateOp>(op))
      return op.emitOpError("runs inside a loop before its first "
                            "terra.loop_iter");
  }
  if (!open.empty()) {
    InFlightDiagnostic diag = emitOpError("leaves a loop open at its end");
    diag.attachNote(open.back().begin.getLoc()) << "loop opened here";
    return diag;
  }
  return success();
}

//===----------------------------------------------------------------------===//
// DL op and communication ops
//===----------------------------------------------------------------------===//

unsigned DLOp::getNumShapeOperands() {
  if (DictionaryAttr args = getArgsAttr())
    if (auto n =
            dyn_cast_or_null<IntegerAttr>(args.get("terra.shape_operands")))
      return unsigned(n.getInt());
  return 0;
}

OperandRange DLOp::getDataInputs() {
  return getInputs().drop_back(
      std::min<size_t>(getNumShapeOperands(), getInputs().size()));
}

LogicalResult DLOp::verify() {
  StringRef name = getName();
  size_t dot = name.find('.');
  if (dot == StringRef::npos || dot == 0 || dot + 1 == name.size())
    return emitOpError("op name '")
           << name << "' must be qualified by its framework, e.g. 'aten.add'";
  if (DictionaryAttr args = getArgsAttr()) {
    if (Attribute n = args.get("terra.shape_operands")) {
      auto count = dyn_cast<IntegerAttr>(n);
      if (!count || count.getInt() < 0 ||
          uint64_t(count.getInt()) > getInputs().size())
        return emitOpError("'terra.shape_operands' must be a count of at "
                           "most the op's ")
               << getInputs().size() << " operands";
    }
    // Symbolic sizes must name a dim of an operand of this op.
    for (NamedAttribute arg : args) {
      auto list = dyn_cast<ArrayAttr>(arg.getValue());
      Attribute single = arg.getValue();
      for (Attribute e : list ? list.getValue() : ArrayRef<Attribute>(single)) {
        auto dim = dyn_cast<DimAttr>(e);
        if (!dim)
          continue;
        if (dim.getOperand() >= getInputs().size())
          return emitOpError("arg '")
                 << arg.getName().getValue() << "' refers to operand "
                 << dim.getOperand() << " of an op with " << getInputs().size()
                 << " operands";
        auto type =
            cast<RankedTensorType>(getInputs()[dim.getOperand()].getType());
        if (dim.getDim() >= type.getRank())
          return emitOpError("arg '")
                 << arg.getName().getValue() << "' refers to dim "
                 << dim.getDim() << " of operand " << dim.getOperand()
                 << ", which has rank " << type.getRank();
      }
    }
  }
  return success();
}

static LogicalResult verifyPointId(Operation *op, std::optional<int64_t> id) {
  if (id && *id < 0)
    return op->emitOpError("point id must be non-negative, got ") << *id;
  return success();
}

LogicalResult FeedOp::verify() { return verifyPointId(*this, getId()); }
LogicalResult FetchOp::verify() { return verifyPointId(*this, getId()); }

LogicalResult StateOp::verify() {
  if (getName().empty())
    return emitOpError("needs a non-empty state name");
  return success();
}

LogicalResult CaseSelectOp::verify() {
  // I64Attr accessors return uint64_t: compare the signed values.
  int64_t id = getIdAttr().getInt(), cases = getCasesAttr().getInt();
  if (id < 0)
    return emitOpError("divergence id must be non-negative, got ") << id;
  if (cases < 2)
    return emitOpError("needs at least 2 cases, got ") << cases;
  return success();
}

LogicalResult LoopCondOp::verify() {
  if (getIdAttr().getInt() < 0)
    return emitOpError("loop id must be non-negative, got ")
           << getIdAttr().getInt();
  return success();
}

//===----------------------------------------------------------------------===//
// GraphOp
//===----------------------------------------------------------------------===//

LogicalResult GraphOp::verify() {
  if (auto unrolled = getUnrolledLoops()) {
    for (Attribute attr : *unrolled) {
      auto pair = cast<DenseI64ArrayAttr>(attr);
      if (pair.size() != 2 || pair[0] < 0 || pair[1] < 0)
        return emitOpError("unrolled_loops entries must be [loop id, trip "
                           "count] with non-negative values, got ")
               << pair;
    }
  }
  for (Operation &op : getBody().front())
    if (isa<TraceOp, LoopBeginOp, LoopIterOp, LoopEndOp, NodeOp, LoopNodeOp>(
            op))
      return op.emitOpError("may not appear in a terra.graph");
  return success();
}

#define GET_OP_CLASSES
#include "terra/Dialect/TerraOps.cpp.inc"
