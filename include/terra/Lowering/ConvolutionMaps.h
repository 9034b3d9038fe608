//===- ConvolutionMaps.h - Indexing maps of the convolution gradients -*- C++ -*-===//
//
// The convolution gradients lower to linalg.generic reductions over
// group-split 5-D operands (TerraToLinalg/Convolution.cpp). The same maps
// let terra-library-convolutions recognise those generics (on tensors,
// before fusion) and hand them to the runtime's convolution entry points: a
// generic is only replaced when its maps are exactly the ones built here
// from the parameters recorded on it, so a changed generic stays loops.
//
//===----------------------------------------------------------------------===//
#ifndef TERRA_LOWERING_CONVOLUTIONMAPS_H
#define TERRA_LOWERING_CONVOLUTIONMAPS_H

#include "mlir/Dialect/Utils/ReshapeOpsUtils.h"
#include "mlir/Dialect/Utils/StructuredOpsUtils.h"
#include "mlir/IR/AffineMap.h"
#include "llvm/ADT/SmallVector.h"

#include <array>

namespace terra {

/// The discardable attribute naming the library routine a generic computes,
/// and the attributes carrying its parameters.
inline constexpr const char *kLibraryAttr = "terra.library";
inline constexpr const char *kLibraryStrideAttr = "terra.stride";
inline constexpr const char *kLibraryDilationAttr = "terra.dilation";

/// The reassociation of a rank-`rank` shape that merges dims `dim` and
/// `dim + 1` (the group and per-group channel dims of grouped convolutions).
inline llvm::SmallVector<mlir::ReassociationIndices>
mergedDimsReassociation(int64_t rank, int64_t dim) {
  llvm::SmallVector<mlir::ReassociationIndices> groups;
  for (int64_t d = 0; d < rank; ++d) {
    if (d == dim + 1)
      continue;
    if (d == dim)
      groups.push_back({d, d + 1});
    else
      groups.push_back({d});
  }
  return groups;
}

struct ConvGradMaps {
  llvm::SmallVector<mlir::AffineMap, 3> maps;
  llvm::SmallVector<mlir::utils::IteratorType, 8> iterators;
};

/// Both gradients: three parallel loops, three reductions, two parallel.
inline llvm::SmallVector<mlir::utils::IteratorType, 8> convGradIterators() {
  using It = mlir::utils::IteratorType;
  return {It::parallel,  It::parallel,  It::parallel, It::reduction,
          It::reduction, It::reduction, It::parallel, It::parallel};
}

/// grad_input: loops (n, g, c | f, i, j | h, w) over
/// Z (N, G, Fg, Hz, Wz), weight (G, Fg, Cg, KH, KW) -> (N, G, Cg, H', W'):
/// out[n,g,c,h,w] += Z[n,g,f,h+(KH-1-i)*dh, w+(KW-1-j)*dw] * w[g,f,c,i,j].
inline ConvGradMaps convGradInputMaps(mlir::MLIRContext *ctx,
                                      std::array<int64_t, 2> kernel,
                                      std::array<int64_t, 2> dilation) {
  auto d = [&](unsigned i) { return mlir::getAffineDimExpr(i, ctx); };
  ConvGradMaps r;
  r.maps.push_back(mlir::AffineMap::get(
      8, 0,
      {d(0), d(1), d(3), d(6) + (kernel[0] - 1) * dilation[0] - d(4) * dilation[0],
       d(7) + (kernel[1] - 1) * dilation[1] - d(5) * dilation[1]},
      ctx));
  r.maps.push_back(
      mlir::AffineMap::get(8, 0, {d(1), d(3), d(2), d(4), d(5)}, ctx));
  r.maps.push_back(
      mlir::AffineMap::get(8, 0, {d(0), d(1), d(2), d(6), d(7)}, ctx));
  r.iterators = convGradIterators();
  return r;
}

/// grad_weight: loops (g, f, c | n, oh, ow | i, j) over
/// x padded (N, G, Cg, Hp, Wp), grad_output (N, G, Fg, OH, OW) ->
/// (G, Fg, Cg, KH, KW):
/// out[g,f,c,i,j] += x[n,g,c,oh*sh+i*dh, ow*sw+j*dw] * go[n,g,f,oh,ow].
inline ConvGradMaps convGradWeightMaps(mlir::MLIRContext *ctx,
                                       std::array<int64_t, 2> stride,
                                       std::array<int64_t, 2> dilation) {
  auto d = [&](unsigned i) { return mlir::getAffineDimExpr(i, ctx); };
  ConvGradMaps r;
  r.maps.push_back(mlir::AffineMap::get(
      8, 0,
      {d(3), d(0), d(2), d(4) * stride[0] + d(6) * dilation[0],
       d(5) * stride[1] + d(7) * dilation[1]},
      ctx));
  r.maps.push_back(
      mlir::AffineMap::get(8, 0, {d(3), d(0), d(1), d(4), d(5)}, ctx));
  r.maps.push_back(
      mlir::AffineMap::get(8, 0, {d(0), d(1), d(2), d(6), d(7)}, ctx));
  r.iterators = convGradIterators();
  return r;
}

} // namespace terra

#endif // TERRA_LOWERING_CONVOLUTIONMAPS_H
