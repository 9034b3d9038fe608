//===- LibraryConvolutions.cpp - The terra-library-convolutions pass ------===//
//
// Before bufferization, every f32/f64 2-D convolution and convolution
// gradient that terra-convert-to-linalg built becomes a call of the
// runtime's convolution entry points (lib/Runtime/LibraryConv.cpp, oneDNN
// for f32): linalg.conv_2d_nchw_fchw, linalg.conv_2d_ngchw_gfchw and the
// gradient generics tagged `terra.library`. The pass works on tensors
// because the linalg form materializes what the library does implicitly:
// a zero-padded copy of the input (tensor.pad), and for the input gradient
// grad_output spread out with stride - 1 zeros (tensor.insert_slice into a
// zero fill). Those producers are recognized by what they compute, so the
// call gets the unpadded input and the original grad_output, with the
// padding and stride as parameters, and the copies die. Group splits
// (tensor.expand_shape) are looked through the same way; any other 5-D
// operand is collapsed to 4-D.
//
// Transposed convolutions need no entry points of their own: the lowering
// expresses them through these same ops (TerraToLinalg/Convolution.cpp),
// the forward as a grad_input generic whose spread-out grad_output is the
// transposed convolution's input, the backward as a forward convolution
// (grad_input) and a grad_weight generic with input and grad_output
// swapped (grad_weight), so they become the same oneDNN calls.
//
// The call is emitted in destination-passing style on buffers, inside the
// tensor program: inputs through `bufferization.to_buffer read_only` (one-
// shot bufferization hands over their buffers, host views included,
// without a copy), the output a fresh `memref.alloc` wrapped back with
// `bufferization.to_tensor restrict writable`. So every result is a fresh
// buffer, as the runtime's zero-copy fetches require (docs/runtime.md). A
// zero-filled init becomes `overwrite` = 1; the forward's broadcast bias
// init is passed as the bias; any other init is copied into the output
// first and accumulated into (`overwrite` = 0).
//
// With `backend=cuda` (the GPU pipeline) the calls go to the CUDA runtime's
// cuDNN entry points (lib/Runtime/Cuda/Cudnn.cpp), same ABI, for the
// problems cuDNN takes as they are (cudnnTakes).
//
// Spatial sizes may be dynamic (a pooling whose output size varies between
// the merged paths, SDPoint): the padding after the input is then left to
// the entry point, which derives it from the run's sizes (a negative
// bottom/right padding, include/terra/Runtime/LibraryEntryPoints.h). The
// kernel's sizes and the group count must be static. Ops that do not match
// (other element types, a generic whose maps fusion changed) stay linalg and
// become loops.
//
//===----------------------------------------------------------------------===//
#include "RuntimeDecl.h"

#include "terra/Lowering/ConvolutionMaps.h"
#include "terra/Passes.h"
#include "terra/Runtime/LibraryEntryPoints.h"

#include "mlir/IR/Matchers.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/IR/SymbolTable.h"

#include <limits>

namespace terra {
#define GEN_PASS_DEF_TERRALIBRARYCONVOLUTIONS
#include "terra/Passes.h.inc"
} // namespace terra

using namespace mlir;
using namespace terra;

