//===- ProtectFetches.cpp - The terra-protect-fetches pass ----------------===//
//
// A fetch publishes the graph's buffer without a copy (lib/Runtime/API.cpp):
// the host's tensor views it from then on. This pass, right after one-shot
// bufferization, finds every fetch whose buffer the graph may still write
// afterwards (later in the function, or on a later trip of a loop around
// the fetch) and fetches a copy instead (see the pass description in
// Passes.td).
//
// Each memref value gets the set of buffers it may point into (its roots:
// allocations, or opaque values for memory the run does not own), found by
// propagating along flows to a fixpoint: a view or any other op that does
// not allocate flows its memref operands into its results, and
// loop-carried and branch-yielded values flow position by position into
// the values they become. An op writes a buffer when its memory effects
// write a value rooted there (an op without effects information writes
// every memref it takes; so does a call, except the runtime's read-only
// entry points and a library call naming its outputs in `terra.writes`).
//
//===----------------------------------------------------------------------===//
#include "RuntimeNames.h"

#include "terra/Passes.h"

#include "mlir/Interfaces/LoopLikeInterface.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "llvm/ADT/SetVector.h"

namespace terra {
#define GEN_PASS_DEF_TERRAPROTECTFETCHES
#include "terra/Passes.h.inc"
} // namespace terra

using namespace mlir;

namespace {

bool isMemRef(Value v) { return isa<BaseMemRefType>(v.getType()); }

/// The runtime entry points that only read their memref arguments.
bool readsOnly(func::CallOp call) {
  StringRef callee = call.getCallee();
  return callee.starts_with(terra::kRuntimeFetch) ||
         callee.starts_with(terra::kRuntimeHostArg) ||
         callee.starts_with(terra::kRuntimeToHost);
}

bool isFetch(func::CallOp call) {
  return call.getCallee().starts_with(terra::kRuntimeFetch);
}

/// Which buffers each memref value may point into: its roots, the
/// allocations (and, for memory the run does not own, the opaque values:
/// function arguments, call results) it may be a view of.
struct Roots {
  /// dst may point wherever src does.
  SmallVector<std::pair<Value, Value>> flows;
  llvm::DenseMap<Value, llvm::SmallSetVector<Value, 2>> roots;
  llvm::DenseSet<Value> allocated;

  void flow(Value dst, Value src) {
    if (isMemRef(dst) && isMemRef(src))
      flows.push_back({dst, src});
  }
  void flowAll(ValueRange dsts, ValueRange srcs) {
    for (auto [d, s] : llvm::zip(dsts, srcs))
      flow(d, s);
  }

  void add(Operation *op) {
    auto yielded = [](Region &r) -> ValueRange {
      if (r.empty())
        return {};
      return r.front().getTerminator()->getOperands();
    };
    if (auto loop = dyn_cast<scf::ForOp>(op)) {
      flowAll(loop.getRegionIterArgs(), loop.getInitArgs());
      flowAll(loop.getRegionIterArgs(), yielded(loop.getRegion()));
      flowAll(loop.getResults(), loop.getRegionIterArgs());
      return;
    }
    if (auto loop = dyn_cast<scf::WhileOp>(op)) {
      flowAll(loop.getBeforeArguments(), loop.getInits());
      flowAll(loop.getBeforeArguments(), yielded(loop.getAfter()));
      ValueRange forwarded = loop.getConditionOp().getArgs();
      flowAll(loop.getAfterArguments(), forwarded);
      flowAll(loop.getResults(), forwarded);
      return;
    }
    if (isa<scf::IfOp, scf::IndexSwitchOp>(op)) {
      for (Region &r : op->getRegions())
        flowAll(op->getResults(), yielded(r));
      return;
    }
    if (op->hasTrait<OpTrait::IsTerminator>() || isa<func::CallOp>(op))
      return; // a call's results are memory the run does not own
    auto effects = dyn_cast<MemoryEffectOpInterface>(op);
    for (Value r : op->getResults()) {
      if (!isMemRef(r))
        continue;
      if (effects && effects.getEffectOnValue<MemoryEffects::Allocate>(r)) {
        allocated.insert(r);
        continue;
      }
      // A view, a cast, or an op not known to allocate: may point into
      // every memref it takes.
      for (Value in : op->getOperands())
        flow(r, in);
    }
    // Block arguments of any other region-holding op: anything it takes.
    for (Region &region : op->getRegions())
      for (Block &block : region)
        for (BlockArgument a : block.getArguments())
          for (Value in : op->getOperands())
            flow(a, in);
  }

