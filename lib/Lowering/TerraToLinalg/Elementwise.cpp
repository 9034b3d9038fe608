//===- Elementwise.cpp - Pointwise ops and activations --------------------===//
//
// aten pointwise arithmetic (tensor and scalar variants, in-place forms),
// unary math, activations with their backward ops, comparisons and where.
// Each lowers to one broadcasting linalg.generic; chains of them are fused
// later by linalg elementwise fusion.
//
//===----------------------------------------------------------------------===//
#include "Utils.h"

using namespace mlir;
using namespace terra;
using namespace terra::lowering;

namespace {

Type elemOf(DLOp op) { return resultType(op).getElementType(); }

/// `self OP other * alpha` for add/sub, tensor or scalar `other`.
template <bool IsSub>
LogicalResult lowerAddSub(DLOp op, ValueRange operands,
                          PatternRewriter &rw) {
  Type et = elemOf(op);
  Location loc = op.getLoc();
  Value other = operands.size() > 1 && cast<RankedTensorType>(
                                           operands[1].getType())
                                               .getRank() > 0
                    ? operands[1]
                    : scalarArgOrOperand(rw, op, operands, 1, "other", et);
  if (!other || operands.empty())
    return failure();
  Value alpha = scalarArgOrOperand(rw, op, ValueRange{}, 0, "alpha", et);
  if (!alpha)
    alpha = scalarConstant(rw, loc, et, 1.0);
  Value r = buildElementwise(
      rw, loc, resultType(op), {operands[0], other},
      [&](OpBuilder &b, Location l, ValueRange a) -> Value {
        Value scaled = isFloat(et) ? Value(arith::MulFOp::create(b, l, a[1], alpha))
                                   : Value(arith::MulIOp::create(b, l, a[1], alpha));
        if (isFloat(et))
          return IsSub ? Value(arith::SubFOp::create(b, l, a[0], scaled))
                       : Value(arith::AddFOp::create(b, l, a[0], scaled));
        return IsSub ? Value(arith::SubIOp::create(b, l, a[0], scaled))
                     : Value(arith::AddIOp::create(b, l, a[0], scaled));
      });
  rw.replaceOp(op, r);
  return success();
}

enum class BinKind { Mul, Div, Pow, Max, Min };

template <BinKind K>
LogicalResult lowerBinary(DLOp op, ValueRange operands,
                          PatternRewriter &rw) {
  Type et = elemOf(op);
  if (operands.empty())
    return failure();
  bool tensorOther = operands.size() > 1 &&
                     cast<RankedTensorType>(operands[1].getType()).getRank() > 0;
  StringRef argName = K == BinKind::Pow ? "exponent" : "other";
  Value other = tensorOther ? operands[1]
                            : scalarArgOrOperand(rw, op, operands, 1, argName, et);
  if (!other)
    return failure();
  // Division and pow compute in floating point even for integer inputs
  // (PyTorch's true division); the result type says what comes out.
  if ((K == BinKind::Div || K == BinKind::Pow) && !isFloat(et))
    return failure();
  Value r = buildElementwise(
      rw, op.getLoc(), resultType(op), {operands[0], other},
      [&](OpBuilder &b, Location l, ValueRange a) -> Value {
        bool f = isFloat(et);
        switch (K) {
        case BinKind::Mul:
          return f ? Value(arith::MulFOp::create(b, l, a[0], a[1]))
                   : Value(arith::MulIOp::create(b, l, a[0], a[1]));
        case BinKind::Div:
          return arith::DivFOp::create(b, l, a[0], a[1]);
        case BinKind::Pow:
          return math::PowFOp::create(b, l, a[0], a[1]);
        case BinKind::Max:
          return f ? Value(arith::MaximumFOp::create(b, l, a[0], a[1]))
                   : Value(arith::MaxSIOp::create(b, l, a[0], a[1]));
        case BinKind::Min:
          return f ? Value(arith::MinimumFOp::create(b, l, a[0], a[1]))
                   : Value(arith::MinSIOp::create(b, l, a[0], a[1]));
        }
        llvm_unreachable("binary kind");
      });
  rw.replaceOp(op, r);
  return success();
}

/// Float-only unary ops.
template <typename Fn>
LogicalResult unaryFloat(DLOp op, ValueRange operands,
                         PatternRewriter &rw, Fn fn) {
  if (operands.size() != 1 || !isFloat(elemOf(op)))
    return failure();
  return lowerElementwise(op, operands, rw,
                          [&](OpBuilder &b, Location l, ValueRange a) {
                            return fn(b, l, a[0]);
                          });
}

Value sigmoid(OpBuilder &b, Location l, Value x) {
  Value one = cst(b, l, x, 1.0);
  Value e = math::ExpOp::create(b, l, arith::NegFOp::create(b, l, x));
  return arith::DivFOp::create(b, l, one, arith::AddFOp::create(b, l, one, e));
}

/// gelu(x) with approximate = "none" (erf) or "tanh".
Value gelu(OpBuilder &b, Location l, Value x, bool tanhApprox) {
  Value half = cst(b, l, x, 0.5), one = cst(b, l, x, 1.0);
  Value inner;
  if (tanhApprox) {
    Value c = cst(b, l, x, 0.7978845608028654); // sqrt(2/pi)
    Value k = cst(b, l, x, 0.044715);
    Value x3 = arith::MulFOp::create(b, l, x, arith::MulFOp::create(b, l, x, x));
    Value arg = arith::MulFOp::create(
        b, l, c, arith::AddFOp::create(b, l, x, arith::MulFOp::create(b, l, k, x3)));
    inner = math::TanhOp::create(b, l, arg);
  } else {
    Value rs2 = cst(b, l, x, 0.7071067811865476);
    inner = math::ErfOp::create(b, l, arith::MulFOp::create(b, l, x, rs2));
  }
  return arith::MulFOp::create(
      b, l, arith::MulFOp::create(b, l, half, x),
      arith::AddFOp::create(b, l, one, inner));
}

/// d gelu / dx for approximate = "none".
Value geluGrad(OpBuilder &b, Location l, Value x) {
  Value half = cst(b, l, x, 0.5), one = cst(b, l, x, 1.0);
  Value rs2 = cst(b, l, x, 0.7071067811865476);
  Value kBeta = cst(b, l, x, 0.3989422804014327); // 1/sqrt(2pi)
  Value cdf = arith::MulFOp::create(
      b, l, half,
      arith::AddFOp::create(
          b, l, one, math::ErfOp::create(b, l, arith::MulFOp::create(b, l, x, rs2))));
  Value x2 = arith::MulFOp::create(b, l, x, x);
  Value pdf = arith::MulFOp::create(
      b, l, kBeta,
      math::ExpOp::create(b, l, arith::MulFOp::create(b, l, x2, cst(b, l, x, -0.5))));
  return arith::AddFOp::create(b, l, cdf, arith::MulFOp::create(b, l, x, pdf));
}

enum class Cmp { EQ, NE, LT, LE, GT, GE };

template <Cmp C>
LogicalResult lowerCompare(DLOp op, ValueRange operands,
                           PatternRewriter &rw) {
  if (operands.empty())
    return failure();
  Type in = cast<RankedTensorType>(operands[0].getType()).getElementType();
  bool tensorOther = operands.size() > 1 &&
                     cast<RankedTensorType>(operands[1].getType()).getRank() > 0;
  if (!tensorOther && in.isInteger(1)) {
    // bool tensor vs a number compares in the number's type (True == 2 is
    // false), as PyTorch's type promotion does.
    Attribute a = op.getArgsAttr() ? op.getArgsAttr().get("other") : nullptr;
    in = isa_and_nonnull<FloatAttr>(a) ? Type(rw.getF64Type())
                                       : Type(rw.getI64Type());
  }
  Value other = tensorOther ? operands[1]
                            : scalarArgOrOperand(rw, op, operands, 1, "other", in);
  if (!other)
    return failure();
  Value r = buildElementwise(
      rw, op.getLoc(), resultType(op), {operands[0], other},
      [&](OpBuilder &b, Location l, ValueRange a) -> Value {
        if (isFloat(in)) {
          arith::CmpFPredicate p[] = {
              arith::CmpFPredicate::OEQ, arith::CmpFPredicate::UNE,
              arith::CmpFPredicate::OLT, arith::CmpFPredicate::OLE,
              arith::CmpFPredicate::OGT, arith::CmpFPredicate::OGE};
          return arith::CmpFOp::create(b, l, p[int(C)], a[0], a[1]);
        }
        arith::CmpIPredicate p[] = {
            arith::CmpIPredicate::eq,  arith::CmpIPredicate::ne,
            arith::CmpIPredicate::slt, arith::CmpIPredicate::sle,
            arith::CmpIPredicate::sgt, arith::CmpIPredicate::sge};
        return arith::CmpIOp::create(b, l, p[int(C)], a[0], a[1]);
      },
      in);
  rw.replaceOp(op, r);
  return success();
}

/// clamp / clamp_min / clamp_max: `min(max(x, lo), hi)` with either bound
/// optional; scalar bounds come from args (None: absent), tensor bounds
/// (the .Tensor overloads) from operands. NaN inputs stay NaN (maximumf /
/// minimumf propagate them), as ATen's kernel returns them unchanged; a
/// low bound above the high one gives the high one, as in ATen.
LogicalResult lowerClamp(DLOp op, ValueRange operands, PatternRewriter &rw,
                         bool hasMin, bool hasMax) {
  Type et = elemOf(op);
  if (operands.empty() ||
      cast<RankedTensorType>(operands[0].getType()).getElementType() != et ||
      et.isInteger(1))
    return failure(); // promoted results and bool tensors stay on the host
  Location loc = op.getLoc();
  SmallVector<Value> inputs{operands[0]};
  Value lo, hi;
  int loIdx = -1, hiIdx = -1;
  unsigned next = 1;
  auto bound = [&](bool wanted, StringRef name, Value &scalar, int &idx) {
    Attribute arg = op.getArgsAttr() ? op.getArgsAttr().get(name) : nullptr;
    if (!wanted || isa_and_nonnull<UnitAttr>(arg))
      return;                             // not this overload's bound, or None
    if (!arg && next < operands.size()) { // a tensor bound
      idx = inputs.size();
      inputs.push_back(operands[next++]);
      return;
    }
    scalar = scalarArgOrOperand(rw, op, ValueRange{}, 0, name, et);
  };
  bound(hasMin, "min", lo, loIdx);
  bound(hasMax, "max", hi, hiIdx);
  if (next != operands.size() || (!lo && loIdx < 0 && !hi && hiIdx < 0))
    return failure();
  Value r = buildElementwise(
      rw, loc, resultType(op), inputs,
      [&](OpBuilder &b, Location l, ValueRange a) -> Value {
        Value x = a[0];
        Value low = loIdx >= 0 ? a[loIdx] : lo;
        Value high = hiIdx >= 0 ? a[hiIdx] : hi;
        bool f = isFloat(et);
        if (low)
          x = f ? Value(arith::MaximumFOp::create(b, l, x, low))
                : Value(arith::MaxSIOp::create(b, l, x, low));
        if (high)
          x = f ? Value(arith::MinimumFOp::create(b, l, x, high))
                : Value(arith::MinSIOp::create(b, l, x, high));
        return x;
      });
  rw.replaceOp(op, r);
  return success();
}

/// rsub(self, other, alpha) = other - alpha * self (scalar or tensor other).
LogicalResult lowerRsub(DLOp op, ValueRange operands, PatternRewriter &rw) {
  Type et = elemOf(op);
  if (operands.empty() || et.isInteger(1))
    return failure();
  bool tensorOther =
      operands.size() > 1 &&
      cast<RankedTensorType>(operands[1].getType()).getRank() > 0;
  Value other = tensorOther
                    ? operands[1]
                    : scalarArgOrOperand(rw, op, operands, 1, "other", et);
  if (!other)
    return failure();
  Value alpha = scalarArgOrOperand(rw, op, ValueRange{}, 0, "alpha", et);
  Value r = buildElementwise(
      rw, op.getLoc(), resultType(op), {operands[0], other},
      [&](OpBuilder &b, Location l, ValueRange a) -> Value {
        bool f = isFloat(et);
        Value scaled = a[0];
        if (alpha)
          scaled = f ? Value(arith::MulFOp::create(b, l, a[0], alpha))
                     : Value(arith::MulIOp::create(b, l, a[0], alpha));
        return f ? Value(arith::SubFOp::create(b, l, a[1], scaled))
                 : Value(arith::SubIOp::create(b, l, a[1], scaled));
      });
  rw.replaceOp(op, r);
  return success();
}

} // namespace

