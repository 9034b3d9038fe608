//===- GridSample.cpp - grid_sampler_2d and its backward ------------------===//
//
// aten.grid_sampler_2d(input [N, C, H, W], grid [N, Ho, Wo, 2],
// interpolation_mode, padding_mode, align_corners) -> [N, C, Ho, Wo] samples
// `input` at the normalized (x, y) points of `grid` (Faster R-CNN's RoI
// pooling, spatial transformers). Bilinear (0) and nearest (1)
// interpolation with zeros (0) or border (1) padding are lowered; bicubic
// and reflection padding fail and run as host ops.
//
// The coordinate arithmetic follows aten's vectorized CPU kernel
// (GridSamplerKernel.cpp), so that results round as eager's do:
//   x = (gx + 1) * (W - 1) / 2          with align_corners,
//   x = (gx + 1) * W / 2 - 0.5          without,
// clipped to [0, W - 1] with border padding; bilinear weights from the
// distances to the floor corner (w = x - floor(x), e = 1 - w; n, s the
// same in y), the four corners summed nw, ne, sw, se, a corner outside the
// input contributing 0; nearest rounds half to even.
//
// The forward is one linalg.generic over the output that reads the grid
// point and the corners with tensor.extract (clamped indices, the value
// selected to 0 out of bounds). The backward is
//   grad_input: a scatter-add, as aten does it: an scf.for nest over the
//     grid points (n, ho, wo) that computes the corners and weights once,
//     then an scf.for over channels adding gOut * weight into each corner
//     in place (the tensor carried through the loops bufferizes in place);
//   grad_grid: a linalg.generic over [N, Ho, Wo, 2] reducing over channels
//     (the derivative of the interpolation in x or y times gOut), then
//     scaled by the derivative of the unnormalization (0 where border
//     padding clipped). Zero for nearest interpolation. An unused grad_grid
//     is dead code and goes away.
// Results follow output_mask as in Normalization.cpp: aten always returns
// grad_grid and returns grad_input only when output_mask[0] is set, so the
// op has two results, or one (grad_grid) with output_mask[0] clear.
//
//===----------------------------------------------------------------------===//
#include "Utils.h"

#include "mlir/Dialect/SCF/IR/SCF.h"

using namespace mlir;
using namespace terra;
using namespace terra::lowering;

namespace {

/// The sampling options, when this lowering supports them.
struct Sampler {
  bool nearest = false;
  bool border = false;
  bool alignCorners = false;
};

std::optional<Sampler> samplerArgs(DLOp op) {
  std::optional<int64_t> interp = getIntArg(op, "interpolation_mode");
  std::optional<int64_t> padding = getIntArg(op, "padding_mode");
  std::optional<bool> align = getBoolArg(op, "align_corners");
  if (!interp || !padding || !align || (*interp != 0 && *interp != 1) ||
      (*padding != 0 && *padding != 1))
    return std::nullopt;
  return Sampler{*interp == 1, *padding == 1, *align};
}

/// Whether `input` [N, C, H, W] and `grid` [N, Ho, Wo, 2] have the ranks and
/// the float element type `et` this lowering handles.
bool samplerOperands(Value input, Value grid, Type et) {
  RankedTensorType it = tensorType(input), gt = tensorType(grid);
  return isa<Float32Type, Float64Type>(et) && it.getElementType() == et &&
         gt.getElementType() == et && it.getRank() == 4 && gt.getRank() == 4 &&
         gt.getDimSize(3) == 2;
}

Value toFloat(OpBuilder &b, Location l, Value index, Type et) {
  return arith::SIToFPOp::create(
      b, l, et, arith::IndexCastOp::create(b, l, b.getI64Type(), index));
}

/// One axis of the input (its size an index value): the source coordinate
/// of a normalized grid value and d(coordinate)/d(grid value).
struct Axis {
  Value sizeF; ///< the size as a float
  Value scale; ///< the unnormalization's factor

  Axis(OpBuilder &b, Location l, Value size, const Sampler &s, Type et)
      : sizeF(toFloat(b, l, size, et)) {
    Value extent = s.alignCorners
                       ? arith::SubFOp::create(b, l, sizeF, cst(b, l, sizeF, 1))
                       : sizeF;
    scale = arith::DivFOp::create(b, l, extent, cst(b, l, sizeF, 2));
  }

