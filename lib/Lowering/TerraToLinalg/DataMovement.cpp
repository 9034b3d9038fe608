//===- DataMovement.cpp - Views, slicing, concatenation, gathers ----------===//
//
// Shape-changing and indexing ops:
//   * reshapes (view, _unsafe_view, reshape, _reshape_alias, flatten,
//     unflatten) become tensor.collapse_shape / tensor.expand_shape when a
//     static reassociation exists, else tensor.reshape with a shape tensor;
//   * permute / transpose / t become linalg.transpose; expand a broadcasting
//     linalg.generic; squeeze / unsqueeze a collapse / expand of unit dims;
//   * slice / select become tensor.extract_slice, and their backward ops a
//     tensor.insert_slice into zeros; cat / stack chains of insert_slice;
//   * diagonal is an affine gather, diagonal_scatter / diagonal_backward a
//     linalg.generic whose diagonal elements read the source; unfold a
//     gather of windows, its backward a sum over the windows per element;
//   * index_select, gather and embedding are linalg.generic ops that read the
//     source with tensor.extract at the gathered coordinates (bounds checked
//     with cf.assert); embedding_dense_backward and index_add are
//     scatter-adds, an scf.for over the indices that adds one row (slice)
//     per iteration in place.
//
// The result type is the source of truth for shapes: args are used only
// where types cannot tell (new dims of expand, the fallback reshape).
//
//===----------------------------------------------------------------------===//
#include "Utils.h"

#include "mlir/Dialect/Arith/Utils/Utils.h"
#include "mlir/Dialect/SCF/IR/SCF.h"

using namespace mlir;
using namespace terra;
using namespace terra::lowering;

namespace {

bool isDyn(int64_t s) { return ShapedType::isDynamic(s); }

/// `d` in [-rank, rank) as a non-negative dim, or nullopt.
std::optional<int64_t> normDim(int64_t d, int64_t rank) {
  if (d < 0)
    d += rank;
  if (d < 0 || d >= rank)
    return std::nullopt;
  return d;
}

/// `v` as `type` (same shape up to static information).
Value castTo(OpBuilder &b, Location loc, Value v, Type type) {
  if (v.getType() == type)
    return v;
  return tensor::CastOp::create(b, loc, type, v);
}

Value indexValue(OpBuilder &b, Location loc, OpFoldResult ofr) {
  return getValueOrCreateConstantIndexOp(b, loc, ofr);
}

Value cstIndex(OpBuilder &b, Location loc, int64_t v) {
  return arith::ConstantIndexOp::create(b, loc, v);
}

/// Asserts at run time that index `i` (of type index) is in [0, size).
void assertInBounds(OpBuilder &b, Location loc, Value i, Value size,
                    StringRef msg) {
  Value ok = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ult, i, size);
  cf::AssertOp::create(b, loc, ok, msg);
}

void assertEqual(OpBuilder &b, Location loc, Value a, Value c,
                 StringRef msg) {
  Value ok = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq, a, c);
  cf::AssertOp::create(b, loc, ok, msg);
}

/// Loads an integer index element as `index`.
Value toIndex(OpBuilder &b, Location loc, Value v) {
  if (v.getType().isIndex())
    return v;
  if (v.getType().getIntOrFloatBitWidth() < 64)
    v = arith::ExtSIOp::create(b, loc, b.getI64Type(), v);
  return arith::IndexCastOp::create(b, loc, b.getIndexType(), v);
}

bool isIntTensor(Value v) {
  return isa<IntegerType>(tensorType(v).getElementType());
}

//===----------------------------------------------------------------------===//
// Reshapes
//===----------------------------------------------------------------------===//

ReassociationIndices iota(int64_t begin, int64_t end) {
  ReassociationIndices r;
  for (int64_t k = begin; k < end; ++k)
    r.push_back(k);
  return r;
}

/// A reassociation between a source and a result shape of a row-major
/// reshape: group g of `src` collapses to one dim that expands to group g of
/// `dst`. Groups of static dims are matched by running products from both
/// ends; what remains in the middle (holding the dynamic dims) is one group.
/// Element counts prove this grouping right as long as the middle of `dst`
/// has at most one dynamic dim (its size is then the collapsed size divided
/// by the static rest); otherwise there is no static plan.
struct ReshapePlan {
  SmallVector<ReassociationIndices> src, dst;
};

std::optional<ReshapePlan> planReshape(ArrayRef<int64_t> s,
                                       ArrayRef<int64_t> d) {
  int64_t ns = s.size(), nd = d.size();
  SmallVector<ReassociationIndices> ls, ld, rs, rd;
  int64_t i = 0, j = 0;
  while (i < ns && j < nd && !isDyn(s[i]) && !isDyn(d[j])) {
    int64_t ii = i + 1, jj = j + 1, ps = s[i], pd = d[j];
    bool ok = true;
    while (ok && ps != pd) {
      if (ps < pd) {
        if ((ok = ii < ns && !isDyn(s[ii])))
          ps *= s[ii++];
      } else if ((ok = jj < nd && !isDyn(d[jj]))) {
        pd *= d[jj++];
      }
    }
    if (!ok)
      break;
    ls.push_back(iota(i, ii));
    ld.push_back(iota(j, jj));
    i = ii;
    j = jj;
  }
  int64_t ie = ns, je = nd;
  while (ie > i && je > j && !isDyn(s[ie - 1]) && !isDyn(d[je - 1])) {
    int64_t ii = ie - 1, jj = je - 1, ps = s[ii], pd = d[jj];
    bool ok = true;
    while (ok && ps != pd) {
      if (ps < pd) {
        if ((ok = ii > i && !isDyn(s[ii - 1])))
          ps *= s[--ii];
      } else if ((ok = jj > j && !isDyn(d[jj - 1]))) {
        pd *= d[--jj];
      }
    }
    if (!ok)
      break;
    rs.insert(rs.begin(), iota(ii, ie));
    rd.insert(rd.begin(), iota(jj, je));
    ie = ii;
    je = jj;
  }
  ReassociationIndices ms = iota(i, ie), md = iota(j, je);
  if (!ms.empty() && !md.empty()) {
    if (llvm::count_if(md, [&](int64_t k) { return isDyn(d[k]); }) > 1)
      return std::nullopt;
    ls.push_back(ms);
    ld.push_back(md);
  } else if (!ms.empty() || !md.empty()) {
    // Only unit dims may be left over on one side; they join a neighbour.
    bool onSrc = !ms.empty();
    ArrayRef<int64_t> shape = onSrc ? s : d;
    ReassociationIndices &left = onSrc ? ms : md;
    for (int64_t k : left)
      if (shape[k] != 1)
        return std::nullopt;
    SmallVector<ReassociationIndices> &l = onSrc ? ls : ld;
    SmallVector<ReassociationIndices> &r = onSrc ? rs : rd;
    if (!l.empty())
      l.back().append(left.begin(), left.end());
    else if (!r.empty())
      r.front().insert(r.front().begin(), left.begin(), left.end());
    // else: the other side is 0-d and the reassociation is empty.
  }
  ReshapePlan plan;
  plan.src = ls;
  plan.src.append(rs.begin(), rs.end());
  plan.dst = ld;
  plan.dst.append(rd.begin(), rd.end());
  return plan;
}

/// Emits the reshape of `src` to `dstT` along `plan`.
Value emitReshape(OpBuilder &b, Location loc, Value src,
                  RankedTensorType dstT, const ReshapePlan &plan) {
  RankedTensorType srcT = tensorType(src);
  ArrayRef<int64_t> d = dstT.getShape();
  if (plan.src.empty()) { // 0-d <-> all unit dims.
    if (srcT.getRank() == 0) {
      SmallVector<OpFoldResult> ones(dstT.getRank(), b.getIndexAttr(1));
      return tensor::ExpandShapeOp::create(
          b, loc, dstT, src, ArrayRef<ReassociationIndices>{}, ones);
    }
    return tensor::CollapseShapeOp::create(b, loc, dstT, src,
                                           ArrayRef<ReassociationIndices>{});
  }
  Value mid = src;
  if (int64_t(plan.src.size()) != srcT.getRank())
    mid = tensor::CollapseShapeOp::create(b, loc, src, plan.src);
  RankedTensorType midT = tensorType(mid);
  if (int64_t(plan.dst.size()) == dstT.getRank())
    return castTo(b, loc, mid, dstT);

  // expand_shape needs a collapsed dim to be dynamic exactly when its group
  // has a dynamic dim: refine both types to agree, then cast to dstT.
  SmallVector<int64_t> midShape(midT.getShape()), outShape(d);
  SmallVector<OpFoldResult> outSizes;
  for (auto [g, group] : llvm::enumerate(plan.dst)) {
    int64_t staticProd = 1, nDyn = 0;
    for (int64_t k : group) {
      if (isDyn(d[k]))
        ++nDyn;
      else
        staticProd *= d[k];
    }
    if (nDyn == 0)
      midShape[g] = staticProd;
    else if (!isDyn(midShape[g]))
      for (int64_t k : group)
        if (isDyn(d[k]))
          outShape[k] = midShape[g] / staticProd;
  }
  mid = castTo(b, loc, mid, midT.clone(midShape));
  for (auto [g, group] : llvm::enumerate(plan.dst)) {
    int64_t staticProd = 1;
    for (int64_t k : group)
      if (!isDyn(outShape[k]))
        staticProd *= outShape[k];
    for (int64_t k : group) {
      if (!isDyn(outShape[k])) {
        outSizes.push_back(b.getIndexAttr(outShape[k]));
        continue;
      }
      Value m = tensor::DimOp::create(b, loc, mid, g);
      if (staticProd != 1) {
        Value sp = cstIndex(b, loc, staticProd);
        Value rem = arith::RemSIOp::create(b, loc, m, sp);
        assertEqual(b, loc, rem, cstIndex(b, loc, 0),
                    "reshape: element count mismatch");
        m = arith::DivSIOp::create(b, loc, m, sp);
      }
      outSizes.push_back(m);
    }
  }
  Value r = tensor::ExpandShapeOp::create(b, loc, dstT.clone(outShape), mid,
                                          plan.dst, outSizes);
  return castTo(b, loc, r, dstT);
}

/// Fallback: tensor.reshape with a shape tensor built from the result type,
/// the `size`/`shape` arg for dynamic dims, and one -1 inferred.
Value emitShapeTensorReshape(OpBuilder &b, Location loc, DLOp op, Value src,
                             RankedTensorType dstT) {
  std::optional<SmallVector<SizeArg>> arg = getSizeListArg(op, "size");
  if (!arg)
    arg = getSizeListArg(op, "shape");
  if (!arg || int64_t(arg->size()) != dstT.getRank())
    return nullptr;
  // Check before building anything: at most one size is inferred.
  int64_t inferred = -1;
  for (int64_t k = 0; k < dstT.getRank(); ++k) {
    if (!dstT.isDynamicDim(k) || (*arg)[k].hasSize())
      continue;
    if (inferred >= 0)
      return nullptr;
    inferred = k;
  }
  SmallVector<Value> dims(dstT.getRank());
  Value known = cstIndex(b, loc, 1);
  for (int64_t k = 0; k < dstT.getRank(); ++k) {
    if (k == inferred)
      continue;
    // A symbolic size (a dim of the reshaped operand) is read at run time.
    dims[k] = dstT.isDynamicDim(k) ? sizeValue(b, loc, (*arg)[k], op)
                                   : cstIndex(b, loc, dstT.getDimSize(k));
    known = arith::MulIOp::create(b, loc, known, dims[k]);
  }
  Value total = cstIndex(b, loc, 1);
  for (int64_t k = 0; k < tensorType(src).getRank(); ++k)
    total = arith::MulIOp::create(b, loc, total,
                                  tensor::DimOp::create(b, loc, src, k));
  if (inferred >= 0) {
    dims[inferred] = arith::DivSIOp::create(b, loc, total, known);
    known = arith::MulIOp::create(b, loc, known, dims[inferred]);
  }
  // The sizes taken from args must account for every element.
  assertEqual(b, loc, known, total, "reshape: element count mismatch");
  Value shape = tensor::FromElementsOp::create(
      b, loc, RankedTensorType::get({dstT.getRank()}, b.getIndexType()), dims);
  return tensor::ReshapeOp::create(b, loc, dstT, src, shape);
}

LogicalResult lowerReshape(DLOp op, ValueRange o, PatternRewriter &rw) {
  if (o.empty() || op.getNumResults() != 1)
    return failure();
  Location loc = op.getLoc();
  Value src = o[0];
  RankedTensorType srcT = tensorType(src), dstT = resultType(op);
  if (srcT.getElementType() != dstT.getElementType())
    return failure();
  if (srcT == dstT) {
    rw.replaceOp(op, src);
    return success();
  }
  // _reshape_alias(x, size, stride) is what `reshape` emits when it can view
  // x's memory; its strides describe the traced tensor's layout. Its value
  // is x reshaped to `size` in logical order whatever the strides are, and
  // graph values have no layout, so it lowers like reshape.
  bool hasZero = llvm::is_contained(srcT.getShape(), 0) ||
                 llvm::is_contained(dstT.getShape(), 0);
  if (hasZero) { // No elements to move.
    if (!dstT.hasStaticShape())
      return failure();
    rw.replaceOp(op, tensor::EmptyOp::create(rw, loc, dstT, ValueRange{}));
    return success();
  }
  if (std::optional<ReshapePlan> plan =
          planReshape(srcT.getShape(), dstT.getShape())) {
    rw.replaceOp(op, emitReshape(rw, loc, src, dstT, *plan));
    return success();
  }
  Value r = emitShapeTensorReshape(rw, loc, op, src, dstT);
  if (!r)
    return failure();
  rw.replaceOp(op, r);
  return success();
}

/// Groups of a shape's dims around its unit dims `unit` (dropped by a
/// collapse, added by an expand): every other dim is one group, and unit
/// dims join the next group (trailing ones the last).
SmallVector<ReassociationIndices> unitDimGroups(ArrayRef<bool> unit) {
  SmallVector<ReassociationIndices> groups;
  ReassociationIndices pending;
  for (auto [k, isUnit] : llvm::enumerate(unit)) {
    pending.push_back(k);
    if (!isUnit) {
      groups.push_back(pending);
      pending.clear();
    }
  }
  if (!pending.empty() && !groups.empty())
    groups.back().append(pending.begin(), pending.end());
  return groups;
}

/// Removes the dims marked in `drop` (all of size 1) from `src`.
Value dropUnitDims(OpBuilder &b, Location loc, Value src,
                   ArrayRef<bool> drop) {
  RankedTensorType t = tensorType(src);
  for (int64_t k = 0; k < t.getRank(); ++k)
    if (drop[k] && t.isDynamicDim(k))
      assertEqual(b, loc, tensor::DimOp::create(b, loc, src, k),
                  cstIndex(b, loc, 1), "squeeze: dim is not of size 1");
  SmallVector<ReassociationIndices> groups = unitDimGroups(drop);
  if (groups.empty()) // Everything goes: a 0-d result.
    return tensor::CollapseShapeOp::create(b, loc, t.clone(ArrayRef<int64_t>{}),
                                           src, groups);
  // The inferred type is dynamic where a dropped dim was; callers cast.
  return tensor::CollapseShapeOp::create(b, loc, src, groups);
}

LogicalResult lowerUnsqueeze(DLOp op, ValueRange o, PatternRewriter &rw) {
  std::optional<int64_t> dimArg = getIntArg(op, "dim");
  if (o.size() != 1 || !dimArg)
    return failure();
  Location loc = op.getLoc();
  Value src = o[0];
  RankedTensorType t = tensorType(src);
  std::optional<int64_t> dim = normDim(*dimArg, t.getRank() + 1);
  if (!dim || resultType(op).getRank() != t.getRank() + 1)
    return failure();
  SmallVector<int64_t> shape(t.getShape());
  shape.insert(shape.begin() + *dim, 1);
  SmallVector<OpFoldResult> sizes = getSizes(rw, loc, src);
  sizes.insert(sizes.begin() + *dim, rw.getIndexAttr(1));
  SmallVector<bool> unit(shape.size(), false);
  unit[*dim] = true;
  Value r = tensor::ExpandShapeOp::create(rw, loc, t.clone(shape), src,
                                          unitDimGroups(unit), sizes);
  rw.replaceOp(op, castTo(rw, loc, r, resultType(op)));
  return success();
}

