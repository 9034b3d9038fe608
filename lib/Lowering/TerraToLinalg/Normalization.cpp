//===- Normalization.cpp - Layer and batch normalization ------------------===//
//
// native_layer_norm and native_batch_norm with their backward ops, as
// linalg.generic reductions (two-pass mean and biased variance) and one
// pointwise generic per output tensor. Per-row statistics (layer norm) are
// read through maps that pin the normalized dims to 0; per-channel ones
// (batch norm, dim 1) through maps that keep only dim 1.
//
// The formulas are PyTorch's: var is biased (divided by the element count),
// rstd = 1 / sqrt(var + eps), out = (x - mean) * rstd * weight + bias.
//
// Conventions (see Loss.cpp and matchTensorParams):
//  - tensor parameters are operands in schema order; a None optional tensor
//    is not an operand and is marked `name = unit` in the args (with no
//    mark, missing operands are the last optional parameters);
//  - non-tensor parameters are args: normalized_shape, eps, training,
//    momentum, train, output_mask;
//  - backward ops: with 3 results every gradient is computed; with fewer,
//    the results are the gradients whose output_mask entry is true, in
//    order (aten returns None for the others);
//  - native_batch_norm (training) updates running_mean/running_var in place
//    in aten. Value semantics cannot express that with 3 results: the
//    running stats are then left alone. An op with 5 results gets the
//    updated running stats as results 3 and 4 (the functional form,
//    momentum * batch stat + (1 - momentum) * running stat, unbiased
//    variance); the caller writes them back.
//  - native_batch_norm in eval mode returns empty (size 0) save_mean and
//    save_invstd, as aten on CPU does.
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

/// Which of a backward op's gradients are results: with 3 results, all;
/// otherwise those set in output_mask. Returns, for each gradient, its
/// result index or -1.
std::optional<SmallVector<int>> gradientResults(DLOp op) {
  std::optional<SmallVector<bool>> mask = boolListArg(op, "output_mask", 3);
  if (!mask)
    return std::nullopt;
  SmallVector<int> idx(3, -1);
  unsigned n = op.getNumResults(), k = 0;
  for (int i = 0; i < 3; ++i)
    if (n == 3 || (*mask)[i])
      idx[i] = k++;
  if (k != n)
    return std::nullopt;
  return idx;
}

/// A map from the iteration space of rank `rank` to dims [from, rank).
AffineMap trailingMap(MLIRContext *ctx, int64_t rank, int64_t from) {
  SmallVector<AffineExpr> e;
  for (int64_t d = from; d < rank; ++d)
    e.push_back(getAffineDimExpr(d, ctx));
  return AffineMap::get(rank, 0, e, ctx);
}

/// Whether `v` (if present) is a float tensor of element type `et` whose
/// shape agrees with `shape`.
bool fits(Value v, ArrayRef<int64_t> shape, Type et) {
  if (!v)
    return true;
  return isCastCompatible(tensorType(v), RankedTensorType::get(shape, et));
}

Value cst(OpBuilder &b, Location l, Type t, double v) {
  return scalarConstant(b, l, t, v);
}

Value rsqrtEps(OpBuilder &b, Location l, Value var, Value eps) {
  Type t = var.getType();
  return arith::DivFOp::create(
      b, l, cst(b, l, t, 1.0),
      math::SqrtOp::create(b, l, arith::AddFOp::create(b, l, var, eps)));
}

/// A pointwise generic over `source`'s shape (all-parallel buildGeneric).
Value pointwise(OpBuilder &b, Location loc, Value source, ValueRange inputs,
                ArrayRef<AffineMap> maps, RankedTensorType type,
                const std::function<Value(OpBuilder &, Location, ValueRange)> &fn) {
  int64_t rank = tensorType(source).getRank();
  return buildGeneric(b, loc, source, SmallVector<bool>(rank, false), false,
                      inputs, maps, {type}, {},
                      [&](OpBuilder &nb, Location l, ValueRange ins,
                          ValueRange) {
                        return SmallVector<Value>{fn(nb, l, ins)};
                      })[0];
}

//===----------------------------------------------------------------------===//
// Layer norm
//===----------------------------------------------------------------------===//

