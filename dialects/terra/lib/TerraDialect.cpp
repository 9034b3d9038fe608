//===- TerraDialect.cpp - The terra dialect -------------------------------===//
#include "terra/Dialect/TerraDialect.h"
#include "terra/Dialect/TerraOps.h"

using namespace mlir;
using namespace terra;

#include "terra/Dialect/TerraDialect.cpp.inc"

void TerraDialect::initialize() {
  addOperations<
#define GET_OP_LIST
#include "terra/Dialect/TerraOps.cpp.inc"
      >();
}
