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
#include <cstring>
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

/// A descriptor of any rank over bytes, as the lowering lays it out.
struct Desc {
  std::vector<int64_t> words; // allocated, aligned, offset, sizes, strides
  Desc(char *base, int64_t offset, const std::vector<int64_t> &sizes,
       const std::vector<int64_t> &strides) {
    words = {reinterpret_cast<int64_t>(base), reinterpret_cast<int64_t>(base),
             offset};
    words.insert(words.end(), sizes.begin(), sizes.end());
    words.insert(words.end(), strides.begin(), strides.end());
  }
};

/// Element-by-element reference: dst[idx] = src[idx] for every index.
void reference(int64_t elemSize, const std::vector<int64_t> &sizes,
               const char *from, int64_t so,
               const std::vector<int64_t> &sStrides, char *to, int64_t dOff,
               const std::vector<int64_t> &dStrides) {
  size_t rank = sizes.size();
  std::vector<int64_t> idx(rank, 0);
  int64_t n = 1;
  for (int64_t v : sizes)
    n *= v;
  for (int64_t k = 0; k < n; ++k) {
    int64_t a = so, b = dOff;
    for (size_t i = 0; i < rank; ++i) {
      a += idx[i] * sStrides[i];
      b += idx[i] * dStrides[i];
    }
    std::memcpy(to + b * elemSize, from + a * elemSize, size_t(elemSize));
    for (size_t i = rank; i-- > 0;) {
      if (++idx[i] < sizes[i])
        break;
      idx[i] = 0;
    }
  }
}

/// Copies with memrefCopy and with the reference into buffers of `bytes`
/// filled alike, and compares them whole (untouched bytes included).
void expectLikeReference(int64_t elemSize, const std::vector<int64_t> &sizes,
                         int64_t so, const std::vector<int64_t> &sStrides,
                         int64_t dOff, const std::vector<int64_t> &dStrides,
                         size_t bytes) {
  std::vector<char> from(bytes), got(bytes, 0x5a), want(bytes, 0x5a);
  for (size_t i = 0; i < bytes; ++i)
    from[i] = char(i * 7 + 3);
  Desc sd(from.data(), so, sizes, sStrides),
      dd(got.data(), dOff, sizes, dStrides);
  int64_t rank = int64_t(sizes.size());
  int64_t s[2] = {rank, reinterpret_cast<int64_t>(sd.words.data())};
  int64_t d[2] = {rank, reinterpret_cast<int64_t>(dd.words.data())};
  memrefCopy(elemSize, s, d);
  reference(elemSize, sizes, from.data(), so, sStrides, want.data(), dOff,
            dStrides);
  EXPECT_EQ(got, want);
}

TEST(MemrefCopy, PermutationsOfThreeDimsLikeElementByElement) {
  // A 2x3x4 block of a row-major 2x3x4 array seen through each permutation
  // of its dims, copied to row-major, for every element size the lowering
  // uses (and 16 bytes: the generic path).
  std::vector<int64_t> base = {12, 4, 1}, full = {2, 3, 4};
  int perms[6][3] = {{0, 1, 2}, {0, 2, 1}, {1, 0, 2},
                     {1, 2, 0}, {2, 0, 1}, {2, 1, 0}};
  for (int64_t es : {1, 2, 4, 8, 16})
    for (auto &p : perms) {
      std::vector<int64_t> sizes, strides;
      for (int k : p) {
        sizes.push_back(full[k]);
        strides.push_back(base[k]);
      }
      std::vector<int64_t> rowMajor = {sizes[1] * sizes[2], sizes[2], 1};
      expectLikeReference(es, sizes, 1, strides, 2, rowMajor, size_t(40 * es));
      // And back: row-major source, permuted destination.
      expectLikeReference(es, sizes, 0, rowMajor, 3, strides, size_t(40 * es));
    }
}

TEST(MemrefCopy, UnitDimsBroadcastsAndMergedDimsLikeElementByElement) {
  // Unit dims anywhere; a broadcast (stride 0) source; dims contiguous on
  // both sides (merged) around one that is not; a padded row pitch.
  expectLikeReference(4, {1, 3, 1, 5}, 0, {99, 5, 7, 1}, 0, {15, 5, 1, 1}, 400);
  expectLikeReference(4, {3, 5}, 2, {0, 1}, 0, {5, 1}, 200);
  expectLikeReference(4, {3, 5}, 0, {1, 0}, 1, {6, 1}, 200);
  expectLikeReference(8, {2, 3, 4}, 0, {12, 4, 1}, 0, {24, 8, 1}, 800);
  expectLikeReference(2, {4, 6}, 3, {8, 1}, 1, {1, 4}, 200);
  // Rank 0: one element.
  expectLikeReference(4, {}, 2, {}, 5, {}, 64);
}

} // namespace