/// squeeze (all unit dims), squeeze.dim and squeeze.dims. The result rank
/// says which dynamic dims were 1 at trace time; those are asserted.
LogicalResult lowerSqueeze(DLOp op, ValueRange o, PatternRewriter &rw) {
  if (o.size() != 1)
    return failure();
  Location loc = op.getLoc();
  Value src = o[0];
  RankedTensorType t = tensorType(src), rt = resultType(op);
  int64_t rank = t.getRank();
  SmallVector<bool> candidate(rank, false);
  if (std::optional<SmallVector<int64_t>> dims = getIntListArg(op, "dim")) {
    for (int64_t d : *dims) {
      if (rank == 0 && (d == 0 || d == -1))
        continue;
      std::optional<int64_t> nd = normDim(d, rank);
      if (!nd)
        return failure();
      candidate[*nd] = true;
    }
  } else {
    candidate.assign(rank, true);
  }
  SmallVector<bool> drop(rank, false);
  int64_t nStatic = 0, nDyn = 0;
  for (int64_t k = 0; k < rank; ++k) {
    if (!candidate[k])
      continue;
    if (t.getDimSize(k) == 1) {
      drop[k] = true;
      ++nStatic;
    } else if (t.isDynamicDim(k)) {
      ++nDyn;
    }
  }
  if (rt.getRank() == rank - nStatic - nDyn) {
    for (int64_t k = 0; k < rank; ++k)
      drop[k] = drop[k] || (candidate[k] && t.isDynamicDim(k));
  } else if (rt.getRank() != rank - nStatic) {
    return failure();
  }
  if (rt.getRank() == rank) {
    rw.replaceOp(op, castTo(rw, loc, src, rt));
    return success();
  }
  rw.replaceOp(op, castTo(rw, loc, dropUnitDims(rw, loc, src, drop), rt));
  return success();
}

//===----------------------------------------------------------------------===//
// Transposes and broadcasts
//===----------------------------------------------------------------------===//

/// linalg.transpose of `src` by `perm` (result dim i = source dim perm[i]).
Value emitTranspose(OpBuilder &b, Location loc, Value src,
                    ArrayRef<int64_t> perm) {
  RankedTensorType t = tensorType(src);
  SmallVector<OpFoldResult> in = getSizes(b, loc, src), sizes;
  for (int64_t p : perm)
    sizes.push_back(in[p]);
  Value init = tensor::EmptyOp::create(b, loc, sizes, t.getElementType());
  return linalg::TransposeOp::create(b, loc, src, init, perm).getResult()[0];
}

LogicalResult replaceWithTranspose(DLOp op, Value src, ArrayRef<int64_t> perm,
                                   PatternRewriter &rw) {
  Location loc = op.getLoc();
  Value r = llvm::equal(perm, llvm::seq<int64_t>(0, perm.size()))
                ? src
                : emitTranspose(rw, loc, src, perm);
  rw.replaceOp(op, castTo(rw, loc, r, resultType(op)));
  return success();
}

LogicalResult lowerPermute(DLOp op, ValueRange o, PatternRewriter &rw) {
  std::optional<SmallVector<int64_t>> dims = getIntListArg(op, "dims");
  if (o.size() != 1 || !dims)
    return failure();
  int64_t rank = tensorType(o[0]).getRank();
  if (int64_t(dims->size()) != rank)
    return failure();
  SmallVector<int64_t> perm;
  SmallVector<bool> seen(rank, false);
  for (int64_t d : *dims) {
    std::optional<int64_t> nd = normDim(d, rank);
    if (!nd || seen[*nd])
      return failure();
    seen[*nd] = true;
    perm.push_back(*nd);
  }
  return replaceWithTranspose(op, o[0], perm, rw);
}

LogicalResult lowerTranspose(DLOp op, ValueRange o, PatternRewriter &rw) {
  if (o.size() != 1)
    return failure();
  int64_t rank = tensorType(o[0]).getRank();
  SmallVector<int64_t> perm = llvm::to_vector(llvm::seq<int64_t>(0, rank));
  if (rank == 0) // transpose(0-d, 0|-1, 0|-1) is the identity.
    return replaceWithTranspose(op, o[0], perm, rw);
  std::optional<int64_t> a = getIntArg(op, "dim0"), c = getIntArg(op, "dim1");
  if (!a || !c || !normDim(*a, rank) || !normDim(*c, rank))
    return failure();
  std::swap(perm[*normDim(*a, rank)], perm[*normDim(*c, rank)]);
  return replaceWithTranspose(op, o[0], perm, rw);
}

LogicalResult lowerT(DLOp op, ValueRange o, PatternRewriter &rw) {
  if (o.size() != 1 || tensorType(o[0]).getRank() > 2)
    return failure();
  int64_t rank = tensorType(o[0]).getRank();
  SmallVector<int64_t> perm = rank == 2 ? SmallVector<int64_t>{1, 0}
                                        : llvm::to_vector(llvm::seq<int64_t>(
                                              0, rank));
  return replaceWithTranspose(op, o[0], perm, rw);
}

/// A tensor of type `rt` (dynamic sizes `dyn`) whose element at index i is
/// `src` at `srcExprs`(i): an affine gather (expand, repeat, flip,
/// pixel_shuffle).
Value gatherByMap(OpBuilder &b, Location loc, RankedTensorType rt,
                  ValueRange dyn, Value src, ArrayRef<AffineExpr> srcExprs) {
  int64_t r = rt.getRank();
  Value init = tensor::EmptyOp::create(b, loc, rt, dyn);
  SmallVector<AffineMap> maps = {AffineMap::get(r, 0, srcExprs, b.getContext()),
                                 b.getMultiDimIdentityMap(r)};
  SmallVector<utils::IteratorType> iters(r, utils::IteratorType::parallel);
  auto g =
      linalg::GenericOp::create(b, loc, rt, src, init, maps, iters,
                                [](OpBuilder &nb, Location l, ValueRange a) {
                                  linalg::YieldOp::create(nb, l, a[0]);
                                });
  return g.getResult(0);
}

/// expand(self, size): trailing-aligned broadcast; -1 keeps a dim. Static
/// unit dims broadcast; a dynamic source dim is taken to be kept (asserted
/// against a static result extent).
LogicalResult lowerExpand(DLOp op, ValueRange o, PatternRewriter &rw) {
  if (o.size() != 1)
    return failure();
  Location loc = op.getLoc();
  MLIRContext *ctx = rw.getContext();
  Value src = o[0];
  RankedTensorType t = tensorType(src), rt = resultType(op);
  int64_t r = rt.getRank(), k = t.getRank();
  if (k > r)
    return failure();
  std::optional<SmallVector<SizeArg>> size = getSizeListArg(op, "size");
  if (size && int64_t(size->size()) != r)
    return failure();
  // A broadcast dim of dynamic extent needs its size from the arg.
  for (int64_t d = 0; d < r; ++d) {
    int64_t id = d - (r - k);
    if (id < 0 && isDyn(rt.getDimSize(d)) && (!size || !(*size)[d].hasSize()))
      return failure();
  }
  SmallVector<AffineExpr> exprs;
  SmallVector<Value> dyn;
  for (int64_t d = 0; d < r; ++d) {
    int64_t id = d - (r - k);
    int64_t out = rt.getDimSize(d);
    if (id < 0 || t.getDimSize(id) == 1) {
      if (id >= 0)
        exprs.push_back(getAffineConstantExpr(0, ctx));
      if (isDyn(out)) {
        if (size && (*size)[d].hasSize())
          dyn.push_back(sizeValue(rw, loc, (*size)[d], op));
        else
          dyn.push_back(cstIndex(rw, loc, 1));
      }
      continue;
    }
    exprs.push_back(getAffineDimExpr(d, ctx));
    if (!t.isDynamicDim(id)) {
      if (!isDyn(out) && out != t.getDimSize(id))
        return failure();
      if (isDyn(out))
        dyn.push_back(cstIndex(rw, loc, t.getDimSize(id)));
      continue;
    }
    Value in = tensor::DimOp::create(rw, loc, src, id);
    if (isDyn(out))
      dyn.push_back(in);
    else
      assertEqual(rw, loc, in, cstIndex(rw, loc, out),
                  "expand: size mismatch in a non-unit dim");
  }
  rw.replaceOp(op, gatherByMap(rw, loc, rt, dyn, src, exprs));
  return success();
}

/// repeat(self, repeats): self, left-padded with unit dims to
/// len(repeats), tiled repeats[d] times along each dim d; the element at
/// i reads self at i_d mod size_d. Static shapes only (the mod is an affine
/// map of the input).
LogicalResult lowerRepeat(DLOp op, ValueRange o, PatternRewriter &rw) {
  if (o.size() != 1)
    return failure();
  MLIRContext *ctx = rw.getContext();
  Value src = o[0];
  RankedTensorType t = tensorType(src), rt = resultType(op);
  std::optional<SmallVector<int64_t>> repeats = getIntListArg(op, "repeats");
  int64_t r = rt.getRank(), k = t.getRank();
  if (!repeats || int64_t(repeats->size()) != r || k > r ||
      !t.hasStaticShape() || !rt.hasStaticShape())
    return failure();
  SmallVector<AffineExpr> exprs;
  for (int64_t d = 0; d < r; ++d) {
    int64_t id = d - (r - k);
    if ((*repeats)[d] < 0 ||
        rt.getDimSize(d) != (id < 0 ? 1 : t.getDimSize(id)) * (*repeats)[d])
      return failure();
    if (id < 0)
      continue;
    int64_t n = t.getDimSize(id);
    exprs.push_back(n == 1 ? getAffineConstantExpr(0, ctx)
                           : getAffineDimExpr(d, ctx) % n);
  }
  rw.replaceOp(op, gatherByMap(rw, op.getLoc(), rt, {}, src, exprs));
  return success();
}

/// pixel_shuffle(x, r): out[..., c, h*r + i, w*r + j] =
/// x[..., c*r*r + i*r + j, h, w]; pixel_unshuffle (Shuffle = false) is its
/// inverse. Static shapes: the index arithmetic is an affine map of the
/// output's indices.
template <bool Shuffle>
LogicalResult lowerPixelShuffle(DLOp op, ValueRange o, PatternRewriter &rw) {
  std::optional<int64_t> factor =
      getIntArg(op, Shuffle ? "upscale_factor" : "downscale_factor");
  if (o.size() != 1 || !factor || *factor < 1)
    return failure();
  MLIRContext *ctx = rw.getContext();
  RankedTensorType t = tensorType(o[0]), rt = resultType(op);
  int64_t rank = rt.getRank(), r = *factor;
  if (rank < 3 || t.getRank() != rank || !t.hasStaticShape() ||
      !rt.hasStaticShape())
    return failure();
  int64_t c = rank - 3, y = rank - 2, x = rank - 1;
  RankedTensorType small = Shuffle ? rt : t, big = Shuffle ? t : rt;
  // `big` has r*r times the channels of `small`, which has r times its
  // height and width.
  if (big.getDimSize(c) != small.getDimSize(c) * r * r ||
      small.getDimSize(y) != big.getDimSize(y) * r ||
      small.getDimSize(x) != big.getDimSize(x) * r)
    return failure();
  SmallVector<AffineExpr> exprs;
  for (int64_t d = 0; d < c; ++d)
    exprs.push_back(getAffineDimExpr(d, ctx));
  AffineExpr dc = getAffineDimExpr(c, ctx), dy = getAffineDimExpr(y, ctx),
             dx = getAffineDimExpr(x, ctx);
  if (Shuffle) {
    exprs.push_back(dc * (r * r) + (dy % r) * r + dx % r);
    exprs.push_back(dy.floorDiv(r));
    exprs.push_back(dx.floorDiv(r));
  } else {
    exprs.push_back(dc.floorDiv(r * r));
    exprs.push_back(dy * r + (dc % (r * r)).floorDiv(r));
    exprs.push_back(dx * r + dc % r);
  }
  rw.replaceOp(op, gatherByMap(rw, op.getLoc(), rt, {}, o[0], exprs));
  return success();
}

/// flip(self, dims): the flipped dims read index size - 1 - i (static
/// sizes: an affine map).
LogicalResult lowerFlip(DLOp op, ValueRange o, PatternRewriter &rw) {
  std::optional<SmallVector<int64_t>> dims = getIntListArg(op, "dims");
  if (o.size() != 1 || !dims)
    return failure();
  MLIRContext *ctx = rw.getContext();
  RankedTensorType t = tensorType(o[0]), rt = resultType(op);
  int64_t rank = t.getRank();
  if (rt != t)
    return failure();
  SmallVector<bool> flipped(rank, false);
  for (int64_t d : *dims) {
    if (d < 0)
      d += rank;
    if (d < 0 || d >= rank || t.isDynamicDim(d))
      return failure();
    flipped[d] = true;
  }
  SmallVector<AffineExpr> exprs;
  SmallVector<Value> dyn;
  for (int64_t d = 0; d < rank; ++d) {
    AffineExpr e = getAffineDimExpr(d, ctx);
    exprs.push_back(
        flipped[d] ? getAffineConstantExpr(t.getDimSize(d) - 1, ctx) - e : e);
    if (t.isDynamicDim(d))
      dyn.push_back(tensor::DimOp::create(rw, op.getLoc(), o[0], d));
  }
  rw.replaceOp(op, gatherByMap(rw, op.getLoc(), rt, dyn, o[0], exprs));
  return success();
}

//===----------------------------------------------------------------------===//
// Slicing
//===----------------------------------------------------------------------===//

/// PyTorch's clamping of slice bounds on a dim of size `n`; returns
/// (start, length). Static when `n` is.
std::pair<OpFoldResult, OpFoldResult> sliceBounds(OpBuilder &b, Location loc,
                                                  OpFoldResult n, int64_t start,
                                                  int64_t end, int64_t step,
                                                  Value endValue = nullptr) {
  // `endValue`, when given, is a non-negative run-time end (a symbolic
  // size) in place of `end`.
  std::optional<int64_t> sn = getConstantIntValue(n);
  if (sn && !endValue) {
    int64_t s = start, e = end;
    if (s < 0)
      s += *sn;
    if (e < 0)
      e += *sn;
    s = std::clamp<int64_t>(s, 0, *sn);
    e = std::clamp<int64_t>(e, s, *sn);
    int64_t len = (e - s + step - 1) / step;
    // An empty slice starts at 0 (an offset == size fails verification).
    return {b.getIndexAttr(len == 0 ? 0 : s), b.getIndexAttr(len)};
  }
  using P = arith::CmpIPredicate;
  Value nv = indexValue(b, loc, n), zero = cstIndex(b, loc, 0);
  auto wrap = [&](int64_t v) -> Value {
    Value c = cstIndex(b, loc, v);
    return v < 0 ? Value(arith::AddIOp::create(b, loc, c, nv)) : c;
  };
  auto clamp = [&](Value v, Value lo) -> Value {
    Value lt = arith::CmpIOp::create(b, loc, P::slt, v, lo);
    v = arith::SelectOp::create(b, loc, lt, lo, v);
    Value gt = arith::CmpIOp::create(b, loc, P::sgt, v, nv);
    return arith::SelectOp::create(b, loc, gt, nv, v);
  };
  Value s = clamp(wrap(start), zero);
  Value e = clamp(endValue ? endValue : wrap(end), s);
  Value len = arith::SubIOp::create(b, loc, e, s);
  if (step != 1) {
    len = arith::AddIOp::create(b, loc, len, cstIndex(b, loc, step - 1));
    len = arith::DivSIOp::create(b, loc, len, cstIndex(b, loc, step));
  }
  return {s, len};
}

