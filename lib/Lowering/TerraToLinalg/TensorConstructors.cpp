//===- TensorConstructors.cpp - zeros, ones, full, arange, fill -----------===//
//
// Constructors take their shape and dtype from the result type: a
// linalg.fill of a tensor.empty (or a linalg.generic over linalg.index for
// arange). Dynamic dims come from the `self` operand for the *_like, new_*
// and fill ops, else from the `size` arg (whose entries may be symbolic:
// dims of an operand); an op whose dynamic extent is
// known to neither stays for the host. empty/empty_like are zero-filled:
// their contents are unspecified, and zeros keep runs deterministic.
//
//===----------------------------------------------------------------------===//
#include "Utils.h"

using namespace mlir;
using namespace terra;
using namespace terra::lowering;

namespace {

/// Dynamic sizes of the result: from `like` when it has the result's rank,
/// else from the int-list arg `sizeArg`. Returns false if neither knows.
bool dynamicSizes(OpBuilder &b, Location loc, DLOp op, Value like,
                  StringRef sizeArg, SmallVector<Value> &dyn) {
  RankedTensorType rt = resultType(op);
  if (like && cast<RankedTensorType>(like.getType()).getRank() == rt.getRank()) {
    for (int64_t d = 0; d < rt.getRank(); ++d)
      if (rt.isDynamicDim(d))
        dyn.push_back(tensor::DimOp::create(b, loc, like, d));
    return true;
  }
  if (rt.hasStaticShape())
    return true;
  std::optional<SmallVector<SizeArg>> size = getSizeListArg(op, sizeArg);
  if (!size || int64_t(size->size()) != rt.getRank())
    return false;
  for (int64_t d = 0; d < rt.getRank(); ++d)
    if (rt.isDynamicDim(d) && !(*size)[d].hasSize())
      return false;
  // A symbolic size is a dim of an operand (new_zeros(x, [x.size(0), 4])).
  for (int64_t d = 0; d < rt.getRank(); ++d)
    if (rt.isDynamicDim(d))
      dyn.push_back(sizeValue(b, loc, (*size)[d], op));
  return true;
}

/// The operand whose dims the result shares: `self` of *_like/zero/fill,
/// none for new_* (their size is the `size` arg) and for factories.
Value shapeSource(DLOp op, ValueRange o) {
  if (o.empty() || op.getName().starts_with("aten.new_"))
    return nullptr;
  return o[0];
}

/// The fill scalar `name` (or 0-d operand `index`) as element type `et`.
/// Bool results go through f64 so that any nonzero value is true
/// (scalarArgOrOperand would truncate an int attr to i1).
Value fillScalar(OpBuilder &b, DLOp op, ValueRange o, unsigned index,
                 StringRef name, Type et) {
  Type via = et.isInteger(1) ? b.getF64Type() : et;
  Value v = scalarArgOrOperand(b, op, o, index, name, via);
  return v ? castScalar(b, op.getLoc(), v, et) : v;
}

/// Replaces `op` with its result type filled with `value` (cast to the
/// element type); `like` gives dynamic sizes (see dynamicSizes).
LogicalResult replaceWithFill(DLOp op, Value like, Value value,
                              PatternRewriter &rw) {
  if (op.getNumResults() != 1 || !value)
    return failure();
  Location loc = op.getLoc();
  RankedTensorType rt = resultType(op);
  SmallVector<Value> dyn;
  if (!dynamicSizes(rw, loc, op, like, "size", dyn))
    return failure();
  Value init = tensor::EmptyOp::create(rw, loc, rt, dyn);
  value = castScalar(rw, loc, value, rt.getElementType());
  rw.replaceOp(op, linalg::FillOp::create(rw, loc, value, init).getResult(0));
  return success();
}

/// zeros/ones/empty/new_zeros/... (constant fill, shape from the type).
template <int FillValue>
LogicalResult lowerConstantFill(DLOp op, ValueRange o, PatternRewriter &rw) {
  Type et = resultType(op).getElementType();
  Value v = scalarConstant(rw, op.getLoc(), et, FillValue);
  return replaceWithFill(op, shapeSource(op, o), v, rw);
}

/// full(size, fill_value), full_like(self, fill_value),
/// new_full(self, size, fill_value).
LogicalResult lowerFull(DLOp op, ValueRange o, PatternRewriter &rw) {
  Type et = resultType(op).getElementType();
  Value v = fillScalar(rw, op, o, o.empty() ? 0 : 1, "fill_value", et);
  return replaceWithFill(op, shapeSource(op, o), v, rw);
}

/// fill.Scalar / fill_.Scalar (value arg), fill.Tensor / fill_.Tensor (0-d
/// value operand).
LogicalResult lowerFillOp(DLOp op, ValueRange o, PatternRewriter &rw) {
  if (o.empty())
    return failure();
  Type et = resultType(op).getElementType();
  Value v = fillScalar(rw, op, o, 1, "value", et);
  return replaceWithFill(op, o[0], v, rw);
}

/// scalar_tensor(s): a 0-d tensor.
LogicalResult lowerScalarTensor(DLOp op, ValueRange o, PatternRewriter &rw) {
  if (!o.empty() || resultType(op).getRank() != 0)
    return failure();
  Type et = resultType(op).getElementType();
  return replaceWithFill(op, Value(),
                         fillScalar(rw, op, o, 0, "s", et), rw);
}

/// arange(end), arange.start(start, end), arange.start_step(start, end,
/// step): out[i] = start + i * step, computed like PyTorch's CPU kernel in
/// double for floating results and in int64 when every bound is an integer.
LogicalResult lowerArange(DLOp op, ValueRange o, PatternRewriter &rw) {
  RankedTensorType rt = resultType(op);
  if (!o.empty() || rt.getRank() != 1)
    return failure();
  Location loc = op.getLoc();
  DictionaryAttr args = op.getArgsAttr();
  if (!args)
    return failure();
  Attribute startA = args.get("start"), endA = args.get("end"),
            stepA = args.get("step");
  if (!endA)
    return failure();
  std::optional<double> start = startA ? getFloatArg(op, "start") : 0.0;
  // A symbolic end (a dim of a shape operand: `arange(x.size(1))`) needs
  // int start and step; the length is then computed at run time.
  std::optional<SizeArg> symEnd = getSizeArg(op, "end");
  if (symEnd && !symEnd->isSymbolic())
    symEnd.reset();
  std::optional<double> end =
      symEnd ? std::optional<double>(0.0) : getFloatArg(op, "end");
  std::optional<double> step = stepA ? getFloatArg(op, "step") : 1.0;
  if (!start || !end || !step || *step == 0.0)
    return failure();
  auto isInt = [](Attribute a) { return !a || isa<IntegerAttr, DimAttr>(a); };
  bool intMath = !isFloat(rt.getElementType()) && isInt(startA) &&
                 isInt(endA) && isInt(stepA);
  if (symEnd && !(isInt(startA) && isInt(stepA) && *step > 0))
    return failure();
  SmallVector<Value> dyn;
  if (symEnd) {
    // length = max(0, ceil((end - start) / step))
    Value e = sizeValue(rw, loc, *symEnd, op);
    Value s0 = arith::ConstantIndexOp::create(rw, loc, int64_t(*start));
    Value st = arith::ConstantIndexOp::create(rw, loc, int64_t(*step));
    Value span = arith::SubIOp::create(rw, loc, e, s0);
    Value n = arith::CeilDivSIOp::create(rw, loc, span, st);
    n = arith::MaxSIOp::create(rw, loc, n,
                               arith::ConstantIndexOp::create(rw, loc, 0));
    if (rt.isDynamicDim(0))
      dyn.push_back(n);
    else
      guardEqual(rw, loc, n, rw.getIndexAttr(rt.getDimSize(0)),
                 "arange: length does not match the result type");
  } else if (rt.isDynamicDim(0)) {
    double n = std::ceil((*end - *start) / *step);
    if (n < 0)
      return failure();
    dyn.push_back(arith::ConstantIndexOp::create(rw, loc, int64_t(n)));
  }
  Value init = tensor::EmptyOp::create(rw, loc, rt, dyn);
  Type et = rt.getElementType();
  auto g = linalg::GenericOp::create(
      rw, loc, rt, ValueRange{}, init,
      SmallVector<AffineMap>{rw.getMultiDimIdentityMap(1)},
      SmallVector<utils::IteratorType>{utils::IteratorType::parallel},
      [&](OpBuilder &b, Location l, ValueRange) {
        Value i = linalg::IndexOp::create(b, l, 0);
        Type i64 = b.getI64Type(), f64 = b.getF64Type();
        i = arith::IndexCastOp::create(b, l, i64, i);
        Value v;
        if (intMath) {
          int64_t s0 = startA ? cast<IntegerAttr>(startA).getInt() : 0;
          int64_t st = stepA ? cast<IntegerAttr>(stepA).getInt() : 1;
          v = arith::AddIOp::create(
              b, l, arith::ConstantOp::create(b, l, b.getI64IntegerAttr(s0)),
              arith::MulIOp::create(
                  b, l, i,
                  arith::ConstantOp::create(b, l, b.getI64IntegerAttr(st))));
        } else {
          Value fi = arith::SIToFPOp::create(b, l, f64, i);
          v = arith::AddFOp::create(
              b, l, scalarConstant(b, l, f64, *start),
              arith::MulFOp::create(b, l, scalarConstant(b, l, f64, *step),
                                    fi));
        }
        linalg::YieldOp::create(b, l, castScalar(b, l, v, et));
      });
  rw.replaceOp(op, g.getResult(0));
  return success();
}

} // namespace

void terra::populateTensorConstructorsLowerings(LoweringRegistry &r) {
  for (StringRef n :
       {"aten.zeros", "aten.zeros_like", "aten.new_zeros", "aten.zero",
        "aten.zero_", "aten.empty.memory_format", "aten.empty_like",
        "aten.new_empty", "aten.empty_strided", "aten.new_empty_strided"})
    r.add(n, rollBackOnFailure<lowerConstantFill<0>>);
  for (StringRef n : {"aten.ones", "aten.ones_like", "aten.new_ones"})
    r.add(n, rollBackOnFailure<lowerConstantFill<1>>);
  for (StringRef n : {"aten.full", "aten.full_like", "aten.new_full"})
    r.add(n, rollBackOnFailure<lowerFull>);
  for (StringRef n : {"aten.fill.Scalar", "aten.fill_.Scalar",
                      "aten.fill.Tensor", "aten.fill_.Tensor"})
    r.add(n, rollBackOnFailure<lowerFillOp>);
  r.add("aten.scalar_tensor", rollBackOnFailure<lowerScalarTensor>);
  for (StringRef n : {"aten.arange", "aten.arange.start",
                      "aten.arange.start_step"})
    r.add(n, rollBackOnFailure<lowerArange>);
}
