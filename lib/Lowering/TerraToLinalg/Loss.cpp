//===- Loss.cpp - Loss functions and their backward ops -------------------===//
//
// mse_loss, smooth_l1_loss, binary_cross_entropy_with_logits (without
// weights; its backward is composite in aten) and nll_loss (forward and
// backward). Pointwise parts are linalg.generic ops; reductions accumulate into
// 0-d tensors; nll_loss reads the target class of each row with tensor.extract
// inside the body.
//
// Conventions (shared with Normalization.cpp, see matchTensorParams):
//  - tensor parameters are operands in schema order; an optional tensor
//    that is None (`Tensor? weight=None`) is NOT an operand, and the args
//    record it as `weight = unit`. Without that mark the operand count
//    decides: nll_loss_forward has 2 operands without a weight and 3 with
//    one; nll_loss_backward has 4 or 5.
//  - non-tensor parameters are args under their schema names: `reduction`
//    (0 none, 1 mean, 2 sum; default 1) and `ignore_index` (default -100).
//    They select the code that is generated, so they must be args (a 0-d
//    tensor operand in their place does not match and the op stays).
//  - nll_loss targets are not range-checked: a class index outside
//    [0, C) (other than ignore_index) reads out of bounds, where aten
//    raises.
//  - nll_loss_forward with reduction none and a batch dim returns
//    total_weight = 0, as aten (1.13) does; without a batch dim it returns
//    the target's weight.
//  - only f32/f64 are lowered (aten accumulates f16/bf16 in f32).
//
//===----------------------------------------------------------------------===//
#include "Utils.h"

using namespace mlir;
using namespace terra;
using namespace terra::lowering;

