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
// A negative bottom (right) padding -1 - p stands for the padding the
// sizes call for (`convHighPadding`, preferring p): graphs whose spatial
// sizes are only known at run time (a pooling whose output size varies
// between paths) pass it so. Arguments that do not form such a problem fail
// the graph run.
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
/// The zero padding after the input (bottom or right) that makes `out`
/// output rows from `in` input rows with `low` rows of padding before them:
/// a non-negative `high` with (in + low + high - (k - 1) * dil - 1) / stride
/// + 1 == out; `preferred` when it is one (PyTorch passes symmetric
/// padding), else the smallest; -1 when there is none. The lowering
/// decides it for static sizes; the entry points for a negative padding.
inline int64_t convHighPadding(int64_t in, int64_t out, int64_t k,
                               int64_t stride, int64_t dil, int64_t low,
                               int64_t preferred) {
  int64_t ext = (k - 1) * dil;
  int64_t least = (out - 1) * stride + ext + 1 - in - low;
  int64_t most = out * stride + ext - in - low;
  if (most < 0 || least > most)
    return -1;
  if (least < 0)
    least = 0;
  return preferred >= least && preferred <= most ? preferred : least;
}

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
