//===- SwitchToIf.cpp - The terra-switch-to-if pass -----------------------===//
//
// scf.index_switch with tensor results -> nested scf.if, so that one-shot
// bufferization sees every alias between results and yielded buffers (see
// the pass description in Passes.td for the upstream gap).
//
//===----------------------------------------------------------------------===//
#include "terra/Passes.h"

#include "mlir/IR/PatternMatch.h"

namespace terra {
#define GEN_PASS_DEF_TERRASWITCHTOIF
#include "terra/Passes.h.inc"
} // namespace terra

using namespace mlir;

namespace {

bool hasTensorResult(scf::IndexSwitchOp sw) {
  return llvm::any_of(sw.getResultTypes(),
                      [](Type t) { return isa<TensorType>(t); });
}

void lowerSwitch(RewriterBase &rw, scf::IndexSwitchOp sw) {
  Location loc = sw.getLoc();
  TypeRange types = sw.getResultTypes();
  ArrayRef<int64_t> cases = sw.getCases();
  rw.setInsertionPoint(sw);
  if (cases.empty()) {
    // Only the default region: inline it in place of the switch.
    Block &block = sw.getDefaultBlock();
    auto yield = cast<scf::YieldOp>(block.getTerminator());
    SmallVector<Value> results(yield.getOperands());
    rw.eraseOp(yield);
    rw.inlineBlockBefore(&block, sw);
    rw.replaceOp(sw, results);
    return;
  }
  // if (c == case0) {case 0} else { if (c == case1) {case 1} else {...} }
  SmallVector<Value> outerResults;
  for (auto [i, value] : llvm::enumerate(cases)) {
    Value k = arith::ConstantIndexOp::create(rw, loc, value);
    Value eq = arith::CmpIOp::create(rw, loc, arith::CmpIPredicate::eq,
                                     sw.getArg(), k);
    auto ifOp = scf::IfOp::create(rw, loc, types, eq, /*addThenBlock=*/false,
                                  /*addElseBlock=*/false);
    if (i == 0)
      outerResults.assign(ifOp.getResults().begin(), ifOp.getResults().end());
    else
      scf::YieldOp::create(rw, loc, ifOp.getResults()); // the outer else
    rw.inlineRegionBefore(sw.getCaseRegions()[i], ifOp.getThenRegion(),
                          ifOp.getThenRegion().end());
    Region &elseRegion = ifOp.getElseRegion();
    if (i + 1 == cases.size()) {
      rw.inlineRegionBefore(sw.getDefaultRegion(), elseRegion,
                            elseRegion.end());
    } else {
      Block *next = rw.createBlock(&elseRegion);
      rw.setInsertionPointToStart(next);
    }
  }
  rw.replaceOp(sw, outerResults);
}

struct TerraSwitchToIfPass
    : public terra::impl::TerraSwitchToIfBase<TerraSwitchToIfPass> {
  void runOnOperation() override {
    SmallVector<scf::IndexSwitchOp> switches;
    getOperation()->walk([&](scf::IndexSwitchOp sw) {
      if (hasTensorResult(sw))
        switches.push_back(sw);
    });
    IRRewriter rw(&getContext());
    // Inner switches first (post-order walk): their regions move intact.
    for (scf::IndexSwitchOp sw : switches)
      lowerSwitch(rw, sw);
  }
};

} // namespace