namespace {
/// Registers `name` (and its in-place form `name_`) as the math op MathOp.
template <typename MathOp>
void addUnaryMath(LoweringRegistry &r, StringRef name) {
  auto lower = [](DLOp op, ValueRange o, PatternRewriter &rw) {
    return unaryFloat(op, o, rw, [](OpBuilder &b, Location l, Value x) -> Value {
      return MathOp::create(b, l, x);
    });
  };
  r.add(name, lower);
  r.add((name + "_").str(), lower);
}

/// triu/tril(x, diagonal): x where col - row >= diagonal (triu) or
/// <= diagonal (tril) over the last two dims, else 0.
template <bool Upper>
LogicalResult lowerTriangle(DLOp op, ValueRange o, PatternRewriter &rw) {
  if (o.size() != 1 || cast<RankedTensorType>(o[0].getType()).getRank() < 2)
    return failure();
  int64_t rank = cast<RankedTensorType>(o[0].getType()).getRank();
  int64_t diagonal = getIntArg(op, "diagonal").value_or(0);
  return lowerElementwise(
      op, o, rw, [&](OpBuilder &b, Location l, ValueRange a) -> Value {
        Value i = linalg::IndexOp::create(b, l, rank - 2);
        Value j = linalg::IndexOp::create(b, l, rank - 1);
        Value off = arith::SubIOp::create(b, l, j, i);
        Value keep = arith::CmpIOp::create(
            b, l, Upper ? arith::CmpIPredicate::sge : arith::CmpIPredicate::sle,
            off, arith::ConstantIndexOp::create(b, l, diagonal));
        return arith::SelectOp::create(b, l, keep, a[0], cst(b, l, a[0], 0.0));
      });
}

} // namespace

