//===- CudaEntryPoints.h - C ABI of the CUDA entry points --*- C++ -*-===//
//
// The C ABI that graphs lowered by terra-gpu-pipeline call (MLIR's `mgpu*`
// and our cuBLAS-backed `_mlir_ciface_terra_cuda_*`), defined in
// lib/Runtime/Cuda; declared once for the symbol table and the tests.
//
//===----------------------------------------------------------------------===//
#ifndef TERRA_RUNTIME_CUDAENTRYPOINTS_H
#define TERRA_RUNTIME_CUDAENTRYPOINTS_H

#include "mlir/ExecutionEngine/CRunnerUtils.h"

#include <cstddef>
#include <cstdint>

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
      StridedMemRefType<T, 3> *, int64_t);                                     \
  void _mlir_ciface_terra_cuda_conv2d_##SUFFIX(                                \
      StridedMemRefType<T, 4> *, StridedMemRefType<T, 4> *,                    \
      StridedMemRefType<T, 1> *, StridedMemRefType<T, 4> *, int64_t, int64_t,  \
      int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t); \
  void _mlir_ciface_terra_cuda_conv2d_grad_input_##SUFFIX(                     \
      StridedMemRefType<T, 4> *, StridedMemRefType<T, 4> *,                    \
      StridedMemRefType<T, 4> *, int64_t, int64_t, int64_t, int64_t, int64_t,  \
      int64_t, int64_t, int64_t, int64_t, int64_t);                            \
  void _mlir_ciface_terra_cuda_conv2d_grad_weight_##SUFFIX(                    \
      StridedMemRefType<T, 4> *, StridedMemRefType<T, 4> *,                    \
      StridedMemRefType<T, 4> *, int64_t, int64_t, int64_t, int64_t, int64_t,  \
      int64_t, int64_t, int64_t, int64_t, int64_t);
TERRA_CUDA_LIB_DECLS(f32, float)
TERRA_CUDA_LIB_DECLS(f64, double)
#undef TERRA_CUDA_LIB_DECLS
}

#endif // TERRA_RUNTIME_CUDAENTRYPOINTS_H
