//===- Convolution.cpp - Convolution and its backward ---------------------===//
//
// Optional tensor operands (the convention for every family): an optional
// tensor that is absent (None in the trace) is not an operand, so the op has
// fewer operands; the None stays in `args` under its schema name as a unit
// attribute (`bias = unit`). Trailing optionals are told apart by the operand
// count; where that is ambiguous, a lowering reads `args` to see which are
// absent. aten.convolution has 3 operands with a bias and 2 without.
//
// aten.convolution (2-D NCHW, or 1-D NCL run as 2-D with a unit height; any
// stride, padding, dilation and groups): tensor.pad, then
// linalg.conv_2d_nchw_fchw (groups == 1) or linalg.conv_2d_ngchw_gfchw on
// group-split views (groups > 1), accumulating into an init that holds the
// broadcast bias (or zeros).
//
// aten.convolution_backward -> (grad_input, grad_weight, grad_bias), each a
// linalg.generic over group-split views:
//   grad_input:  grad_output spread out with stride - 1 zeros between its
//                elements (tensor.insert_slice with strides), correlated
//                with the spatially flipped weight, channels swapped;
//   grad_weight: the padded input correlated with grad_output;
//   grad_bias:   grad_output summed over batch and space.
// When the op has three results, those output_mask does not request are
// zeros (the result count is stable); an op with fewer results holds the
// requested ones in order.
//
// Transposed convolutions (transposed = true, weight (Cin, Cout/G, KH, KW),
// any output_padding PyTorch accepts) reuse the same builders through the
// ordinary convolution C with the same weight, stride, padding, dilation
// and groups that maps (N, Cout, Ho, Wo) to (N, Cin, H, W), Ho being
// PyTorch's (H - 1) * stride - 2 * pad + dil * (K - 1) + output_padding + 1:
//   forward:     C's grad_input at grad_output = x, plus the bias (a
//                pointwise generic);
//   grad_input:  C's forward of grad_output (named convolution, zero init);
//   grad_weight: C's grad_weight with input grad_output and grad_output x;
//   grad_bias:   as above.
// output_padding only adds rows at the bottom (right), which C's input
// gradient already produces. When output_padding >= stride (possible when
// dilation > stride), C's output has output_padding / stride more rows
// than x: x gets that many zero rows appended (forward, grad_weight) and
// grad_input is cut back to x's size.
//
// The gradient generics carry `terra.library` (with stride and dilation) so
// that, on the CPU, terra-library-convolutions recognizes them (and the
// named convolutions) and calls the runtime's oneDNN-backed entry points
// with the unpadded input and the original grad_output instead; this linalg
// form is what other backends (the GPU pipeline) compile. Transposed
// convolutions thus become the same library calls.
//
// Both need f32/f64 and static kernel sizes; batch and channel sizes may be
// dynamic and get runtime guards. An ordinary convolution's input spatial
// sizes may be dynamic too (a pooling whose output size varies between the
// merged paths feeds the rest of the network, SDPoint): its output sizes
// are then computed at run time, guarded against an input smaller than the
// dilated kernel. Transposed convolutions need static spatial sizes.
//
//===----------------------------------------------------------------------===//
#include "Utils.h"

#include "terra/Lowering/ConvolutionMaps.h"

#include "mlir/Dialect/Arith/Utils/Utils.h"

using namespace mlir;
using namespace terra;
using namespace terra::lowering;