/// The normalized dims of a layer norm op: the last normalized_shape.size()
/// dims of `input`, which must agree with normalized_shape.
std::optional<int64_t> layerNormAxis(DLOp op, RankedTensorType input) {
  std::optional<SmallVector<int64_t>> ns =
      getIntListArg(op, "normalized_shape");
  if (!ns || int64_t(ns->size()) > input.getRank())
    return std::nullopt;
  int64_t axis = input.getRank() - ns->size();
  for (size_t i = 0; i < ns->size(); ++i) {
    int64_t s = input.getDimSize(axis + i);
    if (!ShapedType::isDynamic(s) && s != (*ns)[i])
      return std::nullopt;
  }
  return axis;
}

/// native_layer_norm(input, normalized_shape, weight?, bias?, eps)
///   -> (out, mean, rstd), mean/rstd of shape input[:axis] + [1] * k.
LogicalResult lowerLayerNorm(DLOp op, ValueRange o, PatternRewriter &rw) {
  std::optional<SmallVector<Value>> p = matchTensorParams(
      op, o, {{"input", false}, {"weight", true}, {"bias", true}});
  if (!p || op.getNumResults() != 3)
    return failure();
  Value x = (*p)[0], w = (*p)[1], bias = (*p)[2];
  RankedTensorType in = tensorType(x);
  Type et = in.getElementType();
  std::optional<int64_t> axis = layerNormAxis(op, in);
  if (!axis || !isWideFloat(et))
    return failure();
  int64_t rank = in.getRank();
  ArrayRef<int64_t> normShape = in.getShape().drop_front(*axis);
  SmallVector<bool> mask(rank, false);
  for (int64_t d = *axis; d < rank; ++d)
    mask[d] = true;
  RankedTensorType kept = reducedType(in, mask, true, et);
  if (!fits(w, normShape, et) || !fits(bias, normShape, et) ||
      !isCastCompatible(in, resultType(op, 0)) ||
      !isCastCompatible(kept, resultType(op, 1)) ||
      !isCastCompatible(kept, resultType(op, 2)))
    return failure();

  Location loc = op.getLoc();
  MLIRContext *ctx = rw.getContext();
  Value eps = cst(rw, loc, et, getFloatArg(op, "eps").value_or(1e-5));
  Value count = countElements(rw, loc, x, mask, et);
  AffineMap id = rw.getMultiDimIdentityMap(rank);
  AffineMap keptMap = reducedMap(ctx, mask, true);
  AffineMap keptId = rw.getMultiDimIdentityMap(rank);
  Value zero = cst(rw, loc, et, 0.0);
  // Pass 1: mean.
  Value sum = buildGeneric(
      rw, loc, x, mask, true, x, {id}, {kept}, zero,
      [](OpBuilder &b, Location l, ValueRange ins, ValueRange acc) {
        return SmallVector<Value>{arith::AddFOp::create(b, l, acc[0], ins[0])};
      })[0];
  Value mean = pointwise(rw, loc, sum, sum, {keptId}, kept,
                         [&](OpBuilder &b, Location l, ValueRange a) -> Value {
                           return arith::DivFOp::create(b, l, a[0], count);
                         });
  // Pass 2: biased variance and rstd.
  Value sq = buildGeneric(
      rw, loc, x, mask, true, {x, mean}, {id, keptMap}, {kept}, zero,
      [](OpBuilder &b, Location l, ValueRange ins, ValueRange acc) {
        Value d = arith::SubFOp::create(b, l, ins[0], ins[1]);
        return SmallVector<Value>{arith::AddFOp::create(
            b, l, acc[0], arith::MulFOp::create(b, l, d, d))};
      })[0];
  Value rstd = pointwise(rw, loc, sq, sq, {keptId}, kept,
                         [&](OpBuilder &b, Location l, ValueRange a) -> Value {
                           return rsqrtEps(
                               b, l, arith::DivFOp::create(b, l, a[0], count),
                               eps);
                         });
  // Output.
  SmallVector<Value> ins{x, mean, rstd};
  SmallVector<AffineMap> maps{id, keptMap, keptMap};
  AffineMap affine = trailingMap(ctx, rank, *axis);
  if (w) {
    ins.push_back(w);
    maps.push_back(affine);
  }
  if (bias) {
    ins.push_back(bias);
    maps.push_back(affine);
  }
  Value out = pointwise(rw, loc, x, ins, maps, in,
                        [&](OpBuilder &b, Location l, ValueRange a) -> Value {
                          Value v = arith::MulFOp::create(
                              b, l, arith::SubFOp::create(b, l, a[0], a[1]),
                              a[2]);
                          unsigned k = 3;
                          if (w)
                            v = arith::MulFOp::create(b, l, v, a[k++]);
                          if (bias)
                            v = arith::AddFOp::create(b, l, v, a[k++]);
                          return v;
                        });
  rw.replaceOp(op, {castWithGuards(rw, loc, out, resultType(op, 0)),
                    castWithGuards(rw, loc, mean, resultType(op, 1)),
                    castWithGuards(rw, loc, rstd, resultType(op, 2))});
  return success();
}

