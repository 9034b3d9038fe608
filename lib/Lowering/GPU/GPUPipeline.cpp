//===- GPUPipeline.cpp - The GPU (CUDA) lowering pipeline -----------------===//
//
// terra.graph (tensors, after terra-lower-graph) -> LLVM dialect whose GPU
// code is embedded as `gpu.binary`:
//
//   tensors:  convolutions -> cuDNN (terra-library-convolutions{backend=
//             cuda}), fusion, bufferization workarounds, one-shot
//             bufferization
//             (shared with the CPU pipeline, PipelineStages.h)
//   buffers:  GEMMs -> cuBLAS (terra-library-calls{backend=cuda}),
//             ownership-based deallocation,
//             every other linalg op -> one gpu.launch (terra-linalg-to-gpu),
//             host loops over graph buffers -> single-thread kernels
//             (terra-gpu-host-kernels), guards inside kernels -> the
//             run's check flag (terra-gpu-device-checks)
//   kernels:  outlining into one gpu.module, NVVM target (chip/features),
//             gpu -> NVVM
//   host:     memref/math/scf/func -> LLVM, gpu.launch_func -> mgpu* calls
//   binary:   gpu-module-to-binary (PTX by default, cubin/fatbin with ptxas)
//
// Graph buffers are allocated through `_mlir_memref_to_llvm_alloc` like on
// the CPU; the run backs them with device (or managed) memory (docs/gpu.md),
// so the host's own scratch arrays move to the stack
// (terra-gpu-host-scratch).
//
//===----------------------------------------------------------------------===//
#include "../PipelineStages.h"
#include "terra/Passes.h"

#include "mlir/Conversion/Passes.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/GPU/Transforms/Passes.h"
#include "mlir/Dialect/MemRef/Transforms/Passes.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Transforms/Passes.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"

#include <cstdlib>

#ifndef TERRA_CUDA_TOOLKIT_DIR
#define TERRA_CUDA_TOOLKIT_DIR ""
#endif

using namespace mlir;

void terra::buildGPULoweringPipeline(OpPassManager &pm,
                                     const GPUPipelineOptions &options) {
  // Convolutions go to cuDNN, on tensors so that the padded input copies
  // die (before fusion can change them), as on the CPU.
  TerraLibraryConvolutionsOptions convOpts;
  convOpts.backend = "cuda";
  pm.addPass(createTerraLibraryConvolutions(convOpts));
  addFusionPasses(pm);
  // No -terra-approximate-math / -terra-reassociate-reductions: they exist
  // for the CPU vectorizer; on the GPU libdevice provides exp/log/tanh.
  addBufferizationPasses(pm);

  TerraLibraryCallsOptions libOpts;
  libOpts.backend = "cuda";
  pm.addPass(createTerraLibraryCalls(libOpts));
  // Deallocation runs on linalg ops, before any gpu.launch exists.
  addBufferDeallocationPasses(pm);

  TerraLinalgToGPUOptions kernelOpts;
  kernelOpts.blockSize = options.blockSize;
  pm.addNestedPass<func::FuncOp>(createTerraLinalgToGPU(kernelOpts));
  // What other host code touches graph buffers: single-thread kernels.
  pm.addNestedPass<func::FuncOp>(createTerraGPUHostKernels());
  // Guards inside kernels (per-element index checks) write the run's flag.
  pm.addPass(createTerraGPUDeviceChecks());
  pm.addPass(createTerraCanonicalizer());
  pm.addPass(createCSEPass());
  pm.addPass(createGpuKernelOutliningPass());
  // One module for all kernels: one NVPTX compile and one load per graph.
  pm.addPass(createTerraGPUMergeModules());
  // The dealloc helper's arrays are the host's: stack, not device memory.
  pm.addPass(createTerraGPUHostScratch());

  // The toolkit: the option, else TERRA_CUDA_TOOLKIT (a machine whose
  // toolkit is elsewhere than at configure time, e.g. the portable build on
  // a GPU machine, docs/gpu.md), else the one found at configure time.
  std::string toolkit = options.toolkit;
  if (toolkit.empty())
    if (const char *env = std::getenv("TERRA_CUDA_TOOLKIT"))
      toolkit = env;
  if (toolkit.empty())
    toolkit = TERRA_CUDA_TOOLKIT_DIR;
  GpuNVVMAttachTargetOptions targetOpts;
  targetOpts.chip = options.chip;
  targetOpts.features = options.features;
  targetOpts.optLevel = options.optLevel;
  // libdevice (__nv_expf, ...) for the math the kernels call.
  llvm::SmallString<256> libdevice(toolkit);
  llvm::sys::path::append(libdevice, "nvvm", "libdevice", "libdevice.10.bc");
  if (!toolkit.empty() && llvm::sys::fs::exists(libdevice))
    targetOpts.linkLibs.push_back(std::string(libdevice));
  pm.addPass(createGpuNVVMAttachTarget(targetOpts));

  pm.addPass(memref::createExpandStridedMetadataPass());
  pm.addPass(createLowerAffinePass());
  pm.addPass(createSCFToControlFlowPass());

  // Device side.
  pm.addNestedPass<gpu::GPUModuleOp>(createConvertGpuOpsToNVVMOps());
  pm.addNestedPass<gpu::GPUModuleOp>(createTerraCanonicalizer());
  pm.addNestedPass<gpu::GPUModuleOp>(createCSEPass());
  pm.addNestedPass<gpu::GPUModuleOp>(createReconcileUnrealizedCastsPass());

  // Host side, as on the CPU, then launches as mgpu* calls.
  pm.addPass(createConvertMathToLLVMPass());
  pm.addPass(createConvertMathToLibmPass());
  FinalizeMemRefToLLVMConversionPassOptions memrefOpts;
  memrefOpts.useGenericFunctions = true;
  pm.addPass(createFinalizeMemRefToLLVMConversionPass(memrefOpts));
  pm.addPass(createGpuToLLVMConversionPass());
  pm.addPass(createConvertToLLVMPass());
  pm.addPass(createReconcileUnrealizedCastsPass());

  GpuModuleToBinaryPassOptions binaryOpts;
  binaryOpts.compilationTarget = options.format;
  binaryOpts.toolkitPath = toolkit;
  pm.addPass(createGpuModuleToBinaryPass(binaryOpts));
}
