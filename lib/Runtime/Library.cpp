//===- Library.cpp - GEMM entry points for graphs, library symbols --------===//
//
// The C-interface functions `terra-library-calls` emits calls to for matrix
// products: OpenBLAS `?gemm` (row-major, with transposed operands passed as
// such instead of copied). The convolution entry points
// (`terra-library-convolutions`) are in LibraryConv.cpp; this file lists
// every library symbol for the JIT.
//
// Operands arrive as strided memref descriptors. Any layout is accepted:
// a matrix BLAS cannot address (broadcast or doubly strided) is packed into
// a contiguous scratch buffer first. Products below kSmallGemm
// multiply-adds run as a direct loop, where a BLAS call's fixed cost
// (argument checks, thread hand-off) would dominate.
//
// None of these functions waits on the host, so cancellation never unwinds
// through them and scratch buffers are ordinary RAII containers.
//
//===----------------------------------------------------------------------===//
#include "CompileInternal.h"
#include "LibraryGemm.h"
#include "terra/Runtime/LibraryEntryPoints.h"

#include <cblas.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <optional>
#include <vector>

using terra::rt::detail::Mat;

namespace {

/// Below this many multiply-adds a direct loop beats a BLAS call.
constexpr int64_t kSmallGemm = 4096;

template <typename T> Mat<T> matOf(StridedMemRefType<T, 2> *m) {
  return {m->data + m->offset, m->sizes[0], m->sizes[1], m->strides[0],
          m->strides[1]};
}

/// How BLAS sees a matrix: its transpose flag and leading dimension.
struct BlasView {
  CBLAS_TRANSPOSE trans;
  int64_t ld;
};

/// The BLAS view of `m` (row-major convention), if it has one.
template <typename T> std::optional<BlasView> blasView(const Mat<T> &m) {
  // Row-major: unit column stride (any stride is fine with one column).
  if (m.cs == 1 || m.cols == 1) {
    int64_t ld = m.rows == 1 ? std::max<int64_t>(m.cols, 1) : m.rs;
    if (ld >= std::max<int64_t>(m.cols, 1))
      return BlasView{CblasNoTrans, ld};
  }
  // Column-major, i.e. the transpose of a row-major matrix.
  if (m.rs == 1 || m.rows == 1) {
    int64_t ld = m.cols == 1 ? std::max<int64_t>(m.rows, 1) : m.cs;
    if (ld >= std::max<int64_t>(m.rows, 1))
      return BlasView{CblasTrans, ld};
  }
  return std::nullopt;
}

/// A contiguous row-major copy of `m` in `scratch`.
template <typename T> Mat<T> pack(const Mat<T> &m, std::vector<T> &scratch) {
  scratch.resize(m.rows * m.cols);
  Mat<T> r{scratch.data(), m.rows, m.cols, m.cols, 1};
  for (int64_t i = 0; i < m.rows; ++i)
    for (int64_t j = 0; j < m.cols; ++j)
      r.at(i, j) = m.at(i, j);
  return r;
}

void gemmCall(CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, int64_t m, int64_t n,
              int64_t k, const float *a, int64_t lda, const float *b,
              int64_t ldb, float beta, float *c, int64_t ldc) {
  cblas_sgemm(CblasRowMajor, ta, tb, m, n, k, 1.0f, a, lda, b, ldb, beta, c,
              ldc);
}
void gemmCall(CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, int64_t m, int64_t n,
              int64_t k, const double *a, int64_t lda, const double *b,
              int64_t ldb, double beta, double *c, int64_t ldc) {
  cblas_dgemm(CblasRowMajor, ta, tb, m, n, k, 1.0, a, lda, b, ldb, beta, c,
              ldc);
}

CBLAS_TRANSPOSE flip(CBLAS_TRANSPOSE t) {
  return t == CblasNoTrans ? CblasTrans : CblasNoTrans;
}

/// C (M x N) = A (M x K) * B (K x N), or C += A * B unless `overwrite`.
template <typename T>
void gemmImpl(Mat<T> a, Mat<T> b, Mat<T> c, bool overwrite) {
  int64_t m = c.rows, n = c.cols, k = a.cols;
  if (m == 0 || n == 0)
    return;
  if (k == 0 || m * n * k < kSmallGemm) {
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        // As BLAS: the product first, then added to C (beta = 1), the
        // order eager's addmm has (its output starts as the bias).
        T acc = T(0);
        for (int64_t l = 0; l < k; ++l)
          acc += a.at(i, l) * b.at(l, j);
        c.at(i, j) = overwrite ? acc : c.at(i, j) + acc;
      }
    return;
  }
  std::vector<T> sa, sb, sc;
  auto va = blasView(a);
  if (!va) {
    a = pack(a, sa);
    va = blasView(a);
  }
  auto vb = blasView(b);
  if (!vb) {
    b = pack(b, sb);
    vb = blasView(b);
  }
  T beta = overwrite ? T(0) : T(1);
  auto vc = blasView(c);
  if (vc && vc->trans == CblasNoTrans) {
    gemmCall(va->trans, vb->trans, m, n, k, a.p, va->ld, b.p, vb->ld, beta, c.p,
             vc->ld);
  } else if (vc) {
    // C is column-major: compute C^T = B^T * A^T in row-major terms.
    gemmCall(flip(vb->trans), flip(va->trans), n, m, k, b.p, vb->ld, a.p,
             va->ld, beta, c.p, vc->ld);
  } else {
    // C has no BLAS view: work on a packed copy (its old values matter only
    // when accumulating).
    Mat<T> tmp = pack(c, sc);
    gemmCall(va->trans, vb->trans, m, n, k, a.p, va->ld, b.p, vb->ld, beta,
             tmp.p, n);
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j)
        c.at(i, j) = tmp.at(i, j);
  }
}

