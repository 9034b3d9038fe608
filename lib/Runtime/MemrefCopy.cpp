//===- MemrefCopy.cpp - memref.copy between layouts -----------------------===//
//
// `memref.copy` between layouts the lowering cannot turn into loops becomes
// a call to `memrefCopy`. Upstream's lives in mlir_c_runner_utils, which
// Debian ships linked to libMLIR.so and libLLVM.so: a graph run by
// terra-run-object, or by a build that carries no shared MLIR (the portable
// build of docs/gpu.md), could not resolve it. This is the same ABI.
//
// Graphs copy between layouts often (the transposes and skews of attention
// bufferize to such copies: 44% of Music Transformer's graph time went to
// an element-by-element version of this function, an index computation
// and a memcpy call per element). So the copy first drops unit dims and
// merges adjacent dims that are contiguous on both sides, then runs an
// odometer over the outer dims with offsets kept incrementally, and copies
// the innermost dim as one memcpy when it is contiguous on both sides, or
// as a strided loop of fixed-size moves.
//
//===----------------------------------------------------------------------===//

#include <cstdint>
#include <cstring>
#include <vector>

namespace {

/// One dim of the copy: its size and the source and destination strides
/// (in elements).
struct Dim {
  int64_t size, src, dst;
};

/// Copies `n` elements of `size` bytes, `ss` / `ds` elements apart; called
/// with a constant `size`, the copy of each element is one move.
inline void stridedRun(char *to, const char *from, int64_t n, int64_t ds,
                       int64_t ss, int64_t size) {
  for (int64_t i = 0; i < n; ++i)
    std::memcpy(to + i * ds * size, from + i * ss * size, size_t(size));
}

void innerRun(char *to, const char *from, const Dim &d, int64_t elemSize) {
  if (d.src == 1 && d.dst == 1) {
    std::memcpy(to, from, size_t(d.size * elemSize));
    return;
  }
  switch (elemSize) {
  case 1:
    return stridedRun(to, from, d.size, d.dst, d.src, 1);
  case 2:
    return stridedRun(to, from, d.size, d.dst, d.src, 2);
  case 4:
    return stridedRun(to, from, d.size, d.dst, d.src, 4);
  case 8:
    return stridedRun(to, from, d.size, d.dst, d.src, 8);
  default:
    return stridedRun(to, from, d.size, d.dst, d.src, elemSize);
  }
}

} // namespace

extern "C" void memrefCopy(int64_t elemSize, const int64_t *src,
                           const int64_t *dst) {
  // An unranked memref is {rank, descriptor}; a descriptor is {allocated,
  // aligned, offset, sizes[rank], strides[rank]}.
  struct Descriptor {
    char *allocated, *aligned;
    int64_t offset;
    int64_t sizesAndStrides[];
  };
  int64_t rank = src[0];
  const auto *s = *reinterpret_cast<Descriptor *const *>(src + 1);
  const auto *d = *reinterpret_cast<Descriptor *const *>(dst + 1);
  const int64_t *sizes = s->sizesAndStrides;
  const int64_t *sStrides = s->sizesAndStrides + rank;
  const int64_t *dStrides = d->sizesAndStrides + rank;

  // Outermost first; unit dims dropped, a dim merged into the one outside
  // it when both sides step over it exactly.
  std::vector<Dim> dims;
  dims.reserve(size_t(rank));
  for (int64_t i = 0; i < rank; ++i) {
    if (sizes[i] == 0)
      return;
    if (sizes[i] == 1)
      continue;
    Dim next{sizes[i], sStrides[i], dStrides[i]};
    if (!dims.empty()) {
      Dim &outer = dims.back();
      if (outer.src == next.size * next.src &&
          outer.dst == next.size * next.dst) {
        outer = {outer.size * next.size, next.src, next.dst};
        continue;
      }
    }
    dims.push_back(next);
  }
  char *from = s->aligned + s->offset * elemSize;
  char *to = d->aligned + d->offset * elemSize;
  if (dims.empty()) {
    std::memcpy(to, from, size_t(elemSize));
    return;
  }
  Dim inner = dims.back();
  dims.pop_back();
  // The odometer over the outer dims, innermost of them last.
  std::vector<int64_t> index(dims.size(), 0);
  int64_t so = 0, dOff = 0;
  while (true) {
    innerRun(to + dOff * elemSize, from + so * elemSize, inner, elemSize);
    size_t i = dims.size();
    for (; i-- > 0;) {
      so += dims[i].src;
      dOff += dims[i].dst;
      if (++index[i] < dims[i].size)
        break;
      so -= dims[i].src * dims[i].size;
      dOff -= dims[i].dst * dims[i].size;
      index[i] = 0;
    }
    if (i == size_t(-1))
      return;
  }
}