/// constant_pad_nd(self, pad, value): `pad` holds (before, after) amounts
/// for the last dim, then the one before it, ...; negative amounts crop
/// (tensor.extract_slice, as the backward of a padding does), positive ones
/// pad with `value` (tensor.pad).
LogicalResult lowerConstantPadNd(DLOp op, ValueRange o, PatternRewriter &rw) {
  std::optional<SmallVector<int64_t>> pad = getIntListArg(op, "pad");
  if (o.size() != 1 || op.getNumResults() != 1 || !pad || pad->size() % 2)
    return failure();
  Value x = o[0];
  RankedTensorType t = tensorType(x);
  int64_t n = pad->size() / 2, rank = t.getRank();
  if (n > rank)
    return failure();
  SmallVector<int64_t> low(n), high(n); // the trailing n dims, in order
  for (int64_t k = 0; k < n; ++k) {
    low[n - 1 - k] = (*pad)[2 * k];
    high[n - 1 - k] = (*pad)[2 * k + 1];
  }
  Location loc = op.getLoc();
  if (llvm::any_of(*pad, [](int64_t v) { return v < 0; })) {
    SmallVector<OpFoldResult> offsets(rank, rw.getIndexAttr(0));
    SmallVector<OpFoldResult> sizes = getSizes(rw, loc, x);
    SmallVector<OpFoldResult> strides(rank, rw.getIndexAttr(1));
    SmallVector<int64_t> shape(t.getShape());
    for (int64_t k = 0; k < n; ++k) {
      int64_t d = rank - n + k;
      int64_t cut =
          std::max<int64_t>(0, -low[k]) + std::max<int64_t>(0, -high[k]);
      if (!t.isDynamicDim(d) && cut > t.getDimSize(d))
        return failure(); // aten raises
      offsets[d] = rw.getIndexAttr(std::max<int64_t>(0, -low[k]));
      if (!t.isDynamicDim(d)) {
        shape[d] = t.getDimSize(d) - cut;
        sizes[d] = rw.getIndexAttr(shape[d]);
      } else if (cut) {
        sizes[d] = Value(
            arith::SubIOp::create(rw, loc, tensor::DimOp::create(rw, loc, x, d),
                                  cstIndex(rw, loc, cut)));
      }
      low[k] = std::max<int64_t>(0, low[k]);
      high[k] = std::max<int64_t>(0, high[k]);
    }
    x = tensor::ExtractSliceOp::create(rw, loc, t.clone(shape), x, offsets,
                                       sizes, strides);
  }
  Type et = t.getElementType();
  Value fill =
      scalarConstant(rw, loc, et, getFloatArg(op, "value").value_or(0));
  Value r = padTrailing(rw, loc, x, low, high, fill);
  rw.replaceOp(op, castTo(rw, loc, r, resultType(op)));
  return success();
}

LogicalResult lowerSlice(DLOp op, ValueRange o, PatternRewriter &rw) {
  if (o.size() != 1)
    return failure();
  Location loc = op.getLoc();
  Value src = o[0];
  int64_t rank = tensorType(src).getRank();
  std::optional<int64_t> dim = normDim(getIntArg(op, "dim").value_or(0), rank);
  int64_t step = getIntArg(op, "step").value_or(1);
  if (!dim || step <= 0)
    return failure();
  // A bound that is present must be an int or (the end) a symbolic size.
  DictionaryAttr args = op.getArgsAttr();
  std::optional<int64_t> startArg = getIntArg(op, "start");
  std::optional<SizeArg> endArg = getSizeArg(op, "end");
  if (args &&
      ((args.get("start") && !startArg && !isa<UnitAttr>(args.get("start"))) ||
       (args.get("end") && !endArg && !isa<UnitAttr>(args.get("end")))))
    return failure();
  int64_t start = startArg.value_or(0);
  int64_t end = endArg && !endArg->isSymbolic() ? endArg->value : INT64_MAX;
  SmallVector<OpFoldResult> sizes = getSizes(rw, loc, src);
  SmallVector<OpFoldResult> offsets(rank, rw.getIndexAttr(0));
  SmallVector<OpFoldResult> strides(rank, rw.getIndexAttr(1));
  Value endValue = endArg && endArg->isSymbolic()
                       ? sizeValue(rw, loc, *endArg, op)
                       : Value();
  std::tie(offsets[*dim], sizes[*dim]) =
      sliceBounds(rw, loc, sizes[*dim], start, end, step, endValue);
  strides[*dim] = rw.getIndexAttr(step);
  Value r = tensor::ExtractSliceOp::create(rw, loc, src, offsets, sizes,
                                           strides);
  rw.replaceOp(op, castTo(rw, loc, r, resultType(op)));
  return success();
}

/// aten.split.Tensor(self, split_size, dim) and
/// aten.split_with_sizes(self, split_sizes, dim): one extract_slice per
/// result along `dim` (split.Tensor's last piece takes what is left).
LogicalResult lowerSplit(DLOp op, ValueRange o, PatternRewriter &rw) {
  if (o.size() != 1 || op.getNumResults() == 0)
    return failure();
  Location loc = op.getLoc();
  Value src = o[0];
  int64_t rank = tensorType(src).getRank();
  std::optional<int64_t> dim = normDim(getIntArg(op, "dim").value_or(0), rank);
  if (!dim)
    return failure();
  unsigned n = op.getNumResults();
  SmallVector<int64_t> pieces;
  if (std::optional<SmallVector<int64_t>> sizes =
          getIntListArg(op, "split_sizes")) {
    pieces = *sizes;
  } else {
    std::optional<int64_t> size = getIntArg(op, "split_size");
    if (!size || *size <= 0)
      return failure();
    pieces.assign(n, *size);
  }
  if (pieces.size() != n)
    return failure();
  SmallVector<OpFoldResult> sizes = getSizes(rw, loc, src);
  OpFoldResult total = sizes[*dim];
  SmallVector<Value> results;
  int64_t offset = 0;
  for (unsigned i = 0; i < n; ++i) {
    SmallVector<OpFoldResult> offs(rank, rw.getIndexAttr(0));
    SmallVector<OpFoldResult> szs = sizes;
    SmallVector<OpFoldResult> strides(rank, rw.getIndexAttr(1));
    // The last piece of split.Tensor is what is left of the dim (smaller
    // when the size does not divide it).
    std::tie(offs[*dim], szs[*dim]) =
        sliceBounds(rw, loc, total, offset, offset + pieces[i], 1);
    Value r =
        tensor::ExtractSliceOp::create(rw, loc, src, offs, szs, strides);
    results.push_back(castTo(rw, loc, r, resultType(op, i)));
    offset += pieces[i];
  }
  rw.replaceOp(op, results);
  return success();
}

/// The (normalized, possibly run-time) position `index` on a dim of size n.
OpFoldResult wrapIndex(OpBuilder &b, Location loc, OpFoldResult n,
                       int64_t index) {
  if (index >= 0)
    return b.getIndexAttr(index);
  if (std::optional<int64_t> sn = getConstantIntValue(n))
    return b.getIndexAttr(index + *sn);
  return Value(arith::AddIOp::create(b, loc, cstIndex(b, loc, index),
                                     indexValue(b, loc, n)));
}

LogicalResult lowerSelect(DLOp op, ValueRange o, PatternRewriter &rw) {
  std::optional<int64_t> dimArg = getIntArg(op, "dim");
  std::optional<int64_t> index = getIntArg(op, "index");
  if (o.size() != 1 || !dimArg || !index)
    return failure();
  Location loc = op.getLoc();
  Value src = o[0];
  RankedTensorType t = tensorType(src);
  std::optional<int64_t> dim = normDim(*dimArg, t.getRank());
  if (!dim)
    return failure();
  int64_t n = t.getDimSize(*dim);
  if (!isDyn(n) && (*index >= n || *index < -n))
    return failure();
  SmallVector<OpFoldResult> sizes = getSizes(rw, loc, src);
  SmallVector<OpFoldResult> offsets(t.getRank(), rw.getIndexAttr(0));
  SmallVector<OpFoldResult> strides(t.getRank(), rw.getIndexAttr(1));
  offsets[*dim] = wrapIndex(rw, loc, sizes[*dim], *index);
  if (isDyn(n))
    assertInBounds(rw, loc, indexValue(rw, loc, offsets[*dim]),
                   indexValue(rw, loc, sizes[*dim]),
                   "select: index out of range");
  sizes[*dim] = rw.getIndexAttr(1);
  SmallVector<int64_t> shape(t.getShape());
  shape.erase(shape.begin() + *dim);
  Value r = tensor::ExtractSliceOp::create(rw, loc, t.clone(shape), src,
                                           offsets, sizes, strides);
  rw.replaceOp(op, castTo(rw, loc, r, resultType(op)));
  return success();
}

/// unbind.int(self, dim): one rank-reduced slice per result, result i at
/// index i along `dim` (whose size must be the number of results).
LogicalResult lowerUnbind(DLOp op, ValueRange o, PatternRewriter &rw) {
  if (o.size() != 1 || op.getNumResults() == 0)
    return failure();
  Location loc = op.getLoc();
  Value src = o[0];
  RankedTensorType t = tensorType(src);
  std::optional<int64_t> dim =
      normDim(getIntArg(op, "dim").value_or(0), t.getRank());
  if (!dim)
    return failure();
  int64_t count = op.getNumResults();
  int64_t n = t.getDimSize(*dim);
  if (!isDyn(n) && n != count)
    return failure();
  SmallVector<OpFoldResult> sizes = getSizes(rw, loc, src);
  if (isDyn(n))
    assertEqual(rw, loc, indexValue(rw, loc, sizes[*dim]),
                cstIndex(rw, loc, count),
                "unbind: the dim's size is not the number of results");
  sizes[*dim] = rw.getIndexAttr(1);
  SmallVector<OpFoldResult> strides(t.getRank(), rw.getIndexAttr(1));
  SmallVector<int64_t> shape(t.getShape());
  shape.erase(shape.begin() + *dim);
  SmallVector<Value> results;
  for (int64_t i = 0; i < count; ++i) {
    SmallVector<OpFoldResult> offsets(t.getRank(), rw.getIndexAttr(0));
    offsets[*dim] = rw.getIndexAttr(i);
    Value r = tensor::ExtractSliceOp::create(rw, loc, t.clone(shape), src,
                                             offsets, sizes, strides);
    results.push_back(castTo(rw, loc, r, resultType(op, i)));
  }
  rw.replaceOp(op, results);
  return success();
}

/// Zeros of the op's result type; dynamic dims from `like`'s dims (the
/// grad_output of a slice/select backward, without `skipDim`) or the
/// `input_sizes` arg.
Value zerosForBackward(OpBuilder &b, Location loc, DLOp op, Value like,
                       int64_t dim, bool likeHasDim) {
  RankedTensorType rt = resultType(op);
  std::optional<SmallVector<SizeArg>> inSizes =
      getSizeListArg(op, "input_sizes");
  if (dim >= 0 && dim < rt.getRank() && rt.isDynamicDim(dim) &&
      (!inSizes || int64_t(inSizes->size()) != rt.getRank() ||
       !(*inSizes)[dim].hasSize()))
    return nullptr;
  SmallVector<Value> dyn;
  for (int64_t d = 0; d < rt.getRank(); ++d) {
    if (!rt.isDynamicDim(d))
      continue;
    if (d != dim)
      dyn.push_back(tensor::DimOp::create(b, loc, like,
                                          likeHasDim || d < dim ? d : d - 1));
    else
      dyn.push_back(sizeValue(b, loc, (*inSizes)[d], op));
  }
  Value init = tensor::EmptyOp::create(b, loc, rt, dyn);
  Value zero = scalarConstant(b, loc, rt.getElementType(), 0.0);
  return linalg::FillOp::create(b, loc, zero, init).getResult(0);
}

/// `dest` with `src` inserted at slice(dim, start, end, step): the value of
/// a slice_backward (into zeros) or a slice_scatter (into its input).
Value insertAtSlice(PatternRewriter &rw, Location loc, DLOp op, Value dest,
                    Value src, int64_t dim, int64_t step) {
  int64_t rank = tensorType(dest).getRank();
  SmallVector<OpFoldResult> offsets(rank, rw.getIndexAttr(0));
  SmallVector<OpFoldResult> strides(rank, rw.getIndexAttr(1));
  SmallVector<OpFoldResult> sizes = getSizes(rw, loc, src);
  OpFoldResult n = getSizes(rw, loc, dest)[dim];
  offsets[dim] = sliceBounds(rw, loc, n, getIntArg(op, "start").value_or(0),
                             getIntArg(op, "end").value_or(INT64_MAX), step)
                     .first;
  strides[dim] = rw.getIndexAttr(step);
  return tensor::InsertSliceOp::create(rw, loc, src, dest, offsets, sizes,
                                       strides);
}

/// `dest` with `src` (one rank less) inserted at select(dim, index).
Value insertAtSelect(PatternRewriter &rw, Location loc, Value dest, Value src,
                     int64_t dim, int64_t index) {
  int64_t rank = tensorType(dest).getRank();
  SmallVector<OpFoldResult> offsets(rank, rw.getIndexAttr(0));
  SmallVector<OpFoldResult> strides(rank, rw.getIndexAttr(1));
  SmallVector<OpFoldResult> sizes = getSizes(rw, loc, dest);
  offsets[dim] = wrapIndex(rw, loc, sizes[dim], index);
  sizes = getSizes(rw, loc, src);
  sizes.insert(sizes.begin() + dim, rw.getIndexAttr(1));
  return tensor::InsertSliceOp::create(rw, loc, src, dest, offsets, sizes,
                                       strides);
}

/// An as_strided(self, size, stride, storage_offset) view of a `self` of
/// static shape (the graph's values are dense and row-major) as a block of
/// `self` reshaped: `self`'s elements row-major in `virtualShape`, whose
/// row-major strides are the view's distinct strides (each dividing the
/// one before, the largest dividing the element count), and the block of
/// it at `starts` of `sizes` (the view's dims of size > 1 in their dims,
/// 1 elsewhere, from the offset's digits), which is the view reshaped to
/// `viewShape`. Overlapping views (equal or zero strides) have no such
/// form. Autograd's CopySlices and as_strided backward make such views of
/// slices and selects (tracing.py `_functionalize`).
struct Block {
  SmallVector<int64_t> virtualShape, starts, sizes, viewShape;
};

/// An as_strided view's args over a `self` of static shape, or nullopt.
struct AsStridedArgs {
  SmallVector<int64_t> sizes, strides;
  int64_t offset;

  static std::optional<AsStridedArgs> of(RankedTensorType self, DLOp op) {
    std::optional<SmallVector<int64_t>> sizes = getIntListArg(op, "size");
    std::optional<SmallVector<int64_t>> strides = getIntListArg(op, "stride");
    int64_t offset = getIntArg(op, "storage_offset").value_or(0);
    if (!self.hasStaticShape() || !sizes || !strides ||
        sizes->size() != strides->size() || offset < 0)
      return std::nullopt;
    return AsStridedArgs{*sizes, *strides, offset};
  }
};

std::optional<Block> asStridedBlock(RankedTensorType self, DLOp op) {
  std::optional<AsStridedArgs> a = AsStridedArgs::of(self, op);
  if (!a)
    return std::nullopt;
  const SmallVector<int64_t> &sizes = a->sizes, &strides = a->strides;
  int64_t offset = a->offset;
  int64_t count = self.getNumElements();
  SmallVector<int64_t> distinct;
  for (auto [n, stride] : llvm::zip(sizes, strides)) {
    if (n < 0 || (n > 1 && stride <= 0))
      return std::nullopt;
    if (n > 1)
      distinct.push_back(stride);
  }
  llvm::sort(distinct, std::greater<int64_t>());
  if (std::adjacent_find(distinct.begin(), distinct.end()) != distinct.end())
    return std::nullopt; // two dims with one stride overlap
  if (distinct.empty() || distinct.back() != 1)
    distinct.push_back(1);
  if (count % distinct.front() != 0)
    return std::nullopt;
  Block b;
  b.virtualShape.push_back(count / distinct.front());
  for (size_t i = 1; i < distinct.size(); ++i) {
    if (distinct[i - 1] % distinct[i] != 0)
      return std::nullopt;
    b.virtualShape.push_back(distinct[i - 1] / distinct[i]);
  }
  int64_t rank = b.virtualShape.size();
  // The virtual dims' row-major strides are `distinct`.
  b.sizes.assign(rank, 1);
  b.starts.assign(rank, 0);
  b.viewShape = sizes;
  for (auto [n, stride] : llvm::zip(sizes, strides))
    if (n > 1)
      b.sizes[llvm::find(distinct, stride) - distinct.begin()] = n;
  int64_t rest = offset;
  for (int64_t d = 0; d < rank; ++d) {
    b.starts[d] = rest / distinct[d];
    rest %= distinct[d];
    if (b.starts[d] + b.sizes[d] > b.virtualShape[d])
      return std::nullopt;
  }
  if (rest != 0)
    return std::nullopt;
  // The view's dims must come in the order of their strides (a permuted
  // view is not a reshape of the block).
  int64_t last = INT64_MAX;
  for (auto [n, stride] : llvm::zip(sizes, strides)) {
    if (n <= 1)
      continue;
    if (stride >= last)
      return std::nullopt;
    last = stride;
  }
  return b;
}

SmallVector<OpFoldResult> indexAttrs(PatternRewriter &rw,
                                     ArrayRef<int64_t> values) {
  SmallVector<OpFoldResult> out;
  for (int64_t v : values)
    out.push_back(rw.getIndexAttr(v));
  return out;
}

