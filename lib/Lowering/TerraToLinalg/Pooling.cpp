//===- Pooling.cpp - 2-D pooling, nearest upsampling and backward ops -----===//
//
// (Nearest upsampling by integer factors, forward and backward, is at the
// end: one linalg.generic each, indices divided / blocks summed by affine
// maps.)
//
// Inputs are NCHW or CHW (run as NCHW with a unit batch); spatial sizes must
// be static, batch and channel sizes may be dynamic. Output sizes follow
// PyTorch (floor or ceil_mode, where the last window must start inside the
// input or its left padding).
//
// Forward ops pad the input (tensor.pad: -inf for max, 0 for avg; extra
// high padding covers ceil_mode windows) and reduce over a window operand
// (a tensor.empty of the kernel's shape, as linalg's pooling ops do):
//   max_pool2d_with_indices: one linalg.generic yielding the max and its
//     flat per-plane index h * W + w; padded positions are never chosen
//     and the first in-bounds element always is, then only a strictly
//     greater element or a NaN replaces it (PyTorch's scan order and rule);
//   avg_pool2d: linalg.pooling_nchw_sum, then a division by PyTorch's
//     divisor, computed at compile time per output position
//     (count_include_pad, divisor_override, windows clipped at H + pad);
//   _adaptive_avg_pool2d: avg_pool2d with kernel = stride = in / out when
//     the sizes divide; otherwise two masked contractions with i1 window
//     masks (start = floor(i * in / out), end = ceil((i + 1) * in / out)),
//     one per spatial dim, then a division by the window sizes. With a
//     dynamic input size (a pooling after another whose size varies between
//     the merged paths) the masks and window sizes are computed in the
//     contractions' bodies from the run-time sizes instead.
// Backward ops are gathers over the same windows, without scatters: the
// grads (and, for max, the indices, with -1 elsewhere) are spread into a
// tensor every `stride` elements (tensor.insert_slice with strides) so that
// the windows containing input position h are at h + i * dilation; then
// grad_input[h] sums them (avg) or the grads whose index equals h * W + w
// (max). This assumes every index of max_pool2d_with_indices_backward lies
// in its own window, which holds for indices made by the forward op.
//
//===----------------------------------------------------------------------===//
#include "Utils.h"

#include "llvm/Support/MathExtras.h"

#include <cmath>

using namespace mlir;
using namespace terra;
using namespace terra::lowering;