/// native_layer_norm_backward(grad_out, input, normalized_shape, mean, rstd,
/// weight?, bias?, output_mask) -> (grad_input, grad_weight, grad_bias):
///   g = grad_out * weight, xhat = (x - mean) * rstd,
///   grad_input = rstd * (g - mean(g) - xhat * mean(g * xhat)),
///   grad_weight = sum(grad_out * xhat), grad_bias = sum(grad_out) over the
///   leading (not normalized) dims.
LogicalResult lowerLayerNormBackward(DLOp op, ValueRange o,
                                     PatternRewriter &rw) {
  std::optional<SmallVector<Value>> p = matchTensorParams(
      op, o,
      {{"grad_out", false},
       {"input", false},
       {"mean", false},
       {"rstd", false},
       {"weight", true},
       {"bias", true}});
  std::optional<SmallVector<int>> res = gradientResults(op);
  if (!p || !res)
    return failure();
  Value dy = (*p)[0], x = (*p)[1], mean = (*p)[2], rstd = (*p)[3],
        w = (*p)[4];
  RankedTensorType in = tensorType(x);
  Type et = in.getElementType();
  std::optional<int64_t> axis = layerNormAxis(op, in);
  if (!axis || !isWideFloat(et))
    return failure();
  int64_t rank = in.getRank();
  ArrayRef<int64_t> normShape = in.getShape().drop_front(*axis);
  SmallVector<bool> mask(rank, false), outer(rank, false);
  for (int64_t d = 0; d < rank; ++d)
    (d >= *axis ? mask : outer)[d] = true;
  RankedTensorType kept = reducedType(in, mask, true, et);
  RankedTensorType paramT = RankedTensorType::get(normShape, et);
  if (!fits(dy, in.getShape(), et) || !fits(mean, kept.getShape(), et) ||
      !fits(rstd, kept.getShape(), et) || !fits(w, normShape, et))
    return failure();
  RankedTensorType want[3] = {in, paramT, paramT};
  for (int i = 0; i < 3; ++i)
    if ((*res)[i] >= 0 && !isCastCompatible(want[i], resultType(op, (*res)[i])))
      return failure();

  Location loc = op.getLoc();
  MLIRContext *ctx = rw.getContext();
  for (int64_t d = 0; d < rank; ++d)
    if (in.isDynamicDim(d) || tensorType(dy).isDynamicDim(d))
      guardEqual(rw, loc, tensor::getMixedSize(rw, loc, dy, d),
                 tensor::getMixedSize(rw, loc, x, d),
                 "layer_norm_backward: grad_out and input shapes differ");
  AffineMap id = rw.getMultiDimIdentityMap(rank);
  AffineMap keptMap = reducedMap(ctx, mask, true);
  AffineMap affine = trailingMap(ctx, rank, *axis);
  Value zero = cst(rw, loc, et, 0.0);
  SmallVector<Value> ins{dy, x, mean, rstd};
  SmallVector<AffineMap> maps{id, id, keptMap, keptMap};
  if (w) {
    ins.push_back(w);
    maps.push_back(affine);
  }
  auto xhat = [](OpBuilder &b, Location l, ValueRange a) -> Value {
    return arith::MulFOp::create(b, l, arith::SubFOp::create(b, l, a[1], a[2]),
                                 a[3]);
  };
  auto scaledGrad = [&](OpBuilder &b, Location l, ValueRange a) -> Value {
    return w ? Value(arith::MulFOp::create(b, l, a[0], a[4])) : a[0];
  };
  SmallVector<Value> results(op.getNumResults());
  if ((*res)[0] >= 0) {
    SmallVector<Value> sums = buildGeneric(
        rw, loc, x, mask, true, ins, maps, {kept, kept}, {zero, zero},
        [&](OpBuilder &b, Location l, ValueRange a, ValueRange acc) {
          Value g = scaledGrad(b, l, a);
          return SmallVector<Value>{
              arith::AddFOp::create(b, l, acc[0], g),
              arith::AddFOp::create(
                  b, l, acc[1],
                  arith::MulFOp::create(b, l, g, xhat(b, l, a)))};
        });
    Value count = countElements(rw, loc, x, mask, et);
    SmallVector<Value> dxIns(ins);
    SmallVector<AffineMap> dxMaps(maps);
    dxIns.append({sums[0], sums[1]});
    dxMaps.append({keptMap, keptMap});
    unsigned s = dxIns.size() - 2;
    Value dx = pointwise(
        rw, loc, x, dxIns, dxMaps, in,
        [&](OpBuilder &b, Location l, ValueRange a) -> Value {
          Value g = scaledGrad(b, l, a);
          Value m1 = arith::DivFOp::create(b, l, a[s], count);
          Value m2 = arith::DivFOp::create(b, l, a[s + 1], count);
          Value t = arith::SubFOp::create(
              b, l, arith::SubFOp::create(b, l, g, m1),
              arith::MulFOp::create(b, l, xhat(b, l, a), m2));
          return arith::MulFOp::create(b, l, a[3], t);
        });
    results[(*res)[0]] = castWithGuards(rw, loc, dx, resultType(op, (*res)[0]));
  }
  if ((*res)[1] >= 0 || (*res)[2] >= 0) {
    SmallVector<Value> sums = buildGeneric(
        rw, loc, x, outer, false, ValueRange(ins).take_front(4),
        ArrayRef<AffineMap>(maps).take_front(4), {paramT, paramT},
        {zero, zero},
        [&](OpBuilder &b, Location l, ValueRange a, ValueRange acc) {
          return SmallVector<Value>{
              arith::AddFOp::create(
                  b, l, acc[0], arith::MulFOp::create(b, l, a[0], xhat(b, l, a))),
              arith::AddFOp::create(b, l, acc[1], a[0])};
        });
    for (int i = 1; i < 3; ++i)
      if ((*res)[i] >= 0)
        results[(*res)[i]] =
            castWithGuards(rw, loc, sums[i - 1], resultType(op, (*res)[i]));
  }
  rw.replaceOp(op, results);
  return success();
}

