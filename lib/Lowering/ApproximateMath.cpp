//===- ApproximateMath.cpp - The terra-approximate-math pass --------------===//
//
// f32 transcendental functions -> upstream polynomial approximations, so
// that fused pointwise loops vectorize instead of calling libm per element.
//
//===----------------------------------------------------------------------===//
#include "terra/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Math/Transforms/Passes.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

#include "llvm/ADT/StringSwitch.h"

namespace terra {
#define GEN_PASS_DEF_TERRAAPPROXIMATEMATH
#include "terra/Passes.h.inc"
} // namespace terra

using namespace mlir;

namespace {

/// A float constant of `type` (a scalar or a vector splat).
Value floatConstant(OpBuilder &b, Location loc, Type type, double v) {
  Type et = getElementTypeOrSelf(type);
  auto attr = b.getFloatAttr(et, v);
  if (auto vt = dyn_cast<VectorType>(type))
    return arith::ConstantOp::create(b, loc, DenseElementsAttr::get(vt, attr));
  return arith::ConstantOp::create(b, loc, attr);
}

/// The polynomial logarithms assume a normal argument. A subnormal f32 x is
/// scaled by 2^24 (exactly) first, and 24 * log(2) subtracted after:
///   log(x) = log(x * 2^24) - 24 log(2).
/// Zero, negative and NaN arguments take the same route and keep their
/// results (-inf, NaN, NaN).
template <typename LogOp>
void guardSubnormal(LogOp op, double scaledLogOf2) {
  OpBuilder b(op);
  Location loc = op.getLoc();
  Value x = op.getOperand();
  Type type = x.getType();
  Value small = arith::CmpFOp::create(
      b, loc, arith::CmpFPredicate::OLT, x,
      floatConstant(b, loc, type, 1.17549435e-38)); // FLT_MIN
  Value scaled =
      arith::MulFOp::create(b, loc, x, floatConstant(b, loc, type, 16777216.0));
  Value arg = arith::SelectOp::create(b, loc, small, scaled, x);
  Value log = LogOp::create(b, loc, arg);
  Value corr = arith::SelectOp::create(b, loc, small,
                                       floatConstant(b, loc, type, scaledLogOf2),
                                       floatConstant(b, loc, type, 0.0));
  op.replaceAllUsesWith(arith::SubFOp::create(b, loc, log, corr).getResult());
  op.erase();
}

bool isF32(Value v) { return getElementTypeOrSelf(v.getType()).isF32(); }

struct TerraApproximateMathPass
    : public terra::impl::TerraApproximateMathBase<TerraApproximateMathPass> {
  void runOnOperation() override {
    SmallVector<math::LogOp> logs;
    SmallVector<math::Log2Op> log2s;
    getOperation()->walk([&](Operation *op) {
      if (auto l = dyn_cast<math::LogOp>(op); l && isF32(l.getOperand()))
        logs.push_back(l);
      if (auto l = dyn_cast<math::Log2Op>(op); l && isF32(l.getOperand()))
        log2s.push_back(l);
    });
    for (math::LogOp l : logs)
      guardSubnormal(l, 24.0 * 0.693147180559945309417);
    for (math::Log2Op l : log2s)
      guardSubnormal(l, 24.0);

    RewritePatternSet patterns(&getContext());
    populateMathPolynomialApproximationPatterns(
        patterns, [](StringRef name) {
          return llvm::StringSwitch<bool>(name)
              .Cases({"math.exp", "math.expm1", "math.log", "math.log1p",
                      "math.log2", "math.tanh", "math.erf"},
                     true)
              .Default(false);
        });
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns))))
      signalPassFailure();
  }
};

} // namespace
