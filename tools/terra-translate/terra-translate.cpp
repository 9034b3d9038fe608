//===- terra-translate.cpp - Translations into and out of terra -----------===//
#include "mlir/InitAllTranslations.h"
#include "mlir/Tools/mlir-translate/MlirTranslateMain.h"

#include "terra/Translate/Translations.h"

int main(int argc, char **argv) {
  mlir::registerAllTranslations();
  terra::registerTerraTranslations();
  return mlir::failed(
      mlir::mlirTranslateMain(argc, argv, "Terra-MLIR translation driver\n"));
}