namespace {

/// Float types computed here: f16/bf16 would need a wider accumulator to
/// match aten (which accumulates them in f32), so they stay for the host.
bool isWideFloat(Type t) { return t.isF32() || t.isF64(); }

enum Reduction : int64_t { None = 0, Mean = 1, Sum = 2 };

std::optional<int64_t> reductionArg(DLOp op) {
  int64_t r = getIntArg(op, "reduction").value_or(Mean);
  if (r != None && r != Mean && r != Sum)
    return std::nullopt;
  return r;
}

/// Whether `a` and `b` may have the same shape: equal where both static; a
/// dynamic size against a static one other than 1 (a dynamic batch against
/// a target of fixed size) is checked at run time, while a static 1 against
/// a dynamic size could mean broadcasting and is rejected.
bool sameShape(RankedTensorType a, RankedTensorType b) {
  if (a.getRank() != b.getRank())
    return false;
  for (int64_t d = 0; d < a.getRank(); ++d) {
    int64_t x = a.getDimSize(d), y = b.getDimSize(d);
    if (ShapedType::isDynamic(x) && ShapedType::isDynamic(y))
      continue;
    if (ShapedType::isDynamic(x) || ShapedType::isDynamic(y)) {
      if (x == 1 || y == 1)
        return false;
      continue;
    }
    if (x != y)
      return false;
  }
  return true;
}

/// Guards at run time that `a` and `b` (sameShape) have equal sizes.
void guardSameShape(OpBuilder &b, Location loc, Value x, Value y,
                    StringRef msg) {
  for (int64_t d = 0; d < tensorType(x).getRank(); ++d)
    guardEqual(b, loc, tensor::getMixedSize(b, loc, x, d),
               tensor::getMixedSize(b, loc, y, d), msg);
}

/// The elementwise loss of one (self, target) element pair, in `et`.
using PairFn = std::function<Value(OpBuilder &b, Location l, Value x, Value y)>;

/// A loss that is `body(self, target)` per element, then reduced (none:
/// pointwise, broadcasting like aten; sum; mean = sum / numel): mse_loss,
/// smooth_l1_loss, binary_cross_entropy_with_logits. The operands are
/// (self, target); `what` names the op in the shape guard's message.
LogicalResult lowerPointwiseLoss(DLOp op, ValueRange o, PatternRewriter &rw,
                                 StringRef what, const PairFn &body) {
  std::optional<int64_t> red = reductionArg(op);
  if (o.size() != 2 || op.getNumResults() != 1 || !red)
    return failure();
  RankedTensorType out = resultType(op);
  Type et = out.getElementType();
  if (!isWideFloat(et))
    return failure();
  Location loc = op.getLoc();
  auto elem = [&](OpBuilder &b, Location l, Value x, Value y) -> Value {
    return body(b, l, castScalar(b, l, x, et), castScalar(b, l, y, et));
  };
  if (*red == None) // Pointwise; broadcasts like aten.
    return lowerElementwise(op, o, rw,
                            [&](OpBuilder &b, Location l, ValueRange a) {
                              return elem(b, l, a[0], a[1]);
                            });

  RankedTensorType st = tensorType(o[0]);
  if (!sameShape(st, tensorType(o[1])) || out.getRank() != 0)
    return failure();
  guardSameShape(rw, loc, o[0], o[1],
                 (what + ": self and target differ").str());
  // One type for both (guarded above), as the generic's identity maps want.
  Value target = o[1];
  if (tensorType(target) != st)
    target = tensor::CastOp::create(rw, loc, st, target);
  int64_t rank = st.getRank();
  SmallVector<bool> all(rank, true);
  AffineMap id = rw.getMultiDimIdentityMap(rank);
  RankedTensorType scalarT = RankedTensorType::get({}, et);
  Value r = buildGeneric(
      rw, loc, o[0], all, false, {o[0], target}, {id, id}, {scalarT},
      scalarConstant(rw, loc, et, 0.0),
      [&](OpBuilder &b, Location l, ValueRange ins, ValueRange acc) {
        return SmallVector<Value>{
            arith::AddFOp::create(b, l, acc[0], elem(b, l, ins[0], ins[1]))};
      })[0];
  if (*red == Mean) {
    Value n = countElements(rw, loc, o[0], all, et);
    r = buildElementwise(rw, loc, scalarT, {r, n},
                         [](OpBuilder &b, Location l, ValueRange a) -> Value {
                           return arith::DivFOp::create(b, l, a[0], a[1]);
                         });
  }
  rw.replaceOp(op, r);
  return success();
}

/// The backward of a lowerPointwiseLoss loss: (grad, self, target) ->
/// norm * dloss(self, target) * grad, norm = scale (scale / numel for
/// mean), with scale * dloss the derivative of the per-element loss in
/// self (aten's order of operations).
LogicalResult lowerPointwiseLossBackward(DLOp op, ValueRange o,
                                         PatternRewriter &rw, double scale,
                                         const PairFn &dloss) {
  std::optional<int64_t> red = reductionArg(op);
  if (o.size() != 3 || op.getNumResults() != 1 || !red)
    return failure();
  RankedTensorType out = resultType(op);
  Type et = out.getElementType();
  if (!isWideFloat(et) || (*red != None && tensorType(o[0]).getRank() != 0))
    return failure();
  Location loc = op.getLoc();
  RankedTensorType st = tensorType(o[1]);
  Value norm = scalarConstant(rw, loc, et, scale);
  if (*red == Mean)
    norm = arith::DivFOp::create(
        rw, loc, norm,
        countElements(rw, loc, o[1], SmallVector<bool>(st.getRank(), true),
                      et));
  Value r = buildElementwise(
      rw, loc, out, {o[0], o[1], o[2], norm},
      [&](OpBuilder &b, Location l, ValueRange a) -> Value {
        Value d = dloss(b, l, a[1], a[2]);
        return arith::MulFOp::create(
            b, l, arith::MulFOp::create(b, l, a[3], d), a[0]);
      });
  rw.replaceOp(op, r);
  return success();
}

/// mse_loss(self, target, reduction): (self - target)^2, reduced.
LogicalResult lowerMseLoss(DLOp op, ValueRange o, PatternRewriter &rw) {
  return lowerPointwiseLoss(op, o, rw, "mse_loss",
                            [](OpBuilder &b, Location l, Value x, Value y) {
                              Value d = arith::SubFOp::create(b, l, x, y);
                              return Value(arith::MulFOp::create(b, l, d, d));
                            });
}

/// mse_loss_backward(grad, self, target, reduction):
/// norm * (self - target) * grad, norm = 2 (2 / numel for mean).
LogicalResult lowerMseLossBackward(DLOp op, ValueRange o, PatternRewriter &rw) {
  return lowerPointwiseLossBackward(
      op, o, rw, 2.0, [](OpBuilder &b, Location l, Value x, Value y) {
        return Value(arith::SubFOp::create(b, l, x, y));
      });
}

/// smooth_l1_loss(self, target, reduction, beta): with d = self - target,
/// 0.5 * d^2 / beta where |d| < beta, else |d| - 0.5 * beta (beta = 0:
/// |d|, as aten).
LogicalResult lowerSmoothL1(DLOp op, ValueRange o, PatternRewriter &rw) {
  double beta = getFloatArg(op, "beta").value_or(1.0);
  if (beta < 0)
    return failure(); // aten raises
  return lowerPointwiseLoss(
      op, o, rw, "smooth_l1_loss",
      [beta](OpBuilder &b, Location l, Value x, Value y) -> Value {
        Value d = arith::SubFOp::create(b, l, x, y);
        Value ad = math::AbsFOp::create(b, l, d);
        if (beta == 0)
          return ad;
        Value bt = cst(b, l, d, beta);
        Value quad = arith::DivFOp::create(
            b, l,
            arith::MulFOp::create(b, l, cst(b, l, d, 0.5),
                                  arith::MulFOp::create(b, l, d, d)),
            bt);
        Value lin = arith::SubFOp::create(b, l, ad, cst(b, l, d, 0.5 * beta));
        Value small =
            arith::CmpFOp::create(b, l, arith::CmpFPredicate::OLT, ad, bt);
        return arith::SelectOp::create(b, l, small, quad, lin);
      });
}

/// smooth_l1_loss_backward(grad, self, target, reduction, beta): with
/// d = self - target, -1 where d <= -beta, else 1 where d >= beta, else
/// d / beta (aten's tests, in its order: d = 0 with beta = 0 gives -1).
LogicalResult lowerSmoothL1Backward(DLOp op, ValueRange o,
                                    PatternRewriter &rw) {
  double beta = getFloatArg(op, "beta").value_or(1.0);
  if (beta < 0)
    return failure();
  return lowerPointwiseLossBackward(
      op, o, rw, 1.0,
      [beta](OpBuilder &b, Location l, Value x, Value y) -> Value {
        Value d = arith::SubFOp::create(b, l, x, y);
        Value bt = cst(b, l, d, beta);
        Value low = arith::CmpFOp::create(b, l, arith::CmpFPredicate::OLE, d,
                                          cst(b, l, d, -beta));
        Value high =
            arith::CmpFOp::create(b, l, arith::CmpFPredicate::OGE, d, bt);
        Value mid = beta == 0 ? cst(b, l, d, 0.0)
                              : Value(arith::DivFOp::create(b, l, d, bt));
        return arith::SelectOp::create(
            b, l, low, cst(b, l, d, -1.0),
            arith::SelectOp::create(b, l, high, cst(b, l, d, 1.0), mid));
      });
}

/// binary_cross_entropy_with_logits(self, target, weight=None,
/// pos_weight=None, reduction), without weights (with them the op stays on
/// the host): aten's stable form
///   (1 - t) * x + m + log(exp(-m) + exp(-x - m)),  m = max(-x, 0).
LogicalResult lowerBceWithLogits(DLOp op, ValueRange o, PatternRewriter &rw) {
  DictionaryAttr args = op.getArgsAttr();
  for (StringRef w : {"weight", "pos_weight"})
    if (args && args.get(w) && !isa<UnitAttr>(args.get(w)))
      return failure();
  return lowerPointwiseLoss(
      op, o, rw, "binary_cross_entropy_with_logits",
      [](OpBuilder &b, Location l, Value x, Value t) -> Value {
        Value zero = cst(b, l, x, 0.0), one = cst(b, l, x, 1.0);
        Value negX = arith::NegFOp::create(b, l, x);
        Value m = arith::MaximumFOp::create(b, l, negX, zero);
        Value lse = math::LogOp::create(
            b, l,
            arith::AddFOp::create(
                b, l, math::ExpOp::create(b, l, arith::NegFOp::create(b, l, m)),
                math::ExpOp::create(b, l,
                                    arith::SubFOp::create(b, l, negX, m))));
        Value lin =
            arith::MulFOp::create(b, l, arith::SubFOp::create(b, l, one, t), x);
        return arith::AddFOp::create(b, l, arith::AddFOp::create(b, l, lin, m),
                                     lse);
      });
}

/// The parts of an nll_loss op both directions share.
struct NllOperands {
  Value self, target, weight; // weight may be null.
  int64_t reduction;
  int64_t ignoreIndex;
};

/// Checks self (C) or (N, C), target () or (N) of an int type, weight (C).
std::optional<NllOperands> matchNll(DLOp op, Value self, Value target,
                                    Value weight) {
  std::optional<int64_t> red = reductionArg(op);
  RankedTensorType st = tensorType(self), tt = tensorType(target);
  if (!red || !isWideFloat(st.getElementType()) ||
      !isa<IntegerType>(tt.getElementType()) ||
      tt.getElementType().isInteger(1) ||
      (st.getRank() != 1 && st.getRank() != 2) ||
      tt.getRank() != st.getRank() - 1)
    return std::nullopt;
  if (weight) {
    RankedTensorType wt = tensorType(weight);
    if (wt.getRank() != 1 || wt.getElementType() != st.getElementType())
      return std::nullopt;
  }
  return NllOperands{self, target, weight, *red,
                     getIntArg(op, "ignore_index").value_or(-100)};
}

/// Per row: (is ignored, class index clamped to 0 when ignored, weight of
/// the class or 0 when ignored), built in a generic body.
struct NllRow {
  Value ignored, cls, weight;
};

NllRow nllRow(OpBuilder &b, Location l, const NllOperands &n, Value t,
              Type et) {
  Value ignore = arith::ConstantOp::create(
      b, l, b.getIntegerAttr(t.getType(), n.ignoreIndex));
  Value ignored =
      arith::CmpIOp::create(b, l, arith::CmpIPredicate::eq, t, ignore);
  Value cls = arith::IndexCastOp::create(b, l, b.getIndexType(), t);
  Value zeroIdx = arith::ConstantIndexOp::create(b, l, 0);
  cls = arith::SelectOp::create(b, l, ignored, zeroIdx, cls);
  Value w = n.weight ? Value(tensor::ExtractOp::create(b, l, n.weight, cls))
                     : scalarConstant(b, l, et, 1.0);
  w = arith::SelectOp::create(b, l, ignored, scalarConstant(b, l, et, 0.0), w);
  return {ignored, cls, w};
}

/// nll_loss_forward(self, target, weight?, reduction, ignore_index)
///   -> (output, total_weight).
LogicalResult lowerNllForward(DLOp op, ValueRange o, PatternRewriter &rw) {
  std::optional<SmallVector<Value>> p = matchTensorParams(
      op, o, {{"self", false}, {"target", false}, {"weight", true}});
  if (!p || op.getNumResults() != 2)
    return failure();
  std::optional<NllOperands> n = matchNll(op, (*p)[0], (*p)[1], (*p)[2]);
  if (!n)
    return failure();
  RankedTensorType st = tensorType(n->self), tt = tensorType(n->target);
  RankedTensorType out = resultType(op, 0), outW = resultType(op, 1);
  Type et = st.getElementType();
  RankedTensorType scalarT = RankedTensorType::get({}, et);
  RankedTensorType rowT = RankedTensorType::get(tt.getShape(), et);
  if (!isCastCompatible(n->reduction == None ? rowT : scalarT, out) ||
      outW != scalarT)
    return failure();

  Location loc = op.getLoc();
  bool batched = st.getRank() == 2;
  if (batched && (st.isDynamicDim(0) || tt.isDynamicDim(0)))
    guardEqual(rw, loc, tensor::getMixedSize(rw, loc, n->self, 0),
               tensor::getMixedSize(rw, loc, n->target, 0),
               "nll_loss: self and target batch sizes differ");
  int64_t rank = tt.getRank();
  AffineMap id = rw.getMultiDimIdentityMap(rank);
  // -(self[row, class] * weight[class]), 0 for ignored rows.
  auto rowLoss = [&](OpBuilder &b, Location l, Value t, NllRow &row) {
    row = nllRow(b, l, *n, t, et);
    SmallVector<Value> idx;
    if (batched)
      idx.push_back(linalg::IndexOp::create(b, l, 0));
    idx.push_back(row.cls);
    Value x = tensor::ExtractOp::create(b, l, n->self, idx);
    return Value(arith::NegFOp::create(
        b, l, arith::MulFOp::create(b, l, x, row.weight)));
  };
  Value zero = scalarConstant(rw, loc, et, 0.0);
  Value loss, total;
  // Without a batch dim aten takes the scalar path even for `none`: the
  // loss is not divided and total_weight is the target's weight.
  if (n->reduction == None && batched) {
    loss = buildGeneric(rw, loc, n->target, SmallVector<bool>(rank, false),
                        false, n->target, {id}, {rowT}, {},
                        [&](OpBuilder &b, Location l, ValueRange ins,
                            ValueRange) {
                          NllRow row;
                          return SmallVector<Value>{rowLoss(b, l, ins[0], row)};
                        })[0];
    Value empty = tensor::EmptyOp::create(rw, loc, scalarT, ValueRange{});
    total = linalg::FillOp::create(rw, loc, zero, empty).getResult(0);
  } else {
    SmallVector<Value> r = buildGeneric(
        rw, loc, n->target, SmallVector<bool>(rank, true), false, n->target,
        {id}, {scalarT, scalarT}, {zero, zero},
        [&](OpBuilder &b, Location l, ValueRange ins, ValueRange acc) {
          NllRow row;
          Value v = rowLoss(b, l, ins[0], row);
          return SmallVector<Value>{arith::AddFOp::create(b, l, acc[0], v),
                                    arith::AddFOp::create(b, l, acc[1], row.weight)};
        });
    loss = r[0];
    total = r[1];
    if (n->reduction == Mean)
      loss = buildElementwise(rw, loc, scalarT, {loss, total},
                              [](OpBuilder &b, Location l, ValueRange a) -> Value {
                                return arith::DivFOp::create(b, l, a[0], a[1]);
                              });
  }
  rw.replaceOp(op, {castWithGuards(rw, loc, loss, out), total});
  return success();
}

/// nll_loss_backward(grad_output, self, target, weight?, reduction,
/// ignore_index, total_weight): grad_input[row, target[row]] =
/// weight[target] * -(grad (/ total_weight for mean)), 0 elsewhere.
LogicalResult lowerNllBackward(DLOp op, ValueRange o, PatternRewriter &rw) {
  std::optional<SmallVector<Value>> p = matchTensorParams(
      op, o,
      {{"grad_output", false},
       {"self", false},
       {"target", false},
       {"weight", true},
       {"total_weight", false}});
  if (!p || op.getNumResults() != 1)
    return failure();
  std::optional<NllOperands> n = matchNll(op, (*p)[1], (*p)[2], (*p)[3]);
  if (!n)
    return failure();
  Value grad = (*p)[0], totalWeight = (*p)[4];
  RankedTensorType st = tensorType(n->self), tt = tensorType(n->target);
  RankedTensorType gt = tensorType(grad), out = resultType(op);
  Type et = st.getElementType();
  if (!isCastCompatible(st, out) || tensorType(totalWeight).getRank() != 0 ||
      gt.getElementType() != et ||
      tensorType(totalWeight).getElementType() != et ||
      gt.getRank() != (n->reduction == None ? tt.getRank() : 0))
    return failure();

  Location loc = op.getLoc();
  bool batched = st.getRank() == 2;
  if (batched && (st.isDynamicDim(0) || tt.isDynamicDim(0)))
    guardEqual(rw, loc, tensor::getMixedSize(rw, loc, n->self, 0),
               tensor::getMixedSize(rw, loc, n->target, 0),
               "nll_loss_backward: self and target batch sizes differ");
  MLIRContext *ctx = rw.getContext();
  int64_t rank = st.getRank();
  // Iteration space (rows?, class).
  AffineMap rowMap = batched ? AffineMap::get(2, 0, {getAffineDimExpr(0, ctx)}, ctx)
                             : AffineMap::get(1, 0, {}, ctx);
  AffineMap scalarMap = AffineMap::get(rank, 0, {}, ctx);
  AffineMap gradMap = n->reduction == None ? rowMap : scalarMap;
  RankedTensorType full = RankedTensorType::get(st.getShape(), et);
  Value r = buildGeneric(
      rw, loc, n->self, SmallVector<bool>(rank, false), false,
      {n->self, n->target, grad, totalWeight},
      {rw.getMultiDimIdentityMap(rank), rowMap, gradMap, scalarMap}, {full},
      {},
      [&](OpBuilder &b, Location l, ValueRange ins, ValueRange) {
        NllRow row = nllRow(b, l, *n, ins[1], et);
        Value c = linalg::IndexOp::create(b, l, rank - 1);
        Value hit = arith::AndIOp::create(
            b, l,
            arith::CmpIOp::create(b, l, arith::CmpIPredicate::eq, c, row.cls),
            arith::XOrIOp::create(
                b, l, row.ignored,
                arith::ConstantOp::create(b, l, b.getBoolAttr(true))));
        Value g = ins[2];
        if (n->reduction == Mean)
          g = arith::DivFOp::create(b, l, g, ins[3]);
        Value v = arith::MulFOp::create(b, l, row.weight,
                                        arith::NegFOp::create(b, l, g));
        return SmallVector<Value>{arith::SelectOp::create(
            b, l, hit, v, scalarConstant(b, l, et, 0.0))};
      })[0];
  rw.replaceOp(op, castWithGuards(rw, loc, r, out));
  return success();
}

void addDefault(LoweringRegistry &r, StringRef name, LowerFn fn) {
  r.add(name, fn);
  r.add((name + ".default").str(), fn);
}

} // namespace

void terra::populateLossLowerings(LoweringRegistry &r) {
  addDefault(r, "aten.mse_loss", lowerMseLoss);
  addDefault(r, "aten.mse_loss_backward", lowerMseLossBackward);
  addDefault(r, "aten.smooth_l1_loss", lowerSmoothL1);
  addDefault(r, "aten.smooth_l1_loss_backward", lowerSmoothL1Backward);
  addDefault(r, "aten.binary_cross_entropy_with_logits", lowerBceWithLogits);
  addDefault(r, "aten.nll_loss_forward", lowerNllForward);
  addDefault(r, "aten.nll_loss_backward", lowerNllBackward);
}