//===----------------------------------------------------------------------===//
// Batch norm
//===----------------------------------------------------------------------===//

/// The per-channel shape [C] of a batch norm input (N, C, ...).
SmallVector<int64_t> channelShape(RankedTensorType in) {
  return {in.getDimSize(1)};
}

SmallVector<bool> channelMask(int64_t rank) {
  SmallVector<bool> mask(rank, true);
  mask[1] = false;
  return mask;
}

/// How one batch-norm forward op spells its parameters and results.
struct BatchNormForm {
  /// The momentum and eps args.
  StringRef momentum, eps;
  /// Whether weight and bias are required tensors (cuDNN's) or optional.
  bool affineRequired;
  /// Whether result 3 is cuDNN's reserve space (torch.uint8): lowered only
  /// when it is empty, as for the spatial batch norm cuDNN runs for
  /// PyTorch; the functional running stats then follow as results 4 and 5.
  bool reserve;
};

/// native_batch_norm(input, weight?, bias?, running_mean?, running_var?,
/// training, momentum, eps) -> (out, save_mean, save_invstd
/// [, running_mean', running_var']), and cudnn_batch_norm (input, weight,
/// bias, running_mean?, running_var?, training, exponential_average_factor,
/// epsilon) -> (out, save_mean, save_var, reserve [, running_mean',
/// running_var']), whose save_var is the same inverse standard deviation.
LogicalResult lowerBatchNormForm(DLOp op, ValueRange o, PatternRewriter &rw,
                                 const BatchNormForm &form) {
  bool optionalAffine = !form.affineRequired;
  std::optional<SmallVector<Value>> p =
      matchTensorParams(op, o,
                        {{"input", false},
                         {"weight", optionalAffine},
                         {"bias", optionalAffine},
                         {"running_mean", true},
                         {"running_var", true}});
  unsigned nres = op.getNumResults();
  unsigned first = form.reserve ? 4 : 3; // the running stats' first result
  std::optional<bool> training = getBoolArg(op, "training");
  if (!p || (nres != first && nres != first + 2) || !training)
    return failure();
  if (form.reserve && !isEmptyTensor(resultType(op, 3)))
    return failure();
  Value x = (*p)[0], w = (*p)[1], bias = (*p)[2], rm = (*p)[3], rv = (*p)[4];
  RankedTensorType in = tensorType(x);
  Type et = in.getElementType();
  if (in.getRank() < 2 || !isWideFloat(et))
    return failure();
  int64_t rank = in.getRank();
  SmallVector<int64_t> cshape = channelShape(in);
  RankedTensorType chanT = RankedTensorType::get(cshape, et);
  if (!fits(w, cshape, et) || !fits(bias, cshape, et) ||
      !fits(rm, cshape, et) || !fits(rv, cshape, et) ||
      !isCastCompatible(in, resultType(op, 0)))
    return failure();
  // Eval needs the running stats; the functional update needs them too.
  bool functional = nres == first + 2;
  if ((!*training || functional) && (!rm || !rv))
    return failure();
  RankedTensorType emptyT = RankedTensorType::get({0}, et);
  RankedTensorType saveT = *training ? chanT : emptyT;
  if (!isCastCompatible(saveT, resultType(op, 1)) ||
      !isCastCompatible(saveT, resultType(op, 2)))
    return failure();
  for (unsigned i = first; i < nres; ++i)
    if (!isCastCompatible(chanT, resultType(op, i)))
      return failure();

  Location loc = op.getLoc();
  MLIRContext *ctx = rw.getContext();
  SmallVector<bool> mask = channelMask(rank);
  AffineMap id = rw.getMultiDimIdentityMap(rank);
  AffineMap chan = reducedMap(ctx, mask, false);
  AffineMap chanId = rw.getMultiDimIdentityMap(1);
  Value eps = cst(rw, loc, et, getFloatArg(op, form.eps).value_or(1e-5));
  Value zero = cst(rw, loc, et, 0.0);

  Value mean, invstd;
  SmallVector<Value> results(nres);
  if (form.reserve)
    results[3] =
        tensor::EmptyOp::create(rw, loc, resultType(op, 3), ValueRange{});
  if (*training) {
    Value count = countElements(rw, loc, x, mask, et);
    Value sum = buildGeneric(
        rw, loc, x, mask, false, x, {id}, {chanT}, zero,
        [](OpBuilder &b, Location l, ValueRange a, ValueRange acc) {
          return SmallVector<Value>{arith::AddFOp::create(b, l, acc[0], a[0])};
        })[0];
    mean = pointwise(rw, loc, sum, sum, {chanId}, chanT,
                     [&](OpBuilder &b, Location l, ValueRange a) -> Value {
                       return arith::DivFOp::create(b, l, a[0], count);
                     });
    Value sq = buildGeneric(
        rw, loc, x, mask, false, {x, mean}, {id, chan}, {chanT}, zero,
        [](OpBuilder &b, Location l, ValueRange a, ValueRange acc) {
          Value d = arith::SubFOp::create(b, l, a[0], a[1]);
          return SmallVector<Value>{arith::AddFOp::create(
              b, l, acc[0], arith::MulFOp::create(b, l, d, d))};
        })[0];
    invstd = pointwise(rw, loc, sq, sq, {chanId}, chanT,
                       [&](OpBuilder &b, Location l, ValueRange a) -> Value {
                         return rsqrtEps(
                             b, l, arith::DivFOp::create(b, l, a[0], count),
                             eps);
                       });
    results[1] = castWithGuards(rw, loc, mean, resultType(op, 1));
    results[2] = castWithGuards(rw, loc, invstd, resultType(op, 2));
    if (functional) {
      double momentum = getFloatArg(op, form.momentum).value_or(0.1);
      Value mom = cst(rw, loc, et, momentum);
      Value keep = cst(rw, loc, et, 1.0 - momentum);
      Value newMean = pointwise(
          rw, loc, mean, {mean, rm}, {chanId, chanId}, chanT,
          [&](OpBuilder &b, Location l, ValueRange a) -> Value {
            return arith::AddFOp::create(
                b, l, arith::MulFOp::create(b, l, mom, a[0]),
                arith::MulFOp::create(b, l, keep, a[1]));
          });
      Value unbiasedCount = arith::SubFOp::create(rw, loc, count,
                                                  cst(rw, loc, et, 1.0));
      Value newVar = pointwise(
          rw, loc, sq, {sq, rv}, {chanId, chanId}, chanT,
          [&](OpBuilder &b, Location l, ValueRange a) -> Value {
            Value unbiased = arith::DivFOp::create(b, l, a[0], unbiasedCount);
            return arith::AddFOp::create(
                b, l, arith::MulFOp::create(b, l, mom, unbiased),
                arith::MulFOp::create(b, l, keep, a[1]));
          });
      results[first] = castWithGuards(rw, loc, newMean, resultType(op, first));
      results[first + 1] =
          castWithGuards(rw, loc, newVar, resultType(op, first + 1));
    }
  } else {
    mean = rm;
    invstd = pointwise(rw, loc, rv, rv, {chanId}, chanT,
                       [&](OpBuilder &b, Location l, ValueRange a) -> Value {
                         return rsqrtEps(b, l, a[0], eps);
                       });
    Value empty = tensor::EmptyOp::create(rw, loc, emptyT, ValueRange{});
    results[1] = castWithGuards(rw, loc, empty, resultType(op, 1));
    results[2] = castWithGuards(rw, loc, empty, resultType(op, 2));
    if (functional) {
      results[first] = castWithGuards(rw, loc, rm, resultType(op, first));
      results[first + 1] =
          castWithGuards(rw, loc, rv, resultType(op, first + 1));
    }
  }

  SmallVector<Value> ins{x, mean, invstd};
  SmallVector<AffineMap> maps{id, chan, chan};
  if (w) {
    ins.push_back(w);
    maps.push_back(chan);
  }
  if (bias) {
    ins.push_back(bias);
    maps.push_back(chan);
  }
  Value out = pointwise(rw, loc, x, ins, maps, in,
                        [&](OpBuilder &b, Location l, ValueRange a) -> Value {
                          Value v = arith::MulFOp::create(
                              b, l, arith::SubFOp::create(b, l, a[0], a[1]),
                              a[2]);
                          unsigned k = 3;
                          if (w)
                            v = arith::MulFOp::create(b, l, v, a[k++]);
                          if (bias)
                            v = arith::AddFOp::create(b, l, v, a[k++]);
                          return v;
                        });
  results[0] = castWithGuards(rw, loc, out, resultType(op, 0));
  rw.replaceOp(op, results);
  return success();
}

