//===- LowerGraph.cpp - The terra-lower-graph pass ------------------------===//
//
// terra.graph -> func.func with the C interface; communication ops and
// host callbacks -> calls of the runtime's C entry points (lib/Runtime).
// Tensors cross the boundary as unranked memrefs of their dtype, so one
// entry point per dtype serves every rank and shape without copies.
//
//===----------------------------------------------------------------------===//
#include "RuntimeDecl.h"
#include "RuntimeNames.h"
#include "terra/Dialect/TerraOps.h"
#include "terra/Passes.h"

#include "mlir/Dialect/ControlFlow/IR/ControlFlowOps.h"
#include "mlir/IR/SymbolTable.h"

namespace terra {
#define GEN_PASS_DEF_TERRALOWERGRAPH
#include "terra/Passes.h.inc"
} // namespace terra

using namespace mlir;
using namespace terra;

namespace {

class GraphLowering {
public:
  GraphLowering(ModuleOp module, bool contiguousInputs)
      : module(module), symbols(module), contiguousInputs(contiguousInputs) {}

  LogicalResult run(GraphOp graph);

private:
  func::FuncOp declare(StringRef name, TypeRange inputs, TypeRange results,
                       bool cInterface) {
    return declareFunction(
        module, &symbols, name,
        FunctionType::get(module.getContext(), inputs, results), cInterface);
  }

  Value i64(OpBuilder &b, Location loc, int64_t v) {
    return arith::ConstantOp::create(b, loc, b.getI64IntegerAttr(v));
  }

  /// A runtime guard: `ok` false ends the run with `message`
  /// (terra_rt_check with the message's index in `terra.asserts`). Inside a
  /// linalg op's body (an index checked per element) the call is made only
  /// when the check fails: an unconditional call per element cost a gather
  /// of 131072 elements (Faster R-CNN's RoI features) a call each, and
  /// nothing can move a call out of the loop.
  func::CallOp emitCheck(OpBuilder &b, Location loc, Value ok,
                         StringAttr message) {
    func::FuncOp f =
        declare(kRuntimeCheck, {b.getI1Type(), b.getI64Type()}, {}, false);
    int64_t id = assertMessages.size();
    assertMessages.push_back(message);
    Operation *parent = b.getInsertionBlock()->getParentOp();
    if (!isa<linalg::LinalgOp>(parent) &&
        !parent->getParentOfType<linalg::LinalgOp>())
      return func::CallOp::create(b, loc, f, ValueRange{ok, i64(b, loc, id)});
    Value failed = arith::XOrIOp::create(
        b, loc, ok, arith::ConstantOp::create(b, loc, b.getBoolAttr(true)));
    func::CallOp call;
    scf::IfOp::create(b, loc, failed, [&](OpBuilder &nb, Location l) {
      call = func::CallOp::create(nb, l, f, ValueRange{ok, i64(nb, l, id)});
      scf::YieldOp::create(nb, l);
    });
    return call;
  }

