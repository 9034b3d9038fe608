//===- Pipeline.cpp - The CPU lowering pipeline ---------------------------===//
//
// terra.graph (tensors) -> LLVM dialect, using upstream passes: library
// calls for convolutions (terra-library-convolutions, on tensors), linalg
// elementwise fusion on tensors, one-shot bufferization, library calls for
// GEMMs (terra-library-calls), loops, ownership-based deallocation, and the
// standard conversions to LLVM. Buffers are
// allocated through `_mlir_memref_to_llvm_alloc`/`free`, which the runtime
// provides, so every buffer of a graph run is tracked and released even
// when the run is cancelled. The GPU pipeline (GPU/GPUPipeline.cpp) shares
// the tensor-level stages (PipelineStages.h); both are registered here.
//
//===----------------------------------------------------------------------===//
#include "PipelineStages.h"
#include "terra/Passes.h"

#include "mlir/Conversion/Passes.h"
#include "mlir/Dialect/Bufferization/Transforms/Passes.h"
#include "mlir/Dialect/Linalg/Passes.h"
#include "mlir/Dialect/MemRef/Transforms/Passes.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Transforms/Passes.h"

using namespace mlir;

std::unique_ptr<Pass>
terra::createTerraCanonicalizer(GreedyRewriteConfig config) {
  // The pattern's debug name (llvm::getTypeName of an anonymous-namespace
  // class; populateRegionBranchOpInterfaceCanonicalizationPatterns adds it).
  static const std::string disabled[] = {
      "(anonymous namespace)::RemoveDuplicateSuccessorInputUses"};
  return createCanonicalizerPass(config, disabled);
}

void terra::addFusionPasses(OpPassManager &pm) {
  pm.addPass(createTerraCanonicalizer());
  pm.addPass(createTerraFuseElementwise());
  pm.addPass(createCSEPass());
  // On the fused ops: fusion places a fused op where its consumer was.
  pm.addPass(createTerraHoistAboveReceives());
}

void terra::addBufferizationPasses(OpPassManager &pm) {
  // scf.index_switch -> scf.if: upstream bufferization misses the aliases
  // of index_switch results (see terra-switch-to-if).
  pm.addPass(createTerraSwitchToIf());
  // One tensor.empty per destination (CSE merged them; see the pass).
  pm.addPass(createTerraSplitEmptyTensors());

  bufferization::OneShotBufferizePassOptions bufOpts;
  bufOpts.bufferizeFunctionBoundaries = true;
  bufOpts.allowReturnAllocsFromLoops = true;
  bufOpts.functionBoundaryTypeConversion =
      bufferization::LayoutMapOption::IdentityLayoutMap;
  pm.addPass(bufferization::createOneShotBufferizePass(bufOpts));
  // A fetched buffer is the host's: never written after its fetch.
  pm.addNestedPass<func::FuncOp>(createTerraProtectFetches());
}

void terra::addBufferDeallocationPasses(OpPassManager &pm, bool hostFree) {
  memref::ExpandReallocPassOptions realloc;
  realloc.emitDeallocs = false;
  pm.addPass(memref::createExpandReallocPass(realloc));
  pm.addPass(createTerraCanonicalizer());
  pm.addPass(bufferization::createOwnershipBasedBufferDeallocationPass());
  pm.addPass(createTerraCanonicalizer());
  pm.addPass(bufferization::createBufferDeallocationSimplificationPass());
  if (hostFree)
    pm.addNestedPass<func::FuncOp>(createTerraSplitDeallocs());
  pm.addPass(bufferization::createLowerDeallocationsPass());
  pm.addPass(createCSEPass());
  GreedyRewriteConfig bottomUp;
  bottomUp.setUseTopDownTraversal(false);
  pm.addPass(createTerraCanonicalizer(bottomUp));
}

void terra::buildCPULoweringPipeline(OpPassManager &pm) {
  // Convolutions go to the runtime's oneDNN-backed entry points, on tensors
  // so that the padded input copies die (before fusion can change them).
  pm.addPass(createTerraLibraryConvolutions());
  addFusionPasses(pm);
  // Long loops to vectorize: adjacent dims every operand walks in order as one.
  pm.addPass(createTerraCollapseDims());
  // exp/log/tanh/erf/... as polynomials that vectorize with the fused loop.
  pm.addPass(createTerraApproximateMath());
  // Float sums may be reassociated, so that their loops vectorize.
  pm.addPass(createTerraReassociateReductions());
  addBufferizationPasses(pm);
  // GEMMs go to the runtime's BLAS-backed entry points.
  pm.addPass(createTerraLibraryCalls());
  // A committed iteration's new state straight into the state's memory.
  pm.addPass(createTerraCommitInPlace());
  // Branch results that are identity buffers in every case get that type
  // back, and the loops over them collapse like those collapsed on tensors
  // above.
  pm.addPass(createTerraRefineBranchLayouts());
  pm.addPass(
      createTerraCollapseDims(TerraCollapseDimsOptions{/*onBuffers=*/true}));
  pm.addPass(createConvertLinalgToLoopsPass());
  addBufferDeallocationPasses(pm, /*hostFree=*/true);
  addHostLoopsToLLVMPasses(pm);
}