namespace {

bool isDyn(int64_t d) { return ShapedType::isDynamic(d); }
bool compatible(int64_t a, int64_t b) { return isDyn(a) || isDyn(b) || a == b; }

struct PoolParams {
  SmallVector<int64_t> kernel, stride, padding, dilation;
  bool ceil = false;
};

std::optional<PoolParams> getPoolParams(DLOp op, bool hasDilation) {
  auto kernel = getSpatialArg(op, "kernel_size", 2, {});
  if (!kernel || kernel->size() != 2)
    return std::nullopt;
  auto stride = getSpatialArg(op, "stride", 2, *kernel);
  auto padding = getSpatialArg(op, "padding", 2, {0, 0});
  auto dilation = hasDilation ? getSpatialArg(op, "dilation", 2, {1, 1})
                              : SmallVector<int64_t>{1, 1};
  if (!stride || !padding || !dilation)
    return std::nullopt;
  PoolParams p{*kernel, *stride, *padding, *dilation,
               getBoolArg(op, "ceil_mode").value_or(false)};
  for (int d = 0; d < 2; ++d)
    if (p.kernel[d] < 1 || p.stride[d] < 1 || p.dilation[d] < 1 ||
        p.padding[d] < 0 || p.padding[d] > p.kernel[d] / 2)
      return std::nullopt; // PyTorch rejects these too.
  return p;
}

/// PyTorch's pooling_output_shape; nullopt when no window fits.
std::optional<int64_t> poolOutSize(int64_t in, int64_t k, int64_t s, int64_t p,
                                   int64_t d, bool ceil) {
  int64_t num = in + 2 * p - d * (k - 1) - 1 + (ceil ? s - 1 : 0);
  int64_t out = llvm::divideFloorSigned(num, s) + 1;
  if (ceil && (out - 1) * s >= in + p)
    --out;
  if (out < 1)
    return std::nullopt;
  return out;
}

struct PoolGeom {
  int64_t H, W, OH, OW;
  int64_t dims(int d) const { return d == 0 ? H : W; }
  int64_t outs(int d) const { return d == 0 ? OH : OW; }
};

/// A rank-3 (C, H, W) type as rank 4 (1, C, H, W).
RankedTensorType as4d(RankedTensorType t) {
  if (t.getRank() == 4)
    return t;
  SmallVector<int64_t> shape(t.getShape());
  shape.insert(shape.begin(), 1);
  return RankedTensorType::get(shape, t.getElementType());
}

bool isPoolTensor(Type t, bool anyFloat = false) {
  auto rt = cast<RankedTensorType>(t);
  Type et = rt.getElementType();
  return (rt.getRank() == 3 || rt.getRank() == 4) &&
         (anyFloat ? isFloat(et) : (et.isF32() || et.isF64()));
}

std::optional<PoolGeom> getPoolGeom(RankedTensorType x4, const PoolParams &p) {
  if (x4.isDynamicDim(2) || x4.isDynamicDim(3))
    return std::nullopt;
  PoolGeom g{x4.getDimSize(2), x4.getDimSize(3), 0, 0};
  auto oh = poolOutSize(g.H, p.kernel[0], p.stride[0], p.padding[0],
                        p.dilation[0], p.ceil);
  auto ow = poolOutSize(g.W, p.kernel[1], p.stride[1], p.padding[1],
                        p.dilation[1], p.ceil);
  if (!oh || !ow)
    return std::nullopt;
  g.OH = *oh;
  g.OW = *ow;
  return g;
}

/// Whether `t` (rank 3 or 4) can hold a (N, C, A, B) tensor like `like4`.
bool compatibleNC(RankedTensorType t, RankedTensorType like4, int64_t a,
                  int64_t b) {
  RankedTensorType t4 = as4d(t);
  return t4.getRank() == 4 &&
         compatible(t4.getDimSize(0), like4.getDimSize(0)) &&
         compatible(t4.getDimSize(1), like4.getDimSize(1)) &&
         compatible(t4.getDimSize(2), a) && compatible(t4.getDimSize(3), b);
}

Value to4d(OpBuilder &b, Location loc, Value v) {
  if (cast<RankedTensorType>(v.getType()).getRank() == 4)
    return v;
  return insertUnitDim(b, loc, v, 0);
}

/// `v` (rank 4) back to `type`'s rank, cast to `type`.
Value fromNCHW(OpBuilder &b, Location loc, Value v, RankedTensorType type) {
  if (type.getRank() == 3)
    v = dropUnitDim(b, loc, v, 0);
  return castWithGuards(b, loc, v, type);
}

/// `v` (N, C, ?, ?) cast to static spatial sizes (a, b), with guards.
Value withSpatial(OpBuilder &b, Location loc, Value v, int64_t h, int64_t w) {
  auto t = cast<RankedTensorType>(v.getType());
  return castWithGuards(
      b, loc, v,
      RankedTensorType::get({t.getDimSize(0), t.getDimSize(1), h, w},
                            t.getElementType()));
}

/// Guards that the batch and channel sizes of `a` and `b` agree.
void guardNC(OpBuilder &b, Location loc, Value x, Value y) {
  SmallVector<OpFoldResult> xs = getSizes(b, loc, x), ys = getSizes(b, loc, y);
  guardEqual(b, loc, xs[0], ys[0], "pooling batch sizes do not match");
  guardEqual(b, loc, xs[1], ys[1], "pooling channel sizes do not match");
}

/// A (N, C, a, b) tensor filled with `fill`, N and C taken from `like`.
Value filledNC(OpBuilder &b, Location loc, Value like, int64_t h, int64_t w,
               Value fill) {
  SmallVector<OpFoldResult> s = getSizes(b, loc, like);
  SmallVector<OpFoldResult> sizes = {s[0], s[1], b.getIndexAttr(h),
                                     b.getIndexAttr(w)};
  Value init = tensor::EmptyOp::create(b, loc, sizes, fill.getType());
  return linalg::FillOp::create(b, loc, fill, init).getResult(0);
}

Value windowOperand(OpBuilder &b, Location loc, const PoolParams &p, Type et) {
  return tensor::EmptyOp::create(b, loc, ArrayRef<int64_t>(p.kernel), et);
}

Value idx(OpBuilder &b, Location loc, int64_t v) {
  return arith::ConstantIndexOp::create(b, loc, v);
}

/// The flat index `h * W + w` as i64.
Value flatIndex(OpBuilder &b, Location loc, Value h, Value w, int64_t W) {
  Value f = arith::AddIOp::create(
      b, loc, arith::MulIOp::create(b, loc, h, idx(b, loc, W)), w);
  return arith::IndexCastOp::create(b, loc, b.getI64Type(), f);
}

Value floatConstTensor(OpBuilder &b, Location loc, ArrayRef<int64_t> shape,
                       Type et, ArrayRef<double> values) {
  const llvm::fltSemantics &sem = cast<FloatType>(et).getFloatSemantics();
  SmallVector<APFloat> vals;
  for (double v : values) {
    APFloat f(v);
    bool lost;
    f.convert(sem, APFloat::rmNearestTiesToEven, &lost);
    vals.push_back(f);
  }
  auto type = RankedTensorType::get(shape, et);
  return arith::ConstantOp::create(b, loc, DenseElementsAttr::get(type, vals));
}

/// `t` (N, C, OH, OW) divided by `divisors` (OH * OW values, row-major):
/// one scalar when they are all equal, else a broadcast constant.
Value divideBy(OpBuilder &b, Location loc, Value t, ArrayRef<double> divisors,
               int64_t OH, int64_t OW) {
  auto type = cast<RankedTensorType>(t.getType());
  Type et = type.getElementType();
  bool uniform = llvm::all_equal(divisors);
  Value d = uniform ? scalarConstant(b, loc, et, divisors[0])
                    : floatConstTensor(b, loc, {OH, OW}, et, divisors);
  return buildElementwise(
      b, loc, type, {t, d}, [](OpBuilder &nb, Location nl, ValueRange a) {
        return Value(arith::DivFOp::create(nb, nl, a[0], a[1]));
      });
}

//===----------------------------------------------------------------------===//
// Max pooling
//===----------------------------------------------------------------------===//

/// aten.max_pool2d_with_indices (two results) and aten.max_pool2d (one).
LogicalResult lowerMaxPool(DLOp op, ValueRange o, PatternRewriter &rw,
                           bool withIndices) {
  // 1. Static properties.
  if (o.size() != 1 || op.getNumResults() != (withIndices ? 2u : 1u) ||
      !isPoolTensor(o[0].getType(), /*anyFloat=*/true))
    return rw.notifyMatchFailure(op, "expects one float NCHW/CHW input");
  auto xT = cast<RankedTensorType>(o[0].getType());
  Type et = xT.getElementType();
  RankedTensorType x4 = as4d(xT);
  std::optional<PoolParams> p = getPoolParams(op, /*hasDilation=*/true);
  std::optional<PoolGeom> g = p ? getPoolGeom(x4, *p) : std::nullopt;
  if (!g)
    return rw.notifyMatchFailure(op, "unsupported args or sizes");
  for (unsigned i = 0; i < op.getNumResults(); ++i) {
    RankedTensorType t = resultType(op, i);
    if (t.getRank() != xT.getRank() ||
        t.getElementType() != (i == 0 ? et : rw.getI64Type()) ||
        !compatibleNC(t, x4, g->OH, g->OW))
      return rw.notifyMatchFailure(op, "result types do not match");
  }

  // 2. No guards: every size is taken from the input.
  Location loc = op.getLoc();
  Value x = to4d(rw, loc, o[0]);

  // 3. Inits: -inf and index -1 ("nothing taken yet").
  SmallVector<int64_t> high;
  for (int d = 0; d < 2; ++d)
    high.push_back(
        std::max(p->padding[d], (g->outs(d) - 1) * p->stride[d] +
                                    (p->kernel[d] - 1) * p->dilation[d] + 1 -
                                    g->dims(d) - p->padding[d]));
  Value negInf =
      arith::ConstantOp::create(rw, loc, rw.getFloatAttr(et, -INFINITY));
  Value minusOne = arith::ConstantOp::create(rw, loc, rw.getI64IntegerAttr(-1));
  Value xp = padTrailing(rw, loc, x, p->padding, high, negInf);
  Value valInit = filledNC(rw, loc, x, g->OH, g->OW, negInf);
  Value idxInit = filledNC(rw, loc, x, g->OH, g->OW, minusOne);
  Value window = windowOperand(rw, loc, *p, et);

  // 4. One generic: loops (n, c, oh, ow | i, j).
  MLIRContext *ctx = rw.getContext();
  auto d = [&](unsigned i) { return getAffineDimExpr(i, ctx); };
  auto inMap =
      AffineMap::get(6, 0,
                     {d(0), d(1), d(2) * p->stride[0] + d(4) * p->dilation[0],
                      d(3) * p->stride[1] + d(5) * p->dilation[1]},
                     ctx);
  auto winMap = AffineMap::get(6, 0, {d(4), d(5)}, ctx);
  auto outMap = AffineMap::get(6, 0, {d(0), d(1), d(2), d(3)}, ctx);
  SmallVector<utils::IteratorType> iters(4, utils::IteratorType::parallel);
  iters.append(2, utils::IteratorType::reduction);
  int64_t H = g->H, W = g->W;
  auto generic = linalg::GenericOp::create(
      rw, loc, TypeRange{valInit.getType(), idxInit.getType()},
      ValueRange{xp, window}, ValueRange{valInit, idxInit},
      {inMap, winMap, outMap, outMap}, iters,
      [&](OpBuilder &b, Location l, ValueRange a) {
        Value v = a[0], cur = a[2], curIdx = a[3];
        // Input coordinates: o * stride + k * dilation - pad.
        Value pos[2];
        Value valid;
        for (int dd = 0; dd < 2; ++dd) {
          Value o = linalg::IndexOp::create(b, l, 2 + dd);
          Value k = linalg::IndexOp::create(b, l, 4 + dd);
          Value c = arith::AddIOp::create(
              b, l, arith::MulIOp::create(b, l, o, idx(b, l, p->stride[dd])),
              arith::MulIOp::create(b, l, k, idx(b, l, p->dilation[dd])));
          pos[dd] = arith::SubIOp::create(b, l, c, idx(b, l, p->padding[dd]));
          auto andIn = [&](Value cond) {
            valid =
                valid ? Value(arith::AndIOp::create(b, l, valid, cond)) : cond;
          };
          if (p->padding[dd] > 0)
            andIn(arith::CmpIOp::create(b, l, arith::CmpIPredicate::sge,
                                        pos[dd], idx(b, l, 0)));
          if (high[dd] > 0)
            andIn(arith::CmpIOp::create(b, l, arith::CmpIPredicate::slt,
                                        pos[dd], idx(b, l, dd ? W : H)));
        }
        Value first = arith::CmpIOp::create(b, l, arith::CmpIPredicate::eq,
                                            curIdx, minusOne);
        Value greater =
            arith::CmpFOp::create(b, l, arith::CmpFPredicate::OGT, v, cur);
        Value nan =
            arith::CmpFOp::create(b, l, arith::CmpFPredicate::UNO, v, v);
        Value take = arith::OrIOp::create(
            b, l, first, arith::OrIOp::create(b, l, greater, nan));
        if (valid)
          take = arith::AndIOp::create(b, l, valid, take);
        Value flat = flatIndex(b, l, pos[0], pos[1], W);
        linalg::YieldOp::create(
            b, l,
            ValueRange{arith::SelectOp::create(b, l, take, v, cur),
                       arith::SelectOp::create(b, l, take, flat, curIdx)});
      });
  SmallVector<Value> results;
  for (unsigned i = 0; i < op.getNumResults(); ++i)
    results.push_back(
        fromNCHW(rw, loc, generic.getResult(i), resultType(op, i)));
  rw.replaceOp(op, results);
  return success();
}

LogicalResult lowerMaxPoolWithIndices(DLOp op, ValueRange o,
                                      PatternRewriter &rw) {
  return lowerMaxPool(op, o, rw, /*withIndices=*/true);
}

LogicalResult lowerMaxPoolValues(DLOp op, ValueRange o, PatternRewriter &rw) {
  return lowerMaxPool(op, o, rw, /*withIndices=*/false);
}

/// aten.max_pool2d_with_indices_backward(grad_output, input, indices).
LogicalResult lowerMaxPoolBackward(DLOp op, ValueRange o, PatternRewriter &rw) {
  // 1. Static properties.
  if (o.size() != 3 || op.getNumResults() != 1 ||
      !isPoolTensor(o[1].getType(), /*anyFloat=*/true))
    return rw.notifyMatchFailure(op, "expects grad_output, input, indices");
  auto goT = cast<RankedTensorType>(o[0].getType());
  auto xT = cast<RankedTensorType>(o[1].getType());
  auto iT = cast<RankedTensorType>(o[2].getType());
  Type et = xT.getElementType();
  RankedTensorType x4 = as4d(xT), resT = resultType(op);
  std::optional<PoolParams> p = getPoolParams(op, /*hasDilation=*/true);
  std::optional<PoolGeom> g = p ? getPoolGeom(x4, *p) : std::nullopt;
  if (!g)
    return rw.notifyMatchFailure(op, "unsupported args or sizes");
  int64_t rank = xT.getRank();
  if (goT.getRank() != rank || iT.getRank() != rank || resT.getRank() != rank ||
      goT.getElementType() != et || resT.getElementType() != et ||
      !iT.getElementType().isInteger(64) ||
      !compatibleNC(goT, x4, g->OH, g->OW) ||
      !compatibleNC(iT, x4, g->OH, g->OW) ||
      !compatibleNC(resT, x4, g->H, g->W))
    return rw.notifyMatchFailure(op, "operand or result types do not match");

  // 2. Guards.
  Location loc = op.getLoc();
  Value x = to4d(rw, loc, o[1]);
  Value go = to4d(rw, loc, o[0]), ind = to4d(rw, loc, o[2]);
  guardNC(rw, loc, go, x);
  guardNC(rw, loc, ind, x);
  go = withSpatial(rw, loc, go, g->OH, g->OW);
  ind = withSpatial(rw, loc, ind, g->OH, g->OW);

  // 3. The spread grads and indices, and a zero init.
  SmallVector<int64_t> size, offset;
  for (int d = 0; d < 2; ++d) {
    int64_t ext = (p->kernel[d] - 1) * p->dilation[d];
    offset.push_back(ext - p->padding[d]); // >= 0 as padding <= kernel / 2
    size.push_back(std::max(
        g->dims(d) + ext, offset.back() + (g->outs(d) - 1) * p->stride[d] + 1));
  }
  Value zero = scalarConstant(rw, loc, et, 0.0);
  Value minusOne = arith::ConstantOp::create(rw, loc, rw.getI64IntegerAttr(-1));
  Value zg = spreadTrailing(rw, loc, go, zero, size, offset, p->stride);
  Value zi = spreadTrailing(rw, loc, ind, minusOne, size, offset, p->stride);
  Value init = filledNC(rw, loc, x, g->H, g->W, zero);
  Value window = windowOperand(rw, loc, *p, et);

  // 4. Loops (n, c, h, w | i, j): the windows holding (h, w) are at
  // (h + i * dilation, w + j * dilation) in the spread tensors.
  MLIRContext *ctx = rw.getContext();
  auto d = [&](unsigned i) { return getAffineDimExpr(i, ctx); };
  auto zMap = AffineMap::get(
      6, 0,
      {d(0), d(1), d(2) + d(4) * p->dilation[0], d(3) + d(5) * p->dilation[1]},
      ctx);
  auto winMap = AffineMap::get(6, 0, {d(4), d(5)}, ctx);
  auto outMap = AffineMap::get(6, 0, {d(0), d(1), d(2), d(3)}, ctx);
  SmallVector<utils::IteratorType> iters(4, utils::IteratorType::parallel);
  iters.append(2, utils::IteratorType::reduction);
  int64_t W = g->W;
  Value r =
      linalg::GenericOp::create(
          rw, loc, init.getType(), ValueRange{zg, zi, window}, init,
          {zMap, zMap, winMap, outMap}, iters,
          [&](OpBuilder &b, Location l, ValueRange a) {
            Value h = linalg::IndexOp::create(b, l, 2);
            Value w = linalg::IndexOp::create(b, l, 3);
            Value hit = arith::CmpIOp::create(b, l, arith::CmpIPredicate::eq,
                                              a[1], flatIndex(b, l, h, w, W));
            Value add = arith::AddFOp::create(b, l, a[3], a[0]);
            linalg::YieldOp::create(
                b, l, Value(arith::SelectOp::create(b, l, hit, add, a[3])));
          })
          .getResult(0);
  rw.replaceOp(op, fromNCHW(rw, loc, r, resT));
  return success();
}

//===----------------------------------------------------------------------===//
// Average pooling
//===----------------------------------------------------------------------===//

/// PyTorch's avg_pool2d divisor per output position, row-major. Windows
/// that hold no input element (their sum is 0) get 1.
SmallVector<double> avgDivisors(const PoolParams &p, const PoolGeom &g,
                                bool countIncludePad,
                                std::optional<int64_t> divisorOverride) {
  SmallVector<double> out;
  for (int64_t oh = 0; oh < g.OH; ++oh) {
    for (int64_t ow = 0; ow < g.OW; ++ow) {
      int64_t o[2] = {oh, ow}, n[2], padded[2];
      for (int d = 0; d < 2; ++d) {
        int64_t start = o[d] * p.stride[d] - p.padding[d];
        int64_t end = std::min(start + p.kernel[d], g.dims(d) + p.padding[d]);
        padded[d] = end - start;
        n[d] = std::min(end, g.dims(d)) - std::max(start, int64_t(0));
      }
      if (n[0] <= 0 || n[1] <= 0)
        out.push_back(1);
      else if (divisorOverride)
        out.push_back(*divisorOverride);
      else
        out.push_back(countIncludePad ? padded[0] * padded[1] : n[0] * n[1]);
    }
  }
  return out;
}

/// Sum pooling of `x` (N, C, H, W) then the division: avg_pool2d.
Value emitAvgPool(OpBuilder &b, Location loc, Value x, const PoolParams &p,
                  const PoolGeom &g, ArrayRef<double> divisors) {
  Type et = cast<RankedTensorType>(x.getType()).getElementType();
  SmallVector<int64_t> high;
  for (int d = 0; d < 2; ++d)
    high.push_back(std::max(p.padding[d], (g.outs(d) - 1) * p.stride[d] +
                                              p.kernel[d] - g.dims(d) -
                                              p.padding[d]));
  Value zero = scalarConstant(b, loc, et, 0.0);
  Value xp = padTrailing(b, loc, x, p.padding, high, zero);
  Value init = filledNC(b, loc, x, g.OH, g.OW, zero);
  Value sum =
      linalg::PoolingNchwSumOp::create(
          b, loc, init.getType(), ValueRange{xp, windowOperand(b, loc, p, et)},
          init, b.getI64TensorAttr(p.stride), b.getI64TensorAttr({1, 1}))
          .getResult(0);
  return divideBy(b, loc, sum, divisors, g.OH, g.OW);
}

/// avg_pool2d_backward of `go` (N, C, OH, OW) for an input like `x`: the
/// grads over their divisors, spread every `stride` elements, summed over
/// the kernel window of each input position.
Value emitAvgPoolBackward(OpBuilder &b, Location loc, Value go, Value x,
                          const PoolParams &p, const PoolGeom &g,
                          ArrayRef<double> divisors) {
  Type et = cast<RankedTensorType>(go.getType()).getElementType();
  Value scaled = divideBy(b, loc, go, divisors, g.OH, g.OW);
  SmallVector<int64_t> size, offset;
  for (int d = 0; d < 2; ++d) {
    offset.push_back(p.kernel[d] - 1 - p.padding[d]); // padding <= kernel / 2
    size.push_back(std::max(g.dims(d) + p.kernel[d] - 1,
                            offset.back() + (g.outs(d) - 1) * p.stride[d] + 1));
  }
  Value zero = scalarConstant(b, loc, et, 0.0);
  Value z = spreadTrailing(b, loc, scaled, zero, size, offset, p.stride);
  Value init = filledNC(b, loc, x, g.H, g.W, zero);
  return linalg::PoolingNchwSumOp::create(
             b, loc, init.getType(),
             ValueRange{z, windowOperand(b, loc, p, et)}, init,
             b.getI64TensorAttr({1, 1}), b.getI64TensorAttr({1, 1}))
      .getResult(0);
}

struct AvgArgs {
  PoolParams p;
  bool countIncludePad;
  std::optional<int64_t> divisorOverride;
};

std::optional<AvgArgs> getAvgArgs(DLOp op) {
  std::optional<PoolParams> p = getPoolParams(op, /*hasDilation=*/false);
  if (!p)
    return std::nullopt;
  std::optional<int64_t> div = getIntArg(op, "divisor_override");
  if (div && *div == 0)
    return std::nullopt; // PyTorch raises.
  return AvgArgs{*p, getBoolArg(op, "count_include_pad").value_or(true), div};
}

LogicalResult lowerAvgPool(DLOp op, ValueRange o, PatternRewriter &rw) {
  // 1. Static properties.
  if (o.size() != 1 || op.getNumResults() != 1 || !isPoolTensor(o[0].getType()))
    return rw.notifyMatchFailure(op, "expects one f32/f64 NCHW/CHW input");
  auto xT = cast<RankedTensorType>(o[0].getType());
  RankedTensorType x4 = as4d(xT), resT = resultType(op);
  std::optional<AvgArgs> a = getAvgArgs(op);
  std::optional<PoolGeom> g = a ? getPoolGeom(x4, a->p) : std::nullopt;
  if (!g || resT.getRank() != xT.getRank() ||
      resT.getElementType() != xT.getElementType() ||
      !compatibleNC(resT, x4, g->OH, g->OW))
    return rw.notifyMatchFailure(op, "unsupported args or sizes");

  // 2.-4. (no guards: sizes come from the input).
  Location loc = op.getLoc();
  Value x = to4d(rw, loc, o[0]);
  Value r = emitAvgPool(
      rw, loc, x, a->p, *g,
      avgDivisors(a->p, *g, a->countIncludePad, a->divisorOverride));
  rw.replaceOp(op, fromNCHW(rw, loc, r, resT));
  return success();
}

/// aten.avg_pool2d_backward(grad_output, input).
LogicalResult lowerAvgPoolBackward(DLOp op, ValueRange o, PatternRewriter &rw) {
  // 1. Static properties.
  if (o.size() != 2 || op.getNumResults() != 1 || !isPoolTensor(o[1].getType()))
    return rw.notifyMatchFailure(op, "expects grad_output and input");
  auto goT = cast<RankedTensorType>(o[0].getType());
  auto xT = cast<RankedTensorType>(o[1].getType());
  RankedTensorType x4 = as4d(xT), resT = resultType(op);
  std::optional<AvgArgs> a = getAvgArgs(op);
  std::optional<PoolGeom> g = a ? getPoolGeom(x4, a->p) : std::nullopt;
  if (!g || goT.getRank() != xT.getRank() || resT.getRank() != xT.getRank() ||
      goT.getElementType() != xT.getElementType() ||
      resT.getElementType() != xT.getElementType() ||
      !compatibleNC(goT, x4, g->OH, g->OW) ||
      !compatibleNC(resT, x4, g->H, g->W))
    return rw.notifyMatchFailure(op, "unsupported args or sizes");

  // 2. Guards.
  Location loc = op.getLoc();
  Value x = to4d(rw, loc, o[1]), go = to4d(rw, loc, o[0]);
  guardNC(rw, loc, go, x);
  go = withSpatial(rw, loc, go, g->OH, g->OW);

  // 3./4.
  Value r = emitAvgPoolBackward(
      rw, loc, go, x, a->p, *g,
      avgDivisors(a->p, *g, a->countIncludePad, a->divisorOverride));
  rw.replaceOp(op, fromNCHW(rw, loc, r, resT));
  return success();
}

//===----------------------------------------------------------------------===//
// Adaptive average pooling
//===----------------------------------------------------------------------===//

/// The window [start, end) of output `i` of `out` over `in` elements.
std::pair<int64_t, int64_t> adaptiveWindow(int64_t i, int64_t in, int64_t out) {
  return {(i * in) / out, ((i + 1) * in + out - 1) / out};
}

/// An i1 (out, in) constant: whether input j is in output i's window.
Value windowMask(OpBuilder &b, Location loc, int64_t in, int64_t out) {
  SmallVector<bool> bits;
  for (int64_t i = 0; i < out; ++i) {
    auto [s, e] = adaptiveWindow(i, in, out);
    for (int64_t j = 0; j < in; ++j)
      bits.push_back(j >= s && j < e);
  }
  auto type = RankedTensorType::get({out, in}, b.getI1Type());
  return arith::ConstantOp::create(b, loc, DenseElementsAttr::get(type, bits));
}

/// Guards that every size in `sizes` (index values) is positive.
void guardPositive(OpBuilder &b, Location loc, ValueRange sizes,
                   StringRef msg) {
  Value zero = idx(b, loc, 0);
  for (Value v : sizes)
    cf::AssertOp::create(
        b, loc,
        arith::CmpIOp::create(b, loc, arith::CmpIPredicate::sgt, v, zero), msg);
}

/// Contracts dim `dim` (2 or 3) of `x` (N, C, A, B) with the i1 `mask`
/// (out, in): forward (x's dim is `in`) gives out[o] = sum_{j in window o}
/// x[j]; backward (x's dim is `out`) gives out[j] = sum_{o: j in window o}
/// x[o].
Value maskedSum(OpBuilder &b, Location loc, Value x, Value mask, int dim,
                bool backward) {
  auto xt = cast<RankedTensorType>(x.getType());
  auto mt = cast<RankedTensorType>(mask.getType());
  Type et = xt.getElementType();
  SmallVector<OpFoldResult> sizes = getSizes(b, loc, x);
  sizes[dim] = b.getIndexAttr(mt.getDimSize(backward ? 1 : 0));
  Value zero = scalarConstant(b, loc, et, 0.0);
  Value empty = tensor::EmptyOp::create(b, loc, sizes, et);
  Value init = linalg::FillOp::create(b, loc, zero, empty).getResult(0);
  // Loops (n, c, a, b | r).
  MLIRContext *ctx = b.getContext();
  auto d = [&](unsigned i) { return getAffineDimExpr(i, ctx); };
  SmallVector<AffineExpr> xe = {d(0), d(1), d(2), d(3)};
  xe[dim] = d(4);
  auto xMap = AffineMap::get(5, 0, xe, ctx);
  auto mMap = backward ? AffineMap::get(5, 0, {d(4), d(dim)}, ctx)
                       : AffineMap::get(5, 0, {d(dim), d(4)}, ctx);
  auto outMap = AffineMap::get(5, 0, {d(0), d(1), d(2), d(3)}, ctx);
  SmallVector<utils::IteratorType> iters(4, utils::IteratorType::parallel);
  iters.push_back(utils::IteratorType::reduction);
  return linalg::GenericOp::create(
             b, loc, init.getType(), ValueRange{x, mask}, init,
             {xMap, mMap, outMap}, iters,
             [&](OpBuilder &nb, Location nl, ValueRange a) {
               Value add = arith::AddFOp::create(nb, nl, a[2], a[0]);
               linalg::YieldOp::create(
                   nb, nl,
                   Value(arith::SelectOp::create(nb, nl, a[1], add, a[2])));
             })
      .getResult(0);
}

/// [floor(p * src / res), ceil((p + 1) * src / res)) for index values: the
/// window of adaptive pooling's output p over src inputs (adaptiveWindow's
/// rule, in IR).
std::pair<Value, Value> windowBounds(OpBuilder &b, Location loc, Value p,
                                     Value src, Value res) {
  Value pSrc = arith::MulIOp::create(b, loc, p, src);
  Value start = arith::DivUIOp::create(b, loc, pSrc, res);
  Value end = arith::DivUIOp::create(
      b, loc,
      arith::AddIOp::create(b, loc, arith::AddIOp::create(b, loc, pSrc, src),
                            arith::SubIOp::create(b, loc, res, idx(b, loc, 1))),
      res);
  return {start, end};
}

/// The same contraction with run-time sizes, as a gather over bounded
/// windows: dim `dim` of `x` has `src` positions and the result `res`;
/// result position p sums x over [floor(p * src / res), ceil((p + 1) * src /
/// res)). That is adaptive pooling's window of output p (forward: src = in,
/// res = out), and also the outputs whose windows contain input p
/// (backward: src = out, res = in). No window is longer than
/// ceil(src / res) + 1, which bounds the reduction loop (the extent of an
/// empty `window` operand, as the pooling ops' window operand).
Value windowGather(OpBuilder &b, Location loc, Value x, int dim, Value src,
                   Value res) {
  auto xt = cast<RankedTensorType>(x.getType());
  Type et = xt.getElementType();
  SmallVector<OpFoldResult> sizes = getSizes(b, loc, x);
  sizes[dim] = getAsOpFoldResult(res);
  Value zero = scalarConstant(b, loc, et, 0.0);
  Value empty = tensor::EmptyOp::create(b, loc, sizes, et);
  Value init = linalg::FillOp::create(b, loc, zero, empty).getResult(0);
  Value one = idx(b, loc, 1);
  Value resLess1 = arith::SubIOp::create(b, loc, res, one);
  Value longest = arith::AddIOp::create(
      b, loc,
      arith::DivUIOp::create(b, loc,
                             arith::AddIOp::create(b, loc, src, resLess1), res),
      one);
  Value window = tensor::EmptyOp::create(
      b, loc, ArrayRef<OpFoldResult>{OpFoldResult(longest)}, et);
  Value last = arith::SubIOp::create(b, loc, src, one);
  // Loops (n, c, a, b | k).
  MLIRContext *ctx = b.getContext();
  auto d = [&](unsigned i) { return getAffineDimExpr(i, ctx); };
  auto wMap = AffineMap::get(5, 0, {d(4)}, ctx);
  auto outMap = AffineMap::get(5, 0, {d(0), d(1), d(2), d(3)}, ctx);
  SmallVector<utils::IteratorType> iters(4, utils::IteratorType::parallel);
  iters.push_back(utils::IteratorType::reduction);
  return linalg::GenericOp::create(
             b, loc, init.getType(), ValueRange{window}, init, {wMap, outMap},
             iters,
             [&](OpBuilder &nb, Location nl, ValueRange a) {
               SmallVector<Value> at;
               for (int64_t i = 0; i < 4; ++i)
                 at.push_back(linalg::IndexOp::create(nb, nl, i));
               auto [lo, hi] = windowBounds(nb, nl, at[dim], src, res);
               Value j = arith::AddIOp::create(
                   nb, nl, lo, linalg::IndexOp::create(nb, nl, 4));
               Value inside = arith::CmpIOp::create(
                   nb, nl, arith::CmpIPredicate::ult, j, hi);
               at[dim] = arith::MinUIOp::create(nb, nl, j, last);
               Value v = tensor::ExtractOp::create(nb, nl, x, at);
               Value add = arith::AddFOp::create(nb, nl, a[1], v);
               linalg::YieldOp::create(
                   nb, nl,
                   Value(arith::SelectOp::create(nb, nl, inside, add, a[1])));
             })
      .getResult(0);
}

/// The size of output `o`'s window over `in` of `out` (index values):
/// ceil((o + 1) * in / out) - floor(o * in / out).
Value windowSize(OpBuilder &b, Location loc, Value o, Value in, Value out) {
  auto [start, end] = windowBounds(b, loc, o, in, out);
  return arith::SubIOp::create(b, loc, end, start);
}

/// `t` (N, C, OH, OW) divided by its adaptive windows' sizes over (H, W),
/// computed from the run-time sizes.
Value divideByWindows(OpBuilder &b, Location loc, Value t, Value h, Value oh,
                      Value w, Value ow) {
  auto type = cast<RankedTensorType>(t.getType());
  Type et = type.getElementType();
  Value empty =
      tensor::EmptyOp::create(b, loc, getSizes(b, loc, t), et).getResult();
  auto id = AffineMap::getMultiDimIdentityMap(4, b.getContext());
  SmallVector<utils::IteratorType> iters(4, utils::IteratorType::parallel);
  return linalg::GenericOp::create(
             b, loc, type, ValueRange{t}, ValueRange{empty},
             ArrayRef<AffineMap>{id, id}, iters,
             [&](OpBuilder &nb, Location nl, ValueRange a) {
               Value count = arith::MulIOp::create(
                   nb, nl,
                   windowSize(nb, nl, linalg::IndexOp::create(nb, nl, 2), h,
                              oh),
                   windowSize(nb, nl, linalg::IndexOp::create(nb, nl, 3), w,
                              ow));
               Value n =
                   arith::IndexCastOp::create(nb, nl, nb.getI64Type(), count);
               Value f = arith::SIToFPOp::create(nb, nl, et, n);
               linalg::YieldOp::create(
                   nb, nl, Value(arith::DivFOp::create(nb, nl, a[0], f)));
             })
      .getResult(0);
}

/// Window sizes of adaptive pooling per output position, row-major.
SmallVector<double> adaptiveCounts(const PoolGeom &g) {
  SmallVector<double> out;
  for (int64_t oh = 0; oh < g.OH; ++oh) {
    auto [hs, he] = adaptiveWindow(oh, g.H, g.OH);
    for (int64_t ow = 0; ow < g.OW; ++ow) {
      auto [ws, we] = adaptiveWindow(ow, g.W, g.OW);
      out.push_back(double((he - hs) * (we - ws)));
    }
  }
  return out;
}

/// When the sizes divide, adaptive pooling is avg_pool2d with
/// kernel = stride = in / out.
std::optional<PoolParams> adaptiveAsAvg(const PoolGeom &g) {
  if (g.H % g.OH || g.W % g.OW)
    return std::nullopt;
  int64_t kh = g.H / g.OH, kw = g.W / g.OW;
  return PoolParams{{kh, kw}, {kh, kw}, {0, 0}, {1, 1}, false};
}

LogicalResult lowerAdaptiveAvgPool(DLOp op, ValueRange o, PatternRewriter &rw) {
  // 1. Static properties.
  if (o.size() != 1 || op.getNumResults() != 1 || !isPoolTensor(o[0].getType()))
    return rw.notifyMatchFailure(op, "expects one f32/f64 NCHW/CHW input");
  auto xT = cast<RankedTensorType>(o[0].getType());
  RankedTensorType x4 = as4d(xT), resT = resultType(op), r4 = as4d(resT);
  if (resT.getRank() != xT.getRank() ||
      resT.getElementType() != xT.getElementType())
    return rw.notifyMatchFailure(op, "unsupported sizes");
  auto outSize =
      getSpatialArg(op, "output_size", 2, {r4.getDimSize(2), r4.getDimSize(3)});
  if (!outSize || isDyn((*outSize)[0]) || isDyn((*outSize)[1]) ||
      (*outSize)[0] < 1 || (*outSize)[1] < 1)
    return rw.notifyMatchFailure(op, "needs a static output size");
  PoolGeom g{x4.getDimSize(2), x4.getDimSize(3), (*outSize)[0], (*outSize)[1]};
  if (!compatibleNC(resT, x4, g.OH, g.OW))
    return rw.notifyMatchFailure(op, "result type does not match");

  Location loc = op.getLoc();
  Value x = to4d(rw, loc, o[0]);
  Value r;
  if (isDyn(g.H) || isDyn(g.W)) {
    // Windows from the run-time input sizes.
    Value h = tensor::DimOp::create(rw, loc, x, 2);
    Value w = tensor::DimOp::create(rw, loc, x, 3);
    Value oh = idx(rw, loc, g.OH), ow = idx(rw, loc, g.OW);
    guardPositive(rw, loc, {h, w}, "adaptive pooling of an empty input");
    r = windowGather(rw, loc, x, 2, h, oh);
    r = windowGather(rw, loc, r, 3, w, ow);
    r = divideByWindows(rw, loc, r, h, oh, w, ow);
  } else if (std::optional<PoolParams> p = adaptiveAsAvg(g)) {
    r = emitAvgPool(rw, loc, x, *p, g, {double(p->kernel[0] * p->kernel[1])});
  } else {
    r = maskedSum(rw, loc, x, windowMask(rw, loc, g.H, g.OH), 2, false);
    r = maskedSum(rw, loc, r, windowMask(rw, loc, g.W, g.OW), 3, false);
    r = divideBy(rw, loc, r, adaptiveCounts(g), g.OH, g.OW);
  }
  rw.replaceOp(op, fromNCHW(rw, loc, r, resT));
  return success();
}

/// aten._adaptive_avg_pool2d_backward(grad_output, input).
LogicalResult lowerAdaptiveAvgPoolBackward(DLOp op, ValueRange o,
                                           PatternRewriter &rw) {
  // 1. Static properties.
  if (o.size() != 2 || op.getNumResults() != 1 || !isPoolTensor(o[1].getType()))
    return rw.notifyMatchFailure(op, "expects grad_output and input");
  auto goT = cast<RankedTensorType>(o[0].getType());
  auto xT = cast<RankedTensorType>(o[1].getType());
  RankedTensorType x4 = as4d(xT), g4 = as4d(goT), resT = resultType(op);
  if (goT.getRank() != xT.getRank() || resT.getRank() != xT.getRank() ||
      goT.getElementType() != xT.getElementType() ||
      resT.getElementType() != xT.getElementType() ||
      (!g4.isDynamicDim(2) && g4.getDimSize(2) < 1) ||
      (!g4.isDynamicDim(3) && g4.getDimSize(3) < 1))
    return rw.notifyMatchFailure(op, "unsupported sizes");
  PoolGeom g{x4.getDimSize(2), x4.getDimSize(3), g4.getDimSize(2),
             g4.getDimSize(3)};
  if (!compatibleNC(goT, x4, g.OH, g.OW) || !compatibleNC(resT, x4, g.H, g.W))
    return rw.notifyMatchFailure(op, "operand or result types do not match");

  // 2. Guards.
  Location loc = op.getLoc();
  Value x = to4d(rw, loc, o[1]), go = to4d(rw, loc, o[0]);
  guardNC(rw, loc, go, x);

  // 3./4.
  Value r;
  if (isDyn(g.H) || isDyn(g.W) || isDyn(g.OH) || isDyn(g.OW)) {
    // Windows from the run-time sizes (an empty grad_output has none).
    Value h = tensor::DimOp::create(rw, loc, x, 2);
    Value w = tensor::DimOp::create(rw, loc, x, 3);
    Value oh = tensor::DimOp::create(rw, loc, go, 2);
    Value ow = tensor::DimOp::create(rw, loc, go, 3);
    guardPositive(rw, loc, {h, w, oh, ow},
                  "adaptive pooling gradient of an empty input or output");
    r = divideByWindows(rw, loc, go, h, oh, w, ow);
    r = windowGather(rw, loc, r, 3, ow, w);
    r = windowGather(rw, loc, r, 2, oh, h);
  } else if (std::optional<PoolParams> p = adaptiveAsAvg(g)) {
    r = emitAvgPoolBackward(rw, loc, go, x, *p, g,
                            {double(p->kernel[0] * p->kernel[1])});
  } else {
    r = divideBy(rw, loc, go, adaptiveCounts(g), g.OH, g.OW);
    r = maskedSum(rw, loc, r, windowMask(rw, loc, g.W, g.OW), 3, true);
    r = maskedSum(rw, loc, r, windowMask(rw, loc, g.H, g.OH), 2, true);
  }
  rw.replaceOp(op, fromNCHW(rw, loc, r, resT));
  return success();
}

} // namespace

