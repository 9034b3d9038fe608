//===- Symbols.cpp - The entry point table for JIT symbol maps ------------===//
#include "terra/Runtime/Cuda.h"

#include "mlir/ExecutionEngine/CRunnerUtils.h"

#include <cstdint>

// The entry points of EntryPoints.cpp and Cublas.cpp.
extern "C" {
void *mgpuModuleLoad(void *, size_t);
void *mgpuModuleLoadJIT(void *, int);
void mgpuModuleUnload(void *);
void *mgpuModuleGetFunction(void *, const char *);
void mgpuLaunchKernel(void *, intptr_t, intptr_t, intptr_t, intptr_t, intptr_t,
                      intptr_t, int32_t, void *, void **, void **, size_t);
void *mgpuStreamCreate();
void mgpuStreamDestroy(void *);
void mgpuStreamSynchronize(void *);
void mgpuStreamWaitEvent(void *, void *);
void *mgpuEventCreate();
void mgpuEventDestroy(void *);
void mgpuEventSynchronize(void *);
void mgpuEventRecord(void *, void *);
void *mgpuMemAlloc(uint64_t, void *, bool);
void mgpuMemFree(void *, void *);
void mgpuMemcpy(void *, void *, size_t, void *);
void mgpuMemset32(void *, unsigned int, size_t, void *);
void mgpuMemset16(void *, unsigned short, size_t, void *);
void mgpuSetDefaultDevice(int32_t);
#define TERRA_CUDA_LIB_DECLS(SUFFIX, T)                                        \
  void _mlir_ciface_terra_cuda_matmul_##SUFFIX(                                \
      StridedMemRefType<T, 2> *, StridedMemRefType<T, 2> *,                    \
      StridedMemRefType<T, 2> *, int64_t);                                     \
  void _mlir_ciface_terra_cuda_batch_matmul_##SUFFIX(                          \
      StridedMemRefType<T, 3> *, StridedMemRefType<T, 3> *,                    \
      StridedMemRefType<T, 3> *, int64_t);
TERRA_CUDA_LIB_DECLS(f32, float)
TERRA_CUDA_LIB_DECLS(f64, double)
#undef TERRA_CUDA_LIB_DECLS
}

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
#undef TERRA_CUDA_SYMBOL
  return syms;
}
