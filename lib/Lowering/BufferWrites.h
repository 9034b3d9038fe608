//===- BufferWrites.h - Which buffers a bufferized op writes ----*- C++ -*-===//
//
// Shared by the passes that reason about writes to the graph's buffers
// after one-shot bufferization: terra-protect-fetches (is a fetched buffer
// written later?) and terra-library-calls (is a transposed GEMM operand's
// source written before the GEMM?): what an op writes, and which buffers
// each memref value may point into.
//
//===----------------------------------------------------------------------===//
#ifndef TERRA_LIB_LOWERING_BUFFERWRITES_H
#define TERRA_LIB_LOWERING_BUFFERWRITES_H

#include "RuntimeNames.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/SetVector.h"

#include <optional>

namespace terra {

inline bool isMemRef(mlir::Value v) {
  return mlir::isa<mlir::BaseMemRefType>(v.getType());
}

/// The runtime entry points that only read their memref arguments (the
/// others take none, or return fresh buffers).
inline bool readsOnly(mlir::func::CallOp call) {
  llvm::StringRef callee = call.getCallee();
  return callee.starts_with(kRuntimeFetch) ||
         callee.starts_with(kRuntimeHostArg) ||
         callee.starts_with(kRuntimeToHost);
}

/// The memref values `op` may write, or nullopt when it may write any. A
/// call writes its memref operands, except the runtime's read-only entry
/// points and a library call, which names the operands it writes in
/// `terra.writes`. Loops and branches without effects of their own write
/// nothing themselves: their nested ops are to be looked at one by one.
inline std::optional<llvm::SmallVector<mlir::Value>>
writtenBy(mlir::Operation *op) {
  using namespace mlir;
  SmallVector<Value> written;
  if (auto call = dyn_cast<func::CallOp>(op)) {
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

namespace buffer_roots_detail {
using namespace mlir;

/// Which buffers each memref value may point into: its roots, the
/// allocations (and, for memory the run does not own, the opaque values:
/// function arguments, call results) it may be a view of.
struct BufferRoots {
  /// dst may point wherever src does.
  llvm::SmallVector<std::pair<Value, Value>> flows;
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

} // namespace buffer_roots_detail
using buffer_roots_detail::BufferRoots;

/// Whether the memrefs `a` and `b` may share memory, by their roots: an
/// allocation shares it with nothing but itself; memory the run does not
/// own (state, feeds, arguments) is assumed to overlap other such memory
/// (two state tensors may be views of one buffer). `roots` is solved.

inline bool rootsMayAlias(BufferRoots &roots, mlir::Value a, mlir::Value b) {
  for (mlir::Value ra : roots.of(a))
    for (mlir::Value rb : roots.of(b))
      if (ra == rb ||
          (!roots.allocated.contains(ra) && !roots.allocated.contains(rb)))
        return true;
  return false;
}

} // namespace terra

#endif // TERRA_LIB_LOWERING_BUFFERWRITES_H
