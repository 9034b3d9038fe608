//===- TerraDialect.cpp - The terra dialect -------------------------------===//
#include "terra/Dialect/TerraDialect.h"
#include "terra/Dialect/TerraOps.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/DialectImplementation.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace terra;

#include "terra/Dialect/TerraDialect.cpp.inc"

#define GET_ATTRDEF_CLASSES
#include "terra/Dialect/TerraAttrs.cpp.inc"

void TerraDialect::initialize() {
  addOperations<
#define GET_OP_LIST
#include "terra/Dialect/TerraOps.cpp.inc"
      >();
  addAttributes<
#define GET_ATTRDEF_LIST
#include "terra/Dialect/TerraAttrs.cpp.inc"
      >();
}
