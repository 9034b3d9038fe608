//===- TerraOps.h - Operations of the terra dialect -------------*- C++ -*-===//
#ifndef TERRA_DIALECT_TERRAOPS_H
#define TERRA_DIALECT_TERRAOPS_H

#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/OpImplementation.h"
#include "mlir/IR/RegionKindInterface.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include "terra/Dialect/TerraDialect.h"
#include "terra/Dialect/TerraEnums.h.inc"

#define GET_ATTRDEF_CLASSES
#include "terra/Dialect/TerraAttrs.h.inc"

#define GET_OP_CLASSES
#include "terra/Dialect/TerraOps.h.inc"

#endif // TERRA_DIALECT_TERRAOPS_H