namespace {

bool isDyn(int64_t d) { return ShapedType::isDynamic(d); }
bool compatible(int64_t a, int64_t b) { return isDyn(a) || isDyn(b) || a == b; }

/// The args of a convolution, normalized to two spatial dims (a 1-D
/// convolution is a 2-D one of unit height). output_padding is kept only
/// for transposed convolutions (PyTorch ignores it otherwise).
struct ConvParams {
  SmallVector<int64_t> stride, padding, dilation, outputPadding;
  int64_t groups = 1;
  bool transposed = false;
};

/// The convolution args of `op`, or nullopt with `why` saying what is
/// malformed or unsupported.
std::optional<ConvParams> getConvParams(DLOp op, unsigned spatialRank,
                                        StringRef &why) {
  SmallVector<int64_t> zeros(spatialRank, 0), ones(spatialRank, 1);
  auto stride = getSpatialArg(op, "stride", spatialRank, ones);
  auto padding = getSpatialArg(op, "padding", spatialRank, zeros);
  auto dilation = getSpatialArg(op, "dilation", spatialRank, ones);
  auto outputPadding = getSpatialArg(op, "output_padding", spatialRank, zeros);
  int64_t groups = getIntArg(op, "groups").value_or(1);
  if (!stride || !padding || !dilation || !outputPadding || groups < 1) {
    why = "malformed stride, padding, dilation, output_padding or groups";
    return std::nullopt;
  }
  ConvParams p;
  p.groups = groups;
  p.transposed = getBoolArg(op, "transposed").value_or(false);
  if (!p.transposed)
    outputPadding = zeros;
  if (spatialRank == 1) {
    p.stride.push_back(1);
    p.padding.push_back(0);
    p.dilation.push_back(1);
    p.outputPadding.push_back(0);
  }
  p.stride.append(*stride);
  p.padding.append(*padding);
  p.dilation.append(*dilation);
  p.outputPadding.append(*outputPadding);
  for (int d = 0; d < 2; ++d) {
    if (p.stride[d] < 1 || p.padding[d] < 0 || p.dilation[d] < 1) {
      why = "stride and dilation must be positive, padding non-negative";
      return std::nullopt;
    }
    // PyTorch's own check: the extra output rows must lie within one
    // stride or one dilation step.
    if (p.outputPadding[d] < 0 || (p.outputPadding[d] >= p.stride[d] &&
                                   p.outputPadding[d] >= p.dilation[d])) {
      why = "output_padding must be smaller than stride or dilation";
      return std::nullopt;
    }
  }
  return p;
}

/// The spatial sizes of a convolution problem (H, W, OH, OW dynamic when
/// the input's are).
struct ConvGeom {
  int64_t H, W, KH, KW, OH, OW;
};

/// A rank-3 (N, C, L) type as rank 4 (N, C, 1, L).
RankedTensorType as4d(RankedTensorType t) {
  if (t.getRank() == 4)
    return t;
  SmallVector<int64_t> shape(t.getShape());
  shape.insert(shape.begin() + 2, 1);
  return RankedTensorType::get(shape, t.getElementType());
}

/// The sizes and channel consistency of input `x` and weight `w` (both rank
/// 4); nullopt when a kernel size is dynamic or the static sizes cannot
/// form a convolution. A dynamic input size makes the output's dynamic.
std::optional<ConvGeom> getGeometry(RankedTensorType x, RankedTensorType w,
                                    const ConvParams &p) {
  for (int d = 2; d < 4; ++d)
    if (w.isDynamicDim(d))
      return std::nullopt;
  ConvGeom g{
      x.getDimSize(2), x.getDimSize(3), w.getDimSize(2), w.getDimSize(3), 0, 0};
  if (g.KH < 1 || g.KW < 1)
    return std::nullopt;
  int64_t in[2] = {g.H, g.W}, k[2] = {g.KH, g.KW}, out[2];
  for (int d = 0; d < 2; ++d) {
    if (isDyn(in[d])) {
      out[d] = ShapedType::kDynamic;
      continue;
    }
    int64_t n = in[d] + 2 * p.padding[d] - p.dilation[d] * (k[d] - 1) - 1;
    if (n < 0)
      return std::nullopt;
    out[d] = n / p.stride[d] + 1;
  }
  g.OH = out[0];
  g.OW = out[1];
  int64_t G = p.groups, C = x.getDimSize(1), F = w.getDimSize(0),
          Cg = w.getDimSize(1);
  if ((!isDyn(C) && C % G) || (!isDyn(F) && F % G) ||
      (!isDyn(C) && !isDyn(Cg) && C != Cg * G))
    return std::nullopt;
  return g;
}

/// The geometry of a transposed convolution of input `x` (N, Cin, H, W) and
/// weight `w` (Cin, Cout/G, KH, KW), both rank 4, as the ordinary
/// convolution whose input gradient it is: that convolution's input (H, W
/// in the result) is the transposed convolution's output, of PyTorch's size
/// (H - 1) * stride - 2 * pad + dil * (KH - 1) + output_padding + 1, and
/// its output (OH, OW) covers x: OH = H + output_padding / stride, so when
/// output_padding >= stride (allowed with a larger dilation) x needs
/// OH - H zero rows appended to make the sizes consistent. nullopt when a
/// spatial size is dynamic or the sizes cannot form a transposed
/// convolution.
std::optional<ConvGeom> getTransposedGeometry(RankedTensorType x,
                                              RankedTensorType w,
                                              const ConvParams &p) {
  for (int d = 2; d < 4; ++d)
    if (x.isDynamicDim(d) || w.isDynamicDim(d))
      return std::nullopt;
  int64_t in[2] = {x.getDimSize(2), x.getDimSize(3)},
          k[2] = {w.getDimSize(2), w.getDimSize(3)}, full[2], out[2];
  for (int d = 0; d < 2; ++d) {
    if (k[d] < 1 || in[d] < 1)
      return std::nullopt;
    int64_t ext = (k[d] - 1) * p.dilation[d];
    full[d] = (in[d] - 1) * p.stride[d] - 2 * p.padding[d] + ext +
              p.outputPadding[d] + 1;
    if (full[d] < 1)
      return std::nullopt;
    out[d] = (full[d] + 2 * p.padding[d] - ext - 1) / p.stride[d] + 1;
    if (out[d] < in[d])
      return std::nullopt;
  }
  int64_t G = p.groups, C = x.getDimSize(1), F = w.getDimSize(0);
  if ((!isDyn(F) && F % G) || !compatible(C, F))
    return std::nullopt;
  return ConvGeom{full[0], full[1], k[0], k[1], out[0], out[1]};
}

/// The output channels of a transposed convolution with weight `w`
/// (Cin, Cout/G, KH, KW): Cout, or dynamic.
int64_t transposedOutChannels(RankedTensorType w, int64_t groups) {
  return w.isDynamicDim(1) ? ShapedType::kDynamic : w.getDimSize(1) * groups;
}

bool isConvFloat(Type t) { return t.isF32() || t.isF64(); }

Value indexConst(OpBuilder &b, Location loc, int64_t v) {
  return arith::ConstantIndexOp::create(b, loc, v);
}

// Index arithmetic on sizes that may be run-time values, folded when they
// are constants.
OpFoldResult addIndex(OpBuilder &b, Location loc, OpFoldResult x, int64_t c) {
  if (std::optional<int64_t> v = getConstantIntValue(x))
    return b.getIndexAttr(*v + c);
  if (c == 0)
    return x;
  return arith::AddIOp::create(b, loc, cast<Value>(x), indexConst(b, loc, c))
      .getResult();
}

OpFoldResult mulIndex(OpBuilder &b, Location loc, OpFoldResult x, int64_t c) {
  if (std::optional<int64_t> v = getConstantIntValue(x))
    return b.getIndexAttr(*v * c);
  if (c == 1)
    return x;
  return arith::MulIOp::create(b, loc, cast<Value>(x), indexConst(b, loc, c))
      .getResult();
}

OpFoldResult maxIndex(OpBuilder &b, Location loc, OpFoldResult x,
                      OpFoldResult y) {
  std::optional<int64_t> a = getConstantIntValue(x), c = getConstantIntValue(y);
  if (a && c)
    return b.getIndexAttr(std::max(*a, *c));
  return arith::MaxSIOp::create(b, loc,
                                getValueOrCreateConstantIndexOp(b, loc, x),
                                getValueOrCreateConstantIndexOp(b, loc, y))
      .getResult();
}

/// The output size of spatial dim `d` of an ordinary convolution of `x`
/// (N, C, H, W) with kernel extent `k`: a constant for a static input size,
/// else computed at run time, guarded against an input smaller than the
/// dilated kernel.
OpFoldResult convOutSize(OpBuilder &b, Location loc, Value x, int d, int64_t k,
                         const ConvParams &p) {
  OpFoldResult in = getSizes(b, loc, x)[2 + d];
  OpFoldResult n =
      addIndex(b, loc, in, 2 * p.padding[d] - p.dilation[d] * (k - 1) - 1);
  if (std::optional<int64_t> v = getConstantIntValue(n))
    return b.getIndexAttr(*v / p.stride[d] + 1);
  Value nv = cast<Value>(n);
  Value fits = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::sge, nv,
                                     indexConst(b, loc, 0));
  cf::AssertOp::create(b, loc, fits,
                       "convolution input is smaller than the dilated kernel");
  Value q = arith::DivUIOp::create(b, loc, nv, indexConst(b, loc, p.stride[d]));
  return addIndex(b, loc, OpFoldResult(q), 1);
}

