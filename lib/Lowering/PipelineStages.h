//===- PipelineStages.h - Stages shared by the CPU and GPU pipelines -*- C++
//-*-===//
//
// The tensor-level prefix both pipelines run on a lowered graph, split in
// two so the CPU pipeline can put its vectorization rewrites in between.
//
//===----------------------------------------------------------------------===//
#ifndef TERRA_LIB_LOWERING_PIPELINESTAGES_H
#define TERRA_LIB_LOWERING_PIPELINESTAGES_H

#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

#include <memory>

namespace mlir {
class OpPassManager;
class Pass;
} // namespace mlir

namespace terra {

/// The canonicalizer both pipelines run, without upstream's
/// RemoveDuplicateSuccessorInputUses (a RegionBranchOpInterface pattern):
/// on a merged graph with many switch results it was quadratic (SDPoint's
/// ~800-node graph: the first canonicalization 2.9 of 7.4 s of MLIR
/// pipeline, 0.4 s without it); CSE after it merges what it would.
std::unique_ptr<mlir::Pass>
createTerraCanonicalizer(mlir::GreedyRewriteConfig config = {});

/// Canonicalize, linalg elementwise fusion on tensors, CSE.
void addFusionPasses(mlir::OpPassManager &pm);

/// The two bufferization workarounds (switch to if, split empty tensors),
/// then one-shot bufferization with function boundaries and identity
/// layouts.
void addBufferizationPasses(mlir::OpPassManager &pm);

/// Upstream's buffer-deallocation pipeline (ownership-based deallocation,
/// simplification, lowering of the deallocs), except that the final
/// canonicalization, which cleans up the lowered deallocs, walks bottom-up:
/// top-down it took 17 of YOLOv3's 20 s of MLIR pipeline on the ~2.7k scf.if
/// its guarded deallocations make, bottom-up 0.3 s.
/// With `hostFree`, the buffers are freed by the graph runtime's host free
/// (`_mlir_memref_to_llvm_free`, which frees a buffer at most once):
/// deallocs that retain nothing free each buffer on its own
/// (-terra-split-deallocs) instead of through the quadratic alias check.
void addBufferDeallocationPasses(mlir::OpPassManager &pm,
                                 bool hostFree = false);

} // namespace terra

#endif // TERRA_LIB_LOWERING_PIPELINESTAGES_H
