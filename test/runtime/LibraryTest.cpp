//===- LibraryTest.cpp - GEMM/convolution entry points vs a reference -----===//
//
// The runtime's library entry points (lib/Runtime/Library.cpp) take any
// strided layout. Each case builds operands with a given layout (row-major,
// transposed, doubly strided, broadcast), runs the entry point, and compares
// with a direct loop over the same logical matrices, on both the BLAS path
// and the small-product loop, accumulating and overwriting.
//
//===----------------------------------------------------------------------===//
#include "mlir/ExecutionEngine/CRunnerUtils.h"

#include <gtest/gtest.h>

#include <array>
#include <cstdint>
#include <tuple>
#include <random>
#include <vector>

extern "C" {
void _mlir_ciface_terra_lib_matmul_f32(StridedMemRefType<float, 2> *,
                                       StridedMemRefType<float, 2> *,
                                       StridedMemRefType<float, 2> *, int64_t);
void _mlir_ciface_terra_lib_matmul_f64(StridedMemRefType<double, 2> *,
                                       StridedMemRefType<double, 2> *,
                                       StridedMemRefType<double, 2> *, int64_t);
void _mlir_ciface_terra_lib_batch_matmul_f32(StridedMemRefType<float, 3> *,
                                             StridedMemRefType<float, 3> *,
                                             StridedMemRefType<float, 3> *,
                                             int64_t);
void _mlir_ciface_terra_lib_conv2d_nchw_fchw_f32(
    StridedMemRefType<float, 4> *, StridedMemRefType<float, 4> *,
    StridedMemRefType<float, 4> *, int64_t, int64_t, int64_t, int64_t,
    int64_t);
}

