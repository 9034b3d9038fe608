//===- Reduction.cpp - Reductions and softmax -----------------------------===//
//
// sum/mean/amax/amin (all-dims and dim-list forms), max/min of every
// element, max.dim/min.dim with their indices, var/std (and the _mean
// forms), cumsum (a sequential scan), and softmax/log_softmax with their
// backward ops. Each reduction is
// one linalg.generic with reduction iterators over the input's shape, its
// results filled with the reduction's identity; `keepdim` keeps the reduced
// dims as size-1 dims read at index 0. Softmax is the stable three-step form:
// max over `dim`, sum of exp(x - max), then one pointwise generic.
//
// Conventions:
//  - reduction dims are the `dim` arg (an int or a list); negative dims
//    count from the end; an empty list, None (unit) or no `dim` means every
//    dim, as aten does;
//  - `dtype`, `half_to_float` and `input_dtype` are not read: the op's
//    result element type says what comes out, and the input is converted to
//    it before accumulating (integer sums accumulate in the result's int
//    type, like aten's int64 sums; softmax with half_to_float computes in
//    the f32 result type);
//  - float sums, means and softmax are lowered for f32/f64 results only:
//    aten accumulates f16/bf16 in f32, so those stay for the host;
//  - a default overload is registered both as `aten.<op>` and as
//    `aten.<op>.default`.
//
//===----------------------------------------------------------------------===//
#include "Utils.h"

#include "mlir/Dialect/SCF/IR/SCF.h"

using namespace mlir;
using namespace terra;
using namespace terra::lowering;

