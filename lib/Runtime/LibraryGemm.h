//===- LibraryGemm.h - Strided GEMM shared by the library entry points -*- C++
//-*-===//
//
// The matrix product behind the GEMM entry points (Library.cpp), also used
// by the im2col convolutions of LibraryConv.cpp (f64, and f32 problems
// oneDNN does not take).
//
//===----------------------------------------------------------------------===//
#ifndef TERRA_LIB_RUNTIME_LIBRARYGEMM_H
#define TERRA_LIB_RUNTIME_LIBRARYGEMM_H

#include <cstdint>

namespace terra::rt::detail {

/// A strided matrix view: element (i, j) is p[i * rs + j * cs].
template <typename T> struct Mat {
  T *p;
  int64_t rows, cols, rs, cs;
  T &at(int64_t i, int64_t j) const { return p[i * rs + j * cs]; }
};

/// C (M x N) = A (M x K) * B (K x N), or C += A * B unless `overwrite`.
/// Any strides, including broadcast (zero) ones in A and B: OpenBLAS where
/// it can address the operands (packing those it cannot), a direct loop
/// for products too small for a BLAS call to pay.
void gemm(Mat<float> a, Mat<float> b, Mat<float> c, bool overwrite);
void gemm(Mat<double> a, Mat<double> b, Mat<double> c, bool overwrite);

/// Fails the graph run executing on this thread with `message` and unwinds
/// it (see API.cpp); outside a run, reports the error and aborts. Call it
/// only from an entry point's own frame, before any C++ object with a
/// destructor exists there.
[[noreturn]] void failLibraryCall(const char *message);

} // namespace terra::rt::detail

#endif // TERRA_LIB_RUNTIME_LIBRARYGEMM_H
