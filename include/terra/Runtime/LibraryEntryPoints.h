//===- LibraryEntryPoints.h - C ABI of the CPU library entry points -*- C++
//-*-===//
//
// The C-interface functions that `terra-library-calls` (GEMMs) and
// `terra-library-convolutions` (2-D convolutions and their gradients) emit
// calls to, defined in lib/Runtime/Library.cpp and LibraryConv.cpp;
// declared once for the JIT's symbol table and the tests.
//
// Every operand is a strided memref descriptor: any sizes and strides. The
// trailing `overwrite` flag says whether the output is overwritten (1) or
// accumulated into (0), as a linalg op accumulates into its init.
//
// Convolutions are NCHW, with the weight (F, C/G, KH, KW) for G groups, as
// in PyTorch; the input x is (N, C, H, W), the output y (N, F, OH, OW).
// The parameters are the stride (sh, sw), the zero padding before (plh,
// plw: top, left) and after (prh, prw: bottom, right) the input, the
// dilation (dh, dw) and the group count G, with
// OH = (H + plh + prh - dh * (KH - 1) - 1) / sh + 1 (likewise OW):
//   conv2d:             y  (+)= conv(x, w) + b, b has F elements, or none
//                       (0 elements);
//   conv2d_grad_input:  dx (+)= the gradient of x for the gradient dy of y;
//   conv2d_grad_weight: dweight (+)= the gradient of w for the gradient dy
//                       of y.
// Arguments that do not form such a problem fail the graph run.
//
//===----------------------------------------------------------------------===//
#ifndef TERRA_RUNTIME_LIBRARYENTRYPOINTS_H
#define TERRA_RUNTIME_LIBRARYENTRYPOINTS_H

#include "mlir/ExecutionEngine/CRunnerUtils.h"

#include <cstdint>

extern "C" {
#define TERRA_LIB_DECLS(SUFFIX, T)                                             \
  void _mlir_ciface_terra_lib_matmul_##SUFFIX(                                 \
      StridedMemRefType<T, 2> *a, StridedMemRefType<T, 2> *b,                  \
      StridedMemRefType<T, 2> *c, int64_t overwrite);                          \
  void _mlir_ciface_terra_lib_batch_matmul_##SUFFIX(                           \
      StridedMemRefType<T, 3> *a, StridedMemRefType<T, 3> *b,                  \
      StridedMemRefType<T, 3> *c, int64_t overwrite);                          \
  void _mlir_ciface_terra_lib_conv2d_##SUFFIX(                                 \
      StridedMemRefType<T, 4> *x, StridedMemRefType<T, 4> *w,                  \
      StridedMemRefType<T, 1> *b, StridedMemRefType<T, 4> *y, int64_t sh,      \
      int64_t sw, int64_t plh, int64_t plw, int64_t prh, int64_t prw,          \
      int64_t dh, int64_t dw, int64_t groups, int64_t overwrite);              \
  void _mlir_ciface_terra_lib_conv2d_grad_input_##SUFFIX(                      \
      StridedMemRefType<T, 4> *dy, StridedMemRefType<T, 4> *w,                 \
      StridedMemRefType<T, 4> *dx, int64_t sh, int64_t sw, int64_t plh,        \
      int64_t plw, int64_t prh, int64_t prw, int64_t dh, int64_t dw,           \
      int64_t groups, int64_t overwrite);                                      \
  void _mlir_ciface_terra_lib_conv2d_grad_weight_##SUFFIX(                     \
      StridedMemRefType<T, 4> *x, StridedMemRefType<T, 4> *dy,                 \
      StridedMemRefType<T, 4> *dweight, int64_t sh, int64_t sw, int64_t plh,   \
      int64_t plw, int64_t prh, int64_t prw, int64_t dh, int64_t dw,           \
      int64_t groups, int64_t overwrite);
TERRA_LIB_DECLS(f32, float)
TERRA_LIB_DECLS(f64, double)
#undef TERRA_LIB_DECLS
}

namespace terra::rt {
/// The number of threads the library calls of a graph use: OpenBLAS's
/// thread count (OPENBLAS_NUM_THREADS, else every core), which oneDNN
/// follows on the thread that runs the graph. Co-execution runs the graph
/// while the host thread runs the Python program, so the front end sets
/// one thread fewer than torch uses (python/terra/native.py); a team that
/// counts on every core stalls whenever the host preempts one of its
/// threads (ResNet-50 `small`, 2 cores: 3x the graph time with 2 threads).
int libraryThreads();
void setLibraryThreads(int n);

/// How many convolution calls ran on oneDNN and how many as im2col + GEMM
/// since the process started (tests and diagnostics).
struct ConvCallCounts {
  uint64_t onednn = 0, im2col = 0;
};
ConvCallCounts convCallCounts();
} // namespace terra::rt

#endif // TERRA_RUNTIME_LIBRARYENTRYPOINTS_H
