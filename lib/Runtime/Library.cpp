//===- Library.cpp - GEMM and convolution entry points for graphs ---------===//
//
// The C-interface functions `terra-library-calls` emits calls to. Matrix
// products go to OpenBLAS `?gemm` (row-major, with transposed operands
// passed as such instead of copied); convolutions are im2col + `?gemm` per
// batch element, with 1x1 stride-1 kernels reading the input in place; the
// gradients of a convolution (per group) reuse the same im2col: grad_input
// correlates the spread grad_output with the flipped weight, grad_weight is
// grad_output times im2col(input) transposed.
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
#include "RuntimeInternal.h"

#include "mlir/ExecutionEngine/CRunnerUtils.h"

#include <cblas.h>

#include <algorithm>
#include <optional>
#include <cstdint>
#include <cstring>
#include <vector>

namespace {

/// Below this many multiply-adds a direct loop beats a BLAS call.
constexpr int64_t kSmallGemm = 4096;

/// A strided matrix view: element (i, j) is p[i * rs + j * cs].
template <typename T> struct Mat {
  T *p;
  int64_t rows, cols, rs, cs;
  T &at(int64_t i, int64_t j) const { return p[i * rs + j * cs]; }
};

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
void gemm(Mat<T> a, Mat<T> b, Mat<T> c, bool overwrite) {
  int64_t m = c.rows, n = c.cols, k = a.cols;
  if (m == 0 || n == 0)
    return;
  if (k == 0 || m * n * k < kSmallGemm) {
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        T acc = overwrite ? T(0) : c.at(i, j);
        for (int64_t l = 0; l < k; ++l)
          acc += a.at(i, l) * b.at(l, j);
        c.at(i, j) = acc;
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
    gemmCall(va->trans, vb->trans, m, n, k, a.p, va->ld, b.p, vb->ld, beta,
             c.p, vc->ld);
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

/// A 3-D (channel, row, column) strided view of one image.
template <typename T> struct Image {
  const T *p;
  int64_t c, h, w;       // sizes
  int64_t sc, sh, sw;    // strides
};

/// col (C*KH*KW x OH*OW, row-major) of `img` for a kernel KH x KW with the
/// given stride and dilation. Row (c, i, j) holds the pixels kernel
/// position (i, j) of channel c sees at each output position.
template <typename T>
void im2col(const Image<T> &img, int64_t kh, int64_t kw, int64_t oh,
            int64_t ow, int64_t sh, int64_t sw, int64_t dh, int64_t dw,
            T *col) {
  const int64_t spatial = oh * ow;
  for (int64_t ci = 0; ci < img.c; ++ci)
    for (int64_t y = 0; y < kh; ++y)
      for (int64_t x = 0; x < kw; ++x) {
        T *row = col + ((ci * kh + y) * kw + x) * spatial;
        const T *src = img.p + ci * img.sc + y * dh * img.sh + x * dw * img.sw;
        for (int64_t r = 0; r < oh; ++r) {
          const T *s = src + r * sh * img.sh;
          T *d = row + r * ow;
          if (sw == 1 && img.sw == 1)
            std::memcpy(d, s, ow * sizeof(T));
          else
            for (int64_t q = 0; q < ow; ++q)
              d[q] = s[q * sw * img.sw];
        }
      }
}

/// A contiguous (rows x OH*OW) copy of a 3-D strided view.
template <typename T>
Mat<T> packImage(const T *p, int64_t rows, int64_t oh, int64_t ow, int64_t so,
                 int64_t sh, int64_t sw, std::vector<T> &scratch) {
  scratch.resize(rows * oh * ow);
  for (int64_t f = 0; f < rows; ++f)
    for (int64_t r = 0; r < oh; ++r)
      for (int64_t q = 0; q < ow; ++q)
        scratch[(f * oh + r) * ow + q] = p[f * so + r * sh + q * sw];
  return {scratch.data(), rows, oh * ow, oh * ow, 1};
}

/// out (rows x OH*OW, spatial dims of a 3-D strided view) (+)= a * b.
template <typename T>
void gemmIntoImage(Mat<T> a, Mat<T> b, T *out, int64_t rows, int64_t oh,
                   int64_t ow, int64_t so, int64_t sh, int64_t sw,
                   bool overwrite) {
  const int64_t spatial = oh * ow;
  if (sw == 1 && (oh == 1 || sh == ow)) {
    gemm(a, b, Mat<T>{out, rows, spatial, so, 1}, overwrite);
    return;
  }
  // Spatial dims that do not flatten: compute into scratch, then scatter.
  std::vector<T> tmp(rows * spatial);
  gemm(a, b, Mat<T>{tmp.data(), rows, spatial, spatial, 1}, true);
  for (int64_t fi = 0; fi < rows; ++fi)
    for (int64_t r = 0; r < oh; ++r)
      for (int64_t q = 0; q < ow; ++q) {
        T &dst = out[fi * so + r * sh + q * sw];
        T v = tmp[fi * spatial + r * ow + q];
        dst = overwrite ? v : dst + v;
      }
}

/// out (N,F,OH,OW) (+)= conv(in (N,C,H,W), w (F,C,KH,KW)): in is already
/// padded, as in linalg.conv_2d_nchw_fchw.
template <typename T>
void conv2d(StridedMemRefType<T, 4> *in, StridedMemRefType<T, 4> *w,
            StridedMemRefType<T, 4> *out, int64_t sh, int64_t sw, int64_t dh,
            int64_t dw, bool overwrite) {
  const int64_t n = in->sizes[0], c = in->sizes[1];
  const int64_t f = w->sizes[0], kh = w->sizes[2], kw = w->sizes[3];
  const int64_t oh = out->sizes[2], ow = out->sizes[3];
  const int64_t *is = in->strides, *ws = w->strides, *os = out->strides;
  const int64_t ckk = c * kh * kw, spatial = oh * ow;
  if (n == 0 || f == 0 || spatial == 0)
    return;

  // The weight as an F x (C*KH*KW) matrix, packed if it is not contiguous.
  std::vector<T> wbuf;
  const T *wp = w->data + w->offset;
  Mat<T> wm{const_cast<T *>(wp), f, ckk, ws[0], 1};
  bool wContig = ws[3] == 1 && ws[2] == kw && ws[1] == kh * kw;
  if (!wContig) {
    wbuf.resize(f * ckk);
    for (int64_t fi = 0; fi < f; ++fi)
      for (int64_t ci = 0; ci < c; ++ci)
        for (int64_t y = 0; y < kh; ++y)
          for (int64_t x = 0; x < kw; ++x)
            wbuf[((fi * c + ci) * kh + y) * kw + x] =
                wp[fi * ws[0] + ci * ws[1] + y * ws[2] + x * ws[3]];
    wm = {wbuf.data(), f, ckk, ckk, 1};
  }

  // A 1x1, stride-1 kernel over a (C, H*W)-contiguous input needs no im2col.
  bool direct = kh == 1 && kw == 1 && sh == 1 && sw == 1 && is[3] == 1 &&
                is[2] == in->sizes[3] && in->sizes[2] == oh &&
                in->sizes[3] == ow;
  std::vector<T> col(direct ? 0 : ckk * spatial);
  for (int64_t ni = 0; ni < n; ++ni) {
    const T *ip = in->data + in->offset + ni * is[0];
    Mat<T> cm{col.data(), ckk, spatial, spatial, 1};
    if (direct)
      cm = {const_cast<T *>(ip), c, spatial, is[1], 1};
    else
      im2col(Image<T>{ip, c, in->sizes[2], in->sizes[3], is[1], is[2], is[3]},
             kh, kw, oh, ow, sh, sw, dh, dw, col.data());
    gemmIntoImage(wm, cm, out->data + out->offset + ni * os[0], f, oh, ow,
                  os[1], os[2], os[3], overwrite);
  }
}

/// The gradient of a convolution's input, in the form the lowering builds
/// (TerraToLinalg/Convolution.cpp): grad_output spread out with stride - 1
/// zeros into z (N, G, Fg, Hz, Wz), correlated at stride 1 with the
/// spatially flipped weight (G, Fg, Cg, KH, KW), channels swapped:
/// out (N, G, Cg, H', W') (+)= sum_{f,i,j} z[.., h+(KH-1-i)*dh, ..] * w[g,f,c,i,j].
template <typename T>
void conv2dGradInput(StridedMemRefType<T, 5> *z, StridedMemRefType<T, 5> *w,
                     StridedMemRefType<T, 5> *out, int64_t dh, int64_t dw,
                     bool overwrite) {
  const int64_t n = z->sizes[0], groups = z->sizes[1], fg = z->sizes[2];
  const int64_t cg = w->sizes[2], kh = w->sizes[3], kw = w->sizes[4];
  const int64_t oh = out->sizes[3], ow = out->sizes[4];
  const int64_t *zs = z->strides, *ws = w->strides, *os = out->strides;
  const int64_t fkk = fg * kh * kw;
  if (n == 0 || cg == 0 || oh * ow == 0)
    return;
  std::vector<T> wt(cg * fkk), col(fkk * oh * ow);
  for (int64_t g = 0; g < groups; ++g) {
    // wt (Cg x Fg*KH*KW): the flipped weight with channels swapped.
    const T *wp = w->data + w->offset + g * ws[0];
    for (int64_t c = 0; c < cg; ++c)
      for (int64_t f = 0; f < fg; ++f)
        for (int64_t i = 0; i < kh; ++i)
          for (int64_t j = 0; j < kw; ++j)
            wt[c * fkk + (f * kh + i) * kw + j] =
                wp[f * ws[1] + c * ws[2] + (kh - 1 - i) * ws[3] +
                   (kw - 1 - j) * ws[4]];
    Mat<T> wm{wt.data(), cg, fkk, fkk, 1};
    for (int64_t ni = 0; ni < n; ++ni) {
      const T *zp = z->data + z->offset + ni * zs[0] + g * zs[1];
      im2col(Image<T>{zp, fg, z->sizes[3], z->sizes[4], zs[2], zs[3], zs[4]},
             kh, kw, oh, ow, 1, 1, dh, dw, col.data());
      gemmIntoImage(wm, Mat<T>{col.data(), fkk, oh * ow, oh * ow, 1},
                    out->data + out->offset + ni * os[0] + g * os[1], cg, oh,
                    ow, os[2], os[3], os[4], overwrite);
    }
  }
}

/// The gradient of a convolution's weight: x padded (N, G, Cg, Hp, Wp),
/// grad_output (N, G, Fg, OH, OW), out (G, Fg, Cg, KH, KW) (+)=
/// sum_{n,oh,ow} x[n,g,c,oh*sh+i*dh, ow*sw+j*dw] * go[n,g,f,oh,ow], i.e.
/// per group and batch element go (Fg x OH*OW) times im2col(x)^T.
template <typename T>
void conv2dGradWeight(StridedMemRefType<T, 5> *x, StridedMemRefType<T, 5> *go,
                      StridedMemRefType<T, 5> *out, int64_t sh, int64_t sw,
                      int64_t dh, int64_t dw, bool overwrite) {
  const int64_t n = x->sizes[0], groups = x->sizes[1], cg = x->sizes[2];
  const int64_t fg = go->sizes[2], oh = go->sizes[3], ow = go->sizes[4];
  const int64_t kh = out->sizes[3], kw = out->sizes[4];
  const int64_t *xs = x->strides, *gs = go->strides, *os = out->strides;
  const int64_t ckk = cg * kh * kw, spatial = oh * ow;
  if (fg == 0 || ckk == 0)
    return;
  // out[g] as an Fg x Cg*KH*KW matrix, or scratch when it does not flatten.
  bool flat = os[4] == 1 && os[3] == kw && os[2] == kh * kw;
  std::vector<T> col(ckk * spatial), obuf(flat ? 0 : fg * ckk), gbuf;
  for (int64_t g = 0; g < groups; ++g) {
    T *op = out->data + out->offset + g * os[0];
    Mat<T> om = flat ? Mat<T>{op, fg, ckk, os[1], 1}
                     : Mat<T>{obuf.data(), fg, ckk, ckk, 1};
    bool first = overwrite; // whether the next product overwrites om
    // Element (f, k) of out[g], k = (c * KH + i) * KW + j.
    auto outAt = [&](int64_t f, int64_t k) -> T & {
      return op[f * os[1] + (k / (kh * kw)) * os[2] + (k / kw % kh) * os[3] +
                (k % kw) * os[4]];
    };
    if (!flat && !overwrite)
      for (int64_t f = 0; f < fg; ++f)
        for (int64_t k = 0; k < ckk; ++k)
          obuf[f * ckk + k] = outAt(f, k);
    if ((n == 0 || spatial == 0) && first)
      for (int64_t f = 0; f < fg; ++f)
        for (int64_t k = 0; k < ckk; ++k)
          om.at(f, k) = T(0);
    for (int64_t ni = 0; ni < n && spatial > 0; ++ni) {
      const T *xp = x->data + x->offset + ni * xs[0] + g * xs[1];
      im2col(Image<T>{xp, cg, x->sizes[3], x->sizes[4], xs[2], xs[3], xs[4]},
             kh, kw, oh, ow, sh, sw, dh, dw, col.data());
      const T *gp = go->data + go->offset + ni * gs[0] + g * gs[1];
      Mat<T> gm{const_cast<T *>(gp), fg, spatial, gs[2], 1};
      if (!(gs[4] == 1 && (oh == 1 || gs[3] == ow)))
        gm = packImage(gp, fg, oh, ow, gs[2], gs[3], gs[4], gbuf);
      // col^T: (OH*OW x Cg*KH*KW), a column-major view of col.
      gemm(gm, Mat<T>{col.data(), spatial, ckk, 1, spatial}, om, first);
      first = false;
    }
    if (!flat)
      for (int64_t f = 0; f < fg; ++f)
        for (int64_t k = 0; k < ckk; ++k)
          outAt(f, k) = obuf[f * ckk + k];
  }
}

} // namespace

extern "C" {

#define TERRA_LIB_ENTRY_POINTS(SUFFIX, T)                                      \
  void _mlir_ciface_terra_lib_matmul_##SUFFIX(                                 \
      StridedMemRefType<T, 2> *a, StridedMemRefType<T, 2> *b,                  \
      StridedMemRefType<T, 2> *c, int64_t overwrite) {                         \
    gemm(matOf(a), matOf(b), matOf(c), overwrite != 0);                        \
  }                                                                            \
  void _mlir_ciface_terra_lib_batch_matmul_##SUFFIX(                           \
      StridedMemRefType<T, 3> *a, StridedMemRefType<T, 3> *b,                  \
      StridedMemRefType<T, 3> *c, int64_t overwrite) {                         \
    for (int64_t i = 0; i < c->sizes[0]; ++i)                                  \
      gemm(batchElement(a, i), batchElement(b, i), batchElement(c, i),         \
           overwrite != 0);                                                    \
  }                                                                            \
  void _mlir_ciface_terra_lib_conv2d_nchw_fchw_##SUFFIX(                       \
      StridedMemRefType<T, 4> *in, StridedMemRefType<T, 4> *w,                 \
      StridedMemRefType<T, 4> *out, int64_t sh, int64_t sw, int64_t dh,        \
      int64_t dw, int64_t overwrite) {                                         \
    conv2d(in, w, out, sh, sw, dh, dw, overwrite != 0);                        \
  }                                                                            \
  void _mlir_ciface_terra_lib_conv2d_grad_input_##SUFFIX(                      \
      StridedMemRefType<T, 5> *z, StridedMemRefType<T, 5> *w,                  \
      StridedMemRefType<T, 5> *out, int64_t dh, int64_t dw,                    \
      int64_t overwrite) {                                                     \
    conv2dGradInput(z, w, out, dh, dw, overwrite != 0);                        \
  }                                                                            \
  void _mlir_ciface_terra_lib_conv2d_grad_weight_##SUFFIX(                     \
      StridedMemRefType<T, 5> *x, StridedMemRefType<T, 5> *go,                 \
      StridedMemRefType<T, 5> *out, int64_t sh, int64_t sw, int64_t dh,        \
      int64_t dw, int64_t overwrite) {                                         \
    conv2dGradWeight(x, go, out, sh, sw, dh, dw, overwrite != 0);              \
  }

