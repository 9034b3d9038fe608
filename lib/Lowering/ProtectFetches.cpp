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
#include "BufferWrites.h"
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
using terra::isMemRef;
using terra::writtenBy;
using Roots = terra::BufferRoots;

namespace {

bool isFetch(func::CallOp call) {
  return call.getCallee().starts_with(terra::kRuntimeFetch);
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