namespace {

enum class Layout { RowMajor, ColMajor, Strided, Broadcast };

/// A rows x cols matrix stored in its own buffer with the given layout.
template <typename T> struct Matrix {
  std::vector<T> storage;
  StridedMemRefType<T, 2> desc{};

  Matrix(int64_t rows, int64_t cols, Layout layout, std::mt19937 &rng) {
    int64_t rs = cols, cs = 1, size = rows * cols;
    switch (layout) {
    case Layout::RowMajor:
      break;
    case Layout::ColMajor:
      rs = 1, cs = rows;
      break;
    case Layout::Strided: // every other row and column
      rs = 4 * cols, cs = 2, size = 4 * rows * cols;
      break;
    case Layout::Broadcast: // one row repeated
      rs = 0, cs = 1, size = cols;
      break;
    }
    storage.resize(size + 3);
    std::uniform_real_distribution<double> d(-1, 1);
    for (T &v : storage)
      v = T(d(rng));
    desc.basePtr = desc.data = storage.data();
    desc.offset = 3; // a nonzero offset into the buffer
    desc.sizes[0] = rows, desc.sizes[1] = cols;
    desc.strides[0] = rs, desc.strides[1] = cs;
  }
  T at(int64_t i, int64_t j) const {
    return desc.data[desc.offset + i * desc.strides[0] + j * desc.strides[1]];
  }
};

struct GemmCase {
  int64_t m, n, k;
  Layout a, b, c;
  bool overwrite;
};

class LibraryGemm : public ::testing::TestWithParam<GemmCase> {};

TEST_P(LibraryGemm, MatchesReference) {
  GemmCase p = GetParam();
  std::mt19937 rng(p.m * 131 + p.n * 17 + p.k);
  Matrix<float> a(p.m, p.k, p.a, rng), b(p.k, p.n, p.b, rng);
  Layout cl = p.c == Layout::Broadcast ? Layout::RowMajor : p.c;
  Matrix<float> c(p.m, p.n, cl, rng);
  std::vector<double> expect(p.m * p.n);
  for (int64_t i = 0; i < p.m; ++i)
    for (int64_t j = 0; j < p.n; ++j) {
      double acc = p.overwrite ? 0.0 : c.at(i, j);
      for (int64_t l = 0; l < p.k; ++l)
        acc += double(a.at(i, l)) * b.at(l, j);
      expect[i * p.n + j] = acc;
    }
  _mlir_ciface_terra_lib_matmul_f32(&a.desc, &b.desc, &c.desc, p.overwrite);
  for (int64_t i = 0; i < p.m; ++i)
    for (int64_t j = 0; j < p.n; ++j)
      ASSERT_NEAR(c.at(i, j), expect[i * p.n + j], 1e-4 * (1 + p.k))
          << "at (" << i << ", " << j << ")";
}

std::vector<GemmCase> gemmCases() {
  std::vector<GemmCase> cases;
  Layout all[] = {Layout::RowMajor, Layout::ColMajor, Layout::Strided,
                  Layout::Broadcast};
  Layout outs[] = {Layout::RowMajor, Layout::ColMajor, Layout::Strided};
  // 40x24x33 takes the BLAS path, 3x4x5 the direct loop.
  for (auto [m, n, k] : {std::tuple<int64_t, int64_t, int64_t>{40, 24, 33},
                         {3, 4, 5}, {1, 64, 96}, {64, 1, 96}})
    for (Layout a : all)
      for (Layout b : all)
        for (Layout c : outs)
          for (bool ow : {false, true})
            cases.push_back({m, n, k, a, b, c, ow});
  cases.push_back({7, 5, 0, Layout::RowMajor, Layout::RowMajor,
                   Layout::RowMajor, true}); // empty contraction
  cases.push_back({0, 5, 9, Layout::RowMajor, Layout::RowMajor,
                   Layout::RowMajor, true}); // empty output
  return cases;
}

INSTANTIATE_TEST_SUITE_P(Layouts, LibraryGemm,
                         ::testing::ValuesIn(gemmCases()));

TEST(LibraryGemm, DoublePrecision) {
  std::mt19937 rng(7);
  Matrix<double> a(50, 60, Layout::ColMajor, rng),
      b(60, 70, Layout::RowMajor, rng), c(50, 70, Layout::RowMajor, rng);
  _mlir_ciface_terra_lib_matmul_f64(&a.desc, &b.desc, &c.desc, 1);
  for (int64_t i = 0; i < 50; i += 7)
    for (int64_t j = 0; j < 70; j += 9) {
      double acc = 0;
      for (int64_t l = 0; l < 60; ++l)
        acc += a.at(i, l) * b.at(l, j);
      ASSERT_NEAR(c.at(i, j), acc, 1e-12);
    }
}

TEST(LibraryGemm, BatchedWithTransposedOperand) {
  // Batch of 3: a is (3, 20, 30) with each matrix column-major, b and c
  // contiguous; every batch element must use its own slice.
  const int64_t B = 3, M = 20, K = 30, N = 25;
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> d(-1, 1);
  std::vector<float> as(B * M * K), bs(B * K * N), cs(B * M * N, 5.0f);
  for (float &v : as)
    v = d(rng);
  for (float &v : bs)
    v = d(rng);
  StridedMemRefType<float, 3> a{as.data(), as.data(), 0, {B, M, K},
                                {M * K, 1, M}};
  StridedMemRefType<float, 3> b{bs.data(), bs.data(), 0, {B, K, N},
                                {K * N, N, 1}};
  StridedMemRefType<float, 3> c{cs.data(), cs.data(), 0, {B, M, N},
                                {M * N, N, 1}};
  _mlir_ciface_terra_lib_batch_matmul_f32(&a, &b, &c, /*overwrite=*/0);
  for (int64_t bi = 0; bi < B; ++bi)
    for (int64_t i = 0; i < M; ++i)
      for (int64_t j = 0; j < N; ++j) {
        double acc = 5.0;
        for (int64_t l = 0; l < K; ++l)
          acc += double(as[bi * M * K + l * M + i]) * bs[bi * K * N + l * N + j];
        ASSERT_NEAR(cs[(bi * M + i) * N + j], acc, 1e-4);
      }
}

/// A rank-R contiguous (or custom-strided) tensor with random contents.
template <int R> struct Tensor {
  std::vector<float> storage;
  StridedMemRefType<float, R> desc{};
  Tensor(std::array<int64_t, R> sizes, std::array<int64_t, R> order,
         std::mt19937 &rng) {
    // `order` lists dims from innermost to outermost.
    int64_t stride = 1;
    for (int d : order) {
      desc.strides[d] = stride;
      stride *= sizes[d];
    }
    storage.resize(stride);
    std::uniform_real_distribution<float> dist(-1, 1);
    for (float &v : storage)
      v = dist(rng);
    desc.basePtr = desc.data = storage.data();
    desc.offset = 0;
    for (int d = 0; d < R; ++d)
      desc.sizes[d] = sizes[d];
  }
  float &at(std::array<int64_t, R> idx) {
    int64_t o = desc.offset;
    for (int d = 0; d < R; ++d)
      o += idx[d] * desc.strides[d];
    return desc.data[o];
  }
};

struct ConvCase {
  int64_t n, c, h, w, f, kh, kw, sh, sw, dh, dw;
  bool permutedWeight, permutedOutput, overwrite;
};

class LibraryConv : public ::testing::TestWithParam<ConvCase> {};

TEST_P(LibraryConv, MatchesReference) {
  ConvCase p = GetParam();
  std::mt19937 rng(p.c * 7 + p.kh);
  int64_t oh = (p.h - p.dh * (p.kh - 1) - 1) / p.sh + 1;
  int64_t ow = (p.w - p.dw * (p.kw - 1) - 1) / p.sw + 1;
  Tensor<4> in({p.n, p.c, p.h, p.w}, {3, 2, 1, 0}, rng);
  Tensor<4> w({p.f, p.c, p.kh, p.kw},
              p.permutedWeight ? std::array<int64_t, 4>{0, 3, 2, 1}
                               : std::array<int64_t, 4>{3, 2, 1, 0},
              rng);
  Tensor<4> out({p.n, p.f, oh, ow},
                p.permutedOutput ? std::array<int64_t, 4>{1, 2, 3, 0}
                                 : std::array<int64_t, 4>{3, 2, 1, 0},
                rng);
  std::vector<double> expect;
  for (int64_t n = 0; n < p.n; ++n)
    for (int64_t f = 0; f < p.f; ++f)
      for (int64_t y = 0; y < oh; ++y)
        for (int64_t x = 0; x < ow; ++x) {
          double acc = p.overwrite ? 0.0 : out.at({n, f, y, x});
          for (int64_t c = 0; c < p.c; ++c)
            for (int64_t i = 0; i < p.kh; ++i)
              for (int64_t j = 0; j < p.kw; ++j)
                acc += double(in.at({n, c, y * p.sh + i * p.dh,
                                     x * p.sw + j * p.dw})) *
                       w.at({f, c, i, j});
          expect.push_back(acc);
        }
  _mlir_ciface_terra_lib_conv2d_nchw_fchw_f32(&in.desc, &w.desc, &out.desc,
                                              p.sh, p.sw, p.dh, p.dw,
                                              p.overwrite);
  size_t e = 0;
  for (int64_t n = 0; n < p.n; ++n)
    for (int64_t f = 0; f < p.f; ++f)
      for (int64_t y = 0; y < oh; ++y)
        for (int64_t x = 0; x < ow; ++x)
          ASSERT_NEAR(out.at({n, f, y, x}), expect[e++], 1e-4)
              << "at (" << n << ", " << f << ", " << y << ", " << x << ")";
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, LibraryConv,
    ::testing::Values(
        ConvCase{2, 3, 10, 9, 8, 3, 3, 1, 1, 1, 1, false, false, true},
        ConvCase{2, 3, 10, 9, 8, 3, 3, 1, 1, 1, 1, false, false, false},
        ConvCase{2, 16, 11, 12, 24, 3, 2, 2, 3, 1, 1, false, false, true},
        ConvCase{1, 8, 13, 13, 16, 3, 3, 1, 1, 2, 3, false, false, true},
        ConvCase{3, 32, 8, 8, 16, 1, 1, 1, 1, 1, 1, false, false, true},
        ConvCase{3, 32, 8, 8, 16, 1, 1, 2, 2, 1, 1, false, false, true},
        ConvCase{2, 16, 9, 9, 24, 3, 3, 1, 1, 1, 1, true, false, true},
        ConvCase{2, 16, 9, 9, 24, 3, 3, 1, 1, 1, 1, false, true, false},
        ConvCase{2, 16, 9, 9, 24, 3, 3, 2, 1, 1, 2, true, true, true},
        ConvCase{1, 2, 3, 3, 1, 3, 3, 1, 1, 1, 1, false, false, true}));

} // namespace