/// Guards channel consistency that the static types leave open.
void guardChannels(OpBuilder &b, Location loc, Value x, Value w, int64_t G) {
  auto xt = cast<RankedTensorType>(x.getType());
  auto wt = cast<RankedTensorType>(w.getType());
  if (xt.isDynamicDim(1) || wt.isDynamicDim(1)) {
    Value c = tensor::DimOp::create(b, loc, x, 1);
    Value cg = tensor::DimOp::create(b, loc, w, 1);
    Value cgG = arith::MulIOp::create(b, loc, cg, indexConst(b, loc, G));
    guardEqual(b, loc, OpFoldResult(c), OpFoldResult(cgG),
               "input channels must equal weight channels times groups");
  }
  if (wt.isDynamicDim(0) && G > 1) {
    Value f = tensor::DimOp::create(b, loc, w, 0);
    Value rem = arith::RemUIOp::create(b, loc, f, indexConst(b, loc, G));
    guardEqual(b, loc, OpFoldResult(rem), b.getIndexAttr(0),
               "output channels must be divisible by groups");
  }
}

/// Guards the channel consistency of a transposed convolution (input
/// channels equal weight dim 0, which the groups divide) that the static
/// types leave open.
void guardTransposedChannels(OpBuilder &b, Location loc, Value x, Value w,
                             int64_t G) {
  auto xt = cast<RankedTensorType>(x.getType());
  auto wt = cast<RankedTensorType>(w.getType());
  if (xt.isDynamicDim(1) || wt.isDynamicDim(0))
    guardEqual(b, loc, getSizes(b, loc, x)[1], getSizes(b, loc, w)[0],
               "input channels must equal weight dim 0 (transposed)");
  if (wt.isDynamicDim(0) && G > 1) {
    Value c = tensor::DimOp::create(b, loc, w, 0);
    Value rem = arith::RemUIOp::create(b, loc, c, indexConst(b, loc, G));
    guardEqual(b, loc, OpFoldResult(rem), b.getIndexAttr(0),
               "input channels must be divisible by groups");
  }
}

/// Weight dim 1 times the groups: a transposed convolution's output
/// channels.
OpFoldResult transposedOutChannels(OpBuilder &b, Location loc, Value w,
                                   int64_t G) {
  auto wt = cast<RankedTensorType>(w.getType());
  if (!wt.isDynamicDim(1))
    return b.getIndexAttr(wt.getDimSize(1) * G);
  Value cg = tensor::DimOp::create(b, loc, w, 1);
  return arith::MulIOp::create(b, loc, cg, indexConst(b, loc, G)).getResult();
}

