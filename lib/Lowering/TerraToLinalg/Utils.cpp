//===- Utils.cpp - Helpers shared by the terra lowering families ----------===//
#include "Utils.h"

using namespace mlir;

namespace terra::lowering {

static Attribute getArg(DLOp op, StringRef name) {
  if (DictionaryAttr args = op.getArgsAttr())
    return args.get(name);
  return nullptr;
}

std::optional<int64_t> getIntArg(DLOp op, StringRef name) {
  if (auto a = dyn_cast_or_null<IntegerAttr>(getArg(op, name)))
    return a.getInt();
  if (auto a = dyn_cast_or_null<BoolAttr>(getArg(op, name)))
    return a.getValue();
  return std::nullopt;
}

std::optional<double> getFloatArg(DLOp op, StringRef name) {
  Attribute a = getArg(op, name);
  if (auto f = dyn_cast_or_null<FloatAttr>(a))
    return f.getValueAsDouble();
  if (auto i = dyn_cast_or_null<IntegerAttr>(a))
    return double(i.getInt());
  if (auto bl = dyn_cast_or_null<BoolAttr>(a))
    return bl.getValue() ? 1.0 : 0.0;
  return std::nullopt;
}

std::optional<bool> getBoolArg(DLOp op, StringRef name) {
  Attribute a = getArg(op, name);
  if (auto bl = dyn_cast_or_null<BoolAttr>(a))
    return bl.getValue();
  if (auto i = dyn_cast_or_null<IntegerAttr>(a))
    return i.getInt() != 0;
  return std::nullopt;
}

std::optional<SmallVector<int64_t>> getIntListArg(DLOp op, StringRef name) {
  Attribute a = getArg(op, name);
  if (auto i = dyn_cast_or_null<IntegerAttr>(a))
    return SmallVector<int64_t>{i.getInt()};
  auto arr = dyn_cast_or_null<ArrayAttr>(a);
  if (!arr)
    return std::nullopt;
  SmallVector<int64_t> out;
  for (Attribute e : arr) {
    auto i = dyn_cast<IntegerAttr>(e);
    if (!i)
      return std::nullopt;
    out.push_back(i.getInt());
  }
  return out;
}

bool isFloat(Type t) { return isa<FloatType>(t); }

Value castScalar(OpBuilder &b, Location loc, Value v, Type to) {
  Type from = v.getType();
  if (from == to)
    return v;
  bool fromF = isa<FloatType>(from), toF = isa<FloatType>(to);
  if (fromF && toF) {
    if (from.getIntOrFloatBitWidth() < to.getIntOrFloatBitWidth())
      return arith::ExtFOp::create(b, loc, to, v);
    return arith::TruncFOp::create(b, loc, to, v);
  }
  if (!fromF && toF) {
    if (from.isInteger(1))
      return arith::UIToFPOp::create(b, loc, to, v);
    return arith::SIToFPOp::create(b, loc, to, v);
  }
  if (fromF && !toF) {
    if (to.isInteger(1)) {
      Value zero = arith::ConstantOp::create(b, loc, b.getFloatAttr(from, 0));
      return arith::CmpFOp::create(b, loc, arith::CmpFPredicate::UNE, v, zero);
    }
    return arith::FPToSIOp::create(b, loc, to, v);
  }
  unsigned fw = from.getIntOrFloatBitWidth(), tw = to.getIntOrFloatBitWidth();
  if (tw == 1) {
    Value zero = arith::ConstantOp::create(b, loc, b.getIntegerAttr(from, 0));
    return arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ne, v, zero);
  }
  if (fw < tw)
    return fw == 1 ? Value(arith::ExtUIOp::create(b, loc, to, v))
                   : Value(arith::ExtSIOp::create(b, loc, to, v));
  return arith::TruncIOp::create(b, loc, to, v);
}

Value scalarConstant(OpBuilder &b, Location loc, Type type, double value) {
  if (isa<FloatType>(type))
    return arith::ConstantOp::create(b, loc, b.getFloatAttr(type, value));
  return arith::ConstantOp::create(b, loc,
                                   b.getIntegerAttr(type, int64_t(value)));
}

