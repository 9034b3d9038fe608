//===- LibraryCalls.cpp - The terra-library-calls pass --------------------===//
//
// After bufferization, GEMMs become calls of the runtime's library entry
// points (lib/Runtime/Library.cpp): OpenBLAS. Loops generated from the
// named linalg ops do not tile or pack, so they run far below the machine's
// peak; the library path is what PyTorch itself uses on CPU. (Convolutions
// become library calls earlier, on tensors: LibraryConvolutions.cpp.)
//
// Operands are passed as fully dynamic strided memrefs (`memref.cast`), so
// one entry point per element type serves every shape and layout; the
// runtime reads sizes and strides from the descriptors and hands transposed
// operands to BLAS without a copy; a transpose made only for the GEMM (the
// `aten.t` of a linear layer's weight, of its activations in backward)
// becomes a transposed view instead of a copy. A trailing i64 flag says whether
// the output is overwritten (a zero `linalg.fill` right before the op was
// folded away) or accumulated into, matching the linalg op's semantics.
//
// With `backend=cuda` the GPU pipeline gets the same rewrite for the matrix
// products, calling the cuBLAS entry points of lib/Runtime/Cuda; a transpose
// made only for the GEMM becomes a transposed view, and other operands not
// provably contiguous are copied first (see the pass description).
//
//===----------------------------------------------------------------------===//
#include "BufferWrites.h"
#include "RuntimeDecl.h"
#include "RuntimeNames.h"

#include "terra/Passes.h"

#include "mlir/IR/PatternMatch.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "mlir/Interfaces/ViewLikeInterface.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace terra {
#define GEN_PASS_DEF_TERRALIBRARYCALLS
#include "terra/Passes.h.inc"
} // namespace terra

using namespace mlir;
using namespace terra;

namespace {

/// f32 or f64: the element types the library entry points exist for.
std::optional<StringRef> librarySuffix(Type t) {
  if (t.isF32())
    return StringRef("f32");
  if (t.isF64())
    return StringRef("f64");
  return std::nullopt;
}

/// The fully dynamic strided memref type of `v`'s rank, or null when `v`
/// is not a memref with a strided layout.
MemRefType dynamicStridedType(Value v) {
  auto t = dyn_cast<MemRefType>(v.getType());
  if (!t || !t.isStrided())
    return {};
  SmallVector<int64_t> shape(t.getRank(), ShapedType::kDynamic);
  SmallVector<int64_t> strides(t.getRank(), ShapedType::kDynamic);
  auto layout = StridedLayoutAttr::get(t.getContext(), ShapedType::kDynamic,
                                       strides);
  return MemRefType::get(shape, t.getElementType(), layout,
                         t.getMemorySpace());
}

/// True when every operand is a strided memref of one library element type.
bool libraryOperands(ValueRange operands, std::string &suffix) {
  Type et;
  for (Value v : operands) {
    auto t = dyn_cast<MemRefType>(v.getType());
    if (!t || !t.isStrided() || (et && t.getElementType() != et))
      return false;
    et = t.getElementType();
  }
  auto s = librarySuffix(et);
  if (!s)
    return false;
  suffix = s->str();
  return true;
}

/// The zero fill of `out` directly before `op`, if any: the call can then
/// overwrite the output instead of accumulating, and the fill goes away.
linalg::FillOp zeroFillBefore(Operation *op, Value out) {
  for (Operation *prev = op->getPrevNode(); prev; prev = prev->getPrevNode()) {
    if (auto fill = dyn_cast<linalg::FillOp>(prev)) {
      if (fill.getOutputs()[0] != out)
        return {};
      FloatAttr zero;
      if (!matchPattern(fill.getInputs()[0], m_Constant(&zero)) ||
          !zero.getValue().isZero())
        return {};
      return fill;
    }
    // Anything that could touch memory between the fill and the op ends
    // the search; pure scalar ops (constants, index math) do not.
    if (!isMemoryEffectFree(prev) || prev->getNumRegions() != 0)
      return {};
  }
  return {};
}

class LibraryCallBuilder {
public:
  explicit LibraryCallBuilder(ModuleOp module) : module(module), symbols(module) {}

  /// Rewrites an operand before the call (after the zero fill was found).
  using Prepare = function_ref<Value(RewriterBase &, Location, Value)>;

