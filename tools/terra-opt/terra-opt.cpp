//===- terra-opt.cpp - The terra pass driver ------------------------------===//
//
// mlir-opt with every upstream dialect, extension and pass, plus the terra
// dialect and passes.
//
//===----------------------------------------------------------------------===//
#include "mlir/IR/DialectRegistry.h"
#include "mlir/InitAllDialects.h"
#include "mlir/InitAllExtensions.h"
#include "mlir/InitAllPasses.h"
#include "mlir/Target/LLVMIR/Dialect/All.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"

#include "terra/Dialect/TerraDialect.h"
#include "terra/Passes.h"

int main(int argc, char **argv) {
  mlir::registerAllPasses();
  terra::registerTerraPasses();
  terra::registerTerraPipelines();

  mlir::DialectRegistry registry;
  mlir::registerAllDialects(registry);
  mlir::registerAllExtensions(registry);
  // gpu-module-to-binary translates kernels to LLVM IR in-process.
  mlir::registerAllGPUToLLVMIRTranslations(registry);
  registry.insert<terra::TerraDialect>();
  return mlir::asMainReturnCode(
      mlir::MlirOptMain(argc, argv, "Terra-MLIR pass driver\n", registry));
}