/// `v` with dim `dim` split into (outer, size / outer).
Value splitDim(OpBuilder &b, Location loc, Value v, int64_t dim,
               int64_t outer) {
  auto t = cast<RankedTensorType>(v.getType());
  SmallVector<OpFoldResult> sizes = getSizes(b, loc, v);
  SmallVector<int64_t> shape;
  SmallVector<OpFoldResult> outShape;
  SmallVector<ReassociationIndices> groups;
  for (int64_t d = 0; d < t.getRank(); ++d) {
    int64_t at = shape.size();
    if (d != dim) {
      groups.push_back({at});
      shape.push_back(t.getDimSize(d));
      outShape.push_back(sizes[d]);
      continue;
    }
    groups.push_back({at, at + 1});
    shape.push_back(outer);
    outShape.push_back(b.getIndexAttr(outer));
    if (t.isDynamicDim(d)) {
      shape.push_back(ShapedType::kDynamic);
      outShape.push_back(arith::DivUIOp::create(b, loc, cast<Value>(sizes[d]),
                                                indexConst(b, loc, outer))
                             .getResult());
    } else {
      shape.push_back(t.getDimSize(d) / outer);
      outShape.push_back(b.getIndexAttr(t.getDimSize(d) / outer));
    }
  }
  return tensor::ExpandShapeOp::create(
      b, loc, RankedTensorType::get(shape, t.getElementType()), v, groups,
      outShape);
}

/// `v` with dims `dim` and `dim + 1` merged.
Value mergeDims(OpBuilder &b, Location loc, Value v, int64_t dim) {
  int64_t rank = cast<RankedTensorType>(v.getType()).getRank();
  return tensor::CollapseShapeOp::create(b, loc, v,
                                         mergedDimsReassociation(rank, dim));
}

Value zeroFilled(OpBuilder &b, Location loc, ArrayRef<OpFoldResult> sizes,
                 Type et) {
  Value init = tensor::EmptyOp::create(b, loc, sizes, et);
  return linalg::FillOp::create(b, loc, scalarConstant(b, loc, et, 0.0), init)
      .getResult(0);
}

Value mulAdd(OpBuilder &b, Location loc, Value acc, Value x, Value y) {
  return arith::AddFOp::create(b, loc, acc,
                               arith::MulFOp::create(b, loc, x, y));
}

/// A linalg.generic accumulating ins[0] * ins[1] (or ins[0]) into `init`.
Value buildReduction(OpBuilder &b, Location loc, Value init, ValueRange ins,
                     ArrayRef<AffineMap> maps,
                     ArrayRef<utils::IteratorType> iters) {
  return linalg::GenericOp::create(
             b, loc, init.getType(), ins, init, maps, iters,
             [&](OpBuilder &nb, Location nl, ValueRange a) {
               Value r = ins.size() == 2
                             ? mulAdd(nb, nl, a[2], a[0], a[1])
                             : Value(arith::AddFOp::create(nb, nl, a[1], a[0]));
               linalg::YieldOp::create(nb, nl, r);
             })
      .getResult(0);
}

/// The window of `v` (N, C, H, W) at spatial `offsets` with spatial `sizes`.
Value sliceSpatial(OpBuilder &b, Location loc, Value v,
                   ArrayRef<int64_t> offsets, ArrayRef<OpFoldResult> sizes) {
  SmallVector<OpFoldResult> vs = getSizes(b, loc, v);
  SmallVector<OpFoldResult> offs = {b.getIndexAttr(0), b.getIndexAttr(0),
                                    b.getIndexAttr(offsets[0]),
                                    b.getIndexAttr(offsets[1])};
  SmallVector<OpFoldResult> szs = {vs[0], vs[1], sizes[0], sizes[1]};
  SmallVector<OpFoldResult> ones(4, b.getIndexAttr(1));
  return tensor::ExtractSliceOp::create(b, loc, v, offs, szs, ones);
}

/// Records on the generic defining `r` which library routine it computes
/// (terra-library-convolutions replaces it when its maps are still the
/// ones built from these parameters).
void tagLibrary(OpBuilder &b, Value r, StringRef routine,
                ArrayRef<int64_t> stride, ArrayRef<int64_t> dilation) {
  Operation *op = r.getDefiningOp();
  op->setAttr(kLibraryAttr, b.getStringAttr(routine));
  op->setAttr(kLibraryStrideAttr, b.getDenseI64ArrayAttr(stride));
  op->setAttr(kLibraryDilationAttr, b.getDenseI64ArrayAttr(dilation));
}

//===----------------------------------------------------------------------===//
// Builders: the forward convolution and the gradients
//===----------------------------------------------------------------------===//

/// The forward convolution of `x` (N, C, H, W) with `w` (F, C/G, KH, KW),
/// accumulated into `init` (N, F, OH, OW): tensor.pad, then
/// linalg.conv_2d_nchw_fchw, or conv_2d_ngchw_gfchw on group-split views.
Value convForward(OpBuilder &b, Location loc, Value x, Value w, Value init,
                  const ConvParams &p) {
  Type et = cast<RankedTensorType>(x.getType()).getElementType();
  Value zero = scalarConstant(b, loc, et, 0.0);
  Value xp = padTrailing(b, loc, x, p.padding, p.padding, zero);
  auto strides = b.getI64TensorAttr(p.stride);
  auto dilations = b.getI64TensorAttr(p.dilation);
  if (p.groups == 1)
    return linalg::Conv2DNchwFchwOp::create(b, loc, init.getType(),
                                            ValueRange{xp, w}, ValueRange{init},
                                            strides, dilations)
        .getResult(0);
  Value xg = splitDim(b, loc, xp, 1, p.groups);
  Value wg = splitDim(b, loc, w, 0, p.groups);
  Value ig = splitDim(b, loc, init, 1, p.groups);
  Value r = linalg::Conv2DNgchwGfchwOp::create(
                b, loc, ig.getType(), ValueRange{xg, wg}, ValueRange{ig},
                strides, dilations)
                .getResult(0);
  return mergeDims(b, loc, r, 1);
}