  /// Replaces `op` by a call of `name` on `memrefs` (cast to dynamic
  /// strided types), then the overwrite flag (i64: an i1 argument has no
  /// well-defined C ABI without zeroext). `prepare`, when given, maps each
  /// operand other than `out` first.
  void replace(RewriterBase &rw, Operation *op, StringRef name,
               ValueRange memrefs, Value out, Prepare prepare = nullptr) {
    Location loc = op->getLoc();
    rw.setInsertionPoint(op);
    linalg::FillOp fill = zeroFillBefore(op, out);
    SmallVector<Value> args;
    for (Value v : memrefs) {
      if (prepare && v != out)
        v = prepare(rw, loc, v);
      MemRefType t = dynamicStridedType(v);
      args.push_back(t == v.getType() ? v
                                      : memref::CastOp::create(rw, loc, t, v));
    }
    args.push_back(arith::ConstantOp::create(
        rw, loc, rw.getI64IntegerAttr(fill ? 1 : 0)));
    func::FuncOp f = declare(name, ValueRange(args).getTypes());
    auto call = func::CallOp::create(rw, loc, f, args);
    // The call writes only its output (terra-protect-fetches and the
    // transposed-operand check read this, as for convolutions).
    auto outAt = llvm::find(memrefs, out) - memrefs.begin();
    call->setAttr("terra.writes", rw.getDenseI64ArrayAttr({int64_t(outAt)}));
    rw.eraseOp(op);
    if (fill)
      rw.eraseOp(fill);
  }

private:
  func::FuncOp declare(StringRef name, TypeRange inputs) {
    return terra::declareFunction(
        module, &symbols, name,
        FunctionType::get(module.getContext(), inputs, {}), true);
  }

