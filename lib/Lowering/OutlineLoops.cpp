//===- OutlineLoops.cpp - The terra-outline-loops pass --------------------===//
//
// Moves each outermost loop nest of a function into a private function of
// its own, so that LLVM optimizes and compiles many small functions (on
// several threads, see CompiledGraph) instead of one huge one (see the
// pass description in Passes.td).
//
//===----------------------------------------------------------------------===//
#include "terra/Passes.h"

#include "mlir/IR/Matchers.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Transforms/RegionUtils.h"

namespace terra {
#define GEN_PASS_DEF_TERRAOUTLINELOOPS
#include "terra/Passes.h.inc"
} // namespace terra

using namespace mlir;

namespace {

bool isLoop(Operation *op) { return isa<scf::ForOp, scf::ParallelOp>(op); }

/// A constant without operands or regions: cloned into the new function
/// instead of passed, so bounds and steps stay constants there.
bool isClonableConstant(Value v) {
  Operation *def = v.getDefiningOp();
  return def && def->getNumOperands() == 0 && def->getNumRegions() == 0 &&
         matchPattern(def, m_Constant());
}

struct TerraOutlineLoopsPass
    : public terra::impl::TerraOutlineLoopsBase<TerraOutlineLoopsPass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    SymbolTable symbols(module);
    SmallVector<func::FuncOp> funcs(module.getOps<func::FuncOp>());
    for (func::FuncOp func : funcs) {
      if (func.isDeclaration())
        continue;
      SmallVector<Operation *> loops;
      func.walk<WalkOrder::PreOrder>([&](Operation *op) {
        if (!isLoop(op))
          return WalkResult::advance();
        int64_t count = 0;
        op->walk([&](Operation *) { ++count; });
        if (count >= minOps)
          loops.push_back(op);
        return WalkResult::skip(); // outermost loops only
      });
      unsigned index = 0;
      Operation *insertAfter = func;
      for (Operation *loop : loops)
        insertAfter = outline(loop, func, symbols, index++, insertAfter);
    }
  }

  /// Replaces `loop` by a call of a new function holding it; returns the
  /// new function (inserted after `insertAfter`).
  Operation *outline(Operation *loop, func::FuncOp parent,
                     SymbolTable &symbols, unsigned index,
                     Operation *insertAfter) {
    // Values from above, in order of first use: the loop's operands, then
    // those its body reads.
    llvm::SetVector<Value> used;
    for (Value v : loop->getOperands())
      used.insert(v);
    getUsedValuesDefinedAbove(loop->getRegions(), used);
    SmallVector<Value> args, constants;
    for (Value v : used)
      (isClonableConstant(v) ? constants : args).push_back(v);

    Location loc = loop->getLoc();
    OpBuilder b(loop->getContext());
    auto type = b.getFunctionType(ValueRange(args).getTypes(),
                                  loop->getResultTypes());
    auto callee = func::FuncOp::create(
        loc, (parent.getSymName() + "_loop" + Twine(index)).str(), type);
    callee.setPrivate();
    // Without it LLVM's inliner merges a function called once back into
    // its caller, undoing the split.
    callee->setAttr("passthrough", b.getArrayAttr({b.getStringAttr("noinline")}));
    // Inserted after `insertAfter` and renamed on a clash.
    symbols.insert(callee, std::next(Block::iterator(insertAfter)));

    Block *body = callee.addEntryBlock();
    b.setInsertionPointToStart(body);
    IRMapping map;
    for (auto [v, arg] : llvm::zip(args, body->getArguments()))
      map.map(v, arg);
    for (Value c : constants)
      map.map(c, b.clone(*c.getDefiningOp())->getResult(
                     cast<OpResult>(c).getResultNumber()));
    Operation *clone = b.clone(*loop, map);
    func::ReturnOp::create(b, loc, clone->getResults());

    b.setInsertionPoint(loop);
    auto call = func::CallOp::create(b, loc, callee, args);
    loop->replaceAllUsesWith(call.getResults());
    loop->erase();
    ++numOutlined;
    return callee;
  }
};

} // namespace