/// `v` (static shape) reshaped row-major to `shape`, or null.
Value reshapeStatic(PatternRewriter &rw, Location loc, Value v,
                    ArrayRef<int64_t> shape) {
  RankedTensorType t = tensorType(v);
  RankedTensorType to = t.clone(shape);
  if (t.getShape() == shape)
    return v;
  std::optional<ReshapePlan> plan = planReshape(t.getShape(), shape);
  if (!plan)
    return nullptr;
  return emitReshape(rw, loc, v, to, *plan);
}

/// Replaces `op` with `r` reshaped row-major to `shape` (the view's or the
/// value's), or fails when no static reshape exists.
LogicalResult replaceReshaped(PatternRewriter &rw, DLOp op, Value r,
                              ArrayRef<int64_t> shape) {
  r = reshapeStatic(rw, op.getLoc(), r, shape);
  if (!r)
    return failure();
  rw.replaceOp(op, castTo(rw, op.getLoc(), r, resultType(op)));
  return success();
}

/// The diagonal of `dim1` and `dim2` at `offset` (diagonal, its backward
/// and diagonal_scatter): element i of the diagonal is (dim1, dim2) =
/// (i + rowStart, i + colStart); the diagonal's dim comes last, after the
/// other dims in order.
struct Diagonal {
  int64_t dim1, dim2, rowStart, colStart;
  SmallVector<int64_t> others; // the dims of the input that stay

  static std::optional<Diagonal> of(DLOp op, int64_t rank) {
    std::optional<int64_t> d1 =
        normDim(getIntArg(op, "dim1").value_or(0), rank);
    std::optional<int64_t> d2 =
        normDim(getIntArg(op, "dim2").value_or(1), rank);
    if (rank < 2 || !d1 || !d2 || *d1 == *d2)
      return std::nullopt;
    int64_t offset = getIntArg(op, "offset").value_or(0);
    Diagonal d{*d1,
               *d2,
               std::max<int64_t>(0, -offset),
               std::max<int64_t>(0, offset),
               {}};
    for (int64_t i = 0; i < rank; ++i)
      if (i != d.dim1 && i != d.dim2)
        d.others.push_back(i);
    return d;
  }

  /// The diagonal's length: max(0, min(n1 - rowStart, n2 - colStart)).
  Value length(OpBuilder &b, Location loc, Value input) const {
    auto sub = [&](int64_t d, int64_t start) {
      Value n = tensor::DimOp::create(b, loc, input, d);
      return arith::SubIOp::create(b, loc, n, cstIndex(b, loc, start));
    };
    Value len = arith::MinSIOp::create(b, loc, sub(dim1, rowStart),
                                       sub(dim2, colStart));
    return arith::MaxSIOp::create(b, loc, len, cstIndex(b, loc, 0));
  }
};

/// An empty diagonal (an offset past the last row or column): no elements,
/// and no slice (its start would be out of bounds).
Value emptyDiagonal(OpBuilder &b, Location loc, RankedTensorType rt,
                    Value input, const Diagonal &d) {
  SmallVector<Value> dyn;
  for (int64_t i = 0; i + 1 < rt.getRank(); ++i)
    if (rt.isDynamicDim(i))
      dyn.push_back(tensor::DimOp::create(b, loc, input, d.others[i]));
  return tensor::EmptyOp::create(b, loc, rt, dyn);
}

/// diagonal(self, offset, dim1, dim2): a gather through an affine map.
LogicalResult lowerDiagonal(DLOp op, ValueRange o, PatternRewriter &rw) {
  if (o.size() != 1)
    return failure();
  RankedTensorType in = tensorType(o[0]), rt = resultType(op);
  std::optional<Diagonal> d = Diagonal::of(op, in.getRank());
  if (!d || rt.getRank() != in.getRank() - 1 ||
      rt.getElementType() != in.getElementType())
    return failure();
  Location loc = op.getLoc();
  int64_t r = rt.getRank();
  if (!rt.isDynamicDim(r - 1) && rt.getDimSize(r - 1) == 0) {
    rw.replaceOp(op, emptyDiagonal(rw, loc, rt, o[0], *d));
    return success();
  }
  // The square block the diagonal crosses, then its (i, i) elements: an
  // affine map with the start as a constant term fails linalg's static
  // shape check when the diagonal ends at the last row or column.
  int64_t rank = in.getRank();
  SmallVector<OpFoldResult> offsets(rank, rw.getIndexAttr(0));
  SmallVector<OpFoldResult> strides(rank, rw.getIndexAttr(1));
  SmallVector<OpFoldResult> sizes = getSizes(rw, loc, o[0]);
  OpFoldResult len = rt.isDynamicDim(r - 1)
                         ? OpFoldResult(d->length(rw, loc, o[0]))
                         : OpFoldResult(rw.getIndexAttr(rt.getDimSize(r - 1)));
  // A start past the end (an empty diagonal) is clamped to it.
  auto start = [&](int64_t dim, int64_t s) -> OpFoldResult {
    if (!in.isDynamicDim(dim))
      return rw.getIndexAttr(std::min(s, in.getDimSize(dim)));
    return Value(
        arith::MinSIOp::create(rw, loc, cstIndex(rw, loc, s),
                               tensor::DimOp::create(rw, loc, o[0], dim)));
  };
  offsets[d->dim1] = start(d->dim1, d->rowStart);
  offsets[d->dim2] = start(d->dim2, d->colStart);
  sizes[d->dim1] = sizes[d->dim2] = len;
  Value block =
      tensor::ExtractSliceOp::create(rw, loc, o[0], offsets, sizes, strides);
  SmallVector<AffineExpr> exprs(rank);
  for (auto [i, dim] : llvm::enumerate(d->others))
    exprs[dim] = rw.getAffineDimExpr(i);
  exprs[d->dim1] = exprs[d->dim2] = rw.getAffineDimExpr(r - 1);
  SmallVector<Value> dyn;
  for (int64_t i = 0; i < r; ++i)
    if (rt.isDynamicDim(i))
      dyn.push_back(
          i + 1 < r ? Value(tensor::DimOp::create(rw, loc, o[0], d->others[i]))
                    : getValueOrCreateConstantIndexOp(rw, loc, len));
  rw.replaceOp(op, gatherByMap(rw, loc, rt, dyn, block, exprs));
  return success();
}

/// `dest` with its diagonal replaced by `src` (one rank less, the diagonal
/// last): each element on the diagonal reads `src`, the others `dest`.
Value insertAtDiagonal(OpBuilder &b, Location loc, Value dest, Value src,
                       const Diagonal &d) {
  RankedTensorType rt = tensorType(dest);
  int64_t rank = rt.getRank();
  SmallVector<Value> dyn;
  for (int64_t i = 0; i < rank; ++i)
    if (rt.isDynamicDim(i))
      dyn.push_back(tensor::DimOp::create(b, loc, dest, i));
  Value init = tensor::EmptyOp::create(b, loc, rt, dyn);
  SmallVector<AffineMap> maps(2, b.getMultiDimIdentityMap(rank));
  SmallVector<utils::IteratorType> iters(rank, utils::IteratorType::parallel);
  auto g = linalg::GenericOp::create(
      b, loc, rt, dest, init, maps, iters,
      [&](OpBuilder &nb, Location l, ValueRange a) {
        Value row = linalg::IndexOp::create(nb, l, d.dim1);
        Value col = linalg::IndexOp::create(nb, l, d.dim2);
        // On the diagonal: col - row == colStart - rowStart.
        Value onDiag =
            arith::CmpIOp::create(nb, l, arith::CmpIPredicate::eq,
                                  arith::SubIOp::create(nb, l, col, row),
                                  cstIndex(nb, l, d.colStart - d.rowStart));
        // (linalg.index must be the generic's own op, not the if's.)
        SmallVector<Value> at;
        for (int64_t dim : d.others)
          at.push_back(linalg::IndexOp::create(nb, l, dim));
        auto pick = scf::IfOp::create(
            nb, l, onDiag,
            [&](OpBuilder &tb, Location tl) {
              at.push_back(arith::SubIOp::create(tb, tl, row,
                                                 cstIndex(tb, tl, d.rowStart)));
              Value v = tensor::ExtractOp::create(tb, tl, src, at);
              scf::YieldOp::create(tb, tl, v);
            },
            [&](OpBuilder &eb, Location el) {
              scf::YieldOp::create(eb, el, a[0]);
            });
        linalg::YieldOp::create(nb, l, pick.getResult(0));
      });
  return g.getResult(0);
}

/// An as_strided view that is a run of a diagonal of `self` seen as a
/// row-major [rows, cols] matrix: one dim of size len > 1 and stride
/// cols + 1 (the others of size 1), from (row0, col0) = divmod(offset,
/// cols). Autograd's CopySlices makes these for a write through a
/// diagonal (the gradient's elements of `m.diagonal()`).
struct DiagonalRun {
  int64_t rows, cols, row0, col0, len;
  SmallVector<int64_t> viewShape;
};

std::optional<DiagonalRun> asStridedDiagonal(RankedTensorType self, DLOp op) {
  std::optional<AsStridedArgs> a = AsStridedArgs::of(self, op);
  if (!a)
    return std::nullopt;
  int64_t offset = a->offset;
  DiagonalRun run{0, 0, 0, 0, 0, a->sizes};
  int64_t stride = 0;
  for (auto [n, st] : llvm::zip(a->sizes, a->strides)) {
    if (n < 0 || (n > 1 && run.len))
      return std::nullopt;
    if (n > 1) {
      run.len = n;
      stride = st;
    }
  }
  int64_t count = self.getNumElements();
  if (!run.len || stride < 2 || count % (stride - 1) != 0)
    return std::nullopt;
  run.cols = stride - 1;
  run.rows = count / run.cols;
  run.row0 = offset / run.cols;
  run.col0 = offset % run.cols;
  if (run.row0 + run.len > run.rows || run.col0 + run.len > run.cols)
    return std::nullopt;
  return run;
}

/// The [len, len] block of `self` (reshaped to [rows, cols]) whose
/// diagonal the run is, or null.
Value diagonalRunBlock(PatternRewriter &rw, Location loc, Value self,
                       const DiagonalRun &run, Value &matrix) {
  matrix = reshapeStatic(rw, loc, self, {run.rows, run.cols});
  if (!matrix)
    return nullptr;
  return tensor::ExtractSliceOp::create(
      rw, loc, matrix, indexAttrs(rw, {run.row0, run.col0}),
      indexAttrs(rw, {run.len, run.len}), indexAttrs(rw, {1, 1}));
}

/// as_strided as a diagonal run (asStridedDiagonal).
LogicalResult lowerAsStridedDiagonal(DLOp op, ValueRange o,
                                     PatternRewriter &rw) {
  std::optional<DiagonalRun> run = asStridedDiagonal(tensorType(o[0]), op);
  if (!run)
    return failure();
  Location loc = op.getLoc();
  Value matrix;
  Value block = diagonalRunBlock(rw, loc, o[0], *run, matrix);
  if (!block)
    return failure();
  AffineExpr i = rw.getAffineDimExpr(0);
  RankedTensorType diagT =
      RankedTensorType::get({run->len}, tensorType(o[0]).getElementType());
  Value diag = gatherByMap(rw, loc, diagT, {}, block, {i, i});
  return replaceReshaped(rw, op, diag, run->viewShape);
}

/// as_strided_scatter into a diagonal run.
LogicalResult lowerAsStridedScatterDiagonal(DLOp op, ValueRange o,
                                            PatternRewriter &rw) {
  RankedTensorType selfT = tensorType(o[0]);
  std::optional<DiagonalRun> run = asStridedDiagonal(selfT, op);
  if (!run || tensorType(o[1]).getRank() != int64_t(run->viewShape.size()))
    return failure();
  Location loc = op.getLoc();
  Value matrix;
  Value block = diagonalRunBlock(rw, loc, o[0], *run, matrix);
  Value src = castTo(rw, loc, o[1], tensorType(o[1]).clone(run->viewShape));
  src = reshapeStatic(rw, loc, src, {run->len});
  if (!block || !src)
    return failure();
  Value written =
      insertAtDiagonal(rw, loc, block, src, Diagonal{0, 1, 0, 0, {}});
  Value r = tensor::InsertSliceOp::create(
      rw, loc, written, matrix, indexAttrs(rw, {run->row0, run->col0}),
      indexAttrs(rw, {run->len, run->len}), indexAttrs(rw, {1, 1}));
  return replaceReshaped(rw, op, r, selfT.getShape());
}

/// diagonal_scatter(self, src, offset, dim1, dim2).
LogicalResult lowerDiagonalScatter(DLOp op, ValueRange o, PatternRewriter &rw) {
  if (o.size() != 2)
    return failure();
  RankedTensorType self = tensorType(o[0]), src = tensorType(o[1]);
  std::optional<Diagonal> d = Diagonal::of(op, self.getRank());
  if (!d || src.getRank() != self.getRank() - 1 ||
      src.getElementType() != self.getElementType())
    return failure();
  Value r = insertAtDiagonal(rw, op.getLoc(), o[0], o[1], *d);
  rw.replaceOp(op, castTo(rw, op.getLoc(), r, resultType(op)));
  return success();
}

/// diagonal_backward(grad, input_sizes, offset, dim1, dim2): the gradient
/// on the diagonal of zeros of the input's sizes (static sizes only).
LogicalResult lowerDiagonalBackward(DLOp op, ValueRange o,
                                    PatternRewriter &rw) {
  RankedTensorType rt = resultType(op);
  if (o.size() != 1 || !rt.hasStaticShape())
    return failure();
  std::optional<Diagonal> d = Diagonal::of(op, rt.getRank());
  RankedTensorType grad = tensorType(o[0]);
  if (!d || grad.getRank() != rt.getRank() - 1 ||
      grad.getElementType() != rt.getElementType())
    return failure();
  Location loc = op.getLoc();
  Value zeros = zerosForBackward(rw, loc, op, o[0], /*dim=*/-1, true);
  rw.replaceOp(op, insertAtDiagonal(rw, loc, zeros, o[0], *d));
  return success();
}

/// as_strided(self, size, stride, storage_offset): a block of self
/// reshaped (asStridedBlock), else a run of a diagonal
/// (asStridedDiagonal).
LogicalResult lowerAsStrided(DLOp op, ValueRange o, PatternRewriter &rw) {
  if (o.size() != 1)
    return failure();
  std::optional<Block> b = asStridedBlock(tensorType(o[0]), op);
  if (!b)
    return lowerAsStridedDiagonal(op, o, rw);
  Location loc = op.getLoc();
  Value self = reshapeStatic(rw, loc, o[0], b->virtualShape);
  if (!self)
    return failure();
  SmallVector<int64_t> ones(b->sizes.size(), 1);
  Value block = tensor::ExtractSliceOp::create(
      rw, loc, self, indexAttrs(rw, b->starts), indexAttrs(rw, b->sizes),
      indexAttrs(rw, ones));
  return replaceReshaped(rw, op, block, b->viewShape);
}

/// as_strided_scatter(self, src, size, stride, storage_offset): self with
/// the elements of the view replaced by src.
LogicalResult lowerAsStridedScatter(DLOp op, ValueRange o,
                                    PatternRewriter &rw) {
  if (o.size() != 2 ||
      tensorType(o[1]).getElementType() != tensorType(o[0]).getElementType())
    return failure();
  RankedTensorType selfT = tensorType(o[0]);
  std::optional<Block> b = asStridedBlock(selfT, op);
  if (!b)
    return lowerAsStridedScatterDiagonal(op, o, rw);
  if (tensorType(o[1]).getRank() != int64_t(b->viewShape.size()))
    return failure();
  Location loc = op.getLoc();
  Value self = reshapeStatic(rw, loc, o[0], b->virtualShape);
  Value src = castTo(rw, loc, o[1], tensorType(o[1]).clone(b->viewShape));
  src = reshapeStatic(rw, loc, src, b->sizes);
  if (!self || !src)
    return failure();
  SmallVector<int64_t> ones(b->sizes.size(), 1);
  Value r = tensor::InsertSliceOp::create(
      rw, loc, src, self, indexAttrs(rw, b->starts), indexAttrs(rw, b->sizes),
      indexAttrs(rw, ones));
  return replaceReshaped(rw, op, r, selfT.getShape());
}