namespace {

/// The integer factor of each spatial dim of an NCHW nearest upsampling
/// from `in` to `out` (static sizes, out = factor * in), checked against
/// the op's `scale_factors` when it has them; nullopt otherwise. With an
/// integer factor, aten's source index floor(dst * (1 / factor)) is the
/// integer division dst / factor.
std::optional<SmallVector<int64_t>> nearestFactors(DLOp op, RankedTensorType in,
                                                   RankedTensorType out) {
  if (in.getRank() != 4 || out.getRank() != 4)
    return std::nullopt;
  SmallVector<int64_t> factors;
  for (int64_t d = 2; d < 4; ++d) {
    int64_t i = in.getDimSize(d), o = out.getDimSize(d);
    if (ShapedType::isDynamic(i) || ShapedType::isDynamic(o) || i <= 0 ||
        o % i != 0)
      return std::nullopt;
    factors.push_back(o / i);
  }
  Attribute scales =
      op.getArgsAttr() ? op.getArgsAttr().get("scale_factors") : nullptr;
  if (auto list = dyn_cast_or_null<ArrayAttr>(scales)) {
    if (list.size() != 2)
      return std::nullopt;
    for (auto [k, a] : llvm::enumerate(list)) {
      auto f = dyn_cast<FloatAttr>(a);
      auto n = dyn_cast<IntegerAttr>(a);
      double v = f ? f.getValueAsDouble() : n ? double(n.getInt()) : -1.0;
      if (v != double(factors[k]))
        return std::nullopt;
    }
  }
  return factors;
}

/// upsample_nearest2d.vec(input, output_size, scale_factors) with integer
/// factors: out[n, c, h, w] = in[n, c, h / fh, w / fw], one
/// linalg.generic whose input map divides the spatial indices.
LogicalResult lowerUpsampleNearest(DLOp op, ValueRange o, PatternRewriter &rw) {
  if (o.size() != 1)
    return failure();
  RankedTensorType in = cast<RankedTensorType>(o[0].getType());
  RankedTensorType out = resultType(op);
  std::optional<SmallVector<int64_t>> f = nearestFactors(op, in, out);
  if (!f)
    return failure();
  Location loc = op.getLoc();
  MLIRContext *ctx = rw.getContext();
  AffineExpr n = getAffineDimExpr(0, ctx), c = getAffineDimExpr(1, ctx);
  AffineExpr h = getAffineDimExpr(2, ctx), w = getAffineDimExpr(3, ctx);
  AffineMap src = AffineMap::get(
      4, 0, {n, c, h.floorDiv((*f)[0]), w.floorDiv((*f)[1])}, ctx);
  SmallVector<Value> dyn;
  for (int64_t d = 0; d < 2; ++d)
    if (out.isDynamicDim(d))
      dyn.push_back(tensor::DimOp::create(rw, loc, o[0], d));
  Value init = tensor::EmptyOp::create(rw, loc, out, dyn);
  auto g = linalg::GenericOp::create(
      rw, loc, out, o[0], init,
      SmallVector<AffineMap>{src, rw.getMultiDimIdentityMap(4)},
      SmallVector<utils::IteratorType>(4, utils::IteratorType::parallel),
      [](OpBuilder &b, Location l, ValueRange a) {
        linalg::YieldOp::create(b, l, a[0]);
      });
  rw.replaceOp(op, g.getResult(0));
  return success();
}

/// upsample_nearest2d_backward.vec(grad_output, output_size, input_size,
/// scale_factors) with integer factors: each input position sums its
/// fh x fw block of grad_output (a reduction over the block's offsets).
LogicalResult lowerUpsampleNearestBackward(DLOp op, ValueRange o,
                                           PatternRewriter &rw) {
  if (o.size() != 1)
    return failure();
  RankedTensorType grad = cast<RankedTensorType>(o[0].getType());
  RankedTensorType out = resultType(op);
  std::optional<SmallVector<int64_t>> f = nearestFactors(op, out, grad);
  if (!f || !isFloat(out.getElementType()))
    return failure();
  Location loc = op.getLoc();
  MLIRContext *ctx = rw.getContext();
  SmallVector<AffineExpr> d;
  for (unsigned i = 0; i < 6; ++i)
    d.push_back(getAffineDimExpr(i, ctx));
  // (n, c, h, w, a, b): grad_output[n, c, h * fh + a, w * fw + b].
  AffineMap src = AffineMap::get(
      6, 0, {d[0], d[1], d[2] * (*f)[0] + d[4], d[3] * (*f)[1] + d[5]}, ctx);
  AffineMap block = AffineMap::get(6, 0, {d[4], d[5]}, ctx);
  AffineMap dst = AffineMap::get(6, 0, {d[0], d[1], d[2], d[3]}, ctx);
  SmallVector<Value> dyn;
  for (int64_t k = 0; k < 2; ++k)
    if (out.isDynamicDim(k))
      dyn.push_back(tensor::DimOp::create(rw, loc, o[0], k));
  Value zero = scalarConstant(rw, loc, out.getElementType(), 0.0);
  Value empty = tensor::EmptyOp::create(rw, loc, out, dyn);
  Value init = linalg::FillOp::create(rw, loc, zero, empty).getResult(0);
  // The block's shape as an operand fixes the reduction dims' extents.
  Value window = tensor::EmptyOp::create(
      rw, loc, SmallVector<int64_t>{(*f)[0], (*f)[1]}, out.getElementType());
  using IT = utils::IteratorType;
  auto g = linalg::GenericOp::create(
      rw, loc, out, ValueRange{o[0], window}, init,
      SmallVector<AffineMap>{src, block, dst},
      SmallVector<IT>{IT::parallel, IT::parallel, IT::parallel, IT::parallel,
                      IT::reduction, IT::reduction},
      [](OpBuilder &b, Location l, ValueRange a) {
        linalg::YieldOp::create(b, l,
                                Value(arith::AddFOp::create(b, l, a[2], a[0])));
      });
  rw.replaceOp(op, g.getResult(0));
  return success();
}

} // namespace

void terra::populatePoolingLowerings(LoweringRegistry &r) {
  r.add("aten.upsample_nearest2d.vec", lowerUpsampleNearest);
  r.add("aten.upsample_nearest2d", lowerUpsampleNearest);
  r.add("aten.upsample_nearest2d_backward.vec", lowerUpsampleNearestBackward);
  r.add("aten.upsample_nearest2d_backward", lowerUpsampleNearestBackward);
  r.add("aten.max_pool2d", lowerMaxPoolValues);
  r.add("aten.max_pool2d_with_indices", lowerMaxPoolWithIndices);
  r.add("aten.max_pool2d_with_indices_backward", lowerMaxPoolBackward);
  r.add("aten.avg_pool2d", lowerAvgPool);
  r.add("aten.avg_pool2d_backward", lowerAvgPoolBackward);
  r.add("aten._adaptive_avg_pool2d", lowerAdaptiveAvgPool);
  r.add("aten._adaptive_avg_pool2d_backward", lowerAdaptiveAvgPoolBackward);
}
