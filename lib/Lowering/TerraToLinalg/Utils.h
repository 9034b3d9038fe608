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
/// An int list arg; a single int is a one-element list.
std::optional<llvm::SmallVector<int64_t>> getIntListArg(DLOp op,
                                                        llvm::StringRef name);

// --- Scalars --------------------------------------------------------------
/// Converts a scalar between int, float and i1 element types like PyTorch.
Value castScalar(OpBuilder &b, Location loc, Value v, Type to);
/// A constant of element type `type` holding `value`.
Value scalarConstant(OpBuilder &b, Location loc, Type type, double value);
/// The scalar operand for `name`: the op's tensor operand `operandIndex` if
/// it exists (a 0-d fed value, extracted), otherwise the `name` arg, cast
/// to `type`. Returns null if neither exists.
Value scalarArgOrOperand(OpBuilder &b, DLOp op, ValueRange operands,
                         unsigned operandIndex, llvm::StringRef name,
                         Type type);

// --- Tensors --------------------------------------------------------------
RankedTensorType resultType(DLOp op, unsigned i = 0);
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

/// A broadcasting elementwise op over `inputs` producing `type` (numpy
/// broadcasting, trailing dims aligned). Scalar inputs (not tensors) are
/// passed through to the body as they are. Body arguments are the input
/// elements converted to `computeType` (default: type's element type).
Value buildElementwise(OpBuilder &b, Location loc, RankedTensorType type,
                       ValueRange inputs, const BodyFn &body,
                       Type computeType = nullptr);

/// Replaces `op` with a single elementwise computation over its operands.
mlir::LogicalResult lowerElementwise(DLOp op, ValueRange operands,
                                     mlir::PatternRewriter &rw,
                                     const BodyFn &body);

} // namespace terra::lowering

#endif // TERRA_LIB_LOWERING_UTILS_H