void terra::populateElementwiseLowerings(LoweringRegistry &r) {
  for (StringRef n : {"aten.add.Tensor", "aten.add.Scalar", "aten.add_.Tensor",
                      "aten.add_.Scalar"})
    r.add(n, lowerAddSub<false>);
  for (StringRef n : {"aten.sub.Tensor", "aten.sub.Scalar", "aten.sub_.Tensor",
                      "aten.sub_.Scalar"})
    r.add(n, lowerAddSub<true>);
  for (StringRef n : {"aten.mul.Tensor", "aten.mul.Scalar", "aten.mul_.Tensor",
                      "aten.mul_.Scalar"})
    r.add(n, lowerBinary<BinKind::Mul>);
  for (StringRef n : {"aten.div.Tensor", "aten.div.Scalar", "aten.div_.Tensor",
                      "aten.div_.Scalar"})
    r.add(n, lowerBinary<BinKind::Div>);
  for (StringRef n : {"aten.pow.Tensor_Scalar", "aten.pow.Tensor_Tensor"})
    r.add(n, lowerBinary<BinKind::Pow>);
  // xlogy(x, y) = x * log(y), 0 where x == 0, NaN where y is (ATen's rule:
  // KL divergence's target term).
  r.add("aten.xlogy.Tensor", [](DLOp op, ValueRange o, PatternRewriter &rw) {
    if (o.size() != 2 || !isFloat(elemOf(op)))
      return failure();
    return lowerElementwise(
        op, o, rw, [](OpBuilder &b, Location l, ValueRange a) -> Value {
          Value x = a[0], y = a[1], zero = cst(b, l, x, 0.0);
          Value prod =
              arith::MulFOp::create(b, l, x, math::LogOp::create(b, l, y));
          Value xZero =
              arith::CmpFOp::create(b, l, arith::CmpFPredicate::OEQ, x, zero);
          Value yNan =
              arith::CmpFOp::create(b, l, arith::CmpFPredicate::UNO, y, y);
          return arith::SelectOp::create(
              b, l, yNan, y, arith::SelectOp::create(b, l, xZero, zero, prod));
        });
  });
  r.add("aten.maximum", lowerBinary<BinKind::Max>);
  r.add("aten.minimum", lowerBinary<BinKind::Min>);

  r.add("aten.neg", [](DLOp op, ValueRange o, PatternRewriter &rw) {
    return lowerElementwise(op, o, rw, [&](OpBuilder &b, Location l, ValueRange a) -> Value {
      if (isFloat(a[0].getType()))
        return arith::NegFOp::create(b, l, a[0]);
      return arith::SubIOp::create(b, l, cst(b, l, a[0], 0), a[0]);
    });
  });
  r.add("aten.abs", [](DLOp op, ValueRange o, PatternRewriter &rw) {
    return lowerElementwise(
        op, o, rw, [&](OpBuilder &b, Location l, ValueRange a) -> Value {
          Value x = a[0];
          if (isFloat(x.getType()))
            return math::AbsFOp::create(b, l, x);
          if (x.getType().isInteger(1))
            return x;
          return math::AbsIOp::create(b, l, x);
        });
  });
  // sign(x) = (0 < x) - (x < 0), as ATen computes it: 0 for zeros and NaN.
  for (StringRef n : {"aten.sgn", "aten.sign"})
    r.add(n, [](DLOp op, ValueRange o, PatternRewriter &rw) {
      return lowerElementwise(
          op, o, rw, [&](OpBuilder &b, Location l, ValueRange a) -> Value {
            Value x = a[0], zero = cst(b, l, x, 0.0);
            if (x.getType().isInteger(1))
              return x;
            Value pos, neg;
            if (isFloat(x.getType())) {
              pos = arith::CmpFOp::create(b, l, arith::CmpFPredicate::OGT, x,
                                          zero);
              neg = arith::CmpFOp::create(b, l, arith::CmpFPredicate::OLT, x,
                                          zero);
            } else {
              pos = arith::CmpIOp::create(b, l, arith::CmpIPredicate::sgt, x,
                                          zero);
              neg = arith::CmpIOp::create(b, l, arith::CmpIPredicate::slt, x,
                                          zero);
            }
            Value inner =
                arith::SelectOp::create(b, l, neg, cst(b, l, x, -1.0), zero);
            return arith::SelectOp::create(b, l, pos, cst(b, l, x, 1.0), inner);
          });
    });
  r.add("aten.exp", [](DLOp op, ValueRange o, PatternRewriter &rw) {
    return unaryFloat(op, o, rw, [](OpBuilder &b, Location l, Value x) -> Value {
      return math::ExpOp::create(b, l, x);
    });
  });
  r.add("aten.log", [](DLOp op, ValueRange o, PatternRewriter &rw) {
    return unaryFloat(op, o, rw, [](OpBuilder &b, Location l, Value x) -> Value {
      return math::LogOp::create(b, l, x);
    });
  });
  // One-to-one math functions.
  addUnaryMath<math::Log1pOp>(r, "aten.log1p");
  addUnaryMath<math::Log2Op>(r, "aten.log2");
  addUnaryMath<math::ExpM1Op>(r, "aten.expm1");
  addUnaryMath<math::ErfOp>(r, "aten.erf");
  addUnaryMath<math::SinOp>(r, "aten.sin");
  addUnaryMath<math::CosOp>(r, "aten.cos");
  for (StringRef n : {"aten.sqrt", "aten.sqrt_"})
    r.add(n, [](DLOp op, ValueRange o, PatternRewriter &rw) {
      return unaryFloat(op, o, rw, [](OpBuilder &b, Location l, Value x) -> Value {
        return math::SqrtOp::create(b, l, x);
      });
    });
  r.add("aten.rsqrt", [](DLOp op, ValueRange o, PatternRewriter &rw) {
    return unaryFloat(op, o, rw, [](OpBuilder &b, Location l, Value x) -> Value {
      // Not math.rsqrt: libm has no rsqrtf for it to become.
      return arith::DivFOp::create(b, l, cst(b, l, x, 1.0),
                                   math::SqrtOp::create(b, l, x));
    });
  });
  // The in-place forms are recorded functionally (their result is the
  // written value), as for relu_ (RNN cells apply them to gate chunks).
  for (StringRef n : {"aten.tanh", "aten.tanh_"})
    r.add(n, [](DLOp op, ValueRange o, PatternRewriter &rw) {
      return unaryFloat(op, o, rw,
                        [](OpBuilder &b, Location l, Value x) -> Value {
                          return math::TanhOp::create(b, l, x);
                        });
    });
  for (StringRef n : {"aten.sigmoid", "aten.sigmoid_"})
    r.add(n, [](DLOp op, ValueRange o, PatternRewriter &rw) {
      return unaryFloat(op, o, rw, sigmoid);
    });
  r.add("aten.silu", [](DLOp op, ValueRange o, PatternRewriter &rw) {
    return unaryFloat(op, o, rw, [](OpBuilder &b, Location l, Value x) -> Value {
      return arith::MulFOp::create(b, l, x, sigmoid(b, l, x));
    });
  });
  for (StringRef n : {"aten.relu", "aten.relu_"})
    r.add(n, [](DLOp op, ValueRange o, PatternRewriter &rw) {
      return unaryFloat(op, o, rw, [](OpBuilder &b, Location l, Value x) -> Value {
        return arith::MaximumFOp::create(b, l, x, cst(b, l, x, 0.0));
      });
    });
  r.add("aten.triu", lowerTriangle<true>);
  r.add("aten.tril", lowerTriangle<false>);
  r.add("aten.gelu", [](DLOp op, ValueRange o, PatternRewriter &rw) {
    bool tanhApprox = false;
    if (auto s = dyn_cast_or_null<StringAttr>(
            op.getArgsAttr() ? op.getArgsAttr().get("approximate") : nullptr))
      tanhApprox = s.getValue() == "tanh";
    return unaryFloat(op, o, rw, [&](OpBuilder &b, Location l, Value x) {
      return gelu(b, l, x, tanhApprox);
    });
  });
  for (StringRef n :
       {"aten.clamp", "aten.clamp_", "aten.clamp.Tensor", "aten.clamp_.Tensor"})
    r.add(n, [](DLOp op, ValueRange o, PatternRewriter &rw) {
      // Absent bounds are `unit` args (scalars) or missing operands.
      return lowerClamp(op, o, rw, true, true);
    });
  for (StringRef n : {"aten.clamp_min", "aten.clamp_min_",
                      "aten.clamp_min.Tensor", "aten.clamp_min_.Tensor"})
    r.add(n, [](DLOp op, ValueRange o, PatternRewriter &rw) {
      return lowerClamp(op, o, rw, true, false);
    });
  for (StringRef n : {"aten.clamp_max", "aten.clamp_max_",
                      "aten.clamp_max.Tensor", "aten.clamp_max_.Tensor"})
    r.add(n, [](DLOp op, ValueRange o, PatternRewriter &rw) {
      return lowerClamp(op, o, rw, false, true);
    });
  for (StringRef n : {"aten.rsub.Scalar", "aten.rsub.Tensor"})
    r.add(n, lowerRsub);
  for (StringRef n : {"aten.reciprocal", "aten.reciprocal_"})
    r.add(n, [](DLOp op, ValueRange o, PatternRewriter &rw) {
      return unaryFloat(
          op, o, rw, [](OpBuilder &b, Location l, Value x) -> Value {
            return arith::DivFOp::create(b, l, cst(b, l, x, 1.0), x);
          });
    });
  for (StringRef n : {"aten.leaky_relu", "aten.leaky_relu_"})
    r.add(n, [](DLOp op, ValueRange o, PatternRewriter &rw) {
      double slope = getFloatArg(op, "negative_slope").value_or(0.01);
      if (o.size() != 1 || !isFloat(elemOf(op)))
        return failure();
      return lowerElementwise(
          op, o, rw, [&](OpBuilder &b, Location l, ValueRange a) -> Value {
            Value x = a[0];
            Value pos = arith::CmpFOp::create(b, l, arith::CmpFPredicate::OGT,
                                              x, cst(b, l, x, 0.0));
            return arith::SelectOp::create(
                b, l, pos, x,
                arith::MulFOp::create(b, l, x, cst(b, l, x, slope)));
          });
    });

  // Backward ops: (grad_output, saved) -> grad_input.
  r.add("aten.threshold_backward", [](DLOp op, ValueRange o,
                                      PatternRewriter &rw) {
    double th = getFloatArg(op, "threshold").value_or(0.0);
    if (o.size() != 2 || !isFloat(elemOf(op)))
      return failure();
    return lowerElementwise(op, o, rw, [&](OpBuilder &b, Location l, ValueRange a) -> Value {
      Value keep = arith::CmpFOp::create(b, l, arith::CmpFPredicate::OGT, a[1],
                                         cst(b, l, a[1], th));
      return arith::SelectOp::create(b, l, keep, a[0], cst(b, l, a[0], 0.0));
    });
  });
  r.add("aten.sigmoid_backward", [](DLOp op, ValueRange o,
                                    PatternRewriter &rw) {
    // grad * y * (1 - y), y = sigmoid output.
    if (o.size() != 2 || !isFloat(elemOf(op)))
      return failure();
    return lowerElementwise(op, o, rw, [&](OpBuilder &b, Location l, ValueRange a) -> Value {
      Value oneMinus = arith::SubFOp::create(b, l, cst(b, l, a[1], 1.0), a[1]);
      return arith::MulFOp::create(b, l, a[0],
                                   arith::MulFOp::create(b, l, a[1], oneMinus));
    });
  });
  r.add("aten.tanh_backward", [](DLOp op, ValueRange o,
                                 PatternRewriter &rw) {
    // grad * (1 - y^2), y = tanh output.
    if (o.size() != 2 || !isFloat(elemOf(op)))
      return failure();
    return lowerElementwise(op, o, rw, [&](OpBuilder &b, Location l, ValueRange a) -> Value {
      Value y2 = arith::MulFOp::create(b, l, a[1], a[1]);
      return arith::MulFOp::create(
          b, l, a[0], arith::SubFOp::create(b, l, cst(b, l, a[1], 1.0), y2));
    });
  });
  r.add("aten.gelu_backward", [](DLOp op, ValueRange o,
                                 PatternRewriter &rw) {
    auto approx = dyn_cast_or_null<StringAttr>(
        op.getArgsAttr() ? op.getArgsAttr().get("approximate") : nullptr);
    if (o.size() != 2 || !isFloat(elemOf(op)) ||
        (approx && approx.getValue() != "none"))
      return failure();
    return lowerElementwise(op, o, rw, [&](OpBuilder &b, Location l, ValueRange a) -> Value {
      return arith::MulFOp::create(b, l, a[0], geluGrad(b, l, a[1]));
    });
  });
  r.add("aten.silu_backward", [](DLOp op, ValueRange o,
                                 PatternRewriter &rw) {
    // grad * s * (1 + x * (1 - s)), s = sigmoid(x).
    if (o.size() != 2 || !isFloat(elemOf(op)))
      return failure();
    return lowerElementwise(op, o, rw, [&](OpBuilder &b, Location l, ValueRange a) -> Value {
      Value x = a[1];
      Value s = sigmoid(b, l, x);
      Value one = cst(b, l, x, 1.0);
      Value t = arith::AddFOp::create(
          b, l, one,
          arith::MulFOp::create(b, l, x, arith::SubFOp::create(b, l, one, s)));
      return arith::MulFOp::create(b, l, a[0], arith::MulFOp::create(b, l, s, t));
    });
  });
  r.add("aten.leaky_relu_backward", [](DLOp op, ValueRange o,
                                       PatternRewriter &rw) {
    double slope = getFloatArg(op, "negative_slope").value_or(0.01);
    if (o.size() != 2 || !isFloat(elemOf(op)))
      return failure();
    return lowerElementwise(op, o, rw, [&](OpBuilder &b, Location l, ValueRange a) -> Value {
      Value pos = arith::CmpFOp::create(b, l, arith::CmpFPredicate::OGT, a[1],
                                        cst(b, l, a[1], 0.0));
      return arith::SelectOp::create(
          b, l, pos, a[0], arith::MulFOp::create(b, l, a[0], cst(b, l, a[0], slope)));
    });
  });

  for (StringRef n : {"aten.eq.Tensor", "aten.eq.Scalar"})
    r.add(n, lowerCompare<Cmp::EQ>);
  for (StringRef n : {"aten.ne.Tensor", "aten.ne.Scalar"})
    r.add(n, lowerCompare<Cmp::NE>);
  for (StringRef n : {"aten.lt.Tensor", "aten.lt.Scalar"})
    r.add(n, lowerCompare<Cmp::LT>);
  for (StringRef n : {"aten.le.Tensor", "aten.le.Scalar"})
    r.add(n, lowerCompare<Cmp::LE>);
  for (StringRef n : {"aten.gt.Tensor", "aten.gt.Scalar"})
    r.add(n, lowerCompare<Cmp::GT>);
  for (StringRef n : {"aten.ge.Tensor", "aten.ge.Scalar"})
    r.add(n, lowerCompare<Cmp::GE>);

  r.add("aten.where.self", [](DLOp op, ValueRange o,
                              PatternRewriter &rw) {
    if (o.size() != 3)
      return failure();
    return lowerElementwise(op, o, rw, [&](OpBuilder &b, Location l, ValueRange a) -> Value {
      Value c = castScalar(b, l, a[0], b.getI1Type());
      return arith::SelectOp::create(b, l, c, a[1], a[2]);
    });
  });
  // remainder(a, b): Python's modulo, the sign of the divisor (fmod or
  // remsi, then b added where the remainder is nonzero and its sign
  // differs from b's).
  for (StringRef n : {"aten.remainder.Scalar", "aten.remainder.Tensor"})
    r.add(n, [](DLOp op, ValueRange o, PatternRewriter &rw) {
      Type et = elemOf(op);
      if (o.empty() || !(isFloat(et) || isa<IntegerType>(et)) ||
          et.isInteger(1))
        return failure();
      bool tensorOther =
          o.size() > 1 && cast<RankedTensorType>(o[1].getType()).getRank() > 0;
      Value other =
          tensorOther ? o[1] : scalarArgOrOperand(rw, op, o, 1, "other", et);
      if (!other)
        return failure();
      bool f = isFloat(et);
      Value res = buildElementwise(
          rw, op.getLoc(), resultType(op), {o[0], other},
          [&](OpBuilder &b, Location l, ValueRange a) -> Value {
            Value x = a[0], y = a[1], zero = cst(b, l, x, 0.0);
            Value m = f ? Value(arith::RemFOp::create(b, l, x, y))
                        : Value(arith::RemSIOp::create(b, l, x, y));
            auto lt = [&](Value v) -> Value {
              return f ? Value(arith::CmpFOp::create(
                             b, l, arith::CmpFPredicate::OLT, v, zero))
                       : Value(arith::CmpIOp::create(
                             b, l, arith::CmpIPredicate::slt, v, zero));
            };
            Value nonzero = f ? Value(arith::CmpFOp::create(
                                    b, l, arith::CmpFPredicate::UNE, m, zero))
                              : Value(arith::CmpIOp::create(
                                    b, l, arith::CmpIPredicate::ne, m, zero));
            Value differ = arith::XOrIOp::create(b, l, lt(m), lt(y));
            Value fix = arith::AndIOp::create(b, l, nonzero, differ);
            Value adjusted = f ? Value(arith::AddFOp::create(b, l, m, y))
                               : Value(arith::AddIOp::create(b, l, m, y));
            return arith::SelectOp::create(b, l, fix, adjusted, m);
          });
      rw.replaceOp(op, res);
      return success();
    });
  // bitwise_not: ~x for integers, not for bools; logical_not: x == 0.
  r.add("aten.bitwise_not", [](DLOp op, ValueRange o, PatternRewriter &rw) {
    if (o.size() != 1 || !isa<IntegerType>(elemOf(op)))
      return failure();
    return lowerElementwise(
        op, o, rw, [](OpBuilder &b, Location l, ValueRange a) -> Value {
          Value ones = arith::ConstantOp::create(
              b, l, b.getIntegerAttr(a[0].getType(), -1));
          return arith::XOrIOp::create(b, l, a[0], ones);
        });
  });
  // masked_fill(self, mask, value): value where mask, else self (mask
  // broadcasts; value a number or a 0-d tensor).
  for (StringRef n : {"aten.masked_fill.Scalar", "aten.masked_fill_.Scalar",
                      "aten.masked_fill.Tensor", "aten.masked_fill_.Tensor"})
    r.add(n, [](DLOp op, ValueRange o, PatternRewriter &rw) {
      if (o.size() < 2)
        return failure();
      Value value = scalarArgOrOperand(rw, op, o, 2, "value", elemOf(op));
      if (!value)
        return failure();
      Value r = buildElementwise(
          rw, op.getLoc(), resultType(op), {o[0], o[1]},
          [&](OpBuilder &b, Location l, ValueRange a) -> Value {
            Value c = castScalar(b, l, a[1], b.getI1Type());
            return arith::SelectOp::create(b, l, c, value, a[0]);
          });
      rw.replaceOp(op, r);
      return success();
    });
  // copy(self, src) and copy_(self, src) produce src in self's shape.
  for (StringRef n : {"aten.copy", "aten.copy_"})
    r.add(n, [](DLOp op, ValueRange o, PatternRewriter &rw) {
      if (o.size() != 2)
        return failure();
      return lowerElementwise(op, o.drop_front(), rw,
                              [](OpBuilder &, Location, ValueRange a) { return a[0]; });
    });
  for (StringRef n : {"aten.clone", "aten.detach", "aten.alias",
                      "aten._to_copy"})
    r.add(n, [](DLOp op, ValueRange o, PatternRewriter &rw) {
      if (o.empty())
        return failure();
      return lowerElementwise(op, o.take_front(), rw,
                              [](OpBuilder &, Location, ValueRange a) { return a[0]; });
    });
}
