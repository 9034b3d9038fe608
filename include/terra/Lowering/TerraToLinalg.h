//===- TerraToLinalg.h - Lowering registry for terra DL ops -----*- C++ -*-===//
//
// Each op family registers one lowering function per framework op name
// (e.g. "aten.add.Tensor"). A single conversion pattern dispatches on the
// name, so adding an op is one function in its family's file.
//
//===----------------------------------------------------------------------===//
#ifndef TERRA_LOWERING_TERRATOLINALG_H
#define TERRA_LOWERING_TERRATOLINALG_H

#include "terra/Dialect/TerraOps.h"

#include "mlir/IR/PatternMatch.h"
#include "llvm/ADT/StringMap.h"

namespace terra {

/// Replaces `op` (whose operands are `operands`) and returns success, or
/// returns failure without touching the IR when the op's static properties
/// are outside what the lowering supports (it then becomes a host op).
using LowerFn = mlir::LogicalResult (*)(DLOp op, mlir::ValueRange operands,
                                        mlir::PatternRewriter &rw);

class LoweringRegistry {
public:
  void add(llvm::StringRef name, LowerFn fn) { fns[name] = fn; }
  LowerFn lookup(llvm::StringRef name) const { return fns.lookup(name); }
  bool contains(llvm::StringRef name) const { return fns.count(name); }
  size_t size() const { return fns.size(); }

private:
  llvm::StringMap<LowerFn> fns;
};

/// The registry with every family's lowerings.
const LoweringRegistry &getLoweringRegistry();

// One entry point per family (lib/Lowering/TerraToLinalg/<Family>.cpp).
void populateElementwiseLowerings(LoweringRegistry &registry);
void populateLinearLowerings(LoweringRegistry &registry);
void populateReductionLowerings(LoweringRegistry &registry);
void populateLossLowerings(LoweringRegistry &registry);
void populateNormalizationLowerings(LoweringRegistry &registry);
void populateDataMovementLowerings(LoweringRegistry &registry);
void populateTensorConstructorsLowerings(LoweringRegistry &registry);
void populateOptimizerLowerings(LoweringRegistry &registry);
void populateRandomLowerings(LoweringRegistry &registry);
void populateConvolutionLowerings(LoweringRegistry &registry);
void populatePoolingLowerings(LoweringRegistry &registry);
void populateGridSampleLowerings(LoweringRegistry &registry);

} // namespace terra

#endif // TERRA_LOWERING_TERRATOLINALG_H