  /// The unnormalized coordinate, clipped with border padding.
  Value coordinate(OpBuilder &b, Location l, Value g, const Sampler &s) const {
    Value x = unnormalized(b, l, g, s);
    if (s.border)
      x = arith::MinimumFOp::create(
          b, l, arith::MaximumFOp::create(b, l, x, cst(b, l, g, 0)),
          last(b, l));
    return x;
  }

  /// d(coordinate)/d(g): the scale, 0 where border padding clipped (aten
  /// counts the borders themselves as clipped).
  Value derivative(OpBuilder &b, Location l, Value g, const Sampler &s) const {
    if (!s.border)
      return scale;
    Value x = unnormalized(b, l, g, s);
    Value inside = arith::AndIOp::create(
        b, l,
        arith::CmpFOp::create(b, l, arith::CmpFPredicate::OGT, x,
                              cst(b, l, g, 0)),
        arith::CmpFOp::create(b, l, arith::CmpFPredicate::OLT, x, last(b, l)));
    return arith::SelectOp::create(b, l, inside, scale, cst(b, l, g, 0));
  }

  /// Whether the whole-number float `f` is a position on this axis.
  Value contains(OpBuilder &b, Location l, Value f) const {
    return arith::AndIOp::create(
        b, l,
        arith::CmpFOp::create(b, l, arith::CmpFPredicate::OGE, f,
                              cst(b, l, f, 0)),
        arith::CmpFOp::create(b, l, arith::CmpFPredicate::OLT, f, sizeF));
  }