/// grad_input (N, C, H, W) of a 2-D convolution. Writing q for the part of
/// the padding that the kernel extent absorbs (min(pad, (K-1)*dil)),
/// grad_output goes into a zero tensor Z at offset (K-1)*dil - q every `stride`
/// elements; then grad_in'[h] = sum_{f,i} Z[h + (K-1-i)*dil] * weight[f, c, i]
/// is the gradient of the input padded by the remaining pad - q, which is
/// sliced off at the end. Only the input's spatial sizes `in` and `g`'s
/// kernel sizes matter: the output rows are grad_output's. Any of them may
/// be a run-time value.
Value convGradInput(OpBuilder &b, Location loc, Value go, Value w,
                    const ConvParams &p, const ConvGeom &g,
                    ArrayRef<OpFoldResult> in) {
  auto goT = cast<RankedTensorType>(go.getType());
  Type et = goT.getElementType();
  int64_t G = p.groups;
  int64_t K[2] = {g.KH, g.KW};
  SmallVector<OpFoldResult> out = getSizes(b, loc, go);
  SmallVector<int64_t> low, rest;
  SmallVector<OpFoldResult> inner, zsize;
  for (int d = 0; d < 2; ++d) {
    int64_t ext = (K[d] - 1) * p.dilation[d];
    int64_t q = std::min(p.padding[d], ext);
    low.push_back(ext - q);
    rest.push_back(p.padding[d] - q);
    inner.push_back(addIndex(b, loc, in[d], 2 * rest.back()));
    // max(inner + ext, low + (out - 1) * stride + 1)
    zsize.push_back(
        maxIndex(b, loc, addIndex(b, loc, inner.back(), ext),
                 addIndex(b, loc, mulIndex(b, loc, out[2 + d], p.stride[d]),
                          low.back() - p.stride[d] + 1)));
  }
  Value zero = scalarConstant(b, loc, et, 0.0);
  Value z = spreadTrailing(b, loc, go, zero, zsize, low, p.stride);
  Value zg = splitDim(b, loc, z, 1, G); // N, G, Fg, Hz, Wz
  Value wg = splitDim(b, loc, w, 0, G); // G, Fg, Cg, KH, KW
  SmallVector<OpFoldResult> sizes = {
      out[0], b.getIndexAttr(G), getSizes(b, loc, w)[1], inner[0], inner[1]};
  Value init = zeroFilled(b, loc, sizes, et);
  // Loops (n, g, c | f, i, j | h, w): spatial loops innermost, so that the
  // loops that convert-linalg-to-loops emits carry no dependence through
  // memory in the innermost loop and stream contiguous rows.
  ConvGradMaps m = convGradInputMaps(b.getContext(), {K[0], K[1]},
                                     {p.dilation[0], p.dilation[1]});
  Value r = buildReduction(b, loc, init, {zg, wg}, m.maps, m.iterators);
  tagLibrary(b, r, "conv2d_grad_input", {1, 1}, p.dilation);
  r = mergeDims(b, loc, r, 1); // N, C, H', W'
  if (rest[0] == 0 && rest[1] == 0)
    return r;
  return sliceSpatial(b, loc, r, rest, in);
}

/// grad_weight (F, Cg, KH, KW): sum_{n,oh,ow} xpad[n, c, oh*s + i*d] *
/// grad_output[n, f, oh], per group.
Value convGradWeight(OpBuilder &b, Location loc, Value go, Value x, Value w,
                     const ConvParams &p, const ConvGeom &g) {
  Type et = cast<RankedTensorType>(go.getType()).getElementType();
  int64_t G = p.groups;
  Value zero = scalarConstant(b, loc, et, 0.0);
  Value xp = padTrailing(b, loc, x, p.padding, p.padding, zero);
  Value xg = splitDim(b, loc, xp, 1, G); // N, G, Cg, Hp, Wp
  Value gg = splitDim(b, loc, go, 1, G); // N, G, Fg, OH, OW
  SmallVector<OpFoldResult> sizes = {
      b.getIndexAttr(G), getSizes(b, loc, gg)[2], getSizes(b, loc, w)[1],
      b.getIndexAttr(g.KH), b.getIndexAttr(g.KW)};
  Value init = zeroFilled(b, loc, sizes, et);
  // Loops (g, f, c | n, oh, ow | i, j): the innermost (kernel) loops update
  // distinct grad_weight elements, so no dependence goes through memory
  // from one innermost iteration to the next.
  ConvGradMaps m = convGradWeightMaps(b.getContext(),
                                      {p.stride[0], p.stride[1]},
                                      {p.dilation[0], p.dilation[1]});
  Value r = buildReduction(b, loc, init, {xg, gg}, m.maps, m.iterators);
  tagLibrary(b, r, "conv2d_grad_weight", p.stride, p.dilation);
  return mergeDims(b, loc, r, 0);
}