/// The destination of a slice or select insert: for `Backward` (the
/// gradient of a slice or select) zeros of the input's sizes, else (a
/// slice_scatter / select_scatter: the recorder's functional form of an
/// in-place write through the view, tracing.py `_functionalize`) `self`;
/// null when `src` cannot go into it.
template <bool Backward>
Value insertDestination(PatternRewriter &rw, DLOp op, ValueRange o, int64_t dim,
                        bool srcHasDim) {
  Value src = o.back();
  Value dest = Backward
                   ? zerosForBackward(rw, op.getLoc(), op, src, dim, srcHasDim)
                   : o[0];
  if (!dest ||
      tensorType(src).getElementType() != tensorType(dest).getElementType())
    return nullptr;
  return dest;
}

/// slice_backward(grad, input_sizes, dim, start, end, step) and
/// slice_scatter(self, src, dim, start, end, step): `src` inserted at the
/// slice.
template <bool Backward>
LogicalResult lowerSliceInsert(DLOp op, ValueRange o, PatternRewriter &rw) {
  if (o.size() != (Backward ? 1u : 2u))
    return failure();
  int64_t rank = resultType(op).getRank();
  std::optional<int64_t> dim = normDim(getIntArg(op, "dim").value_or(0), rank);
  int64_t step = getIntArg(op, "step").value_or(1);
  if (!dim || step <= 0 || tensorType(o.back()).getRank() != rank)
    return failure();
  Value dest = insertDestination<Backward>(rw, op, o, *dim, true);
  if (!dest)
    return failure();
  Value r = insertAtSlice(rw, op.getLoc(), op, dest, o.back(), *dim, step);
  rw.replaceOp(op, castTo(rw, op.getLoc(), r, resultType(op)));
  return success();
}

/// select_backward(grad, input_sizes, dim, index) and select_scatter(self,
/// src, dim, index): `src` (one rank less) inserted at the selected index.
template <bool Backward>
LogicalResult lowerSelectInsert(DLOp op, ValueRange o, PatternRewriter &rw) {
  std::optional<int64_t> index = getIntArg(op, "index");
  if (o.size() != (Backward ? 1u : 2u) || !index)
    return failure();
  int64_t rank = resultType(op).getRank();
  std::optional<int64_t> dim = normDim(getIntArg(op, "dim").value_or(0), rank);
  if (!dim || tensorType(o.back()).getRank() != rank - 1)
    return failure();
  Value dest = insertDestination<Backward>(rw, op, o, *dim, false);
  if (!dest)
    return failure();
  Value r = insertAtSelect(rw, op.getLoc(), dest, o.back(), *dim, *index);
  rw.replaceOp(op, castTo(rw, op.getLoc(), r, resultType(op)));
  return success();
}

//===----------------------------------------------------------------------===//
// Concatenation
//===----------------------------------------------------------------------===//

LogicalResult lowerCat(DLOp op, ValueRange o, PatternRewriter &rw) {
  if (o.empty())
    return failure();
  Location loc = op.getLoc();
  RankedTensorType rt = resultType(op);
  int64_t rank = rt.getRank();
  std::optional<int64_t> dim = normDim(getIntArg(op, "dim").value_or(0), rank);
  if (!dim)
    return failure();
  // PyTorch skips legacy empty 1-d inputs when concatenating higher ranks.
  SmallVector<Value> ins;
  for (Value v : o) {
    RankedTensorType t = tensorType(v);
    if (t.getRank() == 1 && t.getDimSize(0) == 0 && rank != 1)
      continue;
    if (t.getRank() != rank)
      return failure();
    ins.push_back(convertElements(rw, loc, v, rt.getElementType()));
  }
  if (ins.empty())
    return failure();
  // Guard the non-concatenated dims that types cannot prove equal.
  SmallVector<OpFoldResult> first = getSizes(rw, loc, ins[0]);
  for (Value v : llvm::drop_begin(ins))
    for (int64_t d = 0; d < rank; ++d)
      if (d != *dim && (tensorType(v).isDynamicDim(d) ||
                        tensorType(ins[0]).isDynamicDim(d)))
        assertEqual(rw, loc, tensor::DimOp::create(rw, loc, v, d),
                    indexValue(rw, loc, first[d]),
                    "cat: sizes of tensors must match except in the "
                    "concatenated dimension");
  SmallVector<OpFoldResult> offsets(ins.size() + 1, rw.getIndexAttr(0));
  for (auto [i, v] : llvm::enumerate(ins)) {
    OpFoldResult n = getSizes(rw, loc, v)[*dim];
    std::optional<int64_t> a = getConstantIntValue(offsets[i]);
    std::optional<int64_t> c = getConstantIntValue(n);
    offsets[i + 1] = a && c ? OpFoldResult(rw.getIndexAttr(*a + *c))
                            : OpFoldResult(arith::AddIOp::create(
                                  rw, loc, indexValue(rw, loc, offsets[i]),
                                  indexValue(rw, loc, n)));
  }
  SmallVector<OpFoldResult> sizes = first;
  sizes[*dim] = offsets.back();
  Value acc = tensor::EmptyOp::create(rw, loc, sizes, rt.getElementType());
  SmallVector<OpFoldResult> strides(rank, rw.getIndexAttr(1));
  for (auto [i, v] : llvm::enumerate(ins)) {
    SmallVector<OpFoldResult> offs(rank, rw.getIndexAttr(0));
    offs[*dim] = offsets[i];
    acc = tensor::InsertSliceOp::create(rw, loc, v, acc, offs,
                                        getSizes(rw, loc, v), strides);
  }
  rw.replaceOp(op, castTo(rw, loc, acc, rt));
  return success();
}

LogicalResult lowerStack(DLOp op, ValueRange o, PatternRewriter &rw) {
  if (o.empty())
    return failure();
  Location loc = op.getLoc();
  RankedTensorType rt = resultType(op);
  int64_t rank = rt.getRank();
  std::optional<int64_t> dim = normDim(getIntArg(op, "dim").value_or(0), rank);
  if (!dim)
    return failure();
  SmallVector<Value> ins;
  for (Value v : o) {
    if (tensorType(v).getRank() != rank - 1)
      return failure();
    ins.push_back(convertElements(rw, loc, v, rt.getElementType()));
  }
  SmallVector<OpFoldResult> first = getSizes(rw, loc, ins[0]);
  for (Value v : llvm::drop_begin(ins))
    for (int64_t d = 0; d < rank - 1; ++d)
      if (tensorType(v).isDynamicDim(d) || tensorType(ins[0]).isDynamicDim(d))
        assertEqual(rw, loc, tensor::DimOp::create(rw, loc, v, d),
                    indexValue(rw, loc, first[d]),
                    "stack expects each tensor to be equal size");
  SmallVector<OpFoldResult> sizes = first;
  sizes.insert(sizes.begin() + *dim, rw.getIndexAttr(ins.size()));
  Value acc = tensor::EmptyOp::create(rw, loc, sizes, rt.getElementType());
  SmallVector<OpFoldResult> strides(rank, rw.getIndexAttr(1));
  for (auto [i, v] : llvm::enumerate(ins)) {
    SmallVector<OpFoldResult> offs(rank, rw.getIndexAttr(0));
    offs[*dim] = rw.getIndexAttr(i);
    SmallVector<OpFoldResult> sz = getSizes(rw, loc, v);
    sz.insert(sz.begin() + *dim, rw.getIndexAttr(1));
    acc = tensor::InsertSliceOp::create(rw, loc, v, acc, offs, sz, strides);
  }
  rw.replaceOp(op, castTo(rw, loc, acc, rt));
  return success();
}

//===----------------------------------------------------------------------===//
// Gathers
//===----------------------------------------------------------------------===//

/// A linalg.generic over `rt` (dynamic sizes `dyn`) reading `index` through
/// `indexMap`; the body gets the index element (as `index`) and the
/// iteration coordinates and returns the element to yield.
using GatherBody = std::function<Value(OpBuilder &, Location, Value,
                                       SmallVector<Value> &)>;

Value buildGather(OpBuilder &b, Location loc, RankedTensorType rt,
                  ValueRange dyn, Value index, AffineMap indexMap,
                  const GatherBody &body) {
  int64_t r = rt.getRank();
  Value init = tensor::EmptyOp::create(b, loc, rt, dyn);
  SmallVector<AffineMap> maps = {indexMap, b.getMultiDimIdentityMap(r)};
  SmallVector<utils::IteratorType> iters(r, utils::IteratorType::parallel);
  auto g = linalg::GenericOp::create(
      b, loc, rt, index, init, maps, iters,
      [&](OpBuilder &nb, Location l, ValueRange a) {
        SmallVector<Value> coords;
        for (int64_t d = 0; d < r; ++d)
          coords.push_back(linalg::IndexOp::create(nb, l, d));
        Value v = body(nb, l, toIndex(nb, l, a[0]), coords);
        linalg::YieldOp::create(nb, l, v);
      });
  return g.getResult(0);
}

/// Integer index tensors of advanced indexing (aten.index.Tensor /
/// index_put): not bool or uint8 masks, whose result sizes depend on their
/// values (the tracer shapes `x[mask]` from the mask it read; such ops
/// stay on the host).
bool isPositionIndex(Value v) {
  Type et = tensorType(v).getElementType();
  return isa<IntegerType>(et) && !et.isInteger(1) && !et.isUnsignedInteger(8) &&
         !et.isInteger(8);
}

/// An advanced index `i` into a dim of size `n`, wrapped like aten
/// (negative counts from the end) and checked.
Value wrapPosition(OpBuilder &b, Location l, Value i, Value n, StringRef msg) {
  Value neg = arith::CmpIOp::create(b, l, arith::CmpIPredicate::slt, i,
                                    cstIndex(b, l, 0));
  i = arith::SelectOp::create(b, l, neg, arith::AddIOp::create(b, l, i, n), i);
  assertInBounds(b, l, i, n, msg);
  return i;
}

/// A boolean (or uint8) mask index.
bool isMaskIndex(Value v) {
  Type et = tensorType(v).getElementType();
  return et.isInteger(1) || et.isUnsignedInteger(8) || et.isInteger(8);
}

/// `v` of rank n as rows (P, R): P merges dims [0, m), R dims [m, n) (R = 1
/// when m == n).
Value asRows(OpBuilder &b, Location loc, Value v, int64_t m) {
  RankedTensorType t = tensorType(v);
  int64_t n = t.getRank();
  if (m == n) {
    Value flat =
        n == 1 ? v
               : Value(tensor::CollapseShapeOp::create(
                     b, loc, v, SmallVector<ReassociationIndices>{iota(0, n)}));
    RankedTensorType ft = tensorType(flat);
    SmallVector<OpFoldResult> sizes = getSizes(b, loc, flat);
    sizes.push_back(b.getIndexAttr(1));
    return tensor::ExpandShapeOp::create(
        b, loc,
        RankedTensorType::get({ft.getDimSize(0), 1}, t.getElementType()), flat,
        SmallVector<ReassociationIndices>{{0, 1}}, sizes);
  }
  return tensor::CollapseShapeOp::create(
      b, loc, v, SmallVector<ReassociationIndices>{iota(0, m), iota(m, n)});
}

/// The mask `mask` (rank m) as a flat i1 vector over self's first m dims,
/// guarded to match them.
Value flatMask(OpBuilder &b, Location loc, Value mask, Value self) {
  RankedTensorType mt = tensorType(mask);
  for (int64_t d = 0; d < mt.getRank(); ++d)
    if (mt.isDynamicDim(d) || tensorType(self).isDynamicDim(d))
      assertEqual(b, loc, tensor::DimOp::create(b, loc, mask, d),
                  tensor::DimOp::create(b, loc, self, d),
                  "index: the mask's shape does not match the indexed dims");
  if (mt.getRank() == 1)
    return mask;
  return tensor::CollapseShapeOp::create(
      b, loc, mask, SmallVector<ReassociationIndices>{iota(0, mt.getRank())});
}

/// mask[i] as i1.
Value maskAt(OpBuilder &b, Location l, Value mask, Value i) {
  Value e = tensor::ExtractOp::create(b, l, mask, i);
  if (e.getType().isInteger(1))
    return e;
  return arith::CmpIOp::create(
      b, l, arith::CmpIPredicate::ne, e,
      arith::ConstantOp::create(b, l, b.getIntegerAttr(e.getType(), 0)));
}

/// Visits the true elements of a flat mask in order: a loop over its
/// positions carrying (out, count) from (init, 0); at a true position i,
/// `visit(b, l, i, out, count)` returns the new out and count goes up by
/// one. Returns the final (out, count).
using MaskVisit =
    llvm::function_ref<Value(OpBuilder &, Location, Value, Value, Value)>;
std::pair<Value, Value> forEachTrue(OpBuilder &b, Location loc, Value flat,
                                    Value init, MaskVisit visit) {
  Value zero = cstIndex(b, loc, 0), one = cstIndex(b, loc, 1);
  Value n = tensor::DimOp::create(b, loc, flat, 0);
  auto loop = scf::ForOp::create(
      b, loc, zero, n, one, ValueRange{init, zero},
      [&](OpBuilder &fb, Location l, Value iv, ValueRange it) {
        auto step = scf::IfOp::create(
            fb, l, maskAt(fb, l, flat, iv),
            [&](OpBuilder &tb, Location tl) {
              Value out = visit(tb, tl, iv, it[0], it[1]);
              scf::YieldOp::create(
                  tb, tl,
                  ValueRange{out, arith::AddIOp::create(tb, tl, it[1], one)});
            },
            [&](OpBuilder &eb, Location el) {
              scf::YieldOp::create(eb, el, ValueRange{it[0], it[1]});
            });
        scf::YieldOp::create(fb, l, step.getResults());
      });
  return {loop.getResult(0), loop.getResult(1)};
}

/// Whether the static shapes of `mask` and self's leading dims agree.
bool maskFits(Value mask, Value self) {
  RankedTensorType mt = tensorType(mask), st = tensorType(self);
  if (mt.getRank() < 1 || mt.getRank() > st.getRank())
    return false;
  for (int64_t d = 0; d < mt.getRank(); ++d)
    if (!isDyn(mt.getDimSize(d)) && !isDyn(st.getDimSize(d)) &&
        mt.getDimSize(d) != st.getDimSize(d))
      return false;
  return true;
}

/// self[mask] (aten.index.Tensor with one boolean mask over self's first m
/// dims): the rows of self where the mask is true, in order, as (count,
/// rest...). A first loop counts them (the result's size), a second copies
/// them; a graph traced with another count fails its shape guard at run
/// time (a deviation, after which the size is relaxed).
LogicalResult lowerMaskedIndex(DLOp op, ValueRange o, PatternRewriter &rw) {
  Value self = o[0], mask = o[1];
  RankedTensorType st = tensorType(self), rt = resultType(op);
  int64_t m = tensorType(mask).getRank(), n = st.getRank();
  if (!maskFits(mask, self) || rt.getRank() != 1 + n - m)
    return failure();
  Location loc = op.getLoc();
  Value flat = flatMask(rw, loc, mask, self);
  Value rows = asRows(rw, loc, self, m);
  RankedTensorType rowsT = tensorType(rows);
  Value zero = cstIndex(rw, loc, 0), one = cstIndex(rw, loc, 1);
  Value p = tensor::DimOp::create(rw, loc, flat, 0);
  Value count =
      scf::ForOp::create(rw, loc, zero, p, one, ValueRange{zero},
                         [&](OpBuilder &b, Location l, Value iv, ValueRange c) {
                           Value next = arith::AddIOp::create(b, l, c[0], one);
                           scf::YieldOp::create(
                               b, l,
                               Value(arith::SelectOp::create(
                                   b, l, maskAt(b, l, flat, iv), next, c[0])));
                         })
          .getResult(0);
  OpFoldResult r = getSizes(rw, loc, rows)[1];
  SmallVector<Value> dyn = {count};
  if (rowsT.isDynamicDim(1))
    dyn.push_back(tensor::DimOp::create(rw, loc, rows, 1));
  auto outT = RankedTensorType::get({ShapedType::kDynamic, rowsT.getDimSize(1)},
                                    st.getElementType());
  auto rowT = RankedTensorType::get({rowsT.getDimSize(1)}, st.getElementType());
  Value init = tensor::EmptyOp::create(rw, loc, outT, dyn);
  SmallVector<OpFoldResult> ones = {rw.getIndexAttr(1), rw.getIndexAttr(1)};
  Value out =
      forEachTrue(
          rw, loc, flat, init,
          [&](OpBuilder &tb, Location tl, Value i, Value acc,
              Value c) -> Value {
            SmallVector<OpFoldResult> sz = {tb.getIndexAttr(1), r};
            Value row = tensor::ExtractSliceOp::create(
                tb, tl, rowT, rows,
                SmallVector<OpFoldResult>{i, tb.getIndexAttr(0)}, sz, ones);
            return tensor::InsertSliceOp::create(
                tb, tl, row, acc,
                SmallVector<OpFoldResult>{c, tb.getIndexAttr(0)}, sz, ones);
          })
          .first;
  // (count, R) back to (count, rest...).
  if (n == m) {
    out = tensor::CollapseShapeOp::create(
        rw, loc, out, SmallVector<ReassociationIndices>{{0, 1}});
  } else if (n - m > 1) {
    SmallVector<OpFoldResult> sizes = {count};
    SmallVector<int64_t> shape = {ShapedType::kDynamic};
    SmallVector<OpFoldResult> ss = getSizes(rw, loc, self);
    for (int64_t d = m; d < n; ++d) {
      sizes.push_back(ss[d]);
      shape.push_back(st.getDimSize(d));
    }
    out = tensor::ExpandShapeOp::create(
        rw, loc, RankedTensorType::get(shape, st.getElementType()), out,
        SmallVector<ReassociationIndices>{{0}, iota(1, 1 + n - m)}, sizes);
  }
  rw.replaceOp(op, castWithGuards(rw, loc, out, rt));
  return success();
}