TERRA_LIB_ENTRY_POINTS(f32, float)
TERRA_LIB_ENTRY_POINTS(f64, double)
#undef TERRA_LIB_ENTRY_POINTS

} // extern "C"

void terra::rt::detail::appendLibrarySymbols(
    std::vector<std::pair<llvm::StringRef, void *>> &syms) {
#define TERRA_LIB_SYMBOLS(SUFFIX)                                              \
  syms.push_back({"_mlir_ciface_terra_lib_matmul_" #SUFFIX,                    \
                  (void *)&_mlir_ciface_terra_lib_matmul_##SUFFIX});           \
  syms.push_back({"_mlir_ciface_terra_lib_batch_matmul_" #SUFFIX,              \
                  (void *)&_mlir_ciface_terra_lib_batch_matmul_##SUFFIX});     \
  syms.push_back({"_mlir_ciface_terra_lib_conv2d_nchw_fchw_" #SUFFIX,          \
                  (void *)&_mlir_ciface_terra_lib_conv2d_nchw_fchw_##SUFFIX}); \
  syms.push_back({"_mlir_ciface_terra_lib_conv2d_grad_input_" #SUFFIX,         \
                  (void *)&_mlir_ciface_terra_lib_conv2d_grad_input_##SUFFIX}); \
  syms.push_back({"_mlir_ciface_terra_lib_conv2d_grad_weight_" #SUFFIX,        \
                  (void *)&_mlir_ciface_terra_lib_conv2d_grad_weight_##SUFFIX});
  TERRA_LIB_SYMBOLS(f32)
  TERRA_LIB_SYMBOLS(f64)
#undef TERRA_LIB_SYMBOLS
}
