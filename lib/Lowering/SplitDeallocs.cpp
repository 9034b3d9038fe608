//===- SplitDeallocs.cpp - The terra-split-deallocs pass ------------------===//
//
// Replaces each `bufferization.dealloc` that retains nothing by one
// `memref.dealloc` per memref (under `scf.if` on its condition), instead of
// the upstream lowering's helper, whose alias checks are quadratic in the
// memrefs. Sound with the graph runtime's free, which frees a buffer at
// most once (see the pass description in Passes.td).
//
//===----------------------------------------------------------------------===//
#include "terra/Passes.h"

#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/Matchers.h"

namespace terra {
#define GEN_PASS_DEF_TERRASPLITDEALLOCS
#include "terra/Passes.h.inc"
} // namespace terra

using namespace mlir;

namespace {

struct TerraSplitDeallocsPass
    : public terra::impl::TerraSplitDeallocsBase<TerraSplitDeallocsPass> {
  void runOnOperation() override {
    SmallVector<bufferization::DeallocOp> deallocs;
    getOperation().walk([&](bufferization::DeallocOp op) {
      if (op.getRetained().empty() && op.getMemrefs().size() > 1)
        deallocs.push_back(op);
    });
    for (bufferization::DeallocOp op : deallocs) {
      OpBuilder b(op);
      Location loc = op.getLoc();
      for (auto [memref, condition] :
           llvm::zip(op.getMemrefs(), op.getConditions())) {
        if (matchPattern(condition, m_Zero()))
          continue;
        if (matchPattern(condition, m_One())) {
          memref::DeallocOp::create(b, loc, memref);
          continue;
        }
        scf::IfOp::create(b, loc, condition, [&](OpBuilder &tb, Location l) {
          memref::DeallocOp::create(tb, l, memref);
          scf::YieldOp::create(tb, l);
        });
      }
      op.erase();
    }
  }
};

} // namespace