  /// `f` as an index clamped to the axis (NaN gives 0), safe to read even
  /// where `contains` is false.
  Value index(OpBuilder &b, Location l, Value f) const {
    Value c = arith::MaxNumFOp::create(b, l, f, cst(b, l, f, 0));
    c = arith::MinNumFOp::create(b, l, c, last(b, l));
    return arith::IndexCastOp::create(
        b, l, b.getIndexType(),
        arith::FPToSIOp::create(b, l, b.getI64Type(), c));
  }

private:
  /// (g + 1) * scale, less 0.5 without align_corners.
  Value unnormalized(OpBuilder &b, Location l, Value g,
                     const Sampler &s) const {
    Value x = arith::MulFOp::create(
        b, l, arith::AddFOp::create(b, l, g, cst(b, l, g, 1)), scale);
    if (!s.alignCorners)
      x = arith::SubFOp::create(b, l, x, cst(b, l, g, 0.5));
    return x;
  }
  /// The last position, size - 1, as a float.
  Value last(OpBuilder &b, Location l) const {
    return arith::SubFOp::create(b, l, sizeF, cst(b, l, sizeF, 1));
  }
};

/// A corner of the interpolation: its position, whether it lies inside the
/// input, and its weight.
struct Corner {
  Value y, x;   ///< clamped indices
  Value inside; ///< i1
  Value weight;
};

/// The grid point (n, ho, wo): its corners (four for bilinear, in aten's
/// order nw, ne, sw, se; one for nearest) and the distances that the
/// gradient of the bilinear weights needs.
struct Point {
  SmallVector<Corner, 4> corners;
  Value w, e, n, s; ///< bilinear only
};

Point samplePoint(OpBuilder &b, Location l, Value grid, Value ni, Value hi,
                  Value wi, const Axis &ay, const Axis &ax, const Sampler &s) {
  Value gx = tensor::ExtractOp::create(
      b, l, grid,
      ValueRange{ni, hi, wi, arith::ConstantIndexOp::create(b, l, 0)});
  Value gy = tensor::ExtractOp::create(
      b, l, grid,
      ValueRange{ni, hi, wi, arith::ConstantIndexOp::create(b, l, 1)});
  Value x = ax.coordinate(b, l, gx, s), y = ay.coordinate(b, l, gy, s);
  Point p;
  auto corner = [&](Value yf, Value xf, Value weight) {
    Value inside = arith::AndIOp::create(b, l, ay.contains(b, l, yf),
                                         ax.contains(b, l, xf));
    p.corners.push_back(
        {ay.index(b, l, yf), ax.index(b, l, xf), inside, weight});
  };
  if (s.nearest) {
    corner(math::RoundEvenOp::create(b, l, y),
           math::RoundEvenOp::create(b, l, x), cst(b, l, x, 1));
    return p;
  }
  Value xw = math::FloorOp::create(b, l, x),
        yn = math::FloorOp::create(b, l, y);
  Value xe = arith::AddFOp::create(b, l, xw, cst(b, l, x, 1));
  Value ys = arith::AddFOp::create(b, l, yn, cst(b, l, y, 1));
  p.w = arith::SubFOp::create(b, l, x, xw);
  p.e = arith::SubFOp::create(b, l, cst(b, l, x, 1), p.w);
  p.n = arith::SubFOp::create(b, l, y, yn);
  p.s = arith::SubFOp::create(b, l, cst(b, l, y, 1), p.n);
  auto mul = [&](Value a, Value c) -> Value {
    return arith::MulFOp::create(b, l, a, c);
  };
  corner(yn, xw, mul(p.s, p.e));
  corner(yn, xe, mul(p.s, p.w));
  corner(ys, xw, mul(p.n, p.e));
  corner(ys, xe, mul(p.n, p.w));
  return p;
}

/// input[n, c, corner], 0 outside the input.
Value cornerValue(OpBuilder &b, Location l, Value input, Value ni, Value ci,
                  const Corner &k) {
  Value v =
      tensor::ExtractOp::create(b, l, input, ValueRange{ni, ci, k.y, k.x});
  return arith::SelectOp::create(b, l, k.inside, v, cst(b, l, v, 0));
}

Value dim(OpBuilder &b, Location l, Value v, int64_t d) {
  return tensor::DimOp::create(b, l, v, d);
}

/// An empty tensor of `type` whose dynamic sizes are `sizes[d]`.
Value emptyOf(OpBuilder &b, Location l, RankedTensorType type,
              ArrayRef<Value> sizes) {
  SmallVector<Value> dyn;
  for (int64_t d = 0; d < type.getRank(); ++d)
    if (type.isDynamicDim(d))
      dyn.push_back(sizes[d]);
  return emptyWithSizes(b, l, type, dyn);
}

/// Zeros of `v`'s type and sizes.
Value zerosLike(OpBuilder &b, Location l, Value v) {
  RankedTensorType type = tensorType(v);
  return linalg::FillOp::create(b, l,
                                scalarConstant(b, l, type.getElementType(), 0),
                                emptyLike(b, l, type, v))
      .getResult(0);
}

/// The shape [N, C, Ho, Wo] of a sample of `input` at `grid`, as a type
/// and as sizes; the batch sizes of the two are guarded equal.
std::pair<RankedTensorType, SmallVector<Value>>
sampleShape(OpBuilder &b, Location l, Value input, Value grid) {
  RankedTensorType it = tensorType(input), gt = tensorType(grid);
  guardEqual(b, l, getSizes(b, l, input)[0], getSizes(b, l, grid)[0],
             "grid_sampler_2d: input and grid batch sizes differ");
  int64_t n = ShapedType::isDynamic(gt.getDimSize(0)) ? it.getDimSize(0)
                                                      : gt.getDimSize(0);
  auto type = RankedTensorType::get(
      {n, it.getDimSize(1), gt.getDimSize(1), gt.getDimSize(2)},
      it.getElementType());
  return {type,
          {dim(b, l, grid, 0), dim(b, l, input, 1), dim(b, l, grid, 1),
           dim(b, l, grid, 2)}};
}

LogicalResult lowerGridSampler(DLOp op, ValueRange o, PatternRewriter &rw) {
  std::optional<Sampler> s = samplerArgs(op);
  if (!s || o.size() != 2 || op.getNumResults() != 1)
    return failure();
  Value input = o[0], grid = o[1];
  RankedTensorType rt = resultType(op);
  if (!samplerOperands(input, grid, rt.getElementType()))
    return failure();
  Location loc = op.getLoc();
  auto [outType, sizes] = sampleShape(rw, loc, input, grid);
  Axis ay(rw, loc, dim(rw, loc, input, 2), *s, rt.getElementType());
  Axis ax(rw, loc, dim(rw, loc, input, 3), *s, rt.getElementType());
  AffineMap id = rw.getMultiDimIdentityMap(4);
  auto g = linalg::GenericOp::create(
      rw, loc, outType, ValueRange{}, emptyOf(rw, loc, outType, sizes),
      SmallVector<AffineMap>{id},
      SmallVector<utils::IteratorType>(4, utils::IteratorType::parallel),
      [&](OpBuilder &b, Location l, ValueRange) {
        Value ni = linalg::IndexOp::create(b, l, 0);
        Value ci = linalg::IndexOp::create(b, l, 1);
        Point p = samplePoint(b, l, grid, ni, linalg::IndexOp::create(b, l, 2),
                              linalg::IndexOp::create(b, l, 3), ay, ax, *s);
        Value acc;
        for (const Corner &k : p.corners) {
          Value t = arith::MulFOp::create(
              b, l, cornerValue(b, l, input, ni, ci, k), k.weight);
          acc = acc ? arith::AddFOp::create(b, l, acc, t).getResult() : t;
        }
        linalg::YieldOp::create(b, l, acc);
      });
  rw.replaceOp(op, castWithGuards(rw, loc, g.getResult(0), rt));
  return success();
}

/// grad_input: zeros of input's shape into which every grid point adds
/// gOut[n, c, ho, wo] * weight at each of its corners inside the input.
Value scatterGradInput(OpBuilder &rw, Location loc, Value gOut, Value input,
                       Value grid, const Axis &ay, const Axis &ax,
                       const Sampler &s) {
  Value zeros = zerosLike(rw, loc, input);
  Value channels = dim(rw, loc, input, 1);
  Value zero = arith::ConstantIndexOp::create(rw, loc, 0);
  Value one = arith::ConstantIndexOp::create(rw, loc, 1);
  SmallVector<Value> ubs = {dim(rw, loc, grid, 0), dim(rw, loc, grid, 1),
                            dim(rw, loc, grid, 2)};
  scf::LoopNest nest = scf::buildLoopNest(
      rw, loc, {zero, zero, zero}, ubs, {one, one, one}, ValueRange{zeros},
      [&](OpBuilder &b, Location l, ValueRange ivs,
          ValueRange iter) -> scf::ValueVector {
        Point p = samplePoint(b, l, grid, ivs[0], ivs[1], ivs[2], ay, ax, s);
        auto overChannels = scf::ForOp::create(
            b, l, zero, channels, one, iter,
            [&](OpBuilder &cb, Location cl, Value ci, ValueRange acc) {
              Value g = tensor::ExtractOp::create(
                  cb, cl, gOut, ValueRange{ivs[0], ci, ivs[1], ivs[2]});
              Value out = acc[0];
              for (const Corner &k : p.corners) {
                SmallVector<Value> at = {ivs[0], ci, k.y, k.x};
                Value add = arith::SelectOp::create(
                    cb, cl, k.inside,
                    arith::MulFOp::create(cb, cl, g, k.weight),
                    cst(cb, cl, g, 0));
                Value cur = tensor::ExtractOp::create(cb, cl, out, at);
                out = tensor::InsertOp::create(
                    cb, cl, arith::AddFOp::create(cb, cl, cur, add), out, at);
              }
              scf::YieldOp::create(cb, cl, out);
            });
        return {overChannels.getResult(0)};
      });
  return nest.results[0];
}

/// grad_grid [N, Ho, Wo, 2]: per point, the sum over channels of gOut times
/// the derivative of the bilinear interpolation in x (k = 0) or y (k = 1),
/// then times the unnormalization's derivative.
Value reduceGradGrid(OpBuilder &rw, Location loc, Value gOut, Value input,
                     Value grid, const Axis &ay, const Axis &ax,
                     const Sampler &s) {
  RankedTensorType gt = tensorType(grid);
  Value zeros = zerosLike(rw, loc, grid);
  if (s.nearest)
    return zeros;
  MLIRContext *ctx = rw.getContext();
  auto d = [&](unsigned i) { return getAffineDimExpr(i, ctx); };
  // Iteration (n, ho, wo, k, c); gOut is read at (n, c, ho, wo).
  AffineMap gOutMap = AffineMap::get(5, 0, {d(0), d(4), d(1), d(2)}, ctx);
  AffineMap outMap = AffineMap::get(5, 0, {d(0), d(1), d(2), d(3)}, ctx);
  SmallVector<utils::IteratorType> iters(4, utils::IteratorType::parallel);
  iters.push_back(utils::IteratorType::reduction);
  auto sum = linalg::GenericOp::create(
      rw, loc, gt, gOut, zeros, SmallVector<AffineMap>{gOutMap, outMap}, iters,
      [&](OpBuilder &b, Location l, ValueRange args) {
        Value ni = linalg::IndexOp::create(b, l, 0);
        Value ki = linalg::IndexOp::create(b, l, 3);
        Value ci = linalg::IndexOp::create(b, l, 4);
        Point p = samplePoint(b, l, grid, ni, linalg::IndexOp::create(b, l, 1),
                              linalg::IndexOp::create(b, l, 2), ay, ax, s);
        SmallVector<Value, 4> v;
        for (const Corner &k : p.corners)
          v.push_back(cornerValue(b, l, input, ni, ci, k));
        auto sub = [&](Value a, Value c) -> Value {
          return arith::SubFOp::create(b, l, a, c);
        };
        auto mul = [&](Value a, Value c) -> Value {
          return arith::MulFOp::create(b, l, a, c);
        };
        auto add = [&](Value a, Value c) -> Value {
          return arith::AddFOp::create(b, l, a, c);
        };
        // nw, ne, sw, se = v[0..3].
        Value dx = add(mul(sub(v[1], v[0]), p.s), mul(sub(v[3], v[2]), p.n));
        Value dy = add(mul(sub(v[2], v[0]), p.e), mul(sub(v[3], v[1]), p.w));
        Value isX =
            arith::CmpIOp::create(b, l, arith::CmpIPredicate::eq, ki,
                                  arith::ConstantIndexOp::create(b, l, 0));
        Value term = mul(arith::SelectOp::create(b, l, isX, dx, dy), args[0]);
        linalg::YieldOp::create(b, l, add(args[1], term));
      });
  AffineMap id = rw.getMultiDimIdentityMap(4);
  auto scaled = linalg::GenericOp::create(
      rw, loc, gt, sum.getResult(0), emptyLike(rw, loc, gt, grid),
      SmallVector<AffineMap>{id, id},
      SmallVector<utils::IteratorType>(4, utils::IteratorType::parallel),
      [&](OpBuilder &b, Location l, ValueRange args) {
        Value ki = linalg::IndexOp::create(b, l, 3);
        Value g = tensor::ExtractOp::create(
            b, l, grid,
            ValueRange{linalg::IndexOp::create(b, l, 0),
                       linalg::IndexOp::create(b, l, 1),
                       linalg::IndexOp::create(b, l, 2), ki});
        Value isX =
            arith::CmpIOp::create(b, l, arith::CmpIPredicate::eq, ki,
                                  arith::ConstantIndexOp::create(b, l, 0));
        Value mult = arith::SelectOp::create(
            b, l, isX, ax.derivative(b, l, g, s), ay.derivative(b, l, g, s));
        Value v = arith::MulFOp::create(b, l, args[0], mult);
        linalg::YieldOp::create(b, l, v);
      });
  return scaled.getResult(0);
}

LogicalResult lowerGridSamplerBackward(DLOp op, ValueRange o,
                                       PatternRewriter &rw) {
  std::optional<Sampler> s = samplerArgs(op);
  std::optional<SmallVector<bool>> mask = boolListArg(op, "output_mask", 2);
  if (!s || !mask || o.size() != 3)
    return failure();
  unsigned nres = op.getNumResults();
  bool wantInput = (*mask)[0];
  if (nres != (wantInput ? 2u : 1u))
    return failure();
  Value gOut = o[0], input = o[1], grid = o[2];
  Type et = tensorType(input).getElementType();
  if (!samplerOperands(input, grid, et) ||
      tensorType(gOut).getElementType() != et ||
      tensorType(gOut).getRank() != 4)
    return failure();
  Location loc = op.getLoc();
  auto [outType, sizes] = sampleShape(rw, loc, input, grid);
  for (int64_t d = 0; d < 4; ++d)
    guardEqual(rw, loc, getSizes(rw, loc, gOut)[d], sizes[d],
               "grid_sampler_2d_backward: grad_output does not match the "
               "sample's shape");
  Axis ay(rw, loc, dim(rw, loc, input, 2), *s, et);
  Axis ax(rw, loc, dim(rw, loc, input, 3), *s, et);
  SmallVector<Value> results;
  if (wantInput)
    results.push_back(castWithGuards(
        rw, loc, scatterGradInput(rw, loc, gOut, input, grid, ay, ax, *s),
        resultType(op, 0)));
  results.push_back(castWithGuards(
      rw, loc, reduceGradGrid(rw, loc, gOut, input, grid, ay, ax, *s),
      resultType(op, nres - 1)));
  rw.replaceOp(op, results);
  return success();
}

} // namespace

void terra::populateGridSampleLowerings(LoweringRegistry &r) {
  r.add("aten.grid_sampler_2d", rollBackOnFailure<lowerGridSampler>);
  r.add("aten.grid_sampler_2d_backward",
        rollBackOnFailure<lowerGridSamplerBackward>);
}
