//===- MemrefCopyTest.cpp - memrefCopy against element-wise reference -----===//
//
// The runtime's `memrefCopy` (lib/Runtime/MemrefCopy.cpp) stands in for
// upstream's mlir_c_runner_utils one in every build: JIT graphs, graphs run
// by terra-run-object, and the portable build. These tests call it with
// the unranked descriptors the lowering passes.
//
//===----------------------------------------------------------------------===//

#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

extern "C" void memrefCopy(int64_t, const int64_t *, const int64_t *);

namespace {

/// A ranked descriptor {allocated, aligned, offset, sizes, strides} of rank
/// 2 and the unranked {rank, pointer} that points at it.
struct Desc2 {
  float *allocated, *aligned;
  int64_t offset, sizes[2], strides[2];
};

void copy(Desc2 &src, Desc2 &dst) {
  int64_t s[2] = {2, reinterpret_cast<int64_t>(&src)};
  int64_t d[2] = {2, reinterpret_cast<int64_t>(&dst)};
  memrefCopy(sizeof(float), s, d);
}

TEST(MemrefCopy, RowMajorToRowMajorWithOffsets) {
  std::vector<float> a(20), b(20, -1);
  for (int i = 0; i < 20; ++i)
    a[i] = float(i);
  Desc2 src{a.data(), a.data(), 2, {3, 4}, {4, 1}};
  Desc2 dst{b.data(), b.data(), 5, {3, 4}, {4, 1}};
  copy(src, dst);
  for (int i = 0; i < 12; ++i)
    EXPECT_EQ(b[5 + i], a[2 + i]) << i;
  EXPECT_EQ(b[4], -1);
  EXPECT_EQ(b[17], -1);
}

TEST(MemrefCopy, TransposedSourceToRowMajor) {
  // src is the transpose of a row-major 4x3 matrix: sizes [3, 4], strides
  // [1, 3]; dst[i][j] must be a[j * 3 + i].
  std::vector<float> a(12), b(12, -1);
  for (int i = 0; i < 12; ++i)
    a[i] = float(i);
  Desc2 src{a.data(), a.data(), 0, {3, 4}, {1, 3}};
  Desc2 dst{b.data(), b.data(), 0, {3, 4}, {4, 1}};
  copy(src, dst);
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 4; ++j)
      EXPECT_EQ(b[i * 4 + j], a[j * 3 + i]) << i << "," << j;
}

TEST(MemrefCopy, EmptyCopiesNothing) {
  std::vector<float> a(4, 1), b(4, -1);
  Desc2 src{a.data(), a.data(), 0, {0, 4}, {1, 0}};
  Desc2 dst{b.data(), b.data(), 0, {0, 4}, {4, 1}};
  copy(src, dst);
  for (float v : b)
    EXPECT_EQ(v, -1);
}

} // namespace
