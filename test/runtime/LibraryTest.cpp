//===- LibraryTest.cpp - GEMM/convolution entry points vs a reference -----===//
//
// The runtime's library entry points (lib/Runtime/Library.cpp,
// LibraryConv.cpp) take any strided layout. Each GEMM case builds operands
// with a given layout (row-major, transposed, doubly strided, broadcast),
// runs the entry point, and compares with a direct loop over the same
// logical matrices, on both the BLAS path and the small-product loop,
// accumulating and overwriting. Each convolution case (forward, input
// gradient, weight gradient) runs the f32 entry point (oneDNN; the case
// checks which path ran) and the f64 one (im2col + GEMM) on operands of a
// given layout and compares both with a direct loop in double precision.
//
//===----------------------------------------------------------------------===//
#include "terra/Runtime/LibraryEntryPoints.h"

#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <cstdint>
#include <ostream>
#include <random>
#include <thread>
#include <tuple>
#include <vector>

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
                         {3, 4, 5},
                         {1, 64, 96},
                         {64, 1, 96}})
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
  StridedMemRefType<float, 3> a{
      as.data(), as.data(), 0, {B, M, K}, {M * K, 1, M}};
  StridedMemRefType<float, 3> b{
      bs.data(), bs.data(), 0, {B, K, N}, {K * N, N, 1}};
  StridedMemRefType<float, 3> c{
      cs.data(), cs.data(), 0, {B, M, N}, {M * N, N, 1}};
  _mlir_ciface_terra_lib_batch_matmul_f32(&a, &b, &c, /*overwrite=*/0);
  for (int64_t bi = 0; bi < B; ++bi)
    for (int64_t i = 0; i < M; ++i)
      for (int64_t j = 0; j < N; ++j) {
        double acc = 5.0;
        for (int64_t l = 0; l < K; ++l)
          acc +=
              double(as[bi * M * K + l * M + i]) * bs[bi * K * N + l * N + j];
        ASSERT_NEAR(cs[(bi * M + i) * N + j], acc, 1e-4);
      }
}

//===----------------------------------------------------------------------===//
// Convolutions
//===----------------------------------------------------------------------===//

/// How a rank-4 operand is laid out in memory.
enum class Layout4 {
  Contiguous,   // row-major
  ChannelsLast, // dims (0, 2, 3, 1) row-major
  Strided,      // every other element of the last dim, rows padded
  Broadcast,    // the batch dim has stride 0 (inputs only)
};

/// A rank-4 tensor in its own buffer with the given layout and random
/// contents, behind a nonzero offset.
template <typename T> struct Tensor4 {
  std::vector<T> storage;
  StridedMemRefType<T, 4> desc{};

  Tensor4(std::array<int64_t, 4> sizes, Layout4 layout, std::mt19937 &rng) {
    std::array<int64_t, 4> strides{};
    int64_t size = 1;
    // order: dims from innermost to outermost; the innermost one steps by
    // innerStep, and each of its rows is followed by rowPad unused elements.
    auto rowMajor = [&](std::array<int, 4> order, int64_t innerStep,
                        int64_t rowPad) {
      strides[order[0]] = innerStep;
      int64_t s = innerStep * sizes[order[0]] + rowPad;
      for (int k = 1; k < 4; ++k) {
        strides[order[k]] = s;
        s *= sizes[order[k]];
      }
      size = s;
    };
    switch (layout) {
    case Layout4::Contiguous:
      rowMajor({3, 2, 1, 0}, 1, 0);
      break;
    case Layout4::ChannelsLast:
      rowMajor({1, 3, 2, 0}, 1, 0);
      break;
    case Layout4::Strided:
      rowMajor({3, 2, 1, 0}, 2, 3);
      break;
    case Layout4::Broadcast:
      rowMajor({3, 2, 1, 0}, 1, 0);
      size /= std::max<int64_t>(sizes[0], 1);
      strides[0] = 0;
      break;
    }
    storage.resize(size + 5);
    std::uniform_real_distribution<double> d(-1, 1);
    for (T &v : storage)
      v = T(d(rng));
    desc.basePtr = desc.data = storage.data();
    desc.offset = 5;
    for (int k = 0; k < 4; ++k) {
      desc.sizes[k] = sizes[k];
      desc.strides[k] = strides[k];
    }
  }
  T &at(int64_t a, int64_t b, int64_t c, int64_t d) {
    return desc.data[desc.offset + a * desc.strides[0] + b * desc.strides[1] +
                     c * desc.strides[2] + d * desc.strides[3]];
  }
  const int64_t *sizes() const { return desc.sizes; }
};