/// grad_bias (F): grad_output summed over batch and space.
Value convGradBias(OpBuilder &b, Location loc, Value go) {
  Type et = cast<RankedTensorType>(go.getType()).getElementType();
  Value init = zeroFilled(b, loc, {getSizes(b, loc, go)[1]}, et);
  MLIRContext *ctx = b.getContext();
  auto d = [&](unsigned i) { return getAffineDimExpr(i, ctx); };
  // Loops (f | n, oh, ow).
  auto gMap = AffineMap::get(4, 0, {d(1), d(0), d(2), d(3)}, ctx);
  auto oMap = AffineMap::get(4, 0, {d(0)}, ctx);
  using It = utils::IteratorType;
  return buildReduction(
      b, loc, init, {go}, {gMap, oMap},
      {It::parallel, It::reduction, It::reduction, It::reduction});
}

/// `r` (N, C, H, W) plus `bias` (C) broadcast over batch and space, in place.
Value addChannelBias(OpBuilder &b, Location loc, Value r, Value bias) {
  MLIRContext *ctx = b.getContext();
  auto d = [&](unsigned i) { return getAffineDimExpr(i, ctx); };
  auto bMap = AffineMap::get(4, 0, {d(1)}, ctx);
  auto id = AffineMap::getMultiDimIdentityMap(4, ctx);
  SmallVector<utils::IteratorType> iters(4, utils::IteratorType::parallel);
  return linalg::GenericOp::create(
             b, loc, r.getType(), ValueRange{bias}, ValueRange{r},
             ArrayRef<AffineMap>{bMap, id}, iters,
             [&](OpBuilder &nb, Location nl, ValueRange a) {
               linalg::YieldOp::create(
                   nb, nl, Value(arith::AddFOp::create(nb, nl, a[1], a[0])));
             })
      .getResult(0);
}

/// Transposed convolutions, as the ordinary convolution (weight `w`, same
/// stride, padding, dilation and groups) whose input gradient they are; `g`
/// from getTransposedGeometry. `x` is the transposed convolution's input
/// (N, Cin, H, W) and `y` its output or output gradient (N, Cout, g.H, g.W).

/// `x` with the zero rows and columns appended that make it the ordinary
/// convolution's output (OH, OW) (none unless output_padding >= stride).
Value transposedExtendInput(OpBuilder &b, Location loc, Value x,
                            const ConvGeom &g) {
  auto t = cast<RankedTensorType>(x.getType());
  Value zero = scalarConstant(b, loc, t.getElementType(), 0.0);
  return padTrailing(b, loc, x, {0, 0},
                     {g.OH - t.getDimSize(2), g.OW - t.getDimSize(3)}, zero);
}

/// The forward: the ordinary convolution's input gradient at grad_output =
/// x.
Value transposedForward(OpBuilder &b, Location loc, Value x, Value w,
                        const ConvParams &p, const ConvGeom &g) {
  return convGradInput(b, loc, transposedExtendInput(b, loc, x, g), w, p, g,
                       {b.getIndexAttr(g.H), b.getIndexAttr(g.W)});
}

/// grad of x: the ordinary convolution of `y` = grad_output, cut to x's
/// size.
Value transposedGradInput(OpBuilder &b, Location loc, Value y, Value x, Value w,
                          const ConvParams &p, const ConvGeom &g) {
  Type et = cast<RankedTensorType>(y.getType()).getElementType();
  Value init = zeroFilled(b, loc,
                          {getSizes(b, loc, y)[0], getSizes(b, loc, w)[0],
                           b.getIndexAttr(g.OH), b.getIndexAttr(g.OW)},
                          et);
  Value r = convForward(b, loc, y, w, init, p);
  auto xt = cast<RankedTensorType>(x.getType());
  if (g.OH == xt.getDimSize(2) && g.OW == xt.getDimSize(3))
    return r;
  return sliceSpatial(
      b, loc, r, {0, 0},
      {b.getIndexAttr(xt.getDimSize(2)), b.getIndexAttr(xt.getDimSize(3))});
}

/// grad of w (Cin, Cout/G, KH, KW): the ordinary convolution's weight
/// gradient with input `y` = grad_output and grad_output x.
Value transposedGradWeight(OpBuilder &b, Location loc, Value y, Value x,
                           Value w, const ConvParams &p, const ConvGeom &g) {
  return convGradWeight(b, loc, transposedExtendInput(b, loc, x, g), y, w, p,
                        g);
}

//===----------------------------------------------------------------------===//
// aten.convolution
//===----------------------------------------------------------------------===//