  /// Propagates roots along the flows to a fixpoint. A value nothing flows
  /// into is its own root.
  void solve() {
    llvm::DenseSet<Value> sinks;
    for (auto [dst, src] : flows)
      sinks.insert(dst);
    auto of = [&](Value v) -> llvm::SmallSetVector<Value, 2> & {
      auto [it, inserted] = roots.try_emplace(v);
      if (inserted && !sinks.contains(v))
        it->second.insert(v);
      return it->second;
    };
    for (bool changed = true; changed;) {
      changed = false;
      for (auto [dst, src] : flows) {
        llvm::SmallVector<Value, 2> from(of(src).begin(), of(src).end());
        auto &to = of(dst);
        for (Value r : from)
          changed |= to.insert(r);
      }
    }
  }
  ArrayRef<Value> of(Value v) {
    auto [it, inserted] = roots.try_emplace(v);
    if (inserted)
      it->second.insert(v);
    return it->second.getArrayRef();
  }
};

/// The memref values `op` may write, or nullopt when it may write any.
std::optional<SmallVector<Value>> writtenBy(Operation *op) {
  SmallVector<Value> written;
  if (auto call = dyn_cast<func::CallOp>(op)) {
    // A library call names the operands it writes (terra.writes).
    if (auto writes = call->getAttrOfType<DenseI64ArrayAttr>("terra.writes")) {
      for (int64_t i : writes.asArrayRef())
        if (i >= 0 && i < int64_t(call.getNumOperands()) &&
            isMemRef(call.getOperand(i)))
          written.push_back(call.getOperand(i));
      return written;
    }
    if (!readsOnly(call))
      for (Value v : call.getOperands())
        if (isMemRef(v))
          written.push_back(v);
    return written;
  }
  if (op->hasTrait<OpTrait::IsTerminator>())
    return written;
  auto effects = dyn_cast<MemoryEffectOpInterface>(op);
  // Loops and branches: their nested ops are looked at one by one.
  if (!effects && op->hasTrait<OpTrait::HasRecursiveMemoryEffects>())
    return written;
  if (!effects) {
    // Unknown effects: every memref it takes (without one it cannot name
    // a buffer of the graph).
    for (Value v : op->getOperands())
      if (isMemRef(v))
        written.push_back(v);
    return written;
  }
  SmallVector<MemoryEffects::EffectInstance> instances;
  effects.getEffects(instances);
  for (const MemoryEffects::EffectInstance &e : instances) {
    if (!isa<MemoryEffects::Write>(e.getEffect()))
      continue;
    Value v = e.getValue();
    if (!v)
      return std::nullopt;
    if (isMemRef(v))
      written.push_back(v);
  }
  return written;
}

struct TerraProtectFetchesPass
    : public terra::impl::TerraProtectFetchesBase<TerraProtectFetchesPass> {
  void runOnOperation() override {
    func::FuncOp func = getOperation();
    Roots roots;
    // Program order, and the writes.
    llvm::DenseMap<Operation *, unsigned> order;
    struct Write {
      Operation *op;
      SmallVector<Value> values; ///< Empty with `any`.
      bool any;
    };
    SmallVector<Write> writes;
    SmallVector<func::CallOp> fetches;
    func.walk<WalkOrder::PreOrder>([&](Operation *op) {
      order[op] = order.size();
      roots.add(op);
      if (auto call = dyn_cast<func::CallOp>(op); call && isFetch(call))
        fetches.push_back(call);
      std::optional<SmallVector<Value>> w = writtenBy(op);
      if (!w)
        writes.push_back({op, {}, true});
      else if (!w->empty())
        writes.push_back({op, std::move(*w), false});
    });

    roots.solve();

    for (func::CallOp fetch : fetches) {
      Value sent = fetch.getOperands().back();
      Value buffer = sent;
      if (auto cast = sent.getDefiningOp<memref::CastOp>())
        buffer = cast.getSource();
      llvm::SmallDenseSet<Value, 4> fetched;
      for (Value r : roots.of(buffer))
        if (roots.allocated.contains(r))
          fetched.insert(r);
      // Memory the run does not own is copied by the runtime.
      if (fetched.empty())
        continue;
      // Loops around the fetch: a write anywhere in one may come on a
      // later trip.
      SmallVector<Operation *> loops;
      for (Operation *p = fetch->getParentOp(); p && p != func;
           p = p->getParentOp())
        if (isa<LoopLikeOpInterface>(p))
          loops.push_back(p);
      unsigned at = order.lookup(fetch);
      bool overwritten = llvm::any_of(writes, [&](const Write &w) {
        if (w.op == fetch.getOperation())
          return false;
        bool after = order.lookup(w.op) > at ||
                     llvm::any_of(loops, [&](Operation *loop) {
                       return loop->isProperAncestor(w.op);
                     });
        if (!after)
          return false;
        return w.any || llvm::any_of(w.values, [&](Value v) {
                 return llvm::any_of(
                     roots.of(v), [&](Value r) { return fetched.contains(r); });
               });
      });
      if (!overwritten)
        continue;
      // Fetch a copy of its own: only the fetch reads it, so nothing
      // writes it again.
      OpBuilder b(fetch);
      Location loc = fetch.getLoc();
      auto type = cast<MemRefType>(buffer.getType());
      auto copyType = MemRefType::get(type.getShape(), type.getElementType());
      SmallVector<Value> dynamic;
      for (int64_t d = 0; d < type.getRank(); ++d)
        if (type.isDynamicDim(d))
          dynamic.push_back(memref::DimOp::create(b, loc, buffer, d));
      Value copy = memref::AllocOp::create(b, loc, copyType, dynamic,
                                           b.getI64IntegerAttr(64));
      memref::CopyOp::create(b, loc, buffer, copy);
      fetch->setOperand(fetch->getNumOperands() - 1,
                        memref::CastOp::create(b, loc, sent.getType(), copy));
      ++numCopied;
    }
  }
};

} // namespace