  /// A call returning an unranked memref, cast to `type` and wrapped as a
  /// read-only tensor: bufferization copies before writing into it.
  /// With `contiguous`, the `_contiguous` entry point, whose buffer is
  /// row-major: the identity layout. The runtime checks the dtype and
  /// rank; the static sizes of `type` are checked here (a guard naming
  /// `what`), since the cast below would take any.
  Value receiveTensor(OpBuilder &b, Location loc, StringRef prefix,
                      RankedTensorType type, ValueRange args, const Twine &what,
                      bool contiguous = false, func::CallOp *guard = nullptr) {
    Type et = type.getElementType();
    auto unranked = UnrankedMemRefType::get(et, 0);
    SmallVector<Type> argTypes(args.getTypes());
    std::string name =
        (prefix + (contiguous ? "_contiguous_" : "_") + runtimeDTypeSuffix(et))
            .str();
    func::FuncOp f = declare(name, argTypes, unranked, true);
    Value m = func::CallOp::create(b, loc, f, args).getResult(0);
    Value ok;
    for (int64_t d = 0; d < type.getRank(); ++d) {
      if (type.isDynamicDim(d))
        continue;
      Value dim = memref::DimOp::create(
          b, loc, m, arith::ConstantIndexOp::create(b, loc, d));
      Value eq = arith::CmpIOp::create(
          b, loc, arith::CmpIPredicate::eq, dim,
          arith::ConstantIndexOp::create(b, loc, type.getDimSize(d)));
      ok = ok ? arith::AndIOp::create(b, loc, ok, eq).getResult() : eq;
    }
    if (ok) {
      std::string shape;
      llvm::raw_string_ostream os(shape);
      llvm::interleaveComma(type.getShape(), os, [&](int64_t size) {
        if (ShapedType::isDynamic(size))
          os << "?";
        else
          os << size;
      });
      func::CallOp check =
          emitCheck(b, loc, ok,
                    b.getStringAttr(what + ": expected shape [" + shape + "]"));
      if (guard)
        *guard = check;
    }
    // Otherwise host tensors may be strided views: accept any strides and
    // offset.
    SmallVector<int64_t> strides(type.getRank(), ShapedType::kDynamic);
    auto layout =
        StridedLayoutAttr::get(b.getContext(), ShapedType::kDynamic, strides);
    auto ranked = contiguous ? MemRefType::get(type.getShape(), et)
                             : MemRefType::get(type.getShape(), et, layout);
    Value cast = memref::CastOp::create(b, loc, ranked, m);
    return bufferization::ToTensorOp::create(b, loc, type, cast,
                                             /*restrict=*/true,
                                             /*writable=*/false);
  }

  /// Passes a tensor to a runtime call as an unranked memref.
  func::CallOp sendTensor(OpBuilder &b, Location loc, StringRef prefix,
                          ValueRange leading, Value tensor) {
    auto type = cast<RankedTensorType>(tensor.getType());
    Type et = type.getElementType();
    auto ranked = MemRefType::get(type.getShape(), et);
    Value m = bufferization::ToBufferOp::create(b, loc, ranked, tensor,
                                                /*read_only=*/true);
    auto unranked = UnrankedMemRefType::get(et, 0);
    Value u = memref::CastOp::create(b, loc, unranked, m);
    SmallVector<Value> args(leading);
    args.push_back(u);
    SmallVector<Type> types(ValueRange(args).getTypes());
    func::FuncOp f =
        declare((prefix + "_" + runtimeDTypeSuffix(et)).str(), types, {}, true);
    return func::CallOp::create(b, loc, f, args);
  }

