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

std::optional<SmallVector<bool>> boolListArg(DLOp op, StringRef name,
                                             size_t n) {
  Attribute a = getArg(op, name);
  if (!a)
    return SmallVector<bool>(n, true);
  auto arr = dyn_cast<ArrayAttr>(a);
  if (!arr || arr.size() != n)
    return std::nullopt;
  SmallVector<bool> out;
  for (Attribute e : arr) {
    if (auto bl = dyn_cast<BoolAttr>(e))
      out.push_back(bl.getValue());
    else if (auto i = dyn_cast<IntegerAttr>(e))
      out.push_back(!i.getValue().isZero());
    else
      return std::nullopt;
  }
  return out;
}

std::optional<SmallVector<int64_t>> getIntListArg(DLOp op, StringRef name) {
  std::optional<SmallVector<SizeArg>> sizes = getSizeListArg(op, name);
  if (!sizes ||
      llvm::any_of(*sizes, [](const SizeArg &e) { return e.isSymbolic(); }))
    return std::nullopt;
  return llvm::map_to_vector(*sizes, [](const SizeArg &e) { return e.value; });
}

/// One size entry: an int, or a #terra.dim naming one of `op`'s operands.
static std::optional<SizeArg> sizeEntry(Attribute a, DLOp op) {
  if (auto i = dyn_cast_or_null<IntegerAttr>(a))
    return SizeArg{i.getInt()};
  if (auto d = dyn_cast_or_null<DimAttr>(a))
    if (d.getOperand() < op.getInputs().size())
      return SizeArg{0, int64_t(d.getOperand()), d.getDim()};
  return std::nullopt;
}

std::optional<SmallVector<SizeArg>> getSizeListArg(DLOp op, StringRef name) {
  Attribute a = getArg(op, name);
  if (auto i = dyn_cast_or_null<IntegerAttr>(a))
    return SmallVector<SizeArg>{SizeArg{i.getInt()}};
  auto arr = dyn_cast_or_null<ArrayAttr>(a);
  if (!arr)
    return std::nullopt;
  SmallVector<SizeArg> out;
  for (Attribute e : arr) {
    std::optional<SizeArg> entry = sizeEntry(e, op);
    if (!entry)
      return std::nullopt;
    out.push_back(*entry);
  }
  return out;
}

std::optional<SizeArg> getSizeArg(DLOp op, StringRef name) {
  return sizeEntry(getArg(op, name), op);
}

int64_t staticSize(const SizeArg &s, DLOp op) {
  if (!s.isSymbolic())
    return s.value;
  return cast<RankedTensorType>(op.getInputs()[s.operand].getType())
      .getDimSize(s.dim);
}

