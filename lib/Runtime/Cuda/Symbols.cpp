//===- Symbols.cpp - The entry point table for JIT symbol maps ------------===//
#include "terra/Runtime/Cuda.h"
#include "terra/Runtime/CudaEntryPoints.h"

std::vector<std::pair<const char *, void *>> terra::cuda::entryPoints() {
  std::vector<std::pair<const char *, void *>> syms;
#define TERRA_CUDA_SYMBOL(NAME) syms.push_back({#NAME, (void *)&NAME});
  TERRA_CUDA_SYMBOL(mgpuModuleLoad)
  TERRA_CUDA_SYMBOL(mgpuModuleLoadJIT)
  TERRA_CUDA_SYMBOL(mgpuModuleUnload)
  TERRA_CUDA_SYMBOL(mgpuModuleGetFunction)
  TERRA_CUDA_SYMBOL(mgpuLaunchKernel)
  TERRA_CUDA_SYMBOL(mgpuStreamCreate)
  TERRA_CUDA_SYMBOL(mgpuStreamDestroy)
  TERRA_CUDA_SYMBOL(mgpuStreamSynchronize)
  TERRA_CUDA_SYMBOL(mgpuStreamWaitEvent)
  TERRA_CUDA_SYMBOL(mgpuEventCreate)
  TERRA_CUDA_SYMBOL(mgpuEventDestroy)
  TERRA_CUDA_SYMBOL(mgpuEventSynchronize)
  TERRA_CUDA_SYMBOL(mgpuEventRecord)
  TERRA_CUDA_SYMBOL(mgpuMemAlloc)
  TERRA_CUDA_SYMBOL(mgpuMemFree)
  TERRA_CUDA_SYMBOL(mgpuMemcpy)
  TERRA_CUDA_SYMBOL(mgpuMemset32)
  TERRA_CUDA_SYMBOL(mgpuMemset16)
  TERRA_CUDA_SYMBOL(mgpuSetDefaultDevice)
  TERRA_CUDA_SYMBOL(_mlir_ciface_terra_cuda_matmul_f32)
  TERRA_CUDA_SYMBOL(_mlir_ciface_terra_cuda_batch_matmul_f32)
  TERRA_CUDA_SYMBOL(_mlir_ciface_terra_cuda_matmul_f64)
  TERRA_CUDA_SYMBOL(_mlir_ciface_terra_cuda_batch_matmul_f64)
  TERRA_CUDA_SYMBOL(_mlir_ciface_terra_cuda_conv2d_f32)
  TERRA_CUDA_SYMBOL(_mlir_ciface_terra_cuda_conv2d_grad_input_f32)
  TERRA_CUDA_SYMBOL(_mlir_ciface_terra_cuda_conv2d_grad_weight_f32)
  TERRA_CUDA_SYMBOL(_mlir_ciface_terra_cuda_conv2d_f64)
  TERRA_CUDA_SYMBOL(_mlir_ciface_terra_cuda_conv2d_grad_input_f64)
  TERRA_CUDA_SYMBOL(_mlir_ciface_terra_cuda_conv2d_grad_weight_f64)
#undef TERRA_CUDA_SYMBOL
  return syms;
}
