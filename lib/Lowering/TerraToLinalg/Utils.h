//===- Utils.h - Helpers shared by the terra lowering families --*- C++ -*-===//
//
// Every lowering follows the same recipe (see TerraToLinalg.cpp):
//   1. check static properties (dtypes, ranks, required args) and return
//      failure() when unsupported: the op then runs as a host callback;
//   2. emit runtime shape guards that static types cannot prove;
//   3. build init tensors from operand shapes;
//   4. emit the named or generic linalg op and replace the terra.op.
//
//===----------------------------------------------------------------------===//
#ifndef TERRA_LIB_LOWERING_UTILS_H
#define TERRA_LIB_LOWERING_UTILS_H

#include "terra/Lowering/TerraToLinalg.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/ControlFlow/IR/ControlFlow.h"
#include "mlir/Dialect/ControlFlow/IR/ControlFlowOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"

#include <functional>
#include <optional>

namespace terra::lowering {

using mlir::Location;
using mlir::OpBuilder;
using mlir::RankedTensorType;
using mlir::Type;
using mlir::Value;
using mlir::ValueRange;

// --- Args -----------------------------------------------------------------
std::optional<int64_t> getIntArg(DLOp op, llvm::StringRef name);
std::optional<double> getFloatArg(DLOp op, llvm::StringRef name);
std::optional<bool> getBoolArg(DLOp op, llvm::StringRef name);
/// A bool list arg of `n` entries (`output_mask`); absent means all true,
/// nullopt when malformed.
std::optional<llvm::SmallVector<bool>> boolListArg(DLOp op,
                                                   llvm::StringRef name,
                                                   size_t n);
/// An int list arg; a single int is a one-element list. nullopt when absent
/// or when an entry is symbolic (see getSizeListArg).
std::optional<llvm::SmallVector<int64_t>> getIntListArg(DLOp op,
                                                        llvm::StringRef name);
/// One entry of a size-list arg: a number, or dim `dim` of tensor operand
/// `operand` (`#terra.dim<operand, dim>`, a size the tracer recorded
/// symbolically so that it follows the operand's shape).
struct SizeArg {
  int64_t value = 0;
  int64_t operand = -1; ///< -1: the entry is `value`
  unsigned dim = 0;
  bool isSymbolic() const { return operand >= 0; }
  /// Whether the entry gives a size (a symbolic one or a number >= 0), not
  /// -1 (inferred by a reshape, kept by expand).
  bool hasSize() const { return isSymbolic() || value >= 0; }
};
/// A size-list arg whose entries may be symbolic; a single int is a
/// one-element list. nullopt when absent or malformed.
std::optional<llvm::SmallVector<SizeArg>> getSizeListArg(DLOp op,
                                                         llvm::StringRef name);
/// A scalar size arg (an int or one `#terra.dim`); nullopt when absent or
/// of another kind.
std::optional<SizeArg> getSizeArg(DLOp op, llvm::StringRef name);
/// The entry as a static number: its value, or the operand's dim when that
/// is static; ShapedType::kDynamic otherwise. Operands are `op`'s inputs,
/// shape operands included.
int64_t staticSize(const SizeArg &s, DLOp op);
/// The entry of `op`'s arg as an index value (a constant, or tensor.dim of
/// the operand).
Value sizeValue(OpBuilder &b, Location loc, const SizeArg &s, DLOp op);

// --- Scalars --------------------------------------------------------------
/// Converts a scalar between int, float and i1 element types like PyTorch.
Value castScalar(OpBuilder &b, Location loc, Value v, Type to);
/// A constant of element type `type` holding `value`.
Value scalarConstant(OpBuilder &b, Location loc, Type type, double value);
/// A constant of `like`'s (scalar) type holding `value`.
Value cst(OpBuilder &b, Location loc, Value like, double value);
/// The scalar operand for `name`: the op's tensor operand `operandIndex` if
/// it exists (a 0-d fed value, extracted), otherwise the `name` arg, cast
/// to `type`. Returns null if neither exists.
Value scalarArgOrOperand(OpBuilder &b, DLOp op, ValueRange operands,
                         unsigned operandIndex, llvm::StringRef name,
                         Type type);

// --- Tensors --------------------------------------------------------------
RankedTensorType resultType(DLOp op, unsigned i = 0);
/// Whether `t` is a tensor of static shape with no elements: a value that
/// carries no data (cuDNN batch norm's reserve space), whatever its type.
inline bool isEmptyTensor(Type t) {
  auto shaped = mlir::dyn_cast<mlir::ShapedType>(t);
  return shaped && shaped.hasStaticShape() && shaped.getNumElements() == 0;
}
/// The ranked tensor type of `v`.
inline RankedTensorType tensorType(Value v) {
  return mlir::cast<RankedTensorType>(v.getType());
}
bool isFloat(Type t);
/// tensor.empty of `type`, with dynamic sizes taken from `like` (which has
/// the same rank), or from `dynSizes` when given.
Value emptyLike(OpBuilder &b, Location loc, RankedTensorType type,
                Value like);
Value emptyWithSizes(OpBuilder &b, Location loc, RankedTensorType type,
                     ValueRange dynSizes);
/// Sizes of every dim of `v` (constants for static dims).
llvm::SmallVector<mlir::OpFoldResult> getSizes(OpBuilder &b, Location loc,
                                               Value v);

using BodyFn =
    std::function<Value(OpBuilder &b, Location loc, ValueRange args)>;

/// The indexing map that reads a tensor of type `in` broadcast to `out`
/// (numpy broadcasting, trailing dims aligned; a static size-1 dim reads
/// index 0).
mlir::AffineMap broadcastMap(RankedTensorType in, RankedTensorType out);
/// A broadcasting elementwise op over `inputs` producing `type` (numpy
/// broadcasting, trailing dims aligned). Scalar inputs (not tensors) are
/// passed through to the body as they are. Body arguments are the input
/// elements converted to `computeType` (default: type's element type).
Value buildElementwise(OpBuilder &b, Location loc, RankedTensorType type,
                       ValueRange inputs, const BodyFn &body,
                       Type computeType = nullptr);
/// `v` converted elementwise to element type `et` (`v` itself when it has
/// it): cat/stack's promotion, cumsum's accumulator and its rounding.
Value convertElements(OpBuilder &b, Location loc, Value v, Type et);

/// Replaces `op` with a single elementwise computation over its operands.
mlir::LogicalResult lowerElementwise(DLOp op, ValueRange operands,
                                     mlir::PatternRewriter &rw,
                                     const BodyFn &body);

// --- Windowed ops: convolution and pooling (Convolution.cpp, Pooling.cpp) --
/// A per-spatial-dim int list arg with `n` entries. A single int or a
/// one-entry list applies to every dim (as PyTorch expands it); an absent,
/// None (unit) or empty arg gives `dflt`; any other length gives nullopt.
std::optional<llvm::SmallVector<int64_t>>
getSpatialArg(DLOp op, llvm::StringRef name, unsigned n,
              llvm::ArrayRef<int64_t> dflt);
/// `v` padded by `low`/`high` on its trailing low.size() dims with
/// `padValue` (tensor.pad); `v` itself when every amount is 0.
Value padTrailing(OpBuilder &b, Location loc, Value v,
                  llvm::ArrayRef<int64_t> low, llvm::ArrayRef<int64_t> high,
                  Value padValue);
/// A tensor with `v`'s leading dims and the trailing `sizes`, filled with
/// `fill`, into which `v` is inserted at `offsets` every `strides` elements
/// along the trailing dims: the zero-interleaved tensor that turns the
/// backward of a strided window op into a stride-1 window op.
Value spreadTrailing(OpBuilder &b, Location loc, Value v, Value fill,
                     llvm::ArrayRef<int64_t> sizes,
                     llvm::ArrayRef<int64_t> offsets,
                     llvm::ArrayRef<int64_t> strides);
/// The same with sizes that may be run-time values.
Value spreadTrailing(OpBuilder &b, Location loc, Value v, Value fill,
                     llvm::ArrayRef<mlir::OpFoldResult> sizes,
                     llvm::ArrayRef<int64_t> offsets,
                     llvm::ArrayRef<int64_t> strides);
/// `v` with a unit dim inserted at / removed from `pos` (reshapes).
Value insertUnitDim(OpBuilder &b, Location loc, Value v, int64_t pos);
Value dropUnitDim(OpBuilder &b, Location loc, Value v, int64_t pos);
/// Emits a runtime guard that `x == y` unless both are constants (the
/// caller has then checked them statically).
void guardEqual(OpBuilder &b, Location loc, mlir::OpFoldResult x,
                mlir::OpFoldResult y, llvm::StringRef msg);
/// `v` as `type` (tensor.cast), guarding each dim that is dynamic in `v`
/// and static in `type`; `v` itself when the types are equal.
Value castWithGuards(OpBuilder &b, Location loc, Value v,
                     RankedTensorType type);

// --- Reductions and explicit-map generics (Reduction.cpp, Loss.cpp,
// Normalization.cpp) --------------------------------------------------------

/// A per-dim mask of the reduction `dims` of a rank-`rank` tensor: negative
/// dims count from the end and an empty list means every dim (a 0-d tensor
/// accepts 0 and -1 and reduces nothing). Returns nullopt for an
/// out-of-range or repeated dim.
std::optional<llvm::SmallVector<bool>>
reductionMask(llvm::ArrayRef<int64_t> dims, int64_t rank);
/// `input`'s shape reduced over `mask` with element type `elem`: reduced
/// dims are dropped, or kept with size 1 when `keepdim`.
RankedTensorType reducedType(RankedTensorType input, llvm::ArrayRef<bool> mask,
                             bool keepdim, Type elem);
/// The map from a reduction's iteration space (rank mask.size()) to its
/// reduced values: reduced dims are dropped, or read at index 0 (size-1
/// dims) when `keepdim`. With no dim masked it is the identity.
mlir::AffineMap reducedMap(mlir::MLIRContext *ctx, llvm::ArrayRef<bool> mask,
                           bool keepdim);
/// Whether a value of type `a` may stand where `b` is expected: same rank
/// and element type, equal sizes where both are static.
bool isCastCompatible(RankedTensorType a, RankedTensorType b);

using GenericBodyFn = std::function<llvm::SmallVector<Value>(
    OpBuilder &b, Location loc, ValueRange ins, ValueRange outs)>;

/// One linalg.generic iterating over the shape of `source` (which should be
/// one of `inputs`, read through the identity map), the dims set in `mask`
/// being reductions. Inputs are read through `inputMaps`; the body gets the
/// raw input elements and the current result elements and returns the new
/// result elements. Result i has type `resultTypes[i]` (the reduced shape,
/// see reducedType) and is written through reducedMap(mask, keepdim); its
/// dynamic sizes come from `source`. With `inits`, result i starts filled
/// with the scalar inits[i]; without, it starts uninitialized (only valid
/// when nothing is reduced).
llvm::SmallVector<Value>
buildGeneric(OpBuilder &b, Location loc, Value source,
             llvm::ArrayRef<bool> mask, bool keepdim, ValueRange inputs,
             llvm::ArrayRef<mlir::AffineMap> inputMaps,
             llvm::ArrayRef<RankedTensorType> resultTypes, ValueRange inits,
             const GenericBodyFn &body);
/// The number of elements of `v` in the dims set in `mask`, as a scalar of
/// int or float type `type`.
Value countElements(OpBuilder &b, Location loc, Value v,
                    llvm::ArrayRef<bool> mask, Type type);
/// Matches an aten schema's tensor parameters (`params`: name and whether
/// it is `Tensor?`, in schema order) with the op's operands. A None
/// optional tensor is not an operand; the args record it as `name = unit`.
/// Unmarked optionals are present, except that when the op has fewer
/// operands the last unmarked ones are taken as absent. Returns one value
/// per parameter (null for an absent one), or nullopt when the operands do
/// not fit.
std::optional<llvm::SmallVector<Value>>
matchTensorParams(DLOp op, ValueRange operands,
                  llvm::ArrayRef<std::pair<llvm::StringRef, bool>> params);
/// The infinity of float type `type` (negative when `negative`), or the
/// lowest/highest value of int type `type`.
Value extremeConstant(OpBuilder &b, Location loc, Type type, bool negative);

// --- Failure without side effects (DataMovement.cpp, TensorConstructors.cpp,
// Optimizer.cpp, Random.cpp) ------------------------------------------------

/// Runs `fn` on `op`; when it fails, erases the ops it had already built
/// (before `op`, at the rewriter's insertion point), so that a failed
/// lowering leaves the IR untouched. Without this, a lowering that creates
/// a constant and then returns failure() makes the greedy driver see a
/// change and retry until it gives up, failing the pass.
mlir::LogicalResult lowerOrRollBack(LowerFn fn, DLOp op, ValueRange operands,
                                    mlir::PatternRewriter &rw);
/// `Fn` wrapped in lowerOrRollBack, as a LowerFn for the registry.
template <LowerFn Fn>
mlir::LogicalResult rollBackOnFailure(DLOp op, ValueRange operands,
                                      mlir::PatternRewriter &rw) {
  return lowerOrRollBack(Fn, op, operands, rw);
}

} // namespace terra::lowering

#endif // TERRA_LIB_LOWERING_UTILS_H