Value sizeValue(OpBuilder &b, Location loc, const SizeArg &s, DLOp op) {
  int64_t v = staticSize(s, op);
  if (!ShapedType::isDynamic(v))
    return arith::ConstantIndexOp::create(b, loc, v);
  return tensor::DimOp::create(b, loc, op.getInputs()[s.operand], s.dim);
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
  int64_t v = type.isInteger(1) ? value != 0 : int64_t(value);
  return arith::ConstantOp::create(b, loc, b.getIntegerAttr(type, v));
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
    // Like PyTorch, any non-zero number is true (no truncation to bit 0).
    int64_t v = type.isInteger(1) ? i.getInt() != 0 : i.getInt();
    return arith::ConstantOp::create(b, loc, b.getIntegerAttr(type, v));
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

Value cst(OpBuilder &b, Location loc, Value like, double value) {
  return scalarConstant(b, loc, like.getType(), value);
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

AffineMap broadcastMap(RankedTensorType in, RankedTensorType out) {
  MLIRContext *ctx = in.getContext();
  int64_t rank = out.getRank();
  SmallVector<AffineExpr> exprs;
  for (int64_t id = 0; id < in.getRank(); ++id) {
    int64_t d = id + (rank - in.getRank());
    if (in.getDimSize(id) == 1 && out.getDimSize(d) != 1)
      exprs.push_back(getAffineConstantExpr(0, ctx));
    else
      exprs.push_back(getAffineDimExpr(d, ctx));
  }
  return AffineMap::get(rank, 0, exprs, ctx);
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
    maps.push_back(broadcastMap(t, type));
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

Value convertElements(OpBuilder &b, Location loc, Value v, Type et) {
  RankedTensorType t = tensorType(v);
  if (t.getElementType() == et)
    return v;
  return buildElementwise(
      b, loc, t.clone(et), {v},
      [](OpBuilder &, Location, ValueRange a) { return a[0]; });
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

// --- Windowed ops: convolution and pooling (Convolution.cpp, Pooling.cpp) --

std::optional<SmallVector<int64_t>> getSpatialArg(DLOp op, StringRef name,
                                                  unsigned n,
                                                  ArrayRef<int64_t> dflt) {
  Attribute a = getArg(op, name);
  if (!a || isa<UnitAttr>(a))
    return SmallVector<int64_t>(dflt);
  std::optional<SmallVector<int64_t>> v = getIntListArg(op, name);
  if (!v)
    return std::nullopt;
  if (v->empty())
    return SmallVector<int64_t>(dflt);
  if (v->size() == 1)
    return SmallVector<int64_t>(n, (*v)[0]);
  if (v->size() != n)
    return std::nullopt;
  return v;
}

Value padTrailing(OpBuilder &b, Location loc, Value v, ArrayRef<int64_t> low,
                  ArrayRef<int64_t> high, Value padValue) {
  if (llvm::all_of(low, [](int64_t x) { return x == 0; }) &&
      llvm::all_of(high, [](int64_t x) { return x == 0; }))
    return v;
  int64_t lead = cast<RankedTensorType>(v.getType()).getRank() - low.size();
  SmallVector<OpFoldResult> lo(lead, b.getIndexAttr(0));
  SmallVector<OpFoldResult> hi(lead, b.getIndexAttr(0));
  for (auto [l, h] : llvm::zip_equal(low, high)) {
    lo.push_back(b.getIndexAttr(l));
    hi.push_back(b.getIndexAttr(h));
  }
  return tensor::PadOp::create(b, loc, /*resultType=*/Type(), v, lo, hi,
                               padValue)
      .getResult();
}

Value spreadTrailing(OpBuilder &b, Location loc, Value v, Value fill,
                     ArrayRef<int64_t> sizes, ArrayRef<int64_t> offsets,
                     ArrayRef<int64_t> strides) {
  SmallVector<OpFoldResult> given;
  for (int64_t size : sizes)
    given.push_back(b.getIndexAttr(size));
  return spreadTrailing(b, loc, v, fill, given, offsets, strides);
}

Value spreadTrailing(OpBuilder &b, Location loc, Value v, Value fill,
                     ArrayRef<OpFoldResult> sizes, ArrayRef<int64_t> offsets,
                     ArrayRef<int64_t> strides) {
  auto t = cast<RankedTensorType>(v.getType());
  int64_t lead = t.getRank() - sizes.size();
  SmallVector<OpFoldResult> srcSizes = getSizes(b, loc, v);
  SmallVector<OpFoldResult> full(srcSizes.begin(), srcSizes.begin() + lead);
  SmallVector<OpFoldResult> offs(lead, b.getIndexAttr(0));
  SmallVector<OpFoldResult> strs(lead, b.getIndexAttr(1));
  for (size_t i = 0; i < sizes.size(); ++i) {
    full.push_back(sizes[i]);
    offs.push_back(b.getIndexAttr(offsets[i]));
    strs.push_back(b.getIndexAttr(strides[i]));
  }
  Value init = tensor::EmptyOp::create(b, loc, full, t.getElementType());
  Value filled = linalg::FillOp::create(b, loc, fill, init).getResult(0);
  return tensor::InsertSliceOp::create(b, loc, v, filled, offs, srcSizes, strs)
      .getResult();
}

/// Reassociation grouping the unit dim `pos` of a rank-`rank` shape with a
/// neighbour (the next dim, or the previous one when it is last).
static SmallVector<ReassociationIndices> unitDimGroups(int64_t rank,
                                                       int64_t pos) {
  SmallVector<ReassociationIndices> groups;
  for (int64_t d = 0; d < rank; ++d) {
    if (d == pos)
      continue;
    groups.push_back({d});
  }
  if (groups.empty()) // A rank-1 unit tensor <-> a 0-d tensor.
    return groups;
  if (pos < rank - 1) {
    // Merge into the group of dim pos + 1 (now at index pos).
    groups[pos].insert(groups[pos].begin(), pos);
  } else {
    groups.back().push_back(pos);
  }
  return groups;
}

Value insertUnitDim(OpBuilder &b, Location loc, Value v, int64_t pos) {
  auto t = cast<RankedTensorType>(v.getType());
  SmallVector<int64_t> shape(t.getShape());
  shape.insert(shape.begin() + pos, 1);
  SmallVector<OpFoldResult> outShape = getSizes(b, loc, v);
  outShape.insert(outShape.begin() + pos, b.getIndexAttr(1));
  auto type = RankedTensorType::get(shape, t.getElementType());
  return tensor::ExpandShapeOp::create(b, loc, type, v,
                                       unitDimGroups(t.getRank() + 1, pos),
                                       outShape);
}

Value dropUnitDim(OpBuilder &b, Location loc, Value v, int64_t pos) {
  auto t = cast<RankedTensorType>(v.getType());
  return tensor::CollapseShapeOp::create(b, loc, v,
                                         unitDimGroups(t.getRank(), pos));
}

static Value materializeIndex(OpBuilder &b, Location loc, OpFoldResult x) {
  if (auto v = dyn_cast<Value>(x))
    return v;
  return arith::ConstantIndexOp::create(
      b, loc, cast<IntegerAttr>(cast<Attribute>(x)).getInt());
}

void guardEqual(OpBuilder &b, Location loc, OpFoldResult x, OpFoldResult y,
                StringRef msg) {
  if (isa<Attribute>(x) && isa<Attribute>(y))
    return;
  Value eq = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq,
                                   materializeIndex(b, loc, x),
                                   materializeIndex(b, loc, y));
  cf::AssertOp::create(b, loc, eq, msg);
}

Value castWithGuards(OpBuilder &b, Location loc, Value v,
                     RankedTensorType type) {
  auto t = cast<RankedTensorType>(v.getType());
  if (t == type)
    return v;
  for (int64_t d = 0; d < t.getRank(); ++d)
    if (t.isDynamicDim(d) && !type.isDynamicDim(d))
      guardEqual(b, loc, OpFoldResult(tensor::DimOp::create(b, loc, v, d)),
                 b.getIndexAttr(type.getDimSize(d)),
                 "size does not match the op's result type");
  return tensor::CastOp::create(b, loc, type, v);
}

// --- Reductions and explicit-map generics (Reduction.cpp, Loss.cpp,
// Normalization.cpp) --------------------------------------------------------

std::optional<SmallVector<bool>> reductionMask(ArrayRef<int64_t> dims,
                                               int64_t rank) {
  SmallVector<bool> mask(rank, dims.empty());
  for (int64_t d : dims) {
    int64_t bound = std::max<int64_t>(rank, 1);
    if (d < -bound || d >= bound)
      return std::nullopt;
    if (rank == 0)
      continue;
    d = d < 0 ? d + rank : d;
    if (mask[d]) // Repeated.
      return std::nullopt;
    mask[d] = true;
  }
  return mask;
}

RankedTensorType reducedType(RankedTensorType input, ArrayRef<bool> mask,
                             bool keepdim, Type elem) {
  SmallVector<int64_t> shape;
  for (int64_t d = 0; d < input.getRank(); ++d) {
    if (!mask[d])
      shape.push_back(input.getDimSize(d));
    else if (keepdim)
      shape.push_back(1);
  }
  return RankedTensorType::get(shape, elem);
}

AffineMap reducedMap(MLIRContext *ctx, ArrayRef<bool> mask, bool keepdim) {
  SmallVector<AffineExpr> exprs;
  for (size_t d = 0; d < mask.size(); ++d) {
    if (!mask[d])
      exprs.push_back(getAffineDimExpr(d, ctx));
    else if (keepdim)
      exprs.push_back(getAffineConstantExpr(0, ctx));
  }
  return AffineMap::get(mask.size(), 0, exprs, ctx);
}

bool isCastCompatible(RankedTensorType a, RankedTensorType b) {
  if (a.getRank() != b.getRank() || a.getElementType() != b.getElementType())
    return false;
  for (int64_t d = 0; d < a.getRank(); ++d)
    if (!a.isDynamicDim(d) && !b.isDynamicDim(d) &&
        a.getDimSize(d) != b.getDimSize(d))
      return false;
  return true;
}

SmallVector<Value> buildGeneric(OpBuilder &b, Location loc, Value source,
                                ArrayRef<bool> mask, bool keepdim,
                                ValueRange inputs,
                                ArrayRef<AffineMap> inputMaps,
                                ArrayRef<RankedTensorType> resultTypes,
                                ValueRange inits, const GenericBodyFn &body) {
  MLIRContext *ctx = b.getContext();
  int64_t rank = mask.size();
  AffineMap outMap = reducedMap(ctx, mask, keepdim);
  // Result dim -> iteration dim (-1 for a kept unit dim).
  SmallVector<int64_t> fromDim;
  for (int64_t d = 0; d < rank; ++d) {
    if (!mask[d])
      fromDim.push_back(d);
    else if (keepdim)
      fromDim.push_back(-1);
  }
  SmallVector<Value> outs;
  SmallVector<AffineMap> maps(inputMaps);
  SmallVector<Type> types;
  for (auto [i, type] : llvm::enumerate(resultTypes)) {
    SmallVector<Value> dyn;
    for (int64_t r = 0; r < type.getRank(); ++r) {
      if (!type.isDynamicDim(r))
        continue;
      dyn.push_back(fromDim[r] < 0
                        ? Value(arith::ConstantIndexOp::create(b, loc, 1))
                        : Value(tensor::DimOp::create(b, loc, source,
                                                      fromDim[r])));
    }
    Value init = tensor::EmptyOp::create(b, loc, type, dyn);
    if (!inits.empty())
      init = linalg::FillOp::create(b, loc, inits[i], init).getResult(0);
    outs.push_back(init);
    maps.push_back(outMap);
    types.push_back(type);
  }
  SmallVector<utils::IteratorType> iters;
  for (bool m : mask)
    iters.push_back(m ? utils::IteratorType::reduction
                      : utils::IteratorType::parallel);
  size_t numIns = inputs.size();
  auto generic = linalg::GenericOp::create(
      b, loc, types, inputs, outs, maps, iters,
      [&](OpBuilder &nb, Location nloc, ValueRange args) {
        SmallVector<Value> r =
            body(nb, nloc, args.take_front(numIns), args.drop_front(numIns));
        linalg::YieldOp::create(nb, nloc, r);
      });
  return SmallVector<Value>(generic.getResults());
}

Value countElements(OpBuilder &b, Location loc, Value v, ArrayRef<bool> mask,
                    Type type) {
  auto t = cast<RankedTensorType>(v.getType());
  int64_t known = 1;
  Value dynamic;
  for (int64_t d = 0; d < t.getRank(); ++d) {
    if (!mask[d])
      continue;
    if (!t.isDynamicDim(d)) {
      known *= t.getDimSize(d);
      continue;
    }
    Value s = tensor::DimOp::create(b, loc, v, d);
    dynamic = dynamic ? Value(arith::MulIOp::create(b, loc, dynamic, s)) : s;
  }
  if (!dynamic)
    return scalarConstant(b, loc, type, double(known));
  if (known != 1)
    dynamic = arith::MulIOp::create(
        b, loc, dynamic, arith::ConstantIndexOp::create(b, loc, known));
  Value n = arith::IndexCastOp::create(b, loc, b.getI64Type(), dynamic);
  return castScalar(b, loc, n, type);
}

std::optional<SmallVector<Value>>
matchTensorParams(DLOp op, ValueRange operands,
                  ArrayRef<std::pair<StringRef, bool>> params) {
  SmallVector<bool> present;
  int64_t count = 0;
  for (auto [name, optional] : params) {
    bool none = optional && isa_and_nonnull<UnitAttr>(getArg(op, name));
    present.push_back(!none);
    count += !none;
  }
  // Fewer operands: the last unmarked optionals are absent.
  for (int64_t i = params.size() - 1;
       i >= 0 && count > int64_t(operands.size()); --i) {
    if (params[i].second && present[i]) {
      present[i] = false;
      --count;
    }
  }
  if (count != int64_t(operands.size()))
    return std::nullopt;
  SmallVector<Value> out;
  unsigned k = 0;
  for (bool p : present)
    out.push_back(p ? operands[k++] : Value());
  return out;
}

Value extremeConstant(OpBuilder &b, Location loc, Type type, bool negative) {
  if (auto ft = dyn_cast<FloatType>(type))
    return arith::ConstantOp::create(
        b, loc,
        b.getFloatAttr(ft, APFloat::getInf(ft.getFloatSemantics(), negative)));
  unsigned w = type.getIntOrFloatBitWidth();
  APInt v = negative ? APInt::getSignedMinValue(w) : APInt::getSignedMaxValue(w);
  return arith::ConstantOp::create(b, loc, b.getIntegerAttr(type, v));
}

// --- Failure without side effects (DataMovement.cpp, TensorConstructors.cpp,
// Optimizer.cpp, Random.cpp) ------------------------------------------------

LogicalResult lowerOrRollBack(LowerFn fn, DLOp op, ValueRange operands,
                              PatternRewriter &rw) {
  Operation *before = op->getPrevNode();
  if (succeeded(fn(op, operands, rw)))
    return success();
  // Newly built ops sit between `before` and `op`; users come after their
  // definitions, so erase from the back.
  while (Operation *p = op->getPrevNode()) {
    if (p == before)
      break;
    rw.eraseOp(p);
  }
  return failure();
}

} // namespace terra::lowering