enum class ConvOp { Forward, GradInput, GradWeight };

struct ConvCase {
  ConvOp op;
  int64_t n, c, h, w, f, kh, kw;
  int64_t sh, sw, plh, plw, prh, prw, dh, dw, groups;
  Layout4 in0, in1, out; // the two inputs (in call order) and the output
  bool bias, overwrite;
  // The padding after the input passed as "derive it" (a negative value,
  // preferring prh + 2 / prw + 2), as graphs with dynamic spatial sizes do.
  bool derive = false;
};

std::ostream &operator<<(std::ostream &os, const ConvCase &p) {
  const char *ops[] = {"fwd", "grad_input", "grad_weight"};
  return os << ops[int(p.op)] << " n" << p.n << " c" << p.c << " " << p.h << "x"
            << p.w << " f" << p.f << " k" << p.kh << "x" << p.kw << " s" << p.sh
            << "," << p.sw << " p" << p.plh << "," << p.plw << "," << p.prh
            << "," << p.prw << " d" << p.dh << "," << p.dw << " g" << p.groups
            << " layouts " << int(p.in0) << int(p.in1) << int(p.out)
            << (p.bias ? " bias" : "")
            << (p.overwrite ? " overwrite" : " accumulate")
            << (p.derive ? " derived" : "");
}

/// Runs one case in element type T; returns the largest error relative to
/// the reference's tolerance (<= 1 passes).
template <typename T> double runConvCase(const ConvCase &p, double tol) {
  std::mt19937 rng(p.n * 1000 + p.c * 100 + p.kh * 10 + int(p.op));
  const int64_t oh = (p.h + p.plh + p.prh - p.dh * (p.kh - 1) - 1) / p.sh + 1;
  const int64_t ow = (p.w + p.plw + p.prw - p.dw * (p.kw - 1) - 1) / p.sw + 1;
  const int64_t cg = p.c / p.groups, fg = p.f / p.groups;
  std::array<int64_t, 4> xs{p.n, p.c, p.h, p.w}, ws{p.f, cg, p.kh, p.kw},
      ys{p.n, p.f, oh, ow};
  // Forward roles: x, w, y; which are inputs depends on the op.
  Layout4 lx, lw, ly;
  switch (p.op) {
  case ConvOp::Forward:
    lx = p.in0, lw = p.in1, ly = p.out;
    break;
  case ConvOp::GradInput:
    ly = p.in0, lw = p.in1, lx = p.out;
    break;
  case ConvOp::GradWeight:
    lx = p.in0, ly = p.in1, lw = p.out;
    break;
  }
  Tensor4<T> x(xs, lx, rng), w(ws, lw, rng), y(ys, ly, rng);
  std::vector<T> bias(p.bias ? p.f : 0);
  for (T &v : bias)
    v = T(std::uniform_real_distribution<double>(-1, 1)(rng));

  // The reference, in double, from the outputs' old values.
  Tensor4<T> &out = p.op == ConvOp::Forward     ? y
                    : p.op == ConvOp::GradInput ? x
                                                : w;
  const int64_t *os = out.sizes();
  std::vector<double> ref(os[0] * os[1] * os[2] * os[3]);
  auto refAt = [&](int64_t a, int64_t b, int64_t c, int64_t d) -> double & {
    return ref[((a * os[1] + b) * os[2] + c) * os[3] + d];
  };
  for (int64_t a = 0; a < os[0]; ++a)
    for (int64_t b = 0; b < os[1]; ++b)
      for (int64_t c = 0; c < os[2]; ++c)
        for (int64_t d = 0; d < os[3]; ++d)
          refAt(a, b, c, d) = p.overwrite ? 0.0 : double(out.at(a, b, c, d));
  for (int64_t n = 0; n < p.n; ++n)
    for (int64_t f = 0; f < p.f; ++f)
      for (int64_t oy = 0; oy < oh; ++oy)
        for (int64_t ox = 0; ox < ow; ++ox) {
          if (p.op == ConvOp::Forward && p.bias)
            refAt(n, f, oy, ox) += bias[f];
          int64_t g = f / fg;
          for (int64_t c = 0; c < cg; ++c)
            for (int64_t i = 0; i < p.kh; ++i)
              for (int64_t j = 0; j < p.kw; ++j) {
                int64_t iy = oy * p.sh - p.plh + i * p.dh;
                int64_t ix = ox * p.sw - p.plw + j * p.dw;
                if (iy < 0 || iy >= p.h || ix < 0 || ix >= p.w)
                  continue;
                int64_t ci = g * cg + c;
                switch (p.op) {
                case ConvOp::Forward:
                  refAt(n, f, oy, ox) +=
                      double(x.at(n, ci, iy, ix)) * w.at(f, c, i, j);
                  break;
                case ConvOp::GradInput:
                  refAt(n, ci, iy, ix) +=
                      double(y.at(n, f, oy, ox)) * w.at(f, c, i, j);
                  break;
                case ConvOp::GradWeight:
                  refAt(f, c, i, j) +=
                      double(x.at(n, ci, iy, ix)) * y.at(n, f, oy, ox);
                  break;
                }
              }
        }

  StridedMemRefType<T, 1> b{
      bias.data(), bias.data(), 0, {int64_t(bias.size())}, {1}};
  int64_t ow_ = p.overwrite;
  // Any bottom padding that gives these output sizes gives the same values.
  int64_t prh = p.derive ? -1 - (p.prh + 2) : p.prh;
  int64_t prw = p.derive ? -1 - (p.prw + 2) : p.prw;
  auto call = [&](auto fwd, auto gin, auto gw) {
    switch (p.op) {
    case ConvOp::Forward:
      fwd(&x.desc, &w.desc, &b, &y.desc, p.sh, p.sw, p.plh, p.plw, prh, prw,
          p.dh, p.dw, p.groups, ow_);
      break;
    case ConvOp::GradInput:
      gin(&y.desc, &w.desc, &x.desc, p.sh, p.sw, p.plh, p.plw, prh, prw, p.dh,
          p.dw, p.groups, ow_);
      break;
    case ConvOp::GradWeight:
      gw(&x.desc, &y.desc, &w.desc, p.sh, p.sw, p.plh, p.plw, prh, prw, p.dh,
         p.dw, p.groups, ow_);
      break;
    }
  };
  if constexpr (std::is_same_v<T, float>)
    call(_mlir_ciface_terra_lib_conv2d_f32,
         _mlir_ciface_terra_lib_conv2d_grad_input_f32,
         _mlir_ciface_terra_lib_conv2d_grad_weight_f32);
  else
    call(_mlir_ciface_terra_lib_conv2d_f64,
         _mlir_ciface_terra_lib_conv2d_grad_input_f64,
         _mlir_ciface_terra_lib_conv2d_grad_weight_f64);

  // The tolerance grows with the number of products summed per element.
  int64_t terms = p.op == ConvOp::GradWeight  ? p.n * oh * ow
                  : p.op == ConvOp::GradInput ? fg * p.kh * p.kw
                                              : cg * p.kh * p.kw;
  double worst = 0;
  for (int64_t a = 0; a < os[0]; ++a)
    for (int64_t b2 = 0; b2 < os[1]; ++b2)
      for (int64_t c = 0; c < os[2]; ++c)
        for (int64_t d = 0; d < os[3]; ++d) {
          double e = std::abs(double(out.at(a, b2, c, d)) - refAt(a, b2, c, d));
          worst = std::max(worst, e / (tol * (1 + std::sqrt(double(terms)))));
        }
  return worst;
}

