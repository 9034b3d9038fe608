//===- CachingAllocatorTest.cpp - The caching allocator over a backend ----===//
#include "terra/Runtime/CachingAllocator.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <set>

using terra::rt::CachingAllocator;

namespace {

// A backend that counts calls and can run out of memory.
struct Backend {
  static std::set<void *> live;
  static int allocs, frees;
  static size_t capacity; ///< blocks it can hand out at once
  static void *alloc(size_t n) {
    if (live.size() >= capacity)
      return nullptr;
    ++allocs;
    void *p = std::malloc(n);
    live.insert(p);
    return p;
  }
  static void free(void *p) {
    ++frees;
    EXPECT_EQ(live.erase(p), 1u);
    std::free(p);
  }
  static void reset() {
    allocs = frees = 0;
    capacity = 1000;
  }
};
std::set<void *> Backend::live;
int Backend::allocs, Backend::frees;
size_t Backend::capacity;

TEST(CachingAllocator, SizeClassesAreQuartersOfAPowerOfTwo) {
  EXPECT_EQ(CachingAllocator::sizeClass(1), 512u);
  EXPECT_EQ(CachingAllocator::sizeClass(512), 512u);
  EXPECT_EQ(CachingAllocator::sizeClass(513), 640u);
  EXPECT_EQ(CachingAllocator::sizeClass(1 << 20), size_t(1) << 20);
  EXPECT_EQ(CachingAllocator::sizeClass((1 << 20) + 1), (size_t(5) << 18));
}

TEST(CachingAllocator, ASecondIterationReusesTheFirstOnesBlocks) {
  Backend::reset();
  {
    CachingAllocator a(Backend::alloc, Backend::free, size_t(1) << 30);
    void *x = a.allocate(4000), *y = a.allocate(100000);
    EXPECT_TRUE(a.deallocate(x));
    EXPECT_TRUE(a.deallocate(y));
    // The same sizes again (and one within the same class): no backend call.
    void *x2 = a.allocate(4000), *y2 = a.allocate(99000);
    EXPECT_EQ(x2, x);
    EXPECT_EQ(y2, y);
    EXPECT_EQ(Backend::allocs, 2);
    EXPECT_EQ(Backend::frees, 0);
    auto s = a.snapshot();
    EXPECT_EQ(s.hits, 2u);
    EXPECT_EQ(s.misses, 2u);
    EXPECT_EQ(s.cachedBytes, 0u);
    a.deallocate(x2);
    a.deallocate(y2);
  }
  // The destructor returned the cached blocks.
  EXPECT_EQ(Backend::frees, 2);
  EXPECT_TRUE(Backend::live.empty());
}

TEST(CachingAllocator, TheLimitSendsBlocksBackToTheBackend) {
  Backend::reset();
  CachingAllocator a(Backend::alloc, Backend::free, 4096);
  void *x = a.allocate(4096), *y = a.allocate(4096);
  a.deallocate(x); // cached: 4096 of 4096
  a.deallocate(y); // over the limit: freed
  EXPECT_EQ(Backend::frees, 1);
  EXPECT_EQ(a.snapshot().cachedBytes, 4096u);
  a.release();
  EXPECT_EQ(Backend::frees, 2);
  EXPECT_TRUE(Backend::live.empty());
}

TEST(CachingAllocator, RunningOutReleasesTheCacheAndRetries) {
  Backend::reset();
  Backend::capacity = 2;
  CachingAllocator a(Backend::alloc, Backend::free, size_t(1) << 30);
  void *x = a.allocate(1000), *y = a.allocate(5000);
  a.deallocate(x); // cached, but of another class than the next request
  void *z = a.allocate(70000);
  ASSERT_NE(z, nullptr);
  EXPECT_EQ(Backend::frees, 1);
  // Nothing cached and nothing left: null, not a crash.
  EXPECT_EQ(a.allocate(70000), nullptr);
  a.deallocate(y);
  a.deallocate(z);
  a.release();
  EXPECT_TRUE(Backend::live.empty());
}

TEST(CachingAllocator, ForeignPointersAreRefused) {
  Backend::reset();
  CachingAllocator a(Backend::alloc, Backend::free, 1 << 20);
  int local = 0;
  EXPECT_FALSE(a.deallocate(&local));
  EXPECT_TRUE(a.deallocate(nullptr));
  EXPECT_EQ(Backend::frees, 0);
}

} // namespace