  ModuleOp module;
  SymbolTable symbols;
  bool contiguousInputs;
  llvm::StringMap<int64_t> stateIndex;

public:
  /// Name and args of each host op, indexed by its callback id.
  SmallVector<Attribute> hostOps;
  /// State names, indexed by the id passed to terra_rt_state_*.
  SmallVector<Attribute> stateNames;
  /// Messages of runtime guards, indexed by the id passed to terra_rt_check.
  SmallVector<Attribute> assertMessages;
  /// Each feed point's type (null when it has two), and the shape guards
  /// of its receives.
  llvm::MapVector<int64_t, RankedTensorType> feedTypes;
  SmallVector<std::pair<int64_t, func::CallOp>> feedGuards;
};

LogicalResult GraphLowering::run(GraphOp graph) {
  OpBuilder b(graph);
  Location gloc = graph.getLoc();
  auto func = func::FuncOp::create(b, gloc, graph.getSymName(),
                                   b.getFunctionType({}, {}));
  func->setAttr("llvm.emit_c_interface", b.getUnitAttr());
  if (auto unrolled = graph.getUnrolledLoopsAttr())
    func->setAttr("terra.unrolled_loops", unrolled);
  func.getBody().takeBody(graph.getBody());
  Block &entry = func.getBody().front();
  b.setInsertionPointToEnd(&entry);
  func::ReturnOp::create(b, gloc);
  graph.erase();

  SmallVector<Operation *> work;
  func.walk([&](Operation *op) {
    if (isa<FeedOp, FetchOp, CaseSelectOp, LoopCondOp, StateOp, UndefOp, DLOp,
            cf::AssertOp>(op))
      work.push_back(op);
  });
  for (Operation *op : work) {
    Location loc = op->getLoc();
    b.setInsertionPoint(op);
    if (auto feed = dyn_cast<FeedOp>(op)) {
      auto type = cast<RankedTensorType>(feed.getType());
      int64_t id = feed.getId().value_or(0);
      func::CallOp guard;
      Value t = receiveTensor(b, loc, kRuntimeFeed, type,
                              {i64(b, loc, id), i64(b, loc, type.getRank())},
                              "feed " + Twine(id), contiguousInputs, &guard);
      feed.replaceAllUsesWith(t);
      // The feed's type, which the runtime also checks as the host sends
      // it (Channels::sendFeed): the guard then cannot fail once the host
      // has finished (-terra-commit-in-place).
      auto [it, inserted] = feedTypes.try_emplace(id, type);
      if (!inserted && it->second != type)
        it->second = nullptr; // two types for one point: not checked early
      if (guard)
        feedGuards.push_back({id, guard});
    } else if (auto fetch = dyn_cast<FetchOp>(op)) {
      func::CallOp call =
          sendTensor(b, loc, kRuntimeFetch,
                     i64(b, loc, fetch.getId().value_or(0)), fetch.getValue());
      // The state whose memory eager leaves the value in
      // (-terra-mark-state-updates), by its runtime index, for
      // -terra-commit-in-place.
      if (auto state =
              fetch->getAttrOfType<StringAttr>("terra.updates_state")) {
        auto [it, inserted] =
            stateIndex.try_emplace(state.getValue(), stateNames.size());
        if (inserted)
          stateNames.push_back(state);
        call->setAttr("terra.updates_state", b.getI64IntegerAttr(it->second));
        // Only in some cases of a branch: [case selection, cases...].
        if (auto when = fetch->getAttr("terra.updates_state_case"))
          call->setAttr("terra.updates_state_case", when);
      }
    } else if (auto sel = dyn_cast<CaseSelectOp>(op)) {
      func::FuncOp f = declare(kRuntimeCase, {b.getI64Type(), b.getI64Type()},
                               b.getIndexType(), false);
      Value v = func::CallOp::create(
                    b, loc, f,
                    ValueRange{i64(b, loc, sel.getId()), i64(b, loc, sel.getCases())})
                    .getResult(0);
      sel.replaceAllUsesWith(v);
    } else if (auto cond = dyn_cast<LoopCondOp>(op)) {
      func::FuncOp f =
          declare(kRuntimeLoop, b.getI64Type(), b.getI1Type(), false);
      Value v = func::CallOp::create(b, loc, f, i64(b, loc, cond.getId()))
                    .getResult(0);
      cond.replaceAllUsesWith(v);
    } else if (auto state = dyn_cast<StateOp>(op)) {
      auto [it, inserted] =
          stateIndex.try_emplace(state.getName(), stateNames.size());
      if (inserted)
        stateNames.push_back(state.getNameAttr());
      auto type = cast<RankedTensorType>(state.getType());
      Value t =
          receiveTensor(b, loc, kRuntimeState, type,
                        {i64(b, loc, it->second), i64(b, loc, type.getRank())},
                        "state '" + state.getName() + "'", contiguousInputs);
      state.replaceAllUsesWith(t);
    } else if (auto undef = dyn_cast<UndefOp>(op)) {
      auto type = cast<RankedTensorType>(undef.getType());
      SmallVector<Value> dyn;
      for (int64_t i = 0; i < type.getNumDynamicDims(); ++i)
        dyn.push_back(arith::ConstantIndexOp::create(b, loc, 0));
      undef.replaceAllUsesWith(
          tensor::EmptyOp::create(b, loc, type, dyn).getResult());
    } else if (auto check = dyn_cast<cf::AssertOp>(op)) {
      // A failed runtime guard ends the run with its message instead of
      // aborting the process.
      emitCheck(b, loc, check.getArg(), check.getMsgAttr());
    } else if (auto dl = dyn_cast<DLOp>(op)) {
      // A host callback: stage the inputs, run the op on the host, and
      // receive each result.
      int64_t id = hostOps.size();
      NamedAttrList entry;
      entry.append("name", dl.getNameAttr());
      if (dl.getArgsAttr())
        entry.append("args", dl.getArgsAttr());
      hostOps.push_back(entry.getDictionary(b.getContext()));
      for (Value in : dl.getInputs())
        sendTensor(b, loc, kRuntimeHostArg, {}, in);
      func::FuncOp call = declare(kRuntimeHostCall, b.getI64Type(), {}, false);
      func::CallOp::create(b, loc, call, i64(b, loc, id));
      SmallVector<Value> results;
      for (auto [i, r] : llvm::enumerate(dl.getResults()))
        results.push_back(receiveTensor(
            b, loc, kRuntimeHostResult, cast<RankedTensorType>(r.getType()),
            i64(b, loc, i), "host op " + dl.getName() + " result " + Twine(i)));
      dl.replaceAllUsesWith(results);
    }
    op->erase();
  }
  return success();
}

struct LowerGraphPass
    : public terra::impl::TerraLowerGraphBase<LowerGraphPass> {
  using TerraLowerGraphBase::TerraLowerGraphBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    GraphLowering lowering(module, contiguousInputs);
    for (GraphOp graph : llvm::to_vector(module.getOps<GraphOp>()))
      if (failed(lowering.run(graph)))
        return signalPassFailure();
    Builder b(module.getContext());
    // Recorded even when empty, so the runtime can tell a lowered module.
    module->setAttr("terra.host_ops", b.getArrayAttr(lowering.hostOps));
    module->setAttr("terra.states", b.getArrayAttr(lowering.stateNames));
    module->setAttr("terra.asserts", b.getArrayAttr(lowering.assertMessages));
    // Each feed point's element type and shape (-1: dynamic), which the
    // runtime checks as the host sends a value; the guards of points with
    // one type are marked `terra.feed_guard`: they cannot fail once the
    // host has sent everything (-terra-commit-in-place).
    SmallVector<Attribute> feedTypes;
    for (auto &[id, type] : lowering.feedTypes) {
      if (!type)
        continue;
      SmallVector<int64_t> shape;
      for (int64_t d : type.getShape())
        shape.push_back(ShapedType::isDynamic(d) ? -1 : d);
      feedTypes.push_back(b.getArrayAttr(
          {b.getI64IntegerAttr(id),
           b.getStringAttr(runtimeDTypeSuffix(type.getElementType())),
           b.getDenseI64ArrayAttr(shape)}));
    }
    module->setAttr("terra.feed_types", b.getArrayAttr(feedTypes));
    for (auto &[id, call] : lowering.feedGuards)
      if (lowering.feedTypes.lookup(id))
        call->setAttr("terra.feed_guard", b.getUnitAttr());
    // The same messages in the compiled code, for graphs run without the
    // module (compiled ahead of time, tools/terra-run-object): each
    // NUL-terminated, an empty one last.
    if (!lowering.assertMessages.empty()) {
      std::string blob;
      for (Attribute m : lowering.assertMessages) {
        blob += cast<StringAttr>(m).getValue();
        blob.push_back('\0');
      }
      blob.push_back('\0');
      auto type = MemRefType::get({int64_t(blob.size())}, b.getI8Type());
      auto data = DenseElementsAttr::get(
          RankedTensorType::get(type.getShape(), b.getI8Type()),
          ArrayRef<int8_t>(reinterpret_cast<const int8_t *>(blob.data()),
                           blob.size()));
      OpBuilder ob = OpBuilder::atBlockBegin(module.getBody());
      memref::GlobalOp::create(ob, module.getLoc(), "terra_check_messages",
                               ob.getStringAttr("public"), type, data,
                               /*constant=*/true, /*alignment=*/nullptr);
    }
  }
};
} // namespace