namespace {

/// Float types computed here: f16/bf16 would need a wider accumulator to
/// match aten (which accumulates them in f32), so they stay for the host.
bool isWideFloat(Type t) { return t.isF32() || t.isF64(); }

/// The `dim` arg of a reduction: an int or a list; absent or None (unit)
/// means every dim (the empty list).
std::optional<SmallVector<int64_t>> dimListArg(DLOp op, StringRef name) {
  Attribute a = op.getArgsAttr() ? op.getArgsAttr().get(name) : nullptr;
  if (!a || isa<UnitAttr>(a))
    return SmallVector<int64_t>{};
  return getIntListArg(op, name);
}

/// The single reduced dim of a softmax-like op or max.dim as a mask.
std::optional<SmallVector<bool>> singleDimMask(DLOp op, int64_t rank) {
  std::optional<int64_t> dim = getIntArg(op, "dim");
  if (!dim)
    return std::nullopt;
  return reductionMask({*dim}, rank);
}

Value add(OpBuilder &b, Location l, Value x, Value y) {
  return isFloat(x.getType()) ? Value(arith::AddFOp::create(b, l, x, y))
                              : Value(arith::AddIOp::create(b, l, x, y));
}

enum class Kind { Sum, Mean, Max, Min };

/// sum, mean, amax, amin over the dims of `mask` (`allDims`: the
/// `.default` overloads, which have no dim or keepdim).
template <Kind K>
LogicalResult lowerReduce(DLOp op, ValueRange o, PatternRewriter &rw,
                          bool allDims) {
  // 1. Static checks.
  if (o.size() != 1 || op.getNumResults() != 1)
    return failure();
  RankedTensorType in = tensorType(o[0]), out = resultType(op);
  Type et = out.getElementType();
  std::optional<SmallVector<int64_t>> dims =
      allDims ? SmallVector<int64_t>{} : dimListArg(op, "dim");
  if (!dims)
    return failure();
  std::optional<SmallVector<bool>> mask = reductionMask(*dims, in.getRank());
  bool keepdim = !allDims && getBoolArg(op, "keepdim").value_or(false);
  if (!mask || et.isInteger(1))
    return failure();
  if (K == Kind::Mean && !isFloat(et))
    return failure();
  if ((K == Kind::Sum || K == Kind::Mean) && isFloat(et) && !isWideFloat(et))
    return failure();
  if ((K == Kind::Max || K == Kind::Min) && et != in.getElementType())
    return failure();
  RankedTensorType red = reducedType(in, *mask, keepdim, et);
  if (!isCastCompatible(red, out))
    return failure();

  // 3./4. Init with the identity and reduce.
  Location loc = op.getLoc();
  Value init = K == Kind::Max   ? extremeConstant(rw, loc, et, true)
               : K == Kind::Min ? extremeConstant(rw, loc, et, false)
                                : scalarConstant(rw, loc, et, 0.0);
  AffineMap id = rw.getMultiDimIdentityMap(in.getRank());
  Value r = buildGeneric(
      rw, loc, o[0], *mask, keepdim, o[0], {id}, {red}, init,
      [&](OpBuilder &b, Location l, ValueRange ins, ValueRange acc) {
        Value x = castScalar(b, l, ins[0], et);
        bool f = isFloat(et);
        Value n;
        switch (K) {
        case Kind::Sum:
        case Kind::Mean:
          n = add(b, l, acc[0], x);
          break;
        case Kind::Max: // maximumf propagates NaN like aten.
          n = f ? Value(arith::MaximumFOp::create(b, l, acc[0], x))
                : Value(arith::MaxSIOp::create(b, l, acc[0], x));
          break;
        case Kind::Min:
          n = f ? Value(arith::MinimumFOp::create(b, l, acc[0], x))
                : Value(arith::MinSIOp::create(b, l, acc[0], x));
          break;
        }
        return SmallVector<Value>{n};
      })[0];
  if (K == Kind::Mean) {
    Value count = countElements(rw, loc, o[0], *mask, et);
    r = buildGeneric(rw, loc, r, SmallVector<bool>(red.getRank(), false),
                     false, r, {rw.getMultiDimIdentityMap(red.getRank())},
                     {red}, {},
                     [&](OpBuilder &b, Location l, ValueRange ins, ValueRange) {
                       return SmallVector<Value>{
                           arith::DivFOp::create(b, l, ins[0], count)};
                     })[0];
  }
  rw.replaceOp(op, castWithGuards(rw, loc, r, out));
  return success();
}

/// max.dim / min.dim: values and the index of the first extreme element
/// (NaN counts as the extreme, as in aten).
template <bool IsMax>
LogicalResult lowerMaxMinDim(DLOp op, ValueRange o, PatternRewriter &rw) {
  if (o.size() != 1 || op.getNumResults() != 2)
    return failure();
  RankedTensorType in = tensorType(o[0]);
  RankedTensorType outV = resultType(op, 0), outI = resultType(op, 1);
  Type et = in.getElementType();
  std::optional<SmallVector<bool>> mask = singleDimMask(op, in.getRank());
  bool keepdim = getBoolArg(op, "keepdim").value_or(false);
  if (!mask || et.isInteger(1) || !outI.getElementType().isInteger(64) ||
      in.getRank() == 0)
    return failure();
  RankedTensorType redV = reducedType(in, *mask, keepdim, et);
  RankedTensorType redI = reducedType(in, *mask, keepdim, outI.getElementType());
  if (!isCastCompatible(redV, outV) || !isCastCompatible(redI, outI))
    return failure();
  int64_t dim = llvm::find(*mask, true) - mask->begin();

  Location loc = op.getLoc();
  Value initV = extremeConstant(rw, loc, et, IsMax);
  Value initI = scalarConstant(rw, loc, rw.getI64Type(), 0);
  SmallVector<Value> r = buildGeneric(
      rw, loc, o[0], *mask, keepdim, o[0],
      {rw.getMultiDimIdentityMap(in.getRank())}, {redV, redI},
      {initV, initI},
      [&](OpBuilder &b, Location l, ValueRange ins, ValueRange acc) {
        Value x = ins[0];
        Value better;
        if (isFloat(et)) {
          Value strict = arith::CmpFOp::create(
              b, l,
              IsMax ? arith::CmpFPredicate::OGT : arith::CmpFPredicate::OLT,
              x, acc[0]);
          Value xNan = arith::CmpFOp::create(b, l, arith::CmpFPredicate::UNO,
                                             x, x);
          Value accNum = arith::CmpFOp::create(
              b, l, arith::CmpFPredicate::ORD, acc[0], acc[0]);
          better = arith::OrIOp::create(
              b, l, strict, arith::AndIOp::create(b, l, xNan, accNum));
        } else {
          better = arith::CmpIOp::create(
              b, l,
              IsMax ? arith::CmpIPredicate::sgt : arith::CmpIPredicate::slt, x,
              acc[0]);
        }
        // The first element always wins, so the all-(-inf) case picks it.
        Value idx = linalg::IndexOp::create(b, l, dim);
        Value first = arith::CmpIOp::create(
            b, l, arith::CmpIPredicate::eq, idx,
            arith::ConstantIndexOp::create(b, l, 0));
        better = arith::OrIOp::create(b, l, better, first);
        Value idx64 = arith::IndexCastOp::create(b, l, b.getI64Type(), idx);
        return SmallVector<Value>{
            arith::SelectOp::create(b, l, better, x, acc[0]),
            arith::SelectOp::create(b, l, better, idx64, acc[1])};
      });
  rw.replaceOp(op, {castWithGuards(rw, loc, r[0], outV),
                    castWithGuards(rw, loc, r[1], outI)});
  return success();
}

/// softmax / log_softmax over `dim`, computed in the result element type.
template <bool IsLog>
LogicalResult lowerSoftmax(DLOp op, ValueRange o, PatternRewriter &rw) {
  if (o.size() != 1 || op.getNumResults() != 1)
    return failure();
  RankedTensorType in = tensorType(o[0]), out = resultType(op);
  Type et = out.getElementType();
  std::optional<SmallVector<bool>> mask = singleDimMask(op, in.getRank());
  if (!mask || !isWideFloat(et) || !isFloat(in.getElementType()))
    return failure();
  RankedTensorType full = RankedTensorType::get(in.getShape(), et);
  if (!isCastCompatible(full, out))
    return failure();

  Location loc = op.getLoc();
  MLIRContext *ctx = rw.getContext();
  int64_t rank = in.getRank();
  RankedTensorType kept = reducedType(in, *mask, true, et);
  AffineMap id = rw.getMultiDimIdentityMap(rank);
  AffineMap keptMap = reducedMap(ctx, *mask, true);
  Value max = buildGeneric(
      rw, loc, o[0], *mask, true, o[0], {id}, {kept},
      extremeConstant(rw, loc, et, true),
      [&](OpBuilder &b, Location l, ValueRange ins, ValueRange acc) {
        Value x = castScalar(b, l, ins[0], et);
        return SmallVector<Value>{arith::MaximumFOp::create(b, l, acc[0], x)};
      })[0];
  Value sum = buildGeneric(
      rw, loc, o[0], *mask, true, {o[0], max}, {id, keptMap}, {kept},
      scalarConstant(rw, loc, et, 0.0),
      [&](OpBuilder &b, Location l, ValueRange ins, ValueRange acc) {
        Value x = castScalar(b, l, ins[0], et);
        Value e = math::ExpOp::create(b, l, arith::SubFOp::create(b, l, x, ins[1]));
        return SmallVector<Value>{arith::AddFOp::create(b, l, acc[0], e)};
      })[0];
  SmallVector<bool> none(rank, false);
  Value r = buildGeneric(
      rw, loc, o[0], none, false, {o[0], max, sum}, {id, keptMap, keptMap},
      {full}, {},
      [&](OpBuilder &b, Location l, ValueRange ins, ValueRange) {
        Value x = castScalar(b, l, ins[0], et);
        Value shifted = arith::SubFOp::create(b, l, x, ins[1]);
        Value v = IsLog ? Value(arith::SubFOp::create(
                              b, l, shifted, math::LogOp::create(b, l, ins[2])))
                        : Value(arith::DivFOp::create(
                              b, l, math::ExpOp::create(b, l, shifted), ins[2]));
        return SmallVector<Value>{v};
      })[0];
  rw.replaceOp(op, castWithGuards(rw, loc, r, out));
  return success();
}

/// _softmax_backward_data: out * (g - sum(g * out)), and
/// _log_softmax_backward_data: g - exp(out) * sum(g), sums over `dim`.
template <bool IsLog>
LogicalResult lowerSoftmaxBackward(DLOp op, ValueRange o,
                                   PatternRewriter &rw) {
  if (o.size() != 2 || op.getNumResults() != 1)
    return failure();
  RankedTensorType g = tensorType(o[0]), y = tensorType(o[1]);
  RankedTensorType out = resultType(op);
  Type et = out.getElementType();
  std::optional<SmallVector<bool>> mask = singleDimMask(op, g.getRank());
  if (!mask || !isWideFloat(et) || !isWideFloat(g.getElementType()) ||
      !isWideFloat(y.getElementType()))
    return failure();
  RankedTensorType full = RankedTensorType::get(g.getShape(), et);
  if (!isCastCompatible(full, out) ||
      !isCastCompatible(full, RankedTensorType::get(y.getShape(), et)))
    return failure();

  Location loc = op.getLoc();
  int64_t rank = g.getRank();
  for (int64_t d = 0; d < rank; ++d)
    if (g.isDynamicDim(d) || y.isDynamicDim(d))
      guardEqual(rw, loc, tensor::getMixedSize(rw, loc, o[0], d),
                 tensor::getMixedSize(rw, loc, o[1], d),
                 "softmax backward: grad and output shapes differ");
  RankedTensorType kept = reducedType(g, *mask, true, et);
  AffineMap id = rw.getMultiDimIdentityMap(rank);
  AffineMap keptMap = reducedMap(rw.getContext(), *mask, true);
  // log_softmax only sums the grad.
  ValueRange sumIns = IsLog ? o.take_front() : o;
  SmallVector<AffineMap> sumMaps(sumIns.size(), id);
  Value sum = buildGeneric(
      rw, loc, o[0], *mask, true, sumIns, sumMaps, {kept},
      scalarConstant(rw, loc, et, 0.0),
      [&](OpBuilder &b, Location l, ValueRange ins, ValueRange acc) {
        Value gv = castScalar(b, l, ins[0], et);
        Value term = IsLog ? gv
                           : Value(arith::MulFOp::create(
                                 b, l, gv, castScalar(b, l, ins[1], et)));
        return SmallVector<Value>{arith::AddFOp::create(b, l, acc[0], term)};
      })[0];
  Value r = buildGeneric(
      rw, loc, o[0], SmallVector<bool>(rank, false), false,
      {o[0], o[1], sum}, {id, id, keptMap}, {full}, {},
      [&](OpBuilder &b, Location l, ValueRange ins, ValueRange) {
        Value gv = castScalar(b, l, ins[0], et);
        Value yv = castScalar(b, l, ins[1], et);
        Value v;
        if (IsLog)
          v = arith::SubFOp::create(
              b, l, gv,
              arith::MulFOp::create(b, l, math::ExpOp::create(b, l, yv), ins[2]));
        else
          v = arith::MulFOp::create(b, l, yv,
                                    arith::SubFOp::create(b, l, gv, ins[2]));
        return SmallVector<Value>{v};
      })[0];
  rw.replaceOp(op, castWithGuards(rw, loc, r, out));
  return success();
}

/// var / std (the correction overloads, which var.dim, var(unbiased) and
/// the std forms call) and var_mean / std_mean: the sum of squared
/// deviations from the mean over the dims, divided by max(N - correction,
/// 0) as aten divides (correction absent or None: 1), and its square root
/// for std; the `_mean` forms also return the mean. Two passes over the
/// input (the mean, then the deviations), f32/f64 only.
template <bool Sqrt, bool WithMean>
LogicalResult lowerVarStd(DLOp op, ValueRange o, PatternRewriter &rw) {
  if (o.size() != 1 || op.getNumResults() != (WithMean ? 2u : 1u))
    return failure();
  RankedTensorType in = tensorType(o[0]), out = resultType(op);
  Type et = out.getElementType();
  if (!isWideFloat(et) || in.getElementType() != et)
    return failure();
  std::optional<SmallVector<int64_t>> dims = dimListArg(op, "dim");
  if (!dims)
    return failure();
  std::optional<SmallVector<bool>> mask = reductionMask(*dims, in.getRank());
  if (!mask)
    return failure();
  bool keepdim = getBoolArg(op, "keepdim").value_or(false);
  double correction = 1.0;
  Attribute c = op.getArgsAttr() ? op.getArgsAttr().get("correction") : nullptr;
  if (c && !isa<UnitAttr>(c)) {
    std::optional<double> v = getFloatArg(op, "correction");
    if (!v) // a fed correction: the host's
      return failure();
    correction = *v;
  }
  RankedTensorType red = reducedType(in, *mask, keepdim, et);
  if (!isCastCompatible(red, out) ||
      (WithMean && !isCastCompatible(red, resultType(op, 1))))
    return failure();

  Location loc = op.getLoc();
  MLIRContext *ctx = rw.getContext();
  AffineMap id = rw.getMultiDimIdentityMap(in.getRank());
  AffineMap redId = rw.getMultiDimIdentityMap(red.getRank());
  SmallVector<bool> none(red.getRank(), false);
  Value zero = scalarConstant(rw, loc, et, 0.0);
  Value count = countElements(rw, loc, o[0], *mask, et);
  Value sum = buildGeneric(
      rw, loc, o[0], *mask, keepdim, o[0], {id}, {red}, zero,
      [&](OpBuilder &b, Location l, ValueRange ins, ValueRange acc) {
        return SmallVector<Value>{arith::AddFOp::create(b, l, acc[0], ins[0])};
      })[0];
  Value mean = buildGeneric(
      rw, loc, sum, none, false, sum, {redId}, {red}, {},
      [&](OpBuilder &b, Location l, ValueRange ins, ValueRange) {
        return SmallVector<Value>{arith::DivFOp::create(b, l, ins[0], count)};
      })[0];
  // The mean read at each element's reduced position (a projection when
  // the reduced dims are dropped).
  Value squares = buildGeneric(
      rw, loc, o[0], *mask, keepdim, {o[0], mean},
      {id, reducedMap(ctx, *mask, keepdim)}, {red}, zero,
      [&](OpBuilder &b, Location l, ValueRange ins, ValueRange acc) {
        Value d = arith::SubFOp::create(b, l, ins[0], ins[1]);
        return SmallVector<Value>{arith::AddFOp::create(
            b, l, acc[0], arith::MulFOp::create(b, l, d, d))};
      })[0];
  Value denom = arith::MaximumFOp::create(
      rw, loc,
      arith::SubFOp::create(rw, loc, count,
                            scalarConstant(rw, loc, et, correction)),
      zero);
  Value r =
      buildGeneric(rw, loc, squares, none, false, squares, {redId}, {red}, {},
                   [&](OpBuilder &b, Location l, ValueRange ins, ValueRange) {
                     Value v = arith::DivFOp::create(b, l, ins[0], denom);
                     if (Sqrt)
                       v = math::SqrtOp::create(b, l, v);
                     return SmallVector<Value>{v};
                   })[0];
  SmallVector<Value> results{castWithGuards(rw, loc, r, out)};
  if (WithMean)
    results.push_back(castWithGuards(rw, loc, mean, resultType(op, 1)));
  rw.replaceOp(op, results);
  return success();
}

/// cumsum(self, dim, dtype): a sequential scan along `dim` (an scf.for
/// whose carry is the running sum of one slice), in the order aten's CPU
/// kernel adds and in its accumulator type (double for float: each output
/// is the double sum rounded), so the sums are aten's exactly; integer sums
/// wrap like aten's. A 0-d input is its own sum.
LogicalResult lowerCumsum(DLOp op, ValueRange o, PatternRewriter &rw) {
  if (o.size() != 1)
    return failure();
  RankedTensorType in = tensorType(o[0]), rt = resultType(op);
  Type et = rt.getElementType();
  if (et.isInteger(1) || (isFloat(et) && !isWideFloat(et)) ||
      in.getRank() != rt.getRank())
    return failure();
  Type acc = et.isF32() ? Type(rw.getF64Type()) : et;
  Location loc = op.getLoc();
  RankedTensorType full = in.clone(et);
  int64_t rank = in.getRank();
  if (rank == 0) {
    rw.replaceOp(
        op, castWithGuards(rw, loc, convertElements(rw, loc, o[0], et), rt));
    return success();
  }
  std::optional<int64_t> dimArg = getIntArg(op, "dim");
  if (!dimArg || *dimArg < -rank || *dimArg >= rank)
    return failure();
  int64_t dim = *dimArg < 0 ? *dimArg + rank : *dimArg;
  Value x = o[0];
  SmallVector<OpFoldResult> sliceSizes = tensor::getMixedSizes(rw, loc, x);
  sliceSizes[dim] = rw.getIndexAttr(1);
  SmallVector<int64_t> sliceShape(full.getShape());
  sliceShape[dim] = 1;
  RankedTensorType inSliceT = in.clone(sliceShape);
  RankedTensorType accSliceT = full.clone(sliceShape, acc);
  SmallVector<Value> dyn, sliceDyn;
  for (int64_t d = 0; d < rank; ++d) {
    if (!full.isDynamicDim(d))
      continue;
    Value n = tensor::DimOp::create(rw, loc, x, d);
    dyn.push_back(n);
    if (d != dim)
      sliceDyn.push_back(n);
  }
  Value out = tensor::EmptyOp::create(rw, loc, full, dyn);
  Value carry =
      linalg::FillOp::create(
          rw, loc, scalarConstant(rw, loc, acc, 0.0),
          ValueRange{tensor::EmptyOp::create(rw, loc, accSliceT, sliceDyn)})
          .getResult(0);
  Value zero = arith::ConstantIndexOp::create(rw, loc, 0);
  Value one = arith::ConstantIndexOp::create(rw, loc, 1);
  Value n = tensor::DimOp::create(rw, loc, x, dim);
  auto loop = scf::ForOp::create(
      rw, loc, zero, n, one, ValueRange{out, carry},
      [&](OpBuilder &b, Location l, Value i, ValueRange state) {
        SmallVector<OpFoldResult> offsets(rank, b.getIndexAttr(0));
        SmallVector<OpFoldResult> strides(rank, b.getIndexAttr(1));
        offsets[dim] = i;
        Value slice = tensor::ExtractSliceOp::create(b, l, inSliceT, x, offsets,
                                                     sliceSizes, strides);
        Value sum = buildElementwise(
            b, l, accSliceT, {state[1], slice},
            [](OpBuilder &nb, Location nl, ValueRange a) {
              return isFloat(a[0].getType())
                         ? Value(arith::AddFOp::create(nb, nl, a[0], a[1]))
                         : Value(arith::AddIOp::create(nb, nl, a[0], a[1]));
            });
        Value rounded = convertElements(b, l, sum, et);
        Value next = tensor::InsertSliceOp::create(
            b, l, rounded, state[0], offsets, sliceSizes, strides);
        scf::YieldOp::create(b, l, ValueRange{next, sum});
      });
  rw.replaceOp(op, castWithGuards(rw, loc, loop.getResult(0), rt));
  return success();
}

/// Registers a default overload under both of its spellings.
void addDefault(LoweringRegistry &r, StringRef name, LowerFn fn) {
  r.add(name, fn);
  r.add((name + ".default").str(), fn);
}

} // namespace

