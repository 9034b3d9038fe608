//===- GPUBinaryToPTX.cpp - Extract the PTX of gpu.binary ops -------------===//
//
// `terra-translate --gpu-binary-to-ptx` prints the PTX of every
// `gpu.object` in PTX form (gpu-module-to-binary format=isa, the
// terra-gpu-pipeline default), one after the other; with an output
// directory, each binary goes to `<dir>/<symbol>.ptx` instead (ptxas takes
// one module per file), so that `ptxas` can check what the pipeline
// generates (test/lit/GPU).
//
//===----------------------------------------------------------------------===//
#include "terra/Translate/GPUBinaryToPTX.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/IR/BuiltinOps.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/ToolOutputFile.h"

using namespace mlir;

LogicalResult terra::printGPUBinaryPTX(Operation *op, llvm::raw_ostream &os,
                                       llvm::StringRef outputDir) {
  if (!outputDir.empty())
    if (std::error_code ec = llvm::sys::fs::create_directories(outputDir))
      return op->emitError("cannot create ")
             << outputDir << ": " << ec.message();
  unsigned printed = 0;
  WalkResult walk = op->walk([&](gpu::BinaryOp binary) {
    for (Attribute a : binary.getObjects()) {
      auto object = dyn_cast<gpu::ObjectAttr>(a);
      if (!object)
        continue;
      if (object.getFormat() != gpu::CompilationTarget::Assembly) {
        binary.emitError("gpu.binary @")
            << binary.getSymName()
            << " holds a binary object, not PTX; lower with "
               "terra-gpu-pipeline{format=isa}";
        return WalkResult::interrupt();
      }
      ++printed;
      if (outputDir.empty()) {
        os << "// gpu.binary @" << binary.getSymName() << "\n"
           << object.getObject().getValue() << "\n";
        continue;
      }
      llvm::SmallString<256> path(outputDir);
      llvm::sys::path::append(path, binary.getSymName() + ".ptx");
      std::error_code ec;
      llvm::ToolOutputFile file(path, ec, llvm::sys::fs::OF_Text);
      if (ec) {
        binary.emitError("cannot write ") << path << ": " << ec.message();
        return WalkResult::interrupt();
      }
      file.os() << object.getObject().getValue();
      file.keep();
      os << path << "\n";
    }
    return WalkResult::advance();
  });
  if (walk.wasInterrupted())
    return failure();
  if (printed == 0)
    return op->emitError("no gpu.binary with a PTX object in the module");
  return success();
}
