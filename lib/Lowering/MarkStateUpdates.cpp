//===- MarkStateUpdates.cpp - The terra-mark-state-updates pass -----------===//
//
// Names, on each `terra.fetch` of a merged graph, the persistent state
// whose memory eager PyTorch leaves the fetched value in: the value is the
// result of an in-place op (`aten.add_`, `aten._foreach_mul_`, ...) whose
// mutated operand is that state, directly or through earlier in-place
// results, identity views (`aten.t` of `aten.t`, `aten.detach`,
// `aten.alias`) and branch results that every case yields alike. The
// attribute `terra.updates_state` carries the state's name;
// -terra-commit-in-place later lets the graph write such a value straight
// into the state's memory (see the pass description in Passes.td).
//
//===----------------------------------------------------------------------===//
#include "terra/Passes.h"

#include "terra/Dialect/TerraOps.h"

namespace terra {
#define GEN_PASS_DEF_TERRAMARKSTATEUPDATES
#include "terra/Passes.h.inc"
} // namespace terra

using namespace mlir;

namespace {

/// The op's name without the `aten.` prefix and the overload: `add_` for
/// `aten.add_.Tensor`.
StringRef baseName(StringRef name) {
  if (!name.consume_front("aten."))
    return {};
  return name.split('.').first;
}

/// Whether result k of the op named `base` is its operand k, updated in
/// place: a single-result in-place op (`add_`, `copy_`, `zero_`, ...) or a
/// `_foreach_*_` op (result k is its first list's element k). Ops that
/// replace their operand's memory (`set_`, `resize_`) and the fused
/// optimizers, whose results follow no such rule, are not.
bool updatesOperandInPlace(StringRef base, unsigned numResults) {
  if (!base.ends_with("_") || base.starts_with("__") ||
      base.starts_with("_fused"))
    return false;
  if (base == "set_" || base == "resize_" || base == "resize_as_" ||
      base == "as_strided_" || base == "squeeze_" || base == "unsqueeze_" ||
      base == "transpose_" || base == "t_" || base == "swapaxes_" ||
      base == "swapdims_" || base == "detach_")
    return false;
  return numResults == 1 || base.starts_with("_foreach_");
}

/// The state whose memory holds `v` in eager PyTorch, or an empty name.
StringAttr stateMemory(Value v, unsigned depth = 0) {
  if (depth > 64 || !v)
    return {};
  Operation *def = v.getDefiningOp();
  if (!def)
    return {};
  if (auto state = dyn_cast<terra::StateOp>(def))
    return state.getNameAttr();
  if (auto op = dyn_cast<terra::DLOp>(def)) {
    StringRef base = baseName(op.getName());
    unsigned k = cast<OpResult>(v).getResultNumber();
    if (updatesOperandInPlace(base, op.getNumResults())) {
      if (k < op.getInputs().size() &&
          op.getInputs()[k].getType() == v.getType())
        return stateMemory(op.getInputs()[k], depth + 1);
      return {};
    }
    // Identity views: the same memory with the same shape.
    if (op.getInputs().empty() || op.getNumResults() != 1)
      return {};
    Value in = op.getInputs()[0];
    if ((base == "detach" || base == "alias") && in.getType() == v.getType())
      return stateMemory(in, depth + 1);
    if (base == "t") {
      auto inner = in.getDefiningOp<terra::DLOp>();
      if (inner && baseName(inner.getName()) == "t" &&
          !inner.getInputs().empty() &&
          inner.getInputs()[0].getType() == v.getType())
        return stateMemory(inner.getInputs()[0], depth + 1);
    }
    return {};
  }
  if (auto sw = dyn_cast<scf::IndexSwitchOp>(def)) {
    // Every case that does not leave the value undefined yields the same
    // state's memory.
    unsigned k = cast<OpResult>(v).getResultNumber();
    StringAttr found;
    for (Region &r : sw->getRegions()) {
      Value y = r.front().getTerminator()->getOperand(k);
      if (y.getDefiningOp<terra::UndefOp>())
        continue;
      StringAttr s = stateMemory(y, depth + 1);
      if (!s || (found && found != s))
        return {};
      found = s;
    }
    return found;
  }
  return {};
}

struct TerraMarkStateUpdatesPass
    : public terra::impl::TerraMarkStateUpdatesBase<TerraMarkStateUpdatesPass> {
  void runOnOperation() override {
    getOperation().walk([&](terra::FetchOp fetch) {
      if (fetch->getParentOfType<terra::GraphOp>() == nullptr)
        return;
      if (StringAttr state = stateMemory(fetch.getValue()))
        fetch->setAttr(kAttr, state);
      else
        fetch->removeAttr(kAttr);
    });
  }
  static constexpr StringLiteral kAttr = "terra.updates_state";
};

} // namespace
