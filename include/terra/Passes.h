//===- Passes.h - Terra pass declarations -----------------------*- C++ -*-===//
#ifndef TERRA_PASSES_H
#define TERRA_PASSES_H

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/ControlFlow/IR/ControlFlow.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"

#include "terra/Dialect/TerraDialect.h"

namespace terra {

#define GEN_PASS_DECL
#include "terra/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "terra/Passes.h.inc"

/// Adds the CPU pipeline from a lowered graph to the LLVM dialect:
/// linalg fusion, one-shot bufferization, loops, deallocation and LLVM.
void buildCPULoweringPipeline(mlir::OpPassManager &pm);
/// Registers `terra-cpu-pipeline` (convert-to-linalg + lower-graph + the
/// above) for terra-opt.
void registerTerraPipelines();

} // namespace terra

#endif // TERRA_PASSES_H