class LibraryConv : public ::testing::TestWithParam<ConvCase> {};

TEST_P(LibraryConv, F32MatchesReference) {
  const ConvCase &p = GetParam();
  terra::rt::ConvCallCounts before = terra::rt::convCallCounts();
  EXPECT_LE(runConvCase<float>(p, 2e-6), 1.0) << p;
  terra::rt::ConvCallCounts after = terra::rt::convCallCounts();
  // Broadcast operands and empty problems take im2col; the rest oneDNN.
  bool im2col = p.in0 == Layout4::Broadcast || p.in1 == Layout4::Broadcast ||
                p.n == 0 || p.c == 0;
  EXPECT_EQ(after.onednn - before.onednn, im2col ? 0u : 1u) << p;
  EXPECT_EQ(after.im2col - before.im2col, im2col ? 1u : 0u) << p;
}

TEST_P(LibraryConv, F64MatchesReference) {
  const ConvCase &p = GetParam();
  EXPECT_LE(runConvCase<double>(p, 1e-12), 1.0) << p;
}

std::vector<ConvCase> convCases() {
  using L = Layout4;
  std::vector<ConvCase> cases;
  struct Shape {
    int64_t n, c, h, w, f, kh, kw, sh, sw, plh, plw, prh, prw, dh, dw, g;
  };
  const Shape shapes[] = {
      {2, 16, 12, 12, 16, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1}, // 3x3, pad 1
      {2, 8, 11, 10, 12, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1, 1},  // stride 2
      {1, 6, 13, 12, 8, 3, 2, 1, 2, 2, 0, 1, 3, 2, 3, 1},   // dilation, asym.
      {2, 16, 9, 9, 8, 1, 1, 1, 1, 0, 0, 0, 0, 1, 1, 1},    // 1x1 (plain)
      {2, 16, 9, 9, 32, 1, 1, 2, 2, 0, 0, 0, 0, 1, 1, 1},   // 1x1 stride 2
      {2, 8, 10, 10, 12, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 4},  // groups
      {2, 8, 10, 10, 8, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1, 8},   // depthwise
      {3, 3, 8, 8, 8, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1},     // 3 channels
      {1, 4, 5, 5, 4, 3, 3, 1, 1, 0, 0, 0, 0, 1, 1, 1},     // no padding
      {0, 4, 5, 5, 4, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1},     // empty batch
  };
  auto caseOf = [](ConvOp op, const Shape &s, L a, L b, L o, bool bias,
                   bool ow) {
    return ConvCase{op,   s.n,  s.c,   s.h,   s.w,   s.f,   s.kh, s.kw,
                    s.sh, s.sw, s.plh, s.plw, s.prh, s.prw, s.dh, s.dw,
                    s.g,  a,    b,     o,     bias,  ow};
  };
  const L c = L::Contiguous;
  for (ConvOp op : {ConvOp::Forward, ConvOp::GradInput, ConvOp::GradWeight})
    for (const Shape &s : shapes)
      for (bool ow : {true, false})
        cases.push_back(
            caseOf(op, s, c, c, c, op == ConvOp::Forward && ow, ow));
  // Layouts, on a 3x3 and a 1x1 problem: non-contiguous inputs and
  // outputs, broadcast inputs.
  for (ConvOp op : {ConvOp::Forward, ConvOp::GradInput, ConvOp::GradWeight})
    for (const Shape &s : {shapes[1], shapes[3]})
      for (auto [a, b, o] :
           {std::tuple<L, L, L>{L::ChannelsLast, L::Strided, L::Contiguous},
            {L::Strided, L::ChannelsLast, L::Strided},
            {L::Contiguous, L::Contiguous, L::ChannelsLast},
            {L::Broadcast, L::Contiguous, L::Contiguous}})
        for (bool ow : {true, false})
          cases.push_back(caseOf(op, s, a, b, o, op == ConvOp::Forward, ow));
  // The padding after the input derived from the sizes (stride 1, stride 2
  // with a choice of padding, dilation with asymmetric padding).
  for (ConvOp op : {ConvOp::Forward, ConvOp::GradInput, ConvOp::GradWeight})
    for (const Shape &s : {shapes[0], shapes[1], shapes[2]}) {
      ConvCase k = caseOf(op, s, c, c, c, op == ConvOp::Forward, true);
      k.derive = true;
      cases.push_back(k);
    }
  return cases;
}