/// index_put(self, [mask], values, accumulate) with one boolean mask over
/// self's first m dims: a copy of self whose masked rows, in order, take
/// (or, accumulating, add) the rows of values (count, rest...) or a 0-d
/// value. The number of true elements must be values' row count.
LogicalResult lowerMaskedIndexPut(DLOp op, ValueRange o, PatternRewriter &rw) {
  Value self = o[0], mask = o[1], values = o[2];
  RankedTensorType st = tensorType(self), vt = tensorType(values);
  Type et = st.getElementType();
  int64_t m = tensorType(mask).getRank(), n = st.getRank();
  bool accumulate = getBoolArg(op, "accumulate").value_or(false);
  if (!maskFits(mask, self) || resultType(op) != st ||
      vt.getElementType() != et || (accumulate && et.isInteger(1)) ||
      (vt.getRank() != 0 && vt.getRank() != 1 + n - m))
    return failure();
  Location loc = op.getLoc();
  Value flat = flatMask(rw, loc, mask, self);
  Value rows = asRows(rw, loc, self, m);
  RankedTensorType rowsT = tensorType(rows);
  Value vrows = vt.getRank() == 0 ? Value() : asRows(rw, loc, values, 1);
  OpFoldResult r = getSizes(rw, loc, rows)[1];
  auto rowT = RankedTensorType::get({rowsT.getDimSize(1)}, et);
  SmallVector<OpFoldResult> ones = {rw.getIndexAttr(1), rw.getIndexAttr(1)};
  Value copy =
      linalg::CopyOp::create(rw, loc, rows, emptyLike(rw, loc, rowsT, rows))
          .getResult(0);
  AffineMap id = rw.getMultiDimIdentityMap(1);
  auto [updated, count] = forEachTrue(
      rw, loc, flat, copy,
      [&](OpBuilder &tb, Location tl, Value i, Value acc, Value c) -> Value {
        SmallVector<OpFoldResult> sz = {tb.getIndexAttr(1), r};
        SmallVector<OpFoldResult> at = {i, tb.getIndexAttr(0)};
        Value old =
            tensor::ExtractSliceOp::create(tb, tl, rowT, acc, at, sz, ones);
        SmallVector<Value> ins = {old};
        SmallVector<AffineMap> maps = {id};
        Value scalar;
        if (vrows) {
          assertInBounds(tb, tl, c, tensor::DimOp::create(tb, tl, vrows, 0),
                         "index_put: more true elements than values");
          ins.push_back(tensor::ExtractSliceOp::create(
              tb, tl, rowT, vrows,
              SmallVector<OpFoldResult>{c, tb.getIndexAttr(0)}, sz, ones));
          maps.push_back(id);
        } else {
          scalar = tensor::ExtractOp::create(tb, tl, values, ValueRange{});
        }
        maps.push_back(id);
        auto upd = linalg::GenericOp::create(
            tb, tl, rowT, ins, emptyLike(tb, tl, rowT, old), maps,
            SmallVector<utils::IteratorType>{utils::IteratorType::parallel},
            [&](OpBuilder &nb, Location nl, ValueRange a) {
              Value v = scalar ? scalar : a[1];
              if (accumulate)
                v = isFloat(et) ? Value(arith::AddFOp::create(nb, nl, a[0], v))
                                : Value(arith::AddIOp::create(nb, nl, a[0], v));
              linalg::YieldOp::create(nb, nl, v);
            });
        return tensor::InsertSliceOp::create(tb, tl, upd.getResult(0), acc, at,
                                             sz, ones);
      });
  if (vrows) {
    // aten raises unless the values' rows match the true elements (or
    // there is one row to broadcast, which this lowering does not do).
    assertEqual(rw, loc, count, tensor::DimOp::create(rw, loc, vrows, 0),
                "index_put: the values do not match the mask's true elements");
  }
  // (P, R) back to self's shape.
  Value out = updated;
  SmallVector<OpFoldResult> sizes = getSizes(rw, loc, self);
  SmallVector<ReassociationIndices> groups;
  if (n == m)
    groups = {iota(0, n)};
  else
    groups = {iota(0, m), iota(m, n)};
  if (n == m) {
    out = tensor::CollapseShapeOp::create(
        rw, loc, out, SmallVector<ReassociationIndices>{{0, 1}});
    if (n > 1)
      out = tensor::ExpandShapeOp::create(rw, loc, st, out, groups, sizes);
  } else {
    out = tensor::ExpandShapeOp::create(rw, loc, st, out, groups, sizes);
  }
  rw.replaceOp(op, out);
  return success();
}

/// aten.index.Tensor(self, indices) with k integer index tensors of one
/// rank (broadcasting only from static size-1 dims): result[b..., r...] =
/// self[idx_0[b...], ..., idx_{k-1}[b...], r...]. One linalg.generic over
/// the result that reads the index tensors through their (broadcast) maps
/// and extracts from self.
LogicalResult lowerIndexTensor(DLOp op, ValueRange o, PatternRewriter &rw) {
  if (o.size() < 2)
    return failure();
  if (o.size() == 2 && isMaskIndex(o[1]))
    return lowerMaskedIndex(op, o, rw);
  Location loc = op.getLoc();
  Value self = o[0];
  ValueRange idx = o.drop_front();
  RankedTensorType st = tensorType(self), rt = resultType(op);
  int64_t k = idx.size(), rank = st.getRank();
  int64_t rb = tensorType(idx[0]).getRank();
  if (k > rank || rt.getRank() != rb + rank - k)
    return failure();
  for (Value i : idx)
    if (!isPositionIndex(i) || tensorType(i).getRank() != rb)
      return failure();
  MLIRContext *ctx = rw.getContext();
  int64_t r = rt.getRank();
  SmallVector<AffineMap> maps;
  SmallVector<Value> dyn;
  // Per broadcast dim: the index tensors that are not broadcast along it.
  SmallVector<Value> full(rb);
  for (Value i : idx) {
    SmallVector<AffineExpr> exprs;
    for (int64_t d = 0; d < rb; ++d) {
      if (tensorType(i).getDimSize(d) == 1 && rt.getDimSize(d) != 1) {
        exprs.push_back(getAffineConstantExpr(0, ctx));
        continue;
      }
      exprs.push_back(getAffineDimExpr(d, ctx));
      if (!full[d]) {
        full[d] = i;
      } else if (tensorType(i).isDynamicDim(d) ||
                 tensorType(full[d]).isDynamicDim(d)) {
        assertEqual(rw, loc, tensor::DimOp::create(rw, loc, i, d),
                    tensor::DimOp::create(rw, loc, full[d], d),
                    "index: index tensors of different shapes");
      }
    }
    maps.push_back(AffineMap::get(r, 0, exprs, ctx));
  }
  for (int64_t d = 0; d < r; ++d) {
    if (!rt.isDynamicDim(d))
      continue;
    if (d < rb && !full[d])
      return failure();
    dyn.push_back(
        d < rb ? Value(tensor::DimOp::create(rw, loc, full[d], d))
               : Value(tensor::DimOp::create(rw, loc, self, d - rb + k)));
  }
  SmallVector<Value> sizes;
  for (int64_t d = 0; d < k; ++d)
    sizes.push_back(tensor::DimOp::create(rw, loc, self, d));
  maps.push_back(rw.getMultiDimIdentityMap(r));
  Value init = tensor::EmptyOp::create(rw, loc, rt, dyn);
  auto g = linalg::GenericOp::create(
      rw, loc, rt, idx, init, maps,
      SmallVector<utils::IteratorType>(r, utils::IteratorType::parallel),
      [&](OpBuilder &b, Location l, ValueRange a) {
        SmallVector<Value> coords;
        for (int64_t j = 0; j < k; ++j)
          coords.push_back(wrapPosition(b, l, toIndex(b, l, a[j]), sizes[j],
                                        "index: index out of range"));
        for (int64_t d = rb; d < r; ++d)
          coords.push_back(linalg::IndexOp::create(b, l, d));
        linalg::YieldOp::create(
            b, l, Value(tensor::ExtractOp::create(b, l, self, coords)));
      });
  rw.replaceOp(op, castTo(rw, loc, g.getResult(0), rt));
  return success();
}

/// index_put's index count n, asserting that every index tensor has it.
Value indexPutCount(OpBuilder &b, Location loc, ValueRange idx) {
  Value n = tensor::DimOp::create(b, loc, idx[0], 0);
  for (Value i : idx.drop_front())
    assertEqual(b, loc, tensor::DimOp::create(b, loc, i, 0), n,
                "index_put: index tensors of different lengths");
  return n;
}

/// The leading size of index_put's values, asserted to be n or 1 (one
/// value for every index).
Value indexPutValueCount(OpBuilder &b, Location loc, Value values, Value n) {
  Value vn = tensor::DimOp::create(b, loc, values, 0);
  Value ok = arith::OrIOp::create(
      b, loc, arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq, vn, n),
      arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq, vn,
                            cstIndex(b, loc, 1)));
  cf::AssertOp::create(b, loc, ok,
                       "index_put: values do not match the indices");
  return vn;
}

/// aten.index_put(self, indices, values, accumulate) with 1-D integer index
/// tensors for the leading k < rank dims of self: whole rows (slices over
/// the other dims) written, or added, in index order; values are [n or 1,
/// the other dims of self]. This is the gradient of a gather `x[idx]`
/// (index's backward: `new_zeros(x.shape).index_put_([idx], grad,
/// accumulate=True)`, Faster R-CNN's RoI features and box deltas).
LogicalResult lowerIndexPutRows(DLOp op, Value self, ValueRange idx,
                                Value values, bool accumulate,
                                PatternRewriter &rw) {
  Location loc = op.getLoc();
  RankedTensorType st = tensorType(self), vt = tensorType(values);
  Type et = st.getElementType();
  int64_t r = st.getRank(), k = idx.size(), m = r - k;
  if (vt.getRank() != 1 + m)
    return failure();
  for (int64_t j = 0; j < m; ++j)
    if (!ShapedType::isDynamic(vt.getDimSize(1 + j)) &&
        !ShapedType::isDynamic(st.getDimSize(k + j)) &&
        vt.getDimSize(1 + j) != st.getDimSize(k + j))
      return failure();
  Value n = indexPutCount(rw, loc, idx);
  Value vn = indexPutValueCount(rw, loc, values, n);
  Value zero = cstIndex(rw, loc, 0), one = cstIndex(rw, loc, 1);
  SmallVector<OpFoldResult> selfSizes = getSizes(rw, loc, self);
  SmallVector<OpFoldResult> valueSizes = getSizes(rw, loc, values);
  for (int64_t j = 0; j < m; ++j)
    guardEqual(rw, loc, valueSizes[1 + j], selfSizes[k + j],
               "index_put: values do not match the indexed rows");
  SmallVector<Value> sizes;
  for (int64_t d = 0; d < k; ++d)
    sizes.push_back(indexValue(rw, loc, selfSizes[d]));
  // A row of self (and of values, cast to it: the guards above hold).
  auto rowType = RankedTensorType::get(st.getShape().drop_front(k), et);
  auto valueRowType = RankedTensorType::get(vt.getShape().drop_front(), et);
  Value copy =
      linalg::CopyOp::create(rw, loc, self, emptyLike(rw, loc, st, self))
          .getResult(0);
  auto loop = scf::ForOp::create(
      rw, loc, zero, n, one, ValueRange{copy},
      [&](OpBuilder &b, Location l, Value iv, ValueRange iter) {
        SmallVector<OpFoldResult> offsets, rowSizes;
        for (auto [d, i] : llvm::enumerate(idx)) {
          offsets.push_back(wrapPosition(
              b, l, toIndex(b, l, tensor::ExtractOp::create(b, l, i, iv)),
              sizes[d], "index_put: index out of range"));
          rowSizes.push_back(b.getIndexAttr(1));
        }
        SmallVector<OpFoldResult> valueOffsets{Value(arith::SelectOp::create(
            b, l,
            arith::CmpIOp::create(b, l, arith::CmpIPredicate::eq, vn, one),
            zero, iv))};
        SmallVector<OpFoldResult> valueRowSizes{b.getIndexAttr(1)};
        for (int64_t j = 0; j < m; ++j) {
          offsets.push_back(b.getIndexAttr(0));
          rowSizes.push_back(selfSizes[k + j]);
          valueOffsets.push_back(b.getIndexAttr(0));
          valueRowSizes.push_back(valueSizes[1 + j]);
        }
        SmallVector<OpFoldResult> strides(r, b.getIndexAttr(1));
        SmallVector<OpFoldResult> valueStrides(m + 1, b.getIndexAttr(1));
        Value row = castTo(b, l,
                           tensor::ExtractSliceOp::create(
                               b, l, valueRowType, values, valueOffsets,
                               valueRowSizes, valueStrides),
                           rowType);
        if (accumulate) {
          Value old = tensor::ExtractSliceOp::create(
              b, l, rowType, iter[0], offsets, rowSizes, strides);
          row = buildElementwise(
              b, l, rowType, {old, row},
              [&](OpBuilder &bb, Location ll, ValueRange a) -> Value {
                if (isFloat(et))
                  return arith::AddFOp::create(bb, ll, a[0], a[1]);
                return arith::AddIOp::create(bb, ll, a[0], a[1]);
              });
        }
        scf::YieldOp::create(
            b, l,
            Value(tensor::InsertSliceOp::create(b, l, row, iter[0], offsets,
                                                rowSizes, strides)));
      });
  rw.replaceOp(op, loop.getResult(0));
  return success();
}

/// aten.index_put(self, indices, values, accumulate) with one 1-D integer
/// index tensor per dim of self (every dim indexed) and values of 0 or 1
/// dims: a copy of self written (or, accumulating, added to) element by
/// element in index order, so a repeated position gets the last value, as
/// aten's CPU kernel gives it. Fewer index tensors than dims: rows
/// (lowerIndexPutRows).
LogicalResult lowerIndexPut(DLOp op, ValueRange o, PatternRewriter &rw) {
  Location loc = op.getLoc();
  if (o.size() < 3)
    return failure();
  if (o.size() == 3 && isMaskIndex(o[1]))
    return lowerMaskedIndexPut(op, o, rw);
  Value self = o.front(), values = o.back();
  ValueRange idx = o.drop_front().drop_back();
  RankedTensorType st = tensorType(self), vt = tensorType(values);
  Type et = st.getElementType();
  if (int64_t(idx.size()) > st.getRank() || vt.getElementType() != et ||
      resultType(op) != st)
    return failure();
  for (Value i : idx)
    if (!isPositionIndex(i) || tensorType(i).getRank() != 1)
      return failure();
  bool accumulate = getBoolArg(op, "accumulate").value_or(false);
  if (accumulate && et.isInteger(1))
    return failure();
  if (int64_t(idx.size()) < st.getRank())
    return lowerIndexPutRows(op, self, idx, values, accumulate, rw);
  if (vt.getRank() > 1)
    return failure();
  Value zero = cstIndex(rw, loc, 0), one = cstIndex(rw, loc, 1);
  Value n = indexPutCount(rw, loc, idx);
  Value vn =
      vt.getRank() == 1 ? indexPutValueCount(rw, loc, values, n) : Value();
  SmallVector<Value> sizes;
  for (int64_t d = 0; d < st.getRank(); ++d)
    sizes.push_back(tensor::DimOp::create(rw, loc, self, d));
  // The copy the loop writes into (the op is functional here).
  Value copy =
      linalg::CopyOp::create(rw, loc, self, emptyLike(rw, loc, st, self))
          .getResult(0);
  auto loop = scf::ForOp::create(
      rw, loc, zero, n, one, ValueRange{copy},
      [&](OpBuilder &b, Location l, Value iv, ValueRange iter) {
        SmallVector<Value> coords;
        for (auto [d, i] : llvm::enumerate(idx))
          coords.push_back(wrapPosition(
              b, l, toIndex(b, l, tensor::ExtractOp::create(b, l, i, iv)),
              sizes[d], "index_put: index out of range"));
        Value v;
        if (vt.getRank() == 0) {
          v = tensor::ExtractOp::create(b, l, values, ValueRange{});
        } else {
          Value at = arith::SelectOp::create(
              b, l,
              arith::CmpIOp::create(b, l, arith::CmpIPredicate::eq, vn, one),
              zero, iv);
          v = tensor::ExtractOp::create(b, l, values, at);
        }
        if (accumulate) {
          Value old = tensor::ExtractOp::create(b, l, iter[0], coords);
          v = isFloat(et) ? Value(arith::AddFOp::create(b, l, old, v))
                          : Value(arith::AddIOp::create(b, l, old, v));
        }
        scf::YieldOp::create(
            b, l, Value(tensor::InsertOp::create(b, l, v, iter[0], coords)));
      });
  rw.replaceOp(op, loop.getResult(0));
  return success();
}

