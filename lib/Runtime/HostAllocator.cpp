//===- HostAllocator.cpp - Caching allocator for graph buffers ------------===//
//
// See terra/Runtime/HostAllocator.h.
//
//===----------------------------------------------------------------------===//
#include "terra/Runtime/HostAllocator.h"
#include "terra/Runtime/CachingAllocator.h"

#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <unordered_map>
#include <vector>

namespace terra::rt {
namespace {

constexpr uint64_t kMagic = 0x7465727261686131ULL; // "terraha1"
constexpr size_t kBaseAlign = 64;

// Plain arithmetic instead of llvm/Support/MathExtras.h: the runtime core
// has no LLVM dependency (it travels to GPU machines, docs/gpu.md).
size_t alignUp(size_t v, size_t align) {
  return (v + align - 1) / align * align;
}
size_t powerOf2Ceil(size_t v) {
  size_t p = 1;
  while (p < v)
    p <<= 1;
  return p;
}

/// In front of every block.
struct Header {
  uint64_t magic;
  size_t sizeClass; ///< 0: not cached
  void *raw;        ///< what the system allocator returned
};
static_assert(sizeof(Header) <= kBaseAlign, "the header fits the offset");

Header *headerOf(void *p) {
  return reinterpret_cast<Header *>(static_cast<char *>(p) - sizeof(Header));
}

struct Cache {
  std::mutex mu;
  std::unordered_map<size_t, std::vector<void *>> free;
  size_t cachedBytes = 0;
  size_t limitBytes = size_t(4) << 30;
  uint64_t hits = 0, misses = 0;
};

Cache &cache() {
  static Cache *c = new Cache(); // never destroyed: blocks outlive statics
  return *c;
}

/// `size` bytes (aligned to `alignment`, a power of two >= 64) and a header
/// recording `sizeClass`, from the system.
void *systemAlloc(size_t size, size_t alignment, size_t sizeClass) {
  size_t total = alignUp(size + alignment, alignment);
  void *raw = std::aligned_alloc(alignment, total);
  if (!raw) {
    std::fprintf(stderr,
                 "terra: out of memory allocating %zu bytes for a "
                 "graph buffer\n",
                 size);
    std::abort();
  }
  void *p = static_cast<char *>(raw) + alignment;
  *headerOf(p) = Header{kMagic, sizeClass, raw};
  return p;
}

void systemFree(void *p) { std::free(headerOf(p)->raw); }

/// Releases cached blocks until at most `target` bytes are cached; called
/// with the lock held.
void trimTo(Cache &c, size_t target) {
  for (auto it = c.free.begin(); it != c.free.end() && c.cachedBytes > target;
       ++it) {
    std::vector<void *> &blocks = it->second;
    while (!blocks.empty() && c.cachedBytes > target) {
      systemFree(blocks.back());
      blocks.pop_back();
      c.cachedBytes -= it->first;
    }
  }
}

} // namespace

size_t hostSizeClass(size_t size) {
  if (size <= kSmallClasses)
    return size ? alignUp(size, kBaseAlign) : kBaseAlign;
  // Four classes per power of two, as for device memory.
  return CachingAllocator::sizeClass(size);
}

void *hostAlloc(size_t size, size_t alignment) {
  alignment = alignment <= kBaseAlign ? kBaseAlign : powerOf2Ceil(alignment);
  if (alignment != kBaseAlign)
    return systemAlloc(size ? size : 1, alignment, 0);
  size_t sizeClass = hostSizeClass(size);
  Cache &c = cache();
  {
    std::lock_guard<std::mutex> lock(c.mu);
    auto it = c.free.find(sizeClass);
    if (it != c.free.end() && !it->second.empty()) {
      void *p = it->second.back();
      it->second.pop_back();
      c.cachedBytes -= sizeClass;
      ++c.hits;
      return p;
    }
    ++c.misses;
  }
  return systemAlloc(sizeClass, alignment, sizeClass);
}

void hostFree(void *p) {
  if (!p)
    return;
  Header *h = headerOf(p);
  if (h->magic != kMagic) {
    std::fprintf(stderr,
                 "terra: hostFree of a pointer hostAlloc did not "
                 "return (%p)\n",
                 p);
    std::abort();
  }
  if (h->sizeClass) {
    Cache &c = cache();
    std::lock_guard<std::mutex> lock(c.mu);
    if (c.cachedBytes + h->sizeClass <= c.limitBytes) {
      c.free[h->sizeClass].push_back(p);
      c.cachedBytes += h->sizeClass;
      return;
    }
  }
  systemFree(p);
}

HostCacheStats hostCacheStats() {
  Cache &c = cache();
  std::lock_guard<std::mutex> lock(c.mu);
  return {c.cachedBytes, c.limitBytes, c.hits, c.misses};
}

void setHostCacheLimit(size_t bytes) {
  Cache &c = cache();
  std::lock_guard<std::mutex> lock(c.mu);
  c.limitBytes = bytes;
  trimTo(c, bytes);
}

void hostCacheRelease() {
  Cache &c = cache();
  std::lock_guard<std::mutex> lock(c.mu);
  trimTo(c, 0);
  c.free.clear();
}

} // namespace terra::rt
