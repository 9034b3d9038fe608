//===- Passes.h - Terra pass declarations -----------------------*- C++ -*-===//
#ifndef TERRA_PASSES_H
#define TERRA_PASSES_H

#include "mlir/Dialect/Arith/IR/Arith.h"
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

} // namespace terra

#endif // TERRA_PASSES_H
