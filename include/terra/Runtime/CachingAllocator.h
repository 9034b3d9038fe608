//===- CachingAllocator.h - Caching allocator over any backend --*- C++ -*-===//
//
// Keeps freed blocks on free lists by size class and hands them out again,
// so a training step that allocates the same buffers every iteration stops
// paying the backend (cuMemAlloc / cuMemFree synchronize the device and
// cost tens of microseconds each) after its first iteration. Unlike the
// host allocator (HostAllocator.h) it writes nothing into the blocks: the
// size class of each live block is kept in a side table, so it works for
// memory the host cannot touch (device memory). Header-only, so the CUDA
// runtime library and the runtime core each use it without linking the
// other. Thread-safe.
//
//===----------------------------------------------------------------------===//
#ifndef TERRA_RUNTIME_CACHINGALLOCATOR_H
#define TERRA_RUNTIME_CACHINGALLOCATOR_H

#include "terra/Runtime/PointerMap.h"

#include <cstddef>
#include <cstdint>
#include <mutex>
#include <unordered_map>
#include <vector>

namespace terra::rt {

class CachingAllocator {
public:
  using AllocFn = void *(*)(size_t bytes);
  using FreeFn = void (*)(void *);

  struct Stats {
    uint64_t hits = 0, misses = 0;
    size_t cachedBytes = 0; ///< on the free lists
    size_t liveBytes = 0;   ///< handed out, by size class
  };

  /// `limitBytes` bounds the free lists: a freed block that would exceed it
  /// goes back to the backend.
  CachingAllocator(AllocFn alloc, FreeFn free, size_t limitBytes)
      : backendAlloc(alloc), backendFree(free), limit(limitBytes) {}
  CachingAllocator(const CachingAllocator &) = delete;
  CachingAllocator &operator=(const CachingAllocator &) = delete;
  ~CachingAllocator() { release(); }

  /// Four classes per power of two (steps of a quarter of the power below),
  /// at least 512 bytes: a block serves requests up to 25% smaller.
  static size_t sizeClass(size_t bytes) {
    if (bytes <= 512)
      return 512;
    unsigned log = 0;
    for (size_t v = bytes; v >>= 1;)
      ++log;
    size_t step = size_t(1) << (log - 2);
    return (bytes + step - 1) / step * step;
  }

  /// A block of at least `bytes` (null if the backend has none to give,
  /// after the free lists were returned to it and it was asked again).
  void *allocate(size_t bytes) {
    size_t cls = sizeClass(bytes);
    {
      std::lock_guard<std::mutex> lock(mu);
      auto it = free.find(cls);
      if (it != free.end() && !it->second.empty()) {
        void *p = it->second.back();
        it->second.pop_back();
        stats.cachedBytes -= cls;
        stats.liveBytes += cls;
        ++stats.hits;
        live.insert(p, cls);
        return p;
      }
      ++stats.misses;
    }
    void *p = backendAlloc(cls);
    if (!p) {
      // Out of memory with blocks parked on the free lists: give them back
      // and try once more.
      {
        std::lock_guard<std::mutex> lock(mu);
        if (stats.cachedBytes == 0)
          return nullptr;
      }
      release();
      p = backendAlloc(cls);
      if (!p)
        return nullptr;
    }
    std::lock_guard<std::mutex> lock(mu);
    live.insert(p, cls);
    stats.liveBytes += cls;
    return p;
  }

  /// Returns a block of `allocate` to the free lists (or to the backend);
  /// false for a pointer this allocator did not hand out (it is left alone).
  bool deallocate(void *p) {
    if (!p)
      return true;
    std::unique_lock<std::mutex> lock(mu);
    size_t cls = 0;
    if (!live.erase(p, &cls))
      return false;
    stats.liveBytes -= cls;
    if (stats.cachedBytes + cls <= limit) {
      free[cls].push_back(p);
      stats.cachedBytes += cls;
      return true;
    }
    lock.unlock();
    backendFree(p);
    return true;
  }

  /// Returns every cached block to the backend.
  void release() {
    std::vector<void *> blocks;
    {
      std::lock_guard<std::mutex> lock(mu);
      for (auto &[cls, list] : free)
        blocks.insert(blocks.end(), list.begin(), list.end());
      free.clear();
      stats.cachedBytes = 0;
    }
    for (void *p : blocks)
      backendFree(p);
  }

  Stats snapshot() {
    std::lock_guard<std::mutex> lock(mu);
    return stats;
  }

private:
  AllocFn backendAlloc;
  FreeFn backendFree;
  size_t limit;
  std::mutex mu;
  std::unordered_map<size_t, std::vector<void *>> free;
  PointerMap<size_t> live; ///< block -> its size class
  Stats stats;
};

} // namespace terra::rt

#endif // TERRA_RUNTIME_CACHINGALLOCATOR_H