LogicalResult lowerBatchNorm(DLOp op, ValueRange o, PatternRewriter &rw) {
  return lowerBatchNormForm(op, o, rw, {"momentum", "eps", false, false});
}

LogicalResult lowerCudnnBatchNorm(DLOp op, ValueRange o, PatternRewriter &rw) {
  return lowerBatchNormForm(
      op, o, rw, {"exponential_average_factor", "epsilon", true, true});
}

/// native_batch_norm_backward(grad_out, input, weight?, running_mean?,
/// running_var?, save_mean?, save_invstd?, train, eps, output_mask):
/// with mean/invstd the saved batch stats (train) or the running stats
/// (eval), per channel sum_g = sum(dy), dotp = sum((x - mean) * dy);
///   train: grad_input = (dy - sum_g / M - (x - mean) * invstd^2 * dotp / M)
///                       * invstd * weight
///   eval:  grad_input = dy * invstd * weight
///   grad_weight = dotp * invstd, grad_bias = sum_g.
/// The batch-norm backward of both forms, from its operands: `stats` are
/// running_mean, running_var, save_mean and save_invstd (each may be null).
LogicalResult lowerBatchNormBackwardOf(DLOp op, PatternRewriter &rw, Value dy,
                                       Value x, Value w, ArrayRef<Value> stats,
                                       std::optional<bool> train,
                                       StringRef epsName) {
  std::optional<SmallVector<int>> res = gradientResults(op);
  if (!res || !train)
    return failure();
  Value meanIn = *train ? stats[2] : stats[0];
  Value varIn = *train ? stats[3] : stats[1]; // invstd when training.
  RankedTensorType in = tensorType(x);
  Type et = in.getElementType();
  if (in.getRank() < 2 || !isWideFloat(et) || !meanIn || !varIn)
    return failure();
  int64_t rank = in.getRank();
  SmallVector<int64_t> cshape = channelShape(in);
  RankedTensorType chanT = RankedTensorType::get(cshape, et);
  if (!fits(dy, in.getShape(), et) || !fits(w, cshape, et) ||
      !fits(meanIn, cshape, et) || !fits(varIn, cshape, et))
    return failure();
  RankedTensorType want[3] = {in, chanT, chanT};
  for (int i = 0; i < 3; ++i)
    if ((*res)[i] >= 0 && !isCastCompatible(want[i], resultType(op, (*res)[i])))
      return failure();

  Location loc = op.getLoc();
  MLIRContext *ctx = rw.getContext();
  for (int64_t d = 0; d < rank; ++d)
    if (in.isDynamicDim(d) || tensorType(dy).isDynamicDim(d))
      guardEqual(rw, loc, tensor::getMixedSize(rw, loc, dy, d),
                 tensor::getMixedSize(rw, loc, x, d),
                 "batch_norm_backward: grad_out and input shapes differ");
  SmallVector<bool> mask = channelMask(rank);
  AffineMap id = rw.getMultiDimIdentityMap(rank);
  AffineMap chan = reducedMap(ctx, mask, false);
  AffineMap chanId = rw.getMultiDimIdentityMap(1);
  Value zero = cst(rw, loc, et, 0.0);
  Value invstd = varIn;
  if (!*train) {
    Value eps = cst(rw, loc, et, getFloatArg(op, epsName).value_or(1e-5));
    invstd = pointwise(rw, loc, varIn, varIn, {chanId}, chanT,
                       [&](OpBuilder &b, Location l, ValueRange a) -> Value {
                         return rsqrtEps(b, l, a[0], eps);
                       });
  }

  // Per-channel sums, needed by every gradient but the eval grad_input.
  Value sumG, dotp;
  if (*train || (*res)[1] >= 0 || (*res)[2] >= 0) {
    // Two single-result reductions rather than one with two results: the
    // reduction pipeline vectorizes the former only (one two-result
    // reduction ran ~10x slower than torch's kernel).
    sumG = buildGeneric(
        rw, loc, x, mask, false, {dy}, {id}, {chanT}, {zero},
        [](OpBuilder &b, Location l, ValueRange a, ValueRange acc) {
          return SmallVector<Value>{arith::AddFOp::create(b, l, acc[0], a[0])};
        })[0];
    dotp = buildGeneric(
        rw, loc, x, mask, false, {dy, x, meanIn}, {id, id, chan}, {chanT},
        {zero},
        [](OpBuilder &b, Location l, ValueRange a, ValueRange acc) {
          Value centered = arith::SubFOp::create(b, l, a[1], a[2]);
          return SmallVector<Value>{arith::AddFOp::create(
              b, l, acc[0], arith::MulFOp::create(b, l, centered, a[0]))};
        })[0];
  }

  SmallVector<Value> results(op.getNumResults());
  if ((*res)[0] >= 0) {
    // Per-channel coefficients first, so that the pass over the input does
    // no division: scale = invstd * weight, and in training
    // k = dotp * invstd^2 / M and grad_mean = sum_g / M, then
    //   grad_input = (dy - (x - mean) * k - grad_mean) * scale.
    SmallVector<Value> scaleIns{invstd};
    SmallVector<AffineMap> scaleMaps{chanId};
    if (w) {
      scaleIns.push_back(w);
      scaleMaps.push_back(chanId);
    }
    Value scale = pointwise(rw, loc, invstd, scaleIns, scaleMaps, chanT,
                            [&](OpBuilder &b, Location l, ValueRange a) {
                              return w ? arith::MulFOp::create(b, l, a[0], a[1])
                                             .getResult()
                                       : a[0];
                            });
    SmallVector<Value> ins{dy, scale};
    SmallVector<AffineMap> maps{id, chan};
    if (*train) {
      Value count = countElements(rw, loc, x, mask, et);
      Value k = pointwise(
          rw, loc, dotp, {dotp, invstd}, {chanId, chanId}, chanT,
          [&](OpBuilder &b, Location l, ValueRange a) -> Value {
            return arith::DivFOp::create(
                b, l,
                arith::MulFOp::create(b, l, a[0],
                                      arith::MulFOp::create(b, l, a[1], a[1])),
                count);
          });
      Value gradMean = pointwise(
          rw, loc, sumG, {sumG}, {chanId}, chanT,
          [&](OpBuilder &b, Location l, ValueRange a) -> Value {
            return arith::DivFOp::create(b, l, a[0], count);
          });
      ins.append({x, meanIn, k, gradMean});
      maps.append({id, chan, chan, chan});
    }
    Value dx = pointwise(
        rw, loc, x, ins, maps, in,
        [&](OpBuilder &b, Location l, ValueRange a) -> Value {
          Value g = a[0];
          if (*train) {
            Value proj = arith::MulFOp::create(
                b, l, arith::SubFOp::create(b, l, a[2], a[3]), a[4]);
            g = arith::SubFOp::create(
                b, l, arith::SubFOp::create(b, l, g, proj), a[5]);
          }
          return arith::MulFOp::create(b, l, g, a[1]);
        });
    results[(*res)[0]] = castWithGuards(rw, loc, dx, resultType(op, (*res)[0]));
  }
  if ((*res)[1] >= 0) {
    Value dw = pointwise(rw, loc, dotp, {dotp, invstd}, {chanId, chanId},
                         chanT,
                         [](OpBuilder &b, Location l, ValueRange a) -> Value {
                           return arith::MulFOp::create(b, l, a[0], a[1]);
                         });
    results[(*res)[1]] = castWithGuards(rw, loc, dw, resultType(op, (*res)[1]));
  }
  if ((*res)[2] >= 0)
    results[(*res)[2]] =
        castWithGuards(rw, loc, sumG, resultType(op, (*res)[2]));
  rw.replaceOp(op, results);
  return success();
}

