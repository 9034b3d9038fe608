//===- PointerMapTest.cpp - The flat pointer-keyed hash map
//----------------===//
#include "terra/Runtime/PointerMap.h"

#include <gtest/gtest.h>

#include <random>
#include <unordered_map>
#include <vector>

using terra::rt::PointerMap;

namespace {

void *ptr(uintptr_t v) { return reinterpret_cast<void *>(v); }

/// Checks `m` holds exactly what `want` holds.
void expectSame(PointerMap<size_t> &m,
                const std::unordered_map<void *, size_t> &want) {
  ASSERT_EQ(m.size(), want.size());
  for (auto &[k, v] : want) {
    size_t *got = m.find(k);
    ASSERT_NE(got, nullptr) << k;
    EXPECT_EQ(*got, v);
  }
  size_t seen = 0;
  m.forEach([&](void *k, size_t v) {
    ++seen;
    auto it = want.find(k);
    ASSERT_NE(it, want.end()) << k;
    EXPECT_EQ(it->second, v);
  });
  EXPECT_EQ(seen, want.size());
}

TEST(PointerMap, AgreesWithUnorderedMapUnderRandomInsertsAndErases) {
  // Page-aligned keys from a small range: they differ only in a few high
  // bits, so they collide and form the long probe runs that erasing by
  // backward shift must keep findable.
  std::mt19937_64 rng(7);
  for (uintptr_t stride : {uintptr_t(4096), uintptr_t(64), uintptr_t(1)}) {
    PointerMap<size_t> m;
    std::unordered_map<void *, size_t> want;
    for (int step = 0; step < 60000; ++step) {
      void *k = ptr(0x10000 + stride * (rng() % 3000));
      size_t v = rng();
      switch (rng() % 4) {
      case 0:
      case 1: {
        bool fresh = want.emplace(k, v).second;
        EXPECT_EQ(m.insert(k, v), fresh);
        break;
      }
      case 2: {
        size_t out = 0;
        auto it = want.find(k);
        EXPECT_EQ(m.erase(k, &out), it != want.end());
        if (it != want.end()) {
          EXPECT_EQ(out, it->second);
          want.erase(it);
        }
        break;
      }
      default:
        m.set(k, v);
        want[k] = v;
      }
      if (step % 5000 == 0)
        expectSame(m, want);
    }
    expectSame(m, want);
  }
}

TEST(PointerMap, ClearKeepsTheArrayAndAMoveTakesIt) {
  PointerMap<bool> m;
  m.reserve(1000);
  size_t room = m.capacity();
  EXPECT_GE(room, 1000u);
  for (uintptr_t i = 1; i <= 1000; ++i)
    EXPECT_TRUE(m.insert(ptr(i * 16), true));
  EXPECT_EQ(m.capacity(), room); // reserved: no growth
  m.clear();
  EXPECT_TRUE(m.empty());
  EXPECT_EQ(m.capacity(), room);
  EXPECT_FALSE(m.contains(ptr(16)));
  EXPECT_FALSE(m.erase(ptr(16)));

  PointerMap<bool> taken = std::move(m);
  EXPECT_EQ(taken.capacity(), room);
  EXPECT_EQ(m.capacity(), 0u); // NOLINT(bugprone-use-after-move): specified
  EXPECT_TRUE(m.empty());
  EXPECT_FALSE(m.contains(ptr(16)));
  EXPECT_TRUE(m.insert(ptr(16), true)); // usable again
  EXPECT_TRUE(taken.insert(ptr(16), true));
  EXPECT_TRUE(taken.contains(ptr(16)) && m.contains(ptr(16)));
}

TEST(PointerMap, ANullKeyIsNeverAnEntry) {
  // Null marks an empty slot. The graph frees null pointers, and erasing
  // null "found" the first empty slot of its probe: it removed nothing but
  // decremented the count, so a later clear (nothing to do at count 0)
  // left an entry behind, the next run inherited it and the run's end
  // freed that buffer a second time (two graph buffers on one block).
  PointerMap<size_t> m;
  std::unordered_map<void *, size_t> want;
  for (uintptr_t i = 1; i <= 40; ++i) {
    ASSERT_TRUE(m.insert(ptr(i * 4096), i));
    want[ptr(i * 4096)] = i;
  }
  for (int k = 0; k < 3; ++k) {
    EXPECT_FALSE(m.erase(nullptr));
    EXPECT_EQ(m.find(nullptr), nullptr);
    EXPECT_FALSE(m.contains(nullptr));
    EXPECT_FALSE(m.insert(nullptr, 7));
    expectSame(m, want);
  }
  for (auto &[k, v] : want)
    ASSERT_TRUE(m.erase(k));
  m.clear();
  size_t left = 0;
  m.forEach([&](void *, size_t) { ++left; });
  EXPECT_EQ(left, 0u);
}

} // namespace
