//===- Random.cpp - Dropout and random fills from a counter-based RNG -----===//
//
// Random ops draw from Philox4x32-10 (Salmon et al., "Parallel random
// numbers: as easy as 1, 2, 3", SC'11), a counter-based generator: every
// element's bits are a pure function of (seed, offset, element index), so a
// compiled graph is bit-reproducible and needs no generator state of its own.
//
// Convention (the front end draws seed and offset from torch's generator
// state; each (seed, offset) pair is its own stream of 2^64 elements, so the
// offset only needs to differ between random ops sharing a seed, e.g. by
// advancing it by one, or by the element count as torch's CUDA generator
// does):
//   * seed and offset are i64, given either as the args `seed` and `offset`
//     or, so that a graph can take fresh ones every run, as two 0-d i64
//     operands after the op's schema tensors (e.g. native_dropout(input,
//     seed, offset)). An op with neither stays for the host (torch's RNG).
//   * The element with row-major linear index i uses one Philox block:
//       key     = (lo32(seed), hi32(seed))
//       counter = (lo32(offset), hi32(offset), lo32(i), hi32(i))
//     and takes output word 0, x. Its uniform is u = (x >> 8) * 2^-24, in
//     [0, 1) and exact in f32.
//   * native_dropout keeps an element iff u < 1 - p (compared in f64); the
//     output is (input * mask) * scale with scale = 1 / (1 - p) (0 when
//     p == 1), as ATen's CPU kernel. bernoulli(p) is u < p; uniform(from,
//     to) is from + u * (to - from) computed in f64.
// test/python/test_ops_constructors_optim.py holds a pure-Python Philox with
// the Random123 known-answer vectors and checks the compiled bits against it.
//
//===----------------------------------------------------------------------===//
#include "Utils.h"

using namespace mlir;
using namespace terra;
using namespace terra::lowering;