LogicalResult lowerIndexSelect(DLOp op, ValueRange o, PatternRewriter &rw) {
  if (o.size() != 2 || !isIntTensor(o[1]) || tensorType(o[1]).getRank() > 1)
    return failure();
  Location loc = op.getLoc();
  Value self = o[0], index = o[1];
  RankedTensorType rt = resultType(op);
  int64_t r = rt.getRank();
  if (tensorType(self).getRank() != r)
    return failure();
  if (r == 0) { // index_select on a 0-d tensor selects the element itself.
    rw.replaceOp(op, castTo(rw, loc, self, rt));
    return success();
  }
  std::optional<int64_t> dim = normDim(getIntArg(op, "dim").value_or(0), r);
  if (!dim)
    return failure();
  SmallVector<Value> dyn;
  for (int64_t d = 0; d < r; ++d)
    if (rt.isDynamicDim(d))
      dyn.push_back(d != *dim ? Value(tensor::DimOp::create(rw, loc, self, d))
                    : tensorType(index).getRank() == 1
                        ? Value(tensor::DimOp::create(rw, loc, index, 0))
                        : cstIndex(rw, loc, 1));
  MLIRContext *ctx = rw.getContext();
  AffineMap indexMap =
      tensorType(index).getRank() == 1
          ? AffineMap::get(r, 0, getAffineDimExpr(*dim, ctx))
          : AffineMap::get(r, 0, ArrayRef<AffineExpr>{}, ctx);
  Value n = tensor::DimOp::create(rw, loc, self, *dim);
  Value res = buildGather(
      rw, loc, rt, dyn, index, indexMap,
      [&](OpBuilder &b, Location l, Value i, SmallVector<Value> &coords) {
        assertInBounds(b, l, i, n, "index_select: index out of range in self");
        coords[*dim] = i;
        return tensor::ExtractOp::create(b, l, self, coords);
      });
  rw.replaceOp(op, res);
  return success();
}

LogicalResult lowerGather(DLOp op, ValueRange o, PatternRewriter &rw) {
  if (o.size() != 2 || !isIntTensor(o[1]))
    return failure();
  Location loc = op.getLoc();
  Value self = o[0], index = o[1];
  RankedTensorType st = tensorType(self), it = tensorType(index);
  RankedTensorType rt = resultType(op);
  int64_t r = rt.getRank();
  if (st.getRank() != r || it.getRank() != r)
    return failure();
  if (r == 0) {
    Value res = buildGather(
        rw, loc, rt, {}, index, rw.getMultiDimIdentityMap(0),
        [&](OpBuilder &b, Location l, Value i, SmallVector<Value> &) {
          assertInBounds(b, l, i, cstIndex(b, l, 1),
                         "gather: index out of range");
          return tensor::ExtractOp::create(b, l, self, ValueRange{});
        });
    rw.replaceOp(op, res);
    return success();
  }
  std::optional<int64_t> dim = normDim(getIntArg(op, "dim").value_or(0), r);
  if (!dim)
    return failure();
  // index.size(d) <= self.size(d) for d != dim.
  for (int64_t d = 0; d < r; ++d) {
    if (d == *dim)
      continue;
    if (!it.isDynamicDim(d) && !st.isDynamicDim(d)) {
      if (it.getDimSize(d) > st.getDimSize(d))
        return failure();
      continue;
    }
    Value ok = arith::CmpIOp::create(
        rw, loc, arith::CmpIPredicate::ule,
        tensor::DimOp::create(rw, loc, index, d),
        tensor::DimOp::create(rw, loc, self, d));
    cf::AssertOp::create(rw, loc, ok, "gather: index is larger than self");
  }
  SmallVector<Value> dyn;
  for (int64_t d = 0; d < r; ++d)
    if (rt.isDynamicDim(d))
      dyn.push_back(tensor::DimOp::create(rw, loc, index, d));
  Value n = tensor::DimOp::create(rw, loc, self, *dim);
  Value res = buildGather(
      rw, loc, rt, dyn, index, rw.getMultiDimIdentityMap(r),
      [&](OpBuilder &b, Location l, Value i, SmallVector<Value> &coords) {
        assertInBounds(b, l, i, n, "gather: index out of range");
        coords[*dim] = i;
        return tensor::ExtractOp::create(b, l, self, coords);
      });
  rw.replaceOp(op, res);
  return success();
}

/// embedding(weight [W, D], indices [...]) -> [..., D].
LogicalResult lowerEmbedding(DLOp op, ValueRange o, PatternRewriter &rw) {
  if (o.size() != 2 || !isIntTensor(o[1]) || tensorType(o[0]).getRank() != 2)
    return failure();
  Location loc = op.getLoc();
  Value weight = o[0], indices = o[1];
  RankedTensorType rt = resultType(op);
  int64_t r = rt.getRank(), k = tensorType(indices).getRank();
  if (r != k + 1)
    return failure();
  SmallVector<Value> dyn;
  for (int64_t d = 0; d < r; ++d)
    if (rt.isDynamicDim(d))
      dyn.push_back(d < k ? tensor::DimOp::create(rw, loc, indices, d)
                          : tensor::DimOp::create(rw, loc, weight, 1));
  MLIRContext *ctx = rw.getContext();
  SmallVector<AffineExpr> exprs;
  for (int64_t d = 0; d < k; ++d)
    exprs.push_back(getAffineDimExpr(d, ctx));
  Value n = tensor::DimOp::create(rw, loc, weight, 0);
  Value res = buildGather(
      rw, loc, rt, dyn, indices, AffineMap::get(r, 0, exprs, ctx),
      [&](OpBuilder &b, Location l, Value i, SmallVector<Value> &coords) {
        assertInBounds(b, l, i, n, "embedding: index out of range in self");
        return tensor::ExtractOp::create(b, l, weight,
                                         ValueRange{i, coords[k]});
      });
  rw.replaceOp(op, res);
  return success();
}

/// `v` as a tensor of rank `rank` whose first dim merges the leading dims
/// (rank 1: all of them, rank 2: all but the last); 0-d inputs get a unit dim.
Value flattenLeading(OpBuilder &b, Location loc, Value v, int64_t rank) {
  RankedTensorType t = tensorType(v);
  int64_t keep = rank - 1; // trailing dims kept as they are
  int64_t lead = t.getRank() - keep;
  if (lead == 1)
    return v;
  if (lead == 0) {
    SmallVector<int64_t> shape(t.getShape());
    shape.insert(shape.begin(), 1);
    SmallVector<bool> unit(shape.size(), false);
    unit[0] = true;
    SmallVector<OpFoldResult> sizes = getSizes(b, loc, v);
    sizes.insert(sizes.begin(), b.getIndexAttr(1));
    return tensor::ExpandShapeOp::create(b, loc, t.clone(shape), v,
                                         unitDimGroups(unit), sizes);
  }
  SmallVector<ReassociationIndices> groups = {iota(0, lead)};
  for (int64_t d = lead; d < t.getRank(); ++d)
    groups.push_back({d});
  return tensor::CollapseShapeOp::create(b, loc, v, groups);
}

/// embedding_dense_backward(grad_output [..., D], indices [...],
/// num_weights, padding_idx, scale_grad_by_freq) -> [num_weights, D]: the
/// scatter-add of the gradient rows into zeros, in index order (as PyTorch's
/// CPU kernel), skipping padding_idx and scaling by 1/count when asked.
LogicalResult lowerEmbeddingDenseBackward(DLOp op, ValueRange o,
                                          PatternRewriter &rw) {
  if (o.size() != 2 || !isIntTensor(o[1]))
    return failure();
  Location loc = op.getLoc();
  Value grad = o[0], indices = o[1];
  RankedTensorType rt = resultType(op), gt = tensorType(grad);
  Type et = rt.getElementType();
  if (rt.getRank() != 2 || !isFloat(et) || gt.getElementType() != et ||
      gt.getRank() != tensorType(indices).getRank() + 1)
    return failure();
  int64_t padding = getIntArg(op, "padding_idx").value_or(-1);
  bool scaleByFreq = getBoolArg(op, "scale_grad_by_freq").value_or(false);
  std::optional<int64_t> numWeights = getIntArg(op, "num_weights");

  Value idx1 = flattenLeading(rw, loc, indices, 1);  // [N]
  Value grad2 = flattenLeading(rw, loc, grad, 2);    // [N, D]
  SmallVector<Value> dyn;
  if (rt.isDynamicDim(0)) {
    if (!numWeights)
      return failure();
    dyn.push_back(cstIndex(rw, loc, *numWeights));
  }
  if (rt.isDynamicDim(1))
    dyn.push_back(tensor::DimOp::create(rw, loc, grad2, 1));
  Value init = tensor::EmptyOp::create(rw, loc, rt, dyn);
  Value acc = linalg::FillOp::create(rw, loc, scalarConstant(rw, loc, et, 0.0),
                                     init)
                  .getResult(0);

  Value zero = cstIndex(rw, loc, 0), one = cstIndex(rw, loc, 1);
  Value n = tensor::DimOp::create(rw, loc, idx1, 0);
  Value w = tensor::DimOp::create(rw, loc, acc, 0);
  OpFoldResult dsize = getSizes(rw, loc, acc)[1];
  Value pad = cstIndex(rw, loc, padding);

  // counts[w] = occurrences of w in indices (only for scale_grad_by_freq).
  Value counts;
  if (scaleByFreq) {
    Type i64 = rw.getI64Type();
    Value c0 = tensor::EmptyOp::create(rw, loc, ArrayRef<OpFoldResult>{w}, i64);
    c0 = linalg::FillOp::create(rw, loc, scalarConstant(rw, loc, i64, 0), c0)
             .getResult(0);
    counts = scf::ForOp::create(
                 rw, loc, zero, n, one, ValueRange{c0},
                 [&](OpBuilder &b, Location l, Value iv, ValueRange iter) {
                   Value i = toIndex(
                       b, l, tensor::ExtractOp::create(b, l, idx1, iv));
                   assertInBounds(b, l, i, w,
                                  "embedding_backward: index out of range");
                   Value c = tensor::ExtractOp::create(b, l, iter[0], i);
                   c = arith::AddIOp::create(b, l, c,
                                             scalarConstant(b, l, i64, 1));
                   Value u = tensor::InsertOp::create(b, l, c, iter[0], i);
                   scf::YieldOp::create(b, l, u);
                 })
                 .getResult(0);
  }

  auto loop = scf::ForOp::create(
      rw, loc, zero, n, one, ValueRange{acc},
      [&](OpBuilder &b, Location l, Value iv, ValueRange iter) {
        Value i = toIndex(b, l, tensor::ExtractOp::create(b, l, idx1, iv));
        assertInBounds(b, l, i, w, "embedding_backward: index out of range");
        Value skip =
            arith::CmpIOp::create(b, l, arith::CmpIPredicate::eq, i, pad);
        Value scale;
        if (scaleByFreq) {
          Value c = tensor::ExtractOp::create(b, l, counts, i);
          Value cf = arith::SIToFPOp::create(b, l, b.getF64Type(), c);
          scale = castScalar(
              b, l,
              arith::DivFOp::create(b, l, scalarConstant(b, l, b.getF64Type(), 1.0),
                                    cf),
              et);
        }
        auto rowType = RankedTensorType::get({rt.getDimSize(1)}, et);
        SmallVector<OpFoldResult> strides = {b.getIndexAttr(1),
                                             b.getIndexAttr(1)};
        SmallVector<OpFoldResult> sizes = {b.getIndexAttr(1), dsize};
        Value g = tensor::ExtractSliceOp::create(
            b, l, rowType, grad2, SmallVector<OpFoldResult>{iv, b.getIndexAttr(0)},
            sizes, strides);
        SmallVector<OpFoldResult> offs = {i, b.getIndexAttr(0)};
        Value row = tensor::ExtractSliceOp::create(b, l, rowType, iter[0],
                                                   offs, sizes, strides);
        AffineMap id = b.getMultiDimIdentityMap(1);
        auto upd = linalg::GenericOp::create(
            b, l, rowType, g, row, SmallVector<AffineMap>{id, id},
            SmallVector<utils::IteratorType>{utils::IteratorType::parallel},
            [&](OpBuilder &nb, Location nl, ValueRange a) {
              Value gv = a[0];
              if (scale)
                gv = arith::MulFOp::create(nb, nl, gv, scale);
              Value s = arith::AddFOp::create(nb, nl, a[1], gv);
              s = arith::SelectOp::create(nb, nl, skip, a[1], s);
              linalg::YieldOp::create(nb, nl, s);
            });
        Value u = tensor::InsertSliceOp::create(b, l, upd.getResult(0),
                                                iter[0], offs, sizes, strides);
        scf::YieldOp::create(b, l, u);
      });
  rw.replaceOp(op, loop.getResult(0));
  return success();
}

/// unfold's and unfold_backward's window arguments over an input of type
/// `in` (rank > 0) whose windows are `windows` (rank one more, the window
/// count along `dim` static, the same element type); `dimName` is the
/// op's name for the dim.
struct UnfoldArgs {
  int64_t dim, size, step;

  static std::optional<UnfoldArgs> of(DLOp op, StringRef dimName,
                                      RankedTensorType in,
                                      RankedTensorType windows) {
    int64_t rank = in.getRank();
    std::optional<int64_t> dim =
        normDim(getIntArg(op, dimName).value_or(0), rank);
    std::optional<int64_t> size = getIntArg(op, "size");
    std::optional<int64_t> step = getIntArg(op, "step");
    if (rank == 0 || !dim || !size || !step || *step < 1 ||
        windows.getRank() != rank + 1 || windows.isDynamicDim(*dim) ||
        windows.getElementType() != in.getElementType())
      return std::nullopt;
    return UnfoldArgs{*dim, *size, *step};
  }
};

/// unfold(self, dimension, size, step): the windows of `size` elements
/// every `step` along `dimension`, the window's elements as a new last dim:
/// out[..., i, ..., k] = self[..., i * step + k, ...] (a gather; a rank-0
/// self and dynamic window counts stay with the host).
LogicalResult lowerUnfold(DLOp op, ValueRange o, PatternRewriter &rw) {
  if (o.size() != 1)
    return failure();
  RankedTensorType in = tensorType(o[0]), rt = resultType(op);
  int64_t rank = in.getRank();
  std::optional<UnfoldArgs> a = UnfoldArgs::of(op, "dimension", in, rt);
  if (!a)
    return failure();
  int64_t dim = a->dim, step = a->step;
  Location loc = op.getLoc();
  SmallVector<Value> dyn;
  for (int64_t d = 0; d < rank; ++d)
    if (rt.isDynamicDim(d))
      dyn.push_back(tensor::DimOp::create(rw, loc, o[0], d));
  Value init = tensor::EmptyOp::create(rw, loc, rt, dyn);
  SmallVector<AffineMap> maps = {rw.getMultiDimIdentityMap(rank + 1)};
  SmallVector<utils::IteratorType> iters(rank + 1,
                                         utils::IteratorType::parallel);
  auto g = linalg::GenericOp::create(
      rw, loc, rt, ValueRange{}, init, maps, iters,
      [&](OpBuilder &b, Location l, ValueRange) {
        SmallVector<Value> at;
        for (int64_t d = 0; d < rank; ++d)
          at.push_back(linalg::IndexOp::create(b, l, d));
        Value k = linalg::IndexOp::create(b, l, rank);
        at[dim] = arith::AddIOp::create(
            b, l, arith::MulIOp::create(b, l, at[dim], cstIndex(b, l, step)),
            k);
        linalg::YieldOp::create(
            b, l, Value(tensor::ExtractOp::create(b, l, o[0], at)));
      });
  rw.replaceOp(op, g.getResult(0));
  return success();
}