Value scalarArgOrOperand(OpBuilder &b, DLOp op, ValueRange operands,
                         unsigned operandIndex, StringRef name, Type type) {
  Location loc = op.getLoc();
  if (operandIndex < operands.size()) {
    Value t = operands[operandIndex];
    auto tt = cast<RankedTensorType>(t.getType());
    if (tt.getRank() != 0)
      return nullptr;
    Value s = tensor::ExtractOp::create(b, loc, t, ValueRange{});
    return castScalar(b, loc, s, type);
  }
  Attribute a = getArg(op, name);
  if (auto i = dyn_cast_or_null<IntegerAttr>(a)) {
    if (isa<FloatType>(type))
      return scalarConstant(b, loc, type, double(i.getInt()));
    return arith::ConstantOp::create(b, loc, b.getIntegerAttr(type, i.getInt()));
  }
  if (auto f = dyn_cast_or_null<FloatAttr>(a))
    return castScalar(b, loc,
                      arith::ConstantOp::create(b, loc, b.getF64FloatAttr(
                                                            f.getValueAsDouble())),
                      type);
  if (auto bl = dyn_cast_or_null<BoolAttr>(a))
    return scalarConstant(b, loc, type, bl.getValue() ? 1 : 0);
  return nullptr;
}

RankedTensorType resultType(DLOp op, unsigned i) {
  return cast<RankedTensorType>(op.getResult(i).getType());
}

SmallVector<OpFoldResult> getSizes(OpBuilder &b, Location loc, Value v) {
  return tensor::getMixedSizes(b, loc, v);
}

Value emptyLike(OpBuilder &b, Location loc, RankedTensorType type,
                Value like) {
  SmallVector<Value> dyn;
  for (int64_t i = 0; i < type.getRank(); ++i)
    if (type.isDynamicDim(i))
      dyn.push_back(tensor::DimOp::create(b, loc, like, i));
  return tensor::EmptyOp::create(b, loc, type, dyn);
}

Value emptyWithSizes(OpBuilder &b, Location loc, RankedTensorType type,
                     ValueRange dynSizes) {
  return tensor::EmptyOp::create(b, loc, type, dynSizes);
}

Value buildElementwise(OpBuilder &b, Location loc, RankedTensorType type,
                       ValueRange inputs, const BodyFn &body,
                       Type computeType) {
  int64_t rank = type.getRank();
  MLIRContext *ctx = b.getContext();
  SmallVector<Value> tensorInputs;
  SmallVector<AffineMap> maps;
  // Result dynamic sizes: from the first input that has the dim at full
  // (non-broadcast) extent.
  SmallVector<Value> dynSizes;
  for (int64_t d = 0; d < rank; ++d) {
    if (!type.isDynamicDim(d))
      continue;
    Value size;
    for (Value in : inputs) {
      auto t = dyn_cast<RankedTensorType>(in.getType());
      if (!t)
        continue;
      int64_t id = d - (rank - t.getRank());
      if (id < 0 || t.getDimSize(id) == 1)
        continue;
      size = tensor::DimOp::create(b, loc, in, id);
      break;
    }
    if (!size) // Every input broadcasts here: the extent is 1.
      size = arith::ConstantIndexOp::create(b, loc, 1);
    dynSizes.push_back(size);
  }
  for (Value in : inputs) {
    auto t = dyn_cast<RankedTensorType>(in.getType());
    if (!t)
      continue;
    SmallVector<AffineExpr> exprs;
    for (int64_t id = 0; id < t.getRank(); ++id) {
      int64_t d = id + (rank - t.getRank());
      if (t.getDimSize(id) == 1 && type.getDimSize(d) != 1)
        exprs.push_back(getAffineConstantExpr(0, ctx));
      else
        exprs.push_back(getAffineDimExpr(d, ctx));
    }
    maps.push_back(AffineMap::get(rank, 0, exprs, ctx));
    tensorInputs.push_back(in);
  }
  maps.push_back(b.getMultiDimIdentityMap(rank));
  Value init = tensor::EmptyOp::create(b, loc, type, dynSizes);
  SmallVector<utils::IteratorType> iters(rank, utils::IteratorType::parallel);
  Type compute = computeType ? computeType : type.getElementType();
  auto generic = linalg::GenericOp::create(
      b, loc, type, tensorInputs, init, maps, iters,
      [&](OpBuilder &nb, Location nloc, ValueRange args) {
        SmallVector<Value> elems;
        unsigned k = 0;
        for (Value in : inputs) {
          if (isa<RankedTensorType>(in.getType()))
            elems.push_back(castScalar(nb, nloc, args[k++], compute));
          else
            elems.push_back(in);
        }
        Value r = body(nb, nloc, elems);
        linalg::YieldOp::create(nb, nloc,
                                castScalar(nb, nloc, r, type.getElementType()));
      });
  return generic.getResult(0);
}

LogicalResult lowerElementwise(DLOp op, ValueRange operands,
                               PatternRewriter &rw,
                               const BodyFn &body) {
  if (op.getNumResults() != 1)
    return failure();
  Value r = buildElementwise(rw, op.getLoc(), resultType(op), operands, body);
  rw.replaceOp(op, r);
  return success();
}

} // namespace terra::lowering
