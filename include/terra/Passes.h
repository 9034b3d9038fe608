//===- Passes.h - Terra pass declarations -----------------------*- C++ -*-===//
#ifndef TERRA_PASSES_H
#define TERRA_PASSES_H

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/ControlFlow/IR/ControlFlow.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"
#include "mlir/Pass/PassOptions.h"

#include "terra/Dialect/TerraDialect.h"

namespace terra {

#define GEN_PASS_DECL
#include "terra/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "terra/Passes.h.inc"

/// Adds the CPU pipeline from a lowered graph to the LLVM dialect:
/// linalg fusion, one-shot bufferization, loops, deallocation and LLVM.
void buildCPULoweringPipeline(mlir::OpPassManager &pm);

/// Adds the CPU pipeline's lowering of host loops on buffers to the LLVM
/// dialect (outlining, strided metadata, affine, scf, math, memref).
void addHostLoopsToLLVMPasses(mlir::OpPassManager &pm);

/// For tests: the GPU pipeline's generated loops run on the CPU. Fusion,
/// bufferization and deallocation as for the GPU, terra-linalg-to-gpu with
/// `kernels=false` (each kernel stays a mapped scf.parallel nest), GEMMs
/// through the CPU library, then addHostLoopsToLLVMPasses. Its results must
/// match the CPU pipeline's: the kernels' index arithmetic, bounds guards
/// and split reductions are checked by running them.
void buildGPULoopsOnCPUPipeline(mlir::OpPassManager &pm);

/// Adds terra-lower-graph for the CPU runtime (feeds and state received as
/// row-major buffers: contiguous-inputs) and then buildCPULoweringPipeline:
/// everything after terra-convert-to-linalg.
void buildCPUGraphPipeline(mlir::OpPassManager &pm);

/// Options of the GPU pipeline (`terra-gpu-pipeline{chip=... ...}`).
struct GPUPipelineOptions
    : public mlir::PassPipelineOptions<GPUPipelineOptions> {
  Option<std::string> chip{*this, "chip",
                           llvm::cl::desc("Target SM (sm_80, sm_90, ...)"),
                           llvm::cl::init("sm_90")};
  Option<std::string> features{
      *this, "features",
      llvm::cl::desc("NVPTX features, i.e. the PTX ISA version; +ptx80 "
                     "(CUDA 12.0) covers sm_50 to sm_90, newer chips need "
                     "a newer one"),
      llvm::cl::init("+ptx80")};
  Option<std::string> format{
      *this, "format",
      llvm::cl::desc("gpu-module-to-binary format: isa (PTX, JIT-compiled "
                     "by the driver at load), bin (cubin) or fatbin; bin "
                     "and fatbin need ptxas from `toolkit`"),
      llvm::cl::init("isa")};
  Option<std::string> toolkit{
      *this, "toolkit",
      llvm::cl::desc("CUDA toolkit root (libdevice, ptxas); empty uses "
                     "TERRA_CUDA_TOOLKIT, else the one found at configure "
                     "time"),
      llvm::cl::init("")};
  Option<int64_t> blockSize{*this, "block-size",
                            llvm::cl::desc("Threads per block of generated "
                                           "kernels"),
                            llvm::cl::init(256)};
  Option<unsigned> optLevel{*this, "opt-level",
                            llvm::cl::desc("NVPTX optimization level"),
                            llvm::cl::init(3)};
};

/// Adds the GPU pipeline from a lowered graph (tensors, after
/// terra-lower-graph) to the LLVM dialect with embedded GPU binaries:
/// fusion, bufferization, cuBLAS calls, kernels, NVVM, host runtime calls.
void buildGPULoweringPipeline(mlir::OpPassManager &pm,
                              const GPUPipelineOptions &options);

/// Adds everything after terra-convert-to-linalg for a graph run on
/// `device`: "cpu" (buildCPUGraphPipeline), "cuda" (terra-lower-graph and
/// buildGPULoweringPipeline with `gpu`) or "gpu-loops" (terra-lower-graph
/// and buildGPULoopsOnCPUPipeline). False, adding nothing, for another name.
bool buildGraphPipeline(mlir::OpPassManager &pm, llvm::StringRef device,
                        const GPUPipelineOptions &gpu = GPUPipelineOptions());

/// Registers `terra-cpu-pipeline` and `terra-gpu-pipeline`
/// (convert-to-linalg + lower-graph + one of the above) for terra-opt.
void registerTerraPipelines();

} // namespace terra

#endif // TERRA_PASSES_H