void terra::populateReductionLowerings(LoweringRegistry &r) {
  r.add("aten.sum.dim_IntList", [](DLOp op, ValueRange o, PatternRewriter &rw) {
    return lowerReduce<Kind::Sum>(op, o, rw, false);
  });
  addDefault(r, "aten.sum", [](DLOp op, ValueRange o, PatternRewriter &rw) {
    return lowerReduce<Kind::Sum>(op, o, rw, true);
  });
  r.add("aten.mean.dim", [](DLOp op, ValueRange o, PatternRewriter &rw) {
    return lowerReduce<Kind::Mean>(op, o, rw, false);
  });
  addDefault(r, "aten.mean", [](DLOp op, ValueRange o, PatternRewriter &rw) {
    return lowerReduce<Kind::Mean>(op, o, rw, true);
  });
  addDefault(r, "aten.amax", [](DLOp op, ValueRange o, PatternRewriter &rw) {
    return lowerReduce<Kind::Max>(op, o, rw, false);
  });
  addDefault(r, "aten.amin", [](DLOp op, ValueRange o, PatternRewriter &rw) {
    return lowerReduce<Kind::Min>(op, o, rw, false);
  });
  // max/min without a dim: the extreme of every element.
  addDefault(r, "aten.max", [](DLOp op, ValueRange o, PatternRewriter &rw) {
    return lowerReduce<Kind::Max>(op, o, rw, true);
  });
  addDefault(r, "aten.min", [](DLOp op, ValueRange o, PatternRewriter &rw) {
    return lowerReduce<Kind::Min>(op, o, rw, true);
  });
  addDefault(r, "aten.cumsum", lowerCumsum);
  r.add("aten.var.correction", lowerVarStd<false, false>);
  r.add("aten.std.correction", lowerVarStd<true, false>);
  r.add("aten.var_mean.correction", lowerVarStd<false, true>);
  r.add("aten.std_mean.correction", lowerVarStd<true, true>);
  r.add("aten.max.dim", lowerMaxMinDim<true>);
  r.add("aten.min.dim", lowerMaxMinDim<false>);
  addDefault(r, "aten._softmax", lowerSoftmax<false>);
  addDefault(r, "aten._log_softmax", lowerSoftmax<true>);
  addDefault(r, "aten._softmax_backward_data", lowerSoftmaxBackward<false>);
  addDefault(r, "aten._log_softmax_backward_data", lowerSoftmaxBackward<true>);
}
