//===- HostAllocator.h - Caching allocator for graph buffers ----*- C++ -*-===//
//
// Every buffer a compiled CPU graph allocates (memref.alloc through
// `_mlir_memref_to_llvm_alloc`) comes from here. A training step allocates
// the same buffers every iteration: gradients, optimizer temporaries,
// activations, each of a parameter's size. Straight from malloc, glibc
// maps every large one afresh (mmap above its threshold, or a heap it trims
// back on free), so each step pays a page fault and the kernel's zeroing
// for every 4 KiB it touches: a quarter of a 512-wide MLP step's CPU time
// in `perf`. Freed blocks are kept instead, in free lists by size class,
// and handed out again, as PyTorch's CUDA caching allocator does for
// device memory.
//
// Every block is rounded up to a size class (multiples of 64 bytes up to
// kSmallClasses, then four per power of two: above it at most 25% is
// wasted) and cached on free while the cache holds less than its limit
// (setHostCacheLimit; TERRA_HOST_CACHE_MB from Python). Small blocks are
// cached too: a 64-byte-aligned block from glibc (aligned_alloc) is carved
// out of a larger chunk whose ends go back to its bins, and that splitting
// and coalescing was ~15% of a graph-bound step's runner thread in `perf`
// (SDPoint: many small activations). Every block starts 64-byte aligned
// (or at the requested alignment) after a small header that records its
// class, so hostFree needs no lookup. Blocks aligned to more than 64
// bytes are not cached. Thread-safe: buffers are freed by the graph's
// runner thread and, once fetched, by the host when the last tensor
// viewing them dies.
//
//===----------------------------------------------------------------------===//
#ifndef TERRA_RUNTIME_HOSTALLOCATOR_H
#define TERRA_RUNTIME_HOSTALLOCATOR_H

#include <cstddef>
#include <cstdint>

namespace terra::rt {

/// Blocks up to this size are rounded up to a multiple of 64 bytes.
constexpr size_t kSmallClasses = 512;

/// A block of at least `size` bytes, aligned to max(alignment, 64); never
/// null (aborts when the system is out of memory, as malloc's callers in
/// compiled code cannot handle null either). Free it with hostFree.
void *hostAlloc(size_t size, size_t alignment = 0);
/// Returns a block of hostAlloc to the cache (or to the system); null is
/// ignored.
void hostFree(void *p);

/// The size class a request of `size` bytes gets (for tests).
size_t hostSizeClass(size_t size);

struct HostCacheStats {
  size_t cachedBytes = 0; ///< held in free lists now
  size_t limitBytes = 0;
  uint64_t hits = 0;   ///< cacheable requests served from a free list
  uint64_t misses = 0; ///< cacheable requests that went to the system
};
HostCacheStats hostCacheStats();
/// The most bytes the free lists may hold; lowering it releases the excess.
void setHostCacheLimit(size_t bytes);
/// Gives every cached block back to the system.
void hostCacheRelease();

} // namespace terra::rt

#endif // TERRA_RUNTIME_HOSTALLOCATOR_H
