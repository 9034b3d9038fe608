//===- Pooling.cpp - Pooling op lowerings ----------------------------------------===//
#include "Utils.h"

using namespace mlir;
using namespace terra;
using namespace terra::lowering;

void terra::populatePoolingLowerings(LoweringRegistry &r) {}
