//===- MemrefCopy.cpp - memref.copy between layouts
//------------------------===//
//
// `memref.copy` between layouts the lowering cannot turn into loops becomes
// a call to `memrefCopy`. Upstream's lives in mlir_c_runner_utils, which
// Debian ships linked to libMLIR.so and libLLVM.so: a graph run by
// terra-run-object, or by a build that carries no shared MLIR (the portable
// build of docs/gpu.md), could not resolve it. This is the same ABI: an
// element-wise strided copy, one memcpy when both sides are row-major.
//
//===----------------------------------------------------------------------===//

#include <cstdint>
#include <cstring>
#include <vector>

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
  int64_t n = 1;
  bool rowMajor = true;
  for (int64_t i = rank; i-- > 0;) {
    if (sizes[i] != 1 && (sStrides[i] != n || dStrides[i] != n))
      rowMajor = false;
    n *= sizes[i];
  }
  char *from = s->aligned + s->offset * elemSize;
  char *to = d->aligned + d->offset * elemSize;
  if (n == 0)
    return;
  if (rowMajor) {
    std::memcpy(to, from, size_t(n) * elemSize);
    return;
  }
  std::vector<int64_t> index(rank, 0);
  for (int64_t k = 0; k < n; ++k) {
    int64_t so = 0, dOff = 0;
    for (int64_t i = 0; i < rank; ++i) {
      so += index[i] * sStrides[i];
      dOff += index[i] * dStrides[i];
    }
    std::memcpy(to + dOff * elemSize, from + so * elemSize, elemSize);
    for (int64_t i = rank; i-- > 0;) {
      if (++index[i] < sizes[i])
        break;
      index[i] = 0;
    }
  }
}