void terra::addHostLoopsToLLVMPasses(OpPassManager &pm) {
  // Each loop nest in a function of its own: LLVM compiles many small
  // functions much faster than one huge one, and on several threads.
  pm.addPass(createTerraOutlineLoops());
  pm.addPass(memref::createExpandStridedMetadataPass());
  pm.addPass(createLowerAffinePass());
  pm.addPass(createSCFToControlFlowPass());
  // Math ops with an LLVM intrinsic (fma, floor, sqrt, ...) first: libm
  // calls (fmaf, ...) would stop the loop vectorizer. Those without one
  // (f64 erf, ...) then call libm.
  pm.addPass(createConvertMathToLLVMPass());
  pm.addPass(createConvertMathToLibmPass());
  FinalizeMemRefToLLVMConversionPassOptions memrefOpts;
  memrefOpts.useGenericFunctions = true;
  pm.addPass(createFinalizeMemRefToLLVMConversionPass(memrefOpts));
  pm.addPass(createConvertToLLVMPass());
  pm.addPass(createReconcileUnrealizedCastsPass());
}

void terra::buildGPULoopsOnCPUPipeline(OpPassManager &pm) {
  addFusionPasses(pm);
  addBufferizationPasses(pm);
  pm.addPass(createTerraLibraryCalls());
  // As the GPU pipeline's (which does not free through the host's free).
  addBufferDeallocationPasses(pm);
  TerraLinalgToGPUOptions kernelOpts;
  kernelOpts.kernels = false;
  pm.addNestedPass<func::FuncOp>(createTerraLinalgToGPU(kernelOpts));
  TerraGPUHostKernelsOptions hostOpts;
  hostOpts.kernels = false;
  pm.addNestedPass<func::FuncOp>(createTerraGPUHostKernels(hostOpts));
  pm.addPass(createTerraGPUDeviceChecks());
  addHostLoopsToLLVMPasses(pm);
}

void terra::buildCPUGraphPipeline(OpPassManager &pm) {
  pm.addPass(
      createTerraLowerGraph(TerraLowerGraphOptions{/*contiguousInputs=*/true}));
  buildCPULoweringPipeline(pm);
}

bool terra::buildGraphPipeline(OpPassManager &pm, StringRef device,
                               const GPUPipelineOptions &gpu) {
  if (device == "cpu") {
    buildCPUGraphPipeline(pm);
    return true;
  }
  if (device != "cuda" && device != "gpu-loops")
    return false;
  // Row-major inputs, as on the CPU: the runtime gives every feed and state
  // a row-major device buffer (a strided CUDA tensor is made row-major
  // through the host, rare), so GEMM operands need no copy and kernels
  // index dense buffers.
  pm.addPass(
      createTerraLowerGraph(TerraLowerGraphOptions{/*contiguousInputs=*/true}));
  if (device == "cuda")
    buildGPULoweringPipeline(pm, gpu);
  else
    buildGPULoopsOnCPUPipeline(pm);
  return true;
}

void terra::registerTerraPipelines() {
  PassPipelineRegistration<>(
      "terra-cpu-pipeline",
      "Lower terra.graph to the LLVM dialect for the CPU runtime",
      [](OpPassManager &pm) {
        pm.addPass(createTerraMarkStateUpdates());
        pm.addPass(createTerraConvertToLinalg());
        buildCPUGraphPipeline(pm);
      });
  PassPipelineRegistration<>(
      "terra-gpu-loops-pipeline",
      "Lower terra.graph like the GPU pipeline, with its kernels as loops "
      "the CPU runs (device=\"gpu-loops\", for tests)",
      [](OpPassManager &pm) {
        pm.addPass(createTerraConvertToLinalg());
        buildGraphPipeline(pm, "gpu-loops", {});
      });
  PassPipelineRegistration<GPUPipelineOptions>(
      "terra-gpu-pipeline",
      "Lower terra.graph to the LLVM dialect with embedded NVVM kernels, "
      "cuBLAS calls and mgpu* runtime calls (docs/gpu.md)",
      [](OpPassManager &pm, const GPUPipelineOptions &options) {
        pm.addPass(createTerraConvertToLinalg());
        buildGraphPipeline(pm, "cuda", options);
      });
}