INSTANTIATE_TEST_SUITE_P(Shapes, LibraryConv, ::testing::ValuesIn(convCases()));

/// Runner threads share the cached plans: the same problems from four
/// threads at once give the same results as one thread.
TEST(LibraryConvThreads, SharedPlansAcrossThreads) {
  std::mt19937 rng(3);
  Tensor4<float> x({4, 16, 16, 16}, Layout4::Contiguous, rng),
      w({16, 16, 3, 3}, Layout4::Contiguous, rng);
  StridedMemRefType<float, 1> noBias{nullptr, nullptr, 0, {0}, {1}};
  auto run = [&](std::vector<float> &out) {
    out.assign(4 * 16 * 16 * 16, 0.0f);
    StridedMemRefType<float, 4> y{out.data(),
                                  out.data(),
                                  0,
                                  {4, 16, 16, 16},
                                  {16 * 16 * 16, 16 * 16, 16, 1}};
    for (int i = 0; i < 20; ++i)
      _mlir_ciface_terra_lib_conv2d_f32(&x.desc, &w.desc, &noBias, &y, 1, 1, 1,
                                        1, 1, 1, 1, 1, 1, 1);
  };
  std::vector<float> expect;
  run(expect);
  std::vector<std::vector<float>> outs(4);
  std::vector<std::thread> threads;
  for (auto &o : outs)
    threads.emplace_back([&run, &o] { run(o); });
  for (std::thread &t : threads)
    t.join();
  for (auto &o : outs)
    EXPECT_EQ(o, expect);
}

} // namespace
