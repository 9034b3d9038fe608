//===- HostAllocatorTest.cpp - The caching host allocator -----------------===//
#include "terra/Runtime/HostAllocator.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <thread>
#include <vector>

using namespace terra::rt;

namespace {

bool aligned(void *p, size_t a) {
  return reinterpret_cast<uintptr_t>(p) % a == 0;
}

class HostAllocator : public ::testing::Test {
protected:
  void SetUp() override {
    hostCacheRelease();
    saved = hostCacheStats().limitBytes;
    setHostCacheLimit(size_t(64) << 20);
  }
  void TearDown() override {
    hostCacheRelease();
    setHostCacheLimit(saved);
  }
  size_t saved = 0;
};

TEST_F(HostAllocator, SizeClassesWasteAtMostAQuarter) {
  // Small blocks: multiples of 64 bytes (a block's alignment anyway).
  EXPECT_EQ(hostSizeClass(0), 64u);
  EXPECT_EQ(hostSizeClass(1), 64u);
  EXPECT_EQ(hostSizeClass(64), 64u);
  EXPECT_EQ(hostSizeClass(65), 128u);
  EXPECT_EQ(hostSizeClass(kSmallClasses), kSmallClasses);
  for (size_t s : {size_t(513), size_t(1000), size_t(4097), size_t(65537),
                   size_t(100000), size_t(1) << 20, (size_t(1) << 20) + 1,
                   size_t(3) << 22, size_t(123456789)}) {
    size_t c = hostSizeClass(s);
    EXPECT_GE(c, s);
    EXPECT_LE(c - s, s / 4) << s;
  }
  // Nearby sizes share a class (a step's buffers of one parameter's size).
  EXPECT_EQ(hostSizeClass(1000000), hostSizeClass(1000001));
}

TEST_F(HostAllocator, ReusesAFreedBlockOfTheSameClass) {
  void *a = hostAlloc(1 << 20);
  std::memset(a, 1, 1 << 20); // writable over its whole size
  hostFree(a);
  HostCacheStats before = hostCacheStats();
  EXPECT_EQ(before.cachedBytes, hostSizeClass(1 << 20));
  void *b = hostAlloc((1 << 20) - 100); // same class
  EXPECT_EQ(a, b);
  HostCacheStats after = hostCacheStats();
  EXPECT_EQ(after.hits, before.hits + 1);
  EXPECT_EQ(after.cachedBytes, 0u);
  hostFree(b);
}

TEST_F(HostAllocator, SmallBlocksAreCachedToo) {
  // (glibc's aligned_alloc splits a larger chunk for every small block.)
  void *a = hostAlloc(100);
  ASSERT_NE(a, nullptr);
  std::memset(a, 1, 100);
  hostFree(a);
  EXPECT_EQ(hostCacheStats().cachedBytes, 128u);
  void *b = hostAlloc(90); // same class
  EXPECT_EQ(a, b);
  EXPECT_EQ(hostCacheStats().cachedBytes, 0u);
  hostFree(b);
  void *z = hostAlloc(0); // a valid, freeable block
  ASSERT_NE(z, nullptr);
  hostFree(z);
  hostFree(nullptr);
}

TEST_F(HostAllocator, BlocksAlignedBeyondTheBaseAreNotCached) {
  void *p = hostAlloc(1 << 20, 4096);
  hostFree(p);
  EXPECT_EQ(hostCacheStats().cachedBytes, 0u);
}

TEST_F(HostAllocator, BlocksAreAligned) {
  for (size_t s : {size_t(1), size_t(100), size_t(1) << 20}) {
    void *p = hostAlloc(s);
    EXPECT_TRUE(aligned(p, 64)) << s;
    hostFree(p);
  }
  void *p = hostAlloc(1 << 20, 4096);
  EXPECT_TRUE(aligned(p, 4096));
  std::memset(p, 0, 1 << 20);
  hostFree(p);
}

TEST_F(HostAllocator, TheLimitBoundsTheCache) {
  setHostCacheLimit(size_t(3) << 20);
  std::vector<void *> blocks;
  for (int i = 0; i < 5; ++i)
    blocks.push_back(hostAlloc(1 << 20));
  for (void *p : blocks)
    hostFree(p);
  EXPECT_EQ(hostCacheStats().cachedBytes, size_t(3) << 20); // two went back
  setHostCacheLimit(size_t(1) << 20); // lowering it releases the excess
  EXPECT_EQ(hostCacheStats().cachedBytes, size_t(1) << 20);
  setHostCacheLimit(0);
  EXPECT_EQ(hostCacheStats().cachedBytes, 0u);
  void *p = hostAlloc(1 << 20);
  hostFree(p);
  EXPECT_EQ(hostCacheStats().cachedBytes, 0u); // caches nothing
}

TEST_F(HostAllocator, ThreadsAllocateAndFreeConcurrently) {
  // The runner thread frees what it allocated; the host frees fetched
  // buffers: both at once.
  auto work = [](int seed) {
    std::vector<void *> held;
    for (int i = 0; i < 2000; ++i) {
      size_t size = (size_t(1) << 10) * (1 + (i * 7 + seed) % 67);
      void *p = hostAlloc(size);
      static_cast<char *>(p)[size - 1] = char(i);
      held.push_back(p);
      if (held.size() > 4) {
        hostFree(held.front());
        held.erase(held.begin());
      }
    }
    for (void *p : held)
      hostFree(p);
  };
  std::thread t1(work, 1), t2(work, 2);
  t1.join();
  t2.join();
  HostCacheStats s = hostCacheStats();
  EXPECT_GT(s.hits, 0u);
  EXPECT_LE(s.cachedBytes, s.limitBytes);
}

} // namespace
