//===- Linear.cpp - Matrix products ---------------------------------------===//
//
// mm, bmm and addmm lower to the named linalg.matmul / batch_matmul on a
// zero-filled init; addmm adds the broadcast bias with beta/alpha scaling,
// except the plain f32/f64 addmm (beta = alpha = 1, a linear layer), whose
// product accumulates into the broadcast bias as ATen's does.
// f16 and bf16 products accumulate in f32, as ATen's CPU kernels and
// cuBLAS do, and round once at the end (addmm after adding the bias): an
// f16/bf16 accumulator loses most of a long dot product's precision.
//
//===----------------------------------------------------------------------===//
#include "Utils.h"

using namespace mlir;
using namespace terra;
using namespace terra::lowering;

namespace {

/// An empty init tensor of `type` with dims taken from `lhs`/`rhs`.
Value emptyInit(OpBuilder &b, Location loc, RankedTensorType type, Value lhs,
                Value rhs) {
  int64_t rank = type.getRank();
  SmallVector<Value> dyn;
  for (int64_t d = 0; d < rank; ++d) {
    if (!type.isDynamicDim(d))
      continue;
    // Leading dims come from lhs, the last one from rhs.
    if (d == rank - 1)
      dyn.push_back(tensor::DimOp::create(
          b, loc, rhs, cast<RankedTensorType>(rhs.getType()).getRank() - 1));
    else
      dyn.push_back(tensor::DimOp::create(b, loc, lhs, d));
  }
  return tensor::EmptyOp::create(b, loc, type, dyn);
}

/// A zero-filled init tensor of `type` with dims taken from `lhs`/`rhs`.
Value zeroInit(OpBuilder &b, Location loc, RankedTensorType type, Value lhs,
               Value rhs) {
  Value zero = scalarConstant(b, loc, type.getElementType(), 0.0);
  return linalg::FillOp::create(b, loc, zero, emptyInit(b, loc, type, lhs, rhs))
      .getResult(0);
}

/// `src` broadcast (numpy rules, trailing dims aligned) into `init`, which
/// has its own sizes.
Value broadcastInto(OpBuilder &b, Location loc, Value src, Value init) {
  auto ot = cast<RankedTensorType>(init.getType());
  int64_t rank = ot.getRank();
  SmallVector<AffineMap> maps = {
      broadcastMap(cast<RankedTensorType>(src.getType()), ot),
      b.getMultiDimIdentityMap(rank)};
  SmallVector<utils::IteratorType> iters(rank, utils::IteratorType::parallel);
  return linalg::GenericOp::create(
             b, loc, TypeRange{ot}, ValueRange{src}, ValueRange{init}, maps,
             iters,
             [](OpBuilder &nb, Location nloc, ValueRange args) {
               linalg::YieldOp::create(nb, nloc, args[0]);
             })
      .getResult(0);
}

/// Guards that the contraction dims agree when types cannot prove it.
void guardContraction(OpBuilder &b, Location loc, Value lhs, int64_t ld,
                      Value rhs, int64_t rd) {
  auto lt = cast<RankedTensorType>(lhs.getType());
  auto rt = cast<RankedTensorType>(rhs.getType());
  if (!lt.isDynamicDim(ld) && !rt.isDynamicDim(rd))
    return;
  Value a = tensor::DimOp::create(b, loc, lhs, ld);
  Value c = tensor::DimOp::create(b, loc, rhs, rd);
  Value eq = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq, a, c);
  cf::AssertOp::create(b, loc, eq, "mismatched contraction dimensions");
}

/// The element type a product of `et` accumulates in.
Type accumulatorType(OpBuilder &b, Type et) {
  return et.isF16() || et.isBF16() ? b.getF32Type() : et;
}

/// `acc` (f32) rounded to `type`'s element type, or `acc` itself.
Value roundTo(OpBuilder &b, Location loc, RankedTensorType type, Value acc) {
  if (cast<RankedTensorType>(acc.getType()).getElementType() ==
      type.getElementType())
    return acc;
  return buildElementwise(
      b, loc, type, {acc},
      [](OpBuilder &, Location, ValueRange a) { return a[0]; });
}