/// unfold_backward(grad, input_sizes, dim, size, step): each input element
/// gets the sum of the gradients of the window elements that read it
/// (windows in order), zero if none does.
LogicalResult lowerUnfoldBackward(DLOp op, ValueRange o, PatternRewriter &rw) {
  RankedTensorType rt = resultType(op);
  if (o.size() != 1 || !rt.hasStaticShape() || !isFloat(rt.getElementType()))
    return failure();
  RankedTensorType grad = tensorType(o[0]);
  int64_t rank = rt.getRank();
  std::optional<UnfoldArgs> a = UnfoldArgs::of(op, "dim", rt, grad);
  if (!a)
    return failure();
  int64_t dim = a->dim, size = a->size, step = a->step;
  int64_t windows = grad.getDimSize(dim);
  Type et = rt.getElementType();
  Location loc = op.getLoc();
  Value init = tensor::EmptyOp::create(rw, loc, rt, ValueRange{});
  SmallVector<AffineMap> maps = {rw.getMultiDimIdentityMap(rank)};
  SmallVector<utils::IteratorType> iters(rank, utils::IteratorType::parallel);
  auto g = linalg::GenericOp::create(
      rw, loc, rt, ValueRange{}, init, maps, iters,
      [&](OpBuilder &b, Location l, ValueRange) {
        SmallVector<Value> at;
        for (int64_t d = 0; d < rank; ++d)
          at.push_back(linalg::IndexOp::create(b, l, d));
        Value j = at[dim];
        // Window i reads j at k = j - i * step: i from the first window
        // that reaches j to the last that starts at or before it.
        Value zero = scalarConstant(b, l, et, 0.0);
        Value c0 = cstIndex(b, l, 0), c1 = cstIndex(b, l, 1);
        Value cStep = cstIndex(b, l, step);
        auto loop = scf::ForOp::create(
            b, l, c0, cstIndex(b, l, windows), c1, ValueRange{zero},
            [&](OpBuilder &fb, Location fl, Value i, ValueRange acc) {
              Value k = arith::SubIOp::create(
                  fb, fl, j, arith::MulIOp::create(fb, fl, i, cStep));
              Value inWindow = arith::AndIOp::create(
                  fb, fl,
                  arith::CmpIOp::create(fb, fl, arith::CmpIPredicate::sge, k,
                                        c0),
                  arith::CmpIOp::create(fb, fl, arith::CmpIPredicate::slt, k,
                                        cstIndex(fb, fl, size)));
              auto pick = scf::IfOp::create(
                  fb, fl, inWindow,
                  [&](OpBuilder &tb, Location tl) {
                    SmallVector<Value> gat(at);
                    gat[dim] = i;
                    gat.push_back(k);
                    Value v = tensor::ExtractOp::create(tb, tl, o[0], gat);
                    scf::YieldOp::create(
                        tb, tl,
                        Value(arith::AddFOp::create(tb, tl, acc[0], v)));
                  },
                  [&](OpBuilder &eb, Location el) {
                    scf::YieldOp::create(eb, el, acc[0]);
                  });
              scf::YieldOp::create(fb, fl, pick.getResult(0));
            });
        linalg::YieldOp::create(b, l, loop.getResult(0));
      });
  rw.replaceOp(op, g.getResult(0));
  return success();
}

/// index_add(self, dim, index, source, alpha) and its in-place form:
/// `self` with alpha * source's slice i along `dim` added to its slice
/// index[i], for i in order (an scf.for, as aten's CPU kernel adds one
/// slice at a time: repeated indices accumulate in the same order). An
/// index out of range fails the run.
LogicalResult lowerIndexAdd(DLOp op, ValueRange o, PatternRewriter &rw) {
  if (o.size() != 3 || !isIntTensor(o[1]))
    return failure();
  Value self = o[0], index = o[1], source = o[2];
  RankedTensorType st = tensorType(self), rt = resultType(op);
  RankedTensorType srcT = tensorType(source);
  Type et = rt.getElementType();
  int64_t rank = st.getRank();
  if (rank == 0 || srcT.getRank() != rank || tensorType(index).getRank() > 1 ||
      st.getElementType() != et || srcT.getElementType() != et ||
      et.isInteger(1))
    return failure();
  std::optional<int64_t> dim = normDim(getIntArg(op, "dim").value_or(0), rank);
  std::optional<double> alpha = getFloatArg(op, "alpha");
  Attribute alphaAttr =
      op.getArgsAttr() ? op.getArgsAttr().get("alpha") : nullptr;
  if (!dim || (alphaAttr && !alpha))
    return failure(); // a fed alpha: the host's
  Location loc = op.getLoc();
  if (tensorType(index).getRank() == 0)
    index = tensor::ExpandShapeOp::create(
        rw, loc, RankedTensorType::get({1}, tensorType(index).getElementType()),
        index, ArrayRef<ReassociationIndices>{});
  SmallVector<OpFoldResult> sizes = getSizes(rw, loc, source);
  sizes[*dim] = rw.getIndexAttr(1);
  SmallVector<int64_t> sliceShape(srcT.getShape());
  sliceShape[*dim] = 1;
  RankedTensorType sliceT = srcT.clone(sliceShape);
  Value zero = cstIndex(rw, loc, 0), one = cstIndex(rw, loc, 1);
  Value n = tensor::DimOp::create(rw, loc, index, 0);
  Value bound = tensor::DimOp::create(rw, loc, self, *dim);
  auto loop = scf::ForOp::create(
      rw, loc, zero, n, one, ValueRange{self},
      [&](OpBuilder &b, Location l, Value iv, ValueRange iter) {
        Value j = toIndex(b, l, tensor::ExtractOp::create(b, l, index, iv));
        assertInBounds(b, l, j, bound, "index_add: index out of range");
        SmallVector<OpFoldResult> strides(rank, b.getIndexAttr(1));
        SmallVector<OpFoldResult> from(rank, b.getIndexAttr(0));
        SmallVector<OpFoldResult> to(rank, b.getIndexAttr(0));
        from[*dim] = iv;
        to[*dim] = j;
        Value add = tensor::ExtractSliceOp::create(b, l, sliceT, source, from,
                                                   sizes, strides);
        Value dst = tensor::ExtractSliceOp::create(b, l, sliceT, iter[0], to,
                                                   sizes, strides);
        Value sum = buildElementwise(
            b, l, sliceT, {dst, add},
            [&](OpBuilder &nb, Location nl, ValueRange a) {
              Value v = a[1];
              bool f = isFloat(et);
              if (alpha && *alpha != 1.0) {
                Value k = scalarConstant(nb, nl, et, *alpha);
                v = f ? Value(arith::MulFOp::create(nb, nl, v, k))
                      : Value(arith::MulIOp::create(nb, nl, v, k));
              }
              return f ? Value(arith::AddFOp::create(nb, nl, a[0], v))
                       : Value(arith::AddIOp::create(nb, nl, a[0], v));
            });
        Value u = tensor::InsertSliceOp::create(b, l, sum, iter[0], to, sizes,
                                                strides);
        scf::YieldOp::create(b, l, u);
      });
  rw.replaceOp(op, castTo(rw, loc, loop.getResult(0), rt));
  return success();
}

/// One point of aten's `linspace_from_neg_one(steps, align_corners)` (the
/// affine grid's base coordinates), computed as aten does in `et`:
/// linspace(-1, 1, steps) from whichever end is nearer, then, without
/// align_corners, scaled by (steps - 1) / steps.
Value linspaceFromNegOne(OpBuilder &b, Location l, Value i, int64_t steps,
                         bool alignCorners, Type et) {
  if (steps <= 1)
    return scalarConstant(b, l, et, 0.0);
  auto toFloat = [&](Value v) -> Value {
    return arith::SIToFPOp::create(
        b, l, et, arith::IndexCastOp::create(b, l, b.getI64Type(), v));
  };
  Value step = arith::DivFOp::create(b, l, scalarConstant(b, l, et, 2.0),
                                     scalarConstant(b, l, et, double(steps - 1)));
  Value fromStart = arith::AddFOp::create(
      b, l, scalarConstant(b, l, et, -1.0),
      arith::MulFOp::create(b, l, step, toFloat(i)));
  Value back = arith::SubIOp::create(b, l, cstIndex(b, l, steps - 1), i);
  Value fromEnd =
      arith::SubFOp::create(b, l, scalarConstant(b, l, et, 1.0),
                            arith::MulFOp::create(b, l, step, toFloat(back)));
  Value firstHalf = arith::CmpIOp::create(b, l, arith::CmpIPredicate::slt, i,
                                          cstIndex(b, l, steps / 2));
  Value v = arith::SelectOp::create(b, l, firstHalf, fromStart, fromEnd);
  if (alignCorners)
    return v;
  v = arith::MulFOp::create(b, l, v,
                            scalarConstant(b, l, et, double(steps - 1)));
  return arith::DivFOp::create(b, l, v,
                               scalarConstant(b, l, et, double(steps)));
}

/// aten.affine_grid_generator(theta [N, 2, 3], size [N, C, H, W],
/// align_corners) -> [N, H, W, 2]: aten multiplies the base grid (x(w),
/// y(h), 1) by theta^T; one linalg.generic computes each point's
/// theta[n, k, 0] * x(w) + theta[n, k, 1] * y(h) + theta[n, k, 2]. H and W
/// must be static (they fix the base grid); N follows theta (Faster
/// R-CNN's RoI count).
LogicalResult lowerAffineGrid(DLOp op, ValueRange o, PatternRewriter &rw) {
  if (o.empty())
    return failure();
  Location loc = op.getLoc();
  Value theta = o[0];
  RankedTensorType tt = tensorType(theta), rt = resultType(op);
  Type et = rt.getElementType();
  if (!isa<Float32Type, Float64Type>(et) || tt.getElementType() != et ||
      tt.getRank() != 3 || rt.getRank() != 4 || tt.getDimSize(1) != 2 ||
      tt.getDimSize(2) != 3 || rt.getDimSize(3) != 2 ||
      ShapedType::isDynamic(rt.getDimSize(1)) ||
      ShapedType::isDynamic(rt.getDimSize(2)))
    return failure();
  bool alignCorners = getBoolArg(op, "align_corners").value_or(false);
  int64_t h = rt.getDimSize(1), w = rt.getDimSize(2);
  Value n = tensor::DimOp::create(rw, loc, theta, 0);
  RankedTensorType outType =
      rt.clone(SmallVector<int64_t>{ShapedType::kDynamic, h, w, 2});
  Value init = emptyWithSizes(rw, loc, outType, ValueRange{n});
  AffineMap id = rw.getMultiDimIdentityMap(4);
  auto g = linalg::GenericOp::create(
      rw, loc, outType, ValueRange{}, ValueRange{init},
      SmallVector<AffineMap>{id},
      SmallVector<utils::IteratorType>(4, utils::IteratorType::parallel),
      [&](OpBuilder &b, Location l, ValueRange) {
        Value ni = linalg::IndexOp::create(b, l, 0);
        Value hi = linalg::IndexOp::create(b, l, 1);
        Value wi = linalg::IndexOp::create(b, l, 2);
        Value ki = linalg::IndexOp::create(b, l, 3);
        Value x = linspaceFromNegOne(b, l, wi, w, alignCorners, et);
        Value y = linspaceFromNegOne(b, l, hi, h, alignCorners, et);
        auto coef = [&](int64_t j) -> Value {
          return tensor::ExtractOp::create(
              b, l, theta, ValueRange{ni, ki, cstIndex(b, l, j)});
        };
        Value v = arith::MulFOp::create(b, l, x, coef(0));
        v = arith::AddFOp::create(b, l, v,
                                  arith::MulFOp::create(b, l, y, coef(1)));
        v = arith::AddFOp::create(b, l, v, coef(2));
        linalg::YieldOp::create(b, l, v);
      });
  rw.replaceOp(op, castTo(rw, loc, g.getResult(0), rt));
  return success();
}

} // namespace

void terra::populateDataMovementLowerings(LoweringRegistry &r) {
  for (StringRef n : {"aten.view", "aten._unsafe_view", "aten.reshape",
                      "aten._reshape_alias", "aten.flatten.using_ints",
                      "aten.unflatten.int"})
    r.add(n, rollBackOnFailure<lowerReshape>);
  r.add("aten.unsqueeze", rollBackOnFailure<lowerUnsqueeze>);
  for (StringRef n : {"aten.squeeze", "aten.squeeze.dim", "aten.squeeze.dims"})
    r.add(n, rollBackOnFailure<lowerSqueeze>);
  r.add("aten.permute", rollBackOnFailure<lowerPermute>);
  r.add("aten.transpose.int", rollBackOnFailure<lowerTranspose>);
  r.add("aten.t", rollBackOnFailure<lowerT>);
  r.add("aten.expand", rollBackOnFailure<lowerExpand>);
  r.add("aten.repeat", rollBackOnFailure<lowerRepeat>);
  r.add("aten.flip", rollBackOnFailure<lowerFlip>);
  r.add("aten.pixel_shuffle", rollBackOnFailure<lowerPixelShuffle<true>>);
  r.add("aten.pixel_unshuffle", rollBackOnFailure<lowerPixelShuffle<false>>);
  r.add("aten.slice.Tensor", rollBackOnFailure<lowerSlice>);
  r.add("aten.constant_pad_nd", rollBackOnFailure<lowerConstantPadNd>);
  r.add("aten.select.int", rollBackOnFailure<lowerSelect>);
  r.add("aten.unbind.int", rollBackOnFailure<lowerUnbind>);
  // unsafe_split (RNN cells' gate chunks) differs from split only in
  // autograd's view tracking: the same values.
  for (StringRef n :
       {"aten.split.Tensor", "aten.split_with_sizes",
        "aten.unsafe_split.Tensor", "aten.unsafe_split_with_sizes"})
    r.add(n, rollBackOnFailure<lowerSplit>);
  r.add("aten.slice_backward", rollBackOnFailure<lowerSliceInsert<true>>);
  r.add("aten.select_backward", rollBackOnFailure<lowerSelectInsert<true>>);
  r.add("aten.slice_scatter", rollBackOnFailure<lowerSliceInsert<false>>);
  r.add("aten.select_scatter", rollBackOnFailure<lowerSelectInsert<false>>);
  r.add("aten.diagonal", rollBackOnFailure<lowerDiagonal>);
  r.add("aten.diagonal_scatter", rollBackOnFailure<lowerDiagonalScatter>);
  r.add("aten.diagonal_backward", rollBackOnFailure<lowerDiagonalBackward>);
  r.add("aten.as_strided", rollBackOnFailure<lowerAsStrided>);
  r.add("aten.as_strided_scatter", rollBackOnFailure<lowerAsStridedScatter>);
  r.add("aten.cat", rollBackOnFailure<lowerCat>);
  r.add("aten.stack", rollBackOnFailure<lowerStack>);
  r.add("aten.index_select", rollBackOnFailure<lowerIndexSelect>);
  r.add("aten.index.Tensor", rollBackOnFailure<lowerIndexTensor>);
  for (StringRef n : {"aten.index_put", "aten.index_put_"})
    r.add(n, rollBackOnFailure<lowerIndexPut>);
  r.add("aten.gather", rollBackOnFailure<lowerGather>);
  r.add("aten.affine_grid_generator", rollBackOnFailure<lowerAffineGrid>);
  r.add("aten.embedding", rollBackOnFailure<lowerEmbedding>);
  r.add("aten.unfold", rollBackOnFailure<lowerUnfold>);
  r.add("aten.unfold_backward", rollBackOnFailure<lowerUnfoldBackward>);
  r.add("aten.index_add", rollBackOnFailure<lowerIndexAdd>);
  r.add("aten.index_add_", rollBackOnFailure<lowerIndexAdd>);
  r.add("aten.embedding_dense_backward",
        rollBackOnFailure<lowerEmbeddingDenseBackward>);
}