LogicalResult lowerBatchNormBackward(DLOp op, ValueRange o,
                                     PatternRewriter &rw) {
  std::optional<SmallVector<Value>> p =
      matchTensorParams(op, o,
                        {{"grad_out", false},
                         {"input", false},
                         {"weight", true},
                         {"running_mean", true},
                         {"running_var", true},
                         {"save_mean", true},
                         {"save_invstd", true}});
  if (!p)
    return failure();
  return lowerBatchNormBackwardOf(op, rw, (*p)[0], (*p)[1], (*p)[2],
                                  ArrayRef<Value>(*p).drop_front(3),
                                  getBoolArg(op, "train"), "eps");
}

/// cudnn_batch_norm_backward(input, grad_output, weight, running_mean?,
/// running_var?, save_mean?, save_var?, epsilon, reserveSpace): cuDNN's
/// backward is a training one; the (empty) reserve is not read.
LogicalResult lowerCudnnBatchNormBackward(DLOp op, ValueRange o,
                                          PatternRewriter &rw) {
  std::optional<SmallVector<Value>> p =
      matchTensorParams(op, o,
                        {{"input", false},
                         {"grad_output", false},
                         {"weight", false},
                         {"running_mean", true},
                         {"running_var", true},
                         {"save_mean", true},
                         {"save_var", true},
                         {"reserveSpace", false}});
  if (!p || op.getNumResults() != 3 || !isEmptyTensor((*p)[7].getType()))
    return failure();
  return lowerBatchNormBackwardOf(op, rw, (*p)[1], (*p)[0], (*p)[2],
                                  ArrayRef<Value>(*p).slice(3, 4), true,
                                  "epsilon");
}

void addDefault(LoweringRegistry &r, StringRef name, LowerFn fn) {
  r.add(name, fn);
  r.add((name + ".default").str(), fn);
}

} // namespace

void terra::populateNormalizationLowerings(LoweringRegistry &r) {
  addDefault(r, "aten.native_layer_norm", lowerLayerNorm);
  addDefault(r, "aten.native_layer_norm_backward", lowerLayerNormBackward);
  addDefault(r, "aten.native_batch_norm", lowerBatchNorm);
  addDefault(r, "aten.native_batch_norm_backward", lowerBatchNormBackward);
  addDefault(r, "aten.cudnn_batch_norm", lowerCudnnBatchNorm);
  addDefault(r, "aten.cudnn_batch_norm_backward", lowerCudnnBatchNormBackward);
}
