//===- Cublas.cpp - cuBLAS entry points for GPU graphs --------------------===//
//
// The C-interface functions `terra-library-calls{backend=cuda}` emits:
// row-major GEMM and batched GEMM on device-accessible memory, computed by
// cuBLAS (column-major) as C^T = B^T * A^T, so no operand is copied: a
// row-major operand is used as is, a column-major one (a transposed view)
// through CUBLAS_OP_T. libcublas is loaded with dlopen like the driver: a
// machine without it (or without a GPU) gets a clear error from the call.
//
// The compiler guarantees such a layout for every operand and a row-major
// output (it copies what it cannot prove); the entry points still check the
// descriptors and report an error instead of computing garbage. Each call
// is synchronous with respect to the host (the host side of a graph reads
// its results next), like the kernel launches of the pipeline.
//
//===----------------------------------------------------------------------===//
#include "Driver.h"

#include "terra/Runtime/Cuda.h"

#include "mlir/ExecutionEngine/CRunnerUtils.h"

#include <cublas_v2.h>
#include <dlfcn.h>

#include <algorithm>
#include <climits>
#include <mutex>
#include <string>

using namespace terra::cuda::detail;

namespace {

#define TERRA_CUBLAS_FUNCTIONS(X)                                              \
  X(cublasCreate, "cublasCreate_v2")                                           \
  X(cublasSetStream, "cublasSetStream_v2")                                     \
  X(cublasGetStatusString, "cublasGetStatusString")                            \
  X(cublasSgemm, "cublasSgemm_v2")                                             \
  X(cublasDgemm, "cublasDgemm_v2")                                             \
  X(cublasSgemmStridedBatched, "cublasSgemmStridedBatched")                    \
  X(cublasDgemmStridedBatched, "cublasDgemmStridedBatched")

struct Cublas {
#define TERRA_CUBLAS_MEMBER(NAME, SYMBOL) decltype(&::NAME) NAME = nullptr;
  TERRA_CUBLAS_FUNCTIONS(TERRA_CUBLAS_MEMBER)
#undef TERRA_CUBLAS_MEMBER
};

std::string loadCublas(Cublas &c) {
  std::string error;
  void *lib = openLibrary({"libcublas.so.13", "libcublas.so"}, "libcublas.so",
                          "cuBLAS", error);
  if (!lib)
    return error;
#define TERRA_CUBLAS_RESOLVE(NAME, SYMBOL)                                     \
  c.NAME = reinterpret_cast<decltype(c.NAME)>(dlsym(lib, SYMBOL));             \
  if (!c.NAME)                                                                 \
    return "cuBLAS lacks " SYMBOL;
  TERRA_CUBLAS_FUNCTIONS(TERRA_CUBLAS_RESOLVE)
#undef TERRA_CUBLAS_RESOLVE
  return "";
}

const Cublas *cublasFor(const char *entry) {
  return libraryFor<Cublas, loadCublas>(entry);
}

/// One handle per thread (a graph runs on one runner thread), created in
/// the driver's context.
cublasHandle_t handleFor(const Cublas &c, const char *entry) {
  thread_local cublasHandle_t handle = nullptr;
  if (handle)
    return handle;
  if (cublasStatus_t s = c.cublasCreate(&handle); s != CUBLAS_STATUS_SUCCESS) {
    reportError(std::string(entry) +
                ": cublasCreate failed: " + c.cublasGetStatusString(s));
    handle = nullptr;
  }
  return handle;
}

/// How cuBLAS (column-major) addresses an `rows x cols` row-major-indexed
/// matrix: stored row-major (unit column stride, rows `ld` apart), cuBLAS
/// sees its transpose as a column-major `cols x rows` matrix and uses it as
/// is (CUBLAS_OP_N); stored column-major (`trans`: unit row stride, columns
/// `ld` apart, e.g. `x.t()` of a contiguous `x`), cuBLAS sees the matrix
/// itself and transposes it (CUBLAS_OP_T), so a transposed view needs no copy.
struct MatrixView {
  int64_t rows, cols, ld;
  bool trans;
};

/// The view of dims (`r`, `c`) with strides (`rs`, `cs`), if cuBLAS can
/// address it: row-major preferred, else column-major.
bool matrixView(int64_t r, int64_t c, int64_t rs, int64_t cs, MatrixView &out) {
  if (r > INT_MAX || c > INT_MAX)
    return false;
  int64_t ld = r <= 1 ? std::max<int64_t>(c, 1) : rs;
  if ((c <= 1 || cs == 1) && ld >= std::max<int64_t>(c, 1) && ld <= INT_MAX) {
    out = {r, c, ld, false};
    return true;
  }
  ld = c <= 1 ? std::max<int64_t>(r, 1) : cs;
  if ((r <= 1 || rs == 1) && ld >= std::max<int64_t>(r, 1) && ld <= INT_MAX) {
    out = {r, c, ld, true};
    return true;
  }
  return false;
}

template <typename T>
bool matrixView(const StridedMemRefType<T, 2> *m, MatrixView &out) {
  return matrixView(m->sizes[0], m->sizes[1], m->strides[0], m->strides[1],
                    out);
}
template <typename T>
bool matrixView(const StridedMemRefType<T, 3> *m, MatrixView &out) {
  return matrixView(m->sizes[1], m->sizes[2], m->strides[1], m->strides[2],
                    out);
}

cublasOperation_t op(const MatrixView &v) {
  return v.trans ? CUBLAS_OP_T : CUBLAS_OP_N;
}

cublasStatus_t gemm(const Cublas &c, cublasHandle_t h, cublasOperation_t opb,
                    cublasOperation_t opa, int n, int m, int k,
                    const float *alpha, const float *b, int ldb, const float *a,
                    int lda, const float *beta, float *out, int ldc) {
  return c.cublasSgemm(h, opb, opa, n, m, k, alpha, b, ldb, a, lda, beta, out,
                       ldc);
}
cublasStatus_t gemm(const Cublas &c, cublasHandle_t h, cublasOperation_t opb,
                    cublasOperation_t opa, int n, int m, int k,
                    const double *alpha, const double *b, int ldb,
                    const double *a, int lda, const double *beta, double *out,
                    int ldc) {
  return c.cublasDgemm(h, opb, opa, n, m, k, alpha, b, ldb, a, lda, beta, out,
                       ldc);
}
cublasStatus_t gemmBatched(const Cublas &c, cublasHandle_t h,
                           cublasOperation_t opb, cublasOperation_t opa, int n,
                           int m, int k, const float *alpha, const float *b,
                           int ldb, int64_t sb, const float *a, int lda,
                           int64_t sa, const float *beta, float *out, int ldc,
                           int64_t sc, int batch) {
  return c.cublasSgemmStridedBatched(h, opb, opa, n, m, k, alpha, b, ldb, sb, a,
                                     lda, sa, beta, out, ldc, sc, batch);
}
cublasStatus_t gemmBatched(const Cublas &c, cublasHandle_t h,
                           cublasOperation_t opb, cublasOperation_t opa, int n,
                           int m, int k, const double *alpha, const double *b,
                           int ldb, int64_t sb, const double *a, int lda,
                           int64_t sa, const double *beta, double *out, int ldc,
                           int64_t sc, int batch) {
  return c.cublasDgemmStridedBatched(h, opb, opa, n, m, k, alpha, b, ldb, sb, a,
                                     lda, sa, beta, out, ldc, sc, batch);
}

/// C (M x N) = A (M x K) * B (K x N), or C += A * B unless `overwrite`,
/// `batch` times with the given batch strides (elements).
template <typename T>
void matmul(const char *entry, T *a, MatrixView va, int64_t sa, T *b,
            MatrixView vb, int64_t sb, T *out, MatrixView vc, int64_t sc,
            int64_t batch, bool overwrite, bool batched) {
  int64_t m = vc.rows, n = vc.cols, k = va.cols;
  if (va.rows != m || vb.rows != k || vb.cols != n) {
    reportError(std::string(entry) + ": operand shapes do not match");
    return;
  }
  if (m == 0 || n == 0 || batch == 0)
    return;
  if (batch > INT_MAX) {
    reportError(std::string(entry) + ": batch too large for cuBLAS");
    return;
  }
  const Driver *d = driverFor(entry);
  if (!d)
    return;
  const Cublas *c = cublasFor(entry);
  if (!c)
    return;
  ScopedContext scope(*d);
  cublasHandle_t h = handleFor(*c, entry);
  if (!h)
    return;
  // On the run's stream, after the kernels queued before it, without
  // waiting (the host waits when it reads a result: syncRunStream). Without
  // one, the legacy default stream orders this after every earlier launch
  // (each has synchronized already) and the sync below makes the result
  // visible to the host side of the graph.
  CUstream stream = runStream();
  c->cublasSetStream(h, stream);
  T alpha = 1, beta = overwrite ? T(0) : T(1);
  // Row-major C = A * B is column-major C^T = B^T * A^T: B comes first.
  cublasStatus_t s =
      batched ? gemmBatched(*c, h, op(vb), op(va), int(n), int(m), int(k),
                            &alpha, b, int(vb.ld), sb, a, int(va.ld), sa, &beta,
                            out, int(vc.ld), sc, int(batch))
              : gemm(*c, h, op(vb), op(va), int(n), int(m), int(k), &alpha, b,
                     int(vb.ld), a, int(va.ld), &beta, out, int(vc.ld));
  if (s != CUBLAS_STATUS_SUCCESS) {
    reportError(std::string(entry) + ": " + c->cublasGetStatusString(s));
    return;
  }
  if (!stream)
    check(*d, d->cuStreamSynchronize(nullptr), entry);
}

template <typename T>
void matmulEntry(const char *entry, StridedMemRefType<T, 2> *a,
                 StridedMemRefType<T, 2> *b, StridedMemRefType<T, 2> *c,
                 int64_t overwrite) {
  MatrixView va, vb, vc;
  if (!matrixView(a, va) || !matrixView(b, vb) || !matrixView(c, vc) ||
      vc.trans) {
    reportError(std::string(entry) +
                ": an operand is not a row-major or column-major matrix with "
                "a unit stride, or the output is not row-major (the compiler "
                "should have copied it)");
    return;
  }
  matmul(entry, a->data + a->offset, va, 0, b->data + b->offset, vb, 0,
         c->data + c->offset, vc, 0, 1, overwrite != 0, /*batched=*/false);
}

template <typename T>
void batchMatmulEntry(const char *entry, StridedMemRefType<T, 3> *a,
                      StridedMemRefType<T, 3> *b, StridedMemRefType<T, 3> *c,
                      int64_t overwrite) {
  MatrixView va, vb, vc;
  if (!matrixView(a, va) || !matrixView(b, vb) || !matrixView(c, vc) ||
      vc.trans || a->sizes[0] != c->sizes[0] || b->sizes[0] != c->sizes[0]) {
    reportError(std::string(entry) +
                ": an operand is not a batch of row-major or column-major "
                "matrices with a unit stride, the output is not row-major, or "
                "the batch sizes differ");
    return;
  }
  // Batch strides: a one-element batch may have any stride.
  auto bs = [](auto *m) { return m->sizes[0] <= 1 ? 0 : m->strides[0]; };
  matmul(entry, a->data + a->offset, va, bs(a), b->data + b->offset, vb, bs(b),
         c->data + c->offset, vc, bs(c), c->sizes[0], overwrite != 0,
         /*batched=*/true);
}

} // namespace

#define TERRA_CUDA_EXPORT extern "C" __attribute__((visibility("default")))

#define TERRA_CUDA_LIB_ENTRY_POINTS(SUFFIX, T)                                 \
  TERRA_CUDA_EXPORT void _mlir_ciface_terra_cuda_matmul_##SUFFIX(              \
      StridedMemRefType<T, 2> *a, StridedMemRefType<T, 2> *b,                  \
      StridedMemRefType<T, 2> *c, int64_t overwrite) {                         \
    matmulEntry("terra_cuda_matmul_" #SUFFIX, a, b, c, overwrite);             \
  }                                                                            \
  TERRA_CUDA_EXPORT void _mlir_ciface_terra_cuda_batch_matmul_##SUFFIX(        \
      StridedMemRefType<T, 3> *a, StridedMemRefType<T, 3> *b,                  \
      StridedMemRefType<T, 3> *c, int64_t overwrite) {                         \
    batchMatmulEntry("terra_cuda_batch_matmul_" #SUFFIX, a, b, c, overwrite);  \
  }

TERRA_CUDA_LIB_ENTRY_POINTS(f32, float)
TERRA_CUDA_LIB_ENTRY_POINTS(f64, double)
#undef TERRA_CUDA_LIB_ENTRY_POINTS