LogicalResult lowerConvolution(DLOp op, ValueRange o, PatternRewriter &rw) {
  // 1. Static properties.
  if ((o.size() != 2 && o.size() != 3) || op.getNumResults() != 1)
    return rw.notifyMatchFailure(op, "expects input, weight, optional bias");
  if (DictionaryAttr args = op.getArgsAttr())
    if (o.size() == 3 && isa_and_nonnull<UnitAttr>(args.get("bias")))
      return rw.notifyMatchFailure(op, "bias operand given but args say None");
  auto xT = cast<RankedTensorType>(o[0].getType());
  auto wT = cast<RankedTensorType>(o[1].getType());
  RankedTensorType resT = resultType(op);
  int64_t rank = xT.getRank();
  Type et = xT.getElementType();
  if ((rank != 3 && rank != 4) || wT.getRank() != rank ||
      resT.getRank() != rank || !isConvFloat(et) || wT.getElementType() != et ||
      resT.getElementType() != et)
    return rw.notifyMatchFailure(op, "expects 1-D/2-D f32/f64 convolution");
  StringRef why;
  std::optional<ConvParams> p = getConvParams(op, rank - 2, why);
  if (!p)
    return rw.notifyMatchFailure(op, why);
  RankedTensorType x4 = as4d(xT), w4 = as4d(wT), r4 = as4d(resT);
  std::optional<ConvGeom> g = p->transposed ? getTransposedGeometry(x4, w4, *p)
                                            : getGeometry(x4, w4, *p);
  if (!g)
    return rw.notifyMatchFailure(op, "dynamic spatial or mismatched sizes");
  // The result's channels and spatial sizes (a transposed convolution's
  // output is the ordinary convolution's input).
  int64_t outC =
      p->transposed ? transposedOutChannels(w4, p->groups) : w4.getDimSize(0);
  int64_t outH = p->transposed ? g->H : g->OH;
  int64_t outW = p->transposed ? g->W : g->OW;
  if (!compatible(r4.getDimSize(0), x4.getDimSize(0)) ||
      !compatible(r4.getDimSize(1), outC) ||
      !compatible(r4.getDimSize(2), outH) ||
      !compatible(r4.getDimSize(3), outW))
    return rw.notifyMatchFailure(op, "result type does not match");
  Value bias = o.size() == 3 ? o[2] : Value();
  if (bias) {
    auto bT = cast<RankedTensorType>(bias.getType());
    if (bT.getRank() != 1 || bT.getElementType() != et ||
        !compatible(bT.getDimSize(0), outC))
      return rw.notifyMatchFailure(op, "bias must be 1-D with F elements");
  }

  // 2. Runtime guards.
  Location loc = op.getLoc();
  Value x = o[0], w = o[1];
  if (rank == 3) {
    x = insertUnitDim(rw, loc, x, 2);
    w = insertUnitDim(rw, loc, w, 2);
  }
  int64_t G = p->groups;
  if (p->transposed)
    guardTransposedChannels(rw, loc, x, w, G);
  else
    guardChannels(rw, loc, x, w, G);
  if (bias)
    guardEqual(rw, loc,
               p->transposed ? transposedOutChannels(rw, loc, w, G)
                             : getSizes(rw, loc, w)[0],
               getSizes(rw, loc, bias)[0],
               "bias size must equal output channels");

  Value r;
  if (p->transposed) {
    // 3./4. The ordinary convolution's input gradient at grad_output = x,
    // then the bias.
    r = transposedForward(rw, loc, x, w, *p, *g);
    if (bias)
      r = addChannelBias(rw, loc, r, bias);
  } else {
    // 3. Init: the broadcast bias, or zeros.
    SmallVector<OpFoldResult> sizes = {getSizes(rw, loc, x)[0],
                                       getSizes(rw, loc, w)[0],
                                       convOutSize(rw, loc, x, 0, g->KH, *p),
                                       convOutSize(rw, loc, x, 1, g->KW, *p)};
    Value init;
    if (bias) {
      Value empty = tensor::EmptyOp::create(rw, loc, sizes, et);
      init = linalg::BroadcastOp::create(rw, loc, bias, empty,
                                         ArrayRef<int64_t>{0, 2, 3})
                 ->getResult(0);
    } else {
      init = zeroFilled(rw, loc, sizes, et);
    }
    // 4. The named convolution on the padded input.
    r = convForward(rw, loc, x, w, init, *p);
  }
  if (rank == 3)
    r = dropUnitDim(rw, loc, r, 2);
  rw.replaceOp(op, castWithGuards(rw, loc, r, resT));
  return success();
}

//===----------------------------------------------------------------------===//
// aten.convolution_backward
//===----------------------------------------------------------------------===//

std::optional<SmallVector<bool, 3>> getOutputMask(DLOp op) {
  DictionaryAttr args = op.getArgsAttr();
  Attribute a = args ? args.get("output_mask") : Attribute();
  if (!a)
    return SmallVector<bool, 3>{true, true, true};
  auto arr = dyn_cast<ArrayAttr>(a);
  if (!arr || arr.size() != 3)
    return std::nullopt;
  SmallVector<bool, 3> mask;
  for (Attribute e : arr) {
    if (auto bl = dyn_cast<BoolAttr>(e))
      mask.push_back(bl.getValue());
    else if (auto i = dyn_cast<IntegerAttr>(e))
      mask.push_back(i.getValue() != 0);
    else
      return std::nullopt;
  }
  return mask;
}

