//===- MarkStateUpdates.cpp - The terra-mark-state-updates pass -----------===//
//
// Names, on each `terra.fetch` of a merged graph, the persistent state
// whose memory eager PyTorch leaves the fetched value in: the value is the
// result of an in-place op (`aten.add_`, `aten._foreach_mul_`, ...) whose
// mutated operand is that state, directly or through earlier in-place
// results, identity views (`aten.t` of `aten.t`, `aten.detach`,
// `aten.alias`) and branch results that every case yields alike. The
// attribute `terra.updates_state` carries the state's name; when only some
// cases of a branch chosen by a `terra.case_select` yield the state (the
// others make a new value: Adam's moments in its first step),
// `terra.updates_state_case` names that selection and those cases;
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

/// Where eager PyTorch leaves a value: the state whose memory holds it,
/// and, when only some cases of a branch yield that state (Adam's moments:
/// the first step's case makes them, the others update the state), the
/// `terra.case_select` choosing the branch and those cases.
struct Memory {
  StringAttr state;
  int64_t select = -1; ///< The case selection's id; -1: in every case.
  SmallVector<int64_t> cases;

  bool operator==(const Memory &o) const {
    return state == o.state && select == o.select && cases == o.cases;
  }
};

std::optional<Memory> switchMemory(scf::IndexSwitchOp sw, unsigned k,
                                   unsigned depth);

/// The memory holding `v` in eager PyTorch, or nothing.
std::optional<Memory> stateMemory(Value v, unsigned depth = 0) {
  if (depth > 64 || !v)
    return std::nullopt;
  Operation *def = v.getDefiningOp();
  if (!def)
    return std::nullopt;
  if (auto state = dyn_cast<terra::StateOp>(def))
    return Memory{state.getNameAttr()};
  if (auto op = dyn_cast<terra::DLOp>(def)) {
    StringRef base = baseName(op.getName());
    unsigned k = cast<OpResult>(v).getResultNumber();
    if (updatesOperandInPlace(base, op.getNumResults())) {
      if (k < op.getInputs().size() &&
          op.getInputs()[k].getType() == v.getType())
        return stateMemory(op.getInputs()[k], depth + 1);
      return std::nullopt;
    }
    // Identity views: the same memory with the same shape.
    if (op.getInputs().empty() || op.getNumResults() != 1)
      return std::nullopt;
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
    return std::nullopt;
  }
  if (auto sw = dyn_cast<scf::IndexSwitchOp>(def))
    return switchMemory(sw, cast<OpResult>(v).getResultNumber(), depth);
  return std::nullopt;
}

/// The memory of a switch's result `k`: the state every case that does not
/// leave it undefined yields alike; else, when a case selection chooses the
/// branch, the state some cases yield (each the same way, in every run of
/// them) while the others yield anything but that state, with those cases.
std::optional<Memory> switchMemory(scf::IndexSwitchOp sw, unsigned k,
                                   unsigned depth) {
  std::optional<Memory> found;
  bool others = false; // a defined case yielding no state's memory
  SmallVector<int64_t> cases;
  for (unsigned r = 0, n = sw->getNumRegions(); r < n; ++r) {
    Region &region = sw->getRegion(r);
    Value y = region.front().getTerminator()->getOperand(k);
    if (y.getDefiningOp<terra::UndefOp>())
      continue;
    std::optional<Memory> m = stateMemory(y, depth + 1);
    if (!m) {
      others = true;
      continue;
    }
    if (found && !(*found == *m))
      return std::nullopt;
    found = m;
    // Region 0 is the default: only the listed cases can be named.
    if (r == 0)
      cases.push_back(-1);
    else
      cases.push_back(sw.getCases()[r - 1]);
  }
  if (!found || !others)
    return found;
  auto select = sw.getArg().getDefiningOp<terra::CaseSelectOp>();
  if (!select || found->select >= 0 || llvm::is_contained(cases, -1))
    return std::nullopt;
  return Memory{found->state, int64_t(select.getId()), std::move(cases)};
}

struct TerraMarkStateUpdatesPass
    : public terra::impl::TerraMarkStateUpdatesBase<TerraMarkStateUpdatesPass> {
  void runOnOperation() override {
    getOperation().walk([&](terra::FetchOp fetch) {
      if (fetch->getParentOfType<terra::GraphOp>() == nullptr)
        return;
      std::optional<Memory> m = stateMemory(fetch.getValue());
      if (!m) {
        fetch->removeAttr(kAttr);
        fetch->removeAttr(kCaseAttr);
        return;
      }
      fetch->setAttr(kAttr, m->state);
      if (m->select < 0) {
        fetch->removeAttr(kCaseAttr);
        return;
      }
      SmallVector<int64_t> when{m->select};
      when.append(m->cases);
      fetch->setAttr(kCaseAttr,
                     DenseI64ArrayAttr::get(fetch.getContext(), when));
    });
  }
  static constexpr StringLiteral kAttr = "terra.updates_state";
  /// [case selection id, cases...]: the value is in the state's memory only
  /// when that selection picks one of those cases.
  static constexpr StringLiteral kCaseAttr = "terra.updates_state_case";
};

} // namespace