namespace {

/// One call of a convolution entry point.
struct ConvCall {
  StringRef routine;        // conv2d, conv2d_grad_input or conv2d_grad_weight
  Value in0, in1;           // the 4-D inputs, in call order
  Value bias;               // conv2d only; null without a bias
  Value init;               // the 4-D output's init; null when overwritten
  RankedTensorType outType; // the 4-D output
  SmallVector<OpFoldResult> outSizes; // its sizes
  // sh, sw, plh, plw, prh, prw, dh, dw, groups
  std::array<int64_t, 9> params;
};

/// `v` (rank 5) with dims `dim` and `dim + 1` merged: the source of the
/// tensor.expand_shape that split them, if that is what `v` is, else a
/// collapse.
Value ungroup(OpBuilder &b, Location loc, Value v, int64_t dim) {
  SmallVector<ReassociationIndices> groups = mergedDimsReassociation(5, dim);
  if (auto expand = v.getDefiningOp<tensor::ExpandShapeOp>())
    if (expand.getReassociationIndices() == groups)
      return expand.getSrc();
  return tensor::CollapseShapeOp::create(b, loc, v, groups);
}

/// `v` as the unpadded tensor and the zero padding of its two trailing
/// dims, when `v` is a tensor.pad of zeros with static amounts on those
/// dims only; else `v` with no padding.
struct Unpadded {
  Value value;
  int64_t low[2] = {0, 0}, high[2] = {0, 0};
};
Unpadded peelZeroPad(Value v) {
  Unpadded r{v};
  auto pad = v.getDefiningOp<tensor::PadOp>();
  if (!pad)
    return r;
  Value padValue = pad.getConstantPaddingValue();
  if (!padValue || !matchPattern(padValue, m_AnyZeroFloat()))
    return r;
  ArrayRef<int64_t> low = pad.getStaticLow(), high = pad.getStaticHigh();
  if (low.size() != 4 || ShapedType::isDynamicShape(low) ||
      ShapedType::isDynamicShape(high) || low[0] || low[1] || high[0] ||
      high[1])
    return r;
  r.value = pad.getSource();
  for (int d = 0; d < 2; ++d) {
    r.low[d] = low[2 + d];
    r.high[d] = high[2 + d];
  }
  return r;
}

/// True when `v` is a linalg.fill of zero, or a reshape of one.
bool isZeroFill(Value v) {
  while (Operation *def = v.getDefiningOp()) {
    if (auto e = dyn_cast<tensor::ExpandShapeOp>(def))
      v = e.getSrc();
    else if (auto c = dyn_cast<tensor::CollapseShapeOp>(def))
      v = c.getSrc();
    else
      break;
  }
  auto fill = v.getDefiningOp<linalg::FillOp>();
  return fill && fill.hasPureTensorSemantics() &&
         matchPattern(fill.getInputs()[0], m_AnyZeroFloat());
}

/// The bias of a forward init that broadcasts it over (N, ., OH, OW).
Value broadcastBias(Value init) {
  auto bcast = init.getDefiningOp<linalg::BroadcastOp>();
  if (!bcast || !bcast.hasPureTensorSemantics() ||
      cast<ShapedType>(bcast.getInput().getType()).getRank() != 1 ||
      bcast.getDimensions() != ArrayRef<int64_t>{0, 2, 3})
    return {};
  return bcast.getInput();
}

/// Sets `c.init` and the overwrite decision from the 4-D init.
void setInit(ConvCall &c, Value init4, bool forward) {
  if (isZeroFill(init4))
    return;
  if (forward)
    if (Value bias = broadcastBias(init4)) {
      c.bias = bias;
      return;
    }
  c.init = init4;
}

bool staticDims(Value v, ArrayRef<int64_t> dims) {
  auto t = cast<RankedTensorType>(v.getType());
  return llvm::none_of(dims, [&](int64_t d) { return t.isDynamicDim(d); });
}

int64_t dimOf(Value v, int64_t d) {
  return cast<RankedTensorType>(v.getType()).getDimSize(d);
}

/// The bottom (right) padding the library needs, given the top (left)
/// one, so that `out` output rows result from `in` input rows
/// (terra::rt::convHighPadding, preferring `preferred`); for a dynamic
/// `in` or `out`, the encoding that leaves it to the entry point. Fails
/// when static sizes leave none, or need more than `most`.
std::optional<int64_t> highPadding(int64_t in, int64_t out, int64_t k,
                                   int64_t stride, int64_t dil, int64_t low,
                                   int64_t preferred, int64_t most) {
  if (ShapedType::isDynamic(in) || ShapedType::isDynamic(out))
    return -1 - preferred;
  int64_t high =
      terra::rt::convHighPadding(in, out, k, stride, dil, low, preferred);
  if (high < 0 || high > most)
    return std::nullopt;
  return high;
}

/// Completes the parameters of a forward or weight-gradient call whose
/// input x was zero padded by `pad` into rows the output covers: the
/// padding after the input shrinks to what the output uses (at run time
/// for dynamic sizes: a valid linalg op's output never needs more than the
/// pad's).
bool setPadding(ConvCall &c, const Unpadded &pad, int64_t oh, int64_t ow,
                int64_t kh, int64_t kw) {
  Value x = pad.value;
  int64_t in[2] = {dimOf(x, 2), dimOf(x, 3)}, out[2] = {oh, ow},
          k[2] = {kh, kw};
  for (int d = 0; d < 2; ++d) {
    std::optional<int64_t> high =
        highPadding(in[d], out[d], k[d], c.params[d], c.params[6 + d],
                    pad.low[d], pad.high[d], /*most=*/pad.high[d]);
    if (!high)
      return false;
    c.params[2 + d] = pad.low[d];
    c.params[4 + d] = *high;
  }
  return true;
}

/// linalg.conv_2d_nchw_fchw / conv_2d_ngchw_gfchw.
std::optional<ConvCall> matchForward(OpBuilder &b, linalg::LinalgOp op) {
  bool grouped = isa<linalg::Conv2DNgchwGfchwOp>(op);
  Value x = op.getDpsInputs()[0], w = op.getDpsInputs()[1],
        init = op.getDpsInits()[0];
  // The kernel's spatial dims and, when grouped, the group count must be
  // static.
  if ((grouped && !staticDims(x, {1})) ||
      !staticDims(w,
                  grouped ? ArrayRef<int64_t>{3, 4} : ArrayRef<int64_t>{2, 3}))
    return std::nullopt;
  DenseIntElementsAttr strides, dilations;
  if (auto conv = dyn_cast<linalg::Conv2DNchwFchwOp>(*op)) {
    strides = conv.getStrides();
    dilations = conv.getDilations();
  } else {
    auto groupedConv = cast<linalg::Conv2DNgchwGfchwOp>(*op);
    strides = groupedConv.getStrides();
    dilations = groupedConv.getDilations();
  }
  auto s = llvm::to_vector(strides.getValues<int64_t>());
  auto d = llvm::to_vector(dilations.getValues<int64_t>());

  Location loc = op.getLoc();
  ConvCall c;
  c.routine = "conv2d";
  int64_t groups = grouped ? dimOf(x, 1) : 1;
  Value x4 = grouped ? ungroup(b, loc, x, 1) : x;
  Value w4 = grouped ? ungroup(b, loc, w, 0) : w;
  Value init4 = grouped ? ungroup(b, loc, init, 1) : init;
  Unpadded pad = peelZeroPad(x4);
  c.in0 = pad.value;
  c.in1 = w4;
  c.params = {s[0], s[1], 0, 0, 0, 0, d[0], d[1], groups};
  if (!setPadding(c, pad, dimOf(init4, 2), dimOf(init4, 3), dimOf(w4, 2),
                  dimOf(w4, 3)))
    return std::nullopt;
  setInit(c, init4, /*forward=*/true);
  c.outType = cast<RankedTensorType>(init4.getType());
  c.outSizes = tensor::getMixedSizes(b, loc, init4);
  return c;
}

/// True when `g`'s body is `out + in0 * in1` (the gradient reductions).
bool isMulAddBody(linalg::GenericOp g) {
  Block &body = g.getRegion().front();
  if (body.getOperations().size() != 3)
    return false;
  auto mul = dyn_cast<arith::MulFOp>(body.front());
  auto add = dyn_cast<arith::AddFOp>(*std::next(body.begin()));
  auto yield = dyn_cast<linalg::YieldOp>(body.getTerminator());
  if (!mul || !add || !yield || yield.getNumOperands() != 1 ||
      yield.getOperand(0) != add.getResult())
    return false;
  Value a0 = body.getArgument(0), a1 = body.getArgument(1),
        acc = body.getArgument(2);
  return mul.getLhs() == a0 && mul.getRhs() == a1 && add.getLhs() == acc &&
         add.getRhs() == mul.getResult();
}

/// The routine a tagged convolution-gradient generic computes, with its
/// stride and dilation, when its structure is still exactly the one the
/// lowering built.
struct ConvGradMatch {
  StringRef routine;
  std::array<int64_t, 2> stride, dilation;
};
std::optional<ConvGradMatch> matchConvGrad(linalg::GenericOp g) {
  auto routine = g->getAttrOfType<StringAttr>(kLibraryAttr);
  auto stride = g->getAttrOfType<DenseI64ArrayAttr>(kLibraryStrideAttr);
  auto dilation = g->getAttrOfType<DenseI64ArrayAttr>(kLibraryDilationAttr);
  if (!routine || !stride || !dilation || stride.size() != 2 ||
      dilation.size() != 2 || !g.hasPureTensorSemantics() ||
      g.getNumDpsInputs() != 2 || g.getNumDpsInits() != 1 || !isMulAddBody(g))
    return std::nullopt;
  for (Value v : g->getOperands()) {
    auto t = dyn_cast<RankedTensorType>(v.getType());
    if (!t || t.getRank() != 5)
      return std::nullopt;
  }
  ConvGradMatch m{
      routine.getValue(), {stride[0], stride[1]}, {dilation[0], dilation[1]}};
  ConvGradMaps expected;
  if (m.routine == "conv2d_grad_input") {
    // The kernel extent is part of the maps: read it off the weight.
    Value w = g.getDpsInputs()[1];
    if (!staticDims(w, {3, 4}))
      return std::nullopt;
    expected = convGradInputMaps(g.getContext(), {dimOf(w, 3), dimOf(w, 4)},
                                 m.dilation);
  } else if (m.routine == "conv2d_grad_weight") {
    expected = convGradWeightMaps(g.getContext(), m.stride, m.dilation);
  } else {
    return std::nullopt;
  }
  if (g.getIndexingMapsArray() != ArrayRef<AffineMap>(expected.maps) ||
      g.getIteratorTypesArray() !=
          ArrayRef<utils::IteratorType>(expected.iterators))
    return std::nullopt;
  return m;
}

/// The weight gradient: out (G, Fg, Cg, KH, KW) += x (N, G, Cg, Hp, Wp) *
/// grad_output (N, G, Fg, OH, OW), x the zero-padded input.
std::optional<ConvCall> matchGradWeight(OpBuilder &b, linalg::GenericOp g,
                                        const ConvGradMatch &m) {
  Value x = g.getDpsInputs()[0], dy = g.getDpsInputs()[1],
        init = g.getDpsInits()[0];
  if (!staticDims(x, {1}) || !staticDims(init, {3, 4}))
    return std::nullopt;
  Location loc = g.getLoc();
  ConvCall c;
  c.routine = "conv2d_grad_weight";
  Unpadded pad = peelZeroPad(ungroup(b, loc, x, 1));
  c.in0 = pad.value;
  c.in1 = ungroup(b, loc, dy, 1);
  c.params = {m.stride[0],   m.stride[1],   0,          0, 0, 0,
              m.dilation[0], m.dilation[1], dimOf(x, 1)};
  if (!setPadding(c, pad, dimOf(dy, 3), dimOf(dy, 4), dimOf(init, 3),
                  dimOf(init, 4)))
    return std::nullopt;
  Value init4 = ungroup(b, loc, init, 0);
  setInit(c, init4, /*forward=*/false);
  c.outType = cast<RankedTensorType>(init4.getType());
  c.outSizes = tensor::getMixedSizes(b, loc, init4);
  return c;
}

/// The input gradient: out (N, G, Cg, H', W') += Z (N, G, Fg, Hz, Wz) *
/// weight (G, Fg, Cg, KH, KW), correlating Z with the flipped kernel. When
/// Z is grad_output spread out (inserted with strides, at an offset, into
/// zeros), the call takes grad_output itself with that stride; any other Z
/// is a stride-1 problem.
std::optional<ConvCall> matchGradInput(OpBuilder &b, linalg::GenericOp g,
                                       const ConvGradMatch &m) {
  Value z = g.getDpsInputs()[0], w = g.getDpsInputs()[1],
        init = g.getDpsInits()[0];
  if (!staticDims(w, {0, 3, 4}))
    return std::nullopt;
  Location loc = g.getLoc();
  ConvCall c;
  c.routine = "conv2d_grad_input";
  Value z4 = ungroup(b, loc, z, 1);
  Value dy = z4;
  int64_t stride[2] = {1, 1}, offset[2] = {0, 0};
  if (auto ins = z4.getDefiningOp<tensor::InsertSliceOp>()) {
    ArrayRef<int64_t> offs = ins.getStaticOffsets(),
                      strs = ins.getStaticStrides();
    Value src = ins.getSource();
    auto srcT = cast<RankedTensorType>(src.getType());
    auto zT = cast<RankedTensorType>(z4.getType());
    bool fullLeading = true;
    for (int d = 0; d < 2; ++d)
      if (!srcT.isDynamicDim(d) && !zT.isDynamicDim(d) &&
          srcT.getDimSize(d) != zT.getDimSize(d))
        fullLeading = false;
    if (isZeroFill(ins.getDest()) && srcT.getRank() == 4 && fullLeading &&
        !ShapedType::isDynamicShape(offs) &&
        !ShapedType::isDynamicShape(strs) && offs[0] == 0 && offs[1] == 0 &&
        strs[0] == 1 && strs[1] == 1) {
      dy = src;
      for (int d = 0; d < 2; ++d) {
        stride[d] = strs[2 + d];
        offset[d] = offs[2 + d];
      }
    }
  }
  int64_t k[2] = {dimOf(w, 3), dimOf(w, 4)};
  c.params = {stride[0],     stride[1],     0,          0, 0, 0,
              m.dilation[0], m.dilation[1], dimOf(w, 0)};
  for (int d = 0; d < 2; ++d) {
    // out[h] sums Z[h + ext - i * dil] * w[i]: grad_output row oh sits at
    // Z row offset + oh * stride, so it meets input row h where
    // oh * stride + i * dil == h + ext - offset, i.e. with the padding
    // before the input ext - offset.
    int64_t low = (k[d] - 1) * m.dilation[d] - offset[d];
    if (low < 0)
      return std::nullopt;
    std::optional<int64_t> high = highPadding(
        dimOf(init, 3 + d), dimOf(dy, 2 + d), k[d], stride[d], m.dilation[d],
        low, /*preferred=*/low, /*most=*/std::numeric_limits<int64_t>::max());
    if (!high)
      return std::nullopt;
    c.params[2 + d] = low;
    c.params[4 + d] = *high;
  }
  c.in0 = dy;
  c.in1 = ungroup(b, loc, w, 0);
  Value init4 = ungroup(b, loc, init, 1);
  setInit(c, init4, /*forward=*/false);
  c.outType = cast<RankedTensorType>(init4.getType());
  c.outSizes = tensor::getMixedSizes(b, loc, init4);
  return c;
}

/// The fully dynamic strided memref type of rank `rank`.
MemRefType dynamicStrided(MLIRContext *ctx, int64_t rank, Type et) {
  SmallVector<int64_t> dyn(rank, ShapedType::kDynamic);
  return MemRefType::get(
      dyn, et, StridedLayoutAttr::get(ctx, ShapedType::kDynamic, dyn));
}

/// The buffer of tensor `v`, read-only, as a fully dynamic strided memref.
Value readBuffer(OpBuilder &b, Location loc, Value v) {
  auto t = cast<RankedTensorType>(v.getType());
  SmallVector<int64_t> strides(t.getRank(), ShapedType::kDynamic);
  auto viewType = MemRefType::get(
      t.getShape(), t.getElementType(),
      StridedLayoutAttr::get(b.getContext(), ShapedType::kDynamic, strides));
  Value buf = bufferization::ToBufferOp::create(b, loc, viewType, v,
                                                /*read_only=*/true);
  return memref::CastOp::create(
      b, loc, dynamicStrided(b.getContext(), t.getRank(), t.getElementType()),
      buf);
}

/// An empty bias (no bias) of element type `et`: a zero-element global of
/// the module.
Value emptyBias(OpBuilder &b, Location loc, ModuleOp module,
                SymbolTable &symbols, Type et) {
  std::string name =
      et.isF32() ? "terra_lib_no_bias_f32" : "terra_lib_no_bias_f64";
  auto type = MemRefType::get({0}, et);
  if (!symbols.lookup<memref::GlobalOp>(name)) {
    OpBuilder mb(module.getBodyRegion());
    mb.setInsertionPointToStart(module.getBody());
    auto global = memref::GlobalOp::create(
        mb, module.getLoc(), name, mb.getStringAttr("private"), type,
        DenseElementsAttr::get(RankedTensorType::get({0}, et),
                               ArrayRef<Attribute>{}),
        /*constant=*/true, /*alignment=*/nullptr);
    symbols.insert(global);
  }
  Value none = memref::GetGlobalOp::create(b, loc, type, name);
  return memref::CastOp::create(b, loc, dynamicStrided(b.getContext(), 1, et),
                                none);
}

/// Emits the call for `c` before the current insertion point; returns the
/// 4-D result tensor.
Value emitCall(OpBuilder &b, Location loc, SymbolTable &symbols,
               ModuleOp module, const ConvCall &c, StringRef prefix) {
  Type et = c.outType.getElementType();
  std::string name =
      (prefix + c.routine + "_" + (et.isF32() ? "f32" : "f64")).str();
  SmallVector<Value> args{readBuffer(b, loc, c.in0), readBuffer(b, loc, c.in1)};
  if (c.routine == "conv2d") {
    args.push_back(c.bias ? readBuffer(b, loc, c.bias)
                          : emptyBias(b, loc, module, symbols, et));
  }
  SmallVector<Value> dynSizes;
  for (auto [d, size] : llvm::enumerate(c.outSizes))
    if (c.outType.isDynamicDim(d))
      dynSizes.push_back(getValueOrCreateConstantIndexOp(b, loc, size));
  auto bufType = MemRefType::get(c.outType.getShape(), et);
  Value out = memref::AllocOp::create(b, loc, bufType, dynSizes);
  if (c.init)
    bufferization::MaterializeInDestinationOp::create(
        b, loc, TypeRange{}, c.init, out, /*restrict=*/true,
        /*writable=*/true);
  int64_t outIndex = args.size();
  args.push_back(memref::CastOp::create(
      b, loc, dynamicStrided(b.getContext(), 4, et), out));
  for (int64_t p : c.params)
    args.push_back(arith::ConstantOp::create(b, loc, b.getI64IntegerAttr(p)));
  args.push_back(
      arith::ConstantOp::create(b, loc, b.getI64IntegerAttr(c.init ? 0 : 1)));

  func::FuncOp fn = terra::declareFunction(
      module, &symbols, name,
      b.getFunctionType(ValueRange(args).getTypes(), {}), true);
  // The only buffer the call writes (-terra-protect-fetches: the inputs,
  // possibly fetched, are only read).
  func::CallOp::create(b, loc, fn, args)
      ->setAttr("terra.writes", b.getDenseI64ArrayAttr({outIndex}));
  return bufferization::ToTensorOp::create(b, loc, c.outType, out,
                                           /*restrict=*/true,
                                           /*writable=*/true);
}

/// Whether cuDNN takes `c` as it is: symmetric padding (a negative padding
/// after the input is derived at run time and checked there), and an
/// output the call overwrites (copying an init into device memory would be
/// host code).
bool cudnnTakes(const ConvCall &c) {
  // params: sh, sw, plh, plw, prh, prw, dh, dw, groups
  auto symmetric = [&](int low, int high) {
    return c.params[high] < 0 || c.params[high] == c.params[low];
  };
  return !c.init && symmetric(2, 4) && symmetric(3, 5);
}

/// `r4` in the rank-5 type of `like`, splitting dim `dim` as `like` does.
Value regroup(OpBuilder &b, Location loc, Value r4, Value like, int64_t dim) {
  SmallVector<ReassociationIndices> groups;
  for (int64_t d = 0; d < 4; ++d) {
    if (d < dim)
      groups.push_back({d});
    else if (d == dim)
      groups.push_back({d, d + 1});
    else
      groups.push_back({d + 1});
  }
  return tensor::ExpandShapeOp::create(b, loc, like.getType(), r4, groups,
                                       tensor::getMixedSizes(b, loc, like));
}

struct TerraLibraryConvolutionsPass
    : public terra::impl::TerraLibraryConvolutionsBase<
          TerraLibraryConvolutionsPass> {
  using TerraLibraryConvolutionsBase::TerraLibraryConvolutionsBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (backend != "cpu" && backend != "cuda") {
      module.emitError("terra-library-convolutions: unknown backend '")
          << backend << "' (cpu or cuda)";
      return signalPassFailure();
    }
    bool cuda = backend == "cuda";
    SymbolTable symbols(module);
    SmallVector<linalg::LinalgOp> candidates;
    module.walk([&](linalg::LinalgOp op) {
      if (!op.hasPureTensorSemantics() || op->getNumResults() != 1)
        return;
      Type et = getElementTypeOrSelf(op->getResult(0).getType());
      if (!et.isF32() && !et.isF64())
        return;
      if (llvm::any_of(op->getOperands(), [&](Value v) {
            return getElementTypeOrSelf(v.getType()) != et;
          }))
        return;
      if (isa<linalg::Conv2DNchwFchwOp, linalg::Conv2DNgchwGfchwOp,
              linalg::GenericOp>(op))
        candidates.push_back(op);
    });
    IRRewriter rw(module.getContext());
    for (linalg::LinalgOp op : candidates) {
      rw.setInsertionPoint(op);
      Location loc = op.getLoc();
      Value init = op.getDpsInits()[0];
      std::optional<ConvCall> call;
      int64_t groupedDim = -1; // the dim of the result a group split
      if (auto g = dyn_cast<linalg::GenericOp>(*op)) {
        std::optional<ConvGradMatch> m = matchConvGrad(g);
        if (!m)
          continue;
        bool input = m->routine == "conv2d_grad_input";
        call = input ? matchGradInput(rw, g, *m) : matchGradWeight(rw, g, *m);
        groupedDim = input ? 1 : 0;
      } else {
        call = matchForward(rw, op);
        if (isa<linalg::Conv2DNgchwGfchwOp>(*op))
          groupedDim = 1;
      }
      // A failed match may leave a dead collapse behind; canonicalization
      // removes it.
      if (!call)
        continue;
      if (cuda && !cudnnTakes(*call))
        continue;
      Value r = emitCall(rw, loc, symbols, module, *call,
                         cuda ? "terra_cuda_" : "terra_lib_");
      if (groupedDim >= 0)
        r = regroup(rw, loc, r, init, groupedDim);
      rw.replaceOp(op, r);
      ++numConv;
    }
  }
};

} // namespace
