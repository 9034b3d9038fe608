//===- TerraDialect.h - The terra dialect -----------------------*- C++ -*-===//
#ifndef TERRA_DIALECT_TERRADIALECT_H
#define TERRA_DIALECT_TERRADIALECT_H

#include "mlir/IR/Dialect.h"

#include "terra/Dialect/TerraDialect.h.inc"

#endif // TERRA_DIALECT_TERRADIALECT_H
