//===- Translations.cpp - terra-translate registrations -------------------===//
#include "terra/Translate/Translations.h"

#include "terra/Dialect/TerraDialect.h"
#include "terra/Translate/GPUBinaryToPTX.h"
#include "terra/Translate/ImportTrace.h"
#include "terra/Translate/TerraToDot.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/Tools/mlir-translate/Translation.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/SourceMgr.h"

using namespace mlir;

static void registerTerra(DialectRegistry &registry) {
  registry.insert<terra::TerraDialect>();
}

/// Sites are what identify ops across traces, and MLIR prints no locations
/// by default: `--import-trace | terra-opt -terra-merge-traces` would merge
/// nothing. So --import-trace prints locations unless told otherwise
/// (`--mlir-print-debuginfo=false`).
static void printLocationsByDefault() {
  auto &options = llvm::cl::getRegisteredOptions();
  auto it = options.find("mlir-print-debuginfo");
  if (it == options.end())
    return;
  if (auto *flag = dynamic_cast<llvm::cl::opt<bool> *>(it->second))
    if (flag->getNumOccurrences() == 0)
      flag->setValue(true);
}

void terra::registerTerraTranslations() {
  static TranslateToMLIRRegistration importTrace(
      "import-trace",
      "Import a JSON trace file (docs/trace-format.md) as terra.trace ops",
      [](llvm::SourceMgr &sourceMgr,
         MLIRContext *context) -> OwningOpRef<Operation *> {
        printLocationsByDefault();
        return importTraceFile(sourceMgr, context);
      },
      registerTerra);

  static llvm::cl::opt<bool> dotDataFlow(
      "terra-dot-data-flow",
      llvm::cl::desc("--terra-to-dot: also draw data-flow edges (dashed)"),
      llvm::cl::init(true));
  static TranslateFromMLIRRegistration toDot(
      "terra-to-dot", "Render terra.trace_graph ops as Graphviz DOT",
      [](Operation *op, llvm::raw_ostream &os) {
        DotOptions options;
        options.dataFlow = dotDataFlow;
        return exportTraceGraphsToDot(op, os, options);
      },
      registerTerra);

  static llvm::cl::opt<std::string> ptxDir(
      "gpu-ptx-dir",
      llvm::cl::desc("--gpu-binary-to-ptx: write <dir>/<binary>.ptx files "
                     "and print their paths"),
      llvm::cl::init(""));
  static TranslateFromMLIRRegistration gpuBinaryToPTX(
      "gpu-binary-to-ptx",
      "Print the PTX of the gpu.binary ops of a module lowered by "
      "terra-gpu-pipeline (format=isa), e.g. for ptxas",
      [](Operation *op, llvm::raw_ostream &os) {
        return printGPUBinaryPTX(op, os, ptxDir);
      },
      [](DialectRegistry &registry) {
        registry.insert<gpu::GPUDialect, LLVM::LLVMDialect,
                        NVVM::NVVMDialect>();
      });
}