namespace {

Value i32c(OpBuilder &b, Location l, uint32_t v) {
  return arith::ConstantOp::create(b, l, b.getI32IntegerAttr(int32_t(v)));
}

/// Word 0 of Philox4x32-10 for counter `c` and key `k` (all i32).
Value philoxWord0(OpBuilder &b, Location l, std::array<Value, 4> c,
                  std::array<Value, 2> k) {
  Value m0 = i32c(b, l, 0xD2511F53u), m1 = i32c(b, l, 0xCD9E8D57u);
  Value w0 = i32c(b, l, 0x9E3779B9u), w1 = i32c(b, l, 0xBB67AE85u);
  for (int round = 0; round < 10; ++round) {
    if (round > 0) {
      k[0] = arith::AddIOp::create(b, l, k[0], w0);
      k[1] = arith::AddIOp::create(b, l, k[1], w1);
    }
    auto p0 = arith::MulUIExtendedOp::create(b, l, m0, c[0]);
    auto p1 = arith::MulUIExtendedOp::create(b, l, m1, c[2]);
    Value n0 = arith::XOrIOp::create(
        b, l, arith::XOrIOp::create(b, l, p1.getHigh(), c[1]), k[0]);
    Value n2 = arith::XOrIOp::create(
        b, l, arith::XOrIOp::create(b, l, p0.getHigh(), c[3]), k[1]);
    c = {n0, p1.getLow(), n2, p0.getLow()};
  }
  return c[0];
}

std::pair<Value, Value> split64(OpBuilder &b, Location l, Value v) {
  Type i32 = b.getI32Type();
  Value lo = arith::TruncIOp::create(b, l, i32, v);
  Value sh = arith::ShRUIOp::create(
      b, l, v, arith::ConstantOp::create(b, l, b.getI64IntegerAttr(32)));
  return {lo, arith::TruncIOp::create(b, l, i32, sh)};
}

/// The uniform in [0, 1) (f64) of the element at `linear` (i64), for the
/// key and the counter's high words `offset` (see the file comment).
Value philoxUniform(OpBuilder &b, Location l, std::array<Value, 2> key,
                    std::array<Value, 2> offset, Value linear) {
  auto [i0, i1] = split64(b, l, linear);
  Value x = philoxWord0(b, l, {offset[0], offset[1], i0, i1}, key);
  Value u24 = arith::ShRUIOp::create(b, l, x, i32c(b, l, 8));
  Value f = arith::UIToFPOp::create(b, l, b.getF64Type(), u24);
  return arith::MulFOp::create(b, l, f,
                               scalarConstant(b, l, b.getF64Type(),
                                              1.0 / double(1 << 24)));
}

/// seed and offset as i64 values: the two operands after the first
/// `numTensors` ones, or the args. Null when neither is there.
std::pair<Value, Value> seedAndOffset(OpBuilder &b, DLOp op, ValueRange o,
                                      unsigned numTensors) {
  Type i64 = b.getI64Type();
  if (o.size() == numTensors + 2)
    return {scalarArgOrOperand(b, op, o, numTensors, "seed", i64),
            scalarArgOrOperand(b, op, o, numTensors + 1, "offset", i64)};
  if (o.size() != numTensors)
    return {};
  return {scalarArgOrOperand(b, op, ValueRange{}, 0, "seed", i64),
          scalarArgOrOperand(b, op, ValueRange{}, 0, "offset", i64)};
}

/// Element body of a random op: the element's uniform (f64) and its input
/// elements; returns one value per result.
using RandomBody = std::function<SmallVector<Value>(OpBuilder &, Location,
                                                    Value, ValueRange)>;

/// One linalg.generic over `results` (all of the shape of `shapeRef`'s
/// type, dynamic sizes from `dyn`) reading `inputs` elementwise.
SmallVector<Value> buildRandom(OpBuilder &b, Location loc,
                               TypeRange results, ValueRange dyn,
                               ValueRange inputs, Value seed, Value offset,
                               const RandomBody &body) {
  auto t0 = cast<RankedTensorType>(results[0]);
  int64_t rank = t0.getRank();
  SmallVector<Value> inits;
  for (Type t : results)
    inits.push_back(tensor::EmptyOp::create(b, loc, t, dyn));
  // Row-major strides of the iteration space.
  SmallVector<Value> strides(rank);
  Value s = arith::ConstantIndexOp::create(b, loc, 1);
  for (int64_t d = rank - 1; d >= 0; --d) {
    strides[d] = s;
    if (d > 0)
      s = arith::MulIOp::create(b, loc, s,
                                tensor::DimOp::create(b, loc, inits[0], d));
  }
  SmallVector<AffineMap> maps(inputs.size() + results.size(),
                              b.getMultiDimIdentityMap(rank));
  SmallVector<utils::IteratorType> iters(rank, utils::IteratorType::parallel);
  auto [s0, s1] = split64(b, loc, seed);
  auto [o0, o1] = split64(b, loc, offset);
  auto g = linalg::GenericOp::create(
      b, loc, results, inputs, inits, maps, iters,
      [&](OpBuilder &nb, Location l, ValueRange a) {
        Value lin = arith::ConstantIndexOp::create(nb, l, 0);
        for (int64_t d = 0; d < rank; ++d)
          lin = arith::AddIOp::create(
              nb, l, lin,
              arith::MulIOp::create(nb, l, linalg::IndexOp::create(nb, l, d),
                                    strides[d]));
        lin = arith::IndexCastOp::create(nb, l, nb.getI64Type(), lin);
        Value u = philoxUniform(nb, l, {s0, s1}, {o0, o1}, lin);
        linalg::YieldOp::create(nb, l,
                                body(nb, l, u, a.take_front(inputs.size())));
      });
  return SmallVector<Value>(g.getResults());
}

SmallVector<Value> dynSizesOf(OpBuilder &b, Location loc,
                              RankedTensorType t, Value like) {
  SmallVector<Value> dyn;
  for (int64_t d = 0; d < t.getRank(); ++d)
    if (t.isDynamicDim(d))
      dyn.push_back(tensor::DimOp::create(b, loc, like, d));
  return dyn;
}

/// native_dropout(input, p, train) -> (output, mask).
LogicalResult lowerNativeDropout(DLOp op, ValueRange o, PatternRewriter &rw) {
  std::optional<double> p = getFloatArg(op, "p");
  if (o.empty() || op.getNumResults() != 2 || !p || *p < 0.0 || *p > 1.0)
    return failure();
  Location loc = op.getLoc();
  Value input = o[0];
  RankedTensorType outT = resultType(op, 0), maskT = resultType(op, 1);
  Type et = outT.getElementType();
  if (!isFloat(et) || cast<RankedTensorType>(input.getType()) != outT ||
      !maskT.getElementType().isInteger(1) ||
      maskT.getShape() != outT.getShape())
    return failure();
  // train = None means training (ATen).
  if (!getBoolArg(op, "train").value_or(true)) {
    if (o.size() != 1 && o.size() != 3)
      return failure();
    Value mask = tensor::EmptyOp::create(rw, loc, maskT,
                                         dynSizesOf(rw, loc, maskT, input));
    mask = linalg::FillOp::create(
               rw, loc, scalarConstant(rw, loc, rw.getI1Type(), 1), mask)
               .getResult(0);
    rw.replaceOp(op, {input, mask});
    return success();
  }
  auto [seed, offset] = seedAndOffset(rw, op, o, 1);
  if (!seed || !offset)
    return failure();
  double p1m = 1.0 - *p;
  double scale = p1m == 0.0 ? 0.0 : 1.0 / p1m;
  Value keepBelow = scalarConstant(rw, loc, rw.getF64Type(), p1m);
  Value scaleV = scalarConstant(rw, loc, et, scale);
  SmallVector<Value> r = buildRandom(
      rw, loc, TypeRange{outT, maskT}, dynSizesOf(rw, loc, outT, input),
      input, seed, offset,
      [&](OpBuilder &b, Location l, Value u, ValueRange a) {
        Value keep = arith::CmpFOp::create(b, l, arith::CmpFPredicate::OLT, u,
                                           keepBelow);
        Value m = arith::UIToFPOp::create(b, l, et, keep);
        Value out = arith::MulFOp::create(
            b, l, arith::MulFOp::create(b, l, a[0], m), scaleV);
        return SmallVector<Value>{out, keep};
      });
  rw.replaceOp(op, r);
  return success();
}

/// native_dropout_backward(grad_output, mask, scale) = grad * mask * scale.
LogicalResult lowerNativeDropoutBackward(DLOp op, ValueRange o,
                                         PatternRewriter &rw) {
  std::optional<double> scale = getFloatArg(op, "scale");
  if (o.size() != 2 || !scale || !isFloat(resultType(op).getElementType()))
    return failure();
  Type et = resultType(op).getElementType();
  Value s = scalarConstant(rw, op.getLoc(), et, *scale);
  return lowerElementwise(op, o, rw,
                          [&](OpBuilder &b, Location l, ValueRange a) -> Value {
                            return arith::MulFOp::create(
                                b, l, arith::MulFOp::create(b, l, a[0], a[1]),
                                s);
                          });
}

/// A random fill of the result (shaped like operand 0 when `numTensors` is
/// 1, else static or from the `size` arg): `value(u)` per element.
LogicalResult lowerRandomFill(DLOp op, ValueRange o, PatternRewriter &rw,
                              unsigned numTensors,
                              function_ref<Value(OpBuilder &, Location, Value,
                                                 Type)>
                                  value) {
  if (op.getNumResults() != 1)
    return failure();
  Location loc = op.getLoc();
  RankedTensorType rt = resultType(op);
  SmallVector<Value> dyn;
  if (numTensors == 1) {
    if (o.empty() ||
        cast<RankedTensorType>(o[0].getType()).getRank() != rt.getRank())
      return failure();
    dyn = dynSizesOf(rw, loc, rt, o[0]);
  } else if (!rt.hasStaticShape()) {
    std::optional<SmallVector<int64_t>> size = getIntListArg(op, "size");
    if (!size || int64_t(size->size()) != rt.getRank())
      return failure();
    for (int64_t d = 0; d < rt.getRank(); ++d)
      if (rt.isDynamicDim(d)) {
        if ((*size)[d] < 0)
          return failure();
        dyn.push_back(arith::ConstantIndexOp::create(rw, loc, (*size)[d]));
      }
  }
  auto [seed, offset] = seedAndOffset(rw, op, o, numTensors);
  if (!seed || !offset)
    return failure();
  Type et = rt.getElementType();
  SmallVector<Value> r = buildRandom(
      rw, loc, TypeRange{rt}, dyn, ValueRange{}, seed, offset,
      [&](OpBuilder &b, Location l, Value u, ValueRange) {
        return SmallVector<Value>{value(b, l, u, et)};
      });
  rw.replaceOp(op, r);
  return success();
}

/// bernoulli_.float(self, p) / bernoulli.p(self, p): 1 where u < p.
LogicalResult lowerBernoulli(DLOp op, ValueRange o, PatternRewriter &rw) {
  double p = getFloatArg(op, "p").value_or(0.5);
  if (p < 0.0 || p > 1.0)
    return failure();
  return lowerRandomFill(op, o, rw, 1,
                         [&](OpBuilder &b, Location l, Value u, Type et) {
                           Value c = arith::CmpFOp::create(
                               b, l, arith::CmpFPredicate::OLT, u,
                               scalarConstant(b, l, b.getF64Type(), p));
                           return castScalar(b, l, c, et);
                         });
}

/// uniform(from, to) on a float result: from + u * (to - from), in f64.
LogicalResult uniformFill(DLOp op, ValueRange o, PatternRewriter &rw,
                          unsigned numTensors, double from, double to) {
  if (!isFloat(resultType(op).getElementType()))
    return failure();
  return lowerRandomFill(
      op, o, rw, numTensors, [&](OpBuilder &b, Location l, Value u, Type et) {
        Type f64 = b.getF64Type();
        Value v = arith::AddFOp::create(
            b, l, scalarConstant(b, l, f64, from),
            arith::MulFOp::create(b, l, u, scalarConstant(b, l, f64, to - from)));
        return castScalar(b, l, v, et);
      });
}

LogicalResult lowerUniform(DLOp op, ValueRange o, PatternRewriter &rw) {
  return uniformFill(op, o, rw, 1, getFloatArg(op, "from").value_or(0.0),
                     getFloatArg(op, "to").value_or(1.0));
}
LogicalResult lowerRandLike(DLOp op, ValueRange o, PatternRewriter &rw) {
  return uniformFill(op, o, rw, 1, 0.0, 1.0);
}
LogicalResult lowerRand(DLOp op, ValueRange o, PatternRewriter &rw) {
  return uniformFill(op, o, rw, 0, 0.0, 1.0);
}

} // namespace

void terra::populateRandomLowerings(LoweringRegistry &r) {
  r.add("aten.native_dropout", rollBackOnFailure<lowerNativeDropout>);
  r.add("aten.native_dropout_backward",
        rollBackOnFailure<lowerNativeDropoutBackward>);
  for (StringRef n : {"aten.bernoulli_.float", "aten.bernoulli.p"})
    r.add(n, rollBackOnFailure<lowerBernoulli>);
  for (StringRef n : {"aten.uniform_", "aten.uniform"})
    r.add(n, rollBackOnFailure<lowerUniform>);
  r.add("aten.rand_like", rollBackOnFailure<lowerRandLike>);
  r.add("aten.rand", rollBackOnFailure<lowerRand>);
}