/// The (i, j) matrix of a rank-3 memref's batch element `bi`.
template <typename T>
Mat<T> batchElement(StridedMemRefType<T, 3> *m, int64_t bi) {
  return {m->data + m->offset + bi * m->strides[0], m->sizes[1], m->sizes[2],
          m->strides[1], m->strides[2]};
}

} // namespace

void terra::rt::detail::gemm(Mat<float> a, Mat<float> b, Mat<float> c,
                             bool overwrite) {
  gemmImpl(a, b, c, overwrite);
}
void terra::rt::detail::gemm(Mat<double> a, Mat<double> b, Mat<double> c,
                             bool overwrite) {
  gemmImpl(a, b, c, overwrite);
}

extern "C" {

#define TERRA_LIB_ENTRY_POINTS(SUFFIX, T)                                      \
  void _mlir_ciface_terra_lib_matmul_##SUFFIX(                                 \
      StridedMemRefType<T, 2> *a, StridedMemRefType<T, 2> *b,                  \
      StridedMemRefType<T, 2> *c, int64_t overwrite) {                         \
    gemmImpl(matOf(a), matOf(b), matOf(c), overwrite != 0);                    \
  }                                                                            \
  void _mlir_ciface_terra_lib_batch_matmul_##SUFFIX(                           \
      StridedMemRefType<T, 3> *a, StridedMemRefType<T, 3> *b,                  \
      StridedMemRefType<T, 3> *c, int64_t overwrite) {                         \
    for (int64_t i = 0; i < c->sizes[0]; ++i)                                  \
      gemmImpl(batchElement(a, i), batchElement(b, i), batchElement(c, i),     \
               overwrite != 0);                                                \
  }

TERRA_LIB_ENTRY_POINTS(f32, float)
TERRA_LIB_ENTRY_POINTS(f64, double)
#undef TERRA_LIB_ENTRY_POINTS

} // extern "C"

int terra::rt::libraryThreads() { return openblas_get_num_threads(); }

void terra::rt::setLibraryThreads(int n) { openblas_set_num_threads(n); }

void terra::rt::detail::appendLibrarySymbols(
    std::vector<std::pair<const char *, void *>> &syms) {
#define TERRA_LIB_SYMBOLS(SUFFIX)                                              \
  syms.push_back({"_mlir_ciface_terra_lib_matmul_" #SUFFIX,                    \
                  (void *)&_mlir_ciface_terra_lib_matmul_##SUFFIX});           \
  syms.push_back({"_mlir_ciface_terra_lib_batch_matmul_" #SUFFIX,              \
                  (void *)&_mlir_ciface_terra_lib_batch_matmul_##SUFFIX});     \
  syms.push_back({"_mlir_ciface_terra_lib_conv2d_" #SUFFIX,                    \
                  (void *)&_mlir_ciface_terra_lib_conv2d_##SUFFIX});           \
  syms.push_back(                                                              \
      {"_mlir_ciface_terra_lib_conv2d_grad_input_" #SUFFIX,                    \
       (void *)&_mlir_ciface_terra_lib_conv2d_grad_input_##SUFFIX});           \
  syms.push_back(                                                              \
      {"_mlir_ciface_terra_lib_conv2d_grad_weight_" #SUFFIX,                   \
       (void *)&_mlir_ciface_terra_lib_conv2d_grad_weight_##SUFFIX});
  TERRA_LIB_SYMBOLS(f32)
  TERRA_LIB_SYMBOLS(f64)
#undef TERRA_LIB_SYMBOLS
}