  ModuleOp module;
  SymbolTable symbols;
};

bool hasIdentityLayout(Value v) {
  auto t = dyn_cast<MemRefType>(v.getType());
  return t && t.getLayout().isIdentity();
}

/// `v` itself when its type proves a contiguous row-major layout, else a
/// fresh identity-layout buffer holding a copy of it (cuBLAS needs a unit
/// stride and a leading dimension; a dynamic strided view proves neither).
Value contiguousCopy(RewriterBase &rw, Location loc, Value v) {
  if (hasIdentityLayout(v))
    return v;
  auto t = cast<MemRefType>(v.getType());
  SmallVector<Value> dynSizes;
  for (int64_t d = 0; d < t.getRank(); ++d)
    if (t.isDynamicDim(d))
      dynSizes.push_back(memref::DimOp::create(rw, loc, v, d));
  auto copyType =
      MemRefType::get(t.getShape(), t.getElementType(),
                      MemRefLayoutAttrInterface(), t.getMemorySpace());
  Value copy = memref::AllocOp::create(rw, loc, copyType, dynSizes);
  linalg::CopyOp::create(rw, loc, v, copy);
  return copy;
}

/// The buffer roots of every memref value of `module` (BufferRoots).
BufferRoots solvedRoots(ModuleOp module) {
  BufferRoots roots;
  module.walk([&](Operation *op) { roots.add(op); });
  roots.solve();
  return roots;
}

/// Whether `op` may write memory that `src` may point into: what it writes
/// (writtenBy: effects, a library call's `terra.writes`, nothing for the
/// runtime's entry points that only read or return fresh buffers), and for
/// a loop or branch what its nested ops write.
bool mayWrite(Operation *op, Value src, BufferRoots &roots) {
  std::optional<SmallVector<Value>> written = writtenBy(op);
  if (!written)
    return true;
  for (Value v : *written) {
    // A view this pass made (the casts of an earlier GEMM call's operands)
    // is not in the solved roots: its source is.
    while (!roots.roots.count(v))
      if (auto view = v.getDefiningOp<ViewLikeOpInterface>())
        v = view.getViewSource();
      else
        break;
    if (rootsMayAlias(roots, v, src))
      return true;
  }
  if (op->getNumRegions() == 0 ||
      !op->hasTrait<OpTrait::HasRecursiveMemoryEffects>())
    return false;
  WalkResult r = op->walk([&](Operation *inner) {
    if (inner != op && mayWrite(inner, src, roots))
      return WalkResult::interrupt();
    return WalkResult::advance();
  });
  return r.wasInterrupted();
}

/// For a GEMM operand `v` that a transpose kernel fills only for this GEMM
/// (`linalg.transpose ins(%src) outs(%v)` swapping the two innermost dims
/// of a row-major %src, %v a fresh buffer nothing else uses, and nothing
/// between the transpose and the GEMM that may write %src's memory): a
/// `memref.transpose` view of %src instead, which BLAS and cuBLAS read in
/// place as a column-major matrix (CblasTrans, CUBLAS_OP_T). The transpose
/// and its buffer are added to `dead`. Null if the pattern does not hold.
/// (terra-hoist-above-receives moves a weight's transpose to the top of the
/// graph, far from its GEMM: what lies between is checked for writes to
/// %src's buffer, not required to be pure.)
Value transposedView(RewriterBase &rw, Location loc, Value v, Operation *gemm,
                     SmallVectorImpl<Operation *> &dead, BufferRoots &roots) {
  auto alloc = v.getDefiningOp<memref::AllocOp>();
  if (!alloc || !hasIdentityLayout(v) ||
      llvm::count(gemm->getOperands(), v) != 1)
    return {};
  linalg::TransposeOp transpose;
  for (Operation *user : alloc->getUsers()) {
    if (user == gemm)
      continue;
    auto t = dyn_cast<linalg::TransposeOp>(user);
    if (!t || transpose || t.getInit() != v)
      return {};
    transpose = t;
  }
  if (!transpose || transpose->getBlock() != gemm->getBlock() ||
      !transpose->isBeforeInBlock(gemm))
    return {};
  ArrayRef<int64_t> perm = transpose.getPermutation();
  int64_t rank = perm.size();
  if (rank < 2 || perm[rank - 2] != rank - 1 || perm[rank - 1] != rank - 2)
    return {};
  for (int64_t d = 0; d + 2 < rank; ++d)
    if (perm[d] != d)
      return {};
  Value src = transpose.getInput();
  if (!hasIdentityLayout(src))
    return {};
  for (Operation *op = transpose->getNextNode(); op != gemm;
       op = op->getNextNode())
    if (mayWrite(op, src, roots))
      return {};
  // Nor may the GEMM write what it would read through the view.
  for (Value out : cast<DestinationStyleOpInterface>(gemm).getDpsInits())
    if (rootsMayAlias(roots, out, src))
      return {};
  SmallVector<unsigned> dims(perm.begin(), perm.end());
  auto map = AffineMap::getPermutationMap(dims, rw.getContext());
  Value view =
      memref::TransposeOp::create(rw, loc, src, AffineMapAttr::get(map));
  dead.push_back(transpose);
  dead.push_back(alloc);
  return view;
}

struct TerraLibraryCallsPass
    : public terra::impl::TerraLibraryCallsBase<TerraLibraryCallsPass> {
  using TerraLibraryCallsBase::TerraLibraryCallsBase;

  void runOnOperation() override {
    if (backend == "cuda")
      return runForCuda();
    if (backend != "cpu") {
      emitError(getOperation().getLoc())
          << "terra-library-calls: unknown backend '" << backend
          << "' (expected 'cpu' or 'cuda')";
      return signalPassFailure();
    }
    ModuleOp module = getOperation();
    LibraryCallBuilder builder(module);
    IRRewriter rw(module.getContext());
    SmallVector<Operation *> candidates;
    module.walk([&](linalg::LinalgOp op) {
      if (op.hasPureBufferSemantics())
        candidates.push_back(op);
    });
    BufferRoots roots = solvedRoots(module);
    // Erased at the end: the roots map holds their values.
    SmallVector<Operation *> dead;
    for (Operation *op : candidates) {
      std::string suffix;
      // BLAS reads a transposed operand in place (its transpose flag): a
      // transpose made only for the GEMM becomes a view, as for cuBLAS.
      auto prepare = [&](RewriterBase &rw, Location loc, Value v) {
        if (Value view = transposedView(rw, loc, v, op, dead, roots))
          return view;
        return v;
      };
      if (auto mm = dyn_cast<linalg::MatmulOp>(op)) {
        if (mm.hasUserDefinedMaps() || !libraryOperands(op->getOperands(), suffix))
          continue;
        builder.replace(rw, op, "terra_lib_matmul_" + suffix, op->getOperands(),
                        mm.getOutputs()[0], prepare);
        ++numGemm;
      } else if (auto bmm = dyn_cast<linalg::BatchMatmulOp>(op)) {
        if (bmm.hasUserDefinedMaps() ||
            !libraryOperands(op->getOperands(), suffix))
          continue;
        builder.replace(rw, op, "terra_lib_batch_matmul_" + suffix,
                        op->getOperands(), bmm.getOutputs()[0], prepare);
        ++numGemm;
      }
    }
    // The transposes read by the calls as views, then their buffers.
    for (Operation *d : dead)
      rw.eraseOp(d);
  }

  /// cuBLAS for the matrix products; convolutions stay generated code.
  void runForCuda() {
    ModuleOp module = getOperation();
    LibraryCallBuilder builder(module);
    IRRewriter rw(module.getContext());
    SmallVector<linalg::LinalgOp> candidates;
    module.walk([&](linalg::LinalgOp op) {
      if (op.hasPureBufferSemantics() &&
          isa<linalg::MatmulOp, linalg::BatchMatmulOp>(op))
        candidates.push_back(op);
    });
    BufferRoots roots = solvedRoots(module);
    SmallVector<Operation *> dead;
    for (linalg::LinalgOp op : candidates) {
      std::string suffix;
      Value out = op.getDpsInits()[0];
      bool userMaps =
          isa<linalg::MatmulOp>(op)
              ? cast<linalg::MatmulOp>(op).hasUserDefinedMaps()
              : cast<linalg::BatchMatmulOp>(op).hasUserDefinedMaps();
      if (userMaps || !hasIdentityLayout(out) ||
          !libraryOperands(op->getOperands(), suffix))
        continue;
      StringRef kind = isa<linalg::MatmulOp>(op) ? "matmul" : "batch_matmul";
      Operation *gemm = op;
      auto prepare = [&](RewriterBase &rw, Location loc, Value v) {
        if (Value view = transposedView(rw, loc, v, gemm, dead, roots))
          return view;
        return contiguousCopy(rw, loc, v);
      };
      builder.replace(rw, op, ("terra_cuda_" + kind + "_" + suffix).str(),
                      op->getOperands(), out, prepare);
      ++numGemm;
    }
    // The transposes read by the calls as views, then their buffers.
    for (Operation *d : dead)
      rw.eraseOp(d);
  }
};

} // namespace