bool isMatrixFloat(Value v, int64_t rank) {
  auto t = cast<RankedTensorType>(v.getType());
  return t.getRank() == rank && isFloat(t.getElementType());
}

/// mm (rank 2, linalg.matmul) and bmm (rank 3, linalg.batch_matmul).
template <typename NamedOp, int64_t Rank>
LogicalResult lowerMatmul(DLOp op, ValueRange o, PatternRewriter &rw) {
  if (o.size() != 2 || !isMatrixFloat(o[0], Rank) || !isMatrixFloat(o[1], Rank))
    return failure();
  Location loc = op.getLoc();
  guardContraction(rw, loc, o[0], Rank - 1, o[1], Rank - 2);
  RankedTensorType type = resultType(op);
  RankedTensorType accType =
      type.clone(accumulatorType(rw, type.getElementType()));
  Value init = zeroInit(rw, loc, accType, o[0], o[1]);
  Value r = NamedOp::create(rw, loc, accType, ValueRange{o[0], o[1]},
                            ValueRange{init})
                .getResult(0);
  rw.replaceOp(op, roundTo(rw, loc, type, r));
  return success();
}

/// addmm(bias, a, b, beta, alpha) = beta * bias + alpha * (a @ b).
LogicalResult lowerAddmm(DLOp op, ValueRange o, PatternRewriter &rw) {
  if (o.size() != 3 || !isMatrixFloat(o[1], 2) || !isMatrixFloat(o[2], 2))
    return failure();
  Location loc = op.getLoc();
  RankedTensorType type = resultType(op);
  Type et = accumulatorType(rw, type.getElementType());
  RankedTensorType accType = type.clone(et);
  double beta = getFloatArg(op, "beta").value_or(1.0);
  double alpha = getFloatArg(op, "alpha").value_or(1.0);
  guardContraction(rw, loc, o[1], 1, o[2], 0);
  auto biasType = dyn_cast<RankedTensorType>(o[0].getType());
  if (beta == 1.0 && alpha == 1.0 && et == type.getElementType() && biasType &&
      biasType.getElementType() == et && biasType.getRank() <= 2) {
    // ATen's order: the output starts as the broadcast bias and the GEMM
    // accumulates into it (BLAS beta = 1), so a product whose K loop BLAS
    // blocks adds each block's partial sums to the bias-initialized output,
    // as eager does, and the result is bit for bit eager's.
    Value init = emptyInit(rw, loc, accType, o[1], o[2]);
    rw.replaceOp(op, linalg::MatmulOp::create(
                         rw, loc, accType, ValueRange{o[1], o[2]},
                         ValueRange{broadcastInto(rw, loc, o[0], init)})
                         .getResult(0));
    return success();
  }
  Value init = zeroInit(rw, loc, accType, o[1], o[2]);
  Value prod = linalg::MatmulOp::create(
                   rw, loc, accType, ValueRange{o[1], o[2]}, ValueRange{init})
                   .getResult(0);
  // The bias joins the f32 product (computeType) before the one rounding.
  Value r = buildElementwise(
      rw, loc, type, {o[0], prod},
      [&](OpBuilder &b, Location l, ValueRange a) {
        Value bias = a[0], p = a[1];
        if (beta != 1.0)
          bias = arith::MulFOp::create(b, l, bias, scalarConstant(b, l, et, beta));
        if (alpha != 1.0)
          p = arith::MulFOp::create(b, l, p, scalarConstant(b, l, et, alpha));
        if (beta == 0.0)
          return p; // PyTorch ignores the bias (even NaNs) when beta is 0.
        return Value(arith::AddFOp::create(b, l, bias, p));
      },
      et);
  rw.replaceOp(op, r);
  return success();
}

} // namespace

void terra::populateLinearLowerings(LoweringRegistry &r) {
  r.add("aten.mm", lowerMatmul<linalg::MatmulOp, 2>);
  r.add("aten.bmm", lowerMatmul<linalg::BatchMatmulOp, 3>);
  r.add("aten.addmm", lowerAddmm);
}