LogicalResult lowerConvolutionBackward(DLOp op, ValueRange o,
                                       PatternRewriter &rw) {
  // 1. Static properties.
  if (o.size() != 3)
    return rw.notifyMatchFailure(op, "expects grad_output, input, weight");
  auto goT = cast<RankedTensorType>(o[0].getType());
  auto xT = cast<RankedTensorType>(o[1].getType());
  auto wT = cast<RankedTensorType>(o[2].getType());
  int64_t rank = xT.getRank();
  Type et = xT.getElementType();
  if ((rank != 3 && rank != 4) || goT.getRank() != rank ||
      wT.getRank() != rank || !isConvFloat(et) || goT.getElementType() != et ||
      wT.getElementType() != et)
    return rw.notifyMatchFailure(op, "expects 1-D/2-D f32/f64 convolution");
  StringRef why;
  std::optional<ConvParams> p = getConvParams(op, rank - 2, why);
  if (!p)
    return rw.notifyMatchFailure(op, why);
  std::optional<SmallVector<bool, 3>> mask = getOutputMask(op);
  if (!mask)
    return rw.notifyMatchFailure(op, "malformed output_mask");
  RankedTensorType go4 = as4d(goT), x4 = as4d(xT), w4 = as4d(wT);
  std::optional<ConvGeom> g = p->transposed ? getTransposedGeometry(x4, w4, *p)
                                            : getGeometry(x4, w4, *p);
  // grad_output has the forward result's channels and spatial sizes.
  int64_t outC =
      p->transposed ? transposedOutChannels(w4, p->groups) : w4.getDimSize(0);
  if (!g || !compatible(go4.getDimSize(0), x4.getDimSize(0)) ||
      !compatible(go4.getDimSize(1), outC) ||
      !compatible(go4.getDimSize(2), p->transposed ? g->H : g->OH) ||
      !compatible(go4.getDimSize(3), p->transposed ? g->W : g->OW))
    return rw.notifyMatchFailure(op, "dynamic spatial or mismatched sizes");
  // slot[k]: the result index of grad k (input, weight, bias), or -1.
  int slot[3] = {-1, -1, -1};
  unsigned requested = llvm::count(*mask, true);
  if (op.getNumResults() == 3) {
    slot[0] = 0, slot[1] = 1, slot[2] = 2;
  } else if (op.getNumResults() == requested) {
    for (int k = 0, next = 0; k < 3; ++k)
      if ((*mask)[k])
        slot[k] = next++;
  } else {
    return rw.notifyMatchFailure(op, "result count does not match mask");
  }
  RankedTensorType like[3] = {xT, wT, RankedTensorType::get({outC}, et)};
  for (int k = 0; k < 3; ++k) {
    if (slot[k] < 0)
      continue;
    RankedTensorType t = resultType(op, slot[k]);
    if (t.getRank() != like[k].getRank() || t.getElementType() != et)
      return rw.notifyMatchFailure(op, "result types do not match");
    for (int64_t d = 0; d < t.getRank(); ++d)
      if (!compatible(t.getDimSize(d), like[k].getDimSize(d)))
        return rw.notifyMatchFailure(op, "result types do not match");
  }

  // 2. Runtime guards.
  Location loc = op.getLoc();
  Value go = o[0], x = o[1], w = o[2];
  if (rank == 3) {
    go = insertUnitDim(rw, loc, go, 2);
    x = insertUnitDim(rw, loc, x, 2);
    w = insertUnitDim(rw, loc, w, 2);
  }
  if (p->transposed)
    guardTransposedChannels(rw, loc, x, w, p->groups);
  else
    guardChannels(rw, loc, x, w, p->groups);
  guardEqual(rw, loc, getSizes(rw, loc, go)[0], getSizes(rw, loc, x)[0],
             "grad_output batch must equal input batch");
  guardEqual(rw, loc, getSizes(rw, loc, go)[1],
             p->transposed ? transposedOutChannels(rw, loc, w, p->groups)
                           : getSizes(rw, loc, w)[0],
             "grad_output channels must equal the output channels");
  go = castWithGuards(
      rw, loc, go,
      RankedTensorType::get({go4.getDimSize(0), go4.getDimSize(1),
                             p->transposed ? g->H : g->OH,
                             p->transposed ? g->W : g->OW},
                            et));

  // 3./4. Each result: computed when requested, zeros otherwise.
  SmallVector<Value> results(op.getNumResults());
  for (int k = 0; k < 3; ++k) {
    if (slot[k] < 0)
      continue;
    RankedTensorType t = resultType(op, slot[k]);
    Value r;
    if (!(*mask)[k]) {
      // Sizes like x, w, or grad_output's channels.
      Value like = k == 0 ? o[1] : k == 1 ? o[2] : o[0];
      SmallVector<Value> dyn;
      for (int64_t d = 0; d < t.getRank(); ++d)
        if (t.isDynamicDim(d))
          dyn.push_back(tensor::DimOp::create(rw, loc, like, k == 2 ? 1 : d));
      Value empty = tensor::EmptyOp::create(rw, loc, t, dyn);
      r = linalg::FillOp::create(rw, loc, scalarConstant(rw, loc, et, 0.0),
                                 empty)
              .getResult(0);
    } else if (k == 0) {
      SmallVector<OpFoldResult> xSizes = getSizes(rw, loc, x);
      r = p->transposed
              ? transposedGradInput(rw, loc, go, x, w, *p, *g)
              : convGradInput(rw, loc, go, w, *p, *g, {xSizes[2], xSizes[3]});
    } else if (k == 1) {
      r = p->transposed ? transposedGradWeight(rw, loc, go, x, w, *p, *g)
                        : convGradWeight(rw, loc, go, x, w, *p, *g);
    } else {
      r = convGradBias(rw, loc, go);
    }
    if (rank == 3 && k < 2 && (*mask)[k])
      r = dropUnitDim(rw, loc, r, 2);
    results[slot[k]] = castWithGuards(rw, loc, r, t);
  }
  rw.replaceOp(op, results);
  return success();
}

} // namespace

void terra::populateConvolutionLowerings(LoweringRegistry &r) {
  r.add("aten.convolution", lowerConvolution);
  r.add("aten.convolution_backward", lowerConvolutionBackward);
}
